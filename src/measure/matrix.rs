//! A compiled matrix loaded on a device: a module per part, the streams its sets run on,
//! and the two modes' entry points, which prepare each variant's slot and hand the set to
//! the engine.

use super::cuda;
use super::engine::{Engine, Slot};
use super::isolation::{each_its_own, without_refused};
use super::memory::Regions;
use super::waves::wave_plan;
use crate::compile::Compiled;
use crate::error::GpuError;
use crate::measure::device::Device;
use crate::model::results::{LaunchTimer, Resources, VariantResult};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{sys, CudaContext, CudaModule, CudaStream};
use std::sync::Arc;

/// The dynamic shared memory every probe launch asks for: more than half of an SM's, so
/// that no two blocks fit one SM. The kernels use none of it; it only keeps the block
/// scheduler from placing two variants of a wave on one SM, which it does with blocks of
/// several shapes (warps, registers) in one wave even where SMs are free: on the H200 a wave
/// of the profile's 129 variants ran on 125 SMs, 4 pairs sharing one, each 7-41% slower
/// (docs/h200.md, "One block per SM").
pub(super) fn one_block_per_sm(ctx: &CudaContext) -> Result<u32, GpuError> {
    use sys::CUdevice_attribute as A;
    let per_sm = ctx
        .attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
        .map_err(cuda("reading the shared memory per SM"))?;
    let per_block = ctx
        .attribute(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(cuda("reading the shared memory a block may ask for"))?;
    Ok((per_sm / 2 + 1024).min(per_block).max(0) as u32)
}

/// A compiled matrix loaded on a device, with the streams its sets run on.
pub(crate) struct LoadedMatrix {
    pub(super) ctx: Arc<CudaContext>,
    /// One per part of the compiled matrix, in order.
    modules: Vec<Arc<CudaModule>>,
    compiled: Compiled,
    /// Made with the module, so that measuring does not make (and destroy) them: the
    /// copy stream first, then one per kernel of the CUBIN for the variants of a run.
    streams: Vec<Arc<CudaStream>>,
}

impl LoadedMatrix {
    pub(crate) fn load(device: &Device, compiled: Compiled) -> Result<LoadedMatrix, GpuError> {
        let modules = compiled
            .parts
            .iter()
            .enumerate()
            .map(|(k, p)| {
                device
                    .ctx
                    .load_module(cudarc::nvrtc::Ptx::from_binary(p.cubin.clone()))
                    .map_err(|e| {
                        let of = compiled.parts.len();
                        match of {
                            1 => GpuError::cuda("loading the CUBIN", e),
                            _ => GpuError::cuda(format!("loading CUBIN {} of {of}", k + 1), e),
                        }
                    })
            })
            .collect::<Result<Vec<_>, GpuError>>()?;
        let streams = (0..=compiled.reports.len().max(1))
            .map(|_| device.ctx.new_stream().map_err(cuda("creating a stream")))
            .collect::<Result<Vec<_>, GpuError>>()?;
        Ok(LoadedMatrix {
            ctx: device.ctx.clone(),
            modules,
            compiled,
            streams,
        })
    }

    pub(crate) fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Serial mode: one variant at a time (all its launches, then the next variant's),
    /// each launch timed by CUDA events, as one set. Every variant gets its own outcome: a
    /// variant that cannot be prepared (not in the CUBIN, no ptxas report) gets its own
    /// error, and when the set fails as a whole (a launch the GPU refuses, say) each
    /// variant is measured again alone, so that the error is the failing variant's and the
    /// others are measured (see `each_its_own`).
    pub(crate) fn measure_serial(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
    ) -> Vec<Result<VariantResult, GpuError>> {
        each_its_own(
            vs,
            |set| self.serial_set(set, s),
            || self.ctx.synchronize().is_ok(),
        )
    }

    /// [`Self::measure_serial`] of one set: `Err` when the set failed as a whole.
    fn serial_set(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        crate::trace::mark(format!("preparing {} variant(s), one at a time", vs.len()));
        let launches = s.launches() as usize;
        let mut slots = Vec::new();
        let mut outcome: Vec<Option<Result<VariantResult, GpuError>>> = Vec::new();
        for (i, &v) in vs.iter().enumerate() {
            match self.slot(i, v, LaunchTimer::Events, launches) {
                Ok(slot) => {
                    slots.push(slot);
                    outcome.push(None);
                }
                Err(e) => outcome.push(Some(Err(e))),
            }
        }
        // Each variant a group of its own: one launch on the GPU at a time.
        let groups: Vec<std::ops::Range<usize>> = (0..slots.len()).map(|i| i..i + 1).collect();
        let mut measured = self
            .engine()?
            .run(slots, &groups, s, LaunchTimer::Events)
            .map_err(|(_, e)| e)?
            .into_iter();
        Ok(outcome
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| {
                    measured.next().map(Ok).unwrap_or_else(|| {
                        Err(GpuError::Variant("the serial run gave no result".into()))
                    })
                })
            })
            .collect())
    }

    /// Wave mode: the variants (in `wave_order`) in the sets of `wave_plan` on a GPU of
    /// `sms` SMs, the sets one after another, each set's variants at once, one stream each, each launch timed by the
    /// kernel. A variant the GPU refuses to load or launch gets its own error and the run
    /// goes again without it; any other failure is every variant's (see
    /// `without_refused`).
    pub(crate) fn measure_wave(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
        sms: u32,
    ) -> Vec<Result<VariantResult, GpuError>> {
        without_refused(
            vs,
            |set| self.wave_run(set, s, sms),
            || self.ctx.synchronize().is_ok(),
        )
    }

    /// [`Self::measure_wave`] of one try: `Err` when the run failed, with the variant to
    /// blame when it is known (one the GPU refused to load or launch).
    fn wave_run(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
        sms: u32,
    ) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)> {
        let sets = wave_plan(vs, s.blocks, sms);
        crate::trace::mark(format!(
            "preparing {} variant(s) in {} wave set(s)",
            vs.len(),
            sets.len()
        ));
        let launches = s.launches() as usize;
        let slots = vs
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                self.slot(i, v, LaunchTimer::Kernel, launches)
                    .map_err(|e| (Some(v), e))
            })
            .collect::<Result<Vec<Slot>, _>>()?;
        self.engine()
            .map_err(|e| (None, e))?
            .run(slots, &sets, s, LaunchTimer::Kernel)
    }

    /// The engine on this matrix's context: its copy stream, one block per SM.
    fn engine(&self) -> Result<Engine<'_>, GpuError> {
        Ok(Engine {
            ctx: &self.ctx,
            copies: self.stream(0)?,
            shared_mem_bytes: one_block_per_sm(&self.ctx)?,
        })
    }

    /// Stream `i` of the matrix's own (0: the copy stream), or a new one past them.
    pub(super) fn stream(&self, i: usize) -> Result<Arc<CudaStream>, GpuError> {
        match self.streams.get(i) {
            Some(st) => Ok(st.clone()),
            None => self.ctx.new_stream().map_err(cuda("creating a stream")),
        }
    }

    /// The `index`th variant of a run: its kernel, stream and events (its regions come with
    /// the run's layout).
    fn slot(
        &self,
        index: usize,
        v: Variant,
        timer: LaunchTimer,
        launches: usize,
    ) -> Result<Slot, GpuError> {
        let name = v.name();
        let mut found = Err(None);
        for m in &self.modules {
            match m.load_function(&name) {
                Ok(f) => {
                    found = Ok(f);
                    break;
                }
                Err(e) => found = Err(Some(e)),
            }
        }
        let func = found.map_err(|e| {
            GpuError::Variant(match e {
                Some(e) => format!("kernel {name} not in the CUBIN: {e}"),
                None => format!("kernel {name}: no CUBIN was loaded"),
            })
        })?;
        let report = self.compiled.reports.get(&name).ok_or_else(|| {
            GpuError::Variant(format!(
                "the ptxas log has no report for {name} ({} reports, {} log lines)",
                self.compiled.reports.len(),
                self.compiled.log.lines().count()
            ))
        })?;
        func.set_attribute(
            sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            one_block_per_sm(&self.ctx)? as i32,
        )
        .map_err(cuda(
            "allowing the shared memory that keeps a block alone on its SM",
        ))?;
        let local = func
            .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
            .map_err(cuda("reading the local memory size"))?;
        let regs = func
            .num_regs()
            .map_err(cuda("reading the register count"))?;
        let mut result = VariantResult::measured(v, Vec::new());
        if regs as u32 != report.registers {
            result.output_problems.push(format!(
                "loaded function uses {regs} registers, ptxas reported {}",
                report.registers
            ));
        }
        result.resources = Some(Resources {
            registers: regs as u32,
            stack_frame_bytes: report.stack_frame_bytes,
            spill_store_bytes: report.spill_store_bytes,
            spill_load_bytes: report.spill_load_bytes,
            local_bytes: local as u32,
        });
        result.sass = self.compiled.sass.summary(&name).cloned();
        let timed = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let mut events = Vec::new();
        if timer == LaunchTimer::Events {
            for _ in 0..launches {
                events.push((
                    self.ctx.new_event(timed).map_err(cuda("creating events"))?,
                    self.ctx.new_event(timed).map_err(cuda("creating events"))?,
                ));
            }
        }
        Ok(Slot {
            v,
            func,
            stream: self.stream(index + 1)?,
            regions: Regions::default(),
            events,
            result,
            elapsed_sum: 0.0,
            elapsed_n: 0,
        })
    }
}
