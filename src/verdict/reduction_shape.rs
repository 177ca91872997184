//! The `sass::<variant>::shape` case of a real accumulation (docs/study.md, "Real
//! reductions"): its measured loop holds the split the variant asks for. For each opcode
//! the kernel accumulates with ([`Workload::carried_opcodes`]), E loop-carried chains
//! taking the iteration's 16 elements round-robin (times the unroll factor); for the block
//! reduction, whose partials start from zero every iteration, 5 SHFL.BFLY and 21 + E FADDs
//! an iteration (16 elements, E - 1 to combine the partials, 5 for the shuffle tree, 1 into
//! the running total).

use crate::model::results::{carried_chains, sass_opcode, SassSummary};
use crate::model::variant::{Variant, Workload, REDUCTION_ITEMS};
use crate::model::workload::SHUFFLE_STEPS;

/// What keeps the loop of real accumulation `v`'s SASS from its kernel's shape at
/// E = `v.effective()` (none when it has it), and what the loop is.
pub(super) fn problems(v: Variant, s: &SassSummary) -> (Vec<String>, String) {
    if v.workload == Workload::BlockReduce {
        block_reduce(v, s)
    } else {
        carried(v, s)
    }
}

/// E carried chains of each accumulating opcode, round-robin over the iteration's elements.
fn carried(v: Variant, s: &SassSummary) -> (Vec<String>, String) {
    let e = v.effective();
    let mut problems = Vec::new();
    let mut details = Vec::new();
    for &op in v.workload.carried_opcodes() {
        let chains = carried_chains(&s.loop_body, op);
        let total: u32 = chains.iter().sum();
        details.push(format!(
            "{} loop-carried {op} chains {chains:?}",
            chains.len()
        ));
        if chains.len() as u32 != e {
            problems.push(format!(
                "the loop carries {} {op} chains {chains:?}, expected E = {e}",
                chains.len()
            ));
        }
        if total == 0 || !total.is_multiple_of(REDUCTION_ITEMS) {
            problems.push(format!(
                "its carried {op} chains hold {total} instructions, expected {REDUCTION_ITEMS} elements an iteration (or a multiple, if unrolled)"
            ));
        } else if chains.iter().max().unwrap_or(&0) - chains.iter().min().unwrap_or(&0)
            > total / REDUCTION_ITEMS
        {
            problems.push(format!(
                "the {op} chains {chains:?} are not round-robin (lengths differ by more than the unroll factor)"
            ));
        }
    }
    (problems, details.join(", "))
}

/// The shuffle tree and the FADDs of a block reduction's iteration.
fn block_reduce(v: Variant, s: &SassSummary) -> (Vec<String>, String) {
    let count = |op: &str| s.loop_body.iter().filter(|i| sass_opcode(i) == op).count() as u32;
    let (shuffles, fadds) = (count("SHFL"), count("FADD"));
    let per_iteration = REDUCTION_ITEMS + v.effective() + SHUFFLE_STEPS;
    let unroll = shuffles / SHUFFLE_STEPS;
    let mut problems = Vec::new();
    if shuffles == 0 || !shuffles.is_multiple_of(SHUFFLE_STEPS) {
        problems.push(format!(
            "the loop has {shuffles} SHFL, expected a {SHUFFLE_STEPS}-step shuffle tree an iteration"
        ));
    } else if fadds != per_iteration * unroll {
        problems.push(format!(
            "the loop has {fadds} FADDs, expected {per_iteration} an iteration ({REDUCTION_ITEMS} elements, E - 1 = {} to combine the partials, {SHUFFLE_STEPS} for the tree, 1 into the total){}",
            v.effective() - 1,
            if unroll > 1 {
                format!(" x {unroll}")
            } else {
                String::new()
            }
        ));
    }
    (
        problems,
        format!("{shuffles} SHFL and {fadds} FADDs per loop"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::context::Context;

    /// dot_acc2's loop as NVRTC 13.0.88 compiles it for sm_90 (nvdisasm 13.2.51).
    const DOT_ACC2: &str = "USHF.L.U32 UR6, UR4, 0x2, URZ
UIADD3 UR4, UP0, UR4, 0x1, URZ
ULEA UR6, UR6, UR7, 0x4
LDS.128 R16, [UR6]
LDS.128 R12, [UR6+0x10]
FFMA R16, R3, R16, R10
FFMA R17, R0, R17, R11
LDS.128 R8, [UR6+0x20]
FFMA R32, R5, R18, R16
FFMA R35, R2, R19, R17
LDS.128 R16, [UR6+0x30]
FFMA R12, R7, R12, R32
FFMA R13, R4, R13, R35
FFMA R12, R21, R14, R12
FFMA R13, R6, R15, R13
FFMA R8, R27, R8, R12
FFMA R9, R20, R9, R13
FFMA R8, R29, R10, R8
FFMA R9, R26, R11, R9
FFMA R8, R31, R16, R8
FFMA R9, R28, R17, R9
FFMA R10, R33, R18, R8
FFMA R11, R30, R19, R9
CS2R R8, SR_CLOCKLO
ISETP.GE.AND.EX P0, PT, R8, UR11, PT, P0
@!P0 BRA -25";

    /// blockreduce_acc2's loop, likewise.
    const BLOCKREDUCE_ACC2: &str = "LEA R26, R5, UR4, 0x4
LDS.128 R4, [R26]
LDS.128 R8, [R26+0x200]
LDS.128 R12, [R26+0x400]
LDS.128 R16, [R26+0x600]
FADD R27, RZ, R4
FADD R4, RZ, R5
FADD R27, R6, R27
FADD R4, R7, R4
FADD R27, R27, R8
FADD R4, R4, R9
FADD R27, R10, R27
FADD R4, R11, R4
FADD R27, R27, R12
FADD R4, R4, R13
FADD R27, R14, R27
FADD R4, R15, R4
FADD R27, R27, R16
FADD R4, R4, R17
FADD R18, R18, R27
FADD R19, R19, R4
FADD R18, R18, R19
SHFL.BFLY PT, R5, R18, 0x10, 0x1f
FADD R5, R18, R5
SHFL.BFLY PT, R4, R5, 0x8, 0x1f
FADD R4, R5, R4
SHFL.BFLY PT, R7, R4, 0x4, 0x1f
FADD R7, R4, R7
SHFL.BFLY PT, R6, R7, 0x2, 0x1f
FADD R6, R7, R6
SHFL.BFLY PT, R9, R6, 0x1, 0x1f
FADD R9, R6, R9
FADD R24, R9, R24
CS2R R4, SR_CLOCKLO
@!P0 BRA -34";

    fn summary(body: &str) -> SassSummary {
        SassSummary {
            digest: String::new(),
            local_memory_instructions: Vec::new(),
            loop_body: body.lines().map(str::to_string).collect(),
            loop_ffma: 0,
            loop_ffma_destinations: Vec::new(),
            ffma_accumulates_in_place: false,
            loop_partials: Vec::new(),
            loop_control: Vec::new(),
            schedule_digest: None,
            schedule_unknown: None,
        }
    }

    fn passes(v: Variant, s: &SassSummary) -> bool {
        problems(v, s).0.is_empty()
    }

    fn failure_text(v: Variant, s: &SassSummary) -> String {
        let (problems, detail) = problems(v, s);
        assert!(
            !problems.is_empty(),
            "expected a failure, got a pass: {detail}"
        );
        problems.join("; ")
    }

    #[test]
    fn the_compiled_split_passes_and_another_k_fails() {
        let dot = summary(DOT_ACC2);
        let at = |w, k| Variant::reduction(w, k);
        assert!(passes(at(Workload::Dot, 2), &dot));
        let four = failure_text(at(Workload::Dot, 4), &dot);
        assert!(
            four.contains("carries 2 FFMA chains [8, 8], expected E = 4"),
            "{four}"
        );
        let w32 = at(Workload::Dot, 2).with_context(Context {
            warps: Some(32),
            ..Context::BASE
        });
        assert!(passes(w32, &dot));
        // A layer norm asks for FADD chains too: this loop has none.
        let ln = failure_text(at(Workload::Layernorm, 2), &dot);
        assert!(ln.contains("carries 0 FADD chains"), "{ln}");
    }

    #[test]
    fn a_chain_merged_into_another_fails() {
        // The second partial's last FFMA reads the first's: one carried chain is left.
        let merged = DOT_ACC2.replace("FFMA R11, R30, R19, R9", "FFMA R11, R30, R19, R10");
        let text = failure_text(Variant::reduction(Workload::Dot, 2), &summary(&merged));
        assert!(text.contains("expected E = 2"), "{text}");
    }

    #[test]
    fn a_block_reduction_is_judged_by_its_tree_and_its_fadds() {
        let b = summary(BLOCKREDUCE_ACC2);
        let v = Variant::reduction(Workload::BlockReduce, 2);
        assert!(passes(v, &b));
        let four = failure_text(Variant::reduction(Workload::BlockReduce, 4), &b);
        assert!(
            four.contains("23 FADDs, expected 25 an iteration"),
            "{four}"
        );
        let short = BLOCKREDUCE_ACC2.replace("SHFL.BFLY PT, R9, R6, 0x1, 0x1f\n", "");
        let text = failure_text(v, &summary(&short));
        assert!(
            text.contains("4 SHFL, expected a 5-step shuffle tree"),
            "{text}"
        );
    }
}
