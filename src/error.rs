//! Errors that name where the bad input is: file, line and column when the format has them.

use std::fmt;
use std::path::{Path, PathBuf};

/// An error about a user's file or the GPU toolchain, printed as
/// `file:line:column: message` when the position is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub file: Option<PathBuf>,
    /// 1-based line and column.
    pub position: Option<(u64, u64)>,
    pub message: String,
}

impl Error {
    pub fn msg(message: impl Into<String>) -> Self {
        Error {
            file: None,
            position: None,
            message: message.into(),
        }
    }

    pub fn in_file(file: &Path, message: impl Into<String>) -> Self {
        Error {
            file: Some(file.to_path_buf()),
            position: None,
            message: message.into(),
        }
    }

    pub fn at(file: &Path, line: u64, column: u64, message: impl Into<String>) -> Self {
        Error {
            file: Some(file.to_path_buf()),
            position: (line > 0).then_some((line, column)),
            message: message.into(),
        }
    }

    /// An I/O failure on `file`, saying what was being done.
    pub fn io(file: &Path, doing: &str, err: std::io::Error) -> Self {
        Error::in_file(file, format!("cannot {doing}: {err}"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.position) {
            (Some(file), Some((line, col))) => {
                write!(f, "{}:{line}:{col}: {}", file.display(), self.message)
            }
            (Some(file), None) => write!(f, "{}: {}", file.display(), self.message),
            (None, _) => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A line of a tool's text output (ptxas log, SASS) that could not be read; `line` is 1-based.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// What was being read: `ptxas log`, `SASS`.
    pub what: &'static str,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} line {}: {}", self.what, self.line, self.message)
    }
}

impl std::error::Error for LineError {}
