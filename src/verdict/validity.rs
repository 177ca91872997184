//! The validity cases: `validity::<variant>::ceiling` (progress within the launch's
//! physical ceiling) and `validity::<variant>::duration` (each launch takes budget / SM
//! clock). Both read the launch settings from the results, never from the profile.

use super::failure::{Bound, Expected};
use super::{pct, Failure, Outcome};
use crate::expectations::profile::Profile;
use crate::model::median::median;
use crate::model::results::{RunResults, VariantResult};
use crate::model::settings::RunSettings;
use crate::model::variant::Variant;
use crate::text::Shown;

/// The launch settings the results were measured with, or why a verdict that needs them
/// is skipped.
fn settings(results: &RunResults) -> Result<RunSettings, Outcome> {
    results.settings.ok_or_else(|| {
        Outcome::Skipped(format!(
            "the results carry no launch settings (schema {} file, source: {}): re-measure to judge this",
            results.schema, results.source.shown()
        ))
    })
}

/// `v`'s progress does not exceed the launch's physical ceilings. A scheduler issues one
/// instruction a cycle, shared by its warps: that bounds the mean of a launch's warps (the
/// issue bound at the launch's warps per scheduler), not any one warp, which the scheduler
/// may favour (on an H200 SM at 32 warps, one warp of a launch can make 1.4x the launch's
/// mean). Each warp is bounded by the FFMA latency of its partials and by the issue of a
/// scheduler it had to itself.
pub(super) fn ceiling(
    v: Variant,
    r: &VariantResult,
    profile: &Profile,
    results: &RunResults,
) -> Outcome {
    let Some(val) = profile.validity else {
        return Outcome::Skipped("the profile has no validity settings".into());
    };
    let p = match settings(results) {
        Ok(p) => p,
        Err(skip) => return skip,
    };
    let warps_per_scheduler = p
        .block_threads_of(&v)
        .div_ceil(32)
        .div_ceil(val.schedulers_per_sm)
        .max(1);
    let (instructions, source) = match &r.sass {
        Some(s) => (s.loop_body.len() as u32, "SASS loop body"),
        None => (v.chain, "N FFMAs, a lower bound without SASS"),
    };
    let budget = p.budget_cycles as f64;
    let alone = budget / instructions as f64;
    let issue = alone / warps_per_scheduler as f64;
    let latency = budget * v.effective() as f64 / (v.chain as f64 * val.ffma_latency_cycles as f64);
    let shared = issue.min(latency);
    let single = alone.min(latency);
    // The best launch's mean over its warps (the recorded mean where no samples were kept),
    // and the best warp of any launch.
    let launch_mean = r
        .samples
        .iter()
        .filter(|warps| !warps.is_empty())
        .map(|warps| warps.iter().map(|&x| x as f64).sum::<f64>() / warps.len() as f64)
        .reduce(f64::max)
        .unwrap_or(r.mean_progress);
    let best = r.summary.map_or(r.mean_progress, |s| s.max as f64);
    let text = format!(
        "best launch's mean {launch_mean:.1} vs ceiling {shared:.1} (issue-bound {issue:.1}: {instructions} instructions per iteration from the {source}, \
         {warps_per_scheduler} warps per scheduler; latency-bound {latency:.1}: {} partials, {}-cycle FFMA latency); \
         best warp {best:.1} vs {single:.1} (a scheduler to itself)",
        v.effective(),
        val.ffma_latency_cycles
    );
    if launch_mean > shared || best > single {
        Failure::new(format!("{v}: {text}: progress above the physical ceiling means the chain was optimised away or the clock misread"))
            .at(v.name())
            .figures(
                launch_mean,
                "progress",
                Expected::new(shared, "progress", Bound::AtMost, None),
            )
            .into()
    } else {
        Outcome::Pass(text)
    }
}

/// The median launch takes budget / SM clock, within the profile's tolerance.
pub(super) fn duration(r: &VariantResult, profile: &Profile, results: &RunResults) -> Outcome {
    let Some(val) = profile.validity else {
        return Outcome::Skipped("the profile has no validity settings".into());
    };
    let Some(median) = median(r.launch_ms.iter().copied()) else {
        return Outcome::Skipped(format!(
            "no launch durations in the results (source: {})",
            results.source.shown()
        ));
    };
    let Some(mhz) = results
        .environment
        .as_ref()
        .and_then(|e| e.sm_clock_rated_mhz)
    else {
        return Outcome::Skipped("no SM clock in the results' environment".into());
    };
    let p = match settings(results) {
        Ok(p) => p,
        Err(skip) => return skip,
    };
    let expected = p.budget_cycles as f64 / (mhz * 1e3);
    // The median launch is judged, the worst reported: progress counts SM cycles, so a
    // rare launch that takes longer in wall time (the events also time the GPU's launch
    // latency) does not touch it, while a wrong clock or budget moves every launch.
    let n = r.launch_ms.len();
    let worst = r
        .launch_ms
        .iter()
        .copied()
        .max_by(|a, b| {
            (a / expected - 1.0)
                .abs()
                .total_cmp(&(b / expected - 1.0).abs())
        })
        .unwrap_or(expected);
    let rel = median / expected - 1.0;
    let text = format!(
        "{n} launches {}, median {median:.4} ms vs budget / SM clock = {expected:.4} ms at {mhz:.0} MHz: {} (tolerance ±{:.1}%; worst launch {worst:.4} ms, {})",
        r.launch_timer.describe(),
        pct(rel),
        val.duration_tolerance * 100.0,
        pct(worst / expected - 1.0)
    );
    if rel.abs() > val.duration_tolerance || r.launch_ms.iter().any(|x| !x.is_finite()) {
        Failure::new(format!("{}: {text}", r.name))
            .at(r.name.clone())
            .figures(
                median,
                "ms",
                Expected::new(expected, "ms", Bound::Within, Some(val.duration_tolerance)),
            )
            .into()
    } else {
        Outcome::Pass(text)
    }
}
