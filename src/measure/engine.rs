//! The engine: runs a set of prepared variants (slots) as successive waves on the device,
//! and keeps what each launch gave.

use super::cuda;
use super::matrix::LoadedMatrix;
use super::memory::{Regions, SetMemory, POISON_U64};
use super::outputs::check_outputs;
use super::waves::{Schedule, Wave};
use crate::error::GpuError;
use crate::model::results::{LaunchTimer, VariantResult};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{
    result, sys, CudaEvent, CudaFunction, CudaStream, LaunchConfig, PushKernelArg,
};
use std::sync::Arc;

/// The FMA operands: acc = acc * A + B converges to B / (1 - A) = 10, so it stays finite
/// for any budget, and neither is a constant the compiler could fold.
pub const OPERAND_A: f32 = 0.9999;
pub const OPERAND_B: f32 = 0.001;

/// One variant of a set: its kernel, stream and what its launches gave.
pub(super) struct Slot {
    pub(super) v: Variant,
    pub(super) func: CudaFunction,
    pub(super) stream: Arc<CudaStream>,
    pub(super) regions: Regions,
    /// Recorded after the variant's launches of a wave were queued; the copy stream waits
    /// on it before reading back.
    pub(super) done: CudaEvent,
    /// Per launch, with [`LaunchTimer::Events`].
    pub(super) events: Vec<(CudaEvent, CudaEvent)>,
    pub(super) result: VariantResult,
    pub(super) elapsed_sum: f64,
    pub(super) elapsed_n: u64,
}

impl LoadedMatrix {
    /// Runs `slots` (laid out as `regions`, one per variant of the set), `warmup_launches +
    /// repeats` launches each, as successive waves of the `schedule`:
    ///
    /// ```text
    /// copy stream:     poison ─ ready ┐                      ┌ wait done (each) ─ read back ─ poison ─ ...
    /// host:                           └ wait ─ launch each ┐ │ check the wave before
    /// variant streams:                         kernel ─ done ┘
    /// ```
    ///
    /// The host waits for `ready`, so the variant streams need not.
    ///
    /// One allocation holds every variant's buffers; a wave's variants are poisoned by one
    /// copy and read back by one copy into page-locked memory. The host queues the end of
    /// a wave and the poison of the next while the wave runs. The page-locked read-back
    /// holds one wave: once the host has waited for the poison of a wave, the read-back of
    /// the wave before has landed, and the host checks it while the wave runs, before it
    /// queues the read-back that overwrites it.
    pub(super) fn run(
        &self,
        regions: &[Regions],
        slots: Vec<Slot>,
        s: &ProbeSettings,
        timer: LaunchTimer,
        schedule: Schedule,
    ) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)> {
        let mut blame = None;
        self.run_blaming(regions, slots, s, timer, schedule, &mut blame)
            .map_err(|e| (blame, e))
    }

    /// [`Self::run`], setting `blame` to the variant whose launch the GPU refused.
    fn run_blaming(
        &self,
        regions: &[Regions],
        mut slots: Vec<Slot>,
        s: &ProbeSettings,
        timer: LaunchTimer,
        schedule: Schedule,
        blame: &mut Option<Variant>,
    ) -> Result<Vec<VariantResult>, GpuError> {
        if slots.is_empty() {
            return Ok(Vec::new());
        }
        let placed: Vec<Regions> = slots.iter().map(|x| x.regions).collect();
        let waves = Wave::plan(&placed, s.launches() as usize, schedule);
        let image = Regions::poison_image(regions);
        let mut memory = SetMemory::new(&self.ctx, &image, Wave::read_back_bytes(&waves))?;
        let queue = self.queue(s)?;
        crate::trace::mark(format!(
            "{} variant(s) set up: {} bytes, {} wave(s)",
            slots.len(),
            image.len(),
            waves.len()
        ));
        // The wave whose read-back is queued and not yet checked.
        let mut landing: Option<&Wave> = None;
        for wave in &waves {
            queue.poison(&memory, wave, landing, &slots)?;
            queue.launch(&memory, &slots[wave.slots.clone()], wave.launch, blame)?;
            queue.end(&slots[wave.slots.clone()])?;
            // The wave before landed before `ready` completed: checked now, before this
            // wave's read-back replaces it.
            if let Some(before) = landing.take() {
                Self::check_wave(&mut slots, before, &memory, s)?;
            }
            queue.read_back(&mut memory, wave)?;
            landing = Some(wave);
        }
        if let Some(last) = landing {
            queue.land(last, &slots)?;
            crate::trace::mark("last wave read back");
            Self::check_wave(&mut slots, last, &memory, s)?;
        }
        drop(memory);
        crate::trace::mark("read-backs checked, memory freed");
        Ok(slots
            .into_iter()
            .map(|x| Self::close(x, s, timer))
            .collect())
    }

    /// The copy stream, its event and the launch settings a set's waves share.
    fn queue(&self, s: &ProbeSettings) -> Result<Queue, GpuError> {
        let untimed = Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        Ok(Queue {
            copies: self.stream(0)?,
            ready: self
                .ctx
                .new_event(untimed)
                .map_err(cuda("creating events"))?,
            cfg: LaunchConfig {
                grid_dim: (s.blocks, 1, 1),
                block_dim: (s.block_threads, 1, 1),
                shared_mem_bytes: super::matrix::one_block_per_sm(&self.ctx)?,
            },
            budget: s.budget_cycles as i64,
        })
    }

    /// Checks and keeps what each slot of `wave` gave, from the read-back, which must have
    /// landed (and its events, if any, completed).
    fn check_wave(
        slots: &mut [Slot],
        wave: &Wave,
        memory: &SetMemory,
        s: &ProbeSettings,
    ) -> Result<(), GpuError> {
        let back = memory.back(0, wave.bytes());
        for slot in &mut slots[wave.slots.clone()] {
            let ms = match slot.events.get(wave.launch) {
                Some((begin, end)) => {
                    Some(begin.elapsed_ms(end).map_err(cuda("reading event times"))? as f64)
                }
                None => None,
            };
            let values = slot.regions.read(back, wave.lo);
            Self::finish(slot, s, wave.launch as u32, values, ms);
        }
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

/// What the waves of one set share: the copy stream that poisons and reads back each wave,
/// the event the host waits for before it launches one, and the launch settings.
struct Queue {
    copies: Arc<CudaStream>,
    /// Recorded on `copies` after a wave's poison.
    ready: CudaEvent,
    cfg: LaunchConfig,
    budget: i64,
}

impl Queue {
    /// Poisons `wave`'s bytes and waits until they are written, and so until the wave
    /// before (`landing`, whose read-back is queued) and its read-back are done.
    fn poison(
        &self,
        memory: &SetMemory,
        wave: &Wave,
        landing: Option<&Wave>,
        slots: &[Slot],
    ) -> Result<(), GpuError> {
        unsafe {
            result::memcpy_htod_async(
                memory.at(wave.lo),
                &memory.poison()[wave.lo..wave.hi],
                self.copies.cu_stream(),
            )
        }
        .map_err(cuda("poisoning outputs"))?;
        self.ready
            .record(&self.copies)
            .map_err(cuda("recording an event"))?;
        // The host waits for the poison, then launches: the kernels start as they are
        // queued, microseconds apart. Released together by the event instead, they would
        // start at the same instant, and some would lock into a slower loop rate.
        self.ready.synchronize().map_err(|e| match landing {
            // An error of the kernels (an illegal address) shows here, after the wave
            // that made it: named, as far as the wave says.
            Some(before) => GpuError::cuda(running(before, slots), e),
            None => GpuError::cuda("poisoning outputs", e),
        })
    }

    /// Queues launch `launch` of each of a wave's `slots`, each on its stream (with its
    /// events in serial mode), setting `blame` to a variant whose launch the GPU refuses.
    /// No stream waits on `ready`: the host saw it complete, so the poison is written
    /// before any of these launches is queued.
    fn launch(
        &self,
        memory: &SetMemory,
        slots: &[Slot],
        launch: usize,
        blame: &mut Option<Variant>,
    ) -> Result<(), GpuError> {
        for slot in slots {
            let st = slot.stream.clone();
            if let Some((begin, _)) = slot.events.get(launch) {
                begin.record(&st).map_err(cuda("recording an event"))?;
            }
            let r = slot.regions;
            let (out, progress, elapsed, sm_ids) = (
                memory.at(r.out),
                memory.at(r.progress),
                memory.at(r.elapsed),
                memory.at(r.sm_ids),
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
                *blame = Some(slot.v);
                GpuError::cuda(format!("launching {}", slot.v), e)
            })?;
            if let Some((_, end)) = slot.events.get(launch) {
                end.record(&st).map_err(cuda("recording an event"))?;
            }
        }
        Ok(())
    }

    /// Marks the end of a wave on each slot's stream and has the copy stream wait for it.
    /// Called once every launch of the wave is queued: an event waits in its hardware
    /// queue for the work before it, and would hold back the launches queued behind it.
    fn end(&self, slots: &[Slot]) -> Result<(), GpuError> {
        for slot in slots {
            slot.done
                .record(&slot.stream)
                .map_err(cuda("recording an event"))?;
            self.copies
                .wait(&slot.done)
                .map_err(cuda("waiting for an event"))?;
        }
        Ok(())
    }

    /// Queues `wave`'s read-back into the page-locked read-back, after its kernels.
    fn read_back(&self, memory: &mut SetMemory, wave: &Wave) -> Result<(), GpuError> {
        let at = memory.at(wave.lo);
        unsafe {
            result::memcpy_dtoh_async(
                memory.back_mut(0, wave.bytes()),
                at,
                self.copies.cu_stream(),
            )
        }
        .map_err(cuda("reading outputs"))
    }

    /// Waits for the `last` wave's read-back.
    fn land(&self, last: &Wave, slots: &[Slot]) -> Result<(), GpuError> {
        self.copies
            .synchronize()
            .map_err(|e| GpuError::cuda(running(last, slots), e))
    }
}

/// What the GPU was doing for `wave`, for an error it reports: the variant in serial mode,
/// so that a kernel that faults is named.
fn running(wave: &Wave, slots: &[Slot]) -> String {
    let vs: Vec<Variant> = slots[wave.slots.clone()].iter().map(|x| x.v).collect();
    wave.describe(&vs)
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
