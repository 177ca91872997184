//! Where a run's buffers lie and the memory that holds them: one device allocation for
//! every launch of every variant of a run (outputs, progress, timers and SM ids, each region
//! aligned to 256 bytes), poisoned once before the first launch, and one group's page-locked
//! read-back.

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

/// Where one launch of one variant keeps its buffers in the run's one allocation (byte
/// offsets; each region aligned to 256 bytes, the four contiguous from `out`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(super) struct Regions {
    pub(super) out: usize,
    pub(super) outputs: usize,
    pub(super) progress: usize,
    pub(super) elapsed: usize,
    pub(super) sm_ids: usize,
    pub(super) warps: usize,
}

impl Regions {
    /// The regions of launch 0 of every variant of a run (one after another, a group's
    /// variants together) and the groups' blocks: group `g` holds the variants `groups[g]`,
    /// each of its `launches` launches their regions anew, one launch after another
    /// ([`Group::at`]). Returns the regions, the groups and the run's bytes.
    pub(super) fn lay_out(
        vs: &[Variant],
        groups: &[std::ops::Range<usize>],
        launches: usize,
        s: &ProbeSettings,
    ) -> (Vec<Regions>, Vec<Group>, usize) {
        let align = |x: usize| x.div_ceil(256) * 256;
        let mut at = 0;
        let mut regions = Vec::with_capacity(vs.len());
        let mut blocks = Vec::with_capacity(groups.len());
        for slots in groups {
            let lo = at;
            for v in &vs[slots.clone()] {
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
                regions.push(r);
            }
            let per_launch = at - lo;
            at = lo + per_launch * launches;
            blocks.push(Group {
                slots: slots.clone(),
                lo,
                per_launch,
                launches,
            });
        }
        (regions, blocks, at)
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

    /// Fills every buffer of the run with [`POISON_WORD`], queued on `stream`.
    pub(super) fn poison(&self, stream: &CudaStream) -> Result<(), GpuError> {
        unsafe {
            sys::cuMemsetD32Async(self.device, POISON_WORD, self.bytes / 4, stream.cu_stream())
                .result()
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
            mode: crate::model::settings::Mode::Wave,
        }
    }

    /// What the device's poison leaves in `bytes` bytes (the memset, on the host).
    fn poisoned(bytes: usize) -> Vec<u8> {
        POISON_WORD.to_ne_bytes().repeat(bytes / 4)
    }

    #[test]
    fn a_run_lays_every_launch_of_its_variants_out_apart_aligned_and_poisoned() {
        let s = settings();
        let w32 = crate::model::variant::Context {
            warps: Some(32),
            ..Default::default()
        };
        let vs = [
            Variant::new(7, 2),
            Variant::new(13, 4).with_sink(crate::model::variant::Sink::C),
            Variant::new(29, 1),
            Variant::new(7, 2).with_context(w32),
        ];
        let launches = 3;
        let (regions, groups, bytes) = Regions::lay_out(&vs, &[0..3, 3..4], launches, &s);
        assert_eq!(bytes % 4, 0, "poisoned by 32-bit words");
        // Every region of every launch of every variant, as byte ranges: aligned, inside,
        // disjoint.
        let every: Vec<Regions> = groups
            .iter()
            .flat_map(|g| {
                let regions = &regions;
                (0..launches).flat_map(move |l| {
                    regions[g.slots.clone()]
                        .iter()
                        .map(move |r| r.shifted(g.at(l)))
                })
            })
            .collect();
        assert_eq!(every.len(), vs.len() * launches);
        let mut ranges: Vec<(usize, usize)> = every
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
        // Each group's block holds its launches, one after another; the blocks tile the run.
        assert_eq!((groups[0].lo, groups[1].lo), (0, groups[0].bytes()));
        assert_eq!(
            groups[1].lo + groups[1].bytes(),
            bytes,
            "the last group ends the run"
        );
        for g in &groups {
            assert_eq!(g.per_launch, regions[g.slots.end - 1].end() - g.lo);
            assert_eq!(g.bytes(), g.per_launch * launches);
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
        for r in &every {
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
        let r = regions[1].shifted(g.at(2));
        image[r.progress + 8..r.progress + 16].copy_from_slice(&1234u64.to_ne_bytes());
        image[r.sm_ids + 4..r.sm_ids + 8].copy_from_slice(&77u32.to_ne_bytes());
        image[r.out..r.out + 4].copy_from_slice(&2.5f32.to_ne_bytes());
        let back = &image[g.lo..g.lo + g.bytes()];
        let (out, progress, _, sm_ids) = r.read(back, g.lo);
        assert_eq!((out[0], progress[1], sm_ids[1]), (2.5, 1234, 77));
        assert_eq!(progress[0], POISON_U64);
        let (_, earlier, _, _) = regions[1].shifted(g.at(1)).read(back, g.lo);
        let (_, other, _, _) = regions[0].shifted(g.at(2)).read(back, g.lo);
        assert!(earlier.iter().chain(&other).all(|&p| p == POISON_U64));
    }

    #[test]
    fn the_poison_is_no_value_a_launch_writes() {
        // Progress is iterations and a timer nanoseconds: 2^62 of either is decades.
        const { assert!(POISON_U64 > 1 << 62) };
        assert!(f32::from_bits(POISON_F32).is_nan());
        assert_ne!(f32::from_bits(POISON_F32).to_bits(), f32::NAN.to_bits());
    }
}
