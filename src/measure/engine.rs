//! The engine: runs a run's prepared variants (slots), group by group, as the host paces
//! their launches (`pacing`), and keeps what each launch gave.

use super::cuda;
use super::memory::{Regions, RunMemory, POISON_U64, RUN_BYTES};
use super::outputs::check_outputs;
use super::pacing::{pace, Lanes};
use super::waves::Group;
use crate::error::GpuError;
use crate::model::results::{LaunchTimer, VariantResult};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{
    result, sys, CudaContext, CudaEvent, CudaFunction, CudaStream, DriverError, LaunchConfig,
    PushKernelArg,
};
use std::sync::Arc;

/// The FMA operands: acc = acc * A + B converges to B / (1 - A) = 10, so it stays finite
/// for any budget, and neither is a constant the compiler could fold.
pub(crate) const OPERAND_A: f32 = 0.9999;
pub(crate) const OPERAND_B: f32 = 0.001;

/// One variant of a run: its kernel, stream and what its launches gave.
pub(super) struct Slot {
    pub(super) v: Variant,
    pub(super) func: CudaFunction,
    pub(super) stream: Arc<CudaStream>,
    /// Where it keeps its buffers within a launch of its group (set by the run's plan).
    pub(super) regions: Regions,
    /// Per launch, with [`LaunchTimer::Events`].
    pub(super) events: Vec<(CudaEvent, CudaEvent)>,
    pub(super) result: VariantResult,
    pub(super) elapsed_sum: f64,
    pub(super) elapsed_n: u64,
}

/// Where a run's slots run: the device context, the stream the copies go on, and the
/// dynamic shared memory every launch asks for (one block per SM).
pub(super) struct Engine<'a> {
    pub(super) ctx: &'a Arc<CudaContext>,
    pub(super) copies: Arc<CudaStream>,
    pub(super) shared_mem_bytes: u32,
}

impl Engine<'_> {
    /// Runs `slots`, `warmup_launches + repeats` launches each, in `groups` (ranges of
    /// slots) one after another, each group's slots at once, as [`pace`] orders them:
    ///
    /// ```text
    /// copy stream:   poison all ┐                          ┌ read back group 0      ┌ read back group 1
    /// host:                     └ wait ─ launch 0 of each ─┤ next launch of a slot   │ check group 0 ...
    /// slot streams:                      kernel ─ kernel ─ ... as each one's last ends
    /// ```
    ///
    /// One allocation holds every launch's buffers, poisoned by one fill before the first
    /// launch, so that no launch waits for a copy; a group's launches are read back by one
    /// copy into page-locked memory once they have all ended, and checked while the next
    /// group runs. No stream waits on another: the host saw what a copy or launch follows
    /// complete before it queued it.
    pub(super) fn run(
        &self,
        mut slots: Vec<Slot>,
        groups: &[std::ops::Range<usize>],
        s: &ProbeSettings,
        timer: LaunchTimer,
    ) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)> {
        let mut blame = None;
        self.run_blaming(&mut slots, groups, s, &mut blame)
            .map_err(|e| (blame, e))?;
        Ok(slots
            .into_iter()
            .map(|x| Self::close(x, s, timer))
            .collect())
    }

    /// [`Self::run`], setting `blame` to the variant whose launch the GPU refused.
    fn run_blaming(
        &self,
        slots: &mut [Slot],
        groups: &[std::ops::Range<usize>],
        s: &ProbeSettings,
        blame: &mut Option<Variant>,
    ) -> Result<(), GpuError> {
        if slots.is_empty() {
            return Ok(());
        }
        let launches = s.launches() as usize;
        let vs: Vec<Variant> = slots.iter().map(|x| x.v).collect();
        let (regions, blocks, bytes) = Regions::plan(&vs, groups, launches, s, RUN_BYTES);
        for (slot, r) in slots.iter_mut().zip(regions) {
            slot.regions = r;
        }
        let memory = RunMemory::new(self.ctx, bytes, Group::read_back_bytes(&blocks))?;
        let copies = self.copies.clone();
        memory.poison(&copies, 0, bytes)?;
        // The host waits for the poison, so the slot streams need not.
        copies.synchronize().map_err(cuda("poisoning outputs"))?;
        crate::trace::mark(format!(
            "{} variant(s) set up: {bytes} bytes, {} group(s) of {launches} launch(es)",
            slots.len(),
            blocks.len(),
        ));
        let mut lanes = CudaLanes {
            slots,
            vs: &vs,
            blocks: &blocks,
            memory,
            copies,
            cfg: LaunchConfig {
                grid_dim: (s.blocks, 1, 1),
                block_dim: (s.block_threads, 1, 1),
                shared_mem_bytes: self.shared_mem_bytes,
            },
            budget: s.budget_cycles as i64,
            settings: s,
            blame,
        };
        pace(&mut lanes, &blocks)?;
        drop(lanes);
        crate::trace::mark("read-backs checked, memory freed");
        Ok(())
    }

    /// Checks one finished launch of a slot and keeps what it gave.
    fn finish(
        slot: &mut Slot,
        s: &ProbeSettings,
        launch: u32,
        (out, progress, elapsed, sm_ids): (Vec<f32>, Vec<u64>, Vec<u64>, Vec<u32>),
        event_ms: Option<f64>,
    ) {
        let counted = launch >= s.warmup_launches;
        let tag = if counted {
            format!("repeat {}", launch - s.warmup_launches)
        } else {
            format!("warm-up {launch}")
        };
        slot.result
            .output_problems
            .extend(check_outputs(&tag, &out, &progress, &elapsed));
        if !counted {
            return;
        }
        let timed: Vec<u64> = elapsed
            .iter()
            .copied()
            .filter(|&ns| ns != POISON_U64 && ns > 0)
            .collect();
        // With the kernel's timer: its longest warp; a launch whose warps wrote no timer
        // counts as 0 ms (its outputs are reported above, and its duration fails).
        let ms = event_ms.unwrap_or_else(|| timed.iter().max().map_or(0.0, |&ns| ns as f64 / 1e6));
        slot.result.launch_ms.push(ms);
        for ns in timed {
            slot.elapsed_sum += ns as f64;
            slot.elapsed_n += 1;
        }
        slot.result.samples.push(
            progress
                .iter()
                .map(|&p| if p == POISON_U64 { 0 } else { p })
                .collect(),
        );
        // The SM of each block (its first warp's).
        let per_block = (s.block_threads_of(&slot.v) / 32) as usize;
        slot.result
            .sm_ids
            .push(sm_ids.iter().step_by(per_block.max(1)).copied().collect());
    }

    fn close(slot: Slot, s: &ProbeSettings, timer: LaunchTimer) -> VariantResult {
        let mut r = slot.result;
        let samples = std::mem::take(&mut r.samples);
        let fresh = VariantResult::measured(slot.v, samples);
        r.mean_progress = fresh.mean_progress;
        r.summary = fresh.summary;
        r.samples = fresh.samples;
        r.launch_timer = timer;
        r.sm_clock_mhz = (slot.elapsed_n > 0)
            .then(|| s.budget_cycles as f64 / (slot.elapsed_sum / slot.elapsed_n as f64) * 1000.0);
        r
    }
}

/// The CUDA side of a run's pacing: each slot launches on its own stream, a launch has ended
/// when its stream is idle, and each group is read back by one copy on the copy stream.
struct CudaLanes<'a> {
    slots: &'a mut [Slot],
    vs: &'a [Variant],
    blocks: &'a [Group],
    memory: RunMemory,
    copies: Arc<CudaStream>,
    cfg: LaunchConfig,
    budget: i64,
    settings: &'a ProbeSettings,
    blame: &'a mut Option<Variant>,
}

impl CudaLanes<'_> {
    /// What the GPU was doing at `launch` of group `group`, for an error it reports.
    fn running(&self, group: usize, launch: usize) -> String {
        let g = &self.blocks[group];
        g.describe(&self.vs[g.slots.clone()], launch)
    }
}

impl Lanes for CudaLanes<'_> {
    /// With its events in serial mode; sets `blame` to a variant whose launch the GPU
    /// refuses.
    fn launch(&mut self, group: usize, i: usize, launch: usize) -> Result<(), GpuError> {
        let g = &self.blocks[group];
        let at = g.lo + g.at(launch);
        let slot = &self.slots[i];
        let st = &slot.stream;
        if let Some((begin, _)) = slot.events.get(launch) {
            begin.record(st).map_err(cuda("recording an event"))?;
        }
        let r = slot.regions.shifted(at);
        let m = &self.memory;
        let (out, progress, elapsed, sm_ids) = (
            m.at(r.out),
            m.at(r.progress),
            m.at(r.elapsed),
            m.at(r.sm_ids),
        );
        let mut b = st.launch_builder(&slot.func);
        b.arg(&OPERAND_A)
            .arg(&OPERAND_B)
            .arg(&self.budget)
            .arg(&out)
            .arg(&progress)
            .arg(&elapsed)
            .arg(&sm_ids);
        // A context may set its own block (docs/study.md, "Contexts").
        let cfg = LaunchConfig {
            block_dim: (slot.v.context.block_threads(self.cfg.block_dim.0), 1, 1),
            ..self.cfg
        };
        unsafe { b.launch(cfg) }.map_err(|e| {
            *self.blame = Some(slot.v);
            GpuError::cuda(format!("launching {}", slot.v), e)
        })?;
        if let Some((_, end)) = slot.events.get(launch) {
            end.record(st).map_err(cuda("recording an event"))?;
        }
        Ok(())
    }

    /// An error of the kernels (an illegal address) shows here, named as far as the group
    /// says.
    fn ended(&mut self, group: usize, i: usize, launch: usize) -> Result<bool, GpuError> {
        let stream = self.slots[i].stream.cu_stream();
        match unsafe { sys::cuStreamQuery(stream) }.result() {
            Ok(()) => Ok(true),
            Err(DriverError(sys::CUresult::CUDA_ERROR_NOT_READY)) => Ok(false),
            Err(e) => Err(GpuError::cuda(self.running(group, launch), e)),
        }
    }

    fn poison(&mut self, group: usize) -> Result<(), GpuError> {
        let g = &self.blocks[group];
        self.memory.poison(&self.copies, g.lo, g.bytes())?;
        self.copies.synchronize().map_err(cuda("poisoning outputs"))
    }

    fn read_back(&mut self, group: usize) -> Result<(), GpuError> {
        let g = &self.blocks[group];
        let at = self.memory.at(g.lo);
        unsafe {
            result::memcpy_dtoh_async(
                self.memory.back_mut(0, g.bytes()),
                at,
                self.copies.cu_stream(),
            )
        }
        .map_err(cuda("reading outputs"))?;
        crate::trace::mark(format!(
            "group {} of {}: every launch ended",
            group + 1,
            self.blocks.len()
        ));
        Ok(())
    }

    /// Keeps what each launch of the group gave, each slot's launches in order.
    fn check(&mut self, group: usize) -> Result<(), GpuError> {
        let g = &self.blocks[group];
        self.copies.synchronize().map_err(cuda("reading outputs"))?;
        let back = self.memory.back(0, g.bytes());
        for slot in &mut self.slots[g.slots.clone()] {
            for launch in g.range() {
                let ms = match slot.events.get(launch) {
                    Some((begin, end)) => {
                        Some(begin.elapsed_ms(end).map_err(cuda("reading event times"))? as f64)
                    }
                    None => None,
                };
                let values = slot.regions.shifted(g.lo + g.at(launch)).read(back, g.lo);
                Engine::finish(slot, self.settings, launch as u32, values, ms);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_keep_the_chain_finite_and_away_from_trivial_values() {
        let mut acc = OPERAND_B;
        for _ in 0..1_000_000 {
            acc = acc.mul_add(OPERAND_A, OPERAND_B);
        }
        assert!(acc.is_finite() && acc > 1.0 && acc < 11.0, "{acc}");
    }
}
