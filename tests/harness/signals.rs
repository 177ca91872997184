//! Interrupted runs (docs/harness.md), in child processes (this test binary re-executed,
//! see `child`): SIGTERM and SIGINT while measuring or compiling, and every termination
//! signal at a sweep of moments, each leaving a complete, red JUnit file and a non-zero exit.

use crate::support::*;
use accprobe::harness;
use quick_junit::{Report, TestCaseStatus};
use std::path::Path;

fn interrupted_run_keeps_its_report(signal: &str, code: i32) {
    let sb = Sandbox::new(&format!("signal-{signal}"), &["documented", "h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let started = sb.dir.join("out/measuring-started");
    // The compile-only cases (they compile in worker processes) are not what this is about.
    let mut child = child_command("blocking", &sb.dir, &["--skip", "compile::"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait (a generous bound, not a timing assertion) until the GPU side is stuck.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !started.exists() {
        if std::time::Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the child never started measuring");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(code), "{status}");

    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    // Every case of the run is in the file: finished ones as they ended, the others
    // skipped as not finished; and one failing case says the run was interrupted.
    let all = 2 * replay_expectation("h200").0 + replay_expectation("documented").0;
    let total: usize = r.test_suites.iter().map(|s| s.test_cases.len()).sum();
    assert_eq!(total, all + 1);
    let gpu = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "gpu0 NVIDIA H200 / profile h200")
        .unwrap();
    assert!(!gpu.test_cases.is_empty());
    let reason = format!("not finished: interrupted by SIG{signal}");
    for c in &gpu.test_cases {
        let m = message(&c.status);
        // Ignored at list time: the contexts the recorded device's file predates.
        // (the JUnit text writes an apostrophe as `’`).
        if m.starts_with("the recorded device’s results predate context") {
            continue;
        }
        assert_eq!(m, reason, "{}", c.name.as_str());
    }
    let m = message(case_status(&r, harness::INTERRUPTED_CASE));
    assert!(m.contains(&format!("interrupted by SIG{signal}")), "{m}");
    assert_eq!(counts(&r, harness::INTERRUPTED_SUITE), (1, 1, 0));
}

/// A signal while NVRTC compiles in the process (the matrix compiles from the moment the
/// driver names the device) exits 130 with the JUnit file, not with the crash that the
/// exit-time destructors of NVRTC gave under the compiling thread (SIGSEGV or SIGABRT in
/// 2 of 2 runs on the H200, 2 of 3 here). The stub driver names a device of compute
/// capability 9.0 and fails its context; the real NVRTC compiles meanwhile.
#[test]
fn a_signal_while_nvrtc_compiles_exits_130_with_the_junit_file() {
    use std::io::BufRead;
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        eprintln!("skipped: no libnvrtc to compile with (.ci/run installs one)");
        return;
    }
    let sb = Sandbox::new("signal-compiling", &["documented", "h200"]);
    let Some(stub) = stub_driver(&sb.dir) else {
        return;
    };
    // The stub libcuda alone: NVRTC is the real one, found further along the path.
    let lib = sb.dir.join("stub-cuda");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(stub.join("libcuda.so"), lib.join("libcuda.so")).unwrap();
    for delay_ms in [0, 50, 100, 150] {
        let _ = std::fs::remove_file(sb.paths().junit);
        let mut cmd = child_command("main", &sb.dir, &["--skip", "compile::"]);
        with_stub(&mut cmd, &lib, "context_fails");
        // As in the suite's own binary, where `main` blocks both signals before any thread
        // starts: here libtest's threads exist first, so the child starts with them blocked.
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| match accprobe::interrupt::block_in_this_thread() {
                0 => Ok(()),
                e => Err(std::io::Error::from_raw_os_error(e)),
            });
        }
        let mut child = cmd
            .env("ACCPROBE_TRACE", "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = Vec::new();
        // The cases are planned (the JUnit file is the recorder's from then on) once the
        // run says why the GPU cases are ignored; the compile goes on (the process waits
        // for it before it ends, see `Ahead`).
        for line in lines.by_ref() {
            let line = line.unwrap();
            let planned = line.contains("GPU cases are ignored");
            seen.push(line);
            if planned {
                break;
            }
        }
        let said = |what: &str| seen.iter().any(|l| l.contains(what));
        assert!(
            said("compiling before its context") && said("GPU cases are ignored"),
            "the run did not start as expected: {seen:?}"
        );
        if said("compiled (cache") {
            eprintln!("the compile ended before the run was planned: no signal sent");
            let _ = child.wait();
            continue;
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let sent = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        seen.extend(lines.map_while(Result::ok));
        let status = child.wait().unwrap();
        assert_eq!(
            status.code(),
            Some(130),
            "signal {delay_ms} ms into the compile: {status}; {seen:?}"
        );
        let r = Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap())
            .unwrap();
        let m = message(case_status(&r, harness::INTERRUPTED_CASE));
        assert!(m.contains("interrupted by SIGINT"), "{m}");
    }
}

#[test]
fn sigterm_leaves_a_complete_junit_file_and_exits_143() {
    interrupted_run_keeps_its_report("TERM", 143);
}

#[test]
fn sigint_leaves_a_complete_junit_file_and_exits_130() {
    interrupted_run_keeps_its_report("INT", 130);
}

#[test]
fn a_signal_ends_the_run_even_when_the_junit_file_cannot_be_written() {
    // ACCPROBE_JUNIT names a FIFO nobody reads: opening it for writing blocks, in the run
    // and in the interrupt handler alike. A CI cancel must still end the process.
    let sb = Sandbox::new("signal-fifo", &["documented"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let fifo = sb.dir.join("out/junit.fifo");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        eprintln!("skipped: mkfifo unavailable");
        return;
    }
    let mut child = child_command("main", &sb.dir, &["--skip", "compile::"])
        .env("ACCPROBE_JUNIT", &fifo)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Whether the signal comes before or after the run blocks on the FIFO, the handler
    // meets the same FIFO.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let status = ended_within(
        &mut child,
        std::time::Instant::now() + std::time::Duration::from_secs(60),
        "SIGTERM did not end a run whose JUnit file blocks",
    );
    assert_eq!(status.code(), Some(143), "{status}");
    let m = std::fs::symlink_metadata(&fifo).unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(m.file_type().is_fifo(), "the FIFO was replaced");
}

/// A child run of the real entry point in `mode` (`held`: it does not end on its own before
/// it is signalled; `main`: the run left to finish), started with the termination signals
/// blocked from its first instruction, as the suite's `main` blocks them first, and with
/// each of them at its default action: what the test is started under (a CI job's shell
/// that ignores SIGQUIT in background jobs, `nohup`) is not what the sweep is about.
/// Without a GPU: the stub driver with no device where `cc` builds it, else no driver at
/// all; `None` where neither can be had (a real driver and no C compiler).
fn held_child(sb: &Sandbox, mode: &str) -> Option<std::process::Command> {
    held_child_ignoring(sb, mode, &[])
}

/// [`held_child`], with the signals of `ignored` ignored as the child starts, as `nohup`
/// ignores SIGHUP.
fn held_child_ignoring(
    sb: &Sandbox,
    mode: &str,
    ignored: &'static [i32],
) -> Option<std::process::Command> {
    let mut cmd = child_command(mode, &sb.dir, &["--skip", "compile::"]);
    match stub_driver(&sb.dir) {
        Some(lib) => with_stub(&mut cmd, &lib, "no_devices"),
        None if !driver_present() => {}
        None => return None,
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            for &(signal, _) in &accprobe::interrupt::TERMINATING {
                let action = if ignored.contains(&signal) {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                };
                if libc::signal(signal, action) == libc::SIG_ERR {
                    return Err(std::io::Error::last_os_error());
                }
            }
            match accprobe::interrupt::block_in_this_thread() {
                0 => Ok(()),
                e => Err(std::io::Error::from_raw_os_error(e)),
            }
        });
    }
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    Some(cmd)
}

/// Runs `cmd` (a [`held_child`]) and sends it `signal` `delay` after it started, or, when
/// `delay` is `None`, once it has finished every case and written its JUnit file. The
/// exit code and stderr; the JUnit file is left where the sandbox says.
fn signal_child(
    sb: &Sandbox,
    cmd: &mut std::process::Command,
    signal: i32,
    delay: Option<std::time::Duration>,
) -> (Option<i32>, String) {
    use std::io::Read;
    let finished = sb.dir.join("out/finished");
    let _ = std::fs::remove_file(&finished);
    let _ = std::fs::remove_file(sb.paths().junit);
    let mut child = cmd.spawn().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reading = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    // Generous bounds, never timing assertions: the child waits 60 s once finished.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    match delay {
        Some(d) => std::thread::sleep(d),
        None => {
            while !finished.exists() {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the child never finished its cases"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }
    // SAFETY: kill has no memory effects; the child is ours and not yet waited for.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let status = ended_within(
        &mut child,
        deadline,
        &format!("the child did not end after signal {signal}"),
    );
    (status.code(), reading.join().unwrap())
}

/// The names and states of a JUnit file's cases.
fn states(r: &Report) -> std::collections::BTreeMap<String, TestCaseStatus> {
    r.test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .map(|c| (c.name.as_str().to_string(), c.status.clone()))
        .collect()
}

/// Runs `plain` (a [`held_child`] in `main` mode) to its end, which must be green: the
/// states of its cases, what an interrupted run's file is checked against.
fn left_to_finish(
    sb: &Sandbox,
    plain: &mut std::process::Command,
) -> std::collections::BTreeMap<String, TestCaseStatus> {
    let reference = run_child(plain.stderr(std::process::Stdio::piped()));
    assert_eq!(reference.code, Some(0), "{}", reference.stderr);
    states(
        &Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap(),
    )
}

/// What the contract says of a run interrupted by `signal` (docs/harness.md, "Interrupted
/// runs"), against `planned`, the cases of the same run left to finish: exit 128 + the
/// signal; a failing `run::interrupted` case; and either no other case (the signal came
/// before the plan) or every planned case, each as it ended or skipped as not finished.
/// The number of cases that did not finish.
fn assert_interrupted(
    code: Option<i32>,
    junit: &Path,
    signal: i32,
    planned: &std::collections::BTreeMap<String, TestCaseStatus>,
    context: &str,
) -> usize {
    let name = accprobe::interrupt::name(signal);
    assert_eq!(code, Some(128 + signal), "{context}");
    let text =
        std::fs::read_to_string(junit).unwrap_or_else(|e| panic!("{context}: no JUnit file ({e})"));
    let r = Report::deserialize_from_str(&text).expect("well-formed JUnit");
    let mut got = states(&r);
    let interrupted = got
        .remove(harness::INTERRUPTED_CASE)
        .unwrap_or_else(|| panic!("{context}: no {}", harness::INTERRUPTED_CASE));
    assert!(
        matches!(interrupted, TestCaseStatus::NonSuccess { .. }),
        "{context}: {} must fail",
        harness::INTERRUPTED_CASE
    );
    let m = message(&interrupted);
    assert!(
        m.contains(&format!("interrupted by {name}")),
        "{context}: {m}"
    );
    assert!(r.failures >= 1, "{context}: a CI must read the file as red");
    if got.is_empty() {
        assert!(
            m.contains("before its cases were planned") && m.contains("is not green because"),
            "{context}: {m}"
        );
        return 0;
    }
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        planned.keys().collect::<Vec<_>>(),
        "{context}: every planned case, once"
    );
    let reason = format!("not finished: interrupted by {name}");
    let mut unfinished = 0;
    for (case, state) in &got {
        if message(state) == reason {
            assert!(
                matches!(state, TestCaseStatus::Skipped { .. }),
                "{context}: {case}"
            );
            unfinished += 1;
        } else {
            assert_eq!(
                std::mem::discriminant(state),
                std::mem::discriminant(&planned[case]),
                "{context}: {case} ended otherwise than in a run left to finish"
            );
        }
    }
    unfinished
}

#[test]
fn a_termination_signal_at_any_moment_exits_non_zero_with_a_red_junit_file() {
    let sb = Sandbox::new("signal-sweep", &["documented"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    let (Some(mut cmd), Some(mut plain)) = (held_child(&sb, "held"), held_child(&sb, "main"))
    else {
        eprintln!("skipped: a real driver here and no C compiler for the stub");
        return;
    };
    // The run left to finish: what every interrupted file is checked against.
    let planned = left_to_finish(&sb, &mut plain);
    assert!(planned.len() > 100, "{}", planned.len());
    let signals = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGTERM,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
    ];
    // At 0 ms the signal is pending before `main` runs (blocked from exec): before the
    // profiles load, before anything is planned. Then a sweep of moments, each signal in
    // turn; whatever moment each one meets, the contract holds.
    let mut moments: Vec<(i32, Option<u64>)> = signals.iter().map(|&s| (s, Some(0))).collect();
    for (i, ms) in [1, 3, 10, 30, 100, 300, 1000].into_iter().enumerate() {
        moments.push((signals[i % signals.len()], Some(ms)));
    }
    // After every case finished, before the process ends.
    moments.push((libc::SIGTERM, None));
    moments.push((libc::SIGHUP, None));
    for (signal, ms) in moments {
        let delay = ms.map(std::time::Duration::from_millis);
        let (code, stderr) = signal_child(&sb, &mut cmd, signal, delay);
        let context = format!(
            "{} at {}: {stderr}",
            accprobe::interrupt::name(signal),
            ms.map_or("the end".to_string(), |m| format!("{m} ms"))
        );
        let unfinished = assert_interrupted(code, &sb.paths().junit, signal, &planned, &context);
        if ms.is_none() {
            let r =
                Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap())
                    .unwrap();
            assert_eq!(states(&r).len(), planned.len() + 1, "{context}");
            assert_eq!(unfinished, 0, "{context}");
        }
    }
}

/// Under `nohup` (SIGHUP ignored as the process starts) a SIGHUP does not end the run: it
/// finishes as a run left alone does, green. SIGTERM is taken even when it starts ignored,
/// since a CI's cancel must always end the run with its report (docs/harness.md).
#[test]
fn a_signal_ignored_as_the_run_starts_stays_ignored_except_sigint_and_sigterm() {
    let sb = Sandbox::new("signal-ignored", &["documented"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    const IGNORED: &[i32] = &[libc::SIGHUP, libc::SIGTERM];
    let (Some(mut cmd), Some(mut plain)) = (
        held_child_ignoring(&sb, "main", IGNORED),
        held_child(&sb, "main"),
    ) else {
        eprintln!("skipped: a real driver here and no C compiler for the stub");
        return;
    };
    let planned = left_to_finish(&sb, &mut plain);
    // Pending from the first instruction on, as in the sweep's 0 ms moments.
    let zero = Some(std::time::Duration::ZERO);
    let (code, stderr) = signal_child(&sb, &mut cmd, libc::SIGHUP, zero);
    assert_eq!(code, Some(0), "SIGHUP under nohup: {stderr}");
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert_eq!(
        states(&r),
        planned,
        "SIGHUP under nohup: the run as left alone"
    );
    assert_eq!(r.failures, 0);
    let (code, stderr) = signal_child(&sb, &mut cmd, libc::SIGTERM, zero);
    let context = format!("SIGTERM ignored as the run starts: {stderr}");
    assert_interrupted(code, &sb.paths().junit, libc::SIGTERM, &planned, &context);
}
