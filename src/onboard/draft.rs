//! Drafting: the measurements checked against each other, the draft's text rendered, its
//! steadiness measured into widths, its cases judged as the gate will judge them, and the
//! draft read back and blessed.

use super::OnboardError;
use super::{
    ceilings, contexts, deviations, mode, render, steadiness, Deviation, Draft, Measured, Wide,
    AGREE_TOLERANCE, BASELINES_TOLERANCE, COMPILE_ARCHITECTURES, COMPILE_TOOLCHAINS,
};
use crate::bless;
use crate::catalog;

type Result<T, E = OnboardError> = std::result::Result<T, E>;
use crate::expectations::profile::{Profile, Validity};
use crate::model::gpu::{Environment, GpuIdentity};
use crate::model::results::RunResults;
use crate::model::settings::{Mode, ProbeSettings};
use std::path::{Path, PathBuf};

/// Drafts profile `name` (default: [`crate::catalog::profile_name`] of the GPU's name) in the folder `dir` (the
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
    let (env, gpu) = one_gpu(m)?;
    let name = profile_name(name, &gpu)?;
    let duration_tolerance = study.validity.map_or(0.05, |v| v.duration_tolerance);
    let validity = ceilings::validity(&m.ceilings, duration_tolerance)?;
    let (mode, mode_why) = mode::compare(&m.serial, &m.wave, AGREE_TOLERANCE)?.mode();
    let (chosen, other) = match mode {
        Mode::Wave => (&m.wave, &m.serial),
        Mode::Serial => (&m.serial, &m.wave),
    };
    let chosen_env = chosen.environment.as_ref().unwrap_or(env);
    same_runs(runs, &gpu, chosen, chosen_env, mode)?;
    let same_mode: Vec<&RunResults> = std::iter::once(chosen).chain(runs).collect();
    let text = Text {
        study,
        name: &name,
        gpu: &gpu,
        probe: contexts::measured(&contexts::with_defaults(&study.probe), chosen),
        chosen,
        chosen_env,
        mode,
        mode_why: &mode_why,
        m,
        validity,
        runs: same_mode.len(),
        profile_file: dir.join(format!("{name}.yaml")),
    };
    let mut all = same_mode.clone();
    all.push(other);
    let wider = text.widths(&all)?;
    // The draft without deviations, with the baselines it will have, is the profile the
    // cases are judged by, as the gate judges them once the draft is committed (its
    // recorded results are not on disk yet: judged on the measurements themselves).
    let bare = as_blessed(text.read_back(&text.render(&[], &wider))?, chosen);
    let judged = judge(&bare, chosen, other, runs, mode)?;
    let profile_text = text.render(&judged.deviations, &wider);
    let profile = text.read_back(&profile_text)?;
    if chosen.profile != name {
        return Err(OnboardError::OtherProfile {
            measured: chosen.profile.clone(),
            name,
        });
    }
    bless::check(&profile, chosen, false)?;
    let baselines = bless::prepare(
        &profile,
        chosen,
        &format!("expectations/{}", text.recorded()),
        &format!("cargo xtask onboard --name {name}"),
        &dir.join("baselines").join(format!("{name}.yaml")),
        None,
    );
    Ok(Draft {
        recorded_file: dir.join(text.recorded()),
        profile_file: text.profile_file.clone(),
        name,
        profile_text,
        profile,
        baselines,
        recorded_text: chosen.to_json(),
        mode,
        mode_why,
        deviations: judged.deviations,
        mode_dependent: judged.mode_dependent,
        unsteady: judged.unsteady,
        runs: same_mode.len(),
        wider,
        ceilings: m.ceilings.clone(),
    })
}

/// The serial run's environment and the GPU, once the serial and wave runs and the
/// ceilings are of one GPU and each run is of its mode.
fn one_gpu(m: &Measured) -> Result<(&Environment, GpuIdentity)> {
    fn measured<'r>(r: &'r RunResults, which: &'static str) -> Result<&'r Environment> {
        r.environment
            .as_ref()
            .ok_or(OnboardError::Unmeasured { which })
    }
    let env = measured(&m.serial, "serial")?;
    let wave_env = measured(&m.wave, "wave")?;
    let gpu = env.identity();
    if wave_env.identity() != gpu {
        return Err(OnboardError::TwoGpus {
            serial: Box::new(env.clone()),
            wave: Box::new(wave_env.clone()),
        });
    }
    let c = &m.ceilings;
    if (c.gpu_name.as_str(), c.compute_capability.as_str())
        != (gpu.name.as_str(), gpu.compute_capability.as_str())
    {
        return Err(OnboardError::CeilingsElsewhere {
            ceilings: (c.gpu_name.clone(), c.compute_capability.clone()),
            probe: (gpu.name.clone(), gpu.compute_capability.clone()),
        });
    }
    for (r, which) in [(&m.serial, Mode::Serial), (&m.wave, Mode::Wave)] {
        if r.mode != which {
            return Err(OnboardError::WrongMode {
                expected: which,
                measured: r.mode,
            });
        }
    }
    Ok((env, gpu))
}

/// `name`, or the GPU's [`slug`], once it is a name a profile may have.
fn profile_name(name: Option<&str>, gpu: &GpuIdentity) -> Result<String> {
    let name = name.map_or_else(|| crate::catalog::profile_name(&gpu.name), str::to_string);
    let allowed = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-';
    if name.is_empty() || !name.bytes().all(allowed) || name == catalog::DOCUMENTED {
        return Err(OnboardError::BadName { name });
    }
    Ok(name)
}

/// Refuses an extra run of another GPU, driver, NVRTC, mode or profile than `chosen`.
fn same_runs(
    runs: &[RunResults],
    gpu: &GpuIdentity,
    chosen: &RunResults,
    chosen_env: &Environment,
    mode: Mode,
) -> Result<()> {
    for (i, r) in runs.iter().enumerate() {
        let (run, of) = (i + 1, runs.len());
        let e = r
            .environment
            .as_ref()
            .ok_or(OnboardError::ExtraUnmeasured { run, of })?;
        if e.identity() != *gpu
            || (&e.driver_version, &e.nvrtc_version)
                != (&chosen_env.driver_version, &chosen_env.nvrtc_version)
        {
            return Err(OnboardError::ExtraElsewhere {
                run,
                of,
                mode,
                extra: Box::new(e.clone()),
                chosen: Box::new(chosen_env.clone()),
            });
        }
        if r.mode != mode || r.profile != chosen.profile {
            return Err(OnboardError::ExtraOtherwise {
                run,
                of,
                measured: (r.mode, r.profile.clone()),
                chosen: (mode, chosen.profile.clone()),
            });
        }
    }
    Ok(())
}

/// What the draft's text is made of, once the measurements are checked.
struct Text<'a> {
    study: &'a Profile,
    name: &'a str,
    gpu: &'a GpuIdentity,
    probe: ProbeSettings,
    chosen: &'a RunResults,
    chosen_env: &'a Environment,
    mode: Mode,
    mode_why: &'a str,
    m: &'a Measured,
    validity: Validity,
    /// The runs measured in the chosen mode.
    runs: usize,
    profile_file: PathBuf,
}

impl Text<'_> {
    /// The recorded results' file, relative to the profile's folder.
    fn recorded(&self) -> String {
        format!(
            "recorded/{}-{}-{}.json",
            self.name,
            self.chosen_env.date.get(..10).unwrap_or("measured"),
            self.mode.name()
        )
    }

    /// The profile's text with `deviations` and `wider`.
    fn render(&self, deviations: &[Deviation], wider: &[Wide]) -> String {
        render::profile(&render::Parts {
            name: self.name,
            study: self.study,
            probe: &self.probe,
            measured: self.chosen,
            runs: self.runs,
            wider,
            gpu_name: &self.gpu.name,
            compute_capability: &self.gpu.compute_capability,
            mode: self.mode,
            mode_why: self.mode_why,
            deviations,
            ceilings: &self.m.ceilings,
            validity: self.validity,
            baselines_tolerance: BASELINES_TOLERANCE,
            policy_file: self
                .study
                .policy_gate
                .as_ref()
                .map(|g| format!("policies/{}.yaml", g.source.name())),
            recorded: &self.recorded(),
            compile_architectures: &COMPILE_ARCHITECTURES,
            compile_toolchains: &COMPILE_TOOLCHAINS,
        })
    }

    /// `text` read back as the catalog reads it, before its recorded results are on disk.
    fn read_back(&self, text: &str) -> Result<Profile> {
        Ok(catalog::parse(&without_recorded(text), &self.profile_file)?)
    }

    /// The wider baselines of the draft's variants, from every run in `all`.
    fn widths(&self, all: &[&RunResults]) -> Result<Vec<Wide>> {
        let gpu_short = self
            .gpu
            .name
            .strip_prefix("NVIDIA ")
            .unwrap_or(&self.gpu.name);
        let when = format!(
            "{gpu_short}, {}, driver {}, NVRTC {}",
            dates(all),
            self.chosen_env.driver_version,
            self.chosen_env.nvrtc_version
        );
        let variants = self.read_back(&self.render(&[], &[]))?.probe.variants();
        steadiness::wider(&variants, self.chosen, all, BASELINES_TOLERANCE, &when)
            .map_err(|e| OnboardError::Steadiness { cause: Box::new(e) })
    }
}

/// The draft's cases as judged on every run.
struct Judged {
    deviations: Vec<Deviation>,
    mode_dependent: Vec<String>,
    unsteady: Vec<(String, usize)>,
}

/// The deviations of `bare` on `chosen` (each saying in how many of the chosen mode's
/// runs it failed), the cases unsteady over `runs`, and those whose verdict differs on
/// `other` (the other mode's run).
fn judge(
    bare: &Profile,
    chosen: &RunResults,
    other: &RunResults,
    runs: &[RunResults],
    mode: Mode,
) -> Result<Judged> {
    let mut deviations = deviations::find(bare, chosen)?;
    let (unsteady, counts) = unsteady(bare, &deviations, runs)?;
    if !runs.is_empty() {
        for (d, k) in deviations.iter_mut().zip(counts) {
            d.reason.push_str(&format!(
                "; failing in {k} of the {} {} runs measured",
                runs.len() + 1,
                mode.name()
            ));
        }
    }
    let other_deviations = deviations::find(bare, other)?;
    let names = |d: &[Deviation]| d.iter().map(|d| d.case.clone()).collect::<Vec<_>>();
    let (here, there) = (names(&deviations), names(&other_deviations));
    let mut mode_dependent: Vec<String> = here
        .iter()
        .filter(|c| !there.contains(c))
        .chain(there.iter().filter(|c| !here.contains(c)))
        .cloned()
        .collect();
    mode_dependent.sort();
    Ok(Judged {
        deviations,
        mode_dependent,
        unsteady,
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
        let here = deviations::find(bare, r).map_err(|e| match e {
            OnboardError::Disturbed { case, why, .. } => OnboardError::Disturbed {
                run: Some(i + 1),
                case,
                why,
            },
            other => other,
        })?;
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

/// `text` without its `recorded:` section (the last), for reading it back before the
/// recorded results are on disk.
fn without_recorded(text: &str) -> String {
    match text.find("\nrecorded:\n") {
        Some(i) => text[..=i].to_string(),
        None => text.to_string(),
    }
}
