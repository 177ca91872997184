//! The `policy::<name>::chain<N>[_sink<M>][_<context>]` and
//! `policy::<name>::<kernel>[_<context>]` cases: the policy is asked about the
//! accumulation as it was measured at that place ([`Place`]: a probe chain in a sink mode
//! and context, or a real accumulation in a context), and the K it picks must reach
//! (1 - tolerance) of the best progress measured there. The
//! `policy::<name>::picks::<context>` cases hold the same pick against the blessed one.
//!
//! What the policy is told ([`accumulation`], docs/study.md, "Contexts"):
//! - `chain`: N;
//! - `warps_per_sm`: the warps of the one block on the SM (the context's, else the run's);
//! - `register_limit`: [`register_limit`] at those warps;
//! - `register_headroom`: the limit minus ptxas' register count of the context's
//!   lowest-K variant at that chain;
//! - `sink_isolated`: the sink is after the loop (modes A, B, C), not summed inside every
//!   iteration (D);
//! - `side_chains` and `surrounding_ilp` (side chains > 0): the context's;
//! - `kernel`, `accumulations`, `loads`: the place's kernel and what it is
//!   (`Workload::accumulations`, `Workload::loads`); a kernel's `chain` is its
//!   `REDUCTION_ITEMS` elements a thread;
//! - `occupancy_safe`: the policy's wide K fits the limit: its variant, where measured,
//!   uses at most `register_limit` registers and does not spill; where not measured, the
//!   lowest-K count plus the policy's registers per extra partial stays within the limit.
//!   A policy program declares no wide K: for it, `occupancy_safe` is true.
//!
//! Where the results carry no ptxas register count (a recorded table), the policy's own
//! `probe_context` stands for the base context, as it always has.

use super::failure::{Bound, Expected};
use super::spills::spill_problem;
use super::{Failure, Outcome};
use crate::expectations::policy::Accumulation;
use crate::expectations::policy_source::{Picks, PolicySource};
use crate::expectations::profile::Profile;
use crate::model::context::{register_limit, Context};
use crate::model::place::Place;
use crate::model::results::{RunResults, VariantResult};
use crate::model::variant::Sink;

/// What `source` is told about the accumulation at `place`, from `found` (its variants
/// at that place) and the run's block: see the module's documentation.
pub(super) fn accumulation(
    source: &PolicySource,
    place: Place,
    found: &[&VariantResult],
    block_threads: u32,
) -> Accumulation {
    // A recorded table's resources hold its spill figure only (0 registers): no count.
    let counted = |r: &&&VariantResult| r.resources.is_some_and(|res| res.registers > 0);
    let lowest = found.iter().filter(counted).min_by_key(|r| r.accumulators);
    let Some(lowest) = lowest.and_then(|r| r.resources.map(|res| (r, res))) else {
        return source.probe_context().at(&place);
    };
    let warps = place.context.block_threads(block_threads) / 32;
    let limit = register_limit(warps);
    let used = lowest.1.registers;
    let wide = match source {
        PolicySource::File(p) => p.wide.as_ref(),
        PolicySource::Command(_) => None,
    };
    let occupancy_safe = match wide {
        None => true,
        Some(w) => {
            let wide = w.accumulators.min(place.chain.max(1));
            match found.iter().find(|r| r.effective == wide) {
                Some(r) => {
                    r.resources.is_some_and(|res| res.registers <= limit)
                        && spill_problem(r).is_none()
                }
                None => {
                    let extra = u64::from(wide.saturating_sub(lowest.0.effective))
                        * u64::from(w.registers_per_accumulator);
                    u64::from(used) + extra <= u64::from(limit)
                }
            }
        }
    };
    let side_chains = place.context.side_chains;
    Accumulation {
        register_headroom: limit.saturating_sub(used),
        sink_isolated: place.sink != Sink::D,
        surrounding_ilp: side_chains > 0,
        occupancy_safe,
        side_chains,
        warps_per_sm: warps,
        register_limit: limit,
        ..source.probe_context()
    }
    .at(&place)
}

/// [`accumulation`] at `place` as `results` measured it, with the run's block (the
/// profile's where the results record no settings).
pub(super) fn accumulation_on(
    source: &PolicySource,
    place: Place,
    profile: &Profile,
    results: &RunResults,
) -> Accumulation {
    let found = at_place(results, &place);
    let block_threads = results
        .settings
        .map_or(profile.probe.block_threads, |s| s.block_threads);
    accumulation(source, place, &found, block_threads)
}

/// What the policy was told, for a message.
fn told(a: &Accumulation) -> String {
    if a.register_limit == 0 {
        return "asked with the policy's probe_context".into();
    }
    format!(
        "asked with {} warps on the SM, {} of {} registers free, sink {}, {} side chains, occupancy {}",
        a.warps_per_sm,
        a.register_headroom,
        a.register_limit,
        if a.sink_isolated { "isolated" } else { "in the loop" },
        a.side_chains,
        if a.occupancy_safe { "safe" } else { "not safe" }
    )
}

/// The policy's pick at `place` (from `picks`, asked before judging) reaches
/// (1 - `tolerance`) of the best progress in `found` (the variants measured at that
/// place). A policy that gave no pick fails with why.
pub(super) fn pick(
    place: Place,
    tolerance: f64,
    picks: Option<&Picks>,
    profile: &Profile,
    results: &RunResults,
    found: &[&VariantResult],
) -> Outcome {
    let (name, k) = match asked(&place.name(), picks, profile) {
        Ok(asked) => asked,
        Err(failed) => return failed,
    };
    let where_ = place.describe();
    let a = match &profile.policy_gate {
        Some(g) => accumulation_on(&g.source, place, profile, results),
        None => return Failure::new("the profile gates no policy").into(),
    };
    let (st, basis) = match judged_standing(k, found, profile) {
        Ok(judged) => judged,
        Err(Unjudged::NoResults) => {
            return Failure::new(format!("no results at {where_}"))
                .at(place.name())
                .into()
        }
        Err(Unjudged::NoProgress) => {
            return Failure::new(format!(
                "no variant at {where_} made progress: policy {name}'s pick acc{k} cannot be judged"
            ))
            .at(place.name())
            .into()
        }
        Err(Unjudged::NotMeasured) => {
            return Failure::new(format!(
                "policy {name} picks acc{k} at {where_}, which the profile does not measure (add {k} to {}; {})",
                place.accumulators_key(),
                told(&a)
            ))
            .at(place.name())
            .into()
        }
    };
    let text = format!(
        "policy {name} picks acc{k} at {where_}: {:.1}, {:.2}% of the best, acc{} {:.1} (must reach {:.2}%; {basis}), {}",
        st.progress,
        st.ratio() * 100.0,
        st.best_k,
        st.best_progress,
        (1.0 - tolerance) * 100.0,
        told(&a)
    );
    if st.ratio() < 1.0 - tolerance {
        Failure::new(format!(
            "{text}: the policy's pick is clearly below the best K on this GPU"
        ))
        .at(place.name())
        .figures(
            st.progress,
            "progress",
            Expected::new(
                st.best_progress,
                "progress",
                Bound::AtLeast,
                Some(tolerance),
            ),
        )
        .into()
    } else {
        Outcome::Pass(text)
    }
}

/// The policy's pick for `context` against the pick blessed there (the baselines'
/// `policy_picks`), both measured in `found`: a new pick whose progress falls below
/// (1 - `tolerance`) of the blessed pick's fails naming both; one above (1 + `tolerance`)
/// passes asking for a bless, as does any other changed pick.
pub(super) fn against_blessed(
    place: Place,
    tolerance: f64,
    picks: Option<&Picks>,
    profile: &Profile,
    found: &[&VariantResult],
) -> Outcome {
    let context = place.name();
    let context = context.as_str();
    let (name, k) = match asked(context, picks, profile) {
        Ok(asked) => asked,
        Err(failed) => return failed,
    };
    let Some(blessed) = profile
        .baselines
        .as_ref()
        .and_then(|b| b.policy_picks.get(context))
    else {
        return Failure::new(format!(
            "no blessed pick of policy {name} for {context}: bless one (cargo xtask bless)"
        ))
        .at(context)
        .into();
    };
    let was = blessed.accumulators;
    if k == was {
        return Outcome::Pass(format!(
            "policy {name} picks acc{k} for {context}, as blessed"
        ));
    }
    let (now, before) = match (standing(k, found), standing(was, found)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(_), _) | (_, Err(_)) => {
            return Failure::new(format!(
                "policy {name} picks acc{k} for {context} where acc{was} was blessed, and {} of these results does not hold both",
                place.describe()
            ))
            .at(context)
            .into()
        }
    };
    let change = now.progress / before.progress - 1.0;
    let text = format!(
        "policy {name} picks acc{k} for {context} where acc{was} was blessed: acc{k} {:.1} against acc{was} {:.1} ({}, tolerance {:.2}%)",
        now.progress,
        before.progress,
        super::pct(change),
        tolerance * 100.0
    );
    if change < -tolerance {
        Failure::new(format!(
            "{text}: the new pick is worse than the blessed one"
        ))
        .at(context)
        .figures(
            now.progress,
            "progress",
            Expected::new(before.progress, "progress", Bound::AtLeast, Some(tolerance)),
        )
        .into()
    } else if change > tolerance {
        Outcome::Pass(format!(
            "{text}: the new pick is better; bless it (cargo xtask bless) to make it the baseline"
        ))
    } else {
        Outcome::Pass(format!(
            "{text}: within the tolerance; bless it (cargo xtask bless) to record the new pick"
        ))
    }
}

/// Why a failure of a policy case at `place` (`own`: the case judging the pick against
/// the best K, not against the blessed pick) is not the one a known deviation records,
/// which is its pick falling below the best K: the policy gave no pick (a program that
/// could not be asked), nothing was measured there, its pick was not measured, or its pick
/// is not the one blessed (`policy_picks`), the pick the deviation was recorded with.
pub(super) fn not_the_deviation(
    place: Place,
    own: bool,
    picks: Option<&Picks>,
    profile: &Profile,
    found: &[&VariantResult],
) -> Option<String> {
    let context = place.name();
    let k = match picks.map(|p| p.of(&context)) {
        Some(Ok(k)) => k,
        Some(Err(_)) => return Some("the policy gave no pick".into()),
        None => return Some("the policy was not asked".into()),
    };
    if !own {
        return None;
    }
    match standing(k, found) {
        Err(Unjudged::NoResults) => return Some("nothing was measured there".into()),
        Err(Unjudged::NotMeasured) => return Some(format!("its pick acc{k} was not measured")),
        Err(Unjudged::NoProgress) => return Some("no variant there made progress".into()),
        Ok(_) => {}
    }
    let blessed = profile
        .baselines
        .as_ref()
        .and_then(|b| b.policy_picks.get(&context))
        .map(|b| b.accumulators);
    match blessed {
        Some(was) if was != k => Some(format!(
            "it records the blessed pick acc{was}, and the pick is acc{k}"
        )),
        _ => None,
    }
}

/// The gated policy's name and its pick for `context`, or the failure saying why it has none.
fn asked<'a>(
    context: &str,
    picks: Option<&Picks>,
    profile: &'a Profile,
) -> Result<(&'a str, u32), Outcome> {
    let name = profile
        .policy_gate
        .as_ref()
        .map_or("the policy", |h| h.source.name());
    match picks.map(|p| p.of(context)) {
        Some(Ok(k)) => Ok((name, k)),
        Some(Err(e)) => Err(
            Failure::new(format!("policy {name} gave no pick for {context}: {e}"))
                .at(context)
                .into(),
        ),
        None => Err(
            Failure::new(format!("policy {name} was not asked: {NOT_ASKED}"))
                .at(context)
                .into(),
        ),
    }
}

/// Why a policy case has no picks to judge.
const NOT_ASKED: &str = "a policy program's picks are asked once per run, before the verdicts (cargo test --test probe, cargo xtask gate)";

/// Which figures a pick was judged on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The baselines' progress: every variant at the place holds its baseline.
    Blessed,
    /// This run's mean progress: some variant has no baseline or moved beyond it.
    ThisRun,
}

impl std::fmt::Display for Basis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Basis::Blessed => "the blessed progress",
            Basis::ThisRun => "this run's mean progress",
        })
    }
}

/// Where pick `k` stands among `found` as the policy case judges it: by the blessed
/// progress while every variant there holds its baseline (`blessed_standing`), else by
/// this run's figures; and which of the two it was.
pub fn judged_standing(
    k: u32,
    found: &[&VariantResult],
    profile: &Profile,
) -> Result<(Standing, Basis), Unjudged> {
    let this_run = standing(k, found)?;
    Ok(match blessed_standing(k, found, profile) {
        Some(blessed) => (blessed, Basis::Blessed),
        None => (this_run, Basis::ThisRun),
    })
}

/// Where pick `k` stands among `found` by the blessed progress, when every variant of
/// `found` has a baseline and its median is within that baseline's tolerance (its
/// `probe::` case holds): then the pick is judged on the same figures in every run and
/// mode, and a pick that sits on the line (within the noise the tolerance allows) gets the
/// same verdict every time. `None` when a variant has no baseline or moved beyond it:
/// the pick is then judged on this run's figures, and the variant that moved is red in its
/// own case.
fn blessed_standing(k: u32, found: &[&VariantResult], profile: &Profile) -> Option<Standing> {
    let b = profile.baselines.as_ref()?;
    let mut blessed = Vec::with_capacity(found.len());
    for r in found {
        let base = *b.progress.get(&r.name)?;
        let now = r.summary.as_ref().map_or(r.mean_progress, |s| s.median);
        let tolerance = b.tolerance_of(&r.name);
        if base <= 0.0 || (now / base - 1.0).abs() > tolerance {
            return None;
        }
        blessed.push((r.accumulators, base));
    }
    let (best_k, best_progress) = blessed.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1))?;
    let progress = blessed.iter().find(|(a, _)| *a == k)?.1;
    Some(Standing {
        k,
        progress,
        best_k,
        best_progress,
    })
}

/// Where a pick stands among the measured K at its chain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    pub k: u32,
    pub progress: f64,
    /// The K with the most progress at that chain, and its progress.
    pub best_k: u32,
    pub best_progress: f64,
}

impl Standing {
    /// The pick's progress as a fraction of the best.
    pub(crate) fn ratio(&self) -> f64 {
        self.progress / self.best_progress
    }

    /// What the pick loses against the best K: 1 - ratio, 0 when it is the best.
    pub fn loss(&self) -> f64 {
        1.0 - self.ratio()
    }
}

/// Why a pick cannot be placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unjudged {
    /// Nothing was measured at the chain.
    NoResults,
    /// The picked K was not measured there.
    NotMeasured,
    /// Variants were measured there, but none made progress: no K can be called the
    /// best, and a fraction of the best would be 0/0.
    NoProgress,
}

/// Whether `r` made progress: a K with none (or a NaN) cannot be the best one.
pub fn progressed(r: &VariantResult) -> bool {
    r.mean_progress > 0.0
}

/// Where pick `k` stands among `found` (the main variants of one chain).
pub fn standing(k: u32, found: &[&VariantResult]) -> Result<Standing, Unjudged> {
    let best = found
        .iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
        .ok_or(Unjudged::NoResults)?;
    if !progressed(best) {
        return Err(Unjudged::NoProgress);
    }
    let pick = found
        .iter()
        .find(|r| r.accumulators == k)
        .ok_or(Unjudged::NotMeasured)?;
    Ok(Standing {
        k,
        progress: pick.mean_progress,
        best_k: best.accumulators,
        best_progress: best.mean_progress,
    })
}

/// The variants of `results` measured at `place` ([`Place::holds`]): what a pick for
/// that policy context is judged among.
pub fn at_place<'a>(results: &'a RunResults, place: &Place) -> Vec<&'a VariantResult> {
    results
        .variants
        .iter()
        .filter(|r| place.holds(&r.variant()))
        .collect()
}

/// The variant of `results` at `place` with the most progress: its best K.
pub fn best_at<'a>(results: &'a RunResults, place: &Place) -> Option<&'a VariantResult> {
    at_place(results, place)
        .into_iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
}

/// The main variants (sink A) of `results` at `chain`: what a pick there is judged among.
pub fn main_at_chain(results: &RunResults, chain: u32) -> Vec<&VariantResult> {
    at_place(results, &Place::probe(chain, Sink::A, Context::BASE))
}
