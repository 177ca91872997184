//! The harness under nextest, in child processes (this test binary re-executed, see
//! `child`): one measurement per nextest run, one shared JUnit file, and the nextest run
//! folder confined to itself with no record lost silently.

use crate::support::*;
use quick_junit::{Report, TestCaseStatus};
use std::path::Path;
use std::process::ExitCode;

#[test]
fn the_processes_of_one_nextest_run_measure_once_and_share_one_junit_file() {
    let sb = Sandbox::new("nextest", &["documented", "h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let cases = [
        "probe::chain7_acc1_effective1",
        "probe::chain29_acc2_effective2",
        "invariant::acc2_is_peak::chain13",
        "replay::h200::probe::chain7_acc1_effective1",
    ];
    // As nextest starts them: one process per case, several at once, one run id.
    let children: Vec<_> = cases
        .iter()
        .map(|case| {
            child_command("nextest", &sb.dir, &["--exact", case, "--nocapture"])
                .env("NEXTEST_RUN_ID", "0a1b2c3d-run")
                .env("NEXTEST_EXECUTION_MODE", "process-per-test")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let measurements = std::fs::read_to_string(sb.dir.join("out/measurements")).unwrap();
    assert_eq!(measurements.lines().count(), 1, "{measurements}");
    let all = {
        let p = accprobe::catalog::load(&sb.dir.join("expectations/h200.yaml")).unwrap();
        p.probe.variants().len()
    };
    assert!(
        measurements.trim().ends_with(&format!(" {all}")),
        "the whole matrix at once: {measurements}"
    );
    assert!(!sb.dir.join("out/overlap").exists());
    assert!(sb.dir.join("out/runs/0a1b2c3d-run/measured.json").exists());
    assert!(
        sb.paths().results.exists(),
        "the measuring process wrote the results"
    );
    // One JUnit file with every process's case, each judged as a one-process run judges it.
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    let mut names: Vec<&str> = r
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter().map(|c| c.name.as_str()))
        .collect();
    names.sort();
    // And once the run-level gpu::measure, however many processes measured or judged.
    let mut want = cases.to_vec();
    want.push("gpu::measure");
    want.sort();
    assert_eq!(names, want);
    // No process saw every case: the one that measured recorded the run, unjudged.
    let history = sb.paths().history;
    let mut store = accprobe::history::open(&history, false).unwrap().unwrap();
    let runs = accprobe::history::read::runs(store.as_mut()).unwrap();
    assert_eq!(runs.len(), 1, "one measurement, one record");
    assert_eq!(runs[0].verdict, "unjudged");
    let record = accprobe::history::read::record(store.as_mut(), &runs[0]).unwrap();
    assert_eq!((record.variants.len(), record.cases.len()), (all, 0));
    let (code, plain) = sb.run_on(vec![recorded_h200(0)], &[]);
    assert_eq!(code, ExitCode::SUCCESS);
    for c in cases {
        assert_eq!(
            std::mem::discriminant(case_status(&r, c)),
            std::mem::discriminant(case_status(&plain, c)),
            "{c}"
        );
    }
}

#[test]
fn files_in_the_nextest_run_folder_are_read_bounded_and_named_when_refused() {
    let sb = Sandbox::new("nextest-hostile", &["documented", "h200"]);
    let run = sb.dir.join("out/runs/hostile-run");
    let junit_parts = run.join("junit");
    std::fs::create_dir_all(&junit_parts).unwrap();
    let fifo = junit_parts.join("1.json");
    if !std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("skipped: mkfifo unavailable");
        return;
    }
    std::os::unix::fs::symlink("/dev/zero", run.join("measured.json")).unwrap();
    let start = || {
        child_command(
            "nextest",
            &sb.dir,
            &["--exact", "probe::chain7_acc1_effective1", "--nocapture"],
        )
        .env("NEXTEST_RUN_ID", "hostile-run")
        .env("NEXTEST_EXECUTION_MODE", "process-per-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
    };
    // A FIFO as another process's JUnit record and /dev/zero as the measurement: neither
    // is read (a hang, memory without bound); the run measures and ends.
    let child = start();
    let waiting = std::thread::spawn(move || child.wait_with_output().unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !waiting.is_finished() {
        if std::time::Instant::now() > deadline {
            // Unblock the reader, if any, so that the test ends with the failure.
            let _ = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("the run hangs on a FIFO in its run folder");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = waiting.join().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // /dev/zero is reached through a link out of the run folder: refused before any read.
    assert!(
        err.contains("measured.json: refused: it leads to /dev/zero"),
        "{err}"
    );
    assert!(err.contains("1.json") && err.contains("is a FIFO"), "{err}");
    // A folder as the JUnit lock: the error names the lock, not the JUnit file.
    std::fs::remove_file(run.join("measured.json")).unwrap();
    std::fs::remove_file(&fifo).unwrap();
    std::fs::remove_file(run.join("junit.lock")).unwrap();
    std::fs::create_dir(run.join("junit.lock")).unwrap();
    let out = start().wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "{}: cannot open the lock file",
            run.join("junit.lock").display()
        )),
        "{err}"
    );
}

/// One process of nextest run `id` in sandbox `sb`, for `case`, to its end.
fn nextest_process(sb: &Sandbox, id: &str, case: &str) -> std::process::Output {
    child_command("nextest", &sb.dir, &["--exact", case, "--nocapture"])
        .env("NEXTEST_RUN_ID", id)
        .env("NEXTEST_EXECUTION_MODE", "process-per-test")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap()
}

/// What is in folder `dir`, by name.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn no_file_of_the_nextest_run_folder_is_written_or_read_through_a_link_out_of_it() {
    let sb = Sandbox::new("nextest-links", &["documented", "h200"]);
    let outside = sb.dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("measured.json"), "{}").unwrap();
    let run = |id: &str, link: &str, to: &Path, case: &str| {
        let dir = sb.dir.join("out/runs").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        std::os::unix::fs::symlink(to, dir.join(link)).unwrap();
        let out = nextest_process(&sb, id, case);
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            dir,
        )
    };
    let refused = |err: &str, path: &Path| {
        assert!(
            err.contains(&format!("{}: refused: it leads to ", path.display()))
                && err.contains("outside the nextest run folder"),
            "{err}"
        );
    };
    // The records' folder linked out: the JUnit file cannot be rebuilt, which fails the
    // run as any JUnit file that cannot be written does; nothing is written outside.
    let (code, err, dir) = run(
        "links-junit",
        "junit",
        &outside,
        "replay::h200::probe::chain7_acc1_effective1",
    );
    refused(&err, &dir.join("junit"));
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(names_in(&outside), ["measured.json"]);
    // The measurement linked out: neither read nor overwritten; the process measures and
    // cannot publish, as when the folder cannot be written.
    let (code, err, dir) = run(
        "links-measured",
        "measured.json",
        &outside.join("measured.json"),
        "probe::chain7_acc1_effective1",
    );
    refused(&err, &dir.join("measured.json"));
    assert!(err.contains("cannot publish the measurement"), "{err}");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        std::fs::read_to_string(outside.join("measured.json")).unwrap(),
        "{}"
    );
    // The measuring lock linked out (to a file it would create): not created; the
    // process measures without sharing, as when the share cannot be opened.
    let (code, err, dir) = run(
        "links-lock",
        "measure.lock",
        &outside.join("measure.lock"),
        "probe::chain7_acc1_effective1",
    );
    refused(&err, &dir.join("measure.lock"));
    assert!(err.contains("measuring in this process"), "{err}");
    assert_eq!(code, Some(0), "{err}");
    // The run folder itself a link out of the runs' folder.
    std::fs::create_dir_all(sb.dir.join("out/runs")).unwrap();
    let linked = sb.dir.join("out/runs/links-dir");
    std::os::unix::fs::symlink(&outside, &linked).unwrap();
    let out = nextest_process(&sb, "links-dir", "probe::chain7_acc1_effective1");
    let err = String::from_utf8_lossy(&out.stderr);
    refused(&err, &linked);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(names_in(&outside), ["measured.json"]);
}

#[test]
fn a_junit_record_of_the_run_that_cannot_be_read_makes_the_junit_file_red() {
    let sb = Sandbox::new("nextest-records", &["documented", "h200"]);
    let parts = sb.dir.join("out/runs/records-run/junit");
    std::fs::create_dir_all(&parts).unwrap();
    std::fs::write(parts.join("1.json"), "not a record").unwrap();
    let case = "replay::h200::probe::chain7_acc1_effective1";
    let out = nextest_process(&sb, "records-run", case);
    let err = String::from_utf8_lossy(&out.stderr);
    // This process's own case passed: its exit says so (nextest reads it per case).
    assert!(out.status.success(), "{err}");
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert!(matches!(
        case_status(&r, case),
        TestCaseStatus::Success { .. }
    ));
    // The file misses the unreadable record's cases, and says so, failing.
    let st = case_status(&r, "run::records");
    assert!(matches!(st, TestCaseStatus::NonSuccess { .. }), "{st:?}");
    let why = message(st);
    assert!(
        why.contains(&format!(
            "{}: not a JUnit record",
            parts.join("1.json").display()
        )),
        "{why}"
    );
    let failures: usize = r.test_suites.iter().map(|s| s.failures).sum();
    assert_eq!(failures, 1);
}
