//! The harness contract (docs/harness.md) at the real entry point, in child processes (this
//! test binary re-executed, see `child`): configuration errors before the driver loads, the
//! files a run writes, trace marks, arguments libtest cannot run, and a closed or full
//! stdout or stderr.

use crate::support::*;
use accprobe::harness::{self, Paths};
use quick_junit::{Report, TestCaseStatus};
use std::path::{Path, PathBuf};

#[test]
fn a_listing_into_a_closed_pipe_ends_quietly_with_141_and_writes_nothing() {
    // `probe --list | head -1`: libtest-mimic's printer panicked (exit 101, a failed case).
    if driver_present() {
        eprintln!("skipped: a real driver here; the listing would open it");
        return;
    }
    let sb = Sandbox::new("list-closed", &["documented"]);
    let (code, stderr) = main_into(&sb, &["--list"], "closed");
    assert_eq!(code, Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "quietly: {stderr}");
    assert!(!sb.paths().junit.exists(), "--list writes nothing");
}

#[test]
fn a_logfile_or_stdout_that_fills_up_ends_the_run_with_2_and_says_which() {
    // `--logfile /dev/full` opens fine and fails at the first line: it panicked, exit 141.
    if driver_present() || !Path::new("/dev/full").exists() {
        eprintln!("skipped: a real driver here, or no /dev/full");
        return;
    }
    let sb = Sandbox::new("full", &["documented"]);
    for (args, out, says) in [
        (
            &["--logfile", "/dev/full", "--skip", "compile::"][..],
            "null",
            "error: --logfile /dev/full cannot be written: No space left on device\n",
        ),
        (
            &["--skip", "compile::"][..],
            "full",
            "error: stdout cannot be written: No space left on device\n",
        ),
    ] {
        let _ = std::fs::remove_file(sb.paths().junit);
        let (code, stderr) = main_into(&sb, args, out);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        let r = Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap())
            .unwrap();
        assert!(matches!(
            case_status(&r, harness::INTERRUPTED_CASE),
            TestCaseStatus::NonSuccess { .. }
        ));
    }
    // `--list >/dev/full` says so plainly, not with the Debug of an unwrapped error.
    let (code, stderr) = main_into(&sb, &["--list"], "full");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("error: stdout cannot be written: No space left on device\n"),
        "{stderr}"
    );
    assert!(!stderr.contains("unwrap"), "{stderr}");
}

#[test]
fn a_full_stderr_changes_nothing_in_the_run_or_its_junit_file() {
    // `probe 2>/dev/full`: every eprintln! panicked ("failed printing to stderr"), exit 101
    // and no JUnit file.
    if driver_present() || !Path::new("/dev/full").exists() {
        eprintln!("skipped: a real driver here, or no /dev/full");
        return;
    }
    let sb = Sandbox::new("stderr-full", &["documented"]);
    let status = child_command("main", &sb.dir, &["--skip", "compile::"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create("/dev/full").unwrap())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "as without the redirection");
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert_eq!(r.failures, 0);
    assert!(r.tests > 1, "every case: {}", r.tests);
    let names: Vec<String> = r
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .map(|c| c.name.to_string())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("run::")), "{names:?}");
}

#[test]
fn a_closed_stdout_ends_the_run_with_141_and_a_junit_file_that_says_so() {
    // `probe | head -1`: the reader goes away while the run goes on, and libtest-mimic can
    // no longer print. The run must not look green. The GPU here answers after 2 s, so
    // that its cases print after stdout is closed.
    let sb = Sandbox::new("closed-stdout", &["documented", "h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let started = sb.dir.join("out/measuring-started");
    let mut child = child_command("slow", &sb.dir, &["--skip", "compile::"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut text);
        text
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !started.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never started measuring"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    drop(child.stdout.take());
    let status = child.wait().unwrap();
    let stderr = reading.join().unwrap();
    assert_eq!(status.code(), Some(141), "{status}: {stderr}");
    assert!(!stderr.contains("panicked"), "quietly: {stderr}");
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    let failed = failing_cases(&r);
    assert_eq!(failed, ["run::interrupted"]);
}

#[test]
fn malformed_device_lists_and_flags_are_configuration_errors_before_the_driver_loads() {
    let sb = Sandbox::new("config", &["documented"]);
    for (var, value, says) in [
        ("ACCPROBE_DEVICES", "abc", "expected device ordinals"),
        ("ACCPROBE_DEVICES", "-1", "expected device ordinals"),
        ("ACCPROBE_DEVICES", ",", "expected device ordinals"),
        ("ACCPROBE_DEVICE", "0x1", "expected a device ordinal"),
        ("ACCPROBE_REQUIRE_GPU", "maybe", "expected 1, true or yes"),
        ("ACCPROBE_MODE", "bogus", "expected serial or wave"),
        (
            "ACCPROBE_REQUIRE_TOOLCHAINS",
            "maybe",
            "expected 1, true or yes",
        ),
        (
            "ACCPROBE_LOCK_TIMEOUT",
            "abc",
            "expected a number of seconds",
        ),
        ("ACCPROBE_TRACE", "sometimes", "expected 1, true or yes"),
        (
            "ACCPROBE_COMPILE_PARTS",
            "0",
            "expected a whole number of NVRTC programs",
        ),
        (
            "ACCPROBE_COMPILE_PARTS",
            "four",
            "expected a whole number of NVRTC programs",
        ),
    ] {
        let out = run_child(child_command("main", &sb.dir, &[]).env(var, value));
        assert_eq!(out.code, Some(2), "{var}={value}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("error: {var}=")) && out.stderr.contains(says),
            "{var}={value}: {}",
            out.stderr
        );
        assert!(!sb.paths().junit.exists(), "nothing ran");
    }
    // Two files of the run that are one: the CUBIN would replace the results just written.
    let results = sb.dir.join("out/r.cubin");
    let out = run_child(child_command("main", &sb.dir, &[]).env("ACCPROBE_RESULTS", &results));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("the CUBIN beside ACCPROBE_RESULTS are one file"),
        "{}",
        out.stderr
    );
    assert!(!sb.paths().junit.exists(), "nothing ran");
    // A value that is not UTF-8 is malformed too, never read as unset (which would turn
    // ACCPROBE_REQUIRE_GPU off on a GPU runner).
    #[cfg(unix)]
    for var in [
        "ACCPROBE_REQUIRE_GPU",
        "ACCPROBE_MODE",
        "ACCPROBE_REQUIRE_TOOLCHAINS",
        "ACCPROBE_LOCK_TIMEOUT",
        "ACCPROBE_TRACE",
        "ACCPROBE_DEVICES",
        "ACCPROBE_DEVICE",
        "ACCPROBE_COMPILE_PARTS",
    ] {
        use std::os::unix::ffi::OsStrExt;
        let value = std::ffi::OsStr::from_bytes(b"1\xff");
        let out = run_child(child_command("main", &sb.dir, &[]).env(var, value));
        assert_eq!(out.code, Some(2), "{var}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("error: {var}="))
                && out.stderr.contains("not valid UTF-8"),
            "{var}: {}",
            out.stderr
        );
        assert!(!sb.paths().junit.exists(), "nothing ran");
    }
}

/// ACCPROBE_JUNIT and ACCPROBE_RESULTS (and the files beside the results) compare by the
/// file they name, however it is spelled: relative against absolute, through `..`, through
/// a symlinked folder, a hard link, or a further CUBIN of the results.
#[test]
fn the_files_a_run_writes_are_one_file_however_they_are_spelled() {
    let sb = Sandbox::new("one-file", &["documented"]);
    let out = sb.dir.join("out");
    std::fs::create_dir_all(out.join("a")).unwrap();
    std::os::unix::fs::symlink(&out, sb.dir.join("link")).unwrap();
    let check = |junit: &Path, results: &Path| {
        Paths {
            junit: junit.to_path_buf(),
            results: results.to_path_buf(),
            ..sb.paths()
        }
        .check_distinct()
    };
    let results = out.join("x.json");
    std::fs::write(out.join("existing.xml"), "").unwrap();
    std::fs::hard_link(out.join("existing.xml"), out.join("hard.xml")).unwrap();
    std::fs::write(out.join("x.3.cubin"), "").unwrap();
    std::fs::hard_link(out.join("x.3.cubin"), out.join("cubin-link.xml")).unwrap();
    std::os::unix::fs::symlink(out.join("x.2.cubin"), out.join("dangling.xml")).unwrap();
    for (junit, results, why) in [
        (out.join("a/../x.json"), results.clone(), "through .."),
        (
            sb.dir.join("link/x.json"),
            results.clone(),
            "a symlinked folder",
        ),
        (out.join("x.1.cubin"), results.clone(), "the second CUBIN"),
        (out.join("x.12.cubin"), results.clone(), "a further CUBIN"),
        (out.join("x.ptxas.log"), results.clone(), "the ptxas log"),
        (
            out.join("x-gpu1.json"),
            results.clone(),
            "a device's results",
        ),
        (
            out.join("x-gpu1.2.cubin"),
            results.clone(),
            "a device's CUBIN",
        ),
        (
            sb.dir.join("link/a/../x.cubin"),
            results.clone(),
            "the CUBIN, spelled otherwise",
        ),
        (
            out.join("hard.xml"),
            out.join("existing.xml"),
            "a hard link",
        ),
        (
            out.join("cubin-link.xml"),
            results.clone(),
            "a hard link to a CUBIN",
        ),
        (
            out.join("dangling.xml"),
            results.clone(),
            "a link to a CUBIN not yet written",
        ),
        (
            out.join("j.xml"),
            sb.dir.join("link/a/../j.cubin"),
            "results as their own CUBIN",
        ),
    ] {
        let e = check(&junit, &results).expect_err(why).to_string();
        assert!(e.contains("are one file"), "{why}: {e}");
    }
    for (junit, results) in [
        (out.join("junit.xml"), out.join("x.json")),
        (out.join("x.1.json"), out.join("x.json")),
        (out.join("xx.cubin"), out.join("x.json")),
        (out.join("a/x.cubin"), out.join("x.json")),
        (PathBuf::from("/dev/null"), PathBuf::from("/dev/full")),
    ] {
        assert_eq!(check(&junit, &results), Ok(()), "{}", junit.display());
    }
    // The real entry point: relative against absolute is a configuration error, exit 2.
    let run = |junit: &str| {
        run_child(
            child_command("main", &sb.dir, &[])
                .current_dir(&sb.dir)
                .env("ACCPROBE_JUNIT", junit)
                .env("ACCPROBE_RESULTS", sb.dir.join("out/r.json")),
        )
    };
    for junit in ["out/r.json", "./out/a/../r.cubin", "link/r.1.cubin"] {
        let o = run(junit);
        assert_eq!(o.code, Some(2), "{junit}: {}", o.stderr);
        assert!(o.stderr.contains("are one file"), "{junit}: {}", o.stderr);
        assert!(!sb.dir.join("out/r.json").exists(), "nothing ran");
    }
}

#[test]
fn an_empty_lock_timeout_is_unset_as_every_empty_variable_is() {
    if driver_present() {
        eprintln!("skipped: a real driver here");
        return;
    }
    let sb = Sandbox::new("empty-lock-timeout", &["documented"]);
    for value in ["", " "] {
        let out = run_child(
            child_command("main", &sb.dir, &["--skip", "compile::"])
                .env("ACCPROBE_LOCK_TIMEOUT", value),
        );
        assert_eq!(out.code, Some(0), "{value:?}: {}", out.stderr);
    }
}

#[test]
fn with_a_logfile_the_closing_summary_goes_into_it_after_libtests_line_not_to_stdout() {
    // The summary went to stdout whatever libtest wrote to: a test that ran the suite in
    // process with a log of its own still printed its summary on the terminal.
    if driver_present() {
        eprintln!("skipped: a real driver here");
        return;
    }
    let sb = Sandbox::new("logfile-summary", &["documented"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let log = sb.dir.join("out/libtest.log");
    let run = run_child(&mut child_command(
        "main",
        &sb.dir,
        &["--skip", "compile::", "--logfile", log.to_str().unwrap()],
    ));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert!(!run.stdout.contains("accprobe summary"), "{}", run.stdout);
    let log = std::fs::read_to_string(&log).unwrap();
    let after = &log[log.find("test result:").expect("libtest's line")..];
    assert!(after.contains("\naccprobe summary: passed "), "{log}");
    assert!(
        after
            .trim_end()
            .lines()
            .last()
            .is_some_and(|l| l.starts_with("accprobe summary: GPU NOT TESTED: ")),
        "{after}"
    );
}

#[test]
fn a_junit_file_that_cannot_be_written_is_never_said_written() {
    if driver_present() {
        eprintln!("skipped: a real driver here");
        return;
    }
    let sb = Sandbox::new("junit-unwritten", &["documented"]);
    let folder = sb.dir.join("out/junit-folder");
    std::fs::create_dir_all(&folder).unwrap();
    let out = run_child(
        child_command("main", &sb.dir, &["--skip", "compile::"]).env("ACCPROBE_JUNIT", &folder),
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(!out.stderr.contains("JUnit written"), "{}", out.stderr);
    assert!(out.stderr.contains("the JUnit file not"), "{}", out.stderr);
}

#[test]
fn trace_marks_say_where_the_time_goes_only_when_asked() {
    let sb = Sandbox::new("trace", &["documented"]);
    let traced = run_child(child_command("main", &sb.dir, &[]).env("ACCPROBE_TRACE", "1"));
    assert_eq!(traced.code, Some(0), "{}", traced.stderr);
    let marks: Vec<&str> = traced
        .stderr
        .lines()
        .filter(|l| l.starts_with("accprobe: trace "))
        .collect();
    assert!(
        marks.iter().any(|l| l.ends_with("s: 1 profile(s) loaded")),
        "{}",
        traced.stderr
    );
    // Each mark gives the seconds since the start of the process.
    let seconds: Vec<f64> = marks
        .iter()
        .map(|l| {
            l["accprobe: trace ".len()..]
                .split(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    assert!(
        seconds
            .iter()
            .all(|x| x.is_finite() && *x >= 0.0 && *x < 600.0),
        "{marks:?}"
    );
    let plain = run_child(&mut child_command("main", &sb.dir, &[]));
    assert_eq!(plain.code, Some(0), "{}", plain.stderr);
    assert!(
        !plain.stderr.contains("accprobe: trace"),
        "{}",
        plain.stderr
    );
}

#[test]
fn arguments_libtest_cannot_run_exit_2_before_cuda_starts_or_anything_compiles() {
    // Checked after CUDA had started, a refused run waited for the matrix compile started
    // before the context (1.3 s of NVRTC here) to end, for nothing, before exiting 2.
    let sb = Sandbox::new("args-first", &["documented"]);
    let Some(lib) = stub_driver(&sb.dir) else {
        return;
    };
    let folder = sb.dir.join("out/a-folder");
    std::fs::create_dir_all(&folder).unwrap();
    let folder = folder.display().to_string();
    for args in [
        &["--test-threads", "0"][..],
        &["--logfile", folder.as_str()][..],
    ] {
        let mut cmd = child_command("main", &sb.dir, args);
        with_stub(&mut cmd, &lib, "context_fails");
        let out = run_child(cmd.env("ACCPROBE_TRACE", "1"));
        assert_eq!(out.code, Some(2), "{args:?}: {}", out.stderr);
        for started in ["CUDA driver initialised", "compiling before its context"] {
            assert!(!out.stderr.contains(started), "{args:?}: {}", out.stderr);
        }
    }
}

#[test]
fn a_named_lock_directory_that_cannot_be_used_when_measuring_exits_2() {
    // Registration has nothing to say about it; taking the lock refuses it, as a
    // configuration error: exit 2, not a failed case's 101.
    let sb = Sandbox::new("lock-dir-file", &["h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let file = sb.dir.join("out/not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let out = run_child(
        child_command("keyed", &sb.dir, &["--skip", "compile::", "probe::"])
            .env("ACCPROBE_LOCK_DIR", &file),
    );
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("error: ACCPROBE_LOCK_DIR="),
        "{}",
        out.stderr
    );
    // With a folder there the same run measures and passes.
    let locks = sb.dir.join("out/locks");
    std::fs::create_dir_all(&locks).unwrap();
    let out = run_child(
        child_command("keyed", &sb.dir, &["--skip", "compile::", "probe::"])
            .env("ACCPROBE_LOCK_DIR", &locks),
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}
