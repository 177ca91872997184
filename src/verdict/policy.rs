//! The `policy::<name>::chain<N>[_sinkM][_<context>]` cases: the policy is asked about the
//! accumulation as it was measured in that sink mode and context, and the K it picks must
//! reach (1 - tolerance) of the best progress measured there.
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
//! - `occupancy_safe`: the policy's wide K fits the limit: its variant, where measured,
//!   uses at most `register_limit` registers and does not spill; where not measured, the
//!   lowest-K count plus the policy's registers per extra partial stays within the limit.
//!
//! Where the results carry no ptxas register count (a recorded table), the policy's own
//! `probe_context` stands for the base context, as it always has.

use super::spills::spill_problem;
use super::Outcome;
use crate::expectations::policy::{Accumulation, Policy};
use crate::expectations::profile::Profile;
use crate::model::context::{register_limit, Context};
use crate::model::results::{RunResults, VariantResult};
use crate::model::variant::Sink;

/// Where a case's accumulation was measured.
#[derive(Debug, Clone, Copy)]
pub(super) struct Place {
    pub(super) chain: u32,
    pub(super) sink: Sink,
    pub(super) context: Context,
}

impl Place {
    /// How a message names it: `chain 13`, `chain 13 in context w16`, `chain 13, sink D`.
    fn describe(&self) -> String {
        let mut s = format!("chain {}", self.chain);
        if self.sink != Sink::A {
            s.push_str(&format!(", sink {}", self.sink.letter()));
        }
        if !self.context.is_base() {
            s.push_str(&format!(" in context {}", self.context));
        }
        s
    }

    /// The profile key whose accumulator counts measure this place.
    fn accumulators_key(&self) -> &'static str {
        if !self.context.is_base() {
            "contexts.accumulators"
        } else if self.sink != Sink::A {
            "sink_isolation.accumulators"
        } else {
            "probe.accumulators"
        }
    }
}

/// What `policy` is told about the accumulation at `place`, from `found` (its variants
/// at that place) and the run's block: see the module's documentation.
pub(super) fn accumulation(
    policy: &Policy,
    place: Place,
    found: &[&VariantResult],
    block_threads: u32,
) -> Accumulation {
    // A recorded table's resources hold its spill figure only (0 registers): no count.
    let counted = |r: &&&VariantResult| r.resources.is_some_and(|res| res.registers > 0);
    let lowest = found.iter().filter(counted).min_by_key(|r| r.accumulators);
    let Some(lowest) = lowest.and_then(|r| r.resources.map(|res| (r, res))) else {
        return Accumulation {
            chain: place.chain,
            ..policy.probe_context
        };
    };
    let warps = place.context.block_threads(block_threads) / 32;
    let limit = register_limit(warps);
    let used = lowest.1.registers;
    let occupancy_safe = match &policy.wide {
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
        chain: place.chain,
        register_headroom: limit.saturating_sub(used),
        sink_isolated: place.sink != Sink::D,
        surrounding_ilp: side_chains > 0,
        occupancy_safe,
        side_chains,
        warps_per_sm: warps,
        register_limit: limit,
    }
}

/// What the policy was asked, for a message.
fn asked(a: &Accumulation) -> String {
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

/// The policy's pick at `place` reaches (1 - `tolerance`) of the best progress in `found`
/// (the variants measured at that place).
pub(super) fn pick(
    place: Place,
    tolerance: f64,
    profile: &Profile,
    results: &RunResults,
    found: &[&VariantResult],
) -> Outcome {
    let Some(gate) = profile.policy_gate.as_ref() else {
        return Outcome::Fail("the profile gates no policy".into());
    };
    let name = gate.policy.name.as_str();
    let where_ = place.describe();
    let Some(best) = found
        .iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
    else {
        return Outcome::Fail(format!("no results at {where_}"));
    };
    let block_threads = results
        .settings
        .map_or(profile.probe.block_threads, |s| s.block_threads);
    let a = accumulation(&gate.policy, place, found, block_threads);
    let k = gate.policy.choose(&a);
    let Some(pick) = found.iter().find(|r| r.accumulators == k) else {
        return Outcome::Fail(format!(
            "policy {name} picks acc{k} at {where_}, which the profile does not measure (add {k} to {}; {})",
            place.accumulators_key(),
            asked(&a)
        ));
    };
    let ratio = pick.mean_progress / best.mean_progress;
    let text = format!(
        "policy {name} picks acc{k} at {where_}: {:.1}, {:.2}% of the best, acc{} {:.1} (must reach {:.2}%), {}",
        pick.mean_progress,
        ratio * 100.0,
        best.accumulators,
        best.mean_progress,
        (1.0 - tolerance) * 100.0,
        asked(&a)
    );
    if ratio < 1.0 - tolerance {
        Outcome::Fail(format!(
            "{text}: the policy's pick is clearly below the best K on this GPU"
        ))
    } else {
        Outcome::Pass(text)
    }
}
