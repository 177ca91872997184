//! Where things are: the workspace root (from the working directory up), the default
//! output paths under it, and a profile by name.

use crate::Failure;
use accprobe::catalog;
use accprobe::error::Error;
use accprobe::expectations::profile::Profile;
use accprobe::text::Shown;
use std::path::{Path, PathBuf};

/// Why there is no workspace root.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error("cannot read the working directory: {0}")]
    WorkingDirectory(std::io::Error),
    /// No folder from `start` up is a workspace.
    #[error(
        "no accprobe workspace here: neither {} nor a folder above it holds a Cargo.toml with [workspace] or an expectations/ folder; run from inside the checkout, or pass --expectations and the output paths",
        start.shown()
    )]
    NotFound { start: PathBuf },
}

/// No profile of that name loaded (or two files use it), with what failed to load.
#[derive(Debug, thiserror::Error)]
#[error("no profile named {name:?} could be loaded from {}{}", dir.shown(), could_not_load(unloaded))]
pub struct NoProfile {
    pub name: String,
    pub dir: PathBuf,
    /// The files of `dir` that could not be loaded.
    pub unloaded: Vec<Error>,
}

fn could_not_load(errors: &[Error]) -> String {
    errors
        .iter()
        .map(|e| format!("\n  (could not load: {e})"))
        .collect()
}

impl From<WorkspaceError> for Failure {
    fn from(e: WorkspaceError) -> Failure {
        Failure::Message(e.to_string())
    }
}

impl From<NoProfile> for Failure {
    fn from(e: NoProfile) -> Failure {
        Failure::Message(e.to_string())
    }
}

/// The workspace root: the nearest folder, from the working directory up, that holds a
/// Cargo.toml with `[workspace]` or an `expectations/` folder. `cargo xtask` runs in the
/// directory it is invoked from, so this is the checkout the user is in, never the one the
/// xtask binary was built from.
pub fn workspace() -> Result<PathBuf, WorkspaceError> {
    let cwd = std::env::current_dir().map_err(WorkspaceError::WorkingDirectory)?;
    workspace_from(&cwd)
}

/// [`workspace`] from `start`.
pub fn workspace_from(start: &Path) -> Result<PathBuf, WorkspaceError> {
    for dir in start.ancestors() {
        let manifest = dir.join("Cargo.toml");
        let is_workspace =
            accprobe::input::read_text(&manifest, "Cargo.toml", accprobe::input::YAML_LIMIT)
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"));
        if is_workspace || dir.join("expectations").is_dir() {
            return Ok(dir.to_path_buf());
        }
    }
    Err(WorkspaceError::NotFound {
        start: start.to_path_buf(),
    })
}

/// `given`, else `relative` under the workspace.
pub fn or_workspace(given: &Option<PathBuf>, relative: &str) -> Result<PathBuf, Failure> {
    match given {
        Some(p) => Ok(p.clone()),
        None => Ok(workspace()?.join(relative)),
    }
}

/// The profile called `name` in `dir`, or an error listing what failed to load; two files
/// using the name are an error too (a backup copy must not stand in for the profile).
pub fn find_profile(dir: &Path, name: &str) -> Result<Profile, NoProfile> {
    catalog::load_named(dir, name).map_err(|unloaded| NoProfile {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        unloaded,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workspace_is_found_from_the_working_directory_up() {
        let ws_tmp = tempfile::tempdir().unwrap();
        let ws = ws_tmp.path();
        std::fs::write(ws.join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();
        std::fs::create_dir_all(ws.join("a/b")).unwrap();
        assert_eq!(workspace_from(&ws.join("a/b")).unwrap(), ws);
        std::fs::create_dir_all(ws.join("a/expectations")).unwrap();
        assert_eq!(
            workspace_from(&ws.join("a/b")).unwrap(),
            ws.join("a"),
            "the nearest"
        );
        let bare_tmp = tempfile::tempdir().unwrap();
        let bare = bare_tmp.path();
        // A temp folder normally has no workspace above it; where one has, this says so.
        if let Err(e) = workspace_from(bare).map_err(|e| e.to_string()) {
            assert!(e.contains("no accprobe workspace here"), "{e}");
        }
    }

    #[test]
    fn a_profile_name_two_files_use_is_refused_naming_both() {
        let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let dir = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(root.join("expectations/documented.yaml")).unwrap();
        std::fs::write(dir.path().join("documented.yaml"), &text).unwrap();
        std::fs::create_dir(dir.path().join("policies")).unwrap();
        std::fs::copy(
            root.join("expectations/policies/study.yaml"),
            dir.path().join("policies/study.yaml"),
        )
        .unwrap();
        let p = find_profile(dir.path(), "documented").unwrap();
        assert_eq!(p.name, "documented");
        // A backup copy sorted before it, of the same name: neither is taken.
        std::fs::write(dir.path().join("documented.orig.yaml"), &text).unwrap();
        let e = find_profile(dir.path(), "documented")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no profile named \"documented\" could be loaded"),
            "{e}"
        );
        assert!(e.contains("is already used by"), "{e}");
        assert!(
            e.contains("documented.orig.yaml") && e.contains("documented.yaml"),
            "{e}"
        );
    }
}
