//! How a matrix is split into NVRTC programs: how many (`ACCPROBE_COMPILE_PARTS`, else by
//! the machine's cores) and which variants each holds.

use crate::error::Result;
use crate::model::variant::Variant;

/// Environment variable fixing how many NVRTC programs a matrix is compiled as (1 or more;
/// default [`default_parts`]).
pub use crate::config::PARTS_ENV;

/// How many programs to compile a matrix of `n` variants as, on this machine: one per four
/// cores, at most four, never more than there are variants. More threads do not make the
/// CUBINs come sooner (NVRTC's threads contend), and each program costs one more
/// disassembler start, too much CPU for a small machine.
pub fn default_parts(n: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    (cores / 4).clamp(1, 4).min(n.max(1))
}

/// [`default_parts`], unless [`PARTS_ENV`] says otherwise (empty is unset); a value that
/// is not a whole number of 1 or more is an error naming the variable.
pub fn parts_for(n: usize) -> Result<usize, crate::config::ConfigError> {
    Ok(match crate::config::compile_parts()? {
        Some(p) => p.min(n.max(1)),
        None => default_parts(n),
    })
}

/// `variants` dealt round-robin into `n` parts (so that each gets short and long chains).
pub(crate) fn deal(variants: &[Variant], n: usize) -> Vec<Vec<Variant>> {
    let n = n.clamp(1, variants.len().max(1));
    (0..n)
        .map(|i| variants.iter().skip(i).step_by(n).copied().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_deal_every_variant_once_and_never_make_an_empty_part() {
        let vs: Vec<Variant> = (1..=10).map(|k| Variant::new(7, k)).collect();
        for n in [1, 3, 4, 10, 50] {
            let ps = deal(&vs, n);
            assert_eq!(ps.len(), n.min(vs.len()));
            assert!(ps.iter().all(|p| !p.is_empty()));
            let mut all: Vec<Variant> = ps.concat();
            all.sort();
            assert_eq!(all, vs, "{n} parts");
        }
        assert_eq!(deal(&vs, 3)[0], vec![vs[0], vs[3], vs[6], vs[9]]);
        assert_eq!(deal(&[], 4), vec![Vec::<Variant>::new()]);
        assert!((1..=4).contains(&default_parts(69)));
        assert_eq!(default_parts(1), 1);
    }
}
