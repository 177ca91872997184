//! A compiled matrix as plain data: what the compile-only gate judges. One per
//! (architecture, toolchain): the ptxas report and SASS summary of each variant, or why
//! there is none. Written by the compile worker (`compile::worker`), read by
//! `verdict::compile_only`.

use crate::model::results::SassSummary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The ptxas report of one kernel, as the compile stage read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PtxasFigures {
    pub registers: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
}

/// One variant compiled for one architecture.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledVariant {
    pub ptxas: PtxasFigures,
    /// `None` when the SASS could not be read (see [`CompiledMatrix::sass_unavailable`]).
    pub sass: Option<SassSummary>,
}

/// Which NVRTC compiled, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolchainIdentity {
    /// As named in a profile or by `ACCPROBE_NVRTC`: `12.8`, or a folder.
    pub key: String,
    /// `nvrtcVersion`: `12.8`.
    pub nvrtc_version: String,
    /// The installed release when known (`nvidia-cuda-nvrtc-cu12==12.8.93`).
    pub release: Option<String>,
    /// The libnvrtc file the worker loaded.
    pub library: String,
    /// The architectures `nvrtcGetSupportedArchs` lists: `sm_75`, `sm_80`, ...
    pub supported: Vec<String>,
}

impl ToolchainIdentity {
    /// One line: `NVRTC 12.8 (nvidia-cuda-nvrtc-cu12==12.8.93)`.
    pub(crate) fn describe(&self) -> String {
        match &self.release {
            Some(r) => format!("NVRTC {} ({r})", self.nvrtc_version),
            None => format!("NVRTC {} ({})", self.nvrtc_version, self.library),
        }
    }
}

/// The matrix compiled for one architecture by one toolchain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompiledMatrix {
    /// `sm_90`.
    pub architecture: String,
    pub toolchain: ToolchainIdentity,
    /// The disassembler and its version line, or why there is none.
    pub disassembler: String,
    /// Variant name -> what it compiled to.
    pub variants: BTreeMap<String, CompiledVariant>,
    /// Why the variants carry no SASS, when they do not.
    pub sass_unavailable: Option<String>,
    /// Seconds in NVRTC (0 on a cache hit) and on the SASS.
    pub nvrtc_seconds: f64,
    pub sass_seconds: f64,
    /// How the compile cache served it.
    pub cache: String,
}

/// What a compile worker says about one architecture.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum ArchOutcome {
    Compiled(Box<CompiledMatrix>),
    /// The toolchain does not support the architecture (newer than it, or dropped): its
    /// cases are ignored with this reason.
    Unsupported(String),
    /// The architecture is not one NVRTC knows, or compiling failed: its cases fail.
    Failed(String),
}
