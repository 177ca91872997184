//! The measuring service: one GPU session per device. It holds the target (or why there is
//! none) and the profile chosen for it, and measures each variant at most once, at first
//! use, under the device's lock, so its GPU is used by one caller at a time. The libtest
//! harness and `cargo xtask` both measure through it.
//!
//! It also keeps the GPU to itself across processes (its [`Exclusivity`]): before its first
//! measurement it takes the device's cross-process lock ([`crate::ownership::lock`]) and
//! keeps it while the session lives; around each measurement it checks the GPU for other
//! processes' work and slowed clocks ([`crate::ownership::contention`]), measures again
//! (after a wait) while they disturb it, and marks what stays disturbed in the results'
//! `contention`, whose timing cases then become errors of the run, never regressions.

mod checked;

use crate::compile;
use crate::error::GpuError;
use crate::expectations::profile::Profile;
use crate::measure::exclusivity::note_once;
pub use crate::measure::exclusivity::{Exclusivity, RETRIES_ENV, WAIT_ENV};
use crate::measure::target::Target;
use crate::model::ceilings::Ceilings;
use crate::model::results::{Contention, RunResults, Timings, VariantResult, SCHEMA};
use crate::model::settings::{Mode, ProbeSettings};
use crate::model::variant::Variant;
use crate::ownership::lock::{self, DeviceLock, LockError, Registration, Waiting};
use crate::sync::lock_ignoring_poison;
use crate::text::Shown;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

/// The GPU side of one run on one device: a target (or the reason there is none), the
/// profile chosen for it, and each variant measured at first use.
pub struct GpuSession {
    /// The hand-written profile as loaded: never changed by the run.
    pub profile: Profile,
    /// The settings this run measures with: the profile's `probe`, with what the run asked
    /// for over it (the mode: `ACCPROBE_MODE`, `--mode`, [`GpuSession::in_mode`]).
    pub(crate) settings: ProbeSettings,
    pub(crate) selection_note: String,
    /// What to run when no profile matches the device (the documented profile applies):
    /// the closing summary and every failing case say it.
    pub(crate) onboarding: Option<String>,
    target: Result<Arc<dyn Target>, GpuError>,
    measured: Mutex<BTreeMap<Variant, Result<VariantResult, GpuError>>>,
    /// The variants the cases that will run need (after libtest's filters).
    planned: Mutex<Vec<Variant>>,
    /// Seconds spent measuring so far.
    gpu_seconds: Mutex<f64>,
    /// When the first call that measured began (its compile and measurement, after the
    /// wait for this session), and how long every call that measured took together: the
    /// work the cases share, which the run reports as one case of its own.
    shared_work: Mutex<Option<(SystemTime, Duration)>>,
    /// Set when a CUDA error left the device unusable: why.
    unusable: OnceLock<String>,
    /// Whether case names carry the device (more than one device in the run).
    prefix: bool,
    exclusivity: Exclusivity,
    /// The device's lock once taken (`None`: none could be made; measured without), or
    /// why it could not be had.
    held: Mutex<Option<Arc<DeviceLock>>>,
    /// Why the lock could not be had (another process held it past the limit, or the
    /// settings are wrong): every later measurement fails at once with it.
    lock_failed: OnceLock<GpuError>,
    /// Why the matrix could not be compiled or loaded: every later measurement fails at
    /// once with it, without waiting for the lock again.
    prepare_failed: OnceLock<GpuError>,
    /// This process's registration as a user of the device, while the session lives.
    _registration: Option<Arc<Registration>>,
    contention: Mutex<Contention>,
}

impl GpuSession {
    /// A session for `profile` on `target` (or the reason there is none). Nothing happens
    /// on the GPU until results are asked for.
    pub fn new(
        profile: Profile,
        selection_note: String,
        target: Result<Arc<dyn Target>, GpuError>,
    ) -> GpuSession {
        let exclusivity = Exclusivity::for_target(&target);
        GpuSession::with_exclusivity(profile, selection_note, target, exclusivity)
    }

    /// A session with the given exclusivity (tests inject a lock directory and a monitor). It
    /// registers this process as a user of the device at once, so that a process holding
    /// the GPU tells our idle context from other work while we wait (a real device was
    /// registered when it was opened, before its context: this shares that registration).
    pub fn with_exclusivity(
        profile: Profile,
        selection_note: String,
        target: Result<Arc<dyn Target>, GpuError>,
        exclusivity: Exclusivity,
    ) -> GpuSession {
        let registration = match &exclusivity.lock {
            // A directory the user named that cannot be used is refused when the lock
            // is taken: nothing to note here.
            Some((key, Ok(settings))) => key.stem().and_then(|stem| {
                lock::register(&settings.dir, &stem)
                    .map_err(|e| {
                        if !settings.named {
                            note_once(&format!(
                                "{e}: other accprobe processes may count as work on the GPU"
                            ))
                        }
                    })
                    .ok()
            }),
            _ => None,
        };
        GpuSession {
            settings: profile.probe.clone(),
            profile,
            selection_note,
            onboarding: None,
            target,
            measured: Mutex::new(BTreeMap::new()),
            planned: Mutex::new(Vec::new()),
            gpu_seconds: Mutex::new(0.0),
            shared_work: Mutex::new(None),
            unusable: OnceLock::new(),
            prefix: false,
            exclusivity,
            held: Mutex::new(None),
            lock_failed: OnceLock::new(),
            prepare_failed: OnceLock::new(),
            _registration: registration,
            contention: Mutex::new(Contention::default()),
        }
    }

    /// This session, its case names carrying the device when `several` devices are in the
    /// run ([`GpuSession::named_ordinal`]).
    pub(crate) fn naming_the_device(mut self, several: bool) -> GpuSession {
        self.prefix = several;
        self
    }

    /// This session measuring in `mode` when the run asked for one, in the profile's
    /// `probe.mode` otherwise; the profile itself stays as it was written.
    pub fn in_mode(mut self, mode: Option<Mode>) -> GpuSession {
        self.settings.mode = mode.unwrap_or(self.profile.probe.mode);
        self
    }

    /// The mode this run measures in (`GpuSession::settings`).
    pub fn mode(&self) -> Mode {
        self.settings.mode
    }

    /// This session, saying `hint` (what to run to onboard its GPU) in the closing
    /// summary and in every failing case.
    pub(crate) fn onboarding(mut self, hint: Option<String>) -> GpuSession {
        self.onboarding = hint;
        self
    }

    /// Plans `variants`: those the cases that will run need, measured in one go (a wave)
    /// and the device's lock held until all are measured.
    pub fn plan(&self, variants: Vec<Variant>) {
        *lock_ignoring_poison(&self.planned) = variants;
    }

    /// The variants planned ([`GpuSession::plan`]).
    pub(crate) fn planned(&self) -> Vec<Variant> {
        lock_ignoring_poison(&self.planned).clone()
    }

    /// What the contention checks saw so far, when the session makes them; else what the
    /// target carries from the process that measured (a shared nextest measurement).
    pub(crate) fn contention(&self) -> Option<Contention> {
        if self.exclusivity.active() {
            Some(lock_ignoring_poison(&self.contention).clone())
        } else {
            self.target.as_ref().ok()?.contention()
        }
    }

    /// Takes the device's lock (when not held already) for a measurement; it is kept
    /// until everything planned is measured ([`GpuSession::release_when_done`]), so that
    /// a process never holds one GPU's lock while it waits for another's (two processes
    /// locking two GPUs in opposite orders would wait on each other). `Err` when another
    /// process held it past the time limit (then at once for every later call) or the
    /// settings are wrong.
    fn take_lock(&self) -> Result<(), GpuError> {
        let Some((key, settings)) = &self.exclusivity.lock else {
            return Ok(());
        };
        if let Some(e) = self.lock_failed.get() {
            return Err(e.clone());
        }
        let mut held = lock_ignoring_poison(&self.held);
        if held.is_some() {
            return Ok(());
        }
        let fail = |e: GpuError| Err(self.lock_failed.get_or_init(|| e).clone());
        let settings = match settings {
            Ok(s) => s,
            Err(e) => return fail(GpuError::from(e.clone())),
        };
        let Some(stem) = key.stem() else {
            return Ok(());
        };
        let label = key.label();
        let limit = settings.timeout.as_secs_f64();
        let tell = |w: Waiting| match w {
            Waiting::Held { holder, waited } if waited.is_zero() => crate::say_err!(
                "accprobe: waiting for {label}: {}; giving up after {limit:.0} s ({})",
                holder.describe(),
                lock::LOCK_TIMEOUT_ENV
            ),
            Waiting::Held { holder, waited } => crate::say_err!(
                "accprobe: still waiting for {label} after {:.0} s: {}",
                waited.as_secs_f64(),
                holder.describe()
            ),
            Waiting::Acquired { waited } => crate::say_err!(
                "accprobe: {label} is ours after waiting {:.1} s",
                waited.as_secs_f64()
            ),
        };
        match lock::acquire_shared(
            &settings.dir,
            &stem,
            settings.timeout,
            Duration::from_millis(200),
            tell,
        ) {
            Ok(l) => {
                lock_ignoring_poison(&self.contention)
                    .lock_wait_s += l.waited.as_secs_f64();
                *held = Some(l);
                Ok(())
            }
            Err(LockError::Timeout { holder, waited }) => fail(GpuError::Busy(format!(
                "GPU busy: {label} is {} and was not released within {:.1} s ({}={limit}); not measured",
                holder.describe(),
                waited.as_secs_f64(),
                lock::LOCK_TIMEOUT_ENV
            ))),
            Err(LockError::Io(e)) => {
                if let Some(refusal) = settings.refusal(&e) {
                    return fail(crate::config::ConfigError::from(refusal).into());
                }
                note_once(&format!(
                    "{e}: measuring {label} without the cross-process lock (set {} to a shared, writable directory)",
                    lock::LOCK_DIR_ENV
                ));
                Ok(())
            }
        }
    }

    /// Lets the device's lock go once every planned variant is measured (with nothing
    /// planned: after each measurement).
    fn release_when_done(&self, measured: &BTreeMap<Variant, Result<VariantResult, GpuError>>) {
        let planned = lock_ignoring_poison(&self.planned);
        if planned.iter().all(|v| measured.contains_key(v)) {
            *lock_ignoring_poison(&self.held) = None;
        }
    }

    /// Whether this session holds its device's lock now.
    pub fn holds_lock(&self) -> bool {
        lock_ignoring_poison(&self.held).is_some()
    }

    /// Measures every variant of the profile (in its mode) and returns the whole run, with
    /// environment and timings.
    pub fn measure_all(&self) -> Result<RunResults, GpuError> {
        let all = self.profile.probe.variants();
        *lock_ignoring_poison(&self.planned) = all.clone();
        self.results_for(&all)?;
        self.measured_results()
            .ok_or_else(|| GpuError::Variant("nothing was measured".into()))
    }

    /// Measures the device's physical ceilings (`measure::ceilings`) under its lock, one
    /// measurement at a time as every other of this session.
    pub fn measure_ceilings(&self) -> Result<Ceilings, GpuError> {
        let target = self.target.as_ref().map_err(Clone::clone)?;
        let measured = lock_ignoring_poison(&self.measured);
        self.take_lock()?;
        let ceilings = target.ceilings();
        self.release_when_done(&measured);
        ceilings
    }

    /// The target, or why there is none.
    pub fn target(&self) -> Result<&Arc<dyn Target>, &GpuError> {
        self.target.as_ref()
    }

    pub(crate) fn device_label(&self) -> String {
        match &self.target {
            Ok(t) => format!("gpu{} {}", t.ordinal(), t.identity().name.shown()),
            Err(_) => "no gpu".to_string(),
        }
    }

    /// The device's ordinal when case names carry it (several devices in the run).
    pub(crate) fn named_ordinal(&self) -> Option<usize> {
        match (&self.target, self.prefix) {
            (Ok(t), true) => Some(t.ordinal()),
            _ => None,
        }
    }

    /// Results for `needs`, measuring what has not been measured yet. Holds this device's
    /// lock for the whole time, so its GPU work is one case at a time; other devices run
    /// in parallel.
    pub fn results_for(&self, needs: &[Variant]) -> Result<RunResults, GpuError> {
        let target = self.target.as_ref().map_err(Clone::clone)?;
        let mut measured = lock_ignoring_poison(&self.measured);
        let began = (SystemTime::now(), Instant::now());
        if let Some(cause) = self.unusable.get() {
            return Err(GpuError::Unusable(cause.clone()));
        }
        if let Some(e) = self.prepare_failed.get() {
            return Err(e.clone());
        }
        let all = self.profile.probe.variants();
        let missing: Vec<Variant> = needs
            .iter()
            .copied()
            .filter(|v| !measured.contains_key(v))
            .collect();
        if !missing.is_empty() {
            // Waiting for another process is not GPU time. Taken before the CUBIN is
            // loaded: loading it is work on the GPU, which time-slices it with the holder's
            // kernels and slows what the holder measures (docs/reliability.md, "Two suites
            // on one GPU").
            self.take_lock()?;
            crate::trace::mark(format!("{}: device lock taken", self.device_label()));
        }
        if let Err(e) = target.prepare(&all) {
            // Nothing will be measured: let another process have the GPU.
            if !missing.is_empty() {
                *lock_ignoring_poison(&self.held) = None;
            }
            return Err(self.prepare_failed.get_or_init(|| e).clone());
        }
        if !missing.is_empty() {
            // In wave mode, one wave for everything this run will need (the planned set),
            // so that later cases find their variants measured.
            let mut batch = missing;
            if self.settings.mode == Mode::Wave {
                let planned = lock_ignoring_poison(&self.planned).clone();
                batch.extend(planned.into_iter().filter(|v| !measured.contains_key(v)));
                batch.sort();
                batch.dedup();
            }
            match self.measure_checked(target, &batch, &all) {
                Ok(rs) => {
                    for (v, r) in batch.iter().zip(rs) {
                        measured.insert(*v, r);
                    }
                    self.release_when_done(&measured);
                    let mut work = lock_ignoring_poison(&self.shared_work);
                    let (start, total) = work.unwrap_or((began.0, Duration::ZERO));
                    *work = Some((start, total + began.1.elapsed()));
                }
                Err(e) => return Err(e),
            }
        }
        let mut variants = Vec::new();
        let mut broken = Vec::new();
        for &v in needs {
            match &measured[&v] {
                Ok(r) => variants.push(r.clone()),
                Err(e) => broken.push(format!("{v}: {e}")),
            }
        }
        if !broken.is_empty() {
            // A sticky error (an illegal address, say) leaves the context unusable: the
            // cases after this one then fail with this cause instead of running.
            if let Err(e) = target.healthy() {
                let _ = self.unusable.set(format!("{}: {e}", broken.join("; ")));
            }
            return Err(GpuError::Variant(broken.join("; ")));
        }
        Ok(self.results_of(target.as_ref(), variants, None))
    }

    /// The results file of `variants`, measured on `target` in this session; `clock`: the
    /// SM clock the environment records (`None`: as the device says it now).
    fn results_of(
        &self,
        target: &dyn Target,
        variants: Vec<VariantResult>,
        clock: Option<f64>,
    ) -> RunResults {
        RunResults {
            schema: SCHEMA,
            mode: self.settings.mode,
            settings: Some(self.settings.run_settings()),
            profile: self.profile.name.clone(),
            source: "measured".into(),
            environment: Some(target.environment(clock)),
            variants,
            sass_unavailable: target.sass_unavailable(),
            sass_unreadable: target.compiled().and_then(sass_unreadable),
            timings: self.timings(),
            contention: self.contention(),
        }
    }

    fn timings(&self) -> Option<Timings> {
        let c = self.target.as_ref().ok()?.compile_info()?;
        Some(Timings {
            compile_s: c.seconds,
            nvrtc_s: c.nvrtc_seconds,
            sass_s: c.sass_seconds,
            compile_cache: c.cache,
            gpu_s: *lock_ignoring_poison(&self.gpu_seconds),
        })
    }

    /// The compile and measurement work the cases shared: when it began and how long it
    /// took; `None` when nothing was measured in this process.
    pub(crate) fn shared_work(&self) -> Option<(SystemTime, Duration)> {
        *lock_ignoring_poison(&self.shared_work)
    }

    /// Everything measured so far, with the environment, or `None` when nothing was.
    pub(crate) fn measured_results(&self) -> Option<RunResults> {
        let target = self.target.as_ref().ok()?;
        let measured = lock_ignoring_poison(&self.measured);
        let variants: Vec<VariantResult> = self
            .profile
            .probe
            .variants()
            .iter()
            .filter_map(|v| measured.get(v).and_then(|r| r.as_ref().ok()).cloned())
            .collect();
        if variants.is_empty() {
            return None;
        }
        let clock = measured_clock(&variants);
        Some(self.results_of(target.as_ref(), variants, clock))
    }

    /// The compiled matrix (CUBIN and ptxas log), when it was compiled.
    pub(crate) fn compiled(&self) -> Option<&compile::Compiled> {
        self.target.as_ref().ok()?.compiled()
    }
}

/// Why the disassembly of `c` could not be read, when the disassembler ran but its output
/// could not be summarised.
fn sass_unreadable(c: &compile::Compiled) -> Option<String> {
    match &c.sass {
        compile::Sass::Failed(reason) => Some(reason.clone()),
        _ => None,
    }
}

/// The SM clock the run saw: the median of its variants' measured clocks.
fn measured_clock(variants: &[VariantResult]) -> Option<f64> {
    crate::model::median::median(variants.iter().filter_map(|r| r.sm_clock_mhz))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_run_s_clock_is_the_median_of_its_variants_clocks() {
        let variant = |mhz| {
            let v = crate::model::variant::Variant::new(7, 2);
            let mut r = crate::model::results::VariantResult::recorded(v, 1.0, None);
            r.sm_clock_mhz = mhz;
            r
        };
        // An even count takes the mean of the middle pair, as every median does.
        let two = [variant(Some(1000.0)), variant(None), variant(Some(2000.0))];
        assert_eq!(super::measured_clock(&two), Some(1500.0));
        assert_eq!(super::measured_clock(&[variant(None)]), None);
    }
}
