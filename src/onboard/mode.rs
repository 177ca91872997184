//! Serial against wave mode on one GPU: the per-variant comparison `cargo xtask agree`
//! prints, and the default mode a drafted profile takes from it.

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
}

/// The comparison of a serial and a wave run of the same matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Agreement {
    pub rows: Vec<Row>,
    /// The largest difference of medians.
    pub worst: f64,
    pub tolerance: f64,
}

/// Every variant of `serial` against the same variant of `wave`; `Err` names a variant the
/// wave run lacks.
pub fn compare(
    serial: &RunResults,
    wave: &RunResults,
    tolerance: f64,
) -> Result<Agreement, String> {
    let rel = |a: f64, b: f64| (a - b).abs() / b;
    let mut rows = Vec::new();
    for s in &serial.variants {
        let w = wave
            .get(s.variant())
            .ok_or_else(|| format!("{} missing from the wave run", s.name))?;
        rows.push(Row {
            name: s.name.clone(),
            serial_median: s.baseline_progress(),
            wave_median: w.baseline_progress(),
            median_difference: rel(w.baseline_progress(), s.baseline_progress()),
            mean_difference: rel(w.mean_progress, s.mean_progress),
        });
    }
    let worst = rows.iter().map(|r| r.median_difference).fold(0.0, f64::max);
    Ok(Agreement {
        rows,
        worst,
        tolerance,
    })
}

impl Agreement {
    /// Wave mode is accepted when every variant's median agrees within the tolerance (a
    /// difference that is not a number is not agreement).
    pub fn accepted(&self) -> bool {
        !self.rows.is_empty() && self.rows.iter().all(|r| self.agrees(r))
    }

    /// Whether one variant's medians agree within the tolerance.
    fn agrees(&self, r: &Row) -> bool {
        r.median_difference <= self.tolerance
    }

    /// The mode a profile measures in by default: wave when accepted (every variant at once,
    /// the same medians), else serial; and why, in words.
    pub fn mode(&self) -> (Mode, String) {
        if self.accepted() {
            (
                Mode::Wave,
                format!(
                    "wave and serial medians agree within {:.4}% for all {} variants (the largest difference), within the {:.2}% `cargo xtask agree` accepts: wave measures every variant at once",
                    self.worst * 100.0,
                    self.rows.len(),
                    self.tolerance * 100.0
                ),
            )
        } else {
            let over: Vec<&str> = self
                .rows
                .iter()
                .filter(|r| !self.agrees(r))
                .map(|r| r.name.as_str())
                .collect();
            (
                Mode::Serial,
                format!(
                    "wave and serial medians differ by more than the {:.2}% `cargo xtask agree` accepts for {} of {} variants ({}): serial measures one variant at a time",
                    self.tolerance * 100.0,
                    over.len(),
                    self.rows.len(),
                    over.join(", ")
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
        }
    }

    #[test]
    fn wave_is_chosen_only_when_every_median_agrees() {
        let agreement = |rows: Vec<Row>| Agreement {
            worst: rows.iter().map(|r| r.median_difference).fold(0.0, f64::max),
            rows,
            tolerance: 0.005,
        };
        assert_eq!(agreement(vec![row(0.0), row(0.005)]).mode().0, Mode::Wave);
        let (mode, why) = agreement(vec![row(0.0), row(0.006)]).mode();
        assert_eq!(mode, Mode::Serial);
        assert!(why.contains("1 of 2 variants (v0.006)"), "{why}");
        // A difference that is not a number, or nothing compared, is no agreement.
        assert_eq!(
            agreement(vec![row(0.0), row(f64::NAN)]).mode().0,
            Mode::Serial
        );
        assert_eq!(agreement(vec![]).mode().0, Mode::Serial);
    }
}
