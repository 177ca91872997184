//! A case that does not hold, as data: the verdict line, where it failed, what was measured
//! against what was expected, the first suspect, what the run was measured with, the
//! re-bless hint and the detail. Each output renders it: [`Failure::text`] is the whole
//! text (the terminal, a JUnit body, the history's `message`), in the order its reader
//! needs it (the verdict, its first suspect, what it was measured with, the re-bless
//! hint, then the detail); `report::message::failure_message` makes the one-line JUnit
//! message of [`Failure::verdict`] and the suspect's head; the Markdown report's grid
//! shows [`Failure::figures_text`]. A failure that judged no measurement (a result
//! missing, a compile that failed) leaves the figures and the suspect out.

use super::suspect::Suspect;
use crate::text::Shown;
use std::path::PathBuf;

/// Why a case does not hold. The evaluator of the check fills the verdict, the place's
/// subject, the figures and the detail; the verdict stage (`red`) adds the case, the
/// suspect, what the run was measured with and the re-bless hint.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// What does not hold, in a line (`chain7_acc2: median progress 9.8 vs baseline 10.0:
    /// -2.00% (tolerance ±0.50%): slower than its baseline beyond tolerance`); a JUnit
    /// message carries its first line, should a cause quoted in it hold more.
    pub verdict: String,
    /// Where it failed.
    pub place: Place,
    /// What was measured, where the case judges one figure.
    pub measured: Option<Figure>,
    /// What the figure should have been, where the case judges one.
    pub expected: Option<Expected>,
    /// The first suspect, where the case compares with baselines.
    pub suspect: Option<Suspect>,
    /// What the run was measured with; `None` for a failure judged on no measured run
    /// (the compile-only cases).
    pub measured_with: Option<MeasuredWith>,
    /// How to accept the change, where blessing again is the fix of an expected one.
    pub rebless: Option<Rebless>,
    /// The explanation, an entry a line or a block of lines: a SASS diff, a loop body,
    /// why a known deviation does not excuse it, a hint.
    pub detail: Vec<String>,
}

/// Where a failure is: its case, and what of the study it judges.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Place {
    /// The case's name (`probe::chain7_acc2`); empty until the verdict stage names it.
    pub case: String,
    /// The variant, context, chain or architecture judged (`chain7_acc2`, `chain 7`,
    /// `sm_90 with NVRTC 13.0`), where the check judges one.
    pub subject: Option<String>,
}

/// A measured figure and its unit (`progress`, `ms`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Figure {
    pub value: f64,
    pub unit: String,
}

/// What a figure was expected to be: a value it must stay within a relative tolerance of,
/// or a bound it must not cross.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Expected {
    pub figure: Figure,
    pub bound: Bound,
    /// The relative tolerance (0.005 for ±0.50%), where the check allows one.
    pub tolerance: Option<f64>,
}

impl Expected {
    /// `value` `unit`, measured as `bound` says, with `tolerance` where there is one.
    pub fn new(value: f64, unit: &str, bound: Bound, tolerance: Option<f64>) -> Expected {
        Expected {
            figure: Figure {
                value,
                unit: unit.into(),
            },
            bound,
            tolerance,
        }
    }
}

/// How a measured figure must stand to the expected one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Bound {
    /// Within the tolerance of it, either way.
    Within,
    /// At most it (with the tolerance above it).
    AtMost,
    /// At least it (with the tolerance below it).
    AtLeast,
}

/// The environment a run was measured in, as its results record it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum MeasuredWith {
    /// The GPU, driver, NVRTC and options (empty when none were recorded).
    Recorded {
        gpu: String,
        driver: String,
        nvrtc: String,
        options: Vec<String>,
    },
    /// The results record no environment.
    Unrecorded,
}

/// The bless that accepts an expected change: the baselines file and the profile.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rebless {
    pub(crate) file: PathBuf,
    pub(crate) profile: String,
}

impl Failure {
    /// A failure that says `verdict` (one line) and nothing else yet.
    pub fn new(verdict: impl Into<String>) -> Failure {
        Failure {
            verdict: verdict.into(),
            place: Place::default(),
            measured: None,
            expected: None,
            suspect: None,
            measured_with: None,
            rebless: None,
            detail: Vec::new(),
        }
    }

    /// This failure, about `subject` (a variant, a context, an architecture).
    pub(crate) fn at(mut self, subject: impl Into<String>) -> Failure {
        self.place.subject = Some(subject.into());
        self
    }

    /// This failure, having measured `value` `unit` against `expected`.
    pub fn figures(mut self, value: f64, unit: &str, expected: Expected) -> Failure {
        self.measured = Some(Figure {
            value,
            unit: unit.into(),
        });
        self.expected = Some(expected);
        self
    }

    /// This failure, with `line` (or block of lines) added to its detail.
    pub(crate) fn detail(mut self, line: impl Into<String>) -> Failure {
        self.detail.push(line.into());
        self
    }

    /// The whole text ([`Failure`]'s `Display`).
    pub fn text(&self) -> String {
        self.to_string()
    }

    /// The verdict and the detail alone, as an evaluator gave them (what a known deviation
    /// records as measured now).
    pub(crate) fn own_text(&self) -> String {
        std::iter::once(&self.verdict)
            .chain(&self.detail)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The measured figure against the expected one, in a few words (`9.8 progress,
    /// expected 10.0 ±0.50%`); `None` when the case judged no one figure.
    pub fn figures_text(&self) -> Option<String> {
        let (m, e) = (self.measured.as_ref()?, self.expected.as_ref()?);
        let tolerance = e
            .tolerance
            .map_or(String::new(), |t| format!(" ±{:.2}%", t * 100.0));
        let bound = match e.bound {
            Bound::Within => "",
            Bound::AtMost => "at most ",
            Bound::AtLeast => "at least ",
        };
        Some(format!(
            "{} {}, expected {bound}{}{tolerance}",
            figure(m.value),
            m.unit,
            figure(e.figure.value)
        ))
    }
}

impl std::fmt::Display for Failure {
    /// The whole text, in the order its reader needs it: the verdict, its first suspect,
    /// what it was measured with, the re-bless hint, then the detail, a line each.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.verdict)?;
        let lines = self.suspect.as_ref().map(Suspect::line).into_iter();
        let lines = lines
            .chain(self.measured_with.as_ref().map(MeasuredWith::line))
            .chain(self.rebless.as_ref().map(Rebless::line))
            .chain(self.detail.iter().cloned());
        for line in lines {
            write!(f, "\n{line}")?;
        }
        Ok(())
    }
}

/// A figure with the digits it needs: four after the point below 10, one above.
fn figure(x: f64) -> String {
    if x.abs() < 10.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.1}")
    }
}

impl MeasuredWith {
    /// What the run was measured with, on one line.
    pub(crate) fn line(&self) -> String {
        match self {
            MeasuredWith::Recorded {
                gpu,
                driver,
                nvrtc,
                options,
            } => format!(
                "measured on {}, driver {}, NVRTC {}, options {}",
                gpu.shown(),
                driver.shown(),
                nvrtc.shown(),
                match options.is_empty() {
                    true => "none recorded".to_string(),
                    false => options.join(" ").shown(),
                }
            ),
            MeasuredWith::Unrecorded => {
                "measured with no environment recorded (GPU, driver, NVRTC, options)".into()
            }
        }
    }
}

impl Rebless {
    /// How to accept an expected change, on one line.
    pub(crate) fn line(&self) -> String {
        format!(
            "if the change is expected, re-bless {} from this run: cargo xtask bless \
             --profile {} --from RESULTS (the results file of this run)",
            self.file.shown(),
            self.profile
        )
    }
}
