//! The `baselines::environment` case: results and baselines come from the same GPU,
//! driver and NVRTC.

use super::{Failure, Outcome};
use crate::expectations::profile::Profile;
use crate::model::gpu::fingerprint_of;
use crate::model::results::RunResults;
use crate::text::Shown;

/// The results' GPU, driver and NVRTC are those the baselines were blessed from.
pub(super) fn matches_baselines(profile: &Profile, results: &RunResults) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(o) = &b.origin else {
        return Failure::new(format!(
            "no baselines blessed yet in {} (bless with `cargo xtask bless`)",
            b.file.shown()
        ))
        .into();
    };
    let Some(e) = &results.environment else {
        return Outcome::Skipped(format!(
            "the results carry no environment (source: {})",
            results.source.shown()
        ));
    };
    let now = e.fingerprint();
    let then = fingerprint_of(&o.gpu_name, &o.driver_version, &o.nvrtc_version);
    let same = (&e.gpu_name, &e.driver_version, &e.nvrtc_version)
        == (&o.gpu_name, &o.driver_version, &o.nvrtc_version);
    if same {
        Outcome::Pass(format!("results and baselines both from {now}"))
    } else {
        Failure::new(format!(
            "results from {now}, but the baselines in {} were measured on {then} ({}): another GPU or toolchain \
             is a change to review; re-bless for it",
            b.file.shown(),
            o.date
        ))
        .at(now)
        .into()
    }
}
