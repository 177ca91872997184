//! The ceiling check judges what the hardware bounds: a scheduler's issue bounds the mean of
//! its warps, not one warp it favours; the FFMA latency and a scheduler to itself bound each
//! warp.

use crate::common::*;
use accprobe::verdict::Outcome;

// Chain 7 over 7 partials: issue-bound, its latency bound far above.
const CASE: &str = "validity::chain7_acc8_effective7::ceiling";
const NAME: &str = "chain7_acc8_effective7";

/// The variant's issue bound at its warps per scheduler, and a scheduler to itself: the H200
/// profile's 8 warps on 4 schedulers, budget / loop instructions.
fn bounds(r: &accprobe::model::results::RunResults) -> (f64, f64) {
    let v = r.variants.iter().find(|v| v.name == NAME).unwrap();
    let budget = r.settings.unwrap().budget_cycles as f64;
    let alone = budget / v.sass.as_ref().unwrap().loop_body.len() as f64;
    (alone / 2.0, alone)
}

#[test]
fn a_warp_the_scheduler_favours_may_pass_the_shared_issue_bound() {
    let (p, mut r) = h200_with(&h200_sass());
    let (issue, alone) = bounds(&r);
    let v = variant(&mut r, NAME);
    // One warp of one launch above the warps' share of the issue, below a scheduler alone.
    let favoured = (issue * 1.2).min(alone * 0.99) as u64;
    assert!(favoured as f64 > issue);
    v.samples[0][0] = favoured;
    v.summary.as_mut().unwrap().max = favoured;
    match outcome(&p, &r, CASE) {
        Outcome::Pass(text) => assert!(text.contains("best warp"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_launch_whose_warps_together_outrun_the_issue_bound_fails() {
    let (p, mut r) = h200_with(&h200_sass());
    let (issue, _) = bounds(&r);
    let v = variant(&mut r, NAME);
    let over = (issue * 1.05) as u64;
    for x in v.samples[3].iter_mut() {
        *x = over;
    }
    let text = failure(&p, &r, CASE);
    assert!(
        text.contains(&format!("best launch's mean {over}.0")),
        "{text}"
    );
    assert!(text.contains("above the physical ceiling"), "{text}");
}

#[test]
fn a_warp_above_its_latency_bound_fails_whatever_the_others_did() {
    // Chain 29 over one partial: budget / (29 x 4 cycles) = 86,207 iterations at most.
    let (p, mut r) = h200_with(&h200_sass());
    let v = variant(&mut r, "chain29_acc1_effective1");
    v.summary.as_mut().unwrap().max = 90_000;
    let text = failure(&p, &r, "validity::chain29_acc1_effective1::ceiling");
    assert!(text.contains("best warp 90000.0"), "{text}");
}

#[test]
fn every_recorded_h200_variant_is_within_its_ceilings() {
    let (p, r) = h200_with(&h200_sass());
    for v in &r.variants {
        let case = format!("validity::{}::ceiling", v.name);
        assert!(
            matches!(outcome(&p, &r, &case), Outcome::Pass(_)),
            "{case}: {:?}",
            outcome(&p, &r, &case)
        );
    }
}
