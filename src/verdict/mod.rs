//! Stage 6 of the pipeline: verdicts. Plain results in, one outcome per case out.
//!
//! Architecture invariant: nothing here touches a GPU; every verdict can be replayed on
//! recorded results on any machine.

pub mod cases;
pub mod compile_only;
mod environment;
pub mod failure;
mod invariants;
mod kind;
mod known_deviations;
mod policy;
mod probe;
mod red;
mod reduction_shape;
mod sass;
pub mod sass_diff;
mod spills;
pub mod suspect;
mod usable;
mod validity;

use crate::expectations::policy_source::Picks;
use crate::expectations::profile::Profile;
use crate::model::place::Place;
use crate::model::results::{RunResults, VariantResult};
use crate::text::Shown;
use cases::{Case, Check};
use std::path::PathBuf;

pub use failure::Failure;
pub use kind::FailureKind;
pub(crate) use known_deviations::with_known_deviations;
pub use policy::{
    at_place, best_at, judged_standing, main_at_chain, progressed, standing, Basis, Standing,
    Unjudged,
};
pub(crate) use sass::shape;

/// What a case concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Holds; the text says what was measured.
    Pass(String),
    /// Does not hold; the failure says what was measured against what was expected, where,
    /// its first suspect and why ([`Failure`]).
    Fail(Box<Failure>),
    /// Does not hold, and the profile records that as a known deviation of this GPU.
    KnownDeviation { reason: String, detail: String },
    /// Cannot be judged from these results (no SASS, no launch timings); the reason says why.
    Skipped(String),
    /// Not judged: the measurement was disturbed (another process's work on the GPU,
    /// slowed clocks) and stayed so after the retries. An error of the run, not a verdict
    /// about the code: the text starts with the cause (`GPU busy: PID 1234 (name) ...`).
    Error(String),
}

impl From<Failure> for Outcome {
    fn from(failure: Failure) -> Outcome {
        Outcome::Fail(Box::new(failure))
    }
}

impl Outcome {
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail(_))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Error(_))
    }
}

/// A case's outcome and, when it fails, what kind of failure it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// `Some` exactly when the outcome is [`Outcome::Fail`].
    pub failure: Option<FailureKind>,
}

/// Evaluates one case, then applies the profile's known deviations strictly: a known
/// deviation that holds again fails, so that a change in either direction is seen.
/// Missing or unusable results fail whatever the profile expects: a deviation excuses a
/// measured difference, never the absence of a measurement. The one exception is a
/// context variant the results predate (written before contexts existed): that case is
/// skipped with the reason (`cases::unrecorded`). A timing case whose variants
/// were measured while the GPU was not ours is an error, not a verdict. Every failure
/// names its case, and one that judged a measurement its first suspect (see [`suspect`])
/// and what the run was measured with (`red`).
pub fn evaluate(case: &Case, profile: &Profile, results: &RunResults) -> Outcome {
    judge(case, profile, results).outcome
}

/// [`evaluate`], with the kind of failure when the case fails. A policy file's picks are
/// computed here; a policy program's are not (the verdict stage starts no process), so
/// its cases need [`judge_with`].
pub fn judge(case: &Case, profile: &Profile, results: &RunResults) -> Verdict {
    let picks = profile.policy_gate.as_ref().and_then(|g| {
        g.source
            .file_picks(&cases::policy_contexts(profile, Some(results)))
    });
    judge_with(case, profile, results, picks.as_ref())
}

/// [`judge`], with the policy's picks asked before (`crate::policy_gate::ask`, with these
/// results), or `None` when they were not asked, which fails the policy cases saying so.
pub fn judge_with(
    case: &Case,
    profile: &Profile,
    results: &RunResults,
    picks: Option<&Picks>,
) -> Verdict {
    if let Some(why) = cases::unrecorded(case, results) {
        return Verdict {
            outcome: Outcome::Skipped(why),
            failure: None,
        };
    }
    if let Some(cause) = usable::disturbed(case, results) {
        return Verdict {
            outcome: Outcome::Error(cause),
            failure: None,
        };
    }
    let found = match usable::results_for(case, results) {
        Ok(found) => found,
        Err((kind, mut e)) => {
            e.place.case = case.name.clone();
            return Verdict {
                outcome: Outcome::Fail(e),
                failure: Some(kind),
            };
        }
    };
    let raw = evaluate_raw(case, profile, results, &found, picks);
    let another = policy_place(&case.check)
        .and_then(|(place, own)| policy::not_the_deviation(place, own, picks, profile, &found));
    let (outcome, failure) = known_deviations::apply(&case.name, profile, raw, another, || {
        kind::kind_of(&case.check, profile, &found)
    });
    let outcome = match outcome {
        Outcome::Fail(f) => red::complete(case, profile, results, *f, picks).into(),
        other => other,
    };
    Verdict { outcome, failure }
}

/// Refuses to judge `results` by `profile` when they were measured with other launch
/// settings than the profile asks for: a verdict never mixes the two.
pub fn comparable(profile: &Profile, results: &RunResults) -> Result<(), NotComparable> {
    let Some(measured) = &results.settings else {
        return Ok(());
    };
    let differences = measured.differences(&profile.probe.run_settings());
    if differences.is_empty() {
        Ok(())
    } else {
        Err(NotComparable {
            profile: profile.name.clone(),
            file: profile.file.clone(),
            differences,
        })
    }
}

/// Results measured with other launch settings than the profile asks for
/// ([`comparable`]): each difference as `setting: measured vs asked`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the results were measured with other settings than profile {profile:?} ({}) asks for: {}",
    .file.shown(),
    .differences.join(", ")
)]
pub struct NotComparable {
    pub(crate) profile: String,
    pub(crate) file: PathBuf,
    pub differences: Vec<String>,
}

/// Where a policy case judges (and whether it is the case of the pick against the best K,
/// not against the blessed pick); `None` for any other check.
fn policy_place(check: &Check) -> Option<(Place, bool)> {
    match *check {
        Check::Policy { place, .. } => Some((place, true)),
        Check::PolicyPick { place, .. } => Some((place, false)),
        _ => None,
    }
}

fn evaluate_raw(
    case: &Case,
    profile: &Profile,
    results: &RunResults,
    found: &[&VariantResult],
    picks: Option<&Picks>,
) -> Outcome {
    match case.check {
        Check::Variant(v) => probe::variant(v, found[0], profile),
        Check::Peak {
            chain,
            accumulators,
            tolerance,
        } => invariants::peak(&format!("chain {chain}"), accumulators, tolerance, found),
        Check::KernelPeak {
            kernel,
            context,
            accumulators,
            tolerance,
        } => invariants::peak(
            &format!("{kernel}{}", context.suffix()),
            accumulators,
            tolerance,
            found,
        ),
        Check::GainGrows {
            accumulators,
            over,
            min_increase,
        } => invariants::gain_grows(
            &profile.probe.chains,
            accumulators,
            over,
            min_increase,
            results,
        ),
        Check::NoSpills(src) => spills::no_spills(src, found, results),
        Check::SassShape(v) => sass::measured_shape(v, found[0], results),
        Check::SassUnchanged(v) => sass::unchanged(v, found[0], profile, results),
        Check::SassSchedule(v) => sass::schedule(v, found[0], profile, results),
        Check::BaselineEnvironment => environment::matches_baselines(profile, results),
        Check::Ceiling(v) => validity::ceiling(v, found[0], profile, results),
        Check::Duration(_) => validity::duration(found[0], profile, results),
        Check::Policy { place, tolerance } => {
            policy::pick(place, tolerance, picks, profile, results, found)
        }
        Check::PolicyPick { place, tolerance } => {
            policy::against_blessed(place, tolerance, picks, profile, found)
        }
    }
}

/// A relative difference as a signed percentage: `+1.25%`.
fn pct(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}
