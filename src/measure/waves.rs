//! How a run's launches are grouped: the groups of variants that run at once, and how many
//! variants a wave may hold.

use crate::model::variant::Variant;
use crate::model::workload::Loads;

/// A group of a run's variants that run at once, each its launches `first..first +
/// launches` one after another (a wave set in wave mode, one variant in serial mode; a
/// set's launches may be cut into several groups, `memory::Regions::plan`), and where they
/// keep their buffers: launch `l` at `lo + at(l)`, its variants' regions one after another.
/// A group that is not `fresh` reuses the buffer of a group before it, and is poisoned
/// again before its first launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Group {
    pub(super) slots: std::ops::Range<usize>,
    pub(super) first: usize,
    pub(super) launches: usize,
    pub(super) lo: usize,
    pub(super) per_launch: usize,
    pub(super) fresh: bool,
}

impl Group {
    /// How far launch `launch`'s regions lie past `lo`.
    pub(super) fn at(&self, launch: usize) -> usize {
        (launch - self.first) * self.per_launch
    }

    /// Its launches.
    pub(super) fn range(&self) -> std::ops::Range<usize> {
        self.first..self.first + self.launches
    }

    /// The bytes of every launch of the group.
    pub(super) fn bytes(&self) -> usize {
        self.per_launch * self.launches
    }

    /// What the GPU was doing at `launch` of this group (its variants `vs`), for an error
    /// it reports: the variant when the group is one, so that a kernel that faults is named.
    pub(super) fn describe(&self, vs: &[Variant], launch: usize) -> String {
        match vs {
            [v] => format!("running {v} (launch {launch})"),
            _ => format!("running a wave of {} variants (launch {launch})", vs.len()),
        }
    }

    /// The page-locked read-back `groups` need: the largest group's, since each group's is
    /// checked before the next one's is queued (see `pacing::pace`).
    pub(super) fn read_back_bytes(groups: &[Group]) -> usize {
        groups.iter().map(Group::bytes).max().unwrap_or(0)
    }
}

/// The most kernels a GPU runs at once: the CUDA C++ Programming Guide's "maximum number of
/// resident grids per device" for compute capability 7.0 and later. In a wave of more, a
/// kernel waits for another to end and starts on the SM it left (docs/h200.md, "One block
/// per SM").
pub(crate) const MAX_CONCURRENT_KERNELS: usize = 128;

/// How `n` variants of `blocks` blocks each are split into waves on a GPU of `sms` SMs: as
/// few waves as hold no more blocks than there are SMs and no more kernels than the GPU runs
/// at once (`MAX_CONCURRENT_KERNELS`), so that every block has an SM to itself from the
/// wave's start (with more, blocks would share SMs or wait, and measure each other). The
/// variants are dealt evenly, in order: 129 variants of one block make waves of 65 and 64,
/// not 128 and 1. A variant with more blocks than the GPU has SMs runs alone.
pub fn wave_sets(n: usize, blocks: u32, sms: u32) -> Vec<std::ops::Range<usize>> {
    let per = ((sms / blocks.max(1)).max(1) as usize).min(MAX_CONCURRENT_KERNELS);
    let waves = n.div_ceil(per);
    let mut sets = Vec::with_capacity(waves);
    let mut start = 0;
    for w in 0..waves {
        // The first `n % waves` waves take one variant more than the others.
        let len = n / waves + usize::from(w < n % waves);
        sets.push(start..start + len);
        start += len;
    }
    sets
}

/// Whether wave mode measures `v` alone, after the waves: a kernel that reads global
/// memory shares the L2 and the memory with every variant of its wave, and its rate moves
/// with what they do; measured alone it is steady (docs/study.md, "Real reductions beside
/// the probe", gives the figures).
pub fn measured_alone(v: &Variant) -> bool {
    v.workload.loads() == Loads::Global
}

/// The order wave mode measures `vs` in, as indices into it: the variants that share waves
/// first, then those [`measured_alone`], each part in the order of `vs`.
pub fn wave_order(vs: &[Variant]) -> Vec<usize> {
    let (mut order, alone): (Vec<usize>, Vec<usize>) =
        (0..vs.len()).partition(|&i| !measured_alone(&vs[i]));
    order.extend(alone);
    order
}

/// `measured`, given in `order` ([`wave_order`]), back in the order of the variants.
pub(crate) fn in_given_order<T>(order: &[usize], measured: Vec<T>) -> Vec<T> {
    let mut out: Vec<(usize, T)> = order.iter().copied().zip(measured).collect();
    out.sort_by_key(|&(i, _)| i);
    out.into_iter().map(|(_, r)| r).collect()
}

/// The sets wave mode measures `vs` in, `vs` in [`wave_order`]: [`wave_sets`] of the
/// variants before the first one [`measured_alone`], then one set for each variant from
/// there on.
pub fn wave_plan(vs: &[Variant], blocks: u32, sms: u32) -> Vec<std::ops::Range<usize>> {
    let shared = vs.iter().take_while(|v| !measured_alone(v)).count();
    let mut sets = wave_sets(shared, blocks, sms);
    sets.extend((shared..vs.len()).map(|i| i..i + 1));
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_names_its_variant_alone_and_counts_a_wave() {
        let g = Group {
            slots: 0..3,
            first: 4,
            launches: 4,
            lo: 512,
            per_launch: 1024,
            fresh: true,
        };
        assert_eq!(
            (g.at(4), g.at(7), g.bytes(), g.range()),
            (0, 3072, 4096, 4..8)
        );
        let vs = [Variant::new(7, 2), Variant::new(13, 4)];
        assert_eq!(
            g.describe(&vs[..1], 2),
            format!("running {} (launch 2)", vs[0])
        );
        assert_eq!(
            g.describe(&vs, 1),
            "running a wave of 2 variants (launch 1)"
        );
        let small = Group {
            per_launch: 256,
            ..g.clone()
        };
        assert_eq!(Group::read_back_bytes(&[small, g]), 4096);
        assert_eq!(Group::read_back_bytes(&[]), 0);
    }

    #[test]
    fn a_wave_never_holds_more_blocks_than_the_gpu_has_sms() {
        // 69 variants of one block on 132 SMs: one wave.
        assert_eq!(wave_sets(69, 1, 132), vec![0..69]);
        // Two blocks each: 66 variants fill the SMs; 69 take two waves, dealt evenly.
        assert_eq!(wave_sets(69, 2, 132), vec![0..35, 35..69]);
        assert_eq!(wave_sets(66, 2, 132), vec![0..66]);
        // No wave holds more kernels than the GPU runs at once, even where SMs are left.
        assert_eq!(wave_sets(128, 1, 132), vec![0..128]);
        assert_eq!(wave_sets(129, 1, 132), vec![0..65, 65..129]);
        assert_eq!(wave_sets(129, 1, 148), vec![0..65, 65..129]);
        assert_eq!(wave_sets(300, 1, 1000), vec![0..100, 100..200, 200..300]);
        assert!(wave_sets(1000, 1, 132)
            .iter()
            .all(|w| w.len() <= MAX_CONCURRENT_KERNELS));
        assert_eq!(wave_sets(133, 1, 132), vec![0..67, 67..133]);
        // More blocks than SMs: each variant alone.
        assert_eq!(wave_sets(3, 200, 132), vec![0..1, 1..2, 2..3]);
        assert!(wave_sets(0, 1, 132).is_empty());
        // Every variant in exactly one wave, in order.
        for (n, b) in [(69, 3), (24, 7), (1, 1), (129, 1), (1000, 1)] {
            let flat: Vec<usize> = wave_sets(n, b, 132).into_iter().flatten().collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_kernel_reading_global_memory_is_measured_alone_after_the_waves() {
        use crate::model::workload::Workload;
        let gemv = |k| Variant::reduction(Workload::Gemv, k);
        let dot = |k| Variant::reduction(Workload::Dot, k);
        let vs = [
            Variant::new(7, 1),
            gemv(1),
            dot(1),
            gemv(2),
            Variant::new(7, 2),
        ];
        assert!(measured_alone(&gemv(4)) && !measured_alone(&dot(4)));
        assert!(!measured_alone(&Variant::new(13, 2)));
        let order = wave_order(&vs);
        assert_eq!(order, [0, 2, 4, 1, 3]);
        let ordered: Vec<Variant> = order.iter().map(|&i| vs[i]).collect();
        // The three that share one wave, then each GEMV alone.
        assert_eq!(wave_plan(&ordered, 1, 132), vec![0..3, 3..4, 4..5]);
        // Unordered, every variant from the first GEMV on is alone: never one in a wave.
        assert_eq!(wave_plan(&vs, 1, 132), vec![0..1, 1..2, 2..3, 3..4, 4..5]);
        // Results come back in the variants' order.
        let back = in_given_order(&order, ordered.clone());
        assert_eq!(back, vs);
        // Without a GEMV the plan is the wave sets.
        let probe: Vec<Variant> = (1..=4).map(|k| Variant::new(7, k)).collect();
        assert_eq!(wave_plan(&probe, 1, 2), wave_sets(4, 1, 2));
        assert_eq!(wave_order(&probe), [0, 1, 2, 3]);
    }
}
