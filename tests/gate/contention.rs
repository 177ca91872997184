//! A shared GPU is not a regression: the measuring session's guard on recorded devices,
//! with injected GPU snapshots (what NVML would report) and a real lock directory. A
//! measurement disturbed by another process's work or slowed clocks is measured again, and
//! what stays disturbed makes its timing cases errors ("GPU busy: ..."), never failures;
//! a GPU another process holds is waited for, up to a limit, then the cases are errors.

use accprobe::error::GpuError;
use accprobe::expectations::profile::Profile;
use accprobe::measure::session::{Exclusivity, GpuSession};
use accprobe::measure::target::{RecordedTarget, Target};
use accprobe::model::gpu::{Environment, GpuIdentity};
use accprobe::model::results::{RunResults, VariantResult};
use accprobe::model::settings::ProbeSettings;
use accprobe::model::variant::Variant;
use accprobe::ownership::contention::{GpuProcess, Monitor, MonitorError, Snapshot};
use accprobe::ownership::lock::{DeviceKey, LockSettings};
use accprobe::verdict::cases::cases;
use accprobe::verdict::{evaluate, Outcome};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(super) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The H200 run the profile replays (and its baselines come from).
pub(super) fn recorded() -> RunResults {
    profile()
        .recorded
        .expect("the h200 profile replays a recorded run")
}

/// The H200 profile, measured one variant at a time (these tests count measurements).
pub(super) fn profile() -> Profile {
    let mut p = accprobe::catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    p.probe.mode = accprobe::model::settings::Mode::Serial;
    p
}

pub(super) fn key() -> DeviceKey {
    DeviceKey {
        ordinal: 0,
        pci_bus_id: Some("0000:19:00.0".into()),
        uuid: None,
    }
}

/// A recorded device that counts its measurements and has a device key, as a real one.
pub(super) struct Keyed {
    inner: RecordedTarget,
    pub(super) measured: AtomicUsize,
    pub(super) prepared: AtomicUsize,
    /// When set, loading the matrix fails (a compile error, say).
    pub(super) broken: std::sync::atomic::AtomicBool,
}

impl Keyed {
    pub(super) fn new() -> Arc<Keyed> {
        Arc::new(Keyed {
            inner: RecordedTarget::new(0, recorded()).unwrap(),
            measured: AtomicUsize::new(0),
            prepared: AtomicUsize::new(0),
            broken: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl Target for Keyed {
    fn ordinal(&self) -> usize {
        0
    }
    fn identity(&self) -> &GpuIdentity {
        self.inner.identity()
    }
    fn prepare(&self, all: &[Variant]) -> Result<(), GpuError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        if self.broken.load(Ordering::SeqCst) {
            return Err(GpuError::Compile(
                "kernels/probe.cu(1): error: broken".into(),
            ));
        }
        self.inner.prepare(all)
    }
    fn measure(
        &self,
        variants: &[Variant],
        settings: &ProbeSettings,
        all: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        self.measured.fetch_add(1, Ordering::SeqCst);
        self.inner.measure(variants, settings, all)
    }
    fn environment(&self, c: Option<f64>) -> Environment {
        self.inner.environment(c)
    }
    fn device_key(&self) -> Option<DeviceKey> {
        Some(key())
    }
    fn predates(&self, v: Variant) -> bool {
        self.inner.predates(v)
    }
}

/// Plays back snapshots in order, repeating the last one.
pub(super) struct Script(Mutex<Vec<Snapshot>>);

impl Script {
    pub(super) fn new(snaps: Vec<Snapshot>) -> Arc<Script> {
        Arc::new(Script(Mutex::new(snaps)))
    }
}

impl Monitor for Script {
    fn snapshot(&self) -> Result<Snapshot, MonitorError> {
        let mut s = self.0.lock().unwrap();
        Ok(if s.len() > 1 {
            s.remove(0)
        } else {
            s[0].clone()
        })
    }
}

pub(super) struct NoNvml;

impl Monitor for NoNvml {
    fn snapshot(&self) -> Result<Snapshot, MonitorError> {
        Err(MonitorError::NoNvml("libnvidia-ml.so: not found".into()))
    }
}

pub(super) fn own() -> GpuProcess {
    GpuProcess::new(std::process::id(), Some("probe"))
}

pub(super) fn clean() -> Snapshot {
    Snapshot {
        processes: vec![own()],
        throttle_bits: 0x1,
        gaps: vec![],
    }
}

pub(super) fn busy() -> Snapshot {
    Snapshot {
        processes: vec![own(), GpuProcess::new(4242, Some("python3"))],
        ..Snapshot::default()
    }
}

pub(super) fn hot() -> Snapshot {
    Snapshot {
        throttle_bits: 0x20,
        ..clean()
    }
}

pub(super) fn session(
    target: &Arc<Keyed>,
    dir: &Path,
    monitor: Arc<dyn Monitor>,
    retries: u32,
) -> GpuSession {
    let settings = LockSettings {
        dir: dir.to_path_buf(),
        timeout: Duration::from_millis(300),
        named: true,
    };
    session_locking_in(target, settings, monitor, retries)
}

pub(super) fn session_locking_in(
    target: &Arc<Keyed>,
    settings: LockSettings,
    monitor: Arc<dyn Monitor>,
    retries: u32,
) -> GpuSession {
    let t: Arc<dyn Target> = target.clone();
    GpuSession::with_exclusivity(
        profile(),
        "test".into(),
        Ok(t),
        Exclusivity {
            lock: Some((key(), Ok(settings))),
            monitor: Some(monitor),
            retries,
            wait: Duration::ZERO,
        },
    )
}

pub(super) fn verdict(p: &Profile, r: &RunResults, name: &str) -> Outcome {
    let c = cases(p).into_iter().find(|c| c.name == name).unwrap();
    evaluate(&c, p, r)
}

#[test]
fn a_clean_gpu_is_measured_once_and_the_checks_are_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    let s = session(&t, &dir, Script::new(vec![clean()]), 2);
    let v = Variant::new(7, 2);
    let r = s.results_for(&[v]).unwrap();
    assert_eq!(t.measured.load(Ordering::SeqCst), 1);
    let c = r.contention.clone().unwrap();
    assert_eq!((c.checks, c.retries), (2, 0));
    assert!(
        c.contaminated.is_empty() && c.foreign_pids.is_empty(),
        "{c:?}"
    );
    assert!(matches!(
        verdict(&s.profile, &r, "probe::chain7_acc2_effective2"),
        Outcome::Pass(_)
    ));
    // The record survives the results file.
    let back = RunResults::from_json(&r.to_json(), Path::new("r.json")).unwrap();
    assert_eq!(back.contention, Some(c));
    drop(s);
}

#[test]
fn a_passing_disturbance_is_measured_again_and_then_judged() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    // Clean before, busy after the first measurement; clean around the second.
    let s = session(&t, &dir, Script::new(vec![clean(), busy(), clean()]), 2);
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    assert_eq!(t.measured.load(Ordering::SeqCst), 2);
    let c = r.contention.unwrap();
    assert_eq!((c.checks, c.retries), (4, 1));
    assert_eq!(c.foreign_pids, vec![4242]);
    assert!(c.contaminated.is_empty());
    drop(s);
}

#[test]
fn a_gpu_that_stays_busy_makes_timing_cases_errors_never_regressions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    // Clean before each measurement, busy after: measured 1 + 2 times.
    let script = vec![clean(), busy(), clean(), busy(), clean(), busy()];
    let s = session(&t, &dir, Script::new(script), 2);
    let p = s.profile.clone();
    // What the recorded device holds (the contexts run: every variant and context).
    let vs: Vec<Variant> = p
        .probe
        .variants()
        .into_iter()
        .filter(|v| !t.predates(*v))
        .collect();
    let mut r = s.results_for(&vs).unwrap();
    assert_eq!(t.measured.load(Ordering::SeqCst), 3);
    let c = r.contention.clone().unwrap();
    assert_eq!(c.retries, 2);
    assert_eq!(c.contaminated.len(), vs.len());
    // Even a measurement that would be a regression is an error, naming the cause.
    r.variants[1].mean_progress *= 0.5;
    if let Some(sm) = r.variants[1].summary.as_mut() {
        sm.median *= 0.5;
    }
    let name = format!("probe::{}", r.variants[1].name);
    match verdict(&p, &r, &name) {
        Outcome::Error(m) => assert!(
            m.starts_with("GPU busy: PID 4242 (python3)") && m.contains("not judged"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
    let mut schedules = 0;
    for c in cases(&p)
        .into_iter()
        .filter(|c| !c.needs.iter().any(|v| t.predates(*v)))
    {
        let o = evaluate(&c, &p, &r);
        assert!(!o.is_fail(), "{}: {o:?}", c.name);
        // Timing cases are errors; code shape, loop schedules (blessed with the run) and
        // spills are still judged.
        let timing = ["probe::", "invariant::acc2", "validity::", "policy::"]
            .iter()
            .any(|x| c.name.starts_with(x));
        if c.name.starts_with("sass::") || c.name.starts_with("invariant::no_spills") {
            assert!(matches!(o, Outcome::Pass(_)), "{}: {o:?}", c.name);
            schedules += c.name.ends_with("::schedule") as usize;
        } else if timing && !c.needs.is_empty() {
            assert!(o.is_error(), "{}: {o:?}", c.name);
        }
    }
    // Every measured loop's schedule was judged, not skipped.
    assert_eq!(schedules, vs.len());
    drop(s);
}

#[test]
fn a_disturbance_seen_before_measuring_postpones_the_measurement() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    let s = session(&t, &dir, Script::new(vec![busy()]), 2);
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    // Two postponements, then the last attempt measures anyway, for the record.
    assert_eq!(t.measured.load(Ordering::SeqCst), 1);
    let c = r.contention.unwrap();
    assert_eq!(c.retries, 2);
    assert!(c.contaminated["chain7_acc2_effective2"].starts_with("GPU busy: PID 4242"));
    drop(s);
}

#[test]
fn slowed_clocks_are_errors_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    let s = session(&t, &dir, Script::new(vec![clean(), hot()]), 0);
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    let c = r.contention.clone().unwrap();
    assert_eq!(c.throttle_reasons, vec!["sw_thermal_slowdown"]);
    match verdict(&s.profile, &r, "probe::chain7_acc2_effective2") {
        Outcome::Error(m) => assert!(m.starts_with("GPU throttled: "), "{m}"),
        other => panic!("{other:?}"),
    }
    drop(s);
}
