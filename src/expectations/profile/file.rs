//! The profile file's format, as serde reads it. Spanned fields are those whose values are
//! checked after parsing (in [`super::read`]), so that a refusal can point at them.

use super::{GpuMatch, Validity};
use crate::expectations::baselines::Wider;
use crate::expectations::compile_only::CompileOnlyFile;
use crate::expectations::policy::Accumulation;
use crate::expectations::recorded::RecordedFile;
use crate::expectations::yaml::{number, present};
use crate::model::settings::Mode;
use crate::model::variant::Sink;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProfileFile {
    pub(super) name: Spanned<String>,
    pub(super) description: String,
    #[serde(default, rename = "match")]
    pub(super) matches: GpuMatch,
    pub(super) probe: ProbeFile,
    pub(super) invariants: Vec<InvariantFile>,
    #[serde(default)]
    pub(super) known_deviations: Vec<DeviationFile>,
    #[serde(default, deserialize_with = "present")]
    pub(super) baselines: Option<BaselinesRef>,
    #[serde(default, deserialize_with = "present")]
    pub(super) recorded: Option<RecordedFile>,
    #[serde(default, deserialize_with = "present")]
    pub(super) validity: Option<Spanned<Validity>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) sink_isolation: Option<SinkFile>,
    #[serde(default, deserialize_with = "present")]
    pub(super) contexts: Option<Spanned<ContextsFile>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) reductions: Option<Spanned<ReductionsFile>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) policy_gate: Option<Spanned<PolicyGateFile>>,
    #[serde(default, deserialize_with = "present")]
    pub(super) compile_only: Option<CompileOnlyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SinkFile {
    pub(super) modes: Vec<Spanned<Sink>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) accumulators: Spanned<Vec<Spanned<u32>>>,
}

/// The `contexts:` section (docs/reference.md, "contexts"): each input varied alone, and
/// the corners, at these chains and accumulator counts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ContextsFile {
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) chains: Spanned<Vec<Spanned<u32>>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) accumulators: Spanned<Vec<Spanned<u32>>>,
    #[serde(default, deserialize_with = "number::optional_spanned_seq")]
    pub(super) warps: Option<Spanned<Vec<Spanned<u32>>>>,
    #[serde(default, deserialize_with = "number::optional_spanned_seq")]
    pub(super) side_chains: Option<Spanned<Vec<Spanned<u32>>>>,
    #[serde(default, deserialize_with = "number::optional_spanned_seq")]
    pub(super) live_values: Option<Spanned<Vec<Spanned<u32>>>>,
    #[serde(default)]
    pub(super) corners: Vec<Spanned<CornerFile>>,
}

/// The `reductions:` section (docs/reference.md, "reductions"): real accumulations, at
/// these accumulator counts, in the base context and at these warps.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReductionsFile {
    pub(super) kernels: Spanned<Vec<Spanned<String>>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) accumulators: Spanned<Vec<Spanned<u32>>>,
    #[serde(default, deserialize_with = "number::optional_spanned_seq")]
    pub(super) warps: Option<Spanned<Vec<Spanned<u32>>>>,
    #[serde(default)]
    pub(super) invariants: Vec<ReductionInvariantFile>,
}

/// One invariant of the `reductions:` section, about one kernel in each of its contexts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(super) enum ReductionInvariantFile {
    Peak(KernelPeakFile),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KernelPeakFile {
    pub(super) kernel: Spanned<String>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) accumulators: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) tolerance: Spanned<f64>,
}

/// One corner: two or more inputs set together.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CornerFile {
    #[serde(default, deserialize_with = "number::optional_spanned")]
    pub(super) warps: Option<Spanned<u32>>,
    #[serde(default, deserialize_with = "number::optional_spanned")]
    pub(super) side_chains: Option<Spanned<u32>>,
    #[serde(default, deserialize_with = "number::optional_spanned")]
    pub(super) live_values: Option<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PolicyGateFile {
    /// The policy file, relative to the profile's folder; or else `command`.
    pub(super) file: Option<Spanned<String>>,
    /// A policy program and its arguments (docs/policies.md); or else `file`.
    pub(super) command: Option<Spanned<Vec<String>>>,
    /// The command's name in case names (a file names its policy itself).
    pub(super) name: Option<Spanned<String>>,
    /// Seconds the command may take.
    #[serde(default, deserialize_with = "number::optional")]
    pub(super) time_limit_s: Option<u64>,
    /// The accumulation the probe kernel stands for, for a command (a file holds its own).
    pub(super) probe_context: Option<Spanned<Accumulation>>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) tolerance: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProbeFile {
    #[serde(deserialize_with = "number::spanned")]
    pub(super) blocks: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) block_threads: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) warmup_launches: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) repeats: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) budget_cycles: Spanned<u64>,
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) chains: Spanned<Vec<Spanned<u32>>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    pub(super) accumulators: Spanned<Vec<Spanned<u32>>>,
    #[serde(default)]
    pub(super) mode: Mode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub(super) enum InvariantFile {
    Peak {
        #[serde(deserialize_with = "number::spanned")]
        accumulators: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
        tolerance: Spanned<f64>,
    },
    GainGrows {
        #[serde(deserialize_with = "number::spanned")]
        accumulators: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
        over: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
        min_increase: Spanned<f64>,
    },
    NoSpills {},
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DeviationFile {
    pub(super) case: Spanned<String>,
    pub(super) reason: Spanned<String>,
    /// The case holds on some GPUs of the model and fails on others: excused either way.
    #[serde(default)]
    pub(super) unsteady: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct BaselinesRef {
    /// Relative to the profile's folder.
    pub(super) file: Spanned<String>,
    #[serde(deserialize_with = "number::spanned")]
    pub(super) tolerance: Spanned<f64>,
    #[serde(default)]
    pub(super) wider: BTreeMap<String, Spanned<Wider>>,
}
