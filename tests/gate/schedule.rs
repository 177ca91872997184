//! The measured loop's schedule as the verdicts see it: a schedule-only change fails
//! `sass::<variant>::schedule` with the loop side by side, a pure renumbering of scoreboards
//! does not, baselines blessed before the schedule say so instead of passing, and a loop
//! whose registers alone were renamed says so. On the committed H200 listing, mutated as
//! ptxas would change it.

use crate::common::{fail_text, function_range, h200_blessed, h200_sass, outcome};
use accprobe::verdict::Outcome;

#[test]
fn a_schedule_only_change_fails_the_schedule_case_side_by_side() {
    let sass = h200_sass();
    let (p, r) = h200_blessed(&sass, &crate::common::stall_7_before_the_clock_read(&sass));
    // The instructions are the same: the digest case passes; the schedule case does not.
    assert!(matches!(
        outcome(&p, &r, "sass::chain7_acc1_effective1::unchanged"),
        Outcome::Pass(_)
    ));
    let m = fail_text(outcome(&p, &r, "sass::chain7_acc1_effective1::schedule"));
    assert!(m.contains("same instructions, different schedule"), "{m}");
    assert!(
        m.lines().any(|l| l.starts_with("~ FFMA R10, R10, R9, UR8")
            && l.contains("B------:R-:W-:-:S01")
            && l.contains("B------:R-:W-:-:S07")
            && l.ends_with("stall 1 → 7")),
        "{m}"
    );
    assert!(m.contains("total stall: "), "{m}");
    assert!(m.contains("cycles per iteration; measured "), "{m}");
    assert!(matches!(
        outcome(&p, &r, "sass::chain7_acc2_effective2::schedule"),
        Outcome::Pass(_)
    ));
}

#[test]
fn scoreboards_renumbered_in_the_loop_are_no_schedule_change() {
    let sass = h200_sass();
    // The loop's first FFMA waits on SB3 instead of SB0: its first scoreboard either way.
    let renumbered = crate::common::mutate(
        &sass,
        "chain7_acc1_effective1",
        "/* 0x001fe20008000009 */",
        "/* 0x008fe20008000009 */",
    );
    let (p, r) = h200_blessed(&sass, &renumbered);
    let o = outcome(&p, &r, "sass::chain7_acc1_effective1::schedule");
    assert!(matches!(o, Outcome::Pass(_)), "{o:?}");
    // Waiting on a second scoreboard as well is a change.
    let more = crate::common::mutate(
        &sass,
        "chain7_acc1_effective1",
        "/* 0x001fe20008000009 */",
        "/* 0x003fe20008000009 */",
    );
    let (p, r) = h200_blessed(&sass, &more);
    let m = fail_text(outcome(&p, &r, "sass::chain7_acc1_effective1::schedule"));
    assert!(m.contains("waits SB0 → SB0+SB1"), "{m}");
}

#[test]
fn baselines_without_a_schedule_say_so_and_never_pass() {
    // The committed baselines were blessed before the schedule was decoded.
    let sass = h200_sass();
    let (mut p, r) = h200_blessed(&sass, &sass);
    for b in p.baselines.as_mut().unwrap().sass.values_mut() {
        b.schedule_digest = None;
        b.loop_control.clear();
    }
    match outcome(&p, &r, "sass::chain7_acc1_effective1::schedule") {
        Outcome::Skipped(why) => assert!(
            why.contains("no schedule digest blessed: re-bless on the GPU"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn renamed_registers_say_so_beside_the_raw_diff() {
    let sass = h200_sass();
    let renamed = crate::common::mutate(
        &sass,
        "chain13_acc1_effective1",
        "FFMA R10, R10, R9, UR8",
        "FFMA R12, R10, R9, UR8",
    );
    let (p, r) = h200_blessed(&sass, &renamed);
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc1_effective1::unchanged"));
    // R12 is new: a dependency changed, not only a name; the normalised diff shows it.
    assert!(!m.contains("registers renamed"), "{m}");
    assert!(m.contains("with registers normalised"), "{m}");
    // Every R10 of the function renamed R40: opcodes and dependencies unchanged.
    let std::ops::Range { start: at, end } = function_range(&sass, "chain13_acc1_effective1");
    let all = format!(
        "{}{}{}",
        &sass[..at],
        sass[at..end]
            .replace("R10,", "R40,")
            .replace("R10 ", "R40 "),
        &sass[end..]
    );
    let (p, r) = h200_blessed(&sass, &all);
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc1_effective1::unchanged"));
    assert!(
        m.contains("the loop body changed: opcodes unchanged; registers renamed"),
        "{m}"
    );
    assert!(m.contains("+FFMA R40, R40, R9, UR8"), "{m}");
}
