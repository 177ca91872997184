//! What the environment tells the harness: where to read and write, and what a run may
//! override.

use crate::catalog;
use crate::model::settings::Mode;
use std::path::{Path, PathBuf};

/// Where the suite reads and writes, from the environment.
#[derive(Debug, Clone)]
pub struct Paths {
    pub expectations: PathBuf,
    pub junit: PathBuf,
    pub results: PathBuf,
    /// The compile cache folder; `None` when `ACCPROBE_CACHE=off`.
    pub cache: Option<PathBuf>,
}

impl Paths {
    /// `ACCPROBE_EXPECTATIONS`, `ACCPROBE_JUNIT` and `ACCPROBE_RESULTS` override; otherwise
    /// the source tree's `expectations/` and `target/accprobe/` when the source tree is
    /// there (a cargo run), else the same paths under the working directory (a binary
    /// copied to a GPU runner).
    pub fn from_env() -> Paths {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = if manifest.join("expectations").is_dir() {
            manifest.to_path_buf()
        } else {
            PathBuf::from(".")
        };
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let target = var("CARGO_TARGET_DIR")
            .unwrap_or_else(|| root.join("target"))
            .join("accprobe");
        Paths {
            expectations: var("ACCPROBE_EXPECTATIONS").unwrap_or_else(|| root.join("expectations")),
            junit: var("ACCPROBE_JUNIT").unwrap_or_else(|| target.join("junit.xml")),
            results: var("ACCPROBE_RESULTS").unwrap_or_else(|| target.join("results.json")),
            cache: match var("ACCPROBE_CACHE") {
                Some(p) if p.as_os_str() == "off" => None,
                Some(p) => Some(p),
                None => Some(target.join("cache")),
            },
        }
    }
}

/// What the environment may change about a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `ACCPROBE_PROFILE`: a profile name or path.
    pub profile: Option<String>,
    /// `ACCPROBE_MODE`: `serial` or `wave`, over the profile's choice.
    pub mode: Option<Mode>,
}

impl RunOptions {
    pub fn from_env() -> Result<RunOptions, String> {
        let mode = match std::env::var("ACCPROBE_MODE").ok().as_deref() {
            None | Some("") => None,
            Some("serial") => Some(Mode::Serial),
            Some("wave") => Some(Mode::Wave),
            Some(other) => return Err(format!("ACCPROBE_MODE={other:?}: expected serial or wave")),
        };
        Ok(RunOptions {
            profile: std::env::var(catalog::PROFILE_ENV).ok(),
            mode,
        })
    }
}
