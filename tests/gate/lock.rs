//! The per-device lock on recorded devices, beside the contention checks of `contention`:
//! a waiting accprobe or a peer that ends is no foreign process, a GPU another process
//! holds is waited for and then an error, the lock is let go once everything planned is
//! measured, and the suite reports a held GPU as one busy case.

use super::contention::*;
use accprobe::error::GpuErrorKind;
use accprobe::harness::{self, Paths, RunOptions};
use accprobe::measure::session::GpuSession;
use accprobe::measure::target::{RecordedTarget, Target};
use accprobe::model::gpu::GpuIdentity;
use accprobe::model::results::Contention;
use accprobe::model::variant::Variant;
use accprobe::ownership::contention::{GpuProcess, Monitor, MonitorError, Snapshot};
use accprobe::ownership::lock::{self, LockSettings};
use libtest_mimic::Arguments;
use quick_junit::{NonSuccessKind, Report, TestCaseStatus};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The device's lock in `dir`, taken at once through another open file description, which
/// conflicts as another process's would.
fn held_elsewhere(dir: &Path) -> lock::DeviceLock {
    lock::acquire(
        dir,
        &key().stem().unwrap(),
        Duration::ZERO,
        Duration::from_millis(1),
        |_| {},
    )
    .unwrap()
}

/// Our parent (a live process) registered in `dir` as another accprobe process of the
/// device, and its registration file.
fn registered_peer(dir: &Path) -> (u32, std::path::PathBuf) {
    let peer = std::os::unix::process::parent_id();
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join(format!("{}.pid-{peer}", key().stem().unwrap()));
    std::fs::write(&file, b"").unwrap();
    (peer, file)
}

/// The GPU with our context and `peer`'s.
fn with(peer: u32) -> Snapshot {
    Snapshot {
        processes: vec![own(), GpuProcess::new(peer, Some("probe"))],
        ..Snapshot::default()
    }
}

#[test]
fn a_waiting_accprobe_is_no_foreign_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    // Another accprobe process registered for the device (here: our parent, which lives).
    let (peer, _) = registered_peer(&dir);
    let stem = key().stem().unwrap();
    let both = with(peer);
    let s = session(&t, &dir, Script::new(vec![both]), 0);
    // The session registered itself beside it.
    assert!(dir
        .join(format!("{stem}.pid-{}", std::process::id()))
        .exists());
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    assert!(r.contention.unwrap().contaminated.is_empty());
    drop(s);
    assert!(!dir
        .join(format!("{stem}.pid-{}", std::process::id()))
        .exists());
}

/// Lists a peer's context in every snapshot, as NVML does for a moment after the peer
/// ended, and removes the peer's registration when the second snapshot is taken (after
/// the measurement), as the peer does when it ends while we measure.
struct Ending {
    registration: std::path::PathBuf,
    both: Snapshot,
    taken: AtomicUsize,
}

impl Monitor for Ending {
    fn snapshot(&self) -> Result<Snapshot, MonitorError> {
        if self.taken.fetch_add(1, Ordering::SeqCst) == 1 {
            let _ = std::fs::remove_file(&self.registration);
        }
        Ok(self.both.clone())
    }
}

#[test]
fn a_peer_that_ends_while_we_measure_is_no_foreign_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    let (peer, registration) = registered_peer(&dir);
    let monitor = Arc::new(Ending {
        registration: registration.clone(),
        both: with(peer),
        taken: AtomicUsize::new(0),
    });
    let s = session(&t, &dir, monitor, 2);
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    assert!(!registration.exists());
    let c = r.contention.unwrap();
    assert!(c.contaminated.is_empty(), "{c:?}");
    assert_eq!((c.retries, t.measured.load(Ordering::SeqCst)), (0, 1));
    drop(s);
}

#[test]
fn without_nvml_the_run_says_so_and_measures() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    let s = session(&t, &dir, Arc::new(NoNvml), 2);
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    assert_eq!(t.measured.load(Ordering::SeqCst), 1);
    let c = r.contention.unwrap();
    assert_eq!(c.checks, 0);
    assert!(c.unchecked.unwrap().starts_with("NVML is not available"));
    drop(s);
}

#[test]
fn a_gpu_held_by_another_process_is_waited_for_then_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    // Another open file description of the lock conflicts as another process's would.
    let other = held_elsewhere(&dir);
    let t = Keyed::new();
    let s = session(&t, &dir, Script::new(vec![clean()]), 0);
    let e = s.results_for(&[Variant::new(7, 2)]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Busy);
    let m = e.to_string();
    assert!(
        m.starts_with("GPU busy: GPU 0 (0000:19:00.0) is held by PID")
            && m.contains("ACCPROBE_LOCK_TIMEOUT"),
        "{m}"
    );
    assert_eq!(t.measured.load(Ordering::SeqCst), 0);
    // Nor was the CUBIN loaded (prepared) while the other held the GPU: loading it is GPU
    // work, which would slow the holder's kernels.
    assert_eq!(t.prepared.load(Ordering::SeqCst), 0);
    // Later cases do not wait again: the answer stands even once the GPU is free.
    drop(other);
    assert_eq!(s.results_for(&[Variant::new(7, 1)]).unwrap_err(), e);
    assert_eq!(t.measured.load(Ordering::SeqCst), 0);
    // A new session measures.
    let s2 = session(&t, &dir, Script::new(vec![clean()]), 0);
    assert!(s2.results_for(&[Variant::new(7, 2)]).is_ok());
    drop((s, s2));
}

#[test]
fn a_matrix_that_did_not_load_lets_the_lock_go_and_is_not_waited_for_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let t = Keyed::new();
    t.broken.store(true, Ordering::SeqCst);
    let s = session(&t, &dir, Script::new(vec![clean()]), 0);
    let e = s.results_for(&[Variant::new(7, 2)]).unwrap_err();
    assert!(e.to_string().contains("error: broken"), "{e}");
    // The lock went with the failure: another process takes it at once...
    assert!(!s.holds_lock());
    let other = held_elsewhere(&dir);
    // ...and a later case has the same error at once, neither waiting for the lock nor
    // loading again.
    assert_eq!(s.results_for(&[Variant::new(7, 1)]).unwrap_err(), e);
    assert_eq!(t.prepared.load(Ordering::SeqCst), 1);
    assert_eq!(t.measured.load(Ordering::SeqCst), 0);
    drop((other, s));
}

/// A lock directory the user named (`ACCPROBE_LOCK_DIR`) that cannot be used is a
/// configuration error, never a measurement without the lock; the default directory that
/// cannot be used is measured without it.
#[test]
fn a_named_lock_directory_that_is_a_file_is_a_configuration_error() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = dir.join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let settings = LockSettings {
        dir: file.clone(),
        timeout: Duration::from_millis(300),
        named: true,
    };
    let t = Keyed::new();
    let s = session_locking_in(&t, settings.clone(), Script::new(vec![clean()]), 0);
    let e = s.results_for(&[Variant::new(7, 2)]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Config, "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "ACCPROBE_LOCK_DIR={:?} cannot be used: ",
            file.display().to_string()
        )),
        "{e}"
    );
    assert_eq!(t.measured.load(Ordering::SeqCst), 0);
    // Every later measurement fails at once with it.
    assert_eq!(s.results_for(&[Variant::new(7, 1)]).unwrap_err(), e);
    drop(s);

    let t = Keyed::new();
    let default = LockSettings {
        named: false,
        ..settings
    };
    let s = session_locking_in(&t, default, Script::new(vec![clean()]), 0);
    assert!(s.results_for(&[Variant::new(7, 2)]).is_ok());
    assert_eq!(t.measured.load(Ordering::SeqCst), 1);
    assert!(!s.holds_lock());
    drop(s);
}

/// The suite on a device another process holds past the limit: one failing `gpu::busy`
/// says so, every GPU case is skipped as not judged, the run fails, replay cases pass.
#[test]
fn the_suite_reports_a_held_gpu_as_one_busy_case_and_skips_the_rest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let locks = dir.join("locks");
    std::env::set_var(lock::LOCK_DIR_ENV, &locks);
    std::env::set_var(lock::LOCK_TIMEOUT_ENV, "0.3");
    let stem = key().stem().unwrap();
    let _other = lock::acquire(
        &locks,
        &stem,
        Duration::ZERO,
        Duration::from_millis(1),
        |_| {},
    )
    .unwrap();
    let expectations = dir.join("expectations");
    for sub in ["baselines", "policies", "recorded"] {
        std::fs::create_dir_all(expectations.join(sub)).unwrap();
    }
    std::fs::copy(
        root().join("expectations/h200.yaml"),
        expectations.join("h200.yaml"),
    )
    .unwrap();
    for sub in ["baselines", "policies", "recorded"] {
        for f in std::fs::read_dir(root().join("expectations").join(sub)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, expectations.join(sub).join(f.file_name().unwrap())).unwrap();
        }
    }
    let paths = Paths {
        expectations,
        junit: dir.join("out/junit.xml"),
        results: dir.join("out/results.json"),
        cache: None,
        runs: dir.join("out/runs"),
        history: accprobe::config::HistoryStore::Sqlite(dir.join("out/history.sqlite")),
        history_spool: dir.join("out/history-spool"),
    };
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let log = dir.join("out/libtest.log").display().to_string();
    let args = Arguments::from_iter(["probe", "--logfile", &log, "chain7_acc2_effective2"]);
    let target: Arc<dyn Target> = Keyed::new();
    let code = harness::run(&args, &paths, Ok(vec![target]), &RunOptions::default());
    assert_eq!(
        format!("{code:?}"),
        format!("{:?}", std::process::ExitCode::from(101))
    );
    let xml = std::fs::read_to_string(&paths.junit).unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    let (mut busy, mut not_judged, mut passed) = (Vec::new(), 0, 0);
    for suite in &report.test_suites {
        for c in &suite.test_cases {
            match &c.status {
                TestCaseStatus::NonSuccess {
                    kind: NonSuccessKind::Failure,
                    message,
                    ty,
                    ..
                } => {
                    assert_eq!(ty.as_deref(), Some("gpu-busy"), "{xml}");
                    busy.push((
                        c.name.to_string(),
                        message.as_deref().unwrap_or_default().to_string(),
                    ));
                }
                TestCaseStatus::NonSuccess { kind, .. } => panic!("{:?}: {kind:?}: {xml}", c.name),
                TestCaseStatus::Success { .. } => passed += 1,
                TestCaseStatus::Skipped {
                    message,
                    ty,
                    description,
                } => {
                    let m = message.as_deref().unwrap_or_default();
                    if ty.as_deref() == Some("gpu-busy") {
                        assert!(!c.name.starts_with("replay::"), "{:?}", c.name);
                        assert_eq!(m, "not judged: see gpu::busy", "{xml}");
                        let body = description.as_deref().unwrap_or_default();
                        assert!(
                            body.contains("GPU busy: GPU 0 (0000:19:00.0) is held by PID"),
                            "{body}"
                        );
                        not_judged += 1;
                    }
                }
            }
        }
    }
    // One failure, gpu::busy, with the cause first; every GPU case the filter selects and
    // that can run here (each sink mode's probe, sass and validity cases; SASS cases are
    // ignored at list time where no disassembler is installed) is skipped, not judged;
    // the replay of the same cases passes.
    assert_eq!(busy.len(), 1, "{busy:?}");
    assert_eq!(busy[0].0, "gpu::busy");
    assert!(
        busy[0]
            .1
            .starts_with("GPU busy: GPU 0 (0000:19:00.0) is held by PID")
            && busy[0]
                .1
                .contains(&format!("; {not_judged} cases not judged, skipped")),
        "{}",
        busy[0].1
    );
    assert!(report.errors == 0 && report.failures == 1, "{xml}");
    assert!(not_judged >= 5, "{xml}");
    assert!(passed >= not_judged, "{xml}");
}

/// A process never keeps one GPU's lock while it could wait for another's: the lock goes
/// once everything planned is measured, and comes back for what was not planned.
#[test]
fn the_lock_is_let_go_once_everything_planned_is_measured() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("lock");
    let stem = key().stem().unwrap();
    let t = Keyed::new();
    let s = session(&t, &dir, Script::new(vec![clean()]), 0);
    let (a, b) = (Variant::new(7, 1), Variant::new(7, 2));
    s.plan(vec![a, b]);
    s.results_for(&[a]).unwrap();
    assert!(s.holds_lock());
    let quick = |_: lock::Waiting| {};
    assert!(lock::acquire(&dir, &stem, Duration::ZERO, Duration::from_millis(1), quick).is_err());
    s.results_for(&[b]).unwrap();
    assert!(!s.holds_lock());
    let other =
        lock::acquire(&dir, &stem, Duration::ZERO, Duration::from_millis(1), quick).unwrap();
    // Measured variants need no lock; an unplanned one waits for it.
    assert!(s.results_for(&[a, b]).is_ok());
    let e = s.results_for(&[Variant::new(7, 3)]).unwrap_err();
    assert_eq!(e.kind(), GpuErrorKind::Busy);
    drop((other, s));
}

/// A target that replays another process's measurement carries that process's
/// contention record, so what was disturbed there is an error here too.
#[test]
fn a_replayed_measurement_keeps_the_measuring_process_record() {
    let mut record = Contention::default();
    record.contaminated.insert(
        "chain7_acc2_effective2".into(),
        "GPU busy: PID 4242 (python3) had a context on the GPU while it was measured".into(),
    );
    let mut measured = recorded();
    measured.contention = Some(record.clone());
    let environment = measured.environment.clone().unwrap();
    let identity = GpuIdentity {
        name: environment.gpu_name.clone(),
        compute_capability: environment.compute_capability.clone(),
    };
    let t: Arc<dyn Target> = Arc::new(RecordedTarget::published(
        0,
        identity,
        environment,
        Some(measured),
        vec![],
        None,
    ));
    let s = GpuSession::new(profile(), "test".into(), Ok(t));
    let r = s.results_for(&[Variant::new(7, 2)]).unwrap();
    assert_eq!(r.contention, Some(record));
    assert!(verdict(&s.profile, &r, "probe::chain7_acc2_effective2").is_error());
    // A plain replay has none.
    let plain: Arc<dyn Target> = Arc::new(RecordedTarget::new(0, recorded()).unwrap());
    let s = GpuSession::new(profile(), "test".into(), Ok(plain));
    assert_eq!(
        s.results_for(&[Variant::new(7, 2)]).unwrap().contention,
        None
    );
}
