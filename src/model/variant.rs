//! Stage 2 of the pipeline: the variant matrix.
//!
//! A variant is one (chain length N, accumulator count K) pair of the study, with its
//! effective accumulator count E = min(K, N): a chain of 7 FFMAs cannot feed 8 partials.
//! Names follow the study: `chainN_accK_effectiveE`.

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
    pub const ALL: [Sink; 4] = [Sink::A, Sink::B, Sink::C, Sink::D];

    pub fn letter(&self) -> char {
        match self {
            Sink::A => 'A',
            Sink::B => 'B',
            Sink::C => 'C',
            Sink::D => 'D',
        }
    }

    pub fn from_letter(c: char) -> Option<Sink> {
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
    pub sink: Sink,
}

impl Variant {
    /// A variant of the documented probe (sink mode A).
    pub fn new(chain: u32, accumulators: u32) -> Self {
        Variant {
            chain,
            accumulators,
            sink: Sink::A,
        }
    }

    pub fn with_sink(self, sink: Sink) -> Self {
        Variant { sink, ..self }
    }

    /// Output elements per thread: one, or one per partial when every partial is stored.
    pub fn outputs_per_thread(&self) -> u32 {
        if self.sink == Sink::C {
            self.effective()
        } else {
            1
        }
    }

    /// E = min(K, N): the partials the chain can actually feed.
    pub fn effective(&self) -> u32 {
        self.accumulators.min(self.chain)
    }

    /// The study's name, also the kernel's symbol: `chain7_acc8_effective7`.
    pub fn name(&self) -> String {
        self.to_string()
    }

    /// Parses a study name back; `None` unless it is exactly `chainN_accK_effectiveE`
    /// with E = min(K, N).
    pub fn parse(name: &str) -> Option<Variant> {
        let rest = name.strip_prefix("chain")?;
        let (n, rest) = rest.split_once("_acc")?;
        let (k, rest) = rest.split_once("_effective")?;
        let (e, sink) = match rest.split_once("_sink") {
            None => (rest, Sink::A),
            Some((e, m)) if m.len() == 1 && m != "A" => (e, Sink::from_letter(m.chars().next()?)?),
            Some(_) => return None,
        };
        let v = Variant::new(number(n)?, number(k)?).with_sink(sink);
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
        Ok(())
    }
}

/// Every (N, K) pair, chains outer, accumulator counts inner, in the order given.
pub fn matrix(chains: &[u32], accumulators: &[u32]) -> Vec<Variant> {
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
    fn the_default_matrix_has_24_variants_in_study_order() {
        let m = matrix(&[7, 13, 29], &[1, 2, 3, 4, 5, 7, 8, 16]);
        assert_eq!(m.len(), 24);
        assert_eq!(m[0], Variant::new(7, 1));
        assert_eq!(m[8], Variant::new(13, 1));
        assert_eq!(m[23].effective(), 16);
    }
}
