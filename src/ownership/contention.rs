//! Was the GPU ours while it measured? A [`Snapshot`] of the device (the compute processes
//! with a context on it, the clock throttle reasons) is taken before and after each
//! measurement; `classify` says from the two whether the measurement is clean, or
//! disturbed by another process's work (`Classification::Busy`) or by slowed clocks
//! (`Classification::Throttled`). Classification is pure and tested on injected
//! snapshots; reading a snapshot is a thin adapter behind [`Monitor`]: `NvmlMonitor`
//! through NVML (`nvml-wrapper`, which loads libnvidia-ml at run time, as cudarc loads
//! libcuda), or a fake in tests.

use crate::text::Shown;
use std::sync::OnceLock;

/// One compute process with a context on the GPU, as NVML reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuProcess {
    pub(crate) pid: u32,
    /// The process's name, when it can be read.
    pub(crate) name: Option<String>,
}

impl GpuProcess {
    pub fn new(pid: u32, name: Option<&str>) -> GpuProcess {
        GpuProcess {
            pid,
            name: name.map(str::to_string),
        }
    }

    fn label(&self) -> String {
        // The name is the process's own (`/proc/PID/comm`, NVML): shown on one line.
        let name = self.name.as_deref().unwrap_or("?");
        format!("PID {} ({})", self.pid, name.shown())
    }
}

/// The GPU's state at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Compute processes with a context on the device.
    pub processes: Vec<GpuProcess>,
    /// NVML's clock throttle (clock event) reason bits.
    pub throttle_bits: u64,
    /// What could not be read (a query the driver does not support), for a note.
    pub gaps: Vec<String>,
}

/// NVML's clock throttle reason bits (nvml.h, `nvmlClocksThrottleReason*`), with whether
/// each one slows the probe down. Idle, application or display clock settings and sync
/// boost are states of the card, not disturbances of a measurement.
pub(crate) const THROTTLE_REASONS: [(u64, &str, bool); 9] = [
    (0x1, "gpu_idle", false),
    (0x2, "applications_clocks_setting", false),
    (0x4, "sw_power_cap", true),
    (0x8, "hw_slowdown", true),
    (0x10, "sync_boost", false),
    (0x20, "sw_thermal_slowdown", true),
    (0x40, "hw_thermal_slowdown", true),
    (0x80, "hw_power_brake_slowdown", true),
    (0x100, "display_clock_setting", false),
];

/// The reasons among `bits` that slow the probe down, by name.
pub(crate) fn disturbing_reasons(bits: u64) -> Vec<&'static str> {
    THROTTLE_REASONS
        .iter()
        .filter(|(bit, _, disturbs)| *disturbs && bits & bit != 0)
        .map(|(_, name, _)| *name)
        .collect()
}

/// Whose contexts are expected on the GPU: this process's and those of other accprobe
/// processes that wait for it (they hold a context but run nothing while we hold the lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ours {
    pub(crate) pid: u32,
    pub(crate) peers: Vec<u32>,
}

/// What a pair of checks says about the measurement between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Classification {
    Clean,
    /// Other processes had a context on the GPU.
    Busy {
        processes: Vec<GpuProcess>,
        /// NVML reports PIDs of another PID namespace (a container): the processes were
        /// counted, and which of them are ours cannot be told.
        other_namespace: bool,
    },
    /// The clocks were held down for a reason that slows the probe.
    Throttled {
        reasons: Vec<&'static str>,
    },
}

impl Classification {
    pub(crate) fn is_clean(&self) -> bool {
        *self == Classification::Clean
    }

    /// The cause, as the errors of the affected cases start: `GPU busy: PID 1234 (name) ...`
    /// or `GPU throttled: ...`.
    pub(crate) fn message(&self) -> String {
        match self {
            Classification::Clean => "the GPU was ours".into(),
            Classification::Busy {
                processes,
                other_namespace: false,
            } => format!(
                "GPU busy: {} had a context on the GPU while it was measured",
                list(processes)
            ),
            Classification::Busy {
                processes,
                other_namespace: true,
            } => format!(
                "GPU busy: more compute processes on the GPU than accprobe's while it was measured: {} (PIDs as NVML sees them, from another PID namespace)",
                list(processes)
            ),
            Classification::Throttled { reasons } => format!(
                "GPU throttled: clock throttle reason {} active while it was measured",
                reasons.join(", ")
            ),
        }
    }
}

fn list(processes: &[GpuProcess]) -> String {
    processes
        .iter()
        .map(GpuProcess::label)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The processes of `s` that are neither ours nor a waiting accprobe peer's. Where NVML
/// reports PIDs of another namespace (our own PID is not among them although we hold a
/// context), they are counted instead: one context is ours, one each peer's.
fn foreign(s: &Snapshot, ours: &Ours) -> (Vec<GpuProcess>, bool) {
    let own_visible = s.processes.iter().any(|p| p.pid == ours.pid);
    if own_visible || s.processes.is_empty() {
        let f = s
            .processes
            .iter()
            .filter(|p| p.pid != ours.pid && !ours.peers.contains(&p.pid))
            .cloned()
            .collect();
        return (f, false);
    }
    let expected = 1 + ours.peers.len();
    if s.processes.len() > expected {
        (s.processes.clone(), true)
    } else {
        (Vec::new(), false)
    }
}

/// Classifies the measurement between `before` and `after`. Another process's context
/// (before or after) makes it busy; a throttle reason that slows the probe makes it
/// throttled; busy wins when both hold.
pub(crate) fn classify(before: &Snapshot, after: &Snapshot, ours: &Ours) -> Classification {
    let mut processes: Vec<GpuProcess> = Vec::new();
    let mut other_namespace = false;
    for s in [before, after] {
        let (f, other) = foreign(s, ours);
        other_namespace |= other;
        for p in f {
            if !processes.iter().any(|q| q.pid == p.pid) {
                processes.push(p);
            }
        }
    }
    if !processes.is_empty() {
        return Classification::Busy {
            processes,
            other_namespace,
        };
    }
    let mut reasons = disturbing_reasons(before.throttle_bits);
    for r in disturbing_reasons(after.throttle_bits) {
        if !reasons.contains(&r) {
            reasons.push(r);
        }
    }
    if reasons.is_empty() {
        Classification::Clean
    } else {
        Classification::Throttled { reasons }
    }
}

/// Why the GPU's state cannot be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonitorError {
    /// NVML did not load or initialise (what it said).
    #[error("NVML is not available ({0})")]
    NoNvml(String),
    #[error("the device has neither a PCI bus id nor a UUID")]
    Unnamed,
    /// NVML has no device of that PCI bus id or UUID.
    #[error("NVML does not find the device {device}: {why}")]
    NotFound { device: String, why: String },
}

/// Reads the GPU's state.
pub trait Monitor: Send + Sync {
    /// The device now, or why it cannot be read at all (no NVML).
    fn snapshot(&self) -> Result<Snapshot, MonitorError>;
}

/// The device as NVML sees it, found by PCI bus id (or UUID).
pub(crate) struct NvmlMonitor {
    pci_bus_id: Option<String>,
    uuid: Option<String>,
}

impl NvmlMonitor {
    pub(crate) fn new(pci_bus_id: Option<String>, uuid: Option<String>) -> NvmlMonitor {
        NvmlMonitor { pci_bus_id, uuid }
    }
}

/// Loads and initialises NVML on a thread of its own, so that the first contention check
/// does not wait for it (it runs while the CUDA driver starts).
pub(crate) fn start_nvml() {
    std::thread::spawn(|| {
        let ok = nvml().is_ok();
        crate::trace::mark(format!(
            "NVML {}",
            if ok { "ready" } else { "not available" }
        ));
    });
}

/// NVML, initialised once per process at first use, or why it is not there.
fn nvml() -> Result<&'static nvml_wrapper::Nvml, MonitorError> {
    static NVML: OnceLock<Result<nvml_wrapper::Nvml, MonitorError>> = OnceLock::new();
    NVML.get_or_init(|| nvml_wrapper::Nvml::init().map_err(|e| MonitorError::NoNvml(e.to_string())))
        .as_ref()
        .map_err(Clone::clone)
}

impl Monitor for NvmlMonitor {
    fn snapshot(&self) -> Result<Snapshot, MonitorError> {
        let nvml = nvml()?;
        let device = match (&self.pci_bus_id, &self.uuid) {
            (Some(bus), _) => nvml.device_by_pci_bus_id(bus.as_str()),
            (None, Some(uuid)) => nvml.device_by_uuid(uuid.as_str()),
            (None, None) => return Err(MonitorError::Unnamed),
        }
        .map_err(|e| MonitorError::NotFound {
            device: self
                .pci_bus_id
                .as_deref()
                .or(self.uuid.as_deref())
                .unwrap_or("?")
                .to_string(),
            why: e.to_string(),
        })?;
        let mut s = Snapshot::default();
        match device.running_compute_processes() {
            Ok(ps) => {
                s.processes = ps
                    .into_iter()
                    .map(|p| GpuProcess {
                        pid: p.pid,
                        name: nvml
                            .sys_process_name(p.pid, 256)
                            .ok()
                            .filter(|n| !n.is_empty())
                            .or_else(|| process_name(p.pid)),
                    })
                    .collect()
            }
            Err(e) => s.gaps.push(format!("the compute processes ({e})")),
        }
        match device.current_throttle_reasons() {
            Ok(r) => s.throttle_bits = r.bits(),
            Err(e) => s.gaps.push(format!("the clock throttle reasons ({e})")),
        }
        Ok(s)
    }
}

/// `/proc/PID/comm`, where the PID is in our namespace.
fn process_name(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: u64 = 0x1;
    const SW_POWER_CAP: u64 = 0x4;
    const HW_SLOWDOWN: u64 = 0x8;
    const SW_THERMAL: u64 = 0x20;

    fn ours() -> Ours {
        Ours {
            pid: 100,
            peers: vec![200],
        }
    }

    fn snap(pids: &[(u32, &str)], bits: u64) -> Snapshot {
        Snapshot {
            processes: pids
                .iter()
                .map(|&(pid, name)| GpuProcess::new(pid, Some(name)))
                .collect(),
            throttle_bits: bits,
            gaps: Vec::new(),
        }
    }

    #[test]
    fn our_context_and_a_waiting_accprobe_are_clean_idle_is_no_throttle() {
        let s = snap(&[(100, "probe"), (200, "probe")], IDLE);
        assert_eq!(classify(&s, &s, &ours()), Classification::Clean);
        // gVisor-like: NVML lists nothing.
        assert_eq!(
            classify(&Snapshot::default(), &Snapshot::default(), &ours()),
            Classification::Clean
        );
    }

    #[test]
    fn a_foreign_process_before_or_after_makes_the_measurement_busy() {
        let clean = snap(&[(100, "probe")], IDLE);
        let busy = snap(&[(100, "probe"), (1234, "python3")], 0);
        for (b, a) in [(&busy, &clean), (&clean, &busy), (&busy, &busy)] {
            let c = classify(b, a, &ours());
            assert_eq!(
                c,
                Classification::Busy {
                    processes: vec![GpuProcess::new(1234, Some("python3"))],
                    other_namespace: false
                }
            );
            assert!(
                c.message().starts_with("GPU busy: PID 1234 (python3)"),
                "{}",
                c.message()
            );
        }
    }

    #[test]
    fn busy_wins_over_throttled_and_names_every_process_once() {
        let b = snap(&[(100, "p"), (7, "a")], SW_THERMAL);
        let a = snap(&[(100, "p"), (7, "a"), (8, "b")], 0);
        let c = classify(&b, &a, &ours());
        assert_eq!(
            c.message(),
            "GPU busy: PID 7 (a), PID 8 (b) had a context on the GPU while it was measured"
        );
    }

    #[test]
    fn throttle_reasons_that_slow_the_probe_are_throttled_others_are_not() {
        let clean = snap(&[(100, "p")], 0);
        let hot = snap(&[(100, "p")], SW_THERMAL | HW_SLOWDOWN | IDLE);
        let c = classify(&clean, &hot, &ours());
        assert_eq!(
            c,
            Classification::Throttled {
                reasons: vec!["hw_slowdown", "sw_thermal_slowdown"]
            }
        );
        assert!(
            c.message().starts_with("GPU throttled: "),
            "{}",
            c.message()
        );
        let capped = snap(&[(100, "p")], SW_POWER_CAP);
        assert_eq!(
            classify(&capped, &clean, &ours()),
            Classification::Throttled {
                reasons: vec!["sw_power_cap"]
            }
        );
        // Application clocks, sync boost, display clocks, idle: states, not disturbances.
        let states = snap(&[(100, "p")], 0x1 | 0x2 | 0x10 | 0x100);
        assert!(classify(&states, &states, &ours()).is_clean());
    }

    #[test]
    fn pids_of_another_namespace_are_counted_against_ours_and_the_peers() {
        // In a container NVML reports host PIDs: ours (100) is not among them.
        let two = snap(&[(90_001, "?"), (90_002, "?")], 0);
        // Ours and the one waiting peer's: clean.
        assert!(classify(&two, &two, &ours()).is_clean());
        let three = snap(&[(90_001, "?"), (90_002, "?"), (90_003, "?")], 0);
        let c = classify(&two, &three, &ours());
        assert!(
            matches!(&c, Classification::Busy { processes, other_namespace: true } if processes.len() == 3),
            "{c:?}"
        );
        assert!(
            c.message().contains("another PID namespace"),
            "{}",
            c.message()
        );
        // Without peers, a second context is one too many.
        let alone = Ours {
            pid: 100,
            peers: vec![],
        };
        assert!(!classify(&two, &two, &alone).is_clean());
    }

    #[test]
    fn reasons_are_named_in_nvml_bit_order() {
        assert_eq!(
            disturbing_reasons(0xFFFF),
            vec![
                "sw_power_cap",
                "hw_slowdown",
                "sw_thermal_slowdown",
                "hw_thermal_slowdown",
                "hw_power_brake_slowdown"
            ]
        );
        assert!(disturbing_reasons(0).is_empty());
    }
}
