//! The catalog of profiles: reading one (stage 1) and checking its known deviations
//! against the cases it generates (the verdict stage's vocabulary), loading a folder, and
//! choosing the profile for a GPU. The harness and xtask load profiles only through here.

use crate::error::{Error, Result};
use crate::expectations::profile::Profile;
use crate::expectations::yaml::read_text;
use crate::model::gpu::GpuIdentity;
use crate::verdict::cases::cases;
use crate::verdict::compile_only;
use std::path::{Path, PathBuf};

/// The profile that applies when no other matches the GPU: the study itself.
pub const DOCUMENTED: &str = "documented";
/// Environment variable that forces a profile, by name or by path to a YAML file.
pub const PROFILE_ENV: &str = "ACCPROBE_PROFILE";

/// Reads and checks one profile file, and the files it names.
pub fn load(file: &Path) -> Result<Profile> {
    let text = read_text(file, "profile")?;
    parse(&text, file)
}

/// Checks a profile given as text; `file` names it in errors and anchors relative paths.
pub fn parse(text: &str, file: &Path) -> Result<Profile> {
    let profile = Profile::read(text, file)?;
    let mut names: Vec<String> = cases(&profile).into_iter().map(|c| c.name).collect();
    names.extend(compile_only::cases(&profile).into_iter().map(|c| c.name));
    for (case, d) in &profile.known_deviations {
        if !names.contains(case) {
            let example = names
                .iter()
                .find(|n| n.starts_with("invariant::"))
                .or(names.first())
                .cloned()
                .unwrap_or_default();
            return Err(Error::at(
                file,
                d.line,
                d.column,
                format!(
                    "known deviation names case {case:?}, which this profile does not generate (cases look like {example:?})"
                ),
            ));
        }
    }
    Ok(profile)
}

/// Every `*.yaml` profile directly in `dir`, sorted by file name; each file that fails to
/// load is returned as an error beside the ones that loaded.
pub fn load_dir(dir: &Path) -> (Vec<Profile>, Vec<Error>) {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(e) => return (Vec::new(), vec![Error::io(dir, "list profiles", e)]),
    };
    files.sort();
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for f in files {
        match load(&f) {
            Ok(p) => {
                if let Some(first) = ok.iter().find(|q: &&Profile| q.name == p.name) {
                    bad.push(Error::in_file(
                        &f,
                        format!(
                            "profile name {:?} is already used by {}",
                            p.name,
                            first.file.display()
                        ),
                    ));
                } else {
                    ok.push(p);
                }
            }
            Err(e) => bad.push(e),
        }
    }
    (ok, bad)
}

/// The profile chosen for a run, and a sentence saying why.
#[derive(Debug, Clone)]
pub struct Selection {
    pub profile: Profile,
    pub why: String,
}

/// Chooses the profile: the one `forced` names (a profile name or a YAML path), else the
/// first whose GPU names match, else the first whose compute capability matches, else the
/// documented one.
pub fn select(
    profiles: &[Profile],
    gpu: Option<&GpuIdentity>,
    forced: Option<&str>,
) -> Result<Selection> {
    if let Some(f) = forced.filter(|f| !f.is_empty()) {
        if let Some(p) = profiles.iter().find(|p| p.name == f) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!("profile {:?} forced by {PROFILE_ENV}", p.name),
            });
        }
        let path = Path::new(f);
        if path.is_file() {
            let p = load(path)?;
            return Ok(Selection {
                why: format!("profile {:?} forced by {PROFILE_ENV}={f}", p.name),
                profile: p,
            });
        }
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        return Err(Error::msg(format!(
            "{PROFILE_ENV}={f:?} names no profile (known: {names:?}) and no file"
        )));
    }
    if let Some(g) = gpu {
        if let Some(p) = profiles.iter().find(|p| p.matches.by_name(g)) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!("profile {:?} matches GPU name {:?}", p.name, g.name),
            });
        }
        if let Some(p) = profiles.iter().find(|p| p.matches.by_capability(g)) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!(
                    "profile {:?} matches compute capability {} of {:?}",
                    p.name, g.compute_capability, g.name
                ),
            });
        }
    }
    let doc = profiles
        .iter()
        .find(|p| p.name == DOCUMENTED)
        .ok_or_else(|| {
            Error::msg(format!(
                "no profile matches and the fallback profile {DOCUMENTED:?} is missing"
            ))
        })?;
    let why = match gpu {
        Some(g) => format!("no profile matches GPU {:?} (compute capability {}): the documented profile applies, and its invariants are the study's, not this GPU's", g.name, g.compute_capability),
        None => "no GPU: the documented profile names the cases".to_string(),
    };
    Ok(Selection {
        profile: doc.clone(),
        why,
    })
}
