//! The `baselines::environment` case: results and baselines come from the same GPU,
//! driver and NVRTC.

use super::Outcome;
use crate::expectations::profile::Profile;
use crate::model::results::RunResults;

/// The results' GPU, driver and NVRTC are those the baselines were blessed from.
pub(super) fn matches_baselines(profile: &Profile, results: &RunResults) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(o) = &b.origin else {
        return Outcome::Fail(format!(
            "no baselines blessed yet in {} (bless with `cargo xtask bless`)",
            b.file.display()
        ));
    };
    let Some(e) = &results.environment else {
        return Outcome::Skipped(format!(
            "the results carry no environment (source: {})",
            results.source
        ));
    };
    let now = e.fingerprint();
    let then = format!(
        "{} / driver {} / NVRTC {}",
        o.gpu_name, o.driver_version, o.nvrtc_version
    );
    if now == then {
        Outcome::Pass(format!("results and baselines both from {now}"))
    } else {
        Outcome::Fail(format!(
            "results from {now}, but the baselines in {} were measured on {then} ({}): another GPU or toolchain \
             is a change to review; re-bless for it",
            b.file.display(),
            o.date
        ))
    }
}
