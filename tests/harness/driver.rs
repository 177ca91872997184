//! Device detection at the real entry point, in child processes (this test binary
//! re-executed, see `child`): without a driver (what nextest lists, what a required GPU
//! does) and with a stub libcuda built here when `cc` exists (the driver loads, the device
//! does not work).

use crate::support::*;
use accprobe::harness;
use accprobe::verdict::cases::cases;
use quick_junit::Report;
use std::path::Path;

#[test]
fn without_a_driver_nextest_lists_the_gpu_cases_as_ignored_and_the_summary_says_so() {
    if driver_present() {
        eprintln!("skipped: a CUDA driver loads on this machine");
        return;
    }
    let sb = Sandbox::new("list-ignored", &["documented"]);
    let gpu_cases = replay_expectation("documented").0;
    let all = run_child(&mut child_command(
        "main",
        &sb.dir,
        &["--list", "--format", "terse"],
    ));
    assert_eq!(all.code, Some(0), "{}", all.stderr);
    let ignored = run_child(&mut child_command(
        "main",
        &sb.dir,
        &["--list", "--format", "terse", "--ignored"],
    ));
    let listed = |o: &Output| -> Vec<String> {
        o.stdout
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(String::from)
            .collect()
    };
    let (all, ignored) = (listed(&all), listed(&ignored));
    assert_eq!(ignored.len(), gpu_cases, "{ignored:?}");
    assert!(
        ignored.iter().all(|n| !n.starts_with("replay::")),
        "{ignored:?}"
    );
    assert!(ignored.contains(&"probe::chain7_acc1_effective1".to_string()));
    assert_eq!(all.len(), 2 * gpu_cases, "replays and GPU cases");
    assert!(!sb.paths().junit.exists(), "--list writes nothing");

    // A run: the GPU cases are skipped with the reason, and the closing summary says
    // the GPU was not tested, by reason.
    let run = run_child(&mut child_command("main", &sb.dir, &[]));
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let after = &run.stdout[run.stdout.find("test result:").expect("libtest's line")..];
    assert!(
        after.contains(&format!(
            "accprobe summary:   ignored: no GPU ({}): {gpu_cases}",
            no_gpu()
        )) || after.contains("accprobe summary:   ignored: no GPU (no NVRTC"),
        "{after}"
    );
    assert!(
        after.contains("accprobe summary:   ignored: known deviation:")
            || !replay_has_known_deviation("documented"),
        "{after}"
    );
    assert!(
        after.contains("accprobe summary: GPU NOT TESTED: "),
        "{after}"
    );
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert_eq!(
        counts(&r, "no gpu / profile documented"),
        (gpu_cases, 0, gpu_cases)
    );
}

fn replay_has_known_deviation(profile: &str) -> bool {
    let p = accprobe::catalog::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("expectations/{profile}.yaml")),
    )
    .unwrap();
    let r = p.recorded.clone().unwrap();
    cases(&p).iter().any(|c| {
        matches!(
            accprobe::verdict::evaluate(c, &p, &r),
            accprobe::verdict::Outcome::KnownDeviation { .. }
        )
    })
}

#[test]
fn without_a_driver_a_required_gpu_fails_the_real_entry_point() {
    if driver_present() {
        eprintln!("skipped: a CUDA driver loads on this machine");
        return;
    }
    let sb = Sandbox::new("required-main", &["documented"]);
    let out = run_child(child_command("main", &sb.dir, &[]).env("ACCPROBE_REQUIRE_GPU", "yes"));
    assert_eq!(out.code, Some(101), "{}", out.stderr);
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    let m = message(case_status(&r, harness::REQUIRED_CASE));
    assert!(
        m.contains("no CUDA driver") || m.contains("no NVRTC"),
        "{m}"
    );
    assert!(
        out.stdout
            .contains("accprobe summary: GPU NOT TESTED, and ACCPROBE_REQUIRE_GPU is set"),
        "{}",
        out.stdout
    );
    // Listed, not ignored: nextest runs it and reports it failed.
    let list = run_child(
        child_command("main", &sb.dir, &["--list", "--format", "terse"])
            .env("ACCPROBE_REQUIRE_GPU", "1"),
    );
    assert!(
        list.stdout.lines().any(|l| l == "gpu::required: test"),
        "{}",
        list.stdout
    );
    // The GPU cases are ignored at list time (nextest skips them): gpu::required fails
    // for them all.
    let ignored = run_child(
        child_command(
            "main",
            &sb.dir,
            &["--list", "--format", "terse", "--ignored"],
        )
        .env("ACCPROBE_REQUIRE_GPU", "1"),
    );
    let ignored: Vec<&str> = ignored
        .stdout
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .collect();
    assert_eq!(
        ignored.len(),
        replay_expectation("documented").0,
        "{ignored:?}"
    );
    assert!(!ignored.contains(&harness::REQUIRED_CASE), "{ignored:?}");
}

#[test]
fn a_driver_whose_device_cannot_be_used_fails_a_required_run_with_the_reason() {
    let sb = Sandbox::new("stub", &["documented"]);
    let Some(lib) = stub_driver(&sb.dir) else {
        return;
    };
    for (mode, says) in [
        (
            "init_fails",
            "the GPU cannot be tested: cuInit: CUDA_ERROR_NO_DEVICE (stub error); ",
        ),
        ("no_devices", "no CUDA device found"),
        ("context_fails", "cannot create a context on device 0"),
    ] {
        let _ = std::fs::remove_file(sb.paths().junit);
        let mut cmd = child_command("main", &sb.dir, &[]);
        with_stub(&mut cmd, &lib, mode);
        let out = run_child(cmd.env("ACCPROBE_REQUIRE_GPU", "1"));
        assert_eq!(out.code, Some(101), "{mode}: {}", out.stderr);
        // The stub's libnvrtc has none of NVRTC's functions: the thread that reads its
        // version (started before the driver answers) says so in an error, it does not panic.
        assert!(!out.stderr.contains("panicked"), "{mode}: {}", out.stderr);
        let r = Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap())
            .unwrap();
        let m = message(case_status(&r, harness::REQUIRED_CASE));
        assert!(m.contains(says), "{mode}: {m}");
        // Plain words: no Rust Debug text, one "but" at most.
        assert!(!m.contains("DriverError("), "{mode}: {m}");
        assert!(m.matches(" but ").count() <= 1, "{mode}: {m}");

        // Not required: the same reason ignores the GPU cases, at list time.
        let mut cmd = child_command(
            "main",
            &sb.dir,
            &["--list", "--format", "terse", "--ignored"],
        );
        with_stub(&mut cmd, &lib, mode);
        let out = run_child(&mut cmd);
        assert_eq!(out.code, Some(0), "{mode}: {}", out.stderr);
        assert_eq!(
            out.stdout.lines().filter(|l| l.ends_with(": test")).count(),
            replay_expectation("documented").0,
            "{mode}: {}",
            out.stdout
        );
    }
    // With the device count known, an ordinal out of range is a configuration error.
    let mut cmd = child_command("main", &sb.dir, &[]);
    with_stub(&mut cmd, &lib, "context_fails");
    let out = run_child(cmd.env("ACCPROBE_DEVICES", "0,7"));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("device 7 is not an ordinal below 1"),
        "{}",
        out.stderr
    );
}
