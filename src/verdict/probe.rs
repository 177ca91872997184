//! The `probe::<variant>` cases: a variant ran, its output is valid, it does not spill,
//! and its progress is within the tolerance of its blessed baseline.

use super::failure::{Bound, Expected};
use super::spills::spill_problem;
use super::{pct, Failure, Outcome};
use crate::expectations::profile::Profile;
use crate::model::results::VariantResult;
use crate::model::variant::Variant;
use crate::text::Shown;

/// `v` made progress in every warp, its output is valid, it does not spill (in the base
/// context; elsewhere a spill is reported), and its progress is within the tolerance of
/// its baseline (where the profile has baselines).
pub(super) fn variant(v: Variant, r: &VariantResult, profile: &Profile) -> Outcome {
    let mut problems = Vec::new();
    if let Some(z) = r.samples.iter().flatten().position(|&p| p == 0) {
        let warps = r.samples.first().map_or(1, |w| w.len().max(1));
        problems.push(format!(
            "warp {} of repeat {} made no progress",
            z % warps,
            z / warps
        ));
    }
    problems.extend(
        r.output_problems
            .iter()
            .map(|p| format!("invalid output: {p}")),
    );
    // A spill in a context other than the base is a measured fact about that context
    // (what a wide K costs there), reported, not a failure.
    let context_spill = if v.is_base() {
        problems.extend(spill_problem(r));
        None
    } else {
        spill_problem(r)
    };
    let mut detail = format!("progress {:.1}", r.mean_progress);
    // The figures of a progress beyond its baseline's tolerance: measured and expected.
    let mut figures = None;
    match against_baseline(v, r, profile) {
        Baseline::None => {}
        Baseline::Within(line) => detail = line,
        Baseline::Problem(problem, beyond) => {
            problems.push(problem);
            figures = beyond;
        }
    }
    if let Some(spill) = context_spill {
        detail.push_str(&format!(
            "; {spill} in context {} (data for the policy, not a failure)",
            v.context
        ));
    }
    if problems.is_empty() {
        Outcome::Pass(detail)
    } else {
        let failure = Failure::new(format!("{v}: {}", problems.join("; "))).at(v.name());
        match figures {
            Some((now, expected)) => failure.figures(now, "progress", expected),
            None => failure,
        }
        .into()
    }
}

/// `v`'s progress against its baseline.
enum Baseline {
    /// The profile has no baselines.
    None,
    /// Within the tolerance: what it measured against what.
    Within(String),
    /// No baseline for `v`, or a progress beyond the tolerance: the problem, and the
    /// progress measured and expected where it is the latter.
    Problem(String, Option<(f64, Expected)>),
}

/// `v`'s progress in `r` against its baseline in `profile`, within its tolerance (the
/// profile's, or one wider for this variant).
fn against_baseline(v: Variant, r: &VariantResult, profile: &Profile) -> Baseline {
    let Some(b) = &profile.baselines else {
        return Baseline::None;
    };
    let Some(&base) = b.progress.get(&v.name()) else {
        return Baseline::Problem(
            format!(
                "no baseline for {v} in {}{} (bless one with `cargo xtask bless --profile {} --from RESULTS`)",
                b.file.shown(),
                if b.file.exists() { "" } else { ", which does not exist" },
                profile.name
            ),
            None,
        );
    };
    let now = r.baseline_progress();
    let rel = (now - base) / base;
    let wider = b.wider.get(&v.name());
    let tolerance = wider.map_or(b.tolerance, |w| w.tolerance);
    let line = format!(
        "{} progress {now:.1} vs baseline {base:.1}: {} (tolerance ±{:.2}%{})",
        if r.summary.is_some() {
            "median"
        } else {
            "mean"
        },
        pct(rel),
        tolerance * 100.0,
        wider.map_or(String::new(), |w| format!(
            ", wider for this variant: {}",
            w.reason
        ))
    );
    if rel.abs() > tolerance {
        let dir = if rel > 0.0 { "faster" } else { "slower" };
        Baseline::Problem(
            format!("{line}: {dir} than its baseline beyond tolerance"),
            Some((
                now,
                Expected::new(base, "progress", Bound::Within, Some(tolerance)),
            )),
        )
    } else {
        Baseline::Within(line)
    }
}
