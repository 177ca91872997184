//! A heuristic change is a diff: the gated policy's picks are blessed with the baselines,
//! and `policy::<name>::picks::<context>` judges a changed pick against the blessed one on
//! the committed H200 run, whatever the context's own policy case concludes.

use crate::common::{case, load, outcome, root};
use accprobe::expectations::policy::Policy;
use accprobe::expectations::policy_source::PolicySource;
use accprobe::expectations::profile::Profile;
use accprobe::verdict::cases::cases;
use accprobe::verdict::{judge, FailureKind, Outcome};
use std::path::Path;

/// The H200 profile gating the study policy with each `(from, to)` replaced in its file.
fn changed(edits: &[(&str, &str)]) -> Profile {
    let mut p = load("h200");
    let mut text =
        std::fs::read_to_string(root().join("expectations/policies/study.yaml")).unwrap();
    for (from, to) in edits {
        assert!(text.contains(from), "{from}");
        text = text.replace(from, to);
    }
    let policy = Policy::parse(&text, Path::new("changed.yaml")).unwrap();
    p.policy_gate.as_mut().unwrap().source = PolicySource::File(policy);
    p
}

#[test]
fn the_committed_picks_hold_on_the_committed_run() {
    let p = load("h200");
    let r = p.recorded.clone().unwrap();
    for chain in [7, 13, 29] {
        match outcome(&p, &r, &format!("policy::study::picks::chain{chain}")) {
            Outcome::Pass(m) => {
                assert!(m.contains("picks acc2") && m.contains("as blessed"), "{m}")
            }
            other => panic!("chain{chain}: {other:?}"),
        }
    }
}

#[test]
fn a_known_deviation_does_not_hide_a_worse_pick() {
    // The study policy's default K from 2 to 3 on the committed H200 run: its picks case
    // is red, and so is chain13's own policy case: acc3 is not the pick its known deviation
    // records (the blessed acc2), so that deviation does not excuse it.
    let p = changed(&[("default_accumulators: 2", "default_accumulators: 3")]);
    let r = p.recorded.clone().unwrap();
    let v = judge(case(&cases(&p), "policy::study::chain13"), &p, &r);
    let Outcome::Fail(f) = &v.outcome else {
        panic!("{:?}", v.outcome);
    };
    let m = f.text();
    assert!(
        m.starts_with("policy study picks acc3 at chain 13")
            && m.contains(
                "not the known deviation: it records the blessed pick acc2, and the pick is acc3"
            )
            && m.contains("the study's policy picks acc2 at N=13"),
        "{m}"
    );
    assert_eq!(v.failure, Some(FailureKind::Policy));
    let v = judge(case(&cases(&p), "policy::study::picks::chain13"), &p, &r);
    let Outcome::Fail(f) = &v.outcome else {
        panic!("{:?}", v.outcome);
    };
    let m = f.text();
    assert!(
        m.contains(
            "picks acc3 for chain13 where acc2 was blessed: acc3 140844.0 against acc2 144926.1 (-2.82%, tolerance 2.00%)"
        ) && m.contains("worse than the blessed one"),
        "{m}"
    );
    assert_eq!(f.place.case, "policy::study::picks::chain13");
    assert_eq!(f.place.subject.as_deref(), Some("chain13"));
    let (measured, expected) = (f.measured.as_ref().unwrap(), f.expected.as_ref().unwrap());
    assert_eq!(
        (format!("{:.1}", measured.value), measured.unit.as_str()),
        ("140844.0".to_string(), "progress")
    );
    assert_eq!(format!("{:.1}", expected.figure.value), "144926.1");
    assert_eq!(expected.bound, accprobe::verdict::failure::Bound::AtLeast);
    assert_eq!(expected.tolerance, Some(0.02));
    assert_eq!(
        f.suspect.as_ref().map(|s| s.who),
        Some(accprobe::verdict::suspect::Who::Policy),
        "{m}"
    );
    assert_eq!(v.failure, Some(FailureKind::Policy));
}

#[test]
fn a_known_deviation_does_not_excuse_a_pick_that_was_not_measured() {
    // acc6 is measured nowhere: chain13's known deviation (acc2 below the best) is not why
    // its case fails now.
    let p = changed(&[
        ("  accumulators: 4", "  accumulators: 7"),
        ("default_accumulators: 2", "default_accumulators: 6"),
    ]);
    let r = p.recorded.clone().unwrap();
    let v = judge(case(&cases(&p), "policy::study::chain13"), &p, &r);
    let Outcome::Fail(f) = &v.outcome else {
        panic!("{:?}", v.outcome);
    };
    let m = f.text();
    assert!(
        m.starts_with("policy study picks acc6 at chain 13, which the profile does not measure")
            && m.contains("not the known deviation")
            && m.contains("the study's policy picks acc2 at N=13"),
        "{m}"
    );
}

#[test]
fn a_better_pick_passes_asking_for_a_bless() {
    // Default K = 5: at chain 13 acc5 149252.5 beats the blessed acc2 144926.1 by 2.99%.
    let p = changed(&[
        ("  accumulators: 4", "  accumulators: 7"),
        ("default_accumulators: 2", "default_accumulators: 5"),
    ]);
    let r = p.recorded.clone().unwrap();
    match outcome(&p, &r, "policy::study::picks::chain13") {
        Outcome::Pass(m) => assert!(
            m.contains("acc5 149252.5 against acc2 144926.1 (+2.99%")
                && m.contains("the new pick is better; bless it (cargo xtask bless)"),
            "{m}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_context_without_a_blessed_pick_fails_asking_for_one() {
    let mut p = load("h200");
    p.baselines.as_mut().unwrap().policy_picks.remove("chain29");
    let r = p.recorded.clone().unwrap();
    let v = judge(case(&cases(&p), "policy::study::picks::chain29"), &p, &r);
    assert!(
        matches!(&v.outcome, Outcome::Fail(f) if f.verdict.starts_with("no blessed pick of policy study for chain29")),
        "{v:?}"
    );
    assert_eq!(v.failure, Some(FailureKind::NoBaseline));
}

#[test]
fn bless_records_a_changed_pick_as_a_diff_line() {
    // The contexts measure K = 1, 2, 4 and 8 only: a default of 3 picks a K the committed
    // run does not hold there, and bless refuses it, naming the context.
    let p = changed(&[("default_accumulators: 2", "default_accumulators: 3")]);
    let r = p.recorded.clone().unwrap();
    let e = accprobe::bless::policy_picks(&p, &r).unwrap_err();
    assert!(
        matches!(&e, accprobe::bless::BlessError::PickNotMeasured { context, k: 3, .. } if context == "chain7_w16"),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("refusing to bless: policy study in context chain7_w16: its pick acc3 is not in the results"),
        "{e}"
    );
    // A default of 1, measured everywhere: chain13's pick changes and is a diff line.
    let p = changed(&[("default_accumulators: 2", "default_accumulators: 1")]);
    let file = p.baselines.as_ref().unwrap().file.clone();
    let picks = accprobe::bless::policy_picks(&p, &r).unwrap();
    assert_eq!(picks["chain13"].accumulators, 1);
    assert_eq!(picks["chain13"].progress, 108695.0);
    let input = accprobe::bless::Bless {
        profile: &p,
        results: &r,
        results_label: "run.json",
        command: "cmd",
        file: &file,
        current: p.baselines.as_ref(),
    };
    let b = accprobe::bless::prepare_with(&input, &picks);
    assert!(
        b.diff
            .contains(&"~ policy pick chain13: acc2 (144926.1) -> acc1 (108695.0)".to_string()),
        "{:?}",
        b.diff
    );
    // The side chains' context still gets the wide K (acc4), as blessed: no diff line.
    assert!(
        !b.diff.iter().any(|l| l.contains("policy pick chain13_s4:")),
        "{:?}",
        b.diff
    );
    assert!(
        b.contents
            .contains("policy_picks:\n  chain13:\n    accumulators: 1\n"),
        "{}",
        b.contents
    );
}
