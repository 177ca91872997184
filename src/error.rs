//! Errors that name where the bad input is: file, line and column when the format has them;
//! a setting that cannot be used (`config` reads the settings and returns these); and why the
//! GPU side could not deliver a result.

use crate::text::Shown;
use std::borrow::Cow;
use std::fmt;
use std::path::{Path, PathBuf};

/// An error about a user's file or the GPU toolchain, printed as
/// `file:line:column: message` when the position is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub file: Option<PathBuf>,
    /// 1-based line and column.
    pub position: Option<(u64, u64)>,
    pub(crate) message: String,
}

impl Error {
    pub(crate) fn msg(message: impl Into<String>) -> Self {
        Error {
            file: None,
            position: None,
            message: message.into(),
        }
    }

    pub(crate) fn in_file(file: &Path, message: impl Into<String>) -> Self {
        Error {
            file: Some(file.to_path_buf()),
            position: None,
            message: message.into(),
        }
    }

    pub(crate) fn at(file: &Path, line: u64, column: u64, message: impl Into<String>) -> Self {
        Error {
            file: Some(file.to_path_buf()),
            position: (line > 0).then_some((line, column)),
            message: message.into(),
        }
    }

    /// This error with where it was referenced from: `file:line:column` of the key that
    /// named the file (a profile's `baselines.file`, `policy_gate.file`,
    /// `recorded.results`).
    pub(crate) fn referenced_from(mut self, file: &Path, line: u64, column: u64) -> Self {
        self.message.push_str(&format!(
            " (referenced from {}:{line}:{column})",
            file.shown()
        ));
        self
    }

    /// An I/O failure on `file`, saying what was being done.
    pub(crate) fn io(file: &Path, doing: &str, err: std::io::Error) -> Self {
        Error::in_file(file, format!("cannot {doing}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.position) {
            (Some(file), Some((line, col))) => {
                write!(f, "{}:{line}:{col}: {}", file.shown(), self.message)
            }
            (Some(file), None) => write!(f, "{}: {}", file.shown(), self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

/// A setting's error where a file's is expected: its text, with no file.
impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::msg(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `work(index, item)` for each of `items`, each on a scoped thread of its own, results in
/// order; a thread that panics gives `panicked` of what the panic said.
pub(crate) fn each_on_a_thread<T: Sync, R: Send>(
    items: &[T],
    work: impl Fn(usize, &T) -> R + Sync,
    panicked: impl Fn(String) -> R,
) -> Vec<R> {
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = items
            .iter()
            .enumerate()
            .map(|(k, item)| scope.spawn(move || work(k, item)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|payload| panicked(panic_text(payload.as_ref())))
            })
            .collect()
    })
}

/// What a panic said, when it said it with a string.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".to_string())
}

/// A line of a tool's text output (ptxas log, SASS) that could not be read; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// What was being read: `ptxas log`, `SASS`.
    pub(crate) what: &'static str,
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} line {}: {}", self.what, self.line, self.message)
    }
}

impl std::error::Error for LineError {}

/// A setting that cannot be used. The variable and what it takes are `Cow` so that a
/// [`crate::error::GpuError`] carrying one can be read back from a published measurement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum ConfigError {
    /// A value that does not parse: the variable, the value as given and what it takes.
    #[error("{variable}={value:?}: expected {expected}")]
    Malformed {
        variable: Cow<'static, str>,
        value: String,
        expected: Cow<'static, str>,
    },
    /// A value that is not UTF-8 (shown lossily) where text is expected.
    #[error("{variable}={value:?}: not valid UTF-8 (expected {expected})")]
    NotUtf8 {
        variable: Cow<'static, str>,
        value: String,
        expected: Cow<'static, str>,
    },
    /// A device list whose syntax is wrong.
    #[error(transparent)]
    Ordinals(#[from] OrdinalListError),
    /// A device list that names a device the driver does not see.
    #[error("device {ordinal} is not an ordinal below {count} (visible devices: {count})")]
    NoSuchDevice { ordinal: usize, count: usize },
    /// A lock directory the user named that cannot be used.
    #[error(transparent)]
    LockDir(#[from] LockDirRefused),
}

impl ConfigError {
    /// The variable the error names, where it names one (a device list checked by
    /// itself does not).
    #[cfg(test)]
    pub(crate) fn variable(&self) -> Option<&str> {
        match self {
            ConfigError::Malformed { variable, .. } | ConfigError::NotUtf8 { variable, .. } => {
                Some(variable)
            }
            ConfigError::LockDir(r) => Some(&r.variable),
            ConfigError::Ordinals(_) | ConfigError::NoSuchDevice { .. } => None,
        }
    }
}

/// Why a device list (`0,2`) is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum OrdinalListError {
    /// `part`, one of the comma-separated items, is not a whole number.
    #[error("{part:?} is not a device ordinal (expected a list such as 0 or 0,2)")]
    NotAnOrdinal { part: String },
    /// The list (`text` as given) has no item.
    #[error("{text:?} names no device")]
    Empty { text: String },
}

/// A lock directory the user named (with `variable`, `ACCPROBE_LOCK_DIR`) that cannot be
/// used: a configuration error, never a run without the lock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error(
    "{variable}={:?} cannot be used: {why} (name a shared, writable directory, or unset it for {default})",
    dir.display().to_string()
)]
pub struct LockDirRefused {
    pub(crate) variable: Cow<'static, str>,
    /// The directory named.
    pub(crate) dir: PathBuf,
    /// Why it cannot be used.
    pub(crate) why: String,
    /// The directory used when the variable is unset.
    pub(crate) default: Cow<'static, str>,
}

/// Why the GPU side could not deliver a result. Its [`GpuError::kind`] decides what the
/// front ends do: an unavailable GPU ignores GPU cases (or fails the run where a GPU is
/// required), a configuration error stops with exit code 2, a broken GPU fails its cases.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum GpuError {
    #[error("no CUDA driver: libcuda.so not found")]
    NoDriver,
    #[error("no NVRTC: libnvrtc.so not found (install the CUDA toolkit's NVRTC or add it to LD_LIBRARY_PATH)")]
    NoNvrtc,
    /// The CUDA driver loaded, but could not be started or asked (`cuInit:
    /// CUDA_ERROR_NO_DEVICE (...)`): the call and the driver's own name for its error.
    #[error("{0}")]
    Init(String),
    #[error("no CUDA device found")]
    NoDevice,
    /// The device exists but a context or its attributes cannot be had.
    #[error("{0}")]
    Device(String),
    /// A setting is wrong: `ACCPROBE_DEVICES`/`ACCPROBE_DEVICE` is malformed or names no
    /// visible device, a lock directory the user named cannot be used.
    /// Boxed: most errors are not this one, and every measurement's `Result` carries it.
    #[error(transparent)]
    Config(Box<ConfigError>),
    #[error("could not compile or load the probe: {0}")]
    Compile(String),
    #[error("CUDA error while {what}: {message}")]
    Cuda { what: String, message: String },
    /// An earlier sticky error left the context unusable.
    #[error("not measured: the GPU context is unusable since {0}")]
    Unusable(String),
    /// A variant could not be measured (outside the CUDA API: a missing kernel, a replay
    /// without it).
    #[error("{0}")]
    Variant(String),
    /// The GPU was not ours to measure: another process held it past the lock's time
    /// limit. The text starts with `GPU busy:`.
    #[error("{0}")]
    Busy(String),
}

impl From<ConfigError> for GpuError {
    fn from(e: ConfigError) -> Self {
        GpuError::Config(Box::new(e))
    }
}

/// What a [`GpuError`] means for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuErrorKind {
    /// No usable GPU here: GPU cases are ignored with the reason (unless a GPU is required).
    Unavailable,
    /// The user's configuration is wrong: exit code 2 before anything runs.
    Config,
    /// The GPU is there but compiling or measuring failed: the cases fail.
    Broken,
    /// The GPU is there but was not ours to measure (held by another process, shared or
    /// throttled): the cases are errors of the run, never verdicts about the code.
    Busy,
}

impl GpuError {
    pub fn kind(&self) -> GpuErrorKind {
        match self {
            GpuError::NoDriver
            | GpuError::NoNvrtc
            | GpuError::Init(_)
            | GpuError::NoDevice
            | GpuError::Device(_) => GpuErrorKind::Unavailable,
            GpuError::Config(_) => GpuErrorKind::Config,
            GpuError::Compile(_)
            | GpuError::Cuda { .. }
            | GpuError::Unusable(_)
            | GpuError::Variant(_) => GpuErrorKind::Broken,
            GpuError::Busy(_) => GpuErrorKind::Busy,
        }
    }

    /// A CUDA driver error while doing `what`.
    pub(crate) fn cuda(what: impl Into<String>, e: impl fmt::Display) -> GpuError {
        GpuError::Cuda {
            what: what.into(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_is_told_with_its_message() {
        let text = std::thread::spawn(|| panic!("nvrtcVersion not found"))
            .join()
            .map_err(|p| panic_text(p.as_ref()))
            .unwrap_err();
        assert_eq!(text, "nvrtcVersion not found");
        let owned = std::thread::spawn(|| std::panic::panic_any(format!("symbol {}", 7)))
            .join()
            .map_err(|p| panic_text(p.as_ref()))
            .unwrap_err();
        assert_eq!(owned, "symbol 7");
        let other = std::thread::spawn(|| std::panic::panic_any(7u8))
            .join()
            .map_err(|p| panic_text(p.as_ref()))
            .unwrap_err();
        assert_eq!(other, "no message");
    }

    #[test]
    fn threads_give_their_results_in_order_and_a_panic_as_a_value() {
        let got = each_on_a_thread(
            &[1, 2, 3, 4],
            |k, &x| {
                if x == 3 {
                    panic!("item {k} refused");
                }
                Ok(x * 10)
            },
            Err,
        );
        assert_eq!(
            got,
            vec![Ok(10), Ok(20), Err("item 2 refused".to_string()), Ok(40)]
        );
    }

    #[test]
    fn a_config_error_keeps_its_type_through_a_gpu_error_and_a_published_record() {
        let refused = LockDirRefused {
            variable: "ACCPROBE_LOCK_DIR".into(),
            dir: "/x".into(),
            why: "it is a file".into(),
            default: "/tmp/accprobe-locks".into(),
        };
        let e = GpuError::from(ConfigError::from(refused.clone()));
        assert_eq!(e.kind(), GpuErrorKind::Config);
        assert!(
            matches!(&e, GpuError::Config(c) if matches!(&**c, ConfigError::LockDir(r) if *r == refused)),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            refused.to_string(),
            "the message is the cause's"
        );
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(serde_json::from_str::<GpuError>(&json).unwrap(), e);
        let malformed = GpuError::from(ConfigError::Malformed {
            variable: "ACCPROBE_DEVICES".into(),
            value: "x".into(),
            expected: "a list".into(),
        });
        let json = serde_json::to_string(&malformed).unwrap();
        assert_eq!(serde_json::from_str::<GpuError>(&json).unwrap(), malformed);
    }
}
