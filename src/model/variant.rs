//! Stage 2 of the pipeline: the variant matrix.
//!
//! A variant is one (chain length N, accumulator count K) pair of the study, with its
//! effective accumulator count E = min(K, N): a chain of 7 FFMAs cannot feed 8 partials.
//! Names follow the study: `chainN_accK_effectiveE`, then `_sinkM` for a sink mode other
//! than A, then the context's suffix (`Context::suffix`) for a context other than the base.
//! A real accumulation ([`Workload`]) is named by its kernel and K: `dot_acc4`, then the
//! context's suffix (`dot_acc4_w16`).

pub use crate::model::context::Context;
pub use crate::model::workload::{Workload, REDUCTION_ITEMS};
use std::fmt;

/// What happens to the partials after (or inside) the loop: the study's sink-isolation
/// experiment. `A` is the probe as documented.
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
pub enum Sink {
    /// Full sink: sum all partials after the loop, store the sum.
    #[default]
    A,
    /// One-accumulator sink: store one partial; the others stay live (stored only behind a
    /// run-time condition that never holds).
    B,
    /// Store every partial separately.
    C,
    /// Sum the partials inside every iteration (into a running total), store the total.
    D,
}

impl Sink {
    pub(crate) const ALL: [Sink; 4] = [Sink::A, Sink::B, Sink::C, Sink::D];

    pub fn letter(&self) -> char {
        match self {
            Sink::A => 'A',
            Sink::B => 'B',
            Sink::C => 'C',
            Sink::D => 'D',
        }
    }

    pub(crate) fn from_letter(c: char) -> Option<Sink> {
        Sink::ALL.into_iter().find(|s| s.letter() == c)
    }

    /// What the mode does, in the study's words.
    pub fn describe(&self) -> &'static str {
        match self {
            Sink::A => "full sink: all partials summed after the loop, the sum stored",
            Sink::B => "one-accumulator sink: one partial stored, the others kept live",
            Sink::C => "every partial stored separately",
            Sink::D => "partials summed inside every iteration",
        }
    }
}

/// One cell of the probe matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Variant {
    /// N: FFMAs issued per loop iteration, in one dependent chain when K = 1.
    pub chain: u32,
    /// K: the accumulator count asked for.
    pub accumulators: u32,
    /// The sink mode; `A` is the documented probe.
    pub(crate) sink: Sink,
    /// The context the accumulation runs in; the base context is the documented probe.
    pub(crate) context: Context,
    /// The kernel: the probe, or a real accumulation (whose chain is [`REDUCTION_ITEMS`]).
    pub workload: Workload,
}

impl Variant {
    /// A variant of the documented probe (sink mode A).
    pub fn new(chain: u32, accumulators: u32) -> Self {
        Variant {
            chain,
            accumulators,
            sink: Sink::A,
            context: Context::BASE,
            workload: Workload::Probe,
        }
    }

    /// Real accumulation `workload` split over `accumulators` partials, in the base
    /// context. `workload` must not be the probe.
    pub fn reduction(workload: Workload, accumulators: u32) -> Self {
        debug_assert!(!workload.is_probe());
        Variant {
            workload,
            ..Variant::new(REDUCTION_ITEMS, accumulators)
        }
    }

    pub(crate) fn with_sink(self, sink: Sink) -> Self {
        Variant { sink, ..self }
    }

    pub fn with_context(self, context: Context) -> Self {
        Variant { context, ..self }
    }

    /// The documented probe's context and sink: what the study's invariants judge.
    pub fn is_base(&self) -> bool {
        self.context.is_base()
    }

    /// Output elements per thread: one, or one per partial when every partial is stored.
    pub(crate) fn outputs_per_thread(&self) -> u32 {
        if self.sink == Sink::C {
            self.effective()
        } else {
            1
        }
    }

    /// E = min(K, N): the partials the chain can actually feed.
    pub(crate) fn effective(&self) -> u32 {
        self.accumulators.min(self.chain)
    }

    /// The study's name, also the kernel's symbol: `chain7_acc8_effective7`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Parses a name back; `None` unless it is exactly what [`Variant::name`] writes for
    /// some variant (E = min(K, N), no `_sinkA`, the context's parts in order).
    pub fn parse(name: &str) -> Option<Variant> {
        if let Some((kernel, rest)) = name.split_once("_acc") {
            if let Some(w) = Workload::reduction(kernel) {
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                let (k, rest) = rest.split_at(digits);
                if k.starts_with('0') {
                    return None;
                }
                let k = number(k)?;
                (k <= REDUCTION_ITEMS).then_some(())?;
                return Some(Variant::reduction(w, k).with_context(Context::parse_suffix(rest)?));
            }
        }
        let rest = name.strip_prefix("chain")?;
        let (n, rest) = rest.split_once("_acc")?;
        let (k, rest) = rest.split_once("_effective")?;
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (e, rest) = rest.split_at(digits);
        let (sink, rest) = match rest.strip_prefix("_sink") {
            None => (Sink::A, rest),
            Some(m) => {
                let letter = m.chars().next()?;
                match Sink::from_letter(letter) {
                    Some(s) if s != Sink::A => (s, &m[1..]),
                    _ => return None,
                }
            }
        };
        let context = Context::parse_suffix(rest)?;
        let v = Variant::new(number(n)?, number(k)?)
            .with_sink(sink)
            .with_context(context);
        (v.effective() == number(e)?).then_some(v)
    }
}

fn number(s: &str) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok().filter(|&n| n > 0)
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.workload.is_probe() {
            write!(f, "{}_acc{}", self.workload, self.accumulators)?;
            return f.write_str(&self.context.suffix());
        }
        write!(
            f,
            "chain{}_acc{}_effective{}",
            self.chain,
            self.accumulators,
            self.effective()
        )?;
        if self.sink != Sink::A {
            write!(f, "_sink{}", self.sink.letter())?;
        }
        f.write_str(&self.context.suffix())
    }
}

/// Every (N, K) pair, chains outer, accumulator counts inner, in the order given.
pub(crate) fn matrix(chains: &[u32], accumulators: &[u32]) -> Vec<Variant> {
    chains
        .iter()
        .flat_map(|&n| accumulators.iter().map(move |&k| Variant::new(n, k)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_study() {
        assert_eq!(Variant::new(7, 8).name(), "chain7_acc8_effective7");
        assert_eq!(Variant::new(29, 16).name(), "chain29_acc16_effective16");
        assert_eq!(Variant::new(13, 1).name(), "chain13_acc1_effective1");
    }

    #[test]
    fn parse_round_trips_and_rejects_inconsistent_names() {
        for v in matrix(&[7, 13, 29], &[1, 2, 3, 4, 5, 7, 8, 16]) {
            assert_eq!(Variant::parse(&v.name()), Some(v));
        }
        assert_eq!(Variant::parse("chain7_acc8_effective8"), None);
        assert_eq!(Variant::parse("chain0_acc1_effective0"), None);
        assert_eq!(Variant::parse("chain7_acc+1_effective1"), None);
        assert_eq!(Variant::parse("chain7_acc1"), None);
        let b = Variant::new(13, 4).with_sink(Sink::B);
        assert_eq!(b.name(), "chain13_acc4_effective4_sinkB");
        assert_eq!(Variant::parse("chain13_acc4_effective4_sinkB"), Some(b));
        assert_eq!(Variant::parse("chain13_acc4_effective4_sinkA"), None);
        assert_eq!(Variant::parse("chain13_acc4_effective4_sinkE"), None);
        assert_eq!(
            Variant::new(7, 8).with_sink(Sink::C).outputs_per_thread(),
            7
        );
    }

    #[test]
    fn a_context_other_than_the_base_reads_in_the_name() {
        let c = Context {
            warps: Some(16),
            side_chains: 4,
            live_values: 0,
        };
        let v = Variant::new(13, 2).with_context(c);
        assert_eq!(v.name(), "chain13_acc2_effective2_w16_s4");
        assert_eq!(Variant::parse(&v.name()), Some(v));
        let d = v.with_sink(Sink::D);
        assert_eq!(d.name(), "chain13_acc2_effective2_sinkD_w16_s4");
        assert_eq!(Variant::parse(&d.name()), Some(d));
        assert!(!v.is_base() && Variant::new(13, 2).with_sink(Sink::B).is_base());
        for bad in [
            "chain13_acc2_effective2_s4_w16",
            "chain13_acc2_effective2_w16_sinkD",
            "chain13_acc2_effective2_sink",
            "chain13_acc2_effective2_w",
        ] {
            assert_eq!(Variant::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_real_accumulation_is_named_by_its_kernel_and_k() {
        let v = Variant::reduction(Workload::Dot, 4);
        assert_eq!((v.chain, v.effective()), (REDUCTION_ITEMS, 4));
        assert_eq!(v.name(), "dot_acc4");
        let w = Variant::reduction(Workload::BlockReduce, 16).with_context(Context {
            warps: Some(32),
            ..Context::BASE
        });
        assert_eq!(w.name(), "blockreduce_acc16_w32");
        for v in [v, w] {
            assert_eq!(Variant::parse(&v.name()), Some(v));
        }
        for bad in [
            "dot_acc0",
            "dot_acc17",
            "dot_acc4_",
            "dot_acc04",
            "probe_acc4",
            "Dot_acc4",
            "dot_acc",
            "dot_acc4_sinkB",
        ] {
            assert_eq!(Variant::parse(bad), None, "{bad}");
        }
        assert_ne!(v, Variant::new(REDUCTION_ITEMS, 4));
    }

    #[test]
    fn the_default_matrix_has_24_variants_in_study_order() {
        let m = matrix(&[7, 13, 29], &[1, 2, 3, 4, 5, 7, 8, 16]);
        assert_eq!(m.len(), 24);
        assert_eq!(m[0], Variant::new(7, 1));
        assert_eq!(m[8], Variant::new(13, 1));
        assert_eq!(m[23].effective(), 16);
    }
}
