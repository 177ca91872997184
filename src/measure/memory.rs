//! Where a set's buffers lie and the memory that holds them: one device allocation for
//! every variant of a set (outputs, progress, timers and SM ids, each region aligned to 256
//! bytes), its poison image in page-locked host memory, and one page-locked wave's
//! read-back.

use super::cuda;
use crate::error::GpuError;
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{result, sys, CudaContext};
use std::sync::Arc;

/// A NaN pattern no kernel computes: an output still holding it was never written.
pub(super) const POISON_F32: u32 = 0x7FBA_DBAD;
pub(super) const POISON_U64: u64 = u64::MAX;

/// Where one variant's buffers lie in the set's one allocation (byte offsets; each region
/// aligned to 256 bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Regions {
    pub(super) out: usize,
    pub(super) outputs: usize,
    pub(super) progress: usize,
    pub(super) elapsed: usize,
    pub(super) sm_ids: usize,
    pub(super) warps: usize,
}

impl Regions {
    /// The poison image of a set laid out as `regions`: every region of every variant
    /// poisoned, up to where the last one ends.
    pub(super) fn poison_image(regions: &[Regions]) -> Vec<u8> {
        // The variants' regions lie one after another: the last ends the set's bytes.
        let bytes = regions.last().map_or(0, Regions::end);
        let mut image = vec![0u8; bytes];
        for r in regions {
            r.poison(&mut image);
        }
        image
    }

    /// The regions of every variant of a set, one after another, and the total size.
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

    /// The poison every launch starts from: outputs a NaN no kernel computes, the timers,
    /// progress and SM ids all ones.
    pub(super) fn poison(&self, image: &mut [u8]) {
        for x in image[self.out..self.out + 4 * self.outputs].chunks_exact_mut(4) {
            x.copy_from_slice(&POISON_F32.to_ne_bytes());
        }
        image[self.progress..self.progress + 8 * self.warps].fill(0xFF);
        image[self.elapsed..self.elapsed + 8 * self.warps].fill(0xFF);
        image[self.sm_ids..self.sm_ids + 4 * self.warps].fill(0xFF);
    }

    /// Where the variant's last region ends (its regions are contiguous from `out`).
    pub(super) fn end(&self) -> usize {
        self.sm_ids + (4 * self.warps).div_ceil(256) * 256
    }

    /// One launch's outputs, progress, timers and SM ids out of a read-back that starts at
    /// byte `base` of the set's layout.
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

/// Device memory and page-locked host memory for one set, freed once the context has
/// finished everything queued on it (also when queuing stopped half-way with an error).
pub(super) struct SetMemory {
    pub(super) ctx: Arc<CudaContext>,
    pub(super) device: sys::CUdeviceptr,
    /// The poison image, copied to the device before each launch.
    pub(super) poison: *mut u8,
    pub(super) bytes: usize,
    /// Every wave's read-back, one after another.
    pub(super) back: *mut u8,
    pub(super) back_bytes: usize,
}

impl SetMemory {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        image: &[u8],
        back_bytes: usize,
    ) -> Result<SetMemory, GpuError> {
        let bytes = image.len();
        let mut m = SetMemory {
            ctx: ctx.clone(),
            device: 0,
            poison: std::ptr::null_mut(),
            bytes,
            back: std::ptr::null_mut(),
            back_bytes,
        };
        // The raw allocations below act on the thread's current context.
        ctx.bind_to_thread().map_err(cuda("binding the context"))?;
        unsafe {
            m.device = result::malloc_sync(bytes).map_err(cuda("allocating buffers"))?;
            m.poison =
                result::malloc_host(bytes, 0).map_err(cuda("allocating host buffers"))? as *mut u8;
            m.back = result::malloc_host(back_bytes, 0).map_err(cuda("allocating host buffers"))?
                as *mut u8;
            std::slice::from_raw_parts_mut(m.poison, bytes).copy_from_slice(image);
        }
        Ok(m)
    }

    pub(super) fn poison(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.poison, self.bytes) }
    }

    /// `len` bytes of the read-back at `at`, to copy into (the device writes them).
    pub(super) fn back_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts_mut(self.back.add(at), len) }
    }

    /// `len` bytes of the read-back at `at`, once the context was synchronised.
    pub(super) fn back(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts(self.back.add(at), len) }
    }

    pub(super) fn at(&self, offset: usize) -> u64 {
        self.device + offset as u64
    }
}

impl Drop for SetMemory {
    fn drop(&mut self) {
        // Nothing may still write here: wait for everything queued, then free.
        let _ = self.ctx.bind_to_thread();
        let _ = self.ctx.synchronize();
        unsafe {
            if self.device != 0 {
                let _ = result::free_sync(self.device);
            }
            for p in [self.poison, self.back] {
                if !p.is_null() {
                    let _ = result::free_host(p as *mut std::ffi::c_void);
                }
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

    #[test]
    fn a_set_lays_its_variants_out_apart_aligned_and_poisoned() {
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
        let (regions, bytes) = Regions::lay_out(&vs, &s);
        // Every region of every variant, as byte ranges: aligned, inside, disjoint.
        let mut ranges: Vec<(usize, usize)> = regions
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
        assert_eq!(
            bytes,
            regions.last().unwrap().end(),
            "the last region ends the set"
        );
        assert_eq!(regions[0].outputs, 2 * 96, "one output per thread");
        assert_eq!(
            regions[1].outputs,
            2 * 96 * 4,
            "sink C stores every partial"
        );
        assert_eq!(regions[0].warps, 6);
        // A context's block: two blocks of 32 warps each.
        assert_eq!((regions[3].warps, regions[3].outputs), (64, 2 * 1024));

        let mut image = vec![0u8; bytes];
        for r in &regions {
            r.poison(&mut image);
        }
        // A launch that wrote nothing reads back as poison everywhere...
        for r in &regions {
            let (out, progress, elapsed, sm_ids) = r.read(&image, 0);
            assert_eq!(out.len(), r.outputs);
            assert!(out.iter().all(|x| x.to_bits() == POISON_F32));
            assert!(sm_ids.iter().all(|&x| x == u32::MAX));
            assert_eq!(
                check_outputs("t", &out, &progress, &elapsed),
                vec![
                    format!("t: {0} of {0} output elements never written", r.outputs),
                    format!("t: {0} of {0} warps wrote no progress", r.warps),
                ]
            );
        }
        // ...and what a kernel writes at its offsets is what is read, for that variant only.
        let r = regions[1];
        image[r.progress + 8..r.progress + 16].copy_from_slice(&1234u64.to_ne_bytes());
        image[r.sm_ids + 4..r.sm_ids + 8].copy_from_slice(&77u32.to_ne_bytes());
        image[r.out..r.out + 4].copy_from_slice(&2.5f32.to_ne_bytes());
        let (out, progress, _, sm_ids) = r.read(&image, 0);
        assert_eq!((out[0], progress[1], sm_ids[1]), (2.5, 1234, 77));
        assert_eq!(progress[0], u64::MAX);
        let (_, other, _, _) = regions[0].read(&image, 0);
        assert!(other.iter().all(|&p| p == u64::MAX));
    }
}
