//! The kind of a failure (JUnit's `type`), and which kind each check's failure is.

use super::cases::Check;
use super::spills::{spill_by, spill_problem};
use crate::expectations::profile::Profile;
use crate::model::results::VariantResult;

/// What kind of failure a failing case is, in one word that reports group failures by
/// (JUnit's `type`): a missing or unusable measurement is not a regression, and a known
/// deviation that went away is neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A variant the case needs is not in the results, or a report it reads is missing.
    NoResult,
    /// The measurement itself is not valid: a warp made no progress, the output is wrong,
    /// progress above the physical ceiling, launches off their budget.
    InvalidMeasurement,
    /// Progress moved beyond the tolerance of the blessed baseline.
    Regression,
    /// A study invariant (the peak, the gain's growth) does not hold.
    Invariant,
    /// The policy's pick is clearly below the best K, or not measured.
    Policy,
    /// A variant spills to local memory.
    Spill,
    /// The measured loop does not have the shape of the probe (FFMAs, chains).
    SassShape,
    /// The SASS differs from the blessed digest.
    SassChanged,
    /// The profile has baselines, but none for what this case checks.
    NoBaseline,
    /// Results and baselines come from another GPU, driver or NVRTC.
    EnvironmentChanged,
    /// A known deviation of the profile holds again.
    KnownDeviationGone,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NoResult => "no-result",
            FailureKind::InvalidMeasurement => "invalid-measurement",
            FailureKind::Regression => "regression",
            FailureKind::Invariant => "invariant",
            FailureKind::Policy => "policy",
            FailureKind::Spill => "spill",
            FailureKind::SassShape => "sass-shape",
            FailureKind::SassChanged => "sass-changed",
            FailureKind::NoBaseline => "no-baseline",
            FailureKind::EnvironmentChanged => "environment-changed",
            FailureKind::KnownDeviationGone => "known-deviation-gone",
        }
    }
}

/// The kind of a failure of `check` on the results `found` for it.
pub(super) fn kind_of(check: &Check, profile: &Profile, found: &[&VariantResult]) -> FailureKind {
    match check {
        Check::Variant(v) => {
            let r = found[0];
            if r.samples.iter().flatten().any(|&p| p == 0) || !r.output_problems.is_empty() {
                FailureKind::InvalidMeasurement
            } else if r.resources.is_none() {
                FailureKind::NoResult
            } else if v.is_base() && spill_problem(r).is_some() {
                FailureKind::Spill
            } else if profile
                .baselines
                .as_ref()
                .is_some_and(|b| !b.progress.contains_key(&v.name()))
            {
                FailureKind::NoBaseline
            } else {
                FailureKind::Regression
            }
        }
        Check::Peak { .. } | Check::GainGrows { .. } | Check::KernelPeak { .. } => {
            FailureKind::Invariant
        }
        Check::NoSpills(src) => {
            if found
                .iter()
                .any(|r| matches!(spill_by(*src, r), Ok(Some(_))))
            {
                FailureKind::Spill
            } else {
                FailureKind::NoResult
            }
        }
        Check::SassShape(_) => FailureKind::SassShape,
        Check::SassUnchanged(v) | Check::SassSchedule(v) => {
            if profile
                .baselines
                .as_ref()
                .is_some_and(|b| b.sass.contains_key(&v.name()))
            {
                FailureKind::SassChanged
            } else {
                FailureKind::NoBaseline
            }
        }
        Check::BaselineEnvironment => match profile.baselines.as_ref() {
            Some(b) if b.origin.is_none() => FailureKind::NoBaseline,
            _ => FailureKind::EnvironmentChanged,
        },
        Check::Ceiling(_) | Check::Duration(_) => FailureKind::InvalidMeasurement,
        Check::Policy { .. } => {
            if found.is_empty() {
                FailureKind::NoResult
            } else {
                FailureKind::Policy
            }
        }
        Check::PolicyPick { place, .. } => {
            let name = place.name();
            let blessed = profile
                .baselines
                .as_ref()
                .is_some_and(|b| b.policy_picks.contains_key(&name));
            if found.is_empty() {
                FailureKind::NoResult
            } else if blessed {
                FailureKind::Policy
            } else {
                FailureKind::NoBaseline
            }
        }
    }
}
