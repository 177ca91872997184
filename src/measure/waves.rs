//! How a set's launches are grouped into waves, and how many variants a wave may hold.

use super::memory::Regions;
use crate::model::variant::Variant;

/// How the launches of a set are grouped into waves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Schedule {
    /// Each wave launches every variant (wave mode).
    Together,
    /// Each wave is one launch of one variant; all of a variant's launches, then the
    /// next variant's (serial mode).
    OneByOne,
}

/// One wave of a set: the slots it launches, the launch it is for each of them, and the
/// bytes of the set's layout it poisons and reads back (`lo..hi`, from the first slot's
/// outputs to the end of the last slot's regions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wave {
    pub(super) slots: std::ops::Range<usize>,
    pub(super) launch: usize,
    pub(super) lo: usize,
    pub(super) hi: usize,
}

impl Wave {
    /// The waves of `launches` launches of each slot (its regions in `placed`).
    pub(super) fn plan(placed: &[Regions], launches: usize, schedule: Schedule) -> Vec<Wave> {
        if placed.is_empty() {
            return Vec::new();
        }
        let wave = |slots: std::ops::Range<usize>, launch: usize| Wave {
            lo: placed[slots.start].out,
            hi: placed[slots.end - 1].end(),
            slots,
            launch,
        };
        match schedule {
            Schedule::Together => (0..launches).map(|l| wave(0..placed.len(), l)).collect(),
            Schedule::OneByOne => (0..placed.len())
                .flat_map(|i| (0..launches).map(move |l| wave(i..i + 1, l)))
                .collect(),
        }
    }

    pub(super) fn bytes(&self) -> usize {
        self.hi - self.lo
    }

    pub(super) fn describe(&self, vs: &[Variant]) -> String {
        match vs {
            [v] => format!("running {v} (launch {})", self.launch),
            _ => format!(
                "running a wave of {} variants (launch {})",
                vs.len(),
                self.launch
            ),
        }
    }

    /// The page-locked read-back `waves` need: one wave's, since each wave's read-back is
    /// checked before the next one lands (see `LoadedMatrix::run`), so that it does not
    /// grow with the repeats.
    pub(super) fn read_back_bytes(waves: &[Wave]) -> usize {
        waves.iter().map(Wave::bytes).max().unwrap_or(0)
    }
}

/// The most kernels a GPU runs at once: the CUDA C++ Programming Guide's "maximum number of
/// resident grids per device" for compute capability 7.0 and later. In a wave of more, a
/// kernel waits for another to end and starts on the SM it left (docs/h200.md, "One block
/// per SM").
pub const MAX_CONCURRENT_KERNELS: usize = 128;

/// How `n` variants of `blocks` blocks each are split into waves on a GPU of `sms` SMs: as
/// few waves as hold no more blocks than there are SMs and no more kernels than the GPU runs
/// at once ([`MAX_CONCURRENT_KERNELS`]), so that every block has an SM to itself from the
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::memory::tests::settings;

    #[test]
    fn waves_launch_each_slot_once_per_launch_and_read_back_one_wave_at_a_time() {
        let s = settings();
        let vs = [
            Variant::new(7, 2),
            Variant::new(13, 4).with_sink(crate::model::variant::Sink::C),
            Variant::new(29, 1),
        ];
        let (placed, bytes) = Regions::lay_out(&vs, &s);
        // Wave mode: every slot in each wave, the wave spanning the whole layout.
        let together = Wave::plan(&placed, 3, Schedule::Together);
        assert_eq!(
            together.iter().map(|w| w.launch).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(together
            .iter()
            .all(|w| w.slots == (0..3) && (w.lo, w.hi) == (0, bytes)));
        // Serial mode: a slot's launches one after another, then the next slot's, each
        // wave spanning that slot's regions alone.
        let one_by_one = Wave::plan(&placed, 2, Schedule::OneByOne);
        assert_eq!(
            one_by_one
                .iter()
                .map(|w| (w.slots.clone(), w.launch))
                .collect::<Vec<_>>(),
            [
                (0..1, 0),
                (0..1, 1),
                (1..2, 0),
                (1..2, 1),
                (2..3, 0),
                (2..3, 1)
            ]
        );
        for w in &one_by_one {
            let r = placed[w.slots.start];
            assert_eq!((w.lo, w.hi), (r.out, r.end()));
        }
        // The page-locked read-back holds one wave, however many launches there are.
        for schedule in [Schedule::Together, Schedule::OneByOne] {
            let back = |launches| Wave::read_back_bytes(&Wave::plan(&placed, launches, schedule));
            assert_eq!(back(1), back(1100), "{schedule:?}");
        }
        assert_eq!(Wave::read_back_bytes(&together), bytes);
        assert_eq!(
            Wave::read_back_bytes(&one_by_one),
            placed.iter().map(|r| r.end() - r.out).max().unwrap()
        );
        assert!(Wave::plan(&[], 3, Schedule::Together).is_empty());
        // A serial wave's error names its variant; a wave mode one counts them.
        assert_eq!(
            one_by_one[3].describe(&vs[1..2]),
            format!("running {} (launch 1)", vs[1])
        );
        assert_eq!(
            together[2].describe(&vs),
            "running a wave of 3 variants (launch 2)"
        );
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
}
