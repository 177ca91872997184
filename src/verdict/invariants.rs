//! The study's invariants on progress: `invariant::peak_*` (the accumulator count that
//! peaks at each chain length) and `invariant::gain_grows_*` (a gain that rises with the
//! chain length). The no-spills invariant is in [`super::spills`].

use super::failure::{Bound, Expected};
use super::{pct, Failure, Outcome};
use crate::model::results::{RunResults, VariantResult};
use crate::model::variant::Variant;

/// At `place` (`chain 13`, or a real accumulation in a context: `dot_w16`), among the
/// variants `found` there, no other accumulator count beats acc`k` by more than `tolerance`.
pub(super) fn peak(place: &str, k: u32, tolerance: f64, found: &[&VariantResult]) -> Outcome {
    let Some(target) = found.iter().find(|r| r.accumulators == k) else {
        return Failure::new(format!("no acc{k} result at {place}"))
            .at(place)
            .into();
    };
    let best = found
        .iter()
        .filter(|r| r.accumulators != k)
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress));
    let Some(best) = best else {
        return Outcome::Pass(format!("acc{k} is the only variant at {place}"));
    };
    let limit = target.mean_progress * (1.0 + tolerance);
    let over = best.mean_progress / target.mean_progress - 1.0;
    let text = format!(
        "{place}: acc{k} {:.1}, best other acc{} {:.1} ({} vs acc{k}, tolerance {})",
        target.mean_progress,
        best.accumulators,
        best.mean_progress,
        pct(over),
        pct(tolerance)
    );
    if best.mean_progress > limit || !target.mean_progress.is_finite() {
        Failure::new(format!("acc{k} is not the peak: {text}"))
            .at(place)
            .figures(
                best.mean_progress,
                "progress",
                Expected::new(
                    target.mean_progress,
                    "progress",
                    Bound::AtMost,
                    Some(tolerance),
                ),
            )
            .into()
    } else {
        Outcome::Pass(text)
    }
}

/// The gain acc`k` / acc`over` rises by more than `min_increase` from each chain length
/// to the next.
pub(super) fn gain_grows(
    chains: &[u32],
    k: u32,
    over: u32,
    min_increase: f64,
    results: &RunResults,
) -> Outcome {
    let mut sorted = chains.to_vec();
    sorted.sort_unstable();
    let mut gains = Vec::new();
    for &n in &sorted {
        let (Some(a), Some(b)) = (
            results.get(Variant::new(n, k)),
            results.get(Variant::new(n, over)),
        ) else {
            return Failure::new(format!("chain {n}: acc{k} or acc{over} missing"))
                .at(format!("chain {n}"))
                .into();
        };
        gains.push((n, a.mean_progress / b.mean_progress));
    }
    let listing = gains
        .iter()
        .map(|(n, g)| format!("N={n}: {g:.4}"))
        .collect::<Vec<_>>()
        .join(", ");
    let text =
        format!("acc{k}/acc{over} {listing} (each step must rise by more than {min_increase})");
    let bad: Vec<String> = gains
        .windows(2)
        // NaN gains count as not rising.
        .filter(|w| {
            (w[1].1 - w[0].1).partial_cmp(&min_increase) != Some(std::cmp::Ordering::Greater)
        })
        .map(|w| {
            format!(
                "N={} -> N={}: {:.4} -> {:.4}",
                w[0].0, w[1].0, w[0].1, w[1].1
            )
        })
        .collect();
    if bad.is_empty() {
        Outcome::Pass(text)
    } else {
        Failure::new(format!(
            "acc{k}/acc{over} gain does not grow with chain length at {}: {text}",
            bad.join(", ")
        ))
        .at(format!("acc{k}/acc{over}"))
        .into()
    }
}
