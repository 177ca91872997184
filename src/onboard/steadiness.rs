//! How steady each variant is, from every run onboarding measured, and the wider baseline
//! tolerances a draft takes from it (`baselines.wider`).
//!
//! The study's variants measure the same run to run, but context variants at 16 or 32
//! warps or 48 live values move between runs and modes: their warps lock into one of a
//! few issue rates per launch (docs/h200.md, "How steady the contexts are"), so their
//! widths are measured over many runs, not typed in. The rule
//! (`tolerance`): a variant whose median moved so far from its baseline in some run that
//! `MARGIN` times that distance is more than the profile's tolerance (more than
//! [`reach`] of it) gets `MARGIN` times its largest distance, rounded up to `STEP`, at
//! least `LEAST`.

use super::OnboardError;
use crate::bless;
use crate::model::results::RunResults;
use crate::model::settings::Mode;
use crate::model::variant::Variant;
use crate::report::thousands as figure;

/// A variant's width: this many times its largest distance from the baseline (and the
/// margin a distance must keep inside the profile's tolerance not to need one)...
pub(crate) const MARGIN: f64 = 1.25;
/// ...rounded up to a multiple of this...
pub(crate) const STEP: f64 = 0.005;
/// ...and at least this.
pub(crate) const LEAST: f64 = 0.01;

/// One variant's wider tolerance and its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Wide {
    pub variant: String,
    pub tolerance: f64,
    /// The largest distance of a median from the baseline, over every run.
    pub(crate) moved: f64,
    pub reason: String,
}

/// The largest distance from the baseline that the profile's `tolerance` holds with the
/// margin: `tolerance` / `MARGIN` (0.4% of a 0.5% tolerance).
pub fn reach(tolerance: f64) -> f64 {
    tolerance / MARGIN
}

/// The width for a largest distance `moved` (a fraction) under the profile's `tolerance`:
/// `None` when it needs none ([`MARGIN`] times it is within `tolerance`); `Err` when it is
/// not a number, or no tolerance below 1 holds it.
pub(crate) fn tolerance(moved: f64, tolerance: f64) -> Result<Option<f64>, OnboardError> {
    if !moved.is_finite() {
        return Err(OnboardError::DistanceNotANumber { moved });
    }
    if moved * MARGIN <= tolerance {
        return Ok(None);
    }
    // In whole steps, so that 1.25 x 0.8% is 2 steps of 0.5%, not 2.0000000001.
    let steps = (moved * MARGIN / STEP - 1e-9).ceil().max(LEAST / STEP);
    let t = steps / (1.0 / STEP);
    if t >= 1.0 {
        return Err(OnboardError::NoTolerance { moved });
    }
    Ok(Some(t))
}

/// The wider tolerances of `variants`, whose baselines are blessed from `baseline` with
/// the profile's `base_tolerance`, from every run in `runs` (the baseline's run among them). A run written before contexts is
/// not counted for the contexts it predates; `Err` names a variant a run lacks, or one no
/// tolerance holds. `when` ends each reason: "H200, 2026-12-02, driver ..., NVRTC ...".
pub(crate) fn wider(
    variants: &[Variant],
    baseline: &RunResults,
    runs: &[&RunResults],
    base_tolerance: f64,
    when: &str,
) -> Result<Vec<Wide>, OnboardError> {
    let mut out = Vec::new();
    for &v in variants {
        let Some(b) = baseline.get(v) else {
            continue;
        };
        let base = bless::blessed_figure(b.baseline_progress());
        let mut moved: f64 = 0.0;
        let mut by_mode: Vec<(Mode, Vec<f64>)> = Vec::new();
        for r in runs {
            if r.predates(v) {
                continue;
            }
            let x = r
                .get(v)
                .ok_or(OnboardError::NotInRun {
                    variant: v,
                    mode: r.mode,
                })?
                .baseline_progress();
            let d = (x - base).abs() / base;
            moved = if d.is_nan() { f64::NAN } else { moved.max(d) };
            match by_mode.iter_mut().find(|(m, _)| *m == r.mode) {
                Some((_, xs)) => xs.push(x),
                None => by_mode.push((r.mode, vec![x])),
            }
        }
        let unsteady = |e| OnboardError::Unsteady {
            variant: v,
            cause: Box::new(e),
        };
        let Some(t) = tolerance(moved, base_tolerance).map_err(unsteady)? else {
            continue;
        };
        // Each mode's runs: their medians' range and largest distance.
        by_mode.sort_by_key(|(m, _)| *m != baseline.mode);
        let groups: Vec<String> = by_mode
            .iter()
            .map(|(m, xs)| {
                let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let d = xs
                    .iter()
                    .map(|x| (x - base).abs() / base)
                    .fold(0.0, f64::max);
                format!(
                    "{} to {} in {} {} run{} ({:.2}% from it at most)",
                    figure(lo),
                    figure(hi),
                    xs.len(),
                    m.name(),
                    if xs.len() == 1 { "" } else { "s" },
                    d * 100.0
                )
            })
            .collect();
        out.push(Wide {
            variant: v.name(),
            tolerance: t,
            moved,
            reason: format!(
                "median {} in the blessed {} run; medians {}; {MARGIN} times the largest distance, rounded up to {:.1}%, at least {:.0}%; {when}",
                figure(base),
                baseline.mode.name(),
                groups.join(", "),
                STEP * 100.0,
                LEAST * 100.0
            ),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_width_is_a_quarter_more_than_the_largest_move_in_half_percent_steps() {
        let t = 0.005;
        assert_eq!(tolerance(0.0, t), Ok(None));
        // 1.25 x 0.4% is the 0.5% tolerance itself: no width needed.
        assert_eq!(reach(t), 0.004);
        assert_eq!(tolerance(0.004, t), Ok(None));
        // Just past it: the least width.
        assert_eq!(tolerance(0.0041, t), Ok(Some(0.01)));
        // A tighter profile widens sooner.
        assert_eq!(tolerance(0.0031, 0.002), Ok(Some(0.01)));
        // 5.34% -> 7%, 4.94% -> 6.5%, 1.08% -> 1.5%.
        assert_eq!(tolerance(0.0534, t), Ok(Some(0.07)));
        assert_eq!(tolerance(0.0494, t), Ok(Some(0.065)));
        assert_eq!(tolerance(0.0108, t), Ok(Some(0.015)));
        // Exactly on a step stays on it.
        assert_eq!(tolerance(0.016, t), Ok(Some(0.02)));
        assert!(tolerance(f64::NAN, t).is_err());
        assert!(tolerance(f64::INFINITY, t).is_err());
        assert!(tolerance(0.9, t)
            .unwrap_err()
            .to_string()
            .contains("no tolerance below 100%"));
        assert_eq!(
            tolerance(0.9, t),
            Err(OnboardError::NoTolerance { moved: 0.9 }),
            "the distance, as a number"
        );
    }
}
