//! How a measuring session keeps its GPU to itself: the device's cross-process lock and the
//! checks for other processes' work around each measurement, with their settings from the
//! environment.

use crate::error::GpuError;
use crate::measure::contention::{Monitor, NvmlMonitor};
use crate::measure::lock::{DeviceKey, LockSettings};
use crate::measure::target::Target;
use crate::sync::lock_ignoring_poison;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many times a disturbed measurement is made again (default 2).
pub const RETRIES_ENV: &str = "ACCPROBE_CONTENTION_RETRIES";
/// Seconds to wait before measuring again after a disturbed measurement (default 10).
pub const WAIT_ENV: &str = "ACCPROBE_CONTENTION_WAIT";

/// How a session keeps its GPU to itself: the device's cross-process lock and the checks
/// for other work around each measurement.
pub struct Guard {
    /// The device (its key has a file stem) and where and how long to wait for its lock;
    /// `None`: no lock (a replay). `Err`: the settings are wrong (told at first use).
    pub lock: Option<(DeviceKey, Result<LockSettings, String>)>,
    /// What reads the GPU's state; `None`: no checks (a replay).
    pub monitor: Option<Arc<dyn Monitor>>,
    /// A disturbed measurement is made again at most this many times...
    pub retries: u32,
    /// ...each after this wait.
    pub wait: Duration,
}

impl Guard {
    /// No lock, no checks.
    pub fn none() -> Guard {
        Guard {
            lock: None,
            monitor: None,
            retries: 0,
            wait: Duration::ZERO,
        }
    }

    /// The guard for a target: a lock and NVML checks for a real device (one with a
    /// [`DeviceKey`]), none for a replay; settings from the environment.
    pub fn for_target(target: &Result<Arc<dyn Target>, GpuError>) -> Guard {
        let Some(key) = target.as_ref().ok().and_then(|t| t.device_key()) else {
            return Guard::none();
        };
        let (retries, wait) = contention_settings();
        Guard {
            monitor: Some(Arc::new(NvmlMonitor::new(
                key.pci_bus_id.clone(),
                key.uuid.clone(),
            ))),
            lock: key
                .stem()
                .is_some()
                .then(|| (key, LockSettings::from_env())),
            retries,
            wait,
        }
    }

    pub(crate) fn active(&self) -> bool {
        self.lock.is_some() || self.monitor.is_some()
    }
}

/// `ACCPROBE_CONTENTION_RETRIES` and `ACCPROBE_CONTENTION_WAIT`, with their defaults for
/// what is unset, not UTF-8 or not a number (said on stderr).
fn contention_settings() -> (u32, Duration) {
    let read = |name: &str| -> Option<f64> {
        let text = match crate::input::env_text(name) {
            Ok(text) => text?,
            Err(e) => {
                eprintln!("accprobe: {e}; using the default");
                return None;
            }
        };
        match text.trim().parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Some(x),
            _ => {
                eprintln!(
                    "accprobe: {name}={text:?} is not a number of 0 or more; using the default"
                );
                None
            }
        }
    };
    (
        read(RETRIES_ENV).map_or(2, |x| x.min(100.0) as u32),
        Duration::from_secs_f64(read(WAIT_ENV).unwrap_or(10.0).min(3600.0)),
    )
}

/// Says once per process what the checks cannot see.
pub(crate) fn note_once(text: &str) {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut said = lock_ignoring_poison(&SAID);
    if !said.iter().any(|s| s == text) {
        eprintln!("accprobe: {text}");
        said.push(text.to_string());
    }
}
