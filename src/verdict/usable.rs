//! Whether a case's results can be judged at all: a timing case whose variants were
//! measured while the GPU was not ours is an error, and a variant that is missing or made
//! no progress fails whatever the profile expects.

use super::cases::{Case, Check};
use super::{Failure, FailureKind};
use crate::model::results::{RunResults, VariantResult};
use crate::text::Shown;

/// Whether a case judges timing (progress, durations): what a disturbed measurement
/// cannot be judged by. Code shape, spills and the environment can.
fn judges_timing(check: &Check) -> bool {
    matches!(
        check,
        Check::Variant(_)
            | Check::Peak { .. }
            | Check::KernelPeak { .. }
            | Check::GainGrows { .. }
            | Check::Ceiling(_)
            | Check::Duration(_)
            | Check::Policy { .. }
            | Check::PolicyPick { .. }
    )
}

/// The cause, when a variant a timing case needs was measured while the GPU was not ours.
pub(super) fn disturbed(case: &Case, results: &RunResults) -> Option<String> {
    if !judges_timing(&case.check) {
        return None;
    }
    let c = results.contention.as_ref()?;
    let hit: Vec<&String> = case
        .needs
        .iter()
        .filter_map(|v| c.contaminated.get(&v.name()))
        .collect();
    // A cause is a results file's text: shown on one line.
    let first = hit.first()?.shown();
    Some(if hit.len() > 1 {
        format!(
            "{first} ({} of the {} variants it needs)",
            hit.len(),
            case.needs.len()
        )
    } else {
        first
    })
}

/// The results a case needs, each present with a positive, finite progress.
pub(super) fn results_for<'a>(
    case: &Case,
    results: &'a RunResults,
) -> Result<Vec<&'a VariantResult>, (FailureKind, Box<Failure>)> {
    let mut missing = Vec::new();
    let mut unusable = Vec::new();
    let mut found = Vec::new();
    for v in &case.needs {
        match results.get(*v) {
            None => missing.push(v.name()),
            Some(r) if !(r.mean_progress.is_finite() && r.mean_progress > 0.0) => {
                unusable.push(format!(
                    "{v} has progress {}: the probe loop did not run",
                    r.mean_progress
                ))
            }
            Some(r) => found.push(r),
        }
    }
    if !missing.is_empty() {
        return Err((
            FailureKind::NoResult,
            Box::new(
                Failure::new(format!(
                    "no result for {} in the results (source: {})",
                    missing.join(", "),
                    results.source.shown()
                ))
                .at(missing.join(", ")),
            ),
        ));
    }
    if !unusable.is_empty() {
        return Err((
            FailureKind::InvalidMeasurement,
            Box::new(Failure::new(unusable.join("; "))),
        ));
    }
    Ok(found)
}
