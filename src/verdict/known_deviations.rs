//! A profile's known deviations, applied strictly to a case's raw outcome.

use super::{Failure, FailureKind, Outcome};
use crate::expectations::profile::Profile;
use crate::text::Shown;

/// Applies the profile's known deviations to case `name`'s raw outcome, strictly: a
/// deviation that fails is excused, one that holds again fails, unless it is measured to be
/// unsteady (`unsteady: true`: it holds on some GPUs of the model and fails on others),
/// which is excused either way, saying which it did. A failure for `another` reason than
/// the one a deviation records (a policy that gave no pick, another pick) is not excused:
/// it fails with both reasons. With the kind of the failure, where it fails
/// (`kind_of_failure` for a failure of the check itself).
pub(super) fn apply(
    name: &str,
    profile: &Profile,
    raw: Outcome,
    another: Option<String>,
    kind_of_failure: impl FnOnce() -> FailureKind,
) -> (Outcome, Option<FailureKind>) {
    let deviation = profile.known_deviations.get(name);
    if let (Some(d), Outcome::Fail(failed), Some(why)) = (deviation, &raw, &another) {
        let failed = (**failed).clone().detail(format!(
            "not the known deviation: {why}; the profile {} records it as: {}",
            profile.file.shown(),
            d.reason.shown()
        ));
        return (failed.into(), Some(kind_of_failure()));
    }
    if let (Some(d), Outcome::Pass(detail)) = (deviation, &raw) {
        if d.unsteady {
            return (
                Outcome::KnownDeviation {
                    reason: d.reason.shown(),
                    detail: format!("unsteady, holds this time: {detail}"),
                },
                None,
            );
        }
    }
    // The reason is the profile's text: shown on one line, whatever the file holds.
    match (deviation.map(|d| d.reason.shown()), raw) {
        (None, Outcome::Fail(failed)) => (Outcome::Fail(failed), Some(kind_of_failure())),
        (None, raw) => (raw, None),
        (Some(reason), Outcome::Fail(failed)) => (
            Outcome::KnownDeviation {
                reason,
                detail: failed.own_text(),
            },
            None,
        ),
        (Some(reason), Outcome::Pass(detail)) => (
            Failure::new(format!(
                "known deviation no longer present: {name} now holds ({detail}); the profile {} says it should not: {reason}. \
                 If this is the new normal, remove it from known_deviations.",
                profile.file.shown()
            ))
            .into(),
            Some(FailureKind::KnownDeviationGone),
        ),
        (Some(_), other) => (other, None),
    }
}

/// [`apply`], the outcome alone (the compile-only gate's cases).
pub(crate) fn with_known_deviations(name: &str, profile: &Profile, raw: Outcome) -> Outcome {
    apply(name, profile, raw, None, || FailureKind::Invariant).0
}
