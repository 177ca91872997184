//! `cargo xtask history import`: results files written before, one run each.

use super::failed;
use crate::{Done, Failure};
use accprobe::config::HistoryStore;
use accprobe::history::{self, About, Origin};
use accprobe::model::results::RunResults;
use accprobe::text::Shown;
use std::path::{Path, PathBuf};

/// The files to import: those given, else the profiles folder's recorded runs and the
/// suite's last results file when there.
fn files(dir: &Path, given: &[PathBuf]) -> Result<Vec<PathBuf>, Failure> {
    if !given.is_empty() {
        return Ok(given.to_vec());
    }
    let recorded = dir.join("recorded");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&recorded)
        .map_err(|e| format!("{}: {e}", recorded.shown()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let last = crate::paths::or_workspace(&None, "target/accprobe/results.json")?;
    if last.is_file() {
        files.push(last);
    }
    Ok(files)
}

pub fn run(dir: &Path, store: &HistoryStore, given: &[PathBuf]) -> Done {
    let files = files(dir, given)?;
    let mut s = match history::open(store, true) {
        None => return Err("ACCPROBE_HISTORY=off: there is no history to import into".into()),
        Some(opened) => opened.map_err(failed)?,
    };
    let (mut added, mut there) = (0, 0);
    for f in &files {
        let results = RunResults::load(f).map_err(|e| e.to_string())?;
        let record = history::build(&results, None, Origin::Import, About::default());
        let new = s.insert(&record.rows()).map_err(failed)?;
        say!(
            "{} {}: {}",
            if new { "imported" } else { "already there" },
            super::short(&record.run.id),
            f.shown()
        );
        if new {
            added += 1;
        } else {
            there += 1;
        }
    }
    say!(
        "{}: {added} run(s) imported, {there} already there",
        s.name()
    );
    Ok(())
}
