//! Why a compile worker gave no report ([`WorkerError`], in the parent), why the worker
//! could not load its toolchain's NVRTC ([`LoadError`], sent back in its report), and why
//! it could not read its request or write its report ([`RequestError`], in the worker).

use crate::child::RunError;
use crate::text::Shown;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// Why a compile worker could not give its report.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    /// This executable does not serve as a compile worker.
    #[error(
        "this executable does not run compile workers (its main does not call compile::worker::worker_main): \
         compile-only cases run in the suite (tests/probe.rs) and in `cargo xtask toolchains`"
    )]
    NotAWorker,
    #[error("cannot find this executable: {0}")]
    NoExecutable(#[source] Arc<std::io::Error>),
    #[error("cannot create a folder for the compile worker in {}: {source}", .dir.shown())]
    Folder {
        dir: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    #[error("cannot write {}: {source}", .file.shown())]
    WriteRequest {
        file: PathBuf,
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The worker could not be started or supervised.
    #[error("the compile worker {} {source}", .exe.shown())]
    Run {
        exe: PathBuf,
        #[source]
        source: Arc<RunError>,
    },
    /// The worker for toolchain `key` (NVRTC in `lib_dir`) ran past `limit`; `stderr`, what
    /// it wrote there.
    #[error("the compile worker for NVRTC {key} ({}) did not finish within {} s and was killed, with every process it started: {stderr}", .lib_dir.shown(), .limit.as_secs())]
    TimedOut {
        key: String,
        lib_dir: PathBuf,
        limit: Duration,
        stderr: String,
    },
    /// The worker ended unsuccessfully, or without its report.
    #[error("the compile worker for NVRTC {key} ({}) failed ({}): {stderr}", .lib_dir.shown(), crate::child::ended_how(*.status))]
    Failed {
        key: String,
        lib_dir: PathBuf,
        status: ExitStatus,
        stderr: String,
    },
    #[error("unreadable compile worker report: {0}")]
    BadReport(#[source] Arc<serde_json::Error>),
}

/// Why a compile worker could not load its toolchain's NVRTC. Sent to the parent in the
/// report, so the causes that come from libraries (libloading, NVRTC) are their words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum LoadError {
    #[error("{} holds no libnvrtc.so*", .dir.shown())]
    NoLibrary { dir: PathBuf },
    #[error("{} is not an NVRTC: it does not load: {why}", .lib.shown())]
    NotLoadable { lib: PathBuf, why: String },
    #[error("{} is not an NVRTC: it has no nvrtcVersion: {why}", .lib.shown())]
    NoVersion { lib: PathBuf, why: String },
    #[error("cudarc finds no libnvrtc with LD_LIBRARY_PATH={ld_library_path}")]
    NotFound { ld_library_path: String },
    /// Another library than the toolchain's is mapped.
    #[error("another NVRTC was loaded ({}) instead of the one in {}: check LD_LIBRARY_PATH", .loaded.shown(), .wanted.shown())]
    OtherLoaded { loaded: PathBuf, wanted: PathBuf },
    /// An NVRTC call that failed (`nvrtcVersion`, `nvrtcGetSupportedArchs`).
    #[error("{call} failed: {why}")]
    Call { call: String, why: String },
    /// The NVRTC version could not be read.
    #[error("{0}")]
    Version(String),
}

/// Why a compile worker could not read its request or write its report.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("cannot read the worker request {file:?}: {source}")]
    Read {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("bad worker request {file:?}: {source}")]
    Parse {
        file: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{0}")]
    Encode(#[source] serde_json::Error),
    #[error("cannot write {}: {source}", .file.shown())]
    Write {
        file: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
