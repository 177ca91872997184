//! The text of a red case, in the order its reader needs it: the verdict (one line), its
//! first suspect (a policy case's: `suspect::policy_suspect`), one line with what it was
//! measured with (GPU, driver, NVRTC, options), the re-bless hint where blessing again is
//! the fix of an expected change, then the detail (a SASS diff, say). A JUnit message
//! carries the first two (see `report::junit`); the body carries all of it.

use super::cases::{Case, Check};
use super::suspect;
use crate::expectations::policy_source::Picks;
use crate::expectations::profile::Profile;
use crate::model::results::RunResults;
use crate::text::Shown;

/// How an evaluator's own re-bless hint starts; the text moves it to its place.
const HINT: &str = "If the change is expected, re-bless";

/// The whole text of `case`'s failure, from its evaluator's text `failed`.
pub(super) fn text(
    case: &Case,
    profile: &Profile,
    results: &RunResults,
    failed: &str,
    picks: Option<&Picks>,
) -> String {
    let mut lines = failed.lines();
    let mut out = vec![lines.next().unwrap_or("").to_string()];
    match case.check {
        Check::BaselineEnvironment => {}
        Check::Policy {
            chain,
            sink,
            context,
            ..
        }
        | Check::PolicyPick {
            chain,
            sink,
            context,
            ..
        } => {
            let name = super::cases::policy_context_name(chain, sink, context);
            out.extend(suspect::policy_suspect(
                &name,
                picks,
                &case.needs,
                profile,
                results,
            ));
        }
        _ => out.extend(suspect::first_suspect(&case.needs, profile, results)),
    }
    out.push(measured_with(results));
    out.extend(rebless_hint(case, profile));
    out.extend(lines.filter(|l| !l.starts_with(HINT)).map(str::to_string));
    out.join("\n")
}

/// What the run was measured with, on one line.
fn measured_with(results: &RunResults) -> String {
    match &results.environment {
        Some(e) => format!(
            "measured on {}, driver {}, NVRTC {}, options {}",
            e.gpu_name.shown(),
            e.driver_version.shown(),
            e.nvrtc_version.shown(),
            match e.compile_options.is_empty() {
                true => "none recorded".to_string(),
                false => e.compile_options.join(" ").shown(),
            }
        ),
        None => "measured with no environment recorded (GPU, driver, NVRTC, options)".into(),
    }
}

/// How to accept an expected change, for the cases that compare with the baselines.
fn rebless_hint(case: &Case, profile: &Profile) -> Option<String> {
    if !matches!(case.check, Check::Variant(_) | Check::SassUnchanged(_)) {
        return None;
    }
    let file = profile.baselines.as_ref()?.file.shown();
    Some(format!(
        "if the change is expected, re-bless {file} from this run: cargo xtask bless \
         --profile {} --from RESULTS (the results file of this run)",
        profile.name
    ))
}
