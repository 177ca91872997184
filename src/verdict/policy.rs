//! The `policy::<name>::<context>` cases: the K the profile's policy picks for a context
//! reaches (1 - tolerance) of the best measured progress at its chain.

use super::Outcome;
use crate::expectations::policy_source::Picks;
use crate::expectations::profile::Profile;
use crate::model::results::{RunResults, VariantResult};
use crate::model::variant::Sink;

/// The policy's pick for `context` (from `picks`, asked before judging) at `chain` reaches
/// (1 - `tolerance`) of the best progress in `found` (the main variants at that chain). A
/// policy that gave no pick fails with why.
pub(super) fn pick(
    context: &str,
    chain: u32,
    tolerance: f64,
    picks: Option<&Picks>,
    profile: &Profile,
    found: &[&VariantResult],
) -> Outcome {
    let (name, k) = match asked(context, picks, profile) {
        Ok(asked) => asked,
        Err(failed) => return failed,
    };
    let st = match standing(k, found) {
        Ok(st) => st,
        Err(Unjudged::NoResults) => return Outcome::Fail(format!("no results at chain {chain}")),
        Err(Unjudged::NotMeasured) => {
            return Outcome::Fail(format!(
                "policy {name} picks acc{k} at chain {chain}, which the profile does not measure (add {k} to probe.accumulators)"
            ))
        }
    };
    let text = format!(
        "policy {name} picks acc{k} at chain {chain}: {:.1}, {:.2}% of the best, acc{} {:.1} (must reach {:.2}%)",
        st.progress,
        st.ratio() * 100.0,
        st.best_k,
        st.best_progress,
        (1.0 - tolerance) * 100.0
    );
    if st.ratio() < 1.0 - tolerance {
        Outcome::Fail(format!(
            "{text}: the policy's pick is clearly below the best K on this GPU"
        ))
    } else {
        Outcome::Pass(text)
    }
}

/// The policy's pick for `context` against the pick blessed there (the baselines'
/// `policy_picks`), both measured in `found`: a new pick whose progress falls below
/// (1 - `tolerance`) of the blessed pick's fails naming both; one above (1 + `tolerance`)
/// passes asking for a bless, as does any other changed pick.
pub(super) fn against_blessed(
    context: &str,
    chain: u32,
    tolerance: f64,
    picks: Option<&Picks>,
    profile: &Profile,
    found: &[&VariantResult],
) -> Outcome {
    let (name, k) = match asked(context, picks, profile) {
        Ok(asked) => asked,
        Err(failed) => return failed,
    };
    let Some(blessed) = profile
        .baselines
        .as_ref()
        .and_then(|b| b.policy_picks.get(context))
    else {
        return Outcome::Fail(format!(
            "no blessed pick of policy {name} for {context}: bless one (cargo xtask bless)"
        ));
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
            return Outcome::Fail(format!(
                "policy {name} picks acc{k} for {context} where acc{was} was blessed, and chain {chain} of these results does not hold both"
            ))
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
        Outcome::Fail(format!(
            "{text}: the new pick is worse than the blessed one"
        ))
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
        Some(Err(e)) => Err(Outcome::Fail(format!(
            "policy {name} gave no pick for {context}: {e}"
        ))),
        None => Err(Outcome::Fail(format!(
            "policy {name} was not asked: {NOT_ASKED}"
        ))),
    }
}

/// Why a policy case has no picks to judge.
const NOT_ASKED: &str = "a policy program's picks are asked once per run, before the verdicts (cargo test --test probe, cargo xtask gate)";

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
    pub fn ratio(&self) -> f64 {
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
}

/// Where pick `k` stands among `found` (the main variants of one chain).
pub fn standing(k: u32, found: &[&VariantResult]) -> Result<Standing, Unjudged> {
    let best = found
        .iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
        .ok_or(Unjudged::NoResults)?;
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

/// The main variants (sink A) of `results` at `chain`: what a pick there is judged among.
pub fn main_at_chain(results: &RunResults, chain: u32) -> Vec<&VariantResult> {
    results
        .variants
        .iter()
        .filter(|r| r.chain == chain && r.sink == Sink::A)
        .collect()
}
