//! The `sass::<variant>::shape` case of a real accumulation (docs/study.md, "Real
//! reductions"): its measured loop holds the split the variant asks for. For each opcode
//! the kernel accumulates with ([`Workload::carried_opcodes`]), E loop-carried chains
//! taking the iteration's 16 elements round-robin (times the unroll factor); for the block
//! reduction, whose partials start from zero every iteration, 5 SHFL.BFLY and 21 + E FADDs
//! an iteration (16 elements, E - 1 to combine the partials, 5 for the shuffle tree, 1 into
//! the running total).

use super::{Failure, Outcome};
use crate::model::results::{carried_chains, sass_opcode, SassSummary};
use crate::model::variant::{Variant, Workload, REDUCTION_ITEMS};
use crate::model::workload::SHUFFLE_STEPS;
use crate::text::joined;

/// The loop of real accumulation `v`'s SASS has its kernel's shape at E = `v.effective()`.
pub(crate) fn shape(v: Variant, s: &SassSummary) -> Outcome {
    let (problems, detail) = if v.workload == Workload::BlockReduce {
        block_reduce(v, s)
    } else {
        carried(v, s)
    };
    if problems.is_empty() {
        Outcome::Pass(detail)
    } else {
        Failure::new(format!("{v}: {}", problems.join("; ")))
            .at(v.name())
            .detail(format!("({detail})"))
            .detail(format!("loop body:\n  {}", joined(&s.loop_body, "\n  ")))
            .into()
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
