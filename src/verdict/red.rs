//! What the verdict stage adds to an evaluator's failure of a case: the case's name, its
//! first suspect (a policy case's: `suspect::policy_suspect`), what it was measured with
//! (GPU, driver, NVRTC, options) and the re-bless hint where blessing again is the fix of
//! an expected change. [`super::Failure::text`] renders them in that order after the
//! verdict, the evaluator's detail last; a JUnit message carries the verdict and the
//! suspect's head (see `report::junit`).

use super::cases::{Case, Check};
use super::failure::{Failure, MeasuredWith, Rebless};
use super::suspect;
use crate::expectations::policy_source::Picks;
use crate::expectations::profile::Profile;
use crate::model::results::RunResults;

/// `failed`, `case`'s failure as its evaluator gave it, with what the verdict stage knows.
pub(super) fn complete(
    case: &Case,
    profile: &Profile,
    results: &RunResults,
    mut failed: Failure,
    picks: Option<&Picks>,
) -> Failure {
    failed.place.case = case.name.clone();
    failed.suspect = match case.check {
        Check::BaselineEnvironment => None,
        Check::Policy { place, .. } | Check::PolicyPick { place, .. } => {
            let name = place.name();
            suspect::policy_suspect(&name, picks, &case.needs, profile, results)
        }
        _ => suspect::first_suspect(&case.needs, profile, results),
    };
    failed.measured_with = Some(measured_with(results));
    failed.rebless = rebless(case, profile);
    failed
}

/// What the run was measured with.
fn measured_with(results: &RunResults) -> MeasuredWith {
    match &results.environment {
        Some(e) => MeasuredWith::Recorded {
            gpu: e.gpu_name.clone(),
            driver: e.driver_version.clone(),
            nvrtc: e.nvrtc_version.clone(),
            options: e.compile_options.clone(),
        },
        None => MeasuredWith::Unrecorded,
    }
}

/// How to accept an expected change, for the cases that compare with the baselines.
fn rebless(case: &Case, profile: &Profile) -> Option<Rebless> {
    if !matches!(
        case.check,
        Check::Variant(_) | Check::SassUnchanged(_) | Check::SassSchedule(_)
    ) {
        return None;
    }
    Some(Rebless {
        file: profile.baselines.as_ref()?.file.clone(),
        profile: profile.name.clone(),
    })
}
