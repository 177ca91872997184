//! The harness contract of the generated suite (src/harness, docs/harness.md), in process
//! with no GPU or with recorded devices: what `--list` does, what a filter runs, how a
//! broken or unreadable profile is reported, what a folder for a JUnit path does (the JUnit
//! file of a GPU run and `ACCPROBE_REQUIRE_GPU` are `in_process_devices`). The JUnit file is read back with quick-junit's own
//! deserializer.

use super::in_process_devices::gpu_deviations;
use crate::support::*;
use accprobe::error::GpuError;
use accprobe::harness::{self, RunOptions};
use libtest_mimic::Arguments;
use quick_junit::{Report, TestCaseStatus};
use std::path::Path;
use std::process::ExitCode;

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
fn without_a_gpu_every_ignored_line_libtest_prints_says_why() {
    // A case ignored at list time (no GPU) printed a bare `ignored`, unlike the cases
    // ignored once they ran.
    let sb = Sandbox::new("reasons", &["documented"]);
    let (code, _) = sb.run(&["--skip", "compile::"]);
    assert_eq!(code, ExitCode::SUCCESS);
    let log = std::fs::read_to_string(sb.dir.join("out/libtest.log")).unwrap();
    let ignored: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("test ") && l.contains(" ... ignored"))
        .collect();
    let gpu_cases = replay_expectation("documented").0;
    assert!(ignored.len() >= gpu_cases, "{log}");
    let bare: Vec<&&str> = ignored.iter().filter(|l| l.ends_with(" ignored")).collect();
    assert!(bare.is_empty(), "{} bare: {bare:#?}", bare.len());
    let probe = ignored
        .iter()
        .find(|l| l.starts_with("test probe::chain7_acc1_effective1 "))
        .expect("the GPU case's line");
    assert!(
        probe.ends_with(&format!(" ... ignored ({})", no_gpu())),
        "{probe}"
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

#[test]
fn a_recorded_run_older_than_the_contexts_judges_the_policy_on_what_it_measured() {
    // The 2026-11-30 H200 run holds the study's 69 variants only: the contexts' cases are
    // skipped as predated, and the base policy cases are judged, never failed for the
    // contexts the run never measured.
    let r = accprobe::model::results::RunResults::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/recorded/h200-2026-11-30.json"),
    )
    .unwrap();
    let target = std::sync::Arc::new(accprobe::measure::target::RecordedTarget::new(0, r).unwrap());
    let sb = Sandbox::new("predating", &["documented", "h200"]);
    let (code, report) = sb.run_on(vec![target], &[]);
    let gpu = report
        .test_suites
        .iter()
        .find(|s| s.name.as_str().starts_with("gpu0"))
        .unwrap();
    let failed: Vec<&str> = gpu
        .test_cases
        .iter()
        .filter(|c| {
            !matches!(
                c.status,
                TestCaseStatus::Success { .. } | TestCaseStatus::Skipped { .. }
            )
        })
        .map(|c| c.name.as_str())
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    assert_eq!(code, ExitCode::SUCCESS);
    let status = |name: &str| {
        gpu.test_cases
            .iter()
            .find(|c| c.name.as_str() == name)
            .map(|c| c.status.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    assert!(matches!(
        status("policy::study::chain29"),
        TestCaseStatus::Success { .. }
    ));
    assert!(matches!(
        status("policy::study::chain7_sinkD"),
        TestCaseStatus::Success { .. }
    ));
    // The known deviation at N = 13 is excused, as on a run with the contexts.
    assert!(matches!(
        status("policy::study::chain13"),
        TestCaseStatus::Skipped { .. }
    ));
}

#[test]
fn one_recorded_h200_goes_through_the_gpu_path_green_with_plain_names() {
    let sb = Sandbox::new("one-device", &["documented", "h200"]);
    let (code, r) = sb.run_on(vec![recorded_h200(0)], &[]);
    assert_eq!(code, ExitCode::SUCCESS);
    let (cases, failures, skipped) = counts(&r, "gpu0 NVIDIA H200 / profile h200");
    assert_eq!(
        (cases, failures),
        (replay_expectation("h200").0 + 1, 0),
        "every case of the profile and the run-level gpu::measure"
    );
    // The recorded H200 run holds every context the profile measures: nothing is
    // predated, every loop schedule is blessed, and what is skipped is exactly the
    // profile's known deviations the GPU judges (the compile-only gate's are not its).
    let p = accprobe::catalog::load(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/h200.yaml"),
    )
    .unwrap();
    let recorded = p.recorded.clone().unwrap();
    let all = accprobe::verdict::cases::cases(&p);
    let predated: Vec<&str> = all
        .iter()
        .filter(|c| accprobe::verdict::cases::unrecorded(c, &recorded).is_some())
        .map(|c| c.name.as_str())
        .collect();
    assert!(predated.is_empty(), "{predated:?}");
    let deviations = gpu_deviations(&p);
    let gpu = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str().starts_with("gpu0"))
        .unwrap();
    let mut skipped_names: Vec<&str> = gpu
        .test_cases
        .iter()
        .filter(|c| matches!(c.status, TestCaseStatus::Skipped { .. }))
        .map(|c| c.name.as_str())
        .collect();
    skipped_names.sort();
    assert_eq!(skipped, skipped_names.len());
    assert_eq!(
        skipped_names, deviations,
        "the known deviations: acc2 not the peak at N = 7, 13, 29; the policy at N = 13, \
         and in the contexts at 16 warps (every N), 32 warps (N = 7 and 29) and 32 warps \
         with 48 values live (every N)"
    );
    assert_eq!(
        skipped, 12,
        "h200.yaml's 12 known deviations the GPU judges"
    );
    // The loop schedules are blessed for the base contexts and the contexts alike.
    let schedules: Vec<&quick_junit::TestCase> = gpu
        .test_cases
        .iter()
        .filter(|c| {
            c.name.as_str().starts_with("sass::") && c.name.as_str().ends_with("::schedule")
        })
        .collect();
    assert_eq!(schedules.len(), recorded.variants.len(), "one per variant");
    assert!(schedules
        .iter()
        .all(|c| matches!(c.status, TestCaseStatus::Success { .. })));
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
        !names.is_empty()
            && names
                .iter()
                .all(|n| n.starts_with("gpu1::invariant::") || *n == "gpu1::gpu::measure"),
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
