//! The catalog of profiles, as the front ends load and choose them: a profile read by
//! stage 1 (`Profile::load`) with its known deviations checked against the names of the
//! cases it generates (the verdict stage's), every profile of a folder, and the profile for
//! a GPU. It sits above the verdict stage, beside the front ends it serves: the harness and
//! xtask load profiles only through here.

use crate::error::{Error, Result};
use crate::expectations::profile::Profile;
use crate::model::gpu::GpuIdentity;
use crate::text::Shown;
use crate::verdict::{cases, compile_only};
use std::path::{Path, PathBuf};

/// The profile that applies when no other matches the GPU: the study itself.
pub const DOCUMENTED: &str = "documented";
/// Environment variable that forces a profile, by name or by path to a YAML file.
pub(crate) use crate::config::PROFILE_ENV;

/// Reads and checks one profile file, and the files it names.
pub fn load(file: &Path) -> Result<Profile> {
    checked(Profile::load(file)?)
}

/// Checks a profile given as text; `file` names it in errors and anchors relative paths.
pub fn parse(text: &str, file: &Path) -> Result<Profile> {
    checked(Profile::read(text, file)?)
}

/// `profile`, once each of its known deviations names a case it generates.
fn checked(profile: Profile) -> Result<Profile> {
    profile.check_known_deviations(&case_names(&profile))?;
    Ok(profile)
}

/// The name of every case `profile` generates: GPU cases, then compile-only cases.
fn case_names(profile: &Profile) -> Vec<String> {
    let mut names: Vec<String> = cases::cases(profile).into_iter().map(|c| c.name).collect();
    names.extend(compile_only::cases(profile).into_iter().map(|c| c.name));
    names
}

/// Every `*.yaml` profile directly in `dir`, sorted by file name; each file that fails to
/// load is returned as an error beside the ones that loaded. A `.yaml` entry that cannot
/// be read (a dangling symlink, a symlink loop, no permission, a folder) is such an error,
/// never skipped: a profile that vanishes silently would weaken the gate without a word.
pub fn load_dir(dir: &Path) -> (Vec<Profile>, Vec<Error>) {
    let (ok, bad, _) = load_dir_naming(dir);
    (ok, bad)
}

/// The profile called `name` in `dir`, as [`load_dir`] loads them; `Err` with every file
/// that failed to load when none is, and with the clash alone when two files use the
/// name (which one is meant cannot be told, so neither is).
pub fn load_named(dir: &Path, name: &str) -> Result<Profile, Vec<Error>> {
    let (ok, bad, clashes) = load_dir_naming(dir);
    if let Some((_, e)) = clashes.into_iter().find(|(n, _)| n == name) {
        return Err(vec![e]);
    }
    ok.into_iter().find(|p| p.name == name).ok_or(bad)
}

/// [`load_dir`], and beside the errors each name two files used, with its error.
fn load_dir_naming(dir: &Path) -> (Vec<Profile>, Vec<Error>, Vec<(String, Error)>) {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(e) => {
            return (
                Vec::new(),
                vec![Error::io(dir, "list profiles", e)],
                Vec::new(),
            )
        }
    };
    files.sort();
    let (mut ok, mut bad, mut clashes) = (Vec::new(), Vec::new(), Vec::new());
    for f in files {
        match load(&f) {
            Ok(p) => {
                if let Some(first) = ok.iter().find(|q: &&Profile| q.name == p.name) {
                    let e = Error::in_file(
                        &f,
                        format!(
                            "profile name {:?} is already used by {}",
                            p.name,
                            first.file.shown()
                        ),
                    );
                    clashes.push((p.name.clone(), e.clone()));
                    bad.push(e);
                } else {
                    ok.push(p);
                }
            }
            Err(e) => bad.push(e),
        }
    }
    (ok, bad, clashes)
}

/// The profile chosen for a run, and a sentence saying why.
#[derive(Debug, Clone)]
pub struct Selection {
    pub profile: Profile,
    pub why: String,
    /// The GPU no profile matches, when the documented profile applies to it: the run
    /// then says how to onboard it ([`onboarding_hint`]).
    pub(crate) unmatched: Option<GpuIdentity>,
}

/// Why no profile was chosen.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SelectError {
    /// The profile file `forced` names does not load.
    #[error(transparent)]
    Load(#[from] Error),
    /// `forced` is neither a profile's name nor a file.
    #[error("{PROFILE_ENV}={forced:?} names no profile (known: {known:?}) and no file")]
    UnknownForced { forced: String, known: Vec<String> },
    /// Several profiles match `gpu` at one level (its name when `by_name`, else its
    /// compute capability): each by name and file.
    #[error(
        "GPU {:?} (compute capability {}) matches {} profiles by {}: {}; narrow their `match` sections so that one applies, or choose one with {PROFILE_ENV}",
        .gpu.name,
        .gpu.compute_capability,
        .profiles.len(),
        if *.by_name { format!("GPU name {:?}", .gpu.name) } else { format!("compute capability {}", .gpu.compute_capability.shown()) },
        .profiles.iter().map(|(n, f)| format!("{n:?} ({})", f.shown())).collect::<Vec<_>>().join(" and ")
    )]
    Ambiguous {
        gpu: GpuIdentity,
        by_name: bool,
        profiles: Vec<(String, PathBuf)>,
    },
    /// None matches and the documented profile is not among them.
    #[error("no profile matches and the fallback profile {DOCUMENTED:?} is missing")]
    NoFallback,
}

/// Chooses the profile: the one `forced` names (a profile name or a YAML path), else the
/// one whose GPU names match, else the one whose compute capability matches, else the
/// documented one. Two profiles matching at the same level is an error naming both.
pub fn select(
    profiles: &[Profile],
    gpu: Option<&GpuIdentity>,
    forced: Option<&str>,
) -> Result<Selection, SelectError> {
    if let Some(f) = forced.filter(|f| !f.is_empty()) {
        return forced_profile(profiles, f);
    }
    if let Some(g) = gpu {
        if let Some(selection) = matching(profiles, g)? {
            return Ok(selection);
        }
    }
    let doc = profiles
        .iter()
        .find(|p| p.name == DOCUMENTED)
        .ok_or(SelectError::NoFallback)?;
    let why = match gpu {
        Some(g) => format!("no profile matches GPU {:?} (compute capability {}): the documented profile applies, and its invariants are the study's, not this GPU's", g.name, g.compute_capability.shown()),
        None => "no GPU: the documented profile names the cases".to_string(),
    };
    Ok(Selection {
        profile: doc.clone(),
        why,
        unmatched: gpu.cloned(),
    })
}

/// The profile `forced` names: a profile's name, or a profile file.
fn forced_profile(profiles: &[Profile], f: &str) -> Result<Selection, SelectError> {
    if let Some(p) = profiles.iter().find(|p| p.name == f) {
        return Ok(Selection {
            profile: p.clone(),
            why: format!("profile {:?} forced by {PROFILE_ENV}", p.name),
            unmatched: None,
        });
    }
    let path = Path::new(f);
    if path.is_file() {
        let p = load(path)?;
        return Ok(Selection {
            why: format!("profile {:?} forced by {PROFILE_ENV}={}", p.name, f.shown()),
            profile: p,
            unmatched: None,
        });
    }
    Err(SelectError::UnknownForced {
        forced: f.to_string(),
        known: profiles.iter().map(|p| p.name.clone()).collect(),
    })
}

/// The one profile whose GPU names (else compute capability) match `g`; `None` when none
/// does, an error when several do.
fn matching(profiles: &[Profile], g: &GpuIdentity) -> Result<Option<Selection>, SelectError> {
    let by_name: Vec<&Profile> = profiles.iter().filter(|p| p.matches.by_name(g)).collect();
    let by_capability: Vec<&Profile> = profiles
        .iter()
        .filter(|p| p.matches.by_capability(g))
        .collect();
    let named = !by_name.is_empty();
    let found = if named { by_name } else { by_capability };
    match found.as_slice() {
        [] => Ok(None),
        [p] => {
            let why = if named {
                format!("profile {:?} matches GPU name {:?}", p.name, g.name)
            } else {
                format!(
                    "profile {:?} matches compute capability {} of {:?}",
                    p.name,
                    g.compute_capability.shown(),
                    g.name
                )
            };
            Ok(Some(Selection {
                profile: (*p).clone(),
                why,
                unmatched: None,
            }))
        }
        several => {
            // Ambiguous: no profile is chosen, not even the documented fallback. Which
            // one applies is for the profiles to say, not for the file names' order.
            Err(SelectError::Ambiguous {
                gpu: g.clone(),
                by_name: named,
                profiles: several
                    .iter()
                    .map(|p| (p.name.clone(), p.file.clone()))
                    .collect(),
            })
        }
    }
}

/// The name of a profile for `gpu_name`: lowercase, the vendor dropped, every run of
/// other characters one `-` (`NVIDIA H200` -> `h200`, `NVIDIA GeForce RTX 4090` ->
/// `geforce-rtx-4090`).
pub fn profile_name(gpu_name: &str) -> String {
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
/// closing summary and each failing case of such a run say it. Here, beside the choice of
/// a profile, so that the harness says it without the onboarding service.
pub fn onboarding_hint(gpu: &GpuIdentity) -> String {
    let name = profile_name(&gpu.name);
    format!(
        "no profile names GPU {:?}: run `cargo xtask onboard` on this machine; it measures the study's probe and its contexts (serial and wave, then more runs in the mode it chooses) and the GPU's ceilings and writes a draft profile expectations/{name}.yaml (known deviations, ceilings, mode) with its baselines expectations/baselines/{name}.yaml, for review and commit",
        gpu.name
    )
}
