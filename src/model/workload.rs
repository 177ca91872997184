//! What a variant's kernel computes: the probe (a synthetic chain of N FFMAs an iteration)
//! or one of the real accumulations of `kernels/reductions.cu` (docs/study.md, "Real
//! reductions"). A real accumulation handles [`REDUCTION_ITEMS`] elements a thread an
//! iteration, element j feeding partial j % E, so as a variant its chain length is
//! [`REDUCTION_ITEMS`]: the dependent accumulations an iteration when K = 1.

use std::fmt;

/// Elements a thread handles in one iteration of a real accumulation
/// (`ACCPROBE_REDUCTION_ITEMS` in `kernels/reductions.cu`).
pub const REDUCTION_ITEMS: u32 = 16;

/// The butterfly steps of a warp's shuffle tree: log2 of its 32 lanes.
pub const SHUFFLE_STEPS: u32 = 5;

/// A variant's kernel.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// The study's probe kernel (`kernels/probe.cu`).
    #[default]
    Probe,
    /// A dot product: one vector read from shared memory, the other a thread's own (FFMA).
    Dot,
    /// A matrix-vector product's row reduction: the row read from global memory through
    /// L2 (LDG.CG), times the vector's elements (FFMA).
    Gemv,
    /// A softmax denominator: exp(x - max) summed (MUFU.EX2, FADD).
    Softmax,
    /// A layer norm's mean and variance in one pass: x and x * x summed (FADD, FFMA).
    Layernorm,
    /// A block reduction's per-thread stage, as CUB's BlockReduce runs it with several
    /// items a thread: the items into E partials, the partials combined, a warp-shuffle
    /// tree (SHFL.BFLY, FADD). Written `blockreduce`, as in its variants' names.
    #[serde(rename = "blockreduce")]
    BlockReduce,
}

impl Workload {
    /// The real accumulations, in the order a profile lists them by default.
    pub const REDUCTIONS: [Workload; 5] = [
        Workload::Dot,
        Workload::Gemv,
        Workload::Softmax,
        Workload::Layernorm,
        Workload::BlockReduce,
    ];

    /// The name in variant and case names and in a profile: `dot`, `blockreduce`.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Probe => "probe",
            Workload::Dot => "dot",
            Workload::Gemv => "gemv",
            Workload::Softmax => "softmax",
            Workload::Layernorm => "layernorm",
            Workload::BlockReduce => "blockreduce",
        }
    }

    /// The real accumulation named `name`; `None` for anything else (the probe too).
    pub fn reduction(name: &str) -> Option<Workload> {
        Workload::REDUCTIONS.into_iter().find(|w| w.name() == name)
    }

    pub fn is_probe(self) -> bool {
        self == Workload::Probe
    }

    /// [`Workload::is_probe`] by reference, for serde's `skip_serializing_if`.
    pub fn is_probe_ref(&self) -> bool {
        self.is_probe()
    }

    /// The kernel's selector in `kernels/reductions.cu` (`ACCPROBE_DOT` without its prefix).
    pub fn kernel_macro(self) -> &'static str {
        match self {
            Workload::Probe => "PROBE",
            Workload::Dot => "DOT",
            Workload::Gemv => "GEMV",
            Workload::Softmax => "SOFTMAX",
            Workload::Layernorm => "LAYERNORM",
            Workload::BlockReduce => "BLOCKREDUCE",
        }
    }

    /// What it computes, in a sentence for reports and messages.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Probe => "the probe: a chain of N FFMAs an iteration",
            Workload::Dot => "dot product, one vector from shared memory (LDS, FFMA)",
            Workload::Gemv => "matrix-vector row reduction from global memory (LDG.CG, FFMA)",
            Workload::Softmax => "softmax denominator, exp(x - max) summed (MUFU.EX2, FADD)",
            Workload::Layernorm => "layer-norm mean and variance in one pass (FADD, FFMA)",
            Workload::BlockReduce => {
                "block reduction's per-thread stage and warp-shuffle tree (FADD, SHFL.BFLY)"
            }
        }
    }

    /// The SASS opcodes of the loop-carried accumulations, one chain set each, in the
    /// order the loop's shape is reported: a real accumulation over E partials carries E
    /// chains of each. Empty for the probe (its FFMA chains are read otherwise) and for
    /// the block reduction, whose partials start from zero every iteration.
    pub fn carried_opcodes(self) -> &'static [&'static str] {
        match self {
            Workload::Dot | Workload::Gemv => &["FFMA"],
            Workload::Softmax => &["FADD"],
            Workload::Layernorm => &["FADD", "FFMA"],
            Workload::Probe | Workload::BlockReduce => &[],
        }
    }

    /// The accumulations each element feeds: 2 for the layer norm (the sum and the sum of
    /// squares), 1 for every other kernel and for the probe.
    pub fn accumulations(self) -> u32 {
        match self {
            Workload::Layernorm => 2,
            _ => 1,
        }
    }

    /// Where the elements the accumulation reads come from, as the policy is told.
    pub fn loads(self) -> Loads {
        match self {
            Workload::Dot => Loads::Shared,
            Workload::Gemv => Loads::Global,
            _ => Loads::None,
        }
    }

    /// Bytes one element reads from global memory (the GEMV's row); 0 where the inputs are
    /// in shared memory or registers.
    pub fn global_bytes_per_element(self) -> u32 {
        match self {
            Workload::Gemv => 4,
            _ => 0,
        }
    }
}

/// Where an accumulation's elements are loaded from, for the policy protocol's `loads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Loads {
    /// No load in the loop: the elements are computed or held in registers (the probe).
    #[default]
    None,
    /// From shared memory (LDS).
    Shared,
    /// From global memory (LDG).
    Global,
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_the_probe_is_not_a_reduction() {
        for w in Workload::REDUCTIONS {
            assert_eq!(Workload::reduction(w.name()), Some(w));
            assert!(!w.is_probe());
        }
        assert_eq!(Workload::reduction("probe"), None);
        assert_eq!(Workload::reduction("Dot"), None);
        assert!(Workload::default().is_probe());
        assert_eq!(Workload::Layernorm.carried_opcodes(), ["FADD", "FFMA"]);
        assert_eq!(Workload::Layernorm.accumulations(), 2);
        assert_eq!(Workload::Probe.accumulations(), 1);
        assert_eq!(Workload::Gemv.loads(), Loads::Global);
        assert_eq!(Workload::Dot.loads(), Loads::Shared);
        assert_eq!(Workload::Probe.loads(), Loads::None);
    }

    #[test]
    fn a_results_file_spells_each_workload_as_its_variants_names_do() {
        for w in Workload::REDUCTIONS {
            let json = serde_json::to_string(&w).unwrap();
            assert_eq!(json, format!("\"{}\"", w.name()));
            assert_eq!(serde_json::from_str::<Workload>(&json).unwrap(), w);
        }
    }
}
