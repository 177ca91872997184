//! The harness contract of the generated suite (src/harness, docs/harness.md), in process
//! with no GPU or with recorded devices: what `--list` does, what a filter runs, how a
//! broken or unreadable profile is reported, what the JUnit file holds, what
//! `ACCPROBE_REQUIRE_GPU` does. The JUnit file is read back with quick-junit's own
//! deserializer.

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

/// The GPU job's JUnit as readers see it: the run, each suite and each case timed and
/// stamped, the host named, every failure with a type and its whole text as the body, and
/// with `--skip replay::` nothing but the GPU's cases.
#[test]
fn the_junit_of_a_gpu_run_has_times_timestamps_hostname_bodies_and_types() {
    let sb = Sandbox::new("readers", &["documented", "h200"]);
    let mut r = accprobe::model::results::RunResults::load(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("expectations/recorded/h200-2026-12-04-contexts-wave.json"),
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
                assert!(m.chars().count() <= 200, "{}: {m:?}", c.name.as_str());
                // The message is the verdict (the body's first line, whole or cut at a
                // word) and the head of the first suspect, whole, where the body has one.
                let suspect = body.lines().find_map(accprobe::verdict::suspect::head);
                let verdict = match suspect {
                    Some(head) => m
                        .strip_suffix(&format!("; {head}"))
                        .unwrap_or_else(|| panic!("{}: no {head:?} in {m:?}", c.name.as_str())),
                    None => m,
                };
                let verdict = verdict.strip_suffix('…').unwrap_or(verdict);
                assert!(
                    body.starts_with(verdict),
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
    // Every known deviation the GPU judges is skipped as one, and nothing else is: the
    // recorded run (the one h200.yaml names) holds every context, so no case is predated.
    let p = accprobe::catalog::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/h200.yaml"),
    )
    .unwrap();
    let deviations = gpu_deviations(&p);
    let mut known: Vec<&str> = types
        .iter()
        .filter(|(_, t, _)| t == "known-deviation")
        .map(|(n, _, _)| n.as_str())
        .collect();
    known.sort();
    assert_eq!(known, deviations, "{types:?}");
    assert_eq!(known.len(), 12, "{types:?}");
    assert!(
        types.iter().all(|(_, t, _)| t != "cannot-judge"),
        "{types:?}"
    );
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
    let failing = failing_cases(&r);
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

/// The known deviations of `p` the GPU suite judges (the compile-only gate's are not its),
/// sorted.
fn gpu_deviations(p: &accprobe::expectations::profile::Profile) -> Vec<&str> {
    let mut deviations: Vec<&str> = p
        .known_deviations
        .keys()
        .map(|k| k.as_str())
        .filter(|k| !k.starts_with("compile::"))
        .collect();
    deviations.sort();
    deviations
}

/// The recorded H200 run, keeping the mode of every measurement it is asked for.
struct ModeSeen {
    inner: std::sync::Arc<dyn accprobe::measure::target::Target>,
    modes: std::sync::Mutex<Vec<accprobe::model::settings::Mode>>,
}

impl accprobe::measure::target::Target for ModeSeen {
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
        self.modes.lock().unwrap().push(settings.mode);
        self.inner.measure(variants, settings, all)
    }
    fn environment(&self, clock: Option<f64>) -> accprobe::model::gpu::Environment {
        self.inner.environment(clock)
    }
}

#[test]
fn a_mode_asked_for_is_the_runs_and_the_profile_keeps_its_own() {
    use accprobe::model::settings::Mode;
    let sb = Sandbox::new("mode-override", &["documented", "h200"]);
    let args = sb.args(&["--exact", "probe::chain7_acc2_effective2"]);
    let seen = std::sync::Arc::new(ModeSeen {
        inner: recorded_h200(0),
        modes: std::sync::Mutex::new(Vec::new()),
    });
    let code = harness::run(
        &args,
        &sb.paths(),
        Ok(vec![seen.clone()]),
        &RunOptions {
            mode: Some(Mode::Serial),
            ..Default::default()
        },
    );
    assert_eq!(code, ExitCode::SUCCESS);
    // Measured in the mode asked for, and recorded as such.
    let modes = seen.modes.lock().unwrap().clone();
    assert!(
        !modes.is_empty() && modes.iter().all(|m| *m == Mode::Serial),
        "{modes:?}"
    );
    let r = accprobe::model::results::RunResults::load(&sb.paths().results).unwrap();
    assert_eq!(r.mode, Mode::Serial);
    // The profile the run chose is as written: wave, the mode its baselines are blessed in.
    let p = accprobe::catalog::load(&sb.paths().expectations.join("h200.yaml")).unwrap();
    assert_eq!(p.probe.mode, Mode::Wave);
    let session =
        accprobe::measure::session::GpuSession::new(p, String::new(), Ok(recorded_h200(0)))
            .in_mode(Some(Mode::Serial));
    assert_eq!(session.mode(), Mode::Serial);
    assert_eq!(session.profile.probe.mode, Mode::Wave);
}
