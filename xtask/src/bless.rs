//! `cargo xtask bless`: a profile's generated baselines from a reviewed results file.

use crate::paths::{find_profile, workspace};
use accprobe::bless;
use accprobe::model::results::RunResults;
use accprobe::text::Shown;
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
    let picks = bless::policy_picks(&p, &r).map_err(|e| e.to_string())?;
    let input = bless::Bless {
        profile: &p,
        results: &r,
        results_label: &label,
        command: &command,
        file: &file,
        current: p.baselines.as_ref(),
    };
    let b = bless::prepare_with(&input, &picks);
    if b.unchanged() {
        say!(
            "{}: no change (the file already holds exactly this)",
            file.shown()
        );
        return Ok(());
    }
    if b.diff.is_empty() {
        say!(
            "{}: no baseline changes; only the record of where they were measured changes",
            file.shown()
        );
    } else {
        say!("{}: {} change(s)", file.shown(), b.diff.len());
        for line in &b.diff {
            say!("  {line}");
        }
    }
    if dry_run {
        return Ok(());
    }
    b.write().map_err(|e| e.to_string())?;
    if p.baselines.is_none() {
        say!("written; now reference it from {}:\nbaselines:\n  file: baselines/{name}.yaml\n  tolerance: 0.005", p.file.shown());
    } else {
        say!("written; review it with `git diff {}`", file.shown());
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

#[cfg(test)]
mod tests {
    //! On the committed results files, no GPU needed.
    use crate::bless;
    use crate::paths::find_profile;
    use crate::testing::{blessed_from, expectations};
    use std::path::Path;

    #[test]
    fn bless_dry_run_prints_no_change_for_the_committed_run_and_writes_nothing() {
        let file = expectations().join("baselines/h200.yaml");
        let before = std::fs::read(&file).unwrap();
        bless::run(&expectations(), "h200", &blessed_from(), false, true).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), before);
        let e = bless::run(&expectations(), "nonesuch", &blessed_from(), false, true).unwrap_err();
        assert!(
            e.to_string().contains("no profile named \"nonesuch\""),
            "{e}"
        );
        // A profile that matches no GPU says so in words, not as a Rust struct.
        let e = bless::run(&expectations(), "documented", &blessed_from(), false, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not match: it matches no GPU") && !e.contains("GpuMatch"),
            "{e}"
        );
    }

    #[test]
    fn bless_leaves_an_unchanged_file_alone_even_under_ci() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let copy = dir.join("expectations");
        for sub in ["baselines", "policies", "recorded"] {
            std::fs::create_dir_all(copy.join(sub)).unwrap();
        }
        let recorded = format!(
            "recorded/{}",
            blessed_from().file_name().unwrap().to_string_lossy()
        );
        for f in ["h200.yaml", "policies/study.yaml", &recorded] {
            std::fs::copy(expectations().join(f), copy.join(f)).unwrap();
        }
        std::fs::write(copy.join("baselines/h200.yaml"), "profile: h200\nmeasured: {results: x, gpu_name: x, driver_version: x, nvrtc_version: x, date: x}\nprogress: {}\n").unwrap();
        // What bless writes for the committed run, put there beforehand.
        let p = find_profile(&copy, "h200").unwrap();
        let r = accprobe::model::results::RunResults::load(&blessed_from()).unwrap();
        let label = bless::label(&blessed_from());
        let command = format!("cargo xtask bless --profile h200 --from {label}");
        let file = copy.join("baselines/h200.yaml");
        let b = accprobe::bless::prepare(&p, &r, &label, &command, &file, p.baselines.as_ref());
        std::fs::write(&file, &b.contents).unwrap();
        let before = std::fs::metadata(&file).unwrap();
        // Not a dry run: nothing to write, so it succeeds even where CI is set.
        bless::run(&copy, "h200", &blessed_from(), false, false).unwrap();
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!(
            (before.ino(), before.mtime(), before.mtime_nsec()),
            (after.ino(), after.mtime(), after.mtime_nsec()),
            "the file was rewritten"
        );
    }

    #[test]
    fn the_bless_header_names_the_results_file_without_absolute_paths() {
        assert_eq!(
            bless::label(&blessed_from()),
            "expectations/recorded/h200-2026-12-04-contexts-wave.json",
            "relative to the workspace"
        );
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("run.json");
        std::fs::write(&outside, "{}").unwrap();
        assert_eq!(bless::label(&outside), "run.json", "outside: the file name");
        assert_eq!(
            bless::label(Path::new("no/such/run.json")),
            "no/such/run.json",
            "relative: as given"
        );
    }
}
