//! The JUnit file as its viewers read it (docs/harness.md, "What a JUnit viewer shows"), in
//! process with recorded devices: a red case's message is its verdict and first suspect
//! within 200 characters; a busy GPU is one failing `gpu::busy` beside skipped cases,
//! never a failure per case; the shared measurement is a case of its own. The ignored
//! `write_the_recorded_junit_files` writes the files under tests/data/junit/ that
//! `ci/check_viewers.py` renders and checks.

use crate::support::*;
use accprobe::measure::target::{RecordedTarget, Target};
use accprobe::model::gpu::GpuIdentity;
use accprobe::model::results::{Contention, RunResults};
use quick_junit::{NonSuccessKind, Report, TestCaseStatus};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// The H200 run h200.yaml records (expectations/recorded/h200-2026-12-04-contexts-wave.json):
/// every variant it measures, its contexts too.
fn h200_run() -> RunResults {
    accprobe::catalog::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/h200.yaml"))
        .unwrap()
        .recorded
        .expect("h200.yaml records a run")
}

/// The committed H200 run as a run after an injected `--maxrregcount=16` reads: every
/// variant's SASS changed and each one 1.75% slower.
fn red_run() -> RunResults {
    let mut r = h200_run();
    r.environment
        .as_mut()
        .unwrap()
        .compile_options
        .push("--maxrregcount=16".into());
    for v in &mut r.variants {
        if let Some(s) = v.sass.as_mut() {
            s.digest = "f".repeat(64);
        }
        v.mean_progress *= 0.9825;
        if let Some(s) = v.summary.as_mut() {
            s.median *= 0.9825;
            s.mean *= 0.9825;
        }
    }
    r
}

/// A measurement another process's work disturbed: every variant stayed contaminated.
fn busy_target() -> Arc<dyn Target> {
    let mut r = h200_run();
    let mut c = Contention {
        checks: 4,
        retries: 2,
        foreign_pids: vec![4242],
        ..Contention::default()
    };
    for v in &r.variants {
        c.contaminated.insert(
            v.name.clone(),
            "GPU busy: PID 4242 (python3) had a context on the GPU while it was measured".into(),
        );
    }
    r.contention = Some(c);
    let environment = r.environment.clone().unwrap();
    let identity = GpuIdentity {
        name: environment.gpu_name.clone(),
        compute_capability: environment.compute_capability.clone(),
    };
    Arc::new(RecordedTarget::published(
        0,
        identity,
        environment,
        Some(r),
        vec![],
        None,
    ))
}

fn recorded(r: RunResults) -> Arc<dyn Target> {
    Arc::new(RecordedTarget::new(0, r).unwrap())
}

const GPU_ONLY: [&str; 4] = ["--skip", "replay::", "--skip", "compile::"];

fn non_success(c: &quick_junit::TestCase) -> Option<(NonSuccessKind, String, String)> {
    match &c.status {
        TestCaseStatus::NonSuccess {
            kind,
            message,
            description,
            ..
        } => Some((
            *kind,
            message.as_deref().unwrap_or_default().to_string(),
            description.as_deref().unwrap_or_default().to_string(),
        )),
        _ => None,
    }
}

#[test]
fn every_red_message_is_its_verdict_and_suspect_whole_and_names_the_changed_option() {
    let sb = Sandbox::new("junit-red", &["h200"]);
    let (code, report) = sb.run_on(vec![recorded(red_run())], &GPU_ONLY);
    assert_eq!(code, ExitCode::from(101));
    let mut red = 0;
    for s in &report.test_suites {
        for c in &s.test_cases {
            let Some((_, m, body)) = non_success(c) else {
                continue;
            };
            red += 1;
            let name = c.name.as_str();
            assert!(m.chars().count() <= 200, "{name}: {m}");
            assert!(!m.contains(" [...]"), "{name}: {m}");
            if let Some(head) = body.lines().find_map(accprobe::verdict::suspect::head) {
                assert!(m.ends_with(head), "{name}: the suspect whole: {m}");
            }
            if name.starts_with("probe::") {
                assert!(
                    m.contains(
                        "; first suspect: the compiler (SASS changed; options +--maxrregcount=16)"
                    ),
                    "{name}: {m}"
                );
            }
        }
    }
    assert!(red > 60, "{red} red cases");
}

#[test]
fn a_busy_gpu_is_one_failing_gpu_busy_case_and_the_cases_it_kept_are_skipped() {
    let sb = Sandbox::new("junit-busy", &["h200"]);
    let (code, report) = sb.run_on(vec![busy_target()], &GPU_ONLY);
    assert_eq!(code, ExitCode::from(101), "a busy GPU makes the run red");
    assert_eq!(
        (report.failures, report.errors),
        (1, 0),
        "one failure, no error: viewers count errors as failures"
    );
    let suite = &report.test_suites[0];
    let busy = suite
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "gpu::busy")
        .expect("gpu::busy");
    let (kind, m, body) = non_success(busy).unwrap();
    assert_eq!(kind, NonSuccessKind::Failure);
    assert!(
        m.starts_with(
            "GPU busy: PID 4242 (python3) had a context on the GPU while it was measured; "
        ),
        "{m}"
    );
    let skipped: Vec<&quick_junit::TestCase> = suite
        .test_cases
        .iter()
        .filter(|c| {
            matches!(&c.status, TestCaseStatus::Skipped { message, .. }
                if message.as_deref() == Some("not judged: see gpu::busy"))
        })
        .collect();
    assert!(skipped.len() > 50, "{}", skipped.len());
    assert!(
        m.contains(&format!("; {} cases not judged, skipped", skipped.len())),
        "{m}"
    );
    assert!(body.contains("other processes seen: PID 4242"), "{body}");
    // The cases that judge no timing (SASS shape, spills) are still judged.
    assert!(suite
        .test_cases
        .iter()
        .any(|c| matches!(c.status, TestCaseStatus::Success { .. })
            && c.name.as_str().starts_with("sass::")));
}

#[test]
fn the_last_libtest_line_of_a_busy_run_counts_gpu_busy_as_failed() {
    let sb = Sandbox::new("junit-busy-line", &["h200"]);
    let (code, _) = sb.run_on(vec![busy_target()], &GPU_ONLY);
    assert_eq!(code, ExitCode::from(101));
    let log = std::fs::read_to_string(sb.dir.join("out/libtest.log")).unwrap();
    let last = log
        .lines()
        .rev()
        .find(|l| l.starts_with("test result: "))
        .expect("a test result line");
    assert!(
        last.starts_with("test result: FAILED. ") && last.contains("; 1 failed; "),
        "{last}\n{log}"
    );
}

#[test]
fn the_shared_measurement_is_a_case_of_its_own() {
    let sb = Sandbox::new("junit-measure", &["h200"]);
    let (code, report) = sb.run_on(vec![recorded(h200_run())], &GPU_ONLY);
    assert_eq!(code, ExitCode::SUCCESS);
    let suite = &report.test_suites[0];
    let measure = suite
        .test_cases
        .iter()
        .find(|c| c.name.as_str() == "gpu::measure")
        .expect("gpu::measure");
    assert!(matches!(measure.status, TestCaseStatus::Success { .. }));
    let out = measure
        .system_out
        .as_ref()
        .map(|o| o.as_str())
        .unwrap_or_default();
    assert!(out.contains("once for all of them"), "{out}");
}

/// Writes tests/data/junit/{red,busy,no-device,interrupted}.xml from the in-process
/// harness with recorded devices (and, for the interrupted run, a child process sent
/// SIGTERM while its device measures). `cargo test --test harness -- --ignored
/// write_the_recorded_junit_files` writes them again; `ci/device/junit.sh` writes the same
/// four on the H200.
#[test]
#[ignore = "writes tests/data/junit/; run by hand"]
fn write_the_recorded_junit_files() {
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/junit");
    std::fs::create_dir_all(&out).unwrap();
    let copy = |sb: &Sandbox, name: &str| {
        std::fs::copy(sb.paths().junit, out.join(name)).unwrap();
    };
    let sb = Sandbox::new("write-red", &["h200"]);
    sb.run_on(vec![recorded(red_run())], &GPU_ONLY);
    copy(&sb, "red.xml");
    let sb = Sandbox::new("write-busy", &["h200"]);
    sb.run_on(vec![busy_target()], &GPU_ONLY);
    copy(&sb, "busy.xml");
    let sb = Sandbox::new("write-nodevice", &["documented", "h200"]);
    let mut cmd = child_command(
        "main",
        &sb.dir,
        &["--skip", "replay::", "--skip", "compile::"],
    );
    with_no_device(&mut cmd);
    let o = run_child(cmd.env("ACCPROBE_REQUIRE_GPU", "1"));
    assert_eq!(o.code, Some(101), "{}", o.stderr);
    copy(&sb, "no-device.xml");
    let sb = Sandbox::new("write-interrupted", &["h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let started = sb.dir.join("out/measuring-started");
    let mut child = child_command("blocking", &sb.dir, &GPU_ONLY)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    while !started.exists() {
        assert!(child.try_wait().unwrap().is_none(), "the child ended early");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    child.wait().unwrap();
    copy(&sb, "interrupted.xml");
}

/// A child environment with a CUDA driver that finds no device, where there is one: the
/// stub libcuda; else nothing to change (no driver at all).
fn with_no_device(cmd: &mut std::process::Command) {
    let dir = std::env::temp_dir().join(format!("accprobe-junit-stub-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if let Some(lib) = stub_driver(&dir) {
        with_stub(cmd, &lib, "init_fails");
    }
}
#[test]
fn no_error_elements_and_no_entities_a_viewer_shows() {
    let sb = Sandbox::new("junit-text", &["h200"]);
    sb.run_on(vec![busy_target()], &GPU_ONLY);
    let xml = std::fs::read_to_string(sb.paths().junit).unwrap();
    assert!(!xml.contains("<error"), "{xml}");
    let sb = Sandbox::new("junit-text-red", &["h200"]);
    sb.run_on(vec![recorded(red_run())], &GPU_ONLY);
    let xml = std::fs::read_to_string(sb.paths().junit).unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    for s in &report.test_suites {
        for c in &s.test_cases {
            if let Some((_, m, body)) = non_success(c) {
                for text in [&m, &body] {
                    assert!(
                        !text.contains("->") && !text.contains('\'') && !text.contains('"'),
                        "{}: {text}",
                        c.name.as_str()
                    );
                }
            }
        }
    }
}
