//! The harness contract of the generated suite (src/harness, docs/harness.md), with no GPU:
//! in-process, what `--list` does, what a filter runs, how a broken profile is reported,
//! what the JUnit file holds, what `ACCPROBE_REQUIRE_GPU` does; in child processes (this
//! test binary re-executed, see `child`), the real entry point's configuration errors and
//! device detection (with a stub libcuda built here when `cc` exists), what nextest lists,
//! one measurement per nextest run, termination signals at any moment, a closed or full
//! stdout, hostile files in the nextest run folder. The JUnit file is read back with
//! quick-junit's own deserializer.

use accprobe::error::GpuError;
use accprobe::harness::{self, Paths, RunOptions};
use accprobe::verdict::cases::cases;
use libtest_mimic::Arguments;
use quick_junit::{Report, TestCaseStatus};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The reason a run without a driver gives.
fn no_gpu() -> String {
    GpuError::NoDriver.to_string()
}

struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    /// A folder with copies of the given committed profiles (and what they reference).
    fn new(tag: &str, profiles: &[&str]) -> Sandbox {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir =
            std::env::temp_dir().join(format!("accprobe-harness-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("expectations/baselines")).unwrap();
        std::fs::create_dir_all(dir.join("expectations/policies")).unwrap();
        std::fs::copy(
            root.join("expectations/policies/study.yaml"),
            dir.join("expectations/policies/study.yaml"),
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("expectations/recorded")).unwrap();
        for p in profiles {
            std::fs::copy(
                root.join(format!("expectations/{p}.yaml")),
                dir.join(format!("expectations/{p}.yaml")),
            )
            .unwrap();
        }
        std::fs::copy(
            root.join("expectations/baselines/h200.yaml"),
            dir.join("expectations/baselines/h200.yaml"),
        )
        .unwrap();
        for f in std::fs::read_dir(root.join("expectations/recorded")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(
                &f,
                dir.join("expectations/recorded")
                    .join(f.file_name().unwrap()),
            )
            .unwrap();
        }
        for f in std::fs::read_dir(root.join("expectations/baselines")).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(
                &f,
                dir.join("expectations/baselines")
                    .join(f.file_name().unwrap()),
            )
            .unwrap();
        }
        Sandbox { dir }
    }

    fn paths(&self) -> Paths {
        paths_in(&self.dir)
    }

    /// libtest arguments; libtest-mimic's own report goes to a log file, so that the inner
    /// runs' summary lines do not mix with this test binary's.
    fn args(&self, extra: &[&str]) -> Arguments {
        std::fs::create_dir_all(self.dir.join("out")).unwrap();
        let log = self.dir.join("out/libtest.log").display().to_string();
        Arguments::from_iter(
            ["probe", "--logfile", &log]
                .into_iter()
                .chain(extra.iter().copied()),
        )
    }

    fn run(&self, args: &[&str]) -> (ExitCode, Option<Report>) {
        let args = self.args(args);
        let code = harness::run(
            &args,
            &self.paths(),
            Err(GpuError::NoDriver),
            &RunOptions::default(),
        );
        let junit = std::fs::read_to_string(self.paths().junit).ok();
        (
            code,
            junit.map(|x| Report::deserialize_from_str(&x).expect("well-formed JUnit")),
        )
    }
}

/// Where a run in sandbox folder `dir` reads and writes.
fn paths_in(dir: &Path) -> Paths {
    Paths {
        expectations: dir.join("expectations"),
        junit: dir.join("out/junit.xml"),
        results: dir.join("out/results.json"),
        cache: Some(dir.join("out/cache")),
        runs: dir.join("out/runs"),
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (cases, failures, skipped) that replaying a committed profile on its recorded results
/// should give, from the verdict layer itself.
fn replay_expectation(profile: &str) -> (usize, usize, usize) {
    use accprobe::verdict::{evaluate, Outcome};
    let p = accprobe::catalog::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("expectations/{profile}.yaml")),
    )
    .unwrap();
    let r = p.recorded.clone().unwrap();
    let outcomes: Vec<Outcome> = cases(&p).iter().map(|c| evaluate(c, &p, &r)).collect();
    let skipped = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Skipped(_) | Outcome::KnownDeviation { .. }))
        .count();
    (
        outcomes.len(),
        outcomes.iter().filter(|o| o.is_fail()).count(),
        skipped,
    )
}

fn counts(r: &Report, suite: &str) -> (usize, usize, usize) {
    let s = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == suite)
        .unwrap_or_else(|| {
            panic!(
                "no suite {suite}: {:?}",
                r.test_suites
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
            )
        });
    (
        s.tests,
        s.failures,
        s.test_cases
            .iter()
            .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
            .count(),
    )
}

#[test]
fn without_a_gpu_every_gpu_case_is_skipped_with_the_reason_and_replays_pass() {
    let sb = Sandbox::new("nogpu", &["documented", "h200"]);
    let (code, junit) = sb.run(&["--test-threads", "2"]);
    assert_eq!(code, ExitCode::SUCCESS);
    let r = junit.expect("JUnit written");
    assert_eq!(
        counts(&r, "replay documented"),
        replay_expectation("documented")
    );
    assert_eq!(counts(&r, "replay h200"), replay_expectation("h200"));
    assert_eq!(replay_expectation("h200").1, 0);
    let gpu_cases = replay_expectation("documented").0;
    assert_eq!(
        counts(&r, "no gpu / profile documented"),
        (gpu_cases, 0, gpu_cases)
    );
    let gpu = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "no gpu / profile documented")
        .unwrap();
    for c in &gpu.test_cases {
        match &c.status {
            TestCaseStatus::Skipped { message, .. } => {
                assert_eq!(
                    message.as_ref().map(|m| m.as_str()),
                    Some(no_gpu().as_str())
                )
            }
            other => panic!("{} was not skipped: {other:?}", c.name.as_str()),
        }
    }
    assert!(gpu
        .properties
        .iter()
        .any(|p| p.name.as_str() == "no_gpu_reason" && p.value.as_str() == no_gpu()));
    assert!(
        !sb.paths().results.exists(),
        "nothing was measured, so no results file"
    );
}

#[test]
fn list_runs_nothing_and_writes_no_junit() {
    let sb = Sandbox::new("list", &["documented"]);
    let (code, junit) = sb.run(&["--list"]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert!(junit.is_none());
}

#[test]
fn a_filter_runs_only_matching_cases() {
    let sb = Sandbox::new("filter", &["documented"]);
    let (_, junit) = sb.run(&["acc2_is_peak::chain13"]);
    let r = junit.unwrap();
    let names: Vec<&str> = r
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter().map(|c| c.name.as_str()))
        .collect();
    assert_eq!(
        names,
        vec![
            "replay::documented::invariant::acc2_is_peak::chain13",
            "invariant::acc2_is_peak::chain13"
        ]
    );
    let (_, junit) = sb.run(&["--exact", "probe::chain7_acc1_effective1"]);
    let names: Vec<String> = junit
        .unwrap()
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter().map(|c| c.name.to_string()))
        .collect();
    assert_eq!(names, vec!["probe::chain7_acc1_effective1"]);
}

#[test]
fn a_broken_profile_fails_its_own_case_and_the_others_still_run() {
    let sb = Sandbox::new("broken", &["documented"]);
    std::fs::write(
        sb.dir.join("expectations/broken.yaml"),
        "name: broken\ndescription: x\nprobe: 3\n",
    )
    .unwrap();
    let (code, junit) = sb.run(&[]);
    assert_eq!(code, ExitCode::from(101));
    let r = junit.unwrap();
    assert_eq!(counts(&r, "expectations"), (1, 1, 0));
    let case = &r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "expectations")
        .unwrap()
        .test_cases[0];
    assert_eq!(case.name.as_str(), "expectations::broken.yaml");
    match &case.status {
        TestCaseStatus::NonSuccess { message, .. } => {
            let m = message.as_ref().unwrap().as_str();
            assert!(m.contains("broken.yaml:3:8:"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        counts(&r, "replay documented"),
        replay_expectation("documented")
    );
}

#[test]
fn a_profile_forced_by_name_that_does_not_exist_fails_loudly() {
    let sb = Sandbox::new("forced", &["documented"]);
    let args = sb.args(&[]);
    let code = harness::run(
        &args,
        &sb.paths(),
        Err(GpuError::NoDriver),
        &RunOptions {
            profile: Some("nonesuch".into()),
            ..Default::default()
        },
    );
    assert_eq!(code, ExitCode::from(101));
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert_eq!(counts(&r, "profile selection"), (1, 1, 0));
}

// --- the device layer abstracted: recorded devices stand in for GPUs -----------------------

fn recorded_h200(ordinal: usize) -> std::sync::Arc<dyn accprobe::measure::target::Target> {
    let r = accprobe::model::results::RunResults::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/recorded/h200-2026-11-30.json"),
    )
    .unwrap();
    std::sync::Arc::new(accprobe::measure::target::RecordedTarget::new(ordinal, r).unwrap())
}

impl Sandbox {
    fn run_on(
        &self,
        targets: Vec<std::sync::Arc<dyn accprobe::measure::target::Target>>,
        args: &[&str],
    ) -> (ExitCode, Report) {
        let args = self.args(args);
        let code = harness::run(&args, &self.paths(), Ok(targets), &RunOptions::default());
        let xml = std::fs::read_to_string(self.paths().junit).unwrap();
        (code, Report::deserialize_from_str(&xml).unwrap())
    }
}

#[test]
fn one_recorded_h200_goes_through_the_gpu_path_green_with_plain_names() {
    let sb = Sandbox::new("one-device", &["documented", "h200"]);
    let (code, r) = sb.run_on(vec![recorded_h200(0)], &[]);
    assert_eq!(code, ExitCode::SUCCESS);
    let (cases, failures, skipped) = counts(&r, "gpu0 NVIDIA H200 / profile h200");
    assert_eq!((cases, failures), (replay_expectation("h200").0, 0));
    assert_eq!(
        skipped, 4,
        "the known deviations: acc2 not the peak at N = 7, 13, 29; the policy at N = 13"
    );
    let gpu = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str().starts_with("gpu0"))
        .unwrap();
    assert!(gpu
        .test_cases
        .iter()
        .any(|c| c.name.as_str() == "probe::chain7_acc1_effective1"));
    assert!(gpu
        .properties
        .iter()
        .any(|p| p.name.as_str() == "driver_version" && p.value.as_str() == "580.159.04"));
    assert!(
        sb.paths().results.exists(),
        "one device: results.json as usual"
    );
}

#[test]
fn two_recorded_devices_get_their_own_names_suites_and_results_files() {
    let sb = Sandbox::new("two-devices", &["documented", "h200"]);
    let (code, r) = sb.run_on(
        vec![recorded_h200(0), recorded_h200(1)],
        &["--test-threads", "4"],
    );
    assert_eq!(code, ExitCode::SUCCESS);
    for d in 0..2 {
        let suite = format!("gpu{d} NVIDIA H200 / profile h200");
        assert_eq!(counts(&r, &suite).1, 0, "{suite}");
        let s = r
            .test_suites
            .iter()
            .find(|s| s.name.as_str() == suite)
            .unwrap();
        assert!(
            s.test_cases
                .iter()
                .all(|c| c.name.as_str().starts_with(&format!("gpu{d}::"))),
            "{suite}"
        );
        assert!(sb.dir.join(format!("out/results-gpu{d}.json")).exists());
    }
    assert!(
        !sb.paths().results.exists(),
        "several devices: one results file each"
    );
    // A filter on one device's prefix measures and reports only that device.
    let (_, r) = sb.run_on(
        vec![recorded_h200(0), recorded_h200(1)],
        &["gpu1::invariant::"],
    );
    let names: Vec<&str> = r
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter().map(|c| c.name.as_str()))
        .collect();
    assert!(
        !names.is_empty() && names.iter().all(|n| n.starts_with("gpu1::invariant::")),
        "{names:?}"
    );
}

#[test]
fn a_junit_path_that_is_a_folder_fails_the_run_and_leaves_no_temporary_file() {
    let sb = Sandbox::new("junit-folder", &["documented"]);
    let mut paths = sb.paths();
    paths.junit = sb.dir.join("out/junit-folder");
    std::fs::create_dir_all(paths.junit.join("keep")).unwrap();
    let args = sb.args(&[]);
    let code = harness::run(
        &args,
        &paths,
        Err(GpuError::NoDriver),
        &RunOptions::default(),
    );
    assert_eq!(
        code,
        ExitCode::FAILURE,
        "an unwritable JUnit file fails the run"
    );
    let mut left: Vec<String> = std::fs::read_dir(sb.dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["junit-folder", "libtest.log"], "no temporary files");
    assert!(paths.junit.join("keep").is_dir(), "the folder is untouched");
}

#[test]
fn zero_test_threads_is_refused_with_exit_code_2_instead_of_hanging() {
    let sb = Sandbox::new("threads", &["documented"]);
    let (code, junit) = sb.run(&["--test-threads", "0"]);
    assert_eq!(code, ExitCode::from(2));
    assert!(junit.is_none(), "nothing ran, nothing was written");
    let (code, _) = sb.run(&["--test-threads", "1", "replay::documented::invariant"]);
    assert_eq!(code, ExitCode::SUCCESS);
}

#[test]
fn a_logfile_that_cannot_be_written_is_refused_with_exit_code_2_instead_of_a_panic() {
    // libtest-mimic panics when it cannot create the log file; that read as "stdout
    // failed" (141) with a backtrace, and marked every case unfinished.
    let sb = Sandbox::new("logfile", &["documented"]);
    let folder = sb.dir.join("out/a-folder");
    std::fs::create_dir_all(&folder).unwrap();
    for bad in [folder.clone(), sb.dir.join("out/no/such/folder/log")] {
        let code = harness::run(
            &Arguments::from_iter(["probe", "--logfile", &bad.display().to_string()]),
            &sb.paths(),
            Err(GpuError::NoDriver),
            &RunOptions::default(),
        );
        assert_eq!(code, ExitCode::from(2), "{}", bad.display());
        assert!(
            !sb.paths().junit.exists(),
            "nothing ran, nothing was written"
        );
    }
    assert!(folder.is_dir());
}

/// The real entry point with stdout `out` (`closed`, `full` or anything else: as given);
/// (code, stderr).
fn main_into(sb: &Sandbox, args: &[&str], out: &str) -> (Option<i32>, String) {
    let o = child_command("main", &sb.dir, args)
        .env(CHILD_STDOUT, out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

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
fn an_unreadable_profile_fails_its_own_case_instead_of_vanishing() {
    use std::os::unix::fs::symlink;
    let sb = Sandbox::new("unreadable", &["documented"]);
    let dir = sb.dir.join("expectations");
    symlink("gone.yaml", dir.join("h200.yaml")).unwrap();
    symlink("loop-b.yaml", dir.join("loop-a.yaml")).unwrap();
    symlink("loop-a.yaml", dir.join("loop-b.yaml")).unwrap();
    std::fs::create_dir_all(dir.join("folder.yaml")).unwrap();
    let (code, junit) = sb.run(&[]);
    assert_eq!(code, ExitCode::from(101));
    let r = junit.unwrap();
    assert_eq!(counts(&r, "expectations"), (4, 4, 0));
    let suite = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "expectations")
        .unwrap();
    let message = |name: &str| -> String {
        let case = suite
            .test_cases
            .iter()
            .find(|c| c.name.as_str() == format!("expectations::{name}"))
            .unwrap_or_else(|| panic!("no case for {name}"));
        match &case.status {
            TestCaseStatus::NonSuccess { message, .. } => message.as_ref().unwrap().to_string(),
            other => panic!("{other:?}"),
        }
    };
    assert!(message("h200.yaml").contains("a symlink to gone.yaml that cannot be followed"));
    assert!(message("loop-a.yaml").contains("cannot be followed"));
    assert!(message("folder.yaml").contains("is a folder"));
}

/// The GPU job's JUnit as readers see it: the run, each suite and each case timed and
/// stamped, the host named, every failure with a type and its whole text as the body, and
/// with `--skip replay::` nothing but the GPU's cases.
#[test]
fn the_junit_of_a_gpu_run_has_times_timestamps_hostname_bodies_and_types() {
    let sb = Sandbox::new("readers", &["documented", "h200"]);
    let mut r = accprobe::model::results::RunResults::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/recorded/h200-2026-11-30.json"),
    )
    .unwrap();
    // One variant slower than its baseline, another with a changed SASS loop.
    let slower = r
        .variants
        .iter_mut()
        .find(|v| v.name == "chain13_acc2_effective2")
        .unwrap();
    slower.summary.as_mut().unwrap().median *= 0.97;
    let changed = r
        .variants
        .iter_mut()
        .find(|v| v.name == "chain7_acc2_effective2")
        .unwrap();
    let sass = changed.sass.as_mut().unwrap();
    sass.digest = "f".repeat(64);
    let last = sass.loop_body.len() - 1;
    sass.loop_body[last] = "BRA `(.L_x_9) ;".into();
    let target: std::sync::Arc<dyn accprobe::measure::target::Target> =
        std::sync::Arc::new(accprobe::measure::target::RecordedTarget::new(0, r).unwrap());
    let (code, report) = sb.run_on(vec![target], &["--skip", "replay::", "--skip", "compile::"]);
    assert_eq!(code, ExitCode::from(101));

    let names: Vec<&str> = report.test_suites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["gpu0 NVIDIA H200 / profile h200"],
        "filtered-out replay and compile-only cases leave no suite behind"
    );
    assert!(report.timestamp.is_some() && report.time.is_some());
    let suite = &report.test_suites[0];
    assert!(suite.timestamp.is_some() && suite.time.is_some());
    assert!(
        suite
            .extra
            .get("hostname")
            .is_some_and(|h| !h.as_str().is_empty()),
        "{:?}",
        suite.extra
    );
    let mut types = Vec::new();
    for c in &suite.test_cases {
        assert!(c.time.is_some(), "{} has no time", c.name.as_str());
        assert_eq!(
            c.classname.as_ref().map(|n| n.as_str()),
            Some("accprobe::probe [gpu0 NVIDIA H200 / profile h200]")
        );
        match &c.status {
            TestCaseStatus::Success { .. } => {}
            TestCaseStatus::NonSuccess {
                message,
                ty,
                description,
                ..
            }
            | TestCaseStatus::Skipped {
                message,
                ty,
                description,
            } => {
                let (m, t, body) = (
                    message.as_ref().expect("a message").as_str(),
                    ty.as_ref().expect("a type").as_str(),
                    description.as_ref().expect("a body").as_str(),
                );
                assert!(!m.contains('\n'), "{}: {m:?}", c.name.as_str());
                assert!(
                    body.starts_with(m.trim_end_matches(" [...]")),
                    "{}: {m:?} / {body:?}",
                    c.name.as_str()
                );
                types.push((c.name.to_string(), t.to_string(), body.to_string()));
            }
        }
    }
    let of = |name: &str| {
        types
            .iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("{name} did not fail or skip: {types:?}"))
    };
    assert_eq!(of("probe::chain13_acc2_effective2").1, "regression");
    let (_, ty, body) = of("sass::chain7_acc2_effective2::unchanged");
    assert_eq!(ty, "sass-changed");
    assert!(
        body.contains("--- blessed loop\n+++ measured loop\n") && body.contains("+BRA `(.L_x_9) ;"),
        "the diff keeps its lines in the body: {body}"
    );
    assert_eq!(
        types
            .iter()
            .filter(|(_, t, _)| t == "known-deviation")
            .count(),
        4,
        "{types:?}"
    );
}

// --- ACCPROBE_REQUIRE_GPU, in-process ------------------------------------------------------

fn case_status<'a>(r: &'a Report, name: &str) -> &'a TestCaseStatus {
    &r.test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .status
}

fn message(st: &TestCaseStatus) -> String {
    match st {
        TestCaseStatus::NonSuccess { message, .. } | TestCaseStatus::Skipped { message, .. } => {
            message.as_ref().map(|m| m.to_string()).unwrap_or_default()
        }
        TestCaseStatus::Success { .. } => String::new(),
    }
}

#[test]
fn a_required_gpu_that_is_missing_fails_the_run_with_one_case_that_says_why() {
    let sb = Sandbox::new("required", &["documented"]);
    let args = sb.args(&[]);
    let code = harness::run(
        &args,
        &sb.paths(),
        Err(GpuError::NoDriver),
        &RunOptions {
            require_gpu: true,
            ..Default::default()
        },
    );
    assert_eq!(code, ExitCode::from(101));
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert_eq!(r.test_suites[0].name.as_str(), harness::REQUIRED_SUITE);
    assert_eq!(counts(&r, harness::REQUIRED_SUITE), (1, 1, 0));
    let m = message(case_status(&r, harness::REQUIRED_CASE));
    assert!(
        m.contains("ACCPROBE_REQUIRE_GPU") && m.contains(&no_gpu()),
        "{m}"
    );
    // The GPU cases are not run and do not fail: they point at gpu::required, the one
    // failing case, which says why.
    let gpu_cases = replay_expectation("documented").0;
    assert_eq!(
        counts(&r, "no gpu / profile documented"),
        (gpu_cases, 0, gpu_cases)
    );
    let m = message(case_status(&r, "probe::chain7_acc1_effective1"));
    assert_eq!(m, "not run: see gpu::required");
    let failing: Vec<&str> = r
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .filter(|c| matches!(c.status, TestCaseStatus::NonSuccess { .. }))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failing, [harness::REQUIRED_CASE]);
    // The replays are judged as ever.
    assert_eq!(
        counts(&r, "replay documented"),
        replay_expectation("documented")
    );
}

#[test]
fn a_required_gpu_that_is_there_adds_nothing() {
    let sb = Sandbox::new("required-ok", &["documented", "h200"]);
    let args = sb.args(&[]);
    let code = harness::run(
        &args,
        &sb.paths(),
        Ok(vec![recorded_h200(0)]),
        &RunOptions {
            require_gpu: true,
            ..Default::default()
        },
    );
    assert_eq!(code, ExitCode::SUCCESS);
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    assert!(r
        .test_suites
        .iter()
        .all(|s| s.name.as_str() != harness::REQUIRED_SUITE));
}

#[test]
fn a_required_gpu_whose_cases_a_filter_leaves_out_is_not_green() {
    // A typo'd filter, or one that selects only host cases, on a GPU runner: nothing on
    // the GPU was judged, so the run is red whatever else passed.
    let sb = Sandbox::new("required-filtered", &["documented", "h200"]);
    for filter in [&["nonexistent::case"][..], &["replay::"][..]] {
        let code = harness::run(
            &sb.args(filter),
            &sb.paths(),
            Ok(vec![recorded_h200(0)]),
            &RunOptions {
                require_gpu: true,
                ..Default::default()
            },
        );
        assert_eq!(code, ExitCode::from(101), "{filter:?}");
    }
    // Without ACCPROBE_REQUIRE_GPU the same filter is green.
    let code = harness::run(
        &sb.args(&["replay::"]),
        &sb.paths(),
        Ok(vec![recorded_h200(0)]),
        &RunOptions::default(),
    );
    assert_eq!(code, ExitCode::SUCCESS);
}

// --- child processes: this test binary, re-executed ----------------------------------------

const CHILD_MODE: &str = "ACCPROBE_TEST_CHILD";
const CHILD_ARGS: &str = "ACCPROBE_TEST_CHILD_ARGS";
const CHILD_DIR: &str = "ACCPROBE_TEST_CHILD_DIR";
/// `closed` or `full`: the child's stdout becomes a pipe nobody reads or `/dev/full` once
/// its own libtest has started it (which must print first).
const CHILD_STDOUT: &str = "ACCPROBE_TEST_CHILD_STDOUT";

/// The entry point of the child processes the tests below start: `main` runs the suite's
/// real entry point (`tests/probe.rs`'s), `held` the same and then, once it has written
/// `out/finished`, waits 60 s before it ends as `main` does (a signal then comes after
/// every case finished, before the end), `blocking` a run whose GPU never answers,
/// `nextest` a run on a recorded device that counts its measurements. Each ends as the
/// suite's `main` does, through `interrupt::exit`.
#[test]
#[ignore = "entry point of the child processes that the tests below start"]
fn child() {
    let Ok(mode) = std::env::var(CHILD_MODE) else {
        return;
    };
    let args = Arguments::from_iter(
        std::iter::once("probe".to_string()).chain(
            std::env::var(CHILD_ARGS)
                .unwrap_or_default()
                .split('\u{1f}')
                .filter(|a| !a.is_empty())
                .map(String::from),
        ),
    );
    let dir = std::env::var_os(CHILD_DIR).map(PathBuf::from);
    let stdout = match std::env::var(CHILD_STDOUT).as_deref() {
        Ok("closed") => {
            let (reader, writer) = std::io::pipe().unwrap();
            drop(reader);
            Some(std::os::fd::OwnedFd::from(writer))
        }
        Ok("full") => Some(std::fs::File::create("/dev/full").unwrap().into()),
        _ => None,
    };
    if let Some(fd) = stdout {
        use std::os::fd::AsRawFd;
        // SAFETY: replaces fd 1 with a descriptor this process owns.
        assert_eq!(unsafe { libc::dup2(fd.as_raw_fd(), 1) }, 1);
    }
    let code = match mode.as_str() {
        "main" => harness::main_with(args),
        "held" => {
            let code = harness::main_with(args);
            std::fs::write(dir.unwrap().join("out/finished"), code.to_string()).unwrap();
            std::thread::sleep(std::time::Duration::from_secs(60));
            code
        }
        "blocking" | "slow" => {
            let dir = dir.unwrap();
            harness::install_interrupt_handler();
            let target = std::sync::Arc::new(Blocking {
                inner: recorded_h200(0),
                started: dir.join("out/measuring-started"),
                // "slow": the GPU answers after 2 s; "blocking": never.
                hold: (mode == "slow").then(|| std::time::Duration::from_secs(2)),
            });
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::default(),
            )
        }
        "nextest" => {
            let dir = dir.unwrap();
            let target = std::sync::Arc::new(Counting {
                inner: recorded_h200(0),
                dir: dir.join("out"),
            });
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::from_env().unwrap(),
            )
        }
        "keyed" => {
            let dir = dir.unwrap();
            let target = std::sync::Arc::new(KeyedH200(recorded_h200(0)));
            harness::run_code(
                &args,
                &paths_in(&dir),
                Ok(vec![target]),
                &RunOptions::default(),
            )
        }
        other => panic!("unknown child mode {other}"),
    };
    accprobe::interrupt::exit(code);
}

/// A child process of this test binary in `mode`, with libtest arguments `args`, and an
/// environment free of the caller's ACCPROBE_ and NEXTEST_ variables.
fn child_command(mode: &str, dir: &Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "child",
        "--ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("ACCPROBE_") || k.starts_with("NEXTEST_") {
            cmd.env_remove(k.as_ref());
        }
    }
    let paths = paths_in(dir);
    cmd.env(CHILD_MODE, mode)
        .env(CHILD_ARGS, args.join("\u{1f}"))
        .env(CHILD_DIR, dir)
        .env("ACCPROBE_EXPECTATIONS", &paths.expectations)
        .env("ACCPROBE_JUNIT", &paths.junit)
        .env("ACCPROBE_RESULTS", &paths.results)
        .env("CARGO_TARGET_DIR", dir.join("out/target"))
        .env("ACCPROBE_CACHE", "off")
        // Never the host's lock directory: a stub driver registers its device there.
        .env("ACCPROBE_LOCK_DIR", dir.join("out/locks"));
    cmd
}

struct Output {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run_child(cmd: &mut std::process::Command) -> Output {
    let out = cmd.output().expect("the test binary starts");
    Output {
        code: out.status.code(),
        // libtest's own line for the child test shares a line with the child's first.
        stdout: String::from_utf8_lossy(&out.stdout).replacen("test child ... ", "\n", 1),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Whether a real libcuda loads here (then "no driver" cannot be shown).
fn driver_present() -> bool {
    unsafe { cudarc::driver::sys::is_culib_present() }
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
    let failed: Vec<&str> = r
        .test_suites
        .iter()
        .flat_map(|s| s.test_cases.iter())
        .filter(|c| matches!(c.status, TestCaseStatus::NonSuccess { .. }))
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(failed, ["run::interrupted"]);
}

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

// --- a stub libcuda: the driver loads, the device does not work -----------------------------

/// libcuda.so and libnvrtc.so stubs, built with `cc` into `dir`; `None` (and a message)
/// when there is no C compiler. The stub's `STUB_CUDA` variable picks its failure.
fn stub_driver(dir: &Path) -> Option<PathBuf> {
    let lib = dir.join("stub-lib");
    std::fs::create_dir_all(&lib).unwrap();
    let c = lib.join("cuda.c");
    // Only the symbols the detection path resolves (cudarc loads each at first call), and
    // only valid CUresult values: 0 success, 2 out of memory, 100 no device. The device is
    // of compute capability 9.0 (attribute 75 the major, 76 the minor).
    std::fs::write(
        &c,
        r#"#include <stdlib.h>
#include <string.h>
static int is(const char *m) { const char *v = getenv("STUB_CUDA"); return v && strcmp(v, m) == 0; }
int cuInit(unsigned int flags) { (void)flags; return is("init_fails") ? 100 : 0; }
int cuDeviceGetCount(int *n) { *n = is("no_devices") ? 0 : 1; return 0; }
int cuDeviceGet(int *d, int ordinal) { *d = ordinal; return 0; }
int cuDeviceGetPCIBusId(char *b, int len, int dev) { (void)dev; if (len < 13) return 1; strcpy(b, "0000:ab:00.0"); return 0; }
int cuDeviceGetUuid_v2(unsigned char *u, int dev) { (void)dev; memset(u, 0xab, 16); return 0; }
int cuDeviceGetName(char *name, int len, int dev) { (void)dev; if (len < 9) return 1; strcpy(name, "Stub GPU"); return 0; }
int cuDeviceGetAttribute(int *v, int attribute, int dev) { (void)dev; *v = attribute == 76 ? 0 : 9; return 0; }
int cuDevicePrimaryCtxRetain(void **ctx, int dev) { (void)ctx; (void)dev; return 2; }
int cuGetErrorString(int e, const char **s) { (void)e; *s = "stub error"; return 0; }
int cuGetErrorName(int e, const char **s) { (void)e; *s = "STUB"; return 0; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
"#,
    )
    .unwrap();
    let nvrtc = lib.join("nvrtc.c");
    std::fs::write(&nvrtc, "int accprobe_stub_nvrtc;\n").unwrap();
    for (src, out) in [(&c, "libcuda.so"), (&nvrtc, "libnvrtc.so")] {
        let status = std::process::Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(lib.join(out))
            .arg(src)
            .status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("cc failed on {}: {s}", src.display()),
            Err(e) => {
                eprintln!("skipped: no C compiler to build the stub libcuda ({e})");
                return None;
            }
        }
    }
    Some(lib)
}

fn with_stub(cmd: &mut std::process::Command, lib: &Path, mode: &str) {
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(p) => format!("{}:{}", lib.display(), p.to_string_lossy()),
        None => lib.display().to_string(),
    };
    cmd.env("LD_LIBRARY_PATH", path).env("STUB_CUDA", mode);
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
            "CUDA driver found but cuInit failed: CUDA_ERROR_NO_DEVICE (stub error)",
        ),
        ("no_devices", "no CUDA device found"),
        ("context_fails", "cannot create a context on device 0"),
    ] {
        let _ = std::fs::remove_file(sb.paths().junit);
        let mut cmd = child_command("main", &sb.dir, &[]);
        with_stub(&mut cmd, &lib, mode);
        let out = run_child(cmd.env("ACCPROBE_REQUIRE_GPU", "1"));
        assert_eq!(out.code, Some(101), "{mode}: {}", out.stderr);
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

// --- one measurement per nextest run ---------------------------------------------------------

/// A recorded device that counts its measurements in `dir/measurements` and notes in
/// `dir/overlap` when two processes measured at once.
struct Counting {
    inner: std::sync::Arc<dyn accprobe::measure::target::Target>,
    dir: PathBuf,
}

impl accprobe::measure::target::Target for Counting {
    fn ordinal(&self) -> usize {
        self.inner.ordinal()
    }
    fn identity(&self) -> &accprobe::model::gpu::GpuIdentity {
        self.inner.identity()
    }
    fn prepare(&self, all: &[accprobe::model::variant::Variant]) -> Result<(), GpuError> {
        self.inner.prepare(all)
    }
    fn measure(
        &self,
        variants: &[accprobe::model::variant::Variant],
        settings: &accprobe::model::settings::ProbeSettings,
        all: &[accprobe::model::variant::Variant],
    ) -> Result<Vec<Result<accprobe::model::results::VariantResult, GpuError>>, GpuError> {
        use std::io::Write;
        let busy = self.dir.join("measuring");
        if std::fs::File::create_new(&busy).is_err() {
            std::fs::write(self.dir.join("overlap"), "two processes measured at once").unwrap();
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("measurements"))
            .and_then(|mut f| writeln!(f, "{} {}", std::process::id(), variants.len()))
            .unwrap();
        // Long enough for the other processes to be waiting on the lock by now.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let _ = std::fs::remove_file(&busy);
        self.inner.measure(variants, settings, all)
    }
    fn environment(&self, clock: Option<f64>) -> accprobe::model::gpu::Environment {
        self.inner.environment(clock)
    }
    fn sass_unavailable(&self) -> Option<String> {
        self.inner.sass_unavailable()
    }
}

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
    let mut want = cases.to_vec();
    want.sort();
    assert_eq!(names, want);
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

// --- SIGTERM and SIGINT -------------------------------------------------------------------

/// A recorded device whose measurement never ends; it touches `started` when it begins.
/// A device whose measuring starts (it writes `started`) and then never answers, or
/// answers with `inner`'s results after `hold`.
struct Blocking {
    inner: std::sync::Arc<dyn accprobe::measure::target::Target>,
    started: PathBuf,
    hold: Option<std::time::Duration>,
}

impl accprobe::measure::target::Target for Blocking {
    fn ordinal(&self) -> usize {
        self.inner.ordinal()
    }
    fn identity(&self) -> &accprobe::model::gpu::GpuIdentity {
        self.inner.identity()
    }
    fn measure(
        &self,
        variants: &[accprobe::model::variant::Variant],
        settings: &accprobe::model::settings::ProbeSettings,
        all: &[accprobe::model::variant::Variant],
    ) -> Result<Vec<Result<accprobe::model::results::VariantResult, GpuError>>, GpuError> {
        std::fs::write(&self.started, "").unwrap();
        match self.hold {
            Some(d) => {
                std::thread::sleep(d);
                self.inner.measure(variants, settings, all)
            }
            None => loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
            },
        }
    }
    fn environment(&self, clock: Option<f64>) -> accprobe::model::gpu::Environment {
        self.inner.environment(clock)
    }
    fn sass_unavailable(&self) -> Option<String> {
        self.inner.sass_unavailable()
    }
}

/// The recorded H200 with a device key, as a real device has: its session takes the
/// cross-process lock.
struct KeyedH200(std::sync::Arc<dyn accprobe::measure::target::Target>);

impl accprobe::measure::target::Target for KeyedH200 {
    fn ordinal(&self) -> usize {
        self.0.ordinal()
    }
    fn identity(&self) -> &accprobe::model::gpu::GpuIdentity {
        self.0.identity()
    }
    fn measure(
        &self,
        variants: &[accprobe::model::variant::Variant],
        settings: &accprobe::model::settings::ProbeSettings,
        all: &[accprobe::model::variant::Variant],
    ) -> Result<Vec<Result<accprobe::model::results::VariantResult, GpuError>>, GpuError> {
        self.0.measure(variants, settings, all)
    }
    fn environment(&self, clock: Option<f64>) -> accprobe::model::gpu::Environment {
        self.0.environment(clock)
    }
    fn sass_unavailable(&self) -> Option<String> {
        self.0.sass_unavailable()
    }
    fn device_key(&self) -> Option<accprobe::measure::lock::DeviceKey> {
        Some(accprobe::measure::lock::DeviceKey {
            ordinal: 0,
            pci_bus_id: Some("0000:19:00.0".into()),
            uuid: None,
        })
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
        assert_eq!(message(&c.status), reason, "{}", c.name.as_str());
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("SIGTERM did not end a run whose JUnit file blocks");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(143), "{status}");
    let m = std::fs::symlink_metadata(&fifo).unwrap();
    use std::os::unix::fs::FileTypeExt;
    assert!(m.file_type().is_fifo(), "the FIFO was replaced");
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

// --- every termination signal, at any moment ----------------------------------------------

/// A child run of the real entry point in `mode` (`held`: it does not end on its own before
/// it is signalled; `main`: the run left to finish), started with the termination signals blocked from its first instruction, as
/// the suite's `main` blocks them first. Without a GPU: the stub driver with no device
/// where `cc` builds it, else no driver at all; `None` where neither can be had (a real
/// driver and no C compiler).
fn held_child(sb: &Sandbox, mode: &str) -> Option<std::process::Command> {
    let mut cmd = child_command(mode, &sb.dir, &["--skip", "compile::"]);
    match stub_driver(&sb.dir) {
        Some(lib) => with_stub(&mut cmd, &lib, "no_devices"),
        None if !driver_present() => {}
        None => return None,
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| match accprobe::interrupt::block_in_this_thread() {
            0 => Ok(()),
            e => Err(std::io::Error::from_raw_os_error(e)),
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
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child did not end after signal {signal}");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    };
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
            m.contains("before its cases were planned"),
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
    let reference = run_child(plain.stderr(std::process::Stdio::piped()));
    assert_eq!(reference.code, Some(0), "{}", reference.stderr);
    let planned = states(
        &Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap(),
    );
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

#[test]
fn compile_only_cases_of_a_toolchain_not_installed_are_ignored_at_list_time() {
    // nextest only learns of an ignored case from `--list --ignored`: a case that is
    // ignored only when it runs shows PASS there, although nothing was compiled.
    let sb = Sandbox::new("toolchain-missing", &["h200"]);
    let none_installed = sb.dir.join("out/toolchains");
    std::fs::create_dir_all(&none_installed).unwrap();
    let listed = || -> Vec<String> {
        let o = run_child(
            child_command(
                "main",
                &sb.dir,
                &["--list", "--format", "terse", "--ignored", "compile::"],
            )
            .env("ACCPROBE_TOOLCHAINS", &none_installed),
        );
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        o.stdout
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(String::from)
            .collect()
    };
    // Not asked for (ACCPROBE_REQUIRE_TOOLCHAINS unset): one ignored case per toolchain,
    // not one per architecture and check.
    let ignored = listed();
    let profile = accprobe::catalog::load(&sb.dir.join("expectations/h200.yaml")).unwrap();
    let toolchains = profile.compile_only.as_ref().unwrap().toolchains.clone();
    let want: Vec<String> = toolchains
        .iter()
        .map(|tc| format!("compile::h200::nvrtc{tc}"))
        .collect();
    assert_eq!(ignored, want);

    // A run says why (what to install, why not the system NVRTC), in JUnit and in one
    // line of the closing summary.
    let run = run_child(
        child_command("main", &sb.dir, &["--include-ignored", "compile::"])
            .env("ACCPROBE_TOOLCHAINS", &none_installed),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let compile_cases = accprobe::verdict::compile_only::cases(&profile).len();
    let line = format!(
        "accprobe summary:   ignored: NVRTC {} not installed (one case per profile and \
         toolchain, for {compile_cases} compile-only cases; ci/toolchains.sh installs them): {}",
        toolchains.join(", "),
        toolchains.len()
    );
    assert!(run.stdout.contains(&line), "{line}\n{}", run.stdout);
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("accprobe summary:   ignored:"))
            .count(),
        1,
        "{}",
        run.stdout
    );
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    let suite = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "compile-only h200")
        .unwrap();
    assert!(!suite.test_cases.is_empty());
    for c in &suite.test_cases {
        match &c.status {
            TestCaseStatus::Skipped {
                ty, description, ..
            } => {
                assert_eq!(ty.as_deref(), Some("no-toolchain"), "{}", c.name.as_str());
                let why = description
                    .as_ref()
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                assert!(
                    why.contains("ci/toolchains.sh") && why.contains("system NVRTC"),
                    "{why}"
                );
            }
            other => panic!("{}: {other:?}", c.name.as_str()),
        }
    }

    // Asked for: every case is listed, to run and fail.
    let required = run_child(
        child_command(
            "main",
            &sb.dir,
            &["--list", "--format", "terse", "compile::"],
        )
        .env("ACCPROBE_TOOLCHAINS", &none_installed)
        .env("ACCPROBE_REQUIRE_TOOLCHAINS", "1"),
    );
    assert_eq!(required.code, Some(0), "{}", required.stderr);
    assert_eq!(
        required
            .stdout
            .lines()
            .filter(|l| l.ends_with(": test"))
            .count(),
        compile_cases,
        "{}",
        required.stdout
    );
}

// --- the nextest run folder: confined to itself, and no record lost silently ---------------

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
