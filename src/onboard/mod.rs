//! Onboarding a GPU no profile names: a draft profile and its baselines from one
//! measurement of the study's probe on it, in both modes, and of its physical ceilings.
//!
//! Drafting ([`draft_with`]) is a pure function of what was measured (the serial and wave
//! [`RunResults`], the [`Ceilings`], and more runs in the chosen mode) and the study's
//! profile: the match block, the study's probe settings with the contexts the
//! measurement holds ([`contexts`]), invariants and policy gate, the default mode `agree`
//! chooses on the base context ([`mode`]), the compile-only section, the validity
//! ceilings as measured ([`ceilings`]), a known deviation for every case that does not
//! hold (`deviations`), the wider baselines of the variants that moved between runs
//! ([`steadiness`]), the text laid out by `render`; the baselines are the blessing of
//! the chosen mode's results (`bless::check`, `bless::prepare`). [`Draft::write_unless_ci`] puts it
//! on disk through `bless::write_generated` (the folder's lock, never under CI, never
//! over a file), after `Draft::refuse_existing`: onboarding never replaces a profile,
//! baselines or recorded results file. `cargo xtask onboard` measures and calls these.

pub mod ceilings;
mod comments;
pub mod contexts;
pub(crate) mod deviations;
mod draft;
mod error;
pub mod mode;
pub(crate) mod reductions;
mod render;
pub mod steadiness;

use crate::bless::Blessing;
use crate::error::{Error, Result};
use crate::expectations::profile::Profile;
use crate::model::gpu::GpuIdentity;
use crate::model::results::RunResults;
use crate::model::settings::Mode;
pub use ceilings::Ceilings;
pub(crate) use deviations::Deviation;
pub use draft::draft_with;
pub use error::OnboardError;
use std::path::{Path, PathBuf};
pub(crate) use steadiness::Wide;

/// The architectures the compile-only section of a draft names: the gate's (sm_80 to
/// sm_120, docs/toolchains.md).
pub const COMPILE_ARCHITECTURES: [&str; 6] =
    ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"];
/// The NVRTC releases it names, those `ci/toolchains.sh` installs.
pub const COMPILE_TOOLCHAINS: [&str; 3] = ["12.4", "12.8", "13.0"];
/// The relative tolerance of the drafted baselines, the hand-written profiles' (0.5%).
pub const BASELINES_TOLERANCE: f64 = 0.005;
/// The largest difference of medians at which wave mode is chosen (`agree`'s default).
pub(crate) const AGREE_TOLERANCE: f64 = 0.005;
/// How many runs onboarding measures in the chosen mode besides the serial and wave ones
/// (`cargo xtask onboard --runs`), for each variant's steadiness ([`steadiness`]): too few
/// runs give widths that the next runs exceed (docs/profiles.md, docs/reliability.md).
pub const DEFAULT_RUNS: usize = 30;

/// What onboarding measured on the GPU at hand.
#[derive(Debug, Clone)]
pub struct Measured {
    pub serial: RunResults,
    pub wave: RunResults,
    pub ceilings: Ceilings,
}

/// A drafted profile with its baselines and recorded results, not yet written.
#[derive(Debug, Clone)]
pub struct Draft {
    pub name: String,
    pub profile_file: PathBuf,
    pub profile_text: String,
    /// The profile as the text reads back (through the catalog).
    pub profile: Profile,
    pub baselines: Blessing,
    /// The chosen mode's results, which the profile replays (`recorded:`).
    pub recorded_file: PathBuf,
    pub(crate) recorded_text: String,
    pub mode: Mode,
    pub mode_why: String,
    pub deviations: Vec<Deviation>,
    /// Cases whose verdict differs between the two modes: a reviewer looks at these.
    pub mode_dependent: Vec<String>,
    /// Cases that fail in some runs of the chosen mode and hold in others, with how many
    /// of them they fail in: neither a known deviation nor a pass keeps them green.
    pub unsteady: Vec<(String, usize)>,
    /// The runs measured in the chosen mode, the blessed one among them.
    pub runs: usize,
    /// The variants whose baselines are drafted wider, and why.
    pub wider: Vec<Wide>,
    pub ceilings: Ceilings,
}

/// The mode a draft from `serial` and `wave` chooses (`mode::Agreement::mode`, on the
/// base context's variants), and why: the mode onboarding measures its extra runs in.
pub fn chosen_mode(
    serial: &RunResults,
    wave: &RunResults,
) -> std::result::Result<(Mode, String), OnboardError> {
    Ok(mode::compare(serial, wave, AGREE_TOLERANCE)?.mode())
}

/// [`draft_with`] from the serial and wave runs alone.
pub fn draft(
    study: &Profile,
    dir: &Path,
    name: Option<&str>,
    m: &Measured,
) -> std::result::Result<Draft, OnboardError> {
    draft_with(study, dir, name, m, &[])
}

/// The profile and baselines files profile `name` has in `dir`: what onboarding checks
/// before it measures (the recorded results' name needs the measurement's date).
pub fn profile_files(dir: &Path, name: &str) -> [PathBuf; 2] {
    [
        dir.join(format!("{name}.yaml")),
        dir.join("baselines").join(format!("{name}.yaml")),
    ]
}

/// Refuses when any of `files` exists (a link counts, even a dangling one): onboarding
/// never replaces a profile, baselines or recorded results file, whoever wrote it. The
/// error names the file.
pub fn refuse_existing<P: AsRef<Path>>(files: &[P]) -> Result<()> {
    match files
        .iter()
        .map(AsRef::as_ref)
        .find(|f| std::fs::symlink_metadata(f).is_ok())
    {
        Some(f) => Err(Error::in_file(
            f,
            "exists: onboarding never overwrites a profile, baselines or recorded results file. To draft again, remove the draft's files, or choose another name with --name",
        )),
        None => Ok(()),
    }
}

/// Refuses when a profile of `profiles` already names `gpu` (by GPU name): onboarding is
/// for a GPU no profile names, and a second profile naming it would make every run's
/// choice ambiguous. The error names that profile's file.
pub fn refuse_named(profiles: &[Profile], gpu: &GpuIdentity) -> Result<()> {
    match profiles.iter().find(|p| p.matches.by_name(gpu)) {
        Some(p) => Err(Error::in_file(
            &p.file,
            format!(
                "profile {:?} already names GPU {:?}: onboarding drafts a profile for a GPU no profile names. To measure this GPU again, re-bless that profile (`cargo xtask bless`) or remove it first",
                p.name, gpu.name
            ),
        )),
        None => Ok(()),
    }
}

impl Draft {
    /// The files the draft writes, in the order written: the recorded results, the
    /// baselines, the profile last (a profile never names a file that is not there).
    pub fn files(&self) -> [&Path; 3] {
        [
            &self.recorded_file,
            &self.baselines.file,
            &self.profile_file,
        ]
    }

    /// Refuses when any of [`Draft::files`] exists ([`refuse_existing`]).
    pub(crate) fn refuse_existing(&self) -> Result<()> {
        refuse_existing(&self.files())
    }

    /// The files, joined by `separator`.
    pub fn files_listed(&self, separator: &str) -> String {
        self.files()
            .iter()
            .map(|f| f.display().to_string())
            .collect::<Vec<_>>()
            .join(separator)
    }

    /// Writes the draft: refused under CI (`bless::refuse_if_ci`, the environment read
    /// through `var`) and where a file exists (`Draft::refuse_existing`); each file through
    /// `bless::write_generated`, under the folder's lock, which refuses a file that appeared
    /// meanwhile.
    pub fn write_unless_ci(&self, var: impl Fn(&str) -> Option<String>) -> Result<()> {
        crate::output::refuse_if_ci(&var)?;
        self.refuse_existing()?;
        let folder = &self.baselines.folder;
        if let Some(parent) = self.recorded_file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(parent, "create the recorded results folder", e))?;
        }
        if let Some(parent) = self.baselines.file.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| Error::io(parent, "create the baselines folder", e))?;
        }
        crate::output::write_generated_unless_ci(
            &var,
            folder,
            &self.recorded_file,
            None,
            &self.recorded_text,
            "recorded results",
        )?;
        crate::output::write_generated_unless_ci(
            &var,
            folder,
            &self.baselines.file,
            None,
            &self.baselines.contents,
            "baselines",
        )?;
        crate::output::write_generated_unless_ci(
            &var,
            folder,
            &self.profile_file,
            None,
            &self.profile_text,
            "profile",
        )
    }
}
