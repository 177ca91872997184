//! `cargo xtask bless`: a profile's generated baselines from a reviewed results file.

use crate::{find_profile, workspace};
use accprobe::bless;
use accprobe::model::results::RunResults;
use std::path::Path;

pub fn run(dir: &Path, name: &str, from: &Path, allow_invalid: bool, dry_run: bool) -> crate::Done {
    let p = find_profile(dir, name)?;
    let r = RunResults::load(from).map_err(|e| e.to_string())?;
    bless::check(&p, &r, allow_invalid).map_err(|e| e.to_string())?;
    let file = p
        .baselines
        .as_ref()
        .map(|b| b.file.clone())
        .unwrap_or_else(|| dir.join("baselines").join(format!("{name}.yaml")));
    let label = label(from);
    let command = format!("cargo xtask bless --profile {name} --from {label}");
    let b = bless::prepare(&p, &r, &label, &command, &file, p.baselines.as_ref());
    if b.unchanged() {
        say!(
            "{}: no change (the file already holds exactly this)",
            file.display()
        );
        return Ok(());
    }
    if b.diff.is_empty() {
        say!(
            "{}: no baseline changes; only the record of where they were measured changes",
            file.display()
        );
    } else {
        say!("{}: {} change(s)", file.display(), b.diff.len());
        for line in &b.diff {
            say!("  {line}");
        }
    }
    if dry_run {
        return Ok(());
    }
    b.write().map_err(|e| e.to_string())?;
    if p.baselines.is_none() {
        say!("written; now reference it from {}:\nbaselines:\n  file: baselines/{name}.yaml\n  tolerance: 0.005", p.file.display());
    } else {
        say!("written; review it with `git diff {}`", file.display());
    }
    Ok(())
}

/// How the results file is named in the generated header: relative to the workspace when
/// it is inside it, else as the user gave it when that is relative, else its file name
/// alone. Never an absolute path: the header is committed and read on other machines.
pub fn label(from: &Path) -> String {
    let inside = workspace()
        .ok()
        .and_then(|w| w.canonicalize().ok())
        .zip(from.canonicalize().ok())
        .and_then(|(w, f)| f.strip_prefix(&w).ok().map(Path::to_path_buf));
    match inside {
        Some(rel) => rel.display().to_string(),
        None if from.is_relative() => from.display().to_string(),
        None => from.file_name().map_or_else(
            || "results".to_string(),
            |n| n.to_string_lossy().into_owned(),
        ),
    }
}
