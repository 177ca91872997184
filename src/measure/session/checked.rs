//! The contention checks around one measurement: the GPU's state before and after it, who
//! counts as ours, and the retries while other work or slowed clocks disturb it.

use super::GpuSession;
use crate::error::GpuError;
use crate::measure::exclusivity::note_once;
use crate::measure::target::Target;
use crate::model::results::VariantResult;
use crate::model::variant::Variant;
use crate::ownership::contention::{classify, Classification, Monitor, Ours, Snapshot};
use crate::ownership::lock;
use crate::sync::lock_ignoring_poison;
use std::sync::Arc;
use std::time::Instant;

impl GpuSession {
    /// The GPU's state now, or `None` when it cannot be read (said once).
    fn check(&self, monitor: &dyn Monitor) -> Option<Snapshot> {
        match monitor.snapshot() {
            Ok(s) => {
                for gap in &s.gaps {
                    note_once(&format!("NVML cannot read {gap}: not checked"));
                }
                lock_ignoring_poison(&self.contention).checks += 1;
                Some(s)
            }
            Err(why) => {
                note_once(&format!(
                    "{why}: other processes' work and clock throttling on the GPU are not checked"
                ));
                lock_ignoring_poison(&self.contention).unchecked = Some(why.to_string());
                None
            }
        }
    }

    /// Who may have a context on the GPU besides other programs: this process and the
    /// other accprobe processes registered for the device (they wait for its lock).
    fn ours(&self) -> Ours {
        let peers = match &self.exclusivity.lock {
            Some((key, Ok(settings))) => key
                .stem()
                .map(|stem| lock::peers(&settings.dir, &stem))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        Ours {
            pid: std::process::id(),
            peers,
        }
    }

    /// Classifies a measurement between `before` and `after`; `peers_before`: the accprobe
    /// processes registered when `before` was taken. A peer that ended while we measured
    /// is still ours: its registration goes before its context does, and an ending
    /// process's context stays listed a moment after it.
    fn classify_pair(
        &self,
        before: Option<&Snapshot>,
        after: Option<&Snapshot>,
        peers_before: &[u32],
    ) -> Classification {
        let mut ours = self.ours();
        for &p in peers_before {
            if !ours.peers.contains(&p) {
                ours.peers.push(p);
            }
        }
        let c = match (before, after) {
            (Some(b), Some(a)) => classify(b, a, &ours),
            (Some(x), None) | (None, Some(x)) => classify(x, x, &ours),
            (None, None) => Classification::Clean,
        };
        let mut rec = lock_ignoring_poison(&self.contention);
        match &c {
            Classification::Clean => {}
            Classification::Busy { processes, .. } => {
                for p in processes {
                    if !rec.foreign_pids.contains(&p.pid) {
                        rec.foreign_pids.push(p.pid);
                    }
                }
            }
            Classification::Throttled { reasons } => {
                for r in reasons {
                    if !rec.throttle_reasons.iter().any(|x| x == r) {
                        rec.throttle_reasons.push(r.to_string());
                    }
                }
            }
        }
        c
    }

    /// `target.measure`, its time added to the GPU seconds (which leave out the lock, the
    /// contention checks and the waits between attempts).
    fn timed_measure(
        &self,
        target: &Arc<dyn Target>,
        batch: &[Variant],
        all: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        let start = Instant::now();
        let rs = target.measure(batch, &self.settings, all);
        *lock_ignoring_poison(&self.gpu_seconds) += start.elapsed().as_secs_f64();
        rs
    }

    /// Measures `batch` with the checks around it: while a check finds other work on the
    /// GPU or slowed clocks, waits and measures again (at most `retries` times; a
    /// disturbance already seen before measuring postpones the measurement instead);
    /// what stays disturbed is marked in the contention record with the cause.
    pub(super) fn measure_checked(
        &self,
        target: &Arc<dyn Target>,
        batch: &[Variant],
        all: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        let Some(monitor) = self.exclusivity.monitor.clone() else {
            return self.timed_measure(target, batch, all);
        };
        let retries = self.exclusivity.retries;
        let mut attempt = 0;
        loop {
            let last = attempt >= retries;
            // Read before the snapshot: a peer listed in it was registered then.
            let peers_before = self.ours().peers;
            let before = self.check(monitor.as_ref());
            let early = self.classify_pair(before.as_ref(), None, &peers_before);
            let outcome = if !early.is_clean() && !last {
                None
            } else {
                crate::trace::mark(format!("{}: checked, measuring", self.device_label()));
                let rs = self.timed_measure(target, batch, all)?;
                crate::trace::mark(format!(
                    "{}: {} variant(s) measured",
                    self.device_label(),
                    batch.len()
                ));
                let after = self.check(monitor.as_ref());
                crate::trace::mark(format!("{}: checked again", self.device_label()));
                Some((
                    rs,
                    self.classify_pair(before.as_ref(), after.as_ref(), &peers_before),
                ))
            };
            match outcome {
                Some((rs, c)) if c.is_clean() => return Ok(rs),
                Some((rs, c)) if last => {
                    let cause = if retries == 0 {
                        format!("{}; the timing is not judged", c.message())
                    } else {
                        format!(
                            "{}; still so after {retries} more attempt(s) {:.0} s apart: the timing is not judged",
                            c.message(),
                            self.exclusivity.wait.as_secs_f64()
                        )
                    };
                    crate::say_err!("accprobe: {}: {cause}", self.device_label());
                    let mut rec = lock_ignoring_poison(&self.contention);
                    for v in batch {
                        rec.contaminated.insert(v.name(), cause.clone());
                    }
                    return Ok(rs);
                }
                other => {
                    let c = other.map_or(early, |(_, c)| c);
                    attempt += 1;
                    lock_ignoring_poison(&self.contention).retries += 1;
                    crate::say_err!(
                        "accprobe: {}: {}; measuring again in {:.0} s (attempt {} of {})",
                        self.device_label(),
                        c.message(),
                        self.exclusivity.wait.as_secs_f64(),
                        attempt + 1,
                        retries + 1
                    );
                    std::thread::sleep(self.exclusivity.wait);
                }
            }
        }
    }
}
