//! Stage 2 of the pipeline: the variant matrix.
//!
//! A variant is one (chain length N, accumulator count K) pair of the study, with its
//! effective accumulator count E = min(K, N): a chain of 7 FFMAs cannot feed 8 partials.
//! Names follow the study: `chainN_accK_effectiveE`.

use std::fmt;

/// One cell of the probe matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Variant {
    /// N: FFMAs issued per loop iteration, in one dependent chain when K = 1.
    pub chain: u32,
    /// K: the accumulator count asked for.
    pub accumulators: u32,
}

impl Variant {
    pub fn new(chain: u32, accumulators: u32) -> Self {
        Variant {
            chain,
            accumulators,
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
        let (k, e) = rest.split_once("_effective")?;
        let v = Variant::new(number(n)?, number(k)?);
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
        )
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
