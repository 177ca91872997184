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
    /// Where the processes of one nextest run share their measurement and JUnit records:
    /// `<this>/<NEXTEST_RUN_ID>/`.
    pub runs: PathBuf,
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
            runs: target.join("runs"),
        }
    }
}

/// `ACCPROBE_REQUIRE_GPU`: set on a GPU runner, any reason the GPU cases would be ignored
/// fails the run instead.
pub const REQUIRE_GPU_ENV: &str = "ACCPROBE_REQUIRE_GPU";

/// What the environment may change about a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `ACCPROBE_PROFILE`: a profile name or path.
    pub profile: Option<String>,
    /// `ACCPROBE_MODE`: `serial` or `wave`, over the profile's choice.
    pub mode: Option<Mode>,
    /// `ACCPROBE_REQUIRE_GPU` (`1`, `true`, `yes`): no GPU, no disassembler for SASS cases,
    /// or a device that cannot be used fails the run instead of ignoring the GPU cases.
    pub require_gpu: bool,
    /// `NEXTEST_RUN_ID` when cargo-nextest runs each case in a process of its own: the
    /// processes of one run share one measurement and one JUnit file.
    pub run_id: Option<String>,
}

impl RunOptions {
    pub fn from_env() -> Result<RunOptions, String> {
        let mode = match std::env::var("ACCPROBE_MODE").ok().as_deref() {
            None | Some("") => None,
            Some("serial") => Some(Mode::Serial),
            Some("wave") => Some(Mode::Wave),
            Some(other) => return Err(format!("ACCPROBE_MODE={other:?}: expected serial or wave")),
        };
        let require = std::env::var(REQUIRE_GPU_ENV).unwrap_or_default();
        let require_gpu = parse_flag(&require).ok_or_else(|| {
            format!("{REQUIRE_GPU_ENV}={require:?}: expected 1, true or yes (or 0, false, empty)")
        })?;
        let run_id = std::env::var("NEXTEST_RUN_ID")
            .ok()
            .filter(|id| !id.is_empty())
            .filter(|_| {
                std::env::var("NEXTEST_EXECUTION_MODE").map_or(true, |m| m == "process-per-test")
            });
        Ok(RunOptions {
            profile: std::env::var(catalog::PROFILE_ENV).ok(),
            mode,
            require_gpu,
            run_id,
        })
    }
}

/// `1`/`true`/`yes` -> true, empty/`0`/`false` -> false (any case), anything else `None`.
fn parse_flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Some(true),
        "" | "0" | "false" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn require_gpu_takes_yes_or_no_words_and_refuses_others() {
        for t in ["1", "true", "YES", " yes "] {
            assert_eq!(parse_flag(t), Some(true), "{t}");
        }
        for t in ["", "0", "false", "False"] {
            assert_eq!(parse_flag(t), Some(false), "{t}");
        }
        for t in ["no", "2", "on", "required"] {
            assert_eq!(parse_flag(t), None, "{t}");
        }
    }
}
