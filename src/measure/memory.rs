//! Where a run's buffers lie and the memory that holds them: one device allocation for
//! every launch of every variant of a run (outputs, progress, timers and SM ids, each region
//! aligned to 256 bytes), poisoned once before the first launch, and one group's page-locked
//! read-back; past [`RUN_BYTES`], two buffers its groups use in turns, poisoned again before
//! each reuse.

use super::cuda;
use super::waves::Group;
use crate::error::GpuError;
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{result, sys, CudaContext, CudaStream};
use std::sync::Arc;

/// The 32-bit word every buffer is filled with before the first launch: as an output, a NaN
/// no kernel computes; as progress or a timer (two of them), a count no launch reaches; as
/// an SM id, no SM's. A value still holding it was never written.
pub(super) const POISON_WORD: u32 = 0x7FBA_DBAD;
pub(super) const POISON_F32: u32 = POISON_WORD;
pub(super) const POISON_U64: u64 = (POISON_WORD as u64) << 32 | POISON_WORD as u64;

/// Where one launch of one variant keeps its buffers (byte offsets, from its set's launch
/// within a group's block until shifted; each region aligned to 256 bytes, the four
/// contiguous from `out`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Regions {
    pub(super) out: usize,
    pub(super) outputs: usize,
    pub(super) progress: usize,
    pub(super) elapsed: usize,
    pub(super) sm_ids: usize,
    pub(super) warps: usize,
}

/// The most device memory a run's buffers take before its groups share two buffers in
/// turns: 256 MiB, 65,000 times what the H200 profile's 129 variants of 11 launches take.
pub(super) const RUN_BYTES: usize = 256 << 20;

impl Regions {
    /// The regions of one launch of each of `vs` (one wave set, or one variant), one after
    /// another from 0, and the bytes they take together.
    pub(super) fn lay_out(vs: &[Variant], s: &ProbeSettings) -> (Vec<Regions>, usize) {
        let align = |x: usize| x.div_ceil(256) * 256;
        let mut at = 0;
        let regions = vs
            .iter()
            .map(|v| {
                let warps = s.warps_of(v) as usize;
                let outputs = (s.blocks * s.block_threads_of(v) * v.outputs_per_thread()) as usize;
                let r = Regions {
                    out: at,
                    outputs,
                    progress: align(at + 4 * outputs),
                    elapsed: align(at + 4 * outputs) + align(8 * warps),
                    sm_ids: align(at + 4 * outputs) + 2 * align(8 * warps),
                    warps,
                };
                at = r.end();
                r
            })
            .collect();
        (regions, at)
    }

    /// Where every launch of a run keeps its buffers: each slot's regions within its set's
    /// launch (from [`Regions::lay_out`]), the run's groups and the device bytes they take.
    /// A group is a set (`sets`, ranges of `vs`) and a run of its `launches`, each launch's
    /// buffers its own. While every group fits [`RUN_BYTES`] (`cap`) together, a group is a
    /// set with all its launches, each in memory of its own; past it, a set's launches are
    /// cut into groups of at most half of `cap`, which use two buffers in turns, so that
    /// each is read back and checked before a group two on poisons it again (`fresh`
    /// false).
    pub(super) fn plan(
        vs: &[Variant],
        sets: &[std::ops::Range<usize>],
        launches: usize,
        s: &ProbeSettings,
        cap: usize,
    ) -> (Vec<Regions>, Vec<Group>, usize) {
        let mut regions = Vec::with_capacity(vs.len());
        let mut per_set = Vec::with_capacity(sets.len());
        for set in sets {
            let (r, per_launch) = Regions::lay_out(&vs[set.clone()], s);
            regions.extend(r);
            per_set.push((set.clone(), per_launch));
        }
        let whole: usize = per_set.iter().map(|(_, b)| b * launches).sum();
        let mut groups = Vec::new();
        if whole <= cap {
            let mut lo = 0;
            for (slots, per_launch) in per_set {
                groups.push(Group {
                    slots,
                    first: 0,
                    launches,
                    lo,
                    per_launch,
                    fresh: true,
                });
                lo += per_launch * launches;
            }
            return (regions, groups, whole);
        }
        for (slots, per_launch) in per_set {
            let chunk = (cap / 2 / per_launch.max(1)).clamp(1, launches.max(1));
            let mut first = 0;
            while first < launches {
                let n = chunk.min(launches - first);
                groups.push(Group {
                    slots: slots.clone(),
                    first,
                    launches: n,
                    lo: 0,
                    per_launch,
                    fresh: true,
                });
                first += n;
            }
        }
        let buffer = groups.iter().map(Group::bytes).max().unwrap_or(0);
        for (k, g) in groups.iter_mut().enumerate() {
            g.lo = (k % 2) * buffer;
            g.fresh = k < 2;
        }
        let bytes = buffer * groups.len().min(2);
        (regions, groups, bytes)
    }

    /// These regions moved `by` bytes on (another launch's).
    pub(super) fn shifted(&self, by: usize) -> Regions {
        Regions {
            out: self.out + by,
            progress: self.progress + by,
            elapsed: self.elapsed + by,
            sm_ids: self.sm_ids + by,
            ..*self
        }
    }

    /// Where the last region ends (the regions are contiguous from `out`).
    pub(super) fn end(&self) -> usize {
        self.sm_ids + (4 * self.warps).div_ceil(256) * 256
    }

    /// One launch's outputs, progress, timers and SM ids out of a read-back that starts at
    /// byte `base` of the run's layout.
    pub(super) fn read(
        &self,
        back: &[u8],
        base: usize,
    ) -> (Vec<f32>, Vec<u64>, Vec<u64>, Vec<u32>) {
        let words = |at: usize, n: usize, size: usize| {
            back[at - base..at - base + n * size]
                .chunks_exact(size)
                .map(move |c| {
                    let mut b = [0u8; 8];
                    b[..size].copy_from_slice(c);
                    u64::from_ne_bytes(b)
                })
        };
        (
            words(self.out, self.outputs, 4)
                .map(|w| f32::from_bits(w as u32))
                .collect(),
            words(self.progress, self.warps, 8).collect(),
            words(self.elapsed, self.warps, 8).collect(),
            words(self.sm_ids, self.warps, 4)
                .map(|w| w as u32)
                .collect(),
        )
    }
}

/// Device memory for every launch of a run and one group's page-locked read-back, freed
/// once the context has finished everything queued on it (also when queuing stopped
/// half-way with an error).
pub(super) struct RunMemory {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) device: sys::CUdeviceptr,
    pub(super) bytes: usize,
    /// One group's read-back (the largest group's every launch).
    pub(super) back: *mut u8,
    pub(super) back_bytes: usize,
}

impl RunMemory {
    /// `bytes` on the device (a multiple of 4: every region is aligned) and a page-locked
    /// read-back of `back_bytes`.
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        bytes: usize,
        back_bytes: usize,
    ) -> Result<RunMemory, GpuError> {
        let mut m = RunMemory {
            ctx: ctx.clone(),
            device: 0,
            bytes,
            back: std::ptr::null_mut(),
            back_bytes,
        };
        // The raw allocations below act on the thread's current context.
        ctx.bind_to_thread().map_err(cuda("binding the context"))?;
        unsafe {
            m.device = result::malloc_sync(bytes.max(4)).map_err(cuda("allocating buffers"))?;
            m.back = result::malloc_host(back_bytes.max(1), 0)
                .map_err(cuda("allocating host buffers"))? as *mut u8;
        }
        Ok(m)
    }

    /// Fills `len` bytes from `lo` (both multiples of 4: every region is aligned) with
    /// [`POISON_WORD`], queued on `stream`.
    pub(super) fn poison(
        &self,
        stream: &CudaStream,
        lo: usize,
        len: usize,
    ) -> Result<(), GpuError> {
        assert!(lo + len <= self.bytes.max(4));
        unsafe {
            sys::cuMemsetD32Async(self.at(lo), POISON_WORD, len / 4, stream.cu_stream()).result()
        }
        .map_err(cuda("poisoning outputs"))
    }

    /// `len` bytes of the read-back at `at`, to copy into (the device writes them).
    pub(super) fn back_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts_mut(self.back.add(at), len) }
    }

    /// `len` bytes of the read-back at `at`, once the copy into it has completed.
    pub(super) fn back(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts(self.back.add(at), len) }
    }

    pub(super) fn at(&self, offset: usize) -> u64 {
        self.device + offset as u64
    }
}

impl Drop for RunMemory {
    fn drop(&mut self) {
        // Nothing may still write here: wait for everything queued, then free.
        let _ = self.ctx.bind_to_thread();
        let _ = self.ctx.synchronize();
        unsafe {
            if self.device != 0 {
                let _ = result::free_sync(self.device);
            }
            if !self.back.is_null() {
                let _ = result::free_host(self.back as *mut std::ffi::c_void);
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::measure::outputs::check_outputs;

    /// Two blocks of 96 threads, two launches counted after one warm-up.
    pub(in crate::measure) fn settings() -> ProbeSettings {
        ProbeSettings {
            blocks: 2,
            block_threads: 96,
            warmup_launches: 1,
            repeats: 2,
            budget_cycles: 1000,
            chains: vec![7],
            accumulators: vec![1, 2],
            sink_modes: vec![],
            sink_accumulators: vec![],
            contexts: vec![],
            context_chains: vec![],
            context_accumulators: vec![],
            reductions: Vec::new(),
            reduction_accumulators: Vec::new(),
            reduction_contexts: Vec::new(),
            mode: crate::model::settings::Mode::Wave,
        }
    }

    /// What the device's poison leaves in `bytes` bytes (the memset, on the host).
    fn poisoned(bytes: usize) -> Vec<u8> {
        POISON_WORD.to_ne_bytes().repeat(bytes / 4)
    }

    /// Every region of every launch of `groups`, as `(group, slot, launch, regions)`.
    fn every(regions: &[Regions], groups: &[Group]) -> Vec<(usize, usize, usize, Regions)> {
        let mut out = Vec::new();
        for (k, g) in groups.iter().enumerate() {
            for l in g.range() {
                for i in g.slots.clone() {
                    out.push((k, i, l, regions[i].shifted(g.lo + g.at(l))));
                }
            }
        }
        out
    }

    /// The byte ranges of `rs`, sorted, checked aligned, inside `bytes` and disjoint.
    fn disjoint(rs: &[Regions], bytes: usize) {
        let mut ranges: Vec<(usize, usize)> = rs
            .iter()
            .flat_map(|r| {
                [
                    (r.out, r.out + 4 * r.outputs),
                    (r.progress, r.progress + 8 * r.warps),
                    (r.elapsed, r.elapsed + 8 * r.warps),
                    (r.sm_ids, r.sm_ids + 4 * r.warps),
                ]
            })
            .collect();
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
        }
        assert!(ranges.iter().all(|&(a, b)| a % 256 == 0 && b <= bytes));
    }

    fn four() -> [Variant; 4] {
        let w32 = crate::model::variant::Context {
            warps: Some(32),
            ..Default::default()
        };
        [
            Variant::new(7, 2),
            Variant::new(13, 4).with_sink(crate::model::variant::Sink::C),
            Variant::new(29, 1),
            Variant::new(7, 2).with_context(w32),
        ]
    }

    #[test]
    fn a_run_lays_every_launch_of_its_variants_out_apart_aligned_and_poisoned() {
        let s = settings();
        let vs = four();
        let launches = 3;
        let (regions, groups, bytes) = Regions::plan(&vs, &[0..3, 3..4], launches, &s, RUN_BYTES);
        assert_eq!(bytes % 4, 0, "poisoned by 32-bit words");
        // Within the cap: a group per set, every launch in memory of its own.
        assert_eq!(groups.len(), 2);
        assert!(groups.iter().all(|g| g.fresh && g.range() == (0..launches)));
        let all = every(&regions, &groups);
        assert_eq!(all.len(), vs.len() * launches);
        let rs: Vec<Regions> = all.iter().map(|x| x.3).collect();
        disjoint(&rs, bytes);
        // Each group's block holds its launches, one after another; the blocks tile the run.
        assert_eq!((groups[0].lo, groups[1].lo), (0, groups[0].bytes()));
        assert_eq!(
            groups[1].lo + groups[1].bytes(),
            bytes,
            "the last group ends the run"
        );
        for g in &groups {
            let last = regions[g.slots.end - 1];
            assert_eq!(g.per_launch, last.end() - regions[g.slots.start].out);
        }
        assert_eq!(regions[0].outputs, 2 * 96, "one output per thread");
        assert_eq!(
            regions[1].outputs,
            2 * 96 * 4,
            "sink C stores every partial"
        );
        assert_eq!(regions[0].warps, 6);
        // A context's block: two blocks of 32 warps each.
        assert_eq!((regions[3].warps, regions[3].outputs), (64, 2 * 1024));

        let mut image = poisoned(bytes);
        // A launch that wrote nothing reads back as poison everywhere...
        for r in &rs {
            let (out, progress, elapsed, sm_ids) = r.read(&image, 0);
            assert_eq!(out.len(), r.outputs);
            assert!(out.iter().all(|x| x.to_bits() == POISON_F32 && x.is_nan()));
            assert!(progress.iter().chain(&elapsed).all(|&x| x == POISON_U64));
            assert!(sm_ids.iter().all(|&x| x == POISON_WORD));
            assert_eq!(
                check_outputs("t", &out, &progress, &elapsed),
                vec![
                    format!("t: {0} of {0} output elements never written", r.outputs),
                    format!("t: {0} of {0} warps wrote no progress", r.warps),
                ]
            );
        }
        // ...and what a kernel writes at its offsets is what is read, for that launch of
        // that variant only, out of its group's read-back.
        let g = &groups[0];
        let r = regions[1].shifted(g.lo + g.at(2));
        image[r.progress + 8..r.progress + 16].copy_from_slice(&1234u64.to_ne_bytes());
        image[r.sm_ids + 4..r.sm_ids + 8].copy_from_slice(&77u32.to_ne_bytes());
        image[r.out..r.out + 4].copy_from_slice(&2.5f32.to_ne_bytes());
        let back = &image[g.lo..g.lo + g.bytes()];
        let (out, progress, _, sm_ids) = r.read(back, g.lo);
        assert_eq!((out[0], progress[1], sm_ids[1]), (2.5, 1234, 77));
        assert_eq!(progress[0], POISON_U64);
        let (_, earlier, _, _) = regions[1].shifted(g.lo + g.at(1)).read(back, g.lo);
        let (_, other, _, _) = regions[0].shifted(g.lo + g.at(2)).read(back, g.lo);
        assert!(earlier.iter().chain(&other).all(|&p| p == POISON_U64));
    }

    #[test]
    fn past_the_cap_a_run_cuts_its_launches_into_groups_that_take_two_buffers_in_turns() {
        let s = settings();
        let vs = four();
        let launches = 7;
        let (_, whole) = Regions::lay_out(&vs[..3], &s);
        // Room for two launches of the first set in each of two buffers.
        let cap = 4 * whole;
        let (regions, groups, bytes) = Regions::plan(&vs, &[0..3, 3..4], launches, &s, cap);
        assert!(bytes <= cap, "{bytes} > {cap}");
        // Every launch of every slot in exactly one group, a set's launches in order.
        let all = every(&regions, &groups);
        let mut seen: Vec<(usize, usize)> = all.iter().map(|x| (x.1, x.2)).collect();
        seen.sort();
        let want: Vec<(usize, usize)> = (0..4)
            .flat_map(|i| (0..launches).map(move |l| (i, l)))
            .collect();
        assert_eq!(seen, want);
        assert!(groups.len() > 2);
        for (k, g) in groups.iter().enumerate() {
            // Two buffers in turns; only the first two groups find theirs poisoned.
            assert_eq!(g.lo, (k % 2) * groups[0].bytes().max(groups[1].bytes()));
            assert_eq!(g.fresh, k < 2);
            assert!(g.lo + g.bytes() <= bytes);
            // A group's own launches never overlap one another.
            let own: Vec<Regions> = all.iter().filter(|x| x.0 == k).map(|x| x.3).collect();
            disjoint(&own, bytes);
        }
        // Two groups in a row never share a buffer.
        for w in groups.windows(2) {
            assert_ne!(w[0].lo, w[1].lo);
        }
        // A launch larger than half the cap: one launch a group.
        let (_, tiny, _) = Regions::plan(&vs[..1], std::slice::from_ref(&(0..1)), 3, &s, 256);
        assert_eq!(
            tiny.iter().map(|g| g.launches).collect::<Vec<_>>(),
            [1, 1, 1]
        );
    }

    #[test]
    fn the_poison_is_no_value_a_launch_writes() {
        // Progress is iterations and a timer nanoseconds: 2^62 of either is decades.
        const { assert!(POISON_U64 > 1 << 62) };
        assert!(f32::from_bits(POISON_F32).is_nan());
        assert_ne!(f32::from_bits(POISON_F32).to_bits(), f32::NAN.to_bits());
    }
}
