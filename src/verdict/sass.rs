//! The SASS cases: `sass::<variant>::shape` (the measured loop has the probe's shape) and
//! `sass::<variant>::unchanged` (its digest is the blessed one).

use super::Outcome;
use crate::expectations::profile::Profile;
use crate::model::results::{
    short_digest, without_side_chains, RunResults, SassSummary, VariantResult,
};
use crate::model::variant::Variant;

/// The outcome of a SASS case on results without SASS: a failure when the disassembler
/// ran but its output could not be read (the compiler's output changed shape), else
/// skipped with the reason.
pub(super) fn without_sass(results: &RunResults) -> Outcome {
    if let Some(why) = &results.sass_unreadable {
        return Outcome::Fail(format!("the SASS of this run could not be read: {why}"));
    }
    Outcome::Skipped(
        results
            .sass_unavailable
            .clone()
            .unwrap_or_else(|| format!("the results carry no SASS (source: {})", results.source)),
    )
}

/// The loop shape of `v`'s SASS in the results ([`shape`]).
pub(super) fn measured_shape(v: Variant, r: &VariantResult, results: &RunResults) -> Outcome {
    let Some(s) = &r.sass else {
        return without_sass(results);
    };
    shape(v, s)
}

/// The loop of `v`'s SASS has N FFMAs plus one per side chain (or a multiple, if unrolled)
/// over E round-robin partials plus the S side chains, and acc1 accumulates in place.
pub(crate) fn shape(v: Variant, s: &SassSummary) -> Outcome {
    let (n, e, side) = (v.chain, v.effective(), v.context.side_chains);
    let per_iteration = n + side;
    let mut problems = Vec::new();
    let unroll = s.loop_ffma / per_iteration;
    if s.loop_ffma == 0 || !s.loop_ffma.is_multiple_of(per_iteration) {
        problems.push(if side == 0 {
            format!(
                "the loop has {} FFMAs, expected N = {n} per iteration (or a multiple, if unrolled)",
                s.loop_ffma
            )
        } else {
            format!(
                "the loop has {} FFMAs, expected N + S = {n} + {side} per iteration (or a multiple, if unrolled)",
                s.loop_ffma
            )
        });
    }
    let accumulation = without_side_chains(&s.loop_partials, side, unroll.max(1));
    if s.loop_partials.len() as u32 != e + side {
        problems.push(if side == 0 {
            format!(
                "the loop has {} independent FFMA chains {:?}, expected E = {e}",
                s.loop_partials.len(),
                s.loop_partials
            )
        } else {
            format!(
                "the loop has {} independent FFMA chains {:?}, expected E + S = {e} + {side}",
                s.loop_partials.len(),
                s.loop_partials
            )
        });
    } else if let Some(acc) = &accumulation {
        if acc.iter().max().unwrap_or(&0) - acc.iter().min().unwrap_or(&0) > 1 {
            problems.push(format!(
                "the chains {acc:?} are not round-robin (lengths differ by more than one)"
            ));
        }
    }
    if side > 0 && accumulation.is_none() {
        problems.push(format!(
            "the loop's chains {:?} hold fewer than S = {side} side chains of {} FFMA each",
            s.loop_partials,
            unroll.max(1)
        ));
    }
    if e == 1 && !s.ffma_accumulates_in_place {
        problems.push(
            "acc1 is not a strict chain: some FFMA's destination is not its accumulator source"
                .into(),
        );
    }
    let detail = format!(
        "{} FFMAs per loop ({}), {} chains {:?}{}, {} distinct destination registers {:?}{}",
        s.loop_ffma,
        if unroll == 1 {
            "not unrolled".to_string()
        } else {
            format!("unrolled x{unroll}")
        },
        s.loop_partials.len(),
        s.loop_partials,
        if side > 0 {
            format!(" of which {side} side chains")
        } else {
            String::new()
        },
        s.loop_ffma_destinations.len(),
        s.loop_ffma_destinations,
        if e == 1 && s.ffma_accumulates_in_place {
            ", strict single-register chain"
        } else {
            ""
        }
    );
    if problems.is_empty() {
        Outcome::Pass(detail)
    } else {
        Outcome::Fail(format!(
            "{v}: {}\n({detail})\nloop body:\n  {}",
            problems.join("; "),
            s.loop_body.join("\n  ")
        ))
    }
}

/// `v`'s SASS digest is the blessed one; on a change, the loop body's diff.
pub(super) fn unchanged(
    v: Variant,
    r: &VariantResult,
    profile: &Profile,
    results: &RunResults,
) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(s) = &r.sass else {
        return without_sass(results);
    };
    let Some(base) = b.sass.get(&v.name()) else {
        return Outcome::Fail(format!(
            "no SASS baseline for {v} in {} (bless one with `cargo xtask bless --profile {} --from RESULTS`)",
            b.file.display(),
            profile.name
        ));
    };
    if base.digest == s.digest {
        return Outcome::Pass(format!("SASS digest {}", s.short_digest()));
    }
    let old = base.loop_body.join("\n") + "\n";
    let new = s.loop_body.join("\n") + "\n";
    let diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .header("blessed loop", "measured loop")
        .to_string();
    Outcome::Fail(format!(
        "{v}: the SASS changed (digest {} -> {}); {}\n{}If the change is expected, re-bless {}",
        short_digest(&base.digest),
        s.short_digest(),
        if old == new {
            "the loop body is the same, the change is outside it"
        } else {
            "the loop body changed"
        },
        diff,
        b.file.display()
    ))
}
