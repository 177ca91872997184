//! Stage 4 of the pipeline: measure. Loads the compiled matrix on the device and runs it:
//! warm-up launches, then counted repeats, each with poisoned outputs that are checked
//! afterwards, each timed with CUDA events and tagged with the SMs its blocks ran on.
//!
//! Two modes: **serial** runs one variant at a time on the default stream; **wave**
//! launches every variant of a set at once, one stream each (one block each lands on its
//! own SM), and repeats as successive waves. Produces plain [`VariantResult`]s.

pub mod contention;
pub mod device;
pub mod lock;
pub mod session;
pub mod target;

use crate::compile::Compiled;
use crate::error::GpuError;
use crate::measure::device::Device;
use crate::model::results::{Resources, VariantResult};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, LaunchConfig,
    PushKernelArg,
};
use std::sync::Arc;

/// The FMA operands: acc = acc * A + B converges to B / (1 - A) = 10, so it stays finite
/// for any budget, and neither is a constant the compiler could fold.
pub const OPERAND_A: f32 = 0.9999;
pub const OPERAND_B: f32 = 0.001;
/// A NaN pattern no kernel computes: an output still holding it was never written.
const POISON_F32: u32 = 0x7FBA_DBAD;
const POISON_U64: u64 = u64::MAX;
const POISON_U32: u32 = u32::MAX;

/// A compiled matrix loaded on a device.
pub struct LoadedMatrix {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    compiled: Compiled,
}

fn cuda(what: &str) -> impl Fn(cudarc::driver::DriverError) -> GpuError + '_ {
    move |e| GpuError::cuda(what, e)
}

/// One variant's kernel, buffers and what its launches gave so far.
struct Run {
    v: Variant,
    func: CudaFunction,
    stream: Arc<CudaStream>,
    out: CudaSlice<f32>,
    progress: CudaSlice<u64>,
    elapsed: CudaSlice<u64>,
    sm_ids: CudaSlice<u32>,
    events: Option<(CudaEvent, CudaEvent)>,
    result: VariantResult,
    elapsed_sum: f64,
    elapsed_n: u64,
}

impl LoadedMatrix {
    pub fn load(device: &Device, compiled: Compiled) -> Result<LoadedMatrix, GpuError> {
        let module = device
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin.clone()))
            .map_err(cuda("loading the CUBIN"))?;
        Ok(LoadedMatrix {
            ctx: device.ctx.clone(),
            stream: device.ctx.default_stream(),
            module,
            compiled,
        })
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Runs one variant: `warmup_launches` uncounted, then `repeats` counted launches.
    pub fn measure(&self, v: Variant, s: &ProbeSettings) -> Result<VariantResult, GpuError> {
        let mut run = self.prepare(v, s, self.stream.clone())?;
        for launch in 0..(s.warmup_launches + s.repeats) {
            self.start(&mut run, s)?;
            run.stream
                .synchronize()
                .map_err(cuda(&format!("running {v}")))?;
            self.finish(&mut run, s, launch)?;
        }
        Ok(Self::close(run, s))
    }

    /// Runs every variant at once, one stream each, `warmup_launches + repeats` waves.
    /// A variant that fails to prepare or launch fails the whole wave: the GPU state is
    /// then unknown for all of them.
    pub fn measure_wave(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
    ) -> Result<Vec<VariantResult>, GpuError> {
        let mut runs = Vec::new();
        for &v in vs {
            let stream = self.ctx.new_stream().map_err(cuda("creating a stream"))?;
            runs.push(self.prepare(v, s, stream)?);
        }
        for launch in 0..(s.warmup_launches + s.repeats) {
            for run in runs.iter_mut() {
                self.start(run, s)?;
            }
            for run in runs.iter() {
                run.stream
                    .synchronize()
                    .map_err(cuda(&format!("running {}", run.v)))?;
            }
            for run in runs.iter_mut() {
                self.finish(run, s, launch)?;
            }
        }
        Ok(runs.into_iter().map(|r| Self::close(r, s)).collect())
    }

    fn prepare(
        &self,
        v: Variant,
        s: &ProbeSettings,
        stream: Arc<CudaStream>,
    ) -> Result<Run, GpuError> {
        let name = v.name();
        let func = self
            .module
            .load_function(&name)
            .map_err(|e| GpuError::Variant(format!("kernel {name} not in the CUBIN: {e}")))?;
        let report = self.compiled.reports.get(&name).ok_or_else(|| {
            GpuError::Variant(format!(
                "the ptxas log has no report for {name} ({} reports, {} log lines)",
                self.compiled.reports.len(),
                self.compiled.log.lines().count()
            ))
        })?;
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
        let outputs = (s.blocks * s.block_threads * v.outputs_per_thread()) as usize;
        let warps = s.warps() as usize;
        Ok(Run {
            v,
            func,
            out: stream
                .alloc_zeros::<f32>(outputs)
                .map_err(cuda("allocating outputs"))?,
            progress: stream
                .alloc_zeros::<u64>(warps)
                .map_err(cuda("allocating progress"))?,
            elapsed: stream
                .alloc_zeros::<u64>(warps)
                .map_err(cuda("allocating timers"))?,
            sm_ids: stream
                .alloc_zeros::<u32>(warps)
                .map_err(cuda("allocating SM ids"))?,
            stream,
            events: None,
            result,
            elapsed_sum: 0.0,
            elapsed_n: 0,
        })
    }

    /// Poisons the outputs and launches, between two timing events.
    fn start(&self, run: &mut Run, s: &ProbeSettings) -> Result<(), GpuError> {
        let st = run.stream.clone();
        st.memcpy_htod(
            &vec![f32::from_bits(POISON_F32); run.out.len()],
            &mut run.out,
        )
        .map_err(cuda("poisoning outputs"))?;
        let warps = vec![POISON_U64; run.progress.len()];
        st.memcpy_htod(&warps, &mut run.progress)
            .map_err(cuda("poisoning progress"))?;
        st.memcpy_htod(&warps, &mut run.elapsed)
            .map_err(cuda("poisoning timers"))?;
        st.memcpy_htod(&vec![POISON_U32; run.sm_ids.len()], &mut run.sm_ids)
            .map_err(cuda("poisoning SM ids"))?;
        let timed = Some(sys::CUevent_flags::CU_EVENT_DEFAULT);
        let begin = self.ctx.new_event(timed).map_err(cuda("creating events"))?;
        let end = self.ctx.new_event(timed).map_err(cuda("creating events"))?;
        let cfg = LaunchConfig {
            grid_dim: (s.blocks, 1, 1),
            block_dim: (s.block_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let budget = s.budget_cycles as i64;
        begin.record(&st).map_err(cuda("recording an event"))?;
        let mut b = st.launch_builder(&run.func);
        b.arg(&OPERAND_A)
            .arg(&OPERAND_B)
            .arg(&budget)
            .arg(&mut run.out)
            .arg(&mut run.progress)
            .arg(&mut run.elapsed)
            .arg(&mut run.sm_ids);
        unsafe { b.launch(cfg) }.map_err(cuda(&format!("launching {}", run.v)))?;
        end.record(&st).map_err(cuda("recording an event"))?;
        run.events = Some((begin, end));
        Ok(())
    }

    /// Reads one finished launch back and checks it.
    fn finish(&self, run: &mut Run, s: &ProbeSettings, launch: u32) -> Result<(), GpuError> {
        let st = run.stream.clone();
        let (begin, end) = run
            .events
            .take()
            .ok_or_else(|| GpuError::Variant("finish without start".into()))?;
        let ms = begin
            .elapsed_ms(&end)
            .map_err(cuda("reading event times"))? as f64;
        let out = st.clone_dtoh(&run.out).map_err(cuda("reading outputs"))?;
        let progress = st
            .clone_dtoh(&run.progress)
            .map_err(cuda("reading progress"))?;
        let elapsed = st
            .clone_dtoh(&run.elapsed)
            .map_err(cuda("reading timers"))?;
        let sm_ids = st.clone_dtoh(&run.sm_ids).map_err(cuda("reading SM ids"))?;
        let counted = launch >= s.warmup_launches;
        let tag = if counted {
            format!("repeat {}", launch - s.warmup_launches)
        } else {
            format!("warm-up {launch}")
        };
        run.result
            .output_problems
            .extend(check_outputs(&tag, &out, &progress, &elapsed));
        if counted {
            run.result.launch_ms.push(ms);
            for &ns in elapsed.iter().filter(|&&ns| ns != POISON_U64 && ns > 0) {
                run.elapsed_sum += ns as f64;
                run.elapsed_n += 1;
            }
            run.result.samples.push(
                progress
                    .iter()
                    .map(|&p| if p == POISON_U64 { 0 } else { p })
                    .collect(),
            );
            // The SM of each block (its first warp's).
            let per_block = (s.block_threads / 32) as usize;
            run.result
                .sm_ids
                .push(sm_ids.iter().step_by(per_block.max(1)).copied().collect());
        }
        Ok(())
    }

    fn close(run: Run, s: &ProbeSettings) -> VariantResult {
        let mut r = run.result;
        let samples = std::mem::take(&mut r.samples);
        let fresh = VariantResult::measured(run.v, samples);
        r.mean_progress = fresh.mean_progress;
        r.summary = fresh.summary;
        r.samples = fresh.samples;
        r.sm_clock_mhz = (run.elapsed_n > 0)
            .then(|| s.budget_cycles as f64 / (run.elapsed_sum / run.elapsed_n as f64) * 1000.0);
        r
    }
}

/// What is wrong with one launch's outputs: elements never written (still poisoned) or not
/// finite, warps that wrote no progress.
pub fn check_outputs(tag: &str, out: &[f32], progress: &[u64], elapsed: &[u64]) -> Vec<String> {
    let mut problems = Vec::new();
    let unwritten = out.iter().filter(|x| x.to_bits() == POISON_F32).count();
    let non_finite = out
        .iter()
        .filter(|x| x.to_bits() != POISON_F32 && !x.is_finite())
        .count();
    if unwritten > 0 {
        problems.push(format!(
            "{tag}: {unwritten} of {} output elements never written",
            out.len()
        ));
    }
    if non_finite > 0 {
        problems.push(format!(
            "{tag}: {non_finite} of {} output elements not finite",
            out.len()
        ));
    }
    let silent = progress
        .iter()
        .zip(elapsed)
        .filter(|(&p, &e)| p == POISON_U64 || e == POISON_U64)
        .count();
    if silent > 0 {
        problems.push(format!(
            "{tag}: {silent} of {} warps wrote no progress",
            progress.len()
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisoned_and_non_finite_outputs_are_reported() {
        let good = [1.0f32, 2.0];
        assert!(check_outputs("r", &good, &[5], &[9]).is_empty());
        let unwritten = [1.0f32, f32::from_bits(POISON_F32)];
        assert_eq!(
            check_outputs("r", &unwritten, &[5], &[9]),
            vec!["r: 1 of 2 output elements never written"]
        );
        let inf = [f32::INFINITY, f32::NAN];
        assert_eq!(
            check_outputs("r", &inf, &[5], &[9]),
            vec!["r: 2 of 2 output elements not finite"]
        );
        assert_eq!(
            check_outputs("r", &good, &[5, POISON_U64], &[9, 9]),
            vec!["r: 1 of 2 warps wrote no progress"]
        );
    }

    #[test]
    fn operands_keep_the_chain_finite_and_away_from_trivial_values() {
        let mut acc = OPERAND_B;
        for _ in 0..1_000_000 {
            acc = acc.mul_add(OPERAND_A, OPERAND_B);
        }
        assert!(acc.is_finite() && acc > 1.0 && acc < 11.0, "{acc}");
    }
}
