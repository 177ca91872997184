//! `cargo xtask bless`: a profile's generated baselines from a reviewed results file.

use crate::{find_profile, workspace};
use accprobe::bless;
use accprobe::model::results::RunResults;
use std::path::Path;

pub fn run(
    dir: &Path,
    name: &str,
    from: &Path,
    allow_invalid: bool,
    dry_run: bool,
) -> crate::Outcome {
    let p = find_profile(dir, name)?;
    let r = RunResults::load(from).map_err(|e| e.to_string())?;
    bless::check(&p, &r, allow_invalid).map_err(|e| e.to_string())?;
    let file = p
        .baselines
        .as_ref()
        .map(|b| b.file.clone())
        .unwrap_or_else(|| dir.join("baselines").join(format!("{name}.yaml")));
    let label = from
        .strip_prefix(workspace())
        .unwrap_or(from)
        .display()
        .to_string();
    let command = format!("cargo xtask bless --profile {name} --from {label}");
    let b = bless::prepare(&p, &r, &label, &command, &file, p.baselines.as_ref());
    if b.diff.is_empty() {
        println!("{}: no baseline changes", file.display());
    } else {
        println!("{}: {} change(s)", file.display(), b.diff.len());
        for line in &b.diff {
            println!("  {line}");
        }
    }
    if dry_run {
        return Ok(());
    }
    b.write().map_err(|e| e.to_string())?;
    if p.baselines.is_none() {
        println!("written; now reference it from {}:\nbaselines:\n  file: baselines/{name}.yaml\n  tolerance: 0.005", p.file.display());
    } else {
        println!("written; review it with `git diff {}`", file.display());
    }
    Ok(())
}
