//! The `policy::<name>::chain<N>` cases: the K the profile's policy picks reaches
//! (1 - tolerance) of the best measured progress at that chain.

use super::Outcome;
use crate::expectations::profile::Profile;
use crate::model::results::VariantResult;

/// The policy's pick `k` at `chain` reaches (1 - `tolerance`) of the best progress in
/// `found` (the main variants at that chain).
pub(super) fn pick(
    chain: u32,
    k: u32,
    tolerance: f64,
    profile: &Profile,
    found: &[&VariantResult],
) -> Outcome {
    let name = profile
        .policy_gate
        .as_ref()
        .map_or("the policy", |h| h.policy.name.as_str());
    let Some(best) = found
        .iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
    else {
        return Outcome::Fail(format!("no results at chain {chain}"));
    };
    let Some(pick) = found.iter().find(|r| r.accumulators == k) else {
        return Outcome::Fail(format!(
            "policy {name} picks acc{k} at chain {chain}, which the profile does not measure (add {k} to probe.accumulators)"
        ));
    };
    let ratio = pick.mean_progress / best.mean_progress;
    let text = format!(
        "policy {name} picks acc{k} at chain {chain}: {:.1}, {:.2}% of the best, acc{} {:.1} (must reach {:.2}%)",
        pick.mean_progress,
        ratio * 100.0,
        best.accumulators,
        best.mean_progress,
        (1.0 - tolerance) * 100.0
    );
    if ratio < 1.0 - tolerance {
        Outcome::Fail(format!(
            "{text}: the policy's pick is clearly below the best K on this GPU"
        ))
    } else {
        Outcome::Pass(text)
    }
}
