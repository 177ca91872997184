//! A run on a GPU no profile names (the recorded H200 with only the documented profile):
//! the closing summary and every failing case say to run `cargo xtask onboard` and what
//! it writes; a GPU that has its profile hears nothing of it.

use crate::support::*;
use quick_junit::TestCaseStatus;

/// A failing case's whole text: the JUnit body (the `message` attribute is its first
/// line), which is also what libtest prints.
fn body(st: &TestCaseStatus) -> String {
    match st {
        TestCaseStatus::NonSuccess { description, .. } => description
            .as_ref()
            .map(|d| d.to_string())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

const HINT: &str =
    "no profile names GPU \"NVIDIA H200\": run `cargo xtask onboard` on this machine";
const WRITES: &str = "expectations/h200.yaml";

#[test]
fn every_failing_case_of_an_unknown_gpu_names_the_onboarding_command() {
    let sb = Sandbox::new("onboard-cases", &["documented"]);
    let (_, r) = sb.run_on(
        vec![recorded_h200(0)],
        &["--skip", "replay::", "--skip", "compile::"],
    );
    let failing = failing_cases(&r);
    // The study's peak at every chain length and its policy at N=13 fail on the H200.
    for case in [
        "invariant::acc2_is_peak::chain7",
        "invariant::acc2_is_peak::chain13",
        "invariant::acc2_is_peak::chain29",
        "policy::study::chain13",
    ] {
        assert!(failing.contains(&case), "{case} not failing: {failing:?}");
    }
    for case in &failing {
        let m = body(case_status(&r, case));
        assert!(
            // The JUnit file carries the text as viewers render it (text::for_viewers).
            m.contains(accprobe::text::for_viewers(HINT).as_ref())
                && m.contains(WRITES)
                && m.contains("expectations/baselines/h200.yaml"),
            "{case}: {m}"
        );
    }
}

#[test]
fn the_closing_summary_of_an_unknown_gpu_names_the_command_and_a_known_gpu_does_not() {
    let run = |profiles: &[&str]| {
        let sb = Sandbox::new("onboard-summary", profiles);
        run_child(&mut child_command(
            "keyed",
            &sb.dir,
            &["--skip", "replay::", "--skip", "compile::"],
        ))
    };
    let out = run(&["documented"]);
    assert_eq!(out.code, Some(101), "{}", out.stderr);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("accprobe summary: no profile names GPU"))
        .unwrap_or_else(|| panic!("no onboarding line in:\n{}", out.stdout));
    assert!(
        line.contains(HINT) && line.contains(WRITES) && line.contains("for review and commit"),
        "{line}"
    );
    let out = run(&["documented", "h200"]);
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    assert!(
        !out.stdout.contains("cargo xtask onboard"),
        "{}",
        out.stdout
    );
}
