//! The SASS cases: `sass::<variant>::shape` (the measured loop has the probe's shape) and
//! `sass::<variant>::unchanged` (its digest is the blessed one) and
//! `sass::<variant>::schedule` (the loop's schedule digest is the blessed one).

use super::sass_diff::{self, Scheduled};
use crate::text::{joined, Shown};

use super::{Failure, Outcome};
use crate::expectations::profile::Profile;
use crate::model::results::{
    short_digest, single_dependent_chain, without_side_chains, RunResults, SassSummary,
    VariantResult,
};
use crate::model::variant::Variant;

/// The outcome of a SASS case on results without SASS: a failure when the disassembler
/// ran but its output could not be read (the compiler's output changed shape), else
/// skipped with the reason.
pub(super) fn without_sass(results: &RunResults) -> Outcome {
    if let Some(why) = &results.sass_unreadable {
        return Failure::new(format!(
            "the SASS of this run could not be read: {}",
            why.shown()
        ))
        .into();
    }
    Outcome::Skipped(results.sass_unavailable.as_deref().map_or_else(
        || {
            format!(
                "the results carry no SASS (source: {})",
                results.source.shown()
            )
        },
        |why| why.shown(),
    ))
}

/// The outcome of a SASS case for `r`, which has no SASS: where the run disassembled other
/// variants, `r`'s missing SASS is a failure (the disassembly lost a kernel, and its
/// cases would otherwise be skipped as if the run had none); else [`without_sass`].
fn without_variant_sass(r: &VariantResult, results: &RunResults) -> Outcome {
    let others = results.variants.iter().filter(|v| v.sass.is_some()).count();
    if others == 0 {
        return without_sass(results);
    }
    Failure::new(format!(
        "no SASS for {} in the results, although the run disassembled {others} other variant(s): \
         its kernel is missing from the disassembly",
        r.name.shown()
    ))
    .into()
}

/// The loop shape of `v`'s SASS in the results ([`shape`]).
pub(super) fn measured_shape(v: Variant, r: &VariantResult, results: &RunResults) -> Outcome {
    let Some(s) = &r.sass else {
        return without_variant_sass(r, results);
    };
    shape(v, s)
}

/// The loop of `v`'s SASS has N FFMAs plus one per side chain (or a multiple, if unrolled)
/// over E round-robin partials plus the S side chains, and acc1 accumulates in place.
pub(crate) fn shape(v: Variant, s: &SassSummary) -> Outcome {
    if !v.workload.is_probe() {
        let (problems, detail) = super::reduction_shape::problems(v, s);
        return shape_outcome(v, s, problems, detail);
    }
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
    problems.extend(partial_problems(v, s, unroll));
    let strict =
        e == 1 && s.loop_partials.len() as u32 == 1 + side && single_dependent_chain(&s.loop_body);
    if e == 1 && !strict {
        problems.push(
            "acc1 is not a strict chain: some FFMA does not read the destination of the FFMA before it"
                .into(),
        );
    }
    shape_outcome(v, s, problems, shape_detail(s, unroll, side, strict))
}

/// A shape case's outcome: a pass saying what the loop is, or the problems with that and
/// the loop body beside them.
fn shape_outcome(v: Variant, s: &SassSummary, problems: Vec<String>, detail: String) -> Outcome {
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

/// What is wrong with the loop's partials: their count (E, plus S side chains), their
/// lengths (round-robin), the side chains among them.
fn partial_problems(v: Variant, s: &SassSummary, unroll: u32) -> Vec<String> {
    let (e, side) = (v.effective(), v.context.side_chains);
    let mut problems = Vec::new();
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
    problems
}

/// What the loop is, as a shape case says it: FFMAs, unrolling, chains, destinations.
fn shape_detail(s: &SassSummary, unroll: u32, side: u32, strict: bool) -> String {
    format!(
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
        match (strict, s.ffma_accumulates_in_place) {
            (true, true) => ", strict single-register chain",
            (true, false) => ", strict chain through renamed registers",
            _ => "",
        }
    )
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
        return without_variant_sass(r, results);
    };
    let Some(base) = b.sass.get(&v.name()) else {
        return Failure::new(format!(
            "no SASS baseline for {v} in {} (bless one with `cargo xtask bless --profile {} --from RESULTS`)",
            b.file.shown(),
            profile.name
        ))
        .at(v.name())
        .into();
    };
    if base.digest == s.digest {
        return Outcome::Pass(format!("SASS digest {}", s.short_digest()));
    }
    let (change, diff) = if base.loop_body == s.loop_body {
        (
            "the loop body is the same, the change is outside it".to_string(),
            None,
        )
    } else {
        let c = sass_diff::text_change(&base.loop_body, &s.loop_body);
        (c.what, Some(c.diff))
    };
    let failure = Failure::new(format!(
        "{v}: the SASS changed (digest {} -> {}); {change}",
        short_digest(&base.digest),
        s.short_digest(),
    ))
    .at(v.name());
    match diff {
        Some(diff) => failure.detail(diff.trim_end_matches('\n')),
        None => failure,
    }
    .into()
}

/// `v`'s loop schedule (its instructions and their control fields) is the blessed one; on
/// a change, the loop side by side with both schedules, and its total stall against the
/// cycles per iteration measured and blessed. Never a pass where either side has no
/// schedule: baselines blessed before it was decoded say so (re-bless on the GPU), and a
/// run whose schedule was not decoded says why.
pub(super) fn schedule(
    v: Variant,
    r: &VariantResult,
    profile: &Profile,
    results: &RunResults,
) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(s) = &r.sass else {
        return without_variant_sass(r, results);
    };
    let Some(base) = b.sass.get(&v.name()) else {
        return Outcome::Skipped(format!(
            "no SASS baseline for {v} in {} (sass::{v}::unchanged fails for it)",
            b.file.shown()
        ));
    };
    let Some(then) = &base.schedule_digest else {
        return Outcome::Skipped(format!(
            "no schedule digest blessed: re-bless on the GPU (`cargo xtask bless --profile {} --from RESULTS` from a run that decodes it); {}",
            profile.name,
            b.file.shown()
        ));
    };
    let Some(now) = &s.schedule_digest else {
        return Outcome::Skipped(format!(
            "{v}: {}",
            s.schedule_unknown
                .as_deref()
                .unwrap_or("the results carry no loop schedule")
                .shown()
        ));
    };
    if then == now {
        let stall = crate::model::results::total_stall(&s.loop_control)
            .map_or(String::new(), |t| {
                format!(", total stall {t} cycles per iteration")
            });
        return Outcome::Pass(format!("loop schedule {}{stall}", short_digest(now)));
    }
    let (blessed, measured) = (
        Scheduled {
            body: &base.loop_body,
            control: &base.loop_control,
        },
        Scheduled {
            body: &s.loop_body,
            control: &s.loop_control,
        },
    );
    let what = if base.loop_body == s.loop_body {
        "same instructions, different schedule"
    } else {
        "the loop's instructions changed (sass::VARIANT::unchanged shows the text diff)"
    }
    .replace("VARIANT", &v.name());
    Failure::new(format!(
        "{v}: the loop schedule changed ({} -> {}): {what}",
        short_digest(then),
        short_digest(now),
    ))
    .at(v.name())
    .detail(format!(
        "{}{}",
        sass_diff::side_by_side(blessed, measured),
        cycles_per_iteration(v, r, profile, results)
    ))
    .into()
}

/// `; measured X cycles per iteration (blessed Y)`: the clock budget over the progress, the
/// figure the total stall is a part of.
fn cycles_per_iteration(
    v: Variant,
    r: &VariantResult,
    profile: &Profile,
    results: &RunResults,
) -> String {
    let budget = results
        .settings
        .as_ref()
        .map_or(profile.probe.budget_cycles, |s| s.budget_cycles) as f64;
    let now = r.baseline_progress();
    let then = profile
        .baselines
        .as_ref()
        .and_then(|b| b.progress.get(&v.name()).copied());
    if now.is_nan() || now <= 0.0 {
        return String::new();
    }
    format!(
        "; measured {:.2} cycles per iteration{}",
        budget / now,
        then.filter(|t| *t > 0.0)
            .map_or(String::new(), |t| format!(" (blessed {:.2})", budget / t))
    )
}
