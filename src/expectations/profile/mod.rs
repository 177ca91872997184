//! Stage 1 of the pipeline: profiles, the hand-written expectations.
//!
//! A profile (`expectations/<name>.yaml`) holds the probe settings, the invariants with
//! their tolerances, the known deviations of one GPU, optionally a reference to generated
//! per-variant baselines, and optionally recorded results to replay. This module holds the
//! checked types every stage reads; `file` is the YAML format, `read` turns one into the
//! other and checks everything this stage can, naming file, line and column when it
//! refuses (`probe` the probe section and its bounds, `contexts` the contexts section,
//! `known_deviations` the deviations).
//! Whether each known deviation names a generated case needs the cases, which belong to
//! the verdict stage: [`Profile::check_known_deviations`] takes their names from the
//! caller (the catalog).

mod contexts;
mod file;
mod known_deviations;
mod policy_gate;
mod probe;
mod read;
mod reductions;

use crate::expectations::baselines::Baselines;
use crate::expectations::compile_only::CompileOnly;
use crate::expectations::policy_source::PolicySource;
use crate::expectations::yaml::number;
use crate::model::gpu::GpuIdentity;
use crate::model::results::RunResults;
use crate::model::settings::ProbeSettings;
use crate::model::workload::Workload;
use crate::text::{joined, Shown};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A loaded, checked profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub(crate) description: String,
    /// The file it came from.
    pub file: PathBuf,
    pub matches: GpuMatch,
    pub probe: ProbeSettings,
    pub invariants: Vec<Invariant>,
    /// The invariants of the real accumulations (the `reductions:` section's).
    pub reduction_invariants: Vec<ReductionInvariant>,
    /// Case name -> why it is expected to fail on this GPU.
    pub known_deviations: BTreeMap<String, KnownDeviation>,
    pub baselines: Option<Baselines>,
    /// The validity checks' settings; without them no validity cases are generated.
    pub validity: Option<Validity>,
    /// The accumulator-split policy this profile gates, if any.
    pub policy_gate: Option<PolicyGate>,
    /// Results to replay on any machine (the study's table, or a committed run).
    pub recorded: Option<RunResults>,
    /// Architectures and toolchains the compile-only gate compiles the matrix for.
    pub compile_only: Option<CompileOnly>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuMatch {
    /// Exact GPU names as the driver reports them (`NVIDIA H200`), compared case-insensitively.
    #[serde(default)]
    pub gpu_names: Vec<String>,
    /// `major.minor` compute capabilities (`9.0`).
    #[serde(default)]
    pub compute_capabilities: Vec<String>,
}

impl GpuMatch {
    /// Whether `gpu` is one this profile is for: by name (case-insensitive), or by compute
    /// capability.
    pub(crate) fn by_name(&self, gpu: &GpuIdentity) -> bool {
        self.gpu_names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(&gpu.name))
    }

    pub(crate) fn by_capability(&self, gpu: &GpuIdentity) -> bool {
        self.compute_capabilities.contains(&gpu.compute_capability)
    }

    pub(crate) fn matches(&self, gpu: &GpuIdentity) -> bool {
        self.by_name(gpu) || self.by_capability(gpu)
    }
}

/// In words, for messages: "it matches GPU name NVIDIA H200 or compute capability 9.0", or
/// "it matches no GPU (its `matches` names no GPU name or compute capability)".
impl std::fmt::Display for GpuMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |what: &str, items: &[String]| match items {
            [] => None,
            [one] => Some(format!("{what} {}", one.shown())),
            more => Some(format!("{what}s {}", joined(more, ", "))),
        };
        let parts: Vec<String> = [
            list("GPU name", &self.gpu_names),
            list("compute capability", &self.compute_capabilities),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            write!(
                f,
                "it matches no GPU (its `matches` names no GPU name or compute capability)"
            )
        } else {
            write!(f, "it matches {}", parts.join(" or "))
        }
    }
}

/// Why a case is expected to fail on this GPU, and where the profile says so.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownDeviation {
    pub reason: String,
    /// Measured to hold on some GPUs (or runs) and to fail on others: excused whether it
    /// fails or holds, never failed for holding again (`unsteady: true`; the reason says
    /// where each was measured).
    pub unsteady: bool,
    /// 1-based line and column of the case name in the profile.
    pub(crate) line: u64,
    pub(crate) column: u64,
}

/// A documented property of the results.
#[derive(Debug, Clone, PartialEq)]
pub enum Invariant {
    /// No accumulator count beats `accumulators` by more than `tolerance` (relative) at any chain.
    Peak { accumulators: u32, tolerance: f64 },
    /// progress(accumulators)/progress(over) rises with chain length, each step by more than
    /// `min_increase` (in ratio units).
    GainGrows {
        accumulators: u32,
        over: u32,
        min_increase: f64,
    },
    /// No variant spills registers to local memory.
    NoSpills,
}

impl Invariant {
    /// The invariant's name in case names: `acc2_is_peak`, `acc2_gain_grows`, `no_spills`.
    pub(crate) fn id(&self) -> String {
        match self {
            Invariant::Peak { accumulators, .. } => format!("acc{accumulators}_is_peak"),
            Invariant::GainGrows { accumulators, .. } => format!("acc{accumulators}_gain_grows"),
            Invariant::NoSpills => "no_spills".to_string(),
        }
    }
}

/// A documented property of one real accumulation, judged in each context it is
/// measured in (the base and each of `reductions.warps`).
#[derive(Debug, Clone, PartialEq)]
pub enum ReductionInvariant {
    /// No accumulator count beats `accumulators` by more than `tolerance` (relative) for
    /// `kernel`.
    Peak {
        kernel: Workload,
        accumulators: u32,
        tolerance: f64,
    },
}

/// Settings of the measurement-validity checks: the physical ceilings of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validity {
    /// Dependent FFMA latency, cycles (4 on sm_90).
    #[serde(deserialize_with = "number::plain")]
    pub ffma_latency_cycles: u32,
    /// Warp schedulers per SM (4 on sm_90): warps sharing one issue at most one instruction
    /// per cycle between them.
    #[serde(deserialize_with = "number::plain")]
    pub schedulers_per_sm: u32,
    /// How far a launch's duration (CUDA events) may be from budget / SM clock, relative.
    #[serde(deserialize_with = "number::plain")]
    pub duration_tolerance: f64,
}

/// A policy gated by a profile: its pick must reach (1 - tolerance) of the best progress.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyGate {
    pub source: PolicySource,
    pub tolerance: f64,
}
