//! The one home of configuration: every `ACCPROBE_*` environment variable the suite and
//! `cargo xtask` read is declared in [`VARIABLES`] and read through a function here.
//!
//! One rule holds for every variable: a value that is empty or only whitespace is unset;
//! a value that does not parse (a number that is not one, a flag that is neither yes nor
//! no, bytes that are not UTF-8 where text is expected) is a [`ConfigError`] naming the
//! variable, the value and what it takes. The front ends call [`check`] before anything
//! runs and exit 2 on an error, so a typo never falls back to a default unnoticed.
//!
//! The functions read the environment at each call (a test may set a variable in process);
//! they are cheap, and each front end reads a setting where it needs it.

mod history;

pub use crate::error::{ConfigError, LockDirRefused, OrdinalListError};
pub use history::{history, history_store, redacted, HistoryStore};

use crate::model::settings::Mode;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Who sets a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A user's setting, documented in docs/reference.md's variables table.
    Setting,
    /// Set by accprobe for a process it starts (documented as internal); never by a user.
    Internal,
    /// Set by a test for a process it starts; read only by test code.
    Test,
}

/// One environment variable: its name, what it takes, its default and what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// What a value must be, as a [`ConfigError`] says it ("expected ...").
    pub takes: &'static str,
    /// The default, as docs/reference.md's table says it (Markdown).
    pub default: &'static str,
    /// What the variable does, in one line.
    pub(crate) meaning: &'static str,
    pub kind: Kind,
}

pub const PROFILE_ENV: &str = "ACCPROBE_PROFILE";
pub(crate) const MODE_ENV: &str = "ACCPROBE_MODE";
/// Set on a GPU runner: any reason the GPU cases would be ignored fails the run instead.
pub const REQUIRE_GPU_ENV: &str = "ACCPROBE_REQUIRE_GPU";
pub(crate) const DEVICES_ENV: &str = "ACCPROBE_DEVICES";
pub const DEVICE_ENV: &str = "ACCPROBE_DEVICE";
pub const JUNIT_ENV: &str = "ACCPROBE_JUNIT";
pub const RESULTS_ENV: &str = "ACCPROBE_RESULTS";
pub const EXPECTATIONS_ENV: &str = "ACCPROBE_EXPECTATIONS";
pub const CACHE_ENV: &str = "ACCPROBE_CACHE";
/// Extra NVRTC options, for experiments; they are recorded with the results. With one
/// that reads a file (`--pre-include=FILE`, `-I`), the compile cache is not used.
pub const EXTRA_OPTIONS_ENV: &str = "ACCPROBE_EXTRA_OPTIONS";
pub const PARTS_ENV: &str = "ACCPROBE_COMPILE_PARTS";
/// The disassembler to run ahead of any other; the compile worker gets its parent's
/// choice through it.
pub const DISASSEMBLER_ENV: &str = "ACCPROBE_DISASSEMBLER";
/// Seconds the disassembler may take for one CUBIN before it is killed.
pub(crate) const DISASSEMBLER_TIMEOUT_ENV: &str = "ACCPROBE_DISASSEMBLER_TIMEOUT";
pub const NVRTC_ENV: &str = "ACCPROBE_NVRTC";
pub(crate) const TOOLCHAINS_ENV: &str = "ACCPROBE_TOOLCHAINS";
/// Set where the compile-only cases must run: a toolchain a profile names that is not
/// installed then fails its cases instead of leaving them ignored (`.ci/run` sets it).
pub(crate) const REQUIRE_TOOLCHAINS_ENV: &str = "ACCPROBE_REQUIRE_TOOLCHAINS";
pub const LOCK_DIR_ENV: &str = "ACCPROBE_LOCK_DIR";
pub const LOCK_TIMEOUT_ENV: &str = "ACCPROBE_LOCK_TIMEOUT";
pub const RETRIES_ENV: &str = "ACCPROBE_CONTENTION_RETRIES";
pub const WAIT_ENV: &str = "ACCPROBE_CONTENTION_WAIT";
pub(crate) const TRACE_ENV: &str = "ACCPROBE_TRACE";
pub const HISTORY_ENV: &str = "ACCPROBE_HISTORY";
/// Internal: names a compile worker's request file.
pub(crate) const WORKER_ENV: &str = "ACCPROBE_COMPILE_WORKER";
/// Internal: set after [`crate::compile::process_nvrtc::select_for_process`] re-executed
/// the process with the selected folder first on `LD_LIBRARY_PATH`: that folder.
pub const ACTIVE_ENV: &str = "ACCPROBE_NVRTC_ACTIVE";
/// Test only: the cache entry a test's child process marks used.
pub(crate) const TEST_MARK_USED_ENV: &str = "ACCPROBE_TEST_MARK_USED";

/// A disturbed measurement is made again at most this many times by default...
pub(crate) const DEFAULT_RETRIES: u32 = 2;
/// ...and never more than this many times.
pub(crate) const MAX_RETRIES: u32 = 100;
/// Seconds between those measurements by default...
pub(crate) const DEFAULT_WAIT_S: f64 = 10.0;
/// ...and at most.
pub(crate) const MAX_WAIT_S: f64 = 3600.0;
/// Seconds the disassembler may take for one CUBIN by default: `nvdisasm -ndf` takes 0.3
/// to 0.5 s for the H200 profile's matrix (docs/speed.md), so this is a hung one.
pub(crate) const DEFAULT_DISASSEMBLER_TIMEOUT_S: u64 = 120;

const FLAG: &str = "1, true or yes (or 0, false, empty)";

const fn setting(
    name: &'static str,
    takes: &'static str,
    default: &'static str,
    meaning: &'static str,
) -> Variable {
    Variable {
        name,
        takes,
        default,
        meaning,
        kind: Kind::Setting,
    }
}

/// Every variable accprobe reads, settings first.
pub const VARIABLES: &[Variable] = &[
    setting(
        PROFILE_ENV,
        "a profile name, or a path to a profile file",
        "by GPU name, then compute capability, else `documented`",
        "the profile the GPU is judged against",
    ),
    setting(
        MODE_ENV,
        "serial or wave",
        "the profile's `probe.mode`",
        "how the variants are launched, over the profile's choice",
    ),
    setting(
        REQUIRE_GPU_ENV,
        FLAG,
        "off",
        "no GPU, or one that cannot be tested, fails the run instead of ignoring its cases",
    ),
    setting(
        DEVICES_ENV,
        "device ordinals, such as 0 or 0,2",
        "every visible device",
        "the devices the suite tests; wins over ACCPROBE_DEVICE",
    ),
    setting(
        DEVICE_ENV,
        "a device ordinal, such as 1",
        "as `ACCPROBE_DEVICES`",
        "the one device a command tests",
    ),
    setting(
        JUNIT_ENV,
        "a file",
        "`target/accprobe/junit.xml`",
        "where the JUnit file is written",
    ),
    setting(
        RESULTS_ENV,
        "a file",
        "`target/accprobe/results.json`",
        "where the results file is written",
    ),
    setting(
        EXPECTATIONS_ENV,
        "a folder",
        "`expectations`",
        "the profiles folder",
    ),
    setting(
        CACHE_ENV,
        "a folder, or off",
        "`target/accprobe/cache`",
        "the compile cache (off: compile every run)",
    ),
    setting(
        EXTRA_OPTIONS_ENV,
        "NVRTC options, whitespace-separated",
        "none",
        "extra NVRTC options for experiments, recorded with the results",
    ),
    setting(
        PARTS_ENV,
        "a whole number of NVRTC programs, 1 or more",
        "one per four cores, at most four",
        "how many NVRTC programs a matrix is compiled as",
    ),
    setting(
        DISASSEMBLER_ENV,
        "a path to nvdisasm or cuobjdump",
        "`nvdisasm`, then `cuobjdump`, on `PATH`, in `$CUDA_HOME/bin`, in `/usr/local/cuda/bin`",
        "the SASS disassembler, ahead of any other (when it names a file)",
    ),
    setting(
        DISASSEMBLER_TIMEOUT_ENV,
        "a number of seconds, more than 0",
        "120",
        "how long the disassembler may take for one CUBIN before it is killed and the SASS cases fail",
    ),
    setting(
        NVRTC_ENV,
        "a toolchain folder, or an installed version such as 12.8",
        "the NVRTC the dynamic linker finds",
        "the NVRTC the whole process uses",
    ),
    setting(
        TOOLCHAINS_ENV,
        "a folder",
        "`target/toolchains`",
        "where ci/toolchains.sh installs toolchains",
    ),
    setting(
        REQUIRE_TOOLCHAINS_ENV,
        FLAG,
        "off",
        "a toolchain that is not installed fails its compile-only cases instead of ignoring them",
    ),
    setting(
        LOCK_DIR_ENV,
        "a folder",
        "`/tmp/accprobe-locks`",
        "the folder of the devices' cross-process locks",
    ),
    setting(
        LOCK_TIMEOUT_ENV,
        "a number of seconds, 0 or more",
        "900",
        "how long to wait for a GPU another process measures (0 gives up at once)",
    ),
    setting(
        RETRIES_ENV,
        "a whole number, 0 or more (more than 100 counts as 100)",
        "2",
        "how often a disturbed measurement is made again",
    ),
    setting(
        WAIT_ENV,
        "a number of seconds, 0 or more (more than 3600 counts as 3600)",
        "10",
        "how long to wait before measuring again after a disturbed measurement",
    ),
    setting(
        TRACE_ENV,
        FLAG,
        "off",
        "marks on stderr of where the time goes",
    ),
    setting(
        HISTORY_ENV,
        "a file, a postgres:// (or postgresql://) URL without sslmode=require (the client speaks without TLS), or off",
        "`target/accprobe/history.sqlite`",
        "the results history each GPU run appends its record to (docs/history.md)",
    ),
    Variable {
        name: WORKER_ENV,
        takes: "a file",
        default: "unset",
        meaning: "makes the process a compile worker for the request in that file",
        kind: Kind::Internal,
    },
    Variable {
        name: ACTIVE_ENV,
        takes: "a folder",
        default: "unset",
        meaning: "the NVRTC folder a re-executed process put first on LD_LIBRARY_PATH",
        kind: Kind::Internal,
    },
    Variable {
        name: TEST_MARK_USED_ENV,
        takes: "a folder",
        default: "unset",
        meaning: "the cache entry a test's child process marks used",
        kind: Kind::Test,
    },
];

/// The declaration of `name`, if [`VARIABLES`] has one.
pub fn variable(name: &str) -> Option<&'static Variable> {
    VARIABLES.iter().find(|v| v.name == name)
}

fn takes(name: &'static str) -> &'static str {
    variable(name).map_or("a value", |v| v.takes)
}

fn blank(v: &std::ffi::OsStr) -> bool {
    use std::os::unix::ffi::OsStrExt;
    v.as_bytes().iter().all(u8::is_ascii_whitespace)
}

/// The raw value of `name`, `None` when it is unset, empty or only whitespace: for the
/// variables that take any path.
pub fn var_os(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|v| !blank(v))
}

/// A variable [`crate::harness::Paths`] resolves: an `ACCPROBE_*` one by [`var_os`]'s
/// rule, any other (`CARGO_TARGET_DIR`) as the environment has it.
pub(crate) fn path_var(name: &str) -> Option<OsString> {
    if name.starts_with("ACCPROBE_") {
        var_os(name)
    } else {
        std::env::var_os(name)
    }
}

/// The text of `name` as given, `None` when unset, empty or only whitespace; bytes that
/// are not UTF-8 are an error.
pub fn text(name: &'static str) -> Result<Option<String>, ConfigError> {
    match var_os(name) {
        None => Ok(None),
        Some(v) => v.into_string().map(Some).map_err(|v| ConfigError::NotUtf8 {
            variable: name.into(),
            value: v.to_string_lossy().into_owned(),
            expected: takes(name).into(),
        }),
    }
}

/// `name` parsed by `parse` (given the trimmed text); `None` when unset, empty or only
/// whitespace, and an error naming the variable when `parse` refuses the text.
pub(crate) fn parsed<T>(
    name: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> Result<Option<T>, ConfigError> {
    let Some(t) = text(name)? else {
        return Ok(None);
    };
    match parse(t.trim()) {
        Some(x) => Ok(Some(x)),
        None => Err(ConfigError::Malformed {
            variable: name.into(),
            value: t,
            expected: takes(name).into(),
        }),
    }
}

/// A yes/no variable: `1`/`true`/`yes` on, `0`/`false` (or unset) off, any case.
pub(crate) fn flag(name: &'static str) -> Result<bool, ConfigError> {
    Ok(parsed(name, crate::input::flag)?.unwrap_or(false))
}

fn seconds(t: &str) -> Option<f64> {
    t.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)
}

/// `0,2` -> [0, 2], none twice; the syntax only (the range needs the device count).
pub(crate) fn ordinal_list(text: &str) -> Result<Vec<usize>, OrdinalListError> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let o = part
            .parse::<usize>()
            .map_err(|_| OrdinalListError::NotAnOrdinal {
                part: part.to_string(),
            })?;
        if !out.contains(&o) {
            out.push(o);
        }
    }
    if out.is_empty() {
        return Err(OrdinalListError::Empty {
            text: text.to_string(),
        });
    }
    Ok(out)
}

/// [`PROFILE_ENV`]: a profile name or path.
pub fn profile() -> Result<Option<String>, ConfigError> {
    text(PROFILE_ENV)
}

/// [`MODE_ENV`]: `serial` or `wave`.
pub(crate) fn mode() -> Result<Option<Mode>, ConfigError> {
    parsed(MODE_ENV, |t| match t {
        "serial" => Some(Mode::Serial),
        "wave" => Some(Mode::Wave),
        _ => None,
    })
}

/// [`REQUIRE_GPU_ENV`].
pub(crate) fn require_gpu() -> Result<bool, ConfigError> {
    flag(REQUIRE_GPU_ENV)
}

/// The ordinals [`DEVICES_ENV`] (or else [`DEVICE_ENV`]) names, syntax checked without
/// touching the driver; `None` when neither is set.
pub(crate) fn devices() -> Result<Option<Vec<usize>>, ConfigError> {
    for name in [DEVICES_ENV, DEVICE_ENV] {
        if let Some(list) = parsed(name, |t| ordinal_list(t).ok())? {
            return Ok(Some(list));
        }
    }
    Ok(None)
}

/// [`EXTRA_OPTIONS_ENV`], split at whitespace.
pub fn extra_options() -> Result<Vec<String>, ConfigError> {
    Ok(text(EXTRA_OPTIONS_ENV)?
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default())
}

/// [`PARTS_ENV`]: a whole number of 1 or more.
pub(crate) fn compile_parts() -> Result<Option<usize>, ConfigError> {
    parsed(PARTS_ENV, |t| t.parse::<usize>().ok().filter(|&p| p >= 1))
}

/// [`DISASSEMBLER_ENV`], as given (whether it names a file is the caller's question).
pub(crate) fn disassembler() -> Option<PathBuf> {
    var_os(DISASSEMBLER_ENV).map(PathBuf::from)
}

/// [`DISASSEMBLER_TIMEOUT_ENV`]: seconds, more than 0 (at most 10^9);
/// [`DEFAULT_DISASSEMBLER_TIMEOUT_S`] unset.
pub(crate) fn disassembler_timeout() -> Result<Duration, ConfigError> {
    let limit = parsed(DISASSEMBLER_TIMEOUT_ENV, time_limit)?;
    Ok(limit.unwrap_or(Duration::from_secs(DEFAULT_DISASSEMBLER_TIMEOUT_S)))
}

/// A time limit: seconds, more than 0 (at most 10^9).
fn time_limit(t: &str) -> Option<Duration> {
    seconds(t)
        .filter(|&s| s > 0.0)
        .map(|s| Duration::from_secs_f64(s.min(1e9)))
}

/// [`NVRTC_ENV`]: a folder or an installed version.
pub(crate) fn nvrtc() -> Result<Option<String>, ConfigError> {
    text(NVRTC_ENV)
}

/// [`TOOLCHAINS_ENV`].
pub(crate) fn toolchains() -> Option<PathBuf> {
    var_os(TOOLCHAINS_ENV).map(PathBuf::from)
}

/// [`REQUIRE_TOOLCHAINS_ENV`].
pub(crate) fn require_toolchains() -> Result<bool, ConfigError> {
    flag(REQUIRE_TOOLCHAINS_ENV)
}

/// [`LOCK_DIR_ENV`].
pub(crate) fn lock_dir() -> Option<PathBuf> {
    var_os(LOCK_DIR_ENV).map(PathBuf::from)
}

/// [`LOCK_TIMEOUT_ENV`]: seconds, 0 or more (at most 10^9).
pub(crate) fn lock_timeout() -> Result<Option<Duration>, ConfigError> {
    parsed(LOCK_TIMEOUT_ENV, |t| {
        seconds(t).map(|s| Duration::from_secs_f64(s.min(1e9)))
    })
}

/// [`RETRIES_ENV`]: a whole number, at most [`MAX_RETRIES`]; [`DEFAULT_RETRIES`] unset.
pub(crate) fn contention_retries() -> Result<u32, ConfigError> {
    Ok(parsed(RETRIES_ENV, retries)?.unwrap_or(DEFAULT_RETRIES))
}

/// [`WAIT_ENV`]: seconds, at most [`MAX_WAIT_S`]; [`DEFAULT_WAIT_S`] unset.
pub(crate) fn contention_wait() -> Result<Duration, ConfigError> {
    Ok(parsed(WAIT_ENV, wait)?.unwrap_or(Duration::from_secs_f64(DEFAULT_WAIT_S)))
}

fn retries(t: &str) -> Option<u32> {
    t.parse::<u64>()
        .ok()
        .map(|r| r.min(u64::from(MAX_RETRIES)) as u32)
}

fn wait(t: &str) -> Option<Duration> {
    seconds(t).map(|s| Duration::from_secs_f64(s.min(MAX_WAIT_S)))
}

/// [`TRACE_ENV`].
pub(crate) fn trace() -> Result<bool, ConfigError> {
    flag(TRACE_ENV)
}

/// Internal [`WORKER_ENV`]: the request file, in a compile worker.
pub(crate) fn compile_worker() -> Option<OsString> {
    var_os(WORKER_ENV)
}

/// Internal [`ACTIVE_ENV`]: the NVRTC folder this re-executed process put first.
pub(crate) fn nvrtc_active() -> Option<PathBuf> {
    var_os(ACTIVE_ENV).map(PathBuf::from)
}

/// Test only: [`TEST_MARK_USED_ENV`].
#[cfg(test)]
pub(crate) fn test_mark_used() -> Option<PathBuf> {
    var_os(TEST_MARK_USED_ENV).map(PathBuf::from)
}

/// Reads every setting that can be malformed; the first error. The front ends call it
/// before anything runs, so that a setting read only when a GPU is first measured (the
/// lock, the contention checks) is refused on a machine without one too.
pub fn check() -> Result<(), ConfigError> {
    profile()?;
    mode()?;
    require_gpu()?;
    devices()?;
    extra_options()?;
    compile_parts()?;
    disassembler_timeout()?;
    nvrtc()?;
    require_toolchains()?;
    lock_timeout()?;
    contention_retries()?;
    contention_wait()?;
    trace()?;
    history()?;
    Ok(())
}

/// The environment variables that say a CI system runs the command: `CI` (set by most),
/// and those of GitHub Actions, GitLab CI, Buildkite, Jenkins and Azure Pipelines, which
/// set their own (Jenkins and Azure do not set `CI`).
pub const CI_VARIABLES: [&str; 6] = [
    "CI",
    "GITHUB_ACTIONS",
    "GITLAB_CI",
    "BUILDKITE",
    "JENKINS_URL",
    "TF_BUILD",
];

/// The variable (and its value) by which a CI system announces itself in the environment
/// read through `var`, if any: one of [`CI_VARIABLES`] set to a non-empty value, except
/// `CI=false` and `CI=0`, which say "not CI" (a person may export them to mean so); the
/// other variables count whatever their value. The one rule for everything that behaves
/// differently under CI (bless, progress bars).
pub fn ci_variable(var: impl Fn(&str) -> Option<String>) -> Option<(&'static str, String)> {
    CI_VARIABLES.into_iter().find_map(|name| {
        let value = var(name).filter(|v| !v.is_empty())?;
        (!(name == "CI" && (value == "false" || value == "0"))).then_some((name, value))
    })
}

#[cfg(test)]
mod tests;
