//! What the environment tells the harness: where to read and write, and what a run may
//! override.

use crate::config::ConfigError;
use crate::model::settings::Mode;
use crate::text::Shown;
use std::path::{Path, PathBuf};

/// Two of the files a run writes are one: a configuration error, before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{first} and {second} are one file, {}: name files that differ (the results \
     file's ptxas log and CUBINs take its name with .ptxas.log and .cubin)",
    path.shown()
)]
pub struct SameFile {
    /// What names the file first (`ACCPROBE_JUNIT`, ...), and what names it again.
    pub(crate) first: &'static str,
    pub(crate) second: &'static str,
    /// The second one's path, as given.
    pub(crate) path: PathBuf,
}

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
    /// Where each device's record goes (`ACCPROBE_HISTORY`), and the spool of the records
    /// a store could not take (`target/accprobe/history-spool`).
    pub history: crate::config::HistoryStore,
    pub history_spool: PathBuf,
}

impl Paths {
    /// `ACCPROBE_EXPECTATIONS`, `ACCPROBE_JUNIT`, `ACCPROBE_RESULTS`, `ACCPROBE_CACHE` and
    /// `CARGO_TARGET_DIR` override; otherwise `expectations/` and `target/accprobe/` under
    /// the working directory, as the README says (`cargo test` runs the suite from the
    /// package root). Never the compiled-in source tree: a binary built from one checkout
    /// and run in another reads and writes the other.
    pub(crate) fn from_env() -> Paths {
        Paths::resolve(Path::new(""), crate::config::path_var)
    }

    /// [`Paths::from_env`] with the working directory `cwd` (empty: relative paths) and
    /// the environment `var`.
    pub(crate) fn resolve(cwd: &Path, var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Paths {
        let var = |k: &str| var(k).filter(|v| !v.is_empty()).map(PathBuf::from);
        let under = |p: PathBuf| if p.is_absolute() { p } else { cwd.join(p) };
        let target =
            under(var("CARGO_TARGET_DIR").unwrap_or_else(|| "target".into())).join("accprobe");
        Paths {
            expectations: under(
                var("ACCPROBE_EXPECTATIONS").unwrap_or_else(|| "expectations".into()),
            ),
            junit: var("ACCPROBE_JUNIT").map_or_else(|| target.join("junit.xml"), under),
            results: var("ACCPROBE_RESULTS").map_or_else(|| target.join("results.json"), under),
            cache: match var("ACCPROBE_CACHE") {
                Some(p) if p.as_os_str() == "off" => None,
                Some(p) => Some(under(p)),
                None => Some(target.join("cache")),
            },
            runs: target.join("runs"),
            history: crate::history::resolve(
                var("ACCPROBE_HISTORY")
                    .and_then(|p| p.into_os_string().into_string().ok())
                    .as_deref(),
                cwd,
                &target,
            ),
            history_spool: target.join(crate::history::SPOOL_DIR),
        }
    }

    /// The files a run writes beside its results: the ptxas log and the first CUBIN (the
    /// others are `.1.cubin`, ...; with several devices each gets `-gpuN` in the stem).
    pub(crate) fn beside_results(results: &Path) -> [PathBuf; 2] {
        [
            results.with_extension("ptxas.log"),
            results.with_extension("cubin"),
        ]
    }

    /// `Err` when two of the files a run writes are one (`ACCPROBE_RESULTS=x.cubin` would
    /// have the CUBIN replace the results just written; `ACCPROBE_JUNIT` naming the results
    /// file, the JUnit file replace them): a configuration error, before anything runs.
    ///
    /// Files compare by what they are, not by how they are spelled: each path is resolved
    /// as the writer resolves it (symlinks followed, `.` and `..` taken away, the folder
    /// canonicalised, even where the file does not exist yet), and files that exist compare
    /// by device and inode too (a hard link). The JUnit file is also compared with every
    /// name the run may give beside the results: `.K.cubin` for the further CUBINs, and
    /// `-gpuN` in the stem with several devices.
    pub fn check_distinct(&self) -> Result<(), SameFile> {
        let mut written = vec![
            ("ACCPROBE_JUNIT", self.junit.clone()),
            ("ACCPROBE_RESULTS", self.results.clone()),
        ];
        let [log, cubin] = Paths::beside_results(&self.results);
        written.push(("the ptxas log beside ACCPROBE_RESULTS", log));
        written.push(("the CUBIN beside ACCPROBE_RESULTS", cubin));
        let resolved: Vec<Written> = written.iter().map(|(_, p)| Written::of(p)).collect();
        let clash = |first: &'static str, second: &'static str, path: &Path| SameFile {
            first,
            second,
            path: path.to_path_buf(),
        };
        for (i, (a, pa)) in written.iter().enumerate() {
            if let Some(j) = (0..i).find(|&j| resolved[j].same(&resolved[i])) {
                return Err(clash(written[j].0, a, pa));
            }
        }
        // The names the run may also write beside the results, which a path of their own
        // cannot list: the JUnit file must be none of them.
        let junit = &resolved[0];
        let results = &resolved[1];
        if let (Some(name), Some(stem)) = (
            junit.path.file_name().and_then(|n| n.to_str()),
            results.path.file_stem().and_then(|n| n.to_str()),
        ) {
            if junit.path.parent() == results.path.parent() && written_beside(stem, name) {
                return Err(clash(
                    "ACCPROBE_JUNIT",
                    "a file the run writes beside ACCPROBE_RESULTS",
                    &self.junit,
                ));
            }
        }
        if let (Some(id), Some(dir)) = (junit.id, results.path.parent()) {
            let stem = results.path.file_stem().and_then(|n| n.to_str());
            // A hard link to one of them: the folder is listed only to find those names.
            let linked = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| {
                    e.file_name()
                        .to_str()
                        .zip(stem)
                        .is_some_and(|(n, s)| written_beside(s, n))
                        && Written::of(&e.path()).id == Some(id)
                });
            if linked {
                return Err(clash(
                    "ACCPROBE_JUNIT",
                    "a file the run writes beside ACCPROBE_RESULTS",
                    &self.junit,
                ));
            }
        }
        Ok(())
    }
}

/// A file a run writes, as the atomic writer finds it: `path` with its symlinks followed
/// and its folder canonicalised, and `id` (device, inode) when it exists as a regular file.
/// A device or FIFO (`/dev/null`, `/dev/stdout`) is written through, never replaced, so
/// two of them that are one (stdout and stderr on one terminal) lose nothing: they compare
/// as they are spelled.
struct Written {
    given: PathBuf,
    path: PathBuf,
    id: Option<(u64, u64)>,
    special: bool,
}

impl Written {
    fn of(p: &Path) -> Written {
        use std::os::unix::fs::MetadataExt;
        // The kernel follows the links first: `/dev/stdout` names a pipe, a terminal or a
        // file through a link whose text is no path.
        let meta = std::fs::metadata(p).ok();
        let special = meta.as_ref().is_some_and(|m| !m.is_file() && !m.is_dir());
        Written {
            given: p.to_path_buf(),
            path: if special {
                p.to_path_buf()
            } else {
                crate::input::real_path(p)
            },
            id: meta
                .as_ref()
                .filter(|m| m.is_file())
                .map(|m| (m.dev(), m.ino())),
            special,
        }
    }

    fn same(&self, other: &Written) -> bool {
        if self.special || other.special {
            return self.given == other.given;
        }
        self.path == other.path || (self.id.is_some() && self.id == other.id)
    }
}

/// Whether `name` is one of the files a run writes beside a results file of stem `stem`:
/// `stem.ptxas.log`, `stem.cubin`, `stem.K.cubin`, and all of these (and `stem-gpuN.json`)
/// with `-gpuN` after the stem.
fn written_beside(stem: &str, name: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let beside = |stem: &str, ext_json: bool| {
        name.strip_prefix(stem)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|r| {
                r == "ptxas.log"
                    || r == "cubin"
                    || (ext_json && r == "json")
                    || r.strip_suffix(".cubin").is_some_and(digits)
            })
    };
    if beside(stem, false) {
        return true;
    }
    name.strip_prefix(stem)
        .and_then(|r| r.strip_prefix("-gpu"))
        .is_some_and(|r| {
            let n = r.bytes().take_while(u8::is_ascii_digit).count();
            n > 0 && beside(&format!("{stem}-gpu{}", &r[..n]), true)
        })
}

/// `ACCPROBE_REQUIRE_GPU`: set on a GPU runner, any reason the GPU cases would be ignored
/// fails the run instead.
pub use crate::config::REQUIRE_GPU_ENV;

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
    pub fn from_env() -> Result<RunOptions, ConfigError> {
        // Every setting, those read only when a GPU is first measured too: a typo there
        // must not wait until then (or pass unnoticed on a machine without a GPU).
        crate::config::check()?;
        let run_id = run_id_from_env();
        Ok(RunOptions {
            profile: crate::config::profile()?,
            mode: crate::config::mode()?,
            require_gpu: crate::config::require_gpu()?,
            run_id,
        })
    }
}

/// `NEXTEST_RUN_ID`, when cargo-nextest runs each case in a process of its own
/// (`NEXTEST_EXECUTION_MODE` unset or `process-per-test`).
pub(crate) fn run_id_from_env() -> Option<String> {
    std::env::var("NEXTEST_RUN_ID")
        .ok()
        .filter(|id| !id.is_empty())
        .filter(|_| {
            std::env::var("NEXTEST_EXECUTION_MODE").map_or(true, |m| m == "process-per-test")
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn files_a_run_writes_must_differ() {
        let with = |junit: &str, results: &str| {
            let (j, r) = (OsString::from(junit), OsString::from(results));
            Paths::resolve(Path::new("/w"), move |k| match k {
                "ACCPROBE_JUNIT" => Some(j.clone()),
                "ACCPROBE_RESULTS" => Some(r.clone()),
                _ => None,
            })
            .check_distinct()
        };
        assert_eq!(with("j.xml", "r.json"), Ok(()));
        assert_eq!(with("j.xml", "r"), Ok(()));
        let e = with("j.xml", "r.cubin").unwrap_err().to_string();
        assert!(e.contains("CUBIN") && e.contains("/w/r.cubin"), "{e}");
        let e = with("same.json", "same.json").unwrap_err().to_string();
        assert!(e.contains("ACCPROBE_JUNIT and ACCPROBE_RESULTS"), "{e}");
        assert!(with("r.ptxas.log", "r.json").is_err());
        // Paths compare by component: `./` does not make another file.
        assert!(with("r.cubin", "./r.json").is_err());
    }

    #[test]
    fn paths_are_under_the_working_directory_never_the_build_tree() {
        let p = Paths::from_env();
        if crate::config::path_var("ACCPROBE_EXPECTATIONS").is_none() {
            assert_eq!(
                p.expectations,
                Path::new("expectations"),
                "relative to the working directory"
            );
        }
        let none = |_: &str| None;
        let p = Paths::resolve(Path::new("/copy"), none);
        assert_eq!(p.expectations, Path::new("/copy/expectations"));
        assert_eq!(p.junit, Path::new("/copy/target/accprobe/junit.xml"));
        assert_eq!(p.results, Path::new("/copy/target/accprobe/results.json"));
        assert_eq!(
            p.cache.as_deref(),
            Some(Path::new("/copy/target/accprobe/cache"))
        );
        use crate::config::HistoryStore;
        let sqlite = |p: &str| HistoryStore::Sqlite(p.into());
        assert_eq!(p.history, sqlite("/copy/target/accprobe/history.sqlite"));
        assert_eq!(
            p.history_spool,
            Path::new("/copy/target/accprobe/history-spool")
        );
        let vars = |history: &'static str| {
            move |k: &str| -> Option<OsString> {
                match k {
                    "ACCPROBE_EXPECTATIONS" => Some("profiles".into()),
                    "ACCPROBE_JUNIT" => Some("/dev/null".into()),
                    "CARGO_TARGET_DIR" => Some("/t".into()),
                    "ACCPROBE_CACHE" => Some("off".into()),
                    "ACCPROBE_HISTORY" => Some(history.into()),
                    _ => None,
                }
            }
        };
        let p = Paths::resolve(Path::new("/copy"), vars("runs.db"));
        assert_eq!(p.expectations, Path::new("/copy/profiles"));
        assert_eq!(p.junit, Path::new("/dev/null"));
        assert_eq!(p.results, Path::new("/t/accprobe/results.json"));
        assert_eq!(p.cache, None);
        assert_eq!(p.history, sqlite("/copy/runs.db"));
        assert_eq!(p.history_spool, Path::new("/t/accprobe/history-spool"));
        let url = "postgres://ci@127.0.0.1:5433/accprobe";
        let p = Paths::resolve(Path::new("/copy"), vars(url));
        assert_eq!(p.history, HistoryStore::Postgres(url.into()));
        let p = Paths::resolve(Path::new("/copy"), vars("off"));
        assert_eq!(p.history, HistoryStore::Off);
    }

    #[test]
    fn a_copy_with_a_broken_profile_is_read_from_where_it_is() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let copy = std::env::temp_dir().join(format!("accprobe-cwd-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&copy);
        std::fs::create_dir_all(copy.join("expectations")).unwrap();
        std::fs::write(
            copy.join("expectations/h200.yaml"),
            "name: h200\nprobe: 3\n",
        )
        .unwrap();
        let p = Paths::resolve(&copy, |_| None);
        let (profiles, errors) = crate::catalog::load_dir(&p.expectations);
        assert!(profiles.is_empty());
        assert_eq!(errors.len(), 1);
        assert!(
            errors[0]
                .to_string()
                .starts_with(&copy.join("expectations/h200.yaml").display().to_string()),
            "{}",
            errors[0]
        );
        assert!(!p.expectations.starts_with(root));
        std::fs::remove_dir_all(copy).unwrap();
    }

    #[test]
    fn require_gpu_takes_yes_or_no_words_and_refuses_others() {
        use crate::input::flag as parse_flag;
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
