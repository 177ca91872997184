//! Why the compile stage gave no CUBIN: an NVRTC call that failed (with NVRTC's own
//! result), a source NVRTC refused (with its log and options), a ptxas report that cannot
//! be read or lacks a variant, a matrix that lists a variant twice, a program of several
//! or a thread that failed, a setting that does not parse.

use super::nvrtc::{words, COMPUTE_CACHE_ENV};
use crate::config::ConfigError;
use crate::error::LineError;
use crate::model::variant::Variant;
use crate::text;
use cudarc::nvrtc::result::NvrtcError;

/// Why the compile stage failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileError {
    /// An NVRTC call that is not a compile (`nvrtcVersion`, `nvrtcCreateProgram`,
    /// `nvrtcGetCUBIN`) failed; `hint` ends the message.
    #[error("{call} failed: {}{hint}", words(*.error))]
    Call {
        call: &'static str,
        error: NvrtcError,
        hint: &'static str,
    },
    /// The libnvrtc loaded lacks `symbol`, one of the functions this crate calls: it is not
    /// an NVRTC (or one too old); `why`, the loader's words.
    #[error("the libnvrtc loaded is not an NVRTC this tool can use: it has no {symbol} ({why})")]
    NotNvrtc { symbol: &'static str, why: String },
    /// The source of `what` (`the probe`) holds a NUL byte, which NVRTC cannot take.
    #[error("{what}'s source contains a NUL byte")]
    NulInSource { what: String },
    /// NVRTC refused to compile `what` with `options`; `log`, what it said.
    #[error("NVRTC could not compile {what}: {}, with the options {}; its log:\n{}", words(*.error), text::joined(.options, " "), text::quoted(.log))]
    Refused {
        what: String,
        error: NvrtcError,
        options: Vec<String>,
        log: String,
    },
    /// A line of the ptxas report in NVRTC's `log` that cannot be read.
    #[error("{source}; the log:\n{}", text::quoted(.log))]
    PtxasLog {
        #[source]
        source: LineError,
        log: String,
    },
    /// The ptxas report (of `entries` entries, in a log of `lines` lines) has none for
    /// `variant`: the compute cache served the CUBIN.
    #[error("the ptxas report has no entry for {variant} ({entries} entries, {lines} log lines): NVRTC skips ptxas, \
             and its report, when the CUDA compute cache serves the CUBIN; {COMPUTE_CACHE_ENV}=1 prevents that")]
    NoReport {
        variant: Variant,
        entries: usize,
        lines: usize,
    },
    #[error("the matrix lists {variant} twice")]
    Twice { variant: Variant },
    /// Program `k` (1-based) of the `of` the matrix was dealt into failed.
    #[error("program {k} of {of}: {source}")]
    Program {
        k: usize,
        of: usize,
        #[source]
        source: Box<CompileError>,
    },
    /// A compile thread panicked, saying this.
    #[error("a compile thread panicked: {0}")]
    Panicked(String),
    /// `ACCPROBE_COMPILE_PARTS` does not parse.
    #[error(transparent)]
    Config(#[from] ConfigError),
}
