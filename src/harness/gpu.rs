//! The GPU cases of one device's session: one trial per case of its profile, ignored at
//! list time when the case cannot run here (no usable GPU; no disassembler for a case
//! that needs SASS), under `ACCPROBE_REQUIRE_GPU` pointing at `gpu::required`.

use super::recorder::{Recorder, Skip};
use super::trial::{skip_reason, trial, Ending, Planned};
use super::REQUIRED_CASE;
use crate::error::GpuErrorKind;
use crate::measure::session::GpuSession;
use crate::model::variant::Variant;
use crate::policy_gate::Asked;
use crate::report::junit::{Ended, Status};
use crate::verdict::cases::{cases, on_device, Case, Check, SpillSource};
use crate::verdict::{self, Outcome};
use std::sync::Arc;
use std::time::Instant;

/// The JUnit `type` of a case that failed on a configuration error found when measuring:
/// the run exits 2.
pub(crate) const CONFIG_KIND: &str = "configuration";

/// The JUnit suite of a session's GPU cases.
pub(crate) fn suite_name(s: &GpuSession) -> String {
    format!("{} / profile {}", s.device_label(), s.profile.name)
}

/// Whether a case's verdict needs the SASS (and is skipped without it).
fn needs_sass(case: &Case) -> bool {
    matches!(
        case.check,
        Check::SassShape(_)
            | Check::SassUnchanged(_)
            | Check::SassSchedule(_)
            | Check::NoSpills(SpillSource::Sass)
    )
}

/// Why `case` cannot run on this session's device, decided before anything runs: no
/// usable GPU, or no disassembler for a case that needs SASS.
fn unrunnable(session: &GpuSession, case: &Case) -> Option<Skip> {
    match session.target() {
        Err(e) if e.kind() == GpuErrorKind::Unavailable => Some(Skip::NoGpu(e.to_string())),
        Err(_) => None,
        Ok(t) => needs_sass(case)
            .then(|| t.sass_unavailable())
            .flatten()
            .map(Skip::NoDisassembler),
    }
}

/// Why `case` cannot run on a recorded device whose file predates a context it needs
/// (`Target::predates`): no GPU matter, so never one for `gpu::required`.
fn predated(session: &GpuSession, case: &Case) -> Option<Skip> {
    let t = session.target().ok()?;
    let v = case.needs.iter().find(|v| t.predates(**v))?;
    Some(Skip::NotJudged(format!(
        "the recorded device's results predate context {}: they hold no {v}",
        v.context
    )))
}

/// The trials of a session's cases. A case that cannot run here is ignored at list time
/// with the reason; under `require` (`ACCPROBE_REQUIRE_GPU`) it is ignored as "not run:
/// see gpu::required", the one failing case that gives the reason.
pub(crate) fn trials(
    recorder: &Arc<Recorder>,
    session: &Arc<GpuSession>,
    require: bool,
) -> Vec<Planned> {
    let suite = suite_name(session);
    let asked = Arc::new(Asked::default());
    let cases = cases(&session.profile);
    let policy_needs = Arc::new(policy_needs(session, &cases));
    cases
        .into_iter()
        .map(|case| {
            let asked = asked.clone();
            let policy_needs = policy_needs.clone();
            // A recorded file older than a context: still not run with --ignored, since
            // nothing can measure what the file predates.
            let predated = predated(session, &case);
            let unrunnable = match unrunnable(session, &case) {
                Some(skip) if require => Some(see_required(skip)),
                other => other,
            };
            let unrunnable = predated.clone().or(unrunnable);
            let s = session.clone();
            let required = (require || predated.is_some())
                .then(|| unrunnable.clone())
                .flatten();
            let ignored_for = unrunnable.clone();
            let t = trial(
                recorder,
                suite.clone(),
                on_device(&case.name, session.named_ordinal()),
                move || run_case(&s, &case, &asked, &policy_needs, required, ignored_for),
            );
            match unrunnable {
                Some(skip) => Planned::ignored(t, &suite, skip),
                None => Planned::runs(t, &suite),
            }
        })
        .collect()
}

/// Whether `c` is a policy case, which needs every context the policy is asked about.
fn is_policy(c: &Case) -> bool {
    matches!(c.check, Check::Policy { .. } | Check::PolicyPick { .. })
}

/// The variants of every policy case of `cases`. The policy is asked once, about every
/// context it is gated in: with the results of all the policy cases' variants, not only
/// those of the first case that asks (the other contexts would be told the policy's
/// probe_context instead of what was measured). A context the target's results predate is
/// left out: its cases are skipped, and the policy is asked about what was measured
/// (`policy_contexts` leaves it out too).
fn policy_needs(session: &GpuSession, cases: &[Case]) -> Vec<Variant> {
    let predates = |v: &Variant| session.target().is_ok_and(|t| t.predates(*v));
    let mut needs: Vec<Variant> = cases
        .iter()
        .filter(|c| is_policy(c))
        .flat_map(|c| c.needs.iter().copied())
        .filter(|v| !predates(v))
        .collect();
    needs.sort();
    needs.dedup();
    needs
}

/// Runs `case` on `s`'s results: measured (or waited for) and judged. `required`: the
/// reason it is still not run under --ignored; `ignored_for`: the reason it was ignored.
fn run_case(
    s: &GpuSession,
    case: &Case,
    asked: &Asked,
    policy_needs: &[Variant],
    required: Option<Skip>,
    ignored_for: Option<Skip>,
) -> Ending {
    // Run with --ignored: still not run, gpu::required says why.
    if let Some(skip) = required {
        return Ending::skipped(skip_reason(&skip), skip.kind(), skip);
    }
    let started = Instant::now();
    // A policy case also needs every context the policy is asked about:
    // one that could not be measured fails it like its own would.
    let results = s.results_for(&case.needs).and_then(|r| {
        let all = is_policy(case)
            .then(|| s.results_for(policy_needs))
            .transpose()?;
        Ok((r, all))
    });
    let waited = started.elapsed();
    let ending: Ending = match results {
        Err(e) if e.kind() == GpuErrorKind::Unavailable => {
            Ending::skipped(e.to_string(), "no-gpu", Skip::NoGpu(e.to_string()))
        }
        // The run's gpu::busy case reports it, once.
        Err(e) if e.kind() == GpuErrorKind::Busy => Ending::busy(e.to_string()),
        // A setting that cannot be used (a named ACCPROBE_LOCK_DIR): the
        // run ends with exit 2, as any configuration error.
        Err(e) if e.kind() == GpuErrorKind::Config => {
            Ended::new(Status::Failed, e.to_string(), CONFIG_KIND).into()
        }
        Err(e) => Ended::new(Status::Failed, e.to_string(), "gpu-error").into(),
        Ok((results, all)) => {
            let picks = asked.for_case(case, &s.profile, all.as_ref().unwrap_or(&results));
            let mut v = verdict::judge_with(case, &s.profile, &results, picks);
            if let (Outcome::Fail(failure), Some(hint)) = (&mut v.outcome, &s.onboarding) {
                failure.detail.push(hint.clone());
            }
            match (v.outcome, ignored_for) {
                (Outcome::Error(cause), _) => Ending::busy(cause),
                // Run with --ignored: still the reason it was ignored for.
                (Outcome::Skipped(r), Some(skip)) => Ending::skipped(r, "cannot-judge", skip),
                (outcome, _) => Ending::of_verdict(verdict::Verdict {
                    outcome,
                    failure: v.failure,
                }),
            }
        }
    };
    ending.after_waiting(waited)
}

/// `skip` under `ACCPROBE_REQUIRE_GPU`: the same kind, pointing at `gpu::required`, which
/// gives the reason once.
fn see_required(skip: Skip) -> Skip {
    let why = format!("not run: see {REQUIRED_CASE}");
    match skip {
        Skip::NoDisassembler(_) => Skip::NoDisassembler(why),
        _ => Skip::NoGpu(why),
    }
}

/// Why a run that requires a GPU cannot test it, or `None`.
pub(crate) fn required_reason(sessions: &[Arc<GpuSession>]) -> Option<String> {
    let several = sessions.len() > 1;
    let reasons: Vec<String> = sessions
        .iter()
        .filter_map(|s| {
            let skip = cases(&s.profile).iter().find_map(|c| unrunnable(s, c))?;
            Some(if several {
                format!("{}: {}", s.device_label(), skip_reason(&skip))
            } else {
                skip_reason(&skip)
            })
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}
