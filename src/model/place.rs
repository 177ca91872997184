//! Where an accumulation was measured, as the policy gate asks about it: a chain of the
//! probe in one sink mode and context, or one real accumulation in one context. A place
//! names its policy context (`chain13`, `chain13_sinkB`, `chain13_w16`, `dot`, `dot_w16`)
//! and holds the variants a pick there is judged among.

use crate::model::context::Context;
use crate::model::variant::{Sink, Variant};
use crate::model::workload::{Workload, REDUCTION_ITEMS};

/// One place a policy is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    /// The kernel: the probe, or a real accumulation.
    pub workload: Workload,
    /// N: the probe's chain, or [`REDUCTION_ITEMS`] for a real accumulation.
    pub chain: u32,
    /// The sink mode; always A for a real accumulation.
    pub sink: Sink,
    pub context: Context,
}

impl Place {
    /// The probe at `chain` in sink mode `sink` and context `context`.
    pub fn probe(chain: u32, sink: Sink, context: Context) -> Place {
        Place {
            workload: Workload::Probe,
            chain,
            sink,
            context,
        }
    }

    /// The real accumulation `kernel` in `context`.
    pub fn kernel(kernel: Workload, context: Context) -> Place {
        Place {
            workload: kernel,
            chain: REDUCTION_ITEMS,
            sink: Sink::A,
            context,
        }
    }

    /// The policy context's name: `chain13`, `chain13_sinkB`, `chain13_w16` for the probe;
    /// the kernel's name and the context's suffix for a real accumulation (`dot`,
    /// `dot_w16`). It is the `policy::<name>::` cases' last part.
    pub fn name(&self) -> String {
        let mut name = if self.workload.is_probe() {
            format!("chain{}", self.chain)
        } else {
            self.workload.name().to_string()
        };
        if self.sink != Sink::A {
            name.push_str(&format!("_sink{}", self.sink.letter()));
        }
        name.push_str(&self.context.suffix());
        name
    }

    /// How a message names it: `chain 13`, `chain 13, sink D`, `chain 13 in context w16`,
    /// `kernel dot`, `kernel dot in context w16`.
    pub fn describe(&self) -> String {
        let mut s = if self.workload.is_probe() {
            format!("chain {}", self.chain)
        } else {
            format!("kernel {}", self.workload)
        };
        if self.sink != Sink::A {
            s.push_str(&format!(", sink {}", self.sink.letter()));
        }
        if !self.context.is_base() {
            s.push_str(&format!(" in context {}", self.context));
        }
        s
    }

    /// Whether variant `v` was measured here: same kernel, chain, sink mode and context.
    /// A real accumulation handles as many elements a thread as some probe chain may be
    /// long, so the kernel is part of the place: a kernel is never a probe variant's rival.
    pub fn holds(&self, v: &Variant) -> bool {
        v.workload == self.workload
            && v.chain == self.chain
            && v.sink == self.sink
            && v.context == self.context
    }

    /// The variant of accumulator count `k` here.
    pub fn variant(&self, k: u32) -> Variant {
        let v = if self.workload.is_probe() {
            Variant::new(self.chain, k).with_sink(self.sink)
        } else {
            Variant::reduction(self.workload, k)
        };
        v.with_context(self.context)
    }

    /// The profile key whose accumulator counts are measured here.
    pub fn accumulators_key(&self) -> &'static str {
        if !self.workload.is_probe() {
            "reductions.accumulators"
        } else if !self.context.is_base() {
            "contexts.accumulators"
        } else if self.sink != Sink::A {
            "sink_isolation.accumulators"
        } else {
            "probe.accumulators"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_tell_the_probe_from_a_kernel_and_name_only_what_differs() {
        let w16 = Context::parse_suffix("_w16").unwrap();
        assert_eq!(Place::probe(13, Sink::A, Context::BASE).name(), "chain13");
        assert_eq!(
            Place::probe(13, Sink::B, Context::BASE).name(),
            "chain13_sinkB"
        );
        assert_eq!(Place::probe(13, Sink::A, w16).name(), "chain13_w16");
        assert_eq!(Place::kernel(Workload::Dot, Context::BASE).name(), "dot");
        assert_eq!(
            Place::kernel(Workload::BlockReduce, w16).name(),
            "blockreduce_w16"
        );
        assert_eq!(
            Place::kernel(Workload::Gemv, w16).describe(),
            "kernel gemv in context w16"
        );
        assert_eq!(
            Place::probe(7, Sink::D, Context::BASE).describe(),
            "chain 7, sink D"
        );
    }

    #[test]
    fn a_kernel_place_holds_its_kernel_only_even_at_the_same_chain() {
        let dot = Place::kernel(Workload::Dot, Context::BASE);
        let probe16 = Place::probe(REDUCTION_ITEMS, Sink::A, Context::BASE);
        assert!(dot.holds(&dot.variant(4)));
        assert!(!dot.holds(&probe16.variant(4)));
        assert!(!probe16.holds(&dot.variant(4)));
        assert!(!Place::kernel(Workload::Gemv, Context::BASE).holds(&dot.variant(4)));
        assert_eq!(dot.accumulators_key(), "reductions.accumulators");
    }
}
