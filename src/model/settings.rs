//! How the probe runs: the settings a profile asks for and a results file records.

use crate::model::variant::{matrix, Context, Sink, Variant, Workload};
use serde::{Deserialize, Serialize};

/// How variants share the GPU while measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// One variant at a time.
    #[default]
    Serial,
    /// Every variant at once, one stream (and SM) each; repeats as successive waves.
    Wave,
}

impl Mode {
    /// The mode as a profile, a results file and the history spell it.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Serial => "serial",
            Mode::Wave => "wave",
        }
    }
}

/// How the probe runs. Defaults are none: every profile states its setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSettings {
    pub blocks: u32,
    pub(crate) block_threads: u32,
    pub(crate) warmup_launches: u32,
    pub(crate) repeats: u32,
    pub budget_cycles: u64,
    pub chains: Vec<u32>,
    pub accumulators: Vec<u32>,
    /// Sink-isolation modes measured besides the documented probe (mode A).
    pub sink_modes: Vec<Sink>,
    /// The accumulator counts the sink modes are measured at.
    pub sink_accumulators: Vec<u32>,
    /// Contexts measured besides the base (docs/study.md, "Contexts"), each at
    /// `context_chains` x `context_accumulators`, sink mode A.
    pub contexts: Vec<Context>,
    pub context_chains: Vec<u32>,
    pub context_accumulators: Vec<u32>,
    /// The real accumulations measured beside the probe (docs/study.md, "Real
    /// reductions"), each at `reduction_accumulators` in each of `reduction_contexts`.
    pub reductions: Vec<Workload>,
    pub reduction_accumulators: Vec<u32>,
    /// The contexts the real accumulations run in: the base first, then other warps.
    pub reduction_contexts: Vec<Context>,
    /// Serial (one variant at a time) or wave (all at once, one SM each).
    pub mode: Mode,
}

impl ProbeSettings {
    /// Every variant: the documented matrix, then each sink mode's, then each context's,
    /// then the real accumulations ([`ProbeSettings::reduction_variants`]).
    pub fn variants(&self) -> Vec<Variant> {
        let mut all = self.main_variants();
        for &m in &self.sink_modes {
            all.extend(
                matrix(&self.chains, &self.sink_accumulators)
                    .into_iter()
                    .map(|v| v.with_sink(m)),
            );
        }
        for &c in &self.contexts {
            all.extend(
                matrix(&self.context_chains, &self.context_accumulators)
                    .into_iter()
                    .map(|v| v.with_context(c)),
            );
        }
        all.extend(self.reduction_variants());
        all
    }

    /// The real accumulations: each kernel, in each of its contexts, at each K.
    pub fn reduction_variants(&self) -> Vec<Variant> {
        let mut all = Vec::new();
        for &w in &self.reductions {
            for &c in &self.reduction_contexts {
                for &k in &self.reduction_accumulators {
                    all.push(Variant::reduction(w, k).with_context(c));
                }
            }
        }
        all
    }

    /// The documented matrix (sink mode A): what the invariants are about.
    pub fn main_variants(&self) -> Vec<Variant> {
        matrix(&self.chains, &self.accumulators)
    }

    /// The threads of each block of `v`: its context's, else the profile's.
    pub fn block_threads_of(&self, v: &Variant) -> u32 {
        v.context.block_threads(self.block_threads)
    }

    /// The warps a launch of `v` runs.
    pub fn warps_of(&self, v: &Variant) -> u32 {
        self.blocks * self.block_threads_of(v) / 32
    }

    /// Launches per variant: the warm-up ones, then the counted repeats.
    pub fn launches(&self) -> u32 {
        self.warmup_launches + self.repeats
    }
}

/// The launch settings a run was measured with, recorded in its results file (schema 2) so
/// that every verdict reads them from the results, never from whichever profile judges them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    pub(crate) blocks: u32,
    pub(crate) block_threads: u32,
    pub(crate) warmup_launches: u32,
    pub repeats: u32,
    pub budget_cycles: u64,
}

impl RunSettings {
    /// The threads of each block of `v`: its context's, else the run's.
    pub(crate) fn block_threads_of(&self, v: &Variant) -> u32 {
        v.context.block_threads(self.block_threads)
    }

    /// The warps a launch of `v` runs.
    pub(crate) fn warps_of(&self, v: &Variant) -> u32 {
        self.blocks * self.block_threads_of(v) / 32
    }

    /// Each setting that differs from `asked`, as `name: asked X, measured Y`.
    pub(crate) fn differences(&self, asked: &RunSettings) -> Vec<String> {
        let mut out = Vec::new();
        let mut cmp = |name: &str, a: u64, m: u64| {
            if a != m {
                out.push(format!("{name}: asked {a}, measured {m}"));
            }
        };
        cmp("blocks", asked.blocks.into(), self.blocks.into());
        cmp(
            "block_threads",
            asked.block_threads.into(),
            self.block_threads.into(),
        );
        cmp(
            "warmup_launches",
            asked.warmup_launches.into(),
            self.warmup_launches.into(),
        );
        cmp("repeats", asked.repeats.into(), self.repeats.into());
        cmp("budget_cycles", asked.budget_cycles, self.budget_cycles);
        out
    }
}

impl ProbeSettings {
    /// The launch settings to record with results measured under these settings.
    pub fn run_settings(&self) -> RunSettings {
        RunSettings {
            blocks: self.blocks,
            block_threads: self.block_threads,
            warmup_launches: self.warmup_launches,
            repeats: self.repeats,
            budget_cycles: self.budget_cycles,
        }
    }
}
