//! The harness contract in process on recorded devices, continued from `in_process`:
//! what the JUnit file of a GPU run holds, what `ACCPROBE_REQUIRE_GPU` does, and the mode
//! a run asks for against the profile's own.

use crate::support::*;
use accprobe::error::GpuError;
use accprobe::harness::{self, RunOptions};
use quick_junit::{Report, TestCaseStatus};
use std::path::Path;
use std::process::ExitCode;

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
pub(super) fn gpu_deviations(p: &accprobe::expectations::profile::Profile) -> Vec<&str> {
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
