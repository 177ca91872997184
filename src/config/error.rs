//! What can be wrong with a setting: a value that does not parse, a device list that names
//! no device or one that is not there, a lock directory that cannot be used. Each is a
//! configuration error: the front ends exit 2 before anything runs.

use std::borrow::Cow;
use std::path::PathBuf;

/// The lock directory used when [`super::LOCK_DIR_ENV`] is unset: shared by every user and
/// process of the host, unlike `$XDG_RUNTIME_DIR` or `$TMPDIR`.
pub const DEFAULT_LOCK_DIR: &str = "/tmp/accprobe-locks";

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
    pub fn variable(&self) -> Option<&str> {
        match self {
            ConfigError::Malformed { variable, .. } | ConfigError::NotUtf8 { variable, .. } => {
                Some(variable)
            }
            ConfigError::LockDir(_) => Some(super::LOCK_DIR_ENV),
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

/// A lock directory the user named (`ACCPROBE_LOCK_DIR`) that cannot be used: a
/// configuration error, never a run without the lock.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
#[error(
    "{}={:?} cannot be used: {why} (name a shared, writable directory, or unset it for {DEFAULT_LOCK_DIR})",
    super::LOCK_DIR_ENV,
    dir.display().to_string()
)]
pub struct LockDirRefused {
    /// The directory named.
    pub dir: PathBuf,
    /// Why it cannot be used.
    pub why: String,
}
