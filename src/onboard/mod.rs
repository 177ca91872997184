//! Onboarding a GPU no profile names: a draft profile and its baselines from one
//! measurement of the study's probe on it, in both modes, and of its physical ceilings.
//!
//! Drafting ([`draft_with`]) is a pure function of what was measured (the serial and wave
//! [`RunResults`], the [`Ceilings`], and more runs in the chosen mode) and the study's
//! profile: the match block, the study's probe settings with the contexts the
//! measurement holds ([`contexts`]), invariants and policy gate, the default mode `agree`
//! chooses on the base context ([`mode`]), the compile-only section, the validity
//! ceilings as measured ([`ceilings`]), a known deviation for every case that does not
//! hold ([`deviations`]), the wider baselines of the variants that moved between runs
//! ([`steadiness`]), the text laid out by `render`; the baselines are the blessing of
//! the chosen mode's results (`bless::check`, `bless::prepare`). [`Draft::write`] puts it
//! on disk through `bless::write_generated` (the folder's lock, never under CI, never
//! over a file), after [`Draft::refuse_existing`]: onboarding never replaces a profile,
//! baselines or recorded results file. `cargo xtask onboard` measures and calls these.

pub mod ceilings;
pub mod contexts;
pub mod deviations;
pub mod mode;
mod render;
pub mod steadiness;

use crate::bless::{self, Blessing};
use crate::catalog;
use crate::error::{Error, Result};
use crate::expectations::profile::Profile;
use crate::model::gpu::GpuIdentity;
use crate::model::results::RunResults;
use crate::model::settings::Mode;
pub use ceilings::Ceilings;
pub use deviations::Deviation;
use std::path::{Path, PathBuf};
pub use steadiness::Wide;

/// The architectures the compile-only section of a draft names: the gate's (sm_80 to
/// sm_120, docs/toolchains.md).
pub const COMPILE_ARCHITECTURES: [&str; 6] =
    ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"];
/// The NVRTC releases it names, those `ci/toolchains.sh` installs.
pub const COMPILE_TOOLCHAINS: [&str; 3] = ["12.4", "12.8", "13.0"];
/// The relative tolerance of the drafted baselines, the hand-written profiles' (0.5%).
pub const BASELINES_TOLERANCE: f64 = 0.005;
/// The largest difference of medians at which wave mode is chosen (`agree`'s default).
pub const AGREE_TOLERANCE: f64 = 0.005;
/// How many runs onboarding measures in the chosen mode besides the serial and wave ones
/// (`cargo xtask onboard --runs`), for each variant's steadiness ([`steadiness`]): too few
/// runs give widths that the next runs exceed (docs/profiles.md, docs/reliability.md).
pub const DEFAULT_RUNS: usize = 30;

/// The name of a profile for `gpu_name`: lowercase, the vendor dropped, every run of
/// other characters one `-` (`NVIDIA H200` -> `h200`, `NVIDIA GeForce RTX 4090` ->
/// `geforce-rtx-4090`).
pub fn slug(gpu_name: &str) -> String {
    let lower = gpu_name.trim().to_ascii_lowercase();
    let rest = lower.strip_prefix("nvidia").unwrap_or(&lower);
    let mut out = String::new();
    for c in rest.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// What a user on a GPU no profile matches runs, and what it writes: the harness's
/// closing summary and each failing case of such a run say it.
pub fn hint(gpu: &GpuIdentity) -> String {
    let name = slug(&gpu.name);
    format!(
        "no profile names GPU {:?}: run `cargo xtask onboard` on this machine; it measures the study's probe and its contexts (serial and wave, then more runs in the mode it chooses) and the GPU's ceilings and writes a draft profile expectations/{name}.yaml (known deviations, ceilings, mode) with its baselines expectations/baselines/{name}.yaml, for review and commit",
        gpu.name
    )
}

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
    pub recorded_text: String,
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

/// The mode a draft from `serial` and `wave` chooses ([`mode::Agreement::mode`], on the
/// base context's variants), and why: the mode onboarding measures its extra runs in.
pub fn chosen_mode(serial: &RunResults, wave: &RunResults) -> Result<(Mode, String)> {
    Ok(mode::compare(serial, wave, AGREE_TOLERANCE)
        .map_err(Error::msg)?
        .mode())
}

/// [`draft_with`] from the serial and wave runs alone.
pub fn draft(study: &Profile, dir: &Path, name: Option<&str>, m: &Measured) -> Result<Draft> {
    draft_with(study, dir, name, m, &[])
}

/// Drafts profile `name` (default: [`slug`] of the GPU's name) in the folder `dir` (the
/// study's profile's), from `m` and `runs`, more runs measured in the mode `m` makes the
/// draft choose (their steadiness widens baselines and shows unsteady cases). Refused
/// with the reason: a name that is no profile name; results measured under another
/// profile name, on another GPU, driver or NVRTC than each other or than the ceilings,
/// an extra run in another mode, or results that `bless::check` refuses; ceilings that
/// cannot be a ceiling; a disturbed measurement; a variant no tolerance holds.
pub fn draft_with(
    study: &Profile,
    dir: &Path,
    name: Option<&str>,
    m: &Measured,
    runs: &[RunResults],
) -> Result<Draft> {
    let env = m.serial.environment.as_ref().ok_or_else(|| {
        Error::msg("the serial results have no environment: onboarding needs a measurement")
    })?;
    let wave_env = m.wave.environment.as_ref().ok_or_else(|| {
        Error::msg("the wave results have no environment: onboarding needs a measurement")
    })?;
    let gpu = env.identity();
    let name = name.map_or_else(|| slug(&gpu.name), str::to_string);
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        || name == catalog::DOCUMENTED
    {
        return Err(Error::msg(format!(
            "cannot onboard as {name:?}: a profile name is letters, digits, '_' or '-', and not {:?} (give one with --name)",
            catalog::DOCUMENTED
        )));
    }
    if wave_env.identity() != gpu {
        return Err(Error::msg(format!(
            "the serial run measured {:?} (compute capability {}), the wave run {:?} (compute capability {}): onboarding needs both from one GPU",
            env.gpu_name, env.compute_capability, wave_env.gpu_name, wave_env.compute_capability
        )));
    }
    let c = &m.ceilings;
    if (c.gpu_name.as_str(), c.compute_capability.as_str())
        != (gpu.name.as_str(), gpu.compute_capability.as_str())
    {
        return Err(Error::msg(format!(
            "the ceilings were measured on {:?} (compute capability {}), the probe on {:?} (compute capability {}): onboarding needs both from one GPU",
            c.gpu_name, c.compute_capability, gpu.name, gpu.compute_capability
        )));
    }
    for (r, which) in [(&m.serial, Mode::Serial), (&m.wave, Mode::Wave)] {
        if r.mode != which {
            return Err(Error::msg(format!(
                "the {which:?} results were measured in {:?} mode",
                r.mode
            )));
        }
    }
    let duration_tolerance = study.validity.map_or(0.05, |v| v.duration_tolerance);
    let validity = ceilings::validity(c, duration_tolerance).map_err(Error::msg)?;
    let agreement = mode::compare(&m.serial, &m.wave, AGREE_TOLERANCE).map_err(Error::msg)?;
    let (mode, mode_why) = agreement.mode();
    let chosen = match mode {
        Mode::Wave => &m.wave,
        Mode::Serial => &m.serial,
    };
    let chosen_env = chosen.environment.as_ref().unwrap_or(env);
    for (i, r) in runs.iter().enumerate() {
        let which = format!("extra run {} of {}", i + 1, runs.len());
        let e = r.environment.as_ref().ok_or_else(|| {
            Error::msg(format!(
                "{which} has no environment: onboarding needs a measurement"
            ))
        })?;
        if e.identity() != gpu
            || (&e.driver_version, &e.nvrtc_version)
                != (&chosen_env.driver_version, &chosen_env.nvrtc_version)
        {
            return Err(Error::msg(format!(
                "{which} measured {:?} (compute capability {}), driver {}, NVRTC {}; the {mode:?} run {:?} (compute capability {}), driver {}, NVRTC {}: onboarding needs every run from one GPU and toolchain",
                e.gpu_name, e.compute_capability, e.driver_version, e.nvrtc_version,
                chosen_env.gpu_name, chosen_env.compute_capability, chosen_env.driver_version, chosen_env.nvrtc_version
            )));
        }
        if r.mode != mode || r.profile != chosen.profile {
            return Err(Error::msg(format!(
                "{which} was measured in {:?} mode under profile {:?}: onboarding chose {mode:?} mode, measured under {:?}",
                r.mode, r.profile, chosen.profile
            )));
        }
    }
    let drafted_probe = contexts::measured(&contexts::with_defaults(&study.probe), chosen);
    let recorded_rel = format!(
        "recorded/{name}-{}-{}.json",
        chosen_env.date.get(..10).unwrap_or("measured"),
        match mode {
            Mode::Wave => "wave",
            Mode::Serial => "serial",
        }
    );
    let profile_file = dir.join(format!("{name}.yaml"));
    let policy_file = study
        .policy_gate
        .as_ref()
        .map(|g| format!("policies/{}.yaml", g.source.name()));
    let compute_capability = gpu.compute_capability.clone();
    let same_mode: Vec<&RunResults> = std::iter::once(chosen).chain(runs).collect();
    let render_with = |deviations: &[Deviation], wider: &[Wide]| {
        render::profile(&render::Parts {
            name: &name,
            study,
            probe: &drafted_probe,
            measured: chosen,
            runs: same_mode.len(),
            wider,
            gpu_name: &gpu.name,
            compute_capability: &compute_capability,
            mode,
            mode_why: &mode_why,
            deviations,
            ceilings: c,
            validity,
            baselines_tolerance: BASELINES_TOLERANCE,
            policy_file: policy_file.clone(),
            recorded: &recorded_rel,
            compile_architectures: &COMPILE_ARCHITECTURES,
            compile_toolchains: &COMPILE_TOOLCHAINS,
        })
    };
    let other = match mode {
        Mode::Wave => &m.serial,
        Mode::Serial => &m.wave,
    };
    let mut all: Vec<&RunResults> = same_mode.clone();
    all.push(other);
    let gpu_short = gpu.name.strip_prefix("NVIDIA ").unwrap_or(&gpu.name);
    let when = format!(
        "{gpu_short}, {}, driver {}, NVRTC {}",
        dates(&all),
        chosen_env.driver_version,
        chosen_env.nvrtc_version
    );
    let variants = catalog::parse(&without_recorded(&render_with(&[], &[])), &profile_file)?
        .probe
        .variants();
    let wider = steadiness::wider(&variants, chosen, &all, BASELINES_TOLERANCE, &when)
        .map_err(|e| Error::msg(format!("{e}: onboard again on an idle GPU")))?;
    // The draft without deviations, with the baselines it will have, is the profile the
    // cases are judged by, as the gate judges them once the draft is committed (its
    // recorded results are not on disk yet: judged on the measurements themselves).
    let bare = as_blessed(
        catalog::parse(&without_recorded(&render_with(&[], &wider)), &profile_file)?,
        chosen,
    );
    let mut deviations = deviations::find(&bare, chosen).map_err(Error::msg)?;
    let (unsteady, counts) = unsteady(&bare, &deviations, runs)?;
    if !runs.is_empty() {
        for (d, k) in deviations.iter_mut().zip(counts) {
            d.reason.push_str(&format!(
                "; failing in {k} of the {} {} runs measured",
                same_mode.len(),
                render::mode_word(mode)
            ));
        }
    }
    let other_deviations = deviations::find(&bare, other).map_err(Error::msg)?;
    let names = |d: &[Deviation]| d.iter().map(|d| d.case.clone()).collect::<Vec<_>>();
    let (here, there) = (names(&deviations), names(&other_deviations));
    let mut mode_dependent: Vec<String> = here
        .iter()
        .filter(|c| !there.contains(c))
        .chain(there.iter().filter(|c| !here.contains(c)))
        .cloned()
        .collect();
    mode_dependent.sort();
    let profile_text = render_with(&deviations, &wider);
    let profile = catalog::parse(&without_recorded(&profile_text), &profile_file)?;
    if chosen.profile != name {
        return Err(Error::msg(format!(
            "the results were measured under profile {:?}, not {name:?}: onboarding measures under the name it drafts",
            chosen.profile
        )));
    }
    bless::check(&profile, chosen, false)?;
    let baselines_file = dir.join("baselines").join(format!("{name}.yaml"));
    let command = format!("cargo xtask onboard --name {name}");
    let baselines = bless::prepare(
        &profile,
        chosen,
        &format!("expectations/{recorded_rel}"),
        &command,
        &baselines_file,
        None,
    );
    Ok(Draft {
        name,
        profile_file,
        profile_text,
        profile,
        baselines,
        recorded_file: dir.join(&recorded_rel),
        recorded_text: chosen.to_json(),
        mode,
        mode_why,
        deviations,
        mode_dependent,
        unsteady,
        runs: same_mode.len(),
        wider,
        ceilings: c.clone(),
    })
}

/// `bare` with the baselines a bless of `chosen` gives it (its own file may not exist
/// yet, or hold another GPU's figures): the progress of every variant, the tolerance and
/// wider entries the draft's text sets, nothing else blessed.
fn as_blessed(mut bare: Profile, chosen: &RunResults) -> Profile {
    let progress = bless::blessed_progress(&bare, chosen);
    if let Some(b) = bare.baselines.as_mut() {
        b.progress = progress;
        b.sass.clear();
        b.policy_picks.clear();
        b.origin = None;
        b.read = None;
    }
    bare
}

/// The unsteady cases with the runs each fails in, and the runs each deviation fails in.
type Unsteady = (Vec<(String, usize)>, Vec<usize>);

/// The cases whose verdict on `runs` differs from the chosen run's (`found` its
/// deviations), each with the number of runs (the chosen one among them) it fails in;
/// and for each of `found`, the same number. `Err`: a run was disturbed.
fn unsteady(bare: &Profile, found: &[Deviation], runs: &[RunResults]) -> Result<Unsteady> {
    let mut failing: std::collections::BTreeMap<String, usize> =
        found.iter().map(|d| (d.case.clone(), 1)).collect();
    for (i, r) in runs.iter().enumerate() {
        let here = deviations::find(bare, r)
            .map_err(|e| Error::msg(format!("extra run {}: {e}", i + 1)))?;
        for d in here {
            *failing.entry(d.case).or_insert(0) += 1;
        }
    }
    let n = runs.len() + 1;
    let counts = found.iter().map(|d| failing[&d.case]).collect();
    let unsteady = failing.into_iter().filter(|&(_, k)| k < n).collect();
    Ok((unsteady, counts))
}

/// The days `runs` were measured on: "2026-12-02", or "2026-12-02 to 2026-12-03".
fn dates(runs: &[&RunResults]) -> String {
    let mut days: Vec<&str> = runs
        .iter()
        .filter_map(|r| r.environment.as_ref())
        .map(|e| e.date.get(..10).unwrap_or(&e.date))
        .collect();
    days.sort_unstable();
    match (days.first(), days.last()) {
        (Some(a), Some(b)) if a != b => format!("{a} to {b}"),
        (Some(a), _) => a.to_string(),
        _ => "date unknown".into(),
    }
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

/// `text` without its `recorded:` section (the last), for reading it back before the
/// recorded results are on disk.
fn without_recorded(text: &str) -> String {
    match text.find("\nrecorded:\n") {
        Some(i) => text[..=i].to_string(),
        None => text.to_string(),
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
    pub fn refuse_existing(&self) -> Result<()> {
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

    /// Writes the draft: refused under CI (`bless::refuse_under_ci`) and where a file
    /// exists ([`Draft::refuse_existing`]); each file through `bless::write_generated`,
    /// under the folder's lock, which refuses a file that appeared meanwhile.
    pub fn write(&self) -> Result<()> {
        self.write_unless_ci(|name| std::env::var(name).ok())
    }

    /// [`Draft::write`] with the environment read through `var` (`bless::refuse_if_ci`).
    pub fn write_unless_ci(&self, var: impl Fn(&str) -> Option<String>) -> Result<()> {
        bless::refuse_if_ci(&var)?;
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
        bless::write_generated_unless_ci(
            &var,
            folder,
            &self.recorded_file,
            None,
            &self.recorded_text,
            "recorded results",
        )?;
        bless::write_generated_unless_ci(
            &var,
            folder,
            &self.baselines.file,
            None,
            &self.baselines.contents,
            "baselines",
        )?;
        bless::write_generated_unless_ci(
            &var,
            folder,
            &self.profile_file,
            None,
            &self.profile_text,
            "profile",
        )
    }
}
