//! Serial against wave mode on one GPU: the per-variant comparison `cargo xtask agree`
//! prints, and the default mode a drafted profile takes from it.
//!
//! Only the base context's variants (the study's, every sink mode) are judged: the
//! variants of other contexts are known to move between modes and between runs of one
//! mode (docs/h200.md, "How steady the contexts are"), so their differences are reported,
//! and measured into their baselines' widths (`super::steadiness`), not held against a
//! mode.

use super::OnboardError;
use crate::model::results::RunResults;
use crate::model::settings::Mode;

/// One variant measured both ways.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub name: String,
    pub serial_median: f64,
    pub wave_median: f64,
    /// |wave - serial| / serial of the medians.
    pub median_difference: f64,
    /// The same of the means.
    pub mean_difference: f64,
    /// Whether the variant is of the base context, the only ones the mode is chosen by.
    pub base: bool,
}

/// The comparison of a serial and a wave run of the same matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    pub rows: Vec<Row>,
    /// The largest difference of medians of the base context's variants.
    pub worst: f64,
    /// The largest difference of medians of any other context's variant, and its name.
    pub worst_context: Option<(String, f64)>,
    pub(crate) tolerance: f64,
}

/// Every variant of `serial` against the same variant of `wave`; `Err` names a variant the
/// wave run lacks.
pub fn compare(
    serial: &RunResults,
    wave: &RunResults,
    tolerance: f64,
) -> Result<Agreement, OnboardError> {
    let rel = |a: f64, b: f64| (a - b).abs() / b;
    let mut rows = Vec::new();
    for s in &serial.variants {
        let w = wave
            .get(s.variant())
            .ok_or_else(|| OnboardError::MissingFromWave {
                variant: s.name.clone(),
            })?;
        rows.push(Row {
            name: s.name.clone(),
            serial_median: s.baseline_progress(),
            wave_median: w.baseline_progress(),
            median_difference: rel(w.baseline_progress(), s.baseline_progress()),
            mean_difference: rel(w.mean_progress, s.mean_progress),
            base: s.context.is_base(),
        });
    }
    let worst = rows
        .iter()
        .filter(|r| r.base)
        .map(|r| r.median_difference)
        .fold(0.0, f64::max);
    let worst_context = worst_of(rows.iter().filter(|r| !r.base));
    Ok(Agreement {
        rows,
        worst,
        worst_context,
        tolerance,
    })
}

/// The row with the largest difference of medians (a difference that is not a number
/// counts as the largest), as its name and difference.
fn worst_of<'a>(rows: impl Iterator<Item = &'a Row>) -> Option<(String, f64)> {
    rows.max_by(|a, b| {
        let key = |r: &Row| {
            if r.median_difference.is_nan() {
                f64::INFINITY
            } else {
                r.median_difference
            }
        };
        key(a).total_cmp(&key(b))
    })
    .map(|r| (r.name.clone(), r.median_difference))
}

impl Agreement {
    /// Wave mode is accepted when every base-context variant's median agrees within the
    /// tolerance (a difference that is not a number is not agreement); the other
    /// contexts' variants are not judged.
    pub fn accepted(&self) -> bool {
        self.rows.iter().any(|r| r.base)
            && self.rows.iter().filter(|r| r.base).all(|r| self.agrees(r))
    }

    /// How the other contexts' variants compared, in words ("" when there are none):
    /// reported, not judged.
    pub(crate) fn contexts_note(&self) -> String {
        let n = self.rows.iter().filter(|r| !r.base).count();
        match &self.worst_context {
            Some((name, d)) => format!(
                "; the {n} variants of the other contexts are not judged (how far a context variant moves between runs and modes goes into its baseline's width instead): here they differ by up to {:.2}% ({name})",
                d * 100.0
            ),
            None => String::new(),
        }
    }

    /// Whether one variant's medians agree within the tolerance.
    fn agrees(&self, r: &Row) -> bool {
        r.median_difference <= self.tolerance
    }

    /// The mode a profile measures in by default: wave when accepted (every variant at once,
    /// the same medians), else serial; and why, in words.
    pub(crate) fn mode(&self) -> (Mode, String) {
        if self.accepted() {
            (
                Mode::Wave,
                format!(
                    "wave and serial medians agree within {:.4}% for all {} variants of the base context (the largest difference), within the {:.2}% `cargo xtask agree` accepts: wave measures every variant at once{}",
                    self.worst * 100.0,
                    self.rows.iter().filter(|r| r.base).count(),
                    self.tolerance * 100.0,
                    self.contexts_note()
                ),
            )
        } else {
            let base: Vec<&Row> = self.rows.iter().filter(|r| r.base).collect();
            let over: Vec<&str> = base
                .iter()
                .filter(|r| !self.agrees(r))
                .map(|r| r.name.as_str())
                .collect();
            (
                Mode::Serial,
                format!(
                    "wave and serial medians differ by more than the {:.2}% `cargo xtask agree` accepts for {} of {} variants of the base context ({}): serial measures one variant at a time{}",
                    self.tolerance * 100.0,
                    over.len(),
                    base.len(),
                    over.join(", "),
                    self.contexts_note()
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(d: f64) -> Row {
        Row {
            name: format!("v{d}"),
            serial_median: 1.0,
            wave_median: 1.0 + d,
            median_difference: d,
            mean_difference: d,
            base: true,
        }
    }

    fn agreement(rows: Vec<Row>) -> Agreement {
        Agreement {
            worst: rows
                .iter()
                .filter(|r| r.base)
                .map(|r| r.median_difference)
                .fold(0.0, f64::max),
            worst_context: worst_of(rows.iter().filter(|r| !r.base)),
            rows,
            tolerance: 0.005,
        }
    }

    #[test]
    fn wave_is_chosen_only_when_every_median_agrees() {
        assert_eq!(agreement(vec![row(0.0), row(0.005)]).mode().0, Mode::Wave);
        let (mode, why) = agreement(vec![row(0.0), row(0.006)]).mode();
        assert_eq!(mode, Mode::Serial);
        assert!(
            why.contains("1 of 2 variants of the base context (v0.006)"),
            "{why}"
        );
        // A difference that is not a number, or nothing compared, is no agreement.
        assert_eq!(
            agreement(vec![row(0.0), row(f64::NAN)]).mode().0,
            Mode::Serial
        );
        assert_eq!(agreement(vec![]).mode().0, Mode::Serial);
    }

    #[test]
    fn only_the_base_context_chooses_the_mode_and_the_others_are_reported() {
        let context = |d: f64| Row {
            name: format!("c{d}"),
            base: false,
            ..row(d)
        };
        let (mode, why) = agreement(vec![row(0.0), context(0.0519), context(0.01)]).mode();
        assert_eq!(mode, Mode::Wave, "{why}");
        assert!(
            why.contains("for all 1 variants of the base context"),
            "{why}"
        );
        assert!(
            why.contains("the 2 variants of the other contexts are not judged")
                && why.contains("up to 5.19% (c0.0519)"),
            "{why}"
        );
        // A context's difference does not rescue a base one, and a base one alone decides.
        let (mode, why) = agreement(vec![row(0.006), context(0.0)]).mode();
        assert_eq!(mode, Mode::Serial);
        assert!(
            why.contains("1 of 1 variants of the base context (v0.006)"),
            "{why}"
        );
        // Contexts alone are nothing judged: serial.
        assert_eq!(agreement(vec![context(0.0)]).mode().0, Mode::Serial);
        // Without contexts, nothing is said of them.
        assert!(!agreement(vec![row(0.0)])
            .mode()
            .1
            .contains("other contexts"));
    }
}
