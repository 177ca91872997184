//! Stage 4 of the pipeline: measure. Loads the compiled matrix on the device and runs one
//! variant at a time: warm-up launches, then counted repeats, each with poisoned outputs
//! that are checked afterwards. Produces plain [`VariantResult`]s.

use crate::compile::Compiled;
use crate::device::Device;
use crate::profile::ProbeSettings;
use crate::results::{Resources, VariantResult};
use crate::variant::Variant;
use cudarc::driver::{sys, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// The FMA operands: acc = acc * A + B converges to B / (1 - A) = 10, so it stays finite
/// for any budget, and neither is a constant the compiler could fold.
pub const OPERAND_A: f32 = 0.9999;
pub const OPERAND_B: f32 = 0.001;
/// A NaN pattern no kernel computes: an output still holding it was never written.
const POISON_F32: u32 = 0x7FBA_DBAD;
const POISON_U64: u64 = u64::MAX;

/// A compiled matrix loaded on a device.
pub struct Probe {
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    compiled: Compiled,
}

fn cuda(what: &str) -> impl Fn(cudarc::driver::DriverError) -> String + '_ {
    move |e| format!("CUDA error while {what}: {e}")
}

impl Probe {
    pub fn load(device: &Device, compiled: Compiled) -> Result<Probe, String> {
        let module = device
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_binary(compiled.cubin.clone()))
            .map_err(cuda("loading the CUBIN"))?;
        Ok(Probe {
            stream: device.ctx.default_stream(),
            module,
            compiled,
        })
    }

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Runs one variant: `warmup_launches` uncounted, then `repeats` counted launches.
    pub fn measure(&self, v: Variant, s: &ProbeSettings) -> Result<VariantResult, String> {
        let name = v.name();
        let func = self
            .module
            .load_function(&name)
            .map_err(|e| format!("kernel {name} not in the CUBIN: {e}"))?;
        let report = self.compiled.reports.get(&name).ok_or_else(|| {
            format!(
                "the ptxas log has no report for {name} ({} reports, {} log lines)",
                self.compiled.reports.len(),
                self.compiled.log.lines().count()
            )
        })?;
        let local = func
            .get_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
            .map_err(cuda("reading the local memory size"))?;
        let regs = func
            .num_regs()
            .map_err(cuda("reading the register count"))?;
        let mut output_problems = Vec::new();
        if regs as u32 != report.registers {
            output_problems.push(format!(
                "loaded function uses {regs} registers, ptxas reported {}",
                report.registers
            ));
        }
        let resources = Resources {
            registers: regs as u32,
            stack_frame_bytes: report.stack_frame_bytes,
            spill_store_bytes: report.spill_store_bytes,
            spill_load_bytes: report.spill_load_bytes,
            local_bytes: local as u32,
        };

        let threads = (s.blocks * s.block_threads) as usize;
        let warps = s.warps() as usize;
        let st = &self.stream;
        let mut out = st
            .alloc_zeros::<f32>(threads)
            .map_err(cuda("allocating outputs"))?;
        let mut progress = st
            .alloc_zeros::<u64>(warps)
            .map_err(cuda("allocating progress"))?;
        let mut elapsed = st
            .alloc_zeros::<u64>(warps)
            .map_err(cuda("allocating timers"))?;
        let poison_out = vec![f32::from_bits(POISON_F32); threads];
        let poison_warps = vec![POISON_U64; warps];
        let cfg = LaunchConfig {
            grid_dim: (s.blocks, 1, 1),
            block_dim: (s.block_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let budget = s.budget_cycles as i64;
        let mut samples = Vec::new();
        let mut launch_ms = Vec::new();
        let mut elapsed_sum = 0.0f64;
        let mut elapsed_n = 0u64;
        for launch in 0..(s.warmup_launches + s.repeats) {
            st.memcpy_htod(&poison_out, &mut out)
                .map_err(cuda("poisoning outputs"))?;
            st.memcpy_htod(&poison_warps, &mut progress)
                .map_err(cuda("poisoning progress"))?;
            st.memcpy_htod(&poison_warps, &mut elapsed)
                .map_err(cuda("poisoning timers"))?;
            let start = st
                .context()
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda("creating events"))?;
            let end = st
                .context()
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda("creating events"))?;
            start.record(st).map_err(cuda("recording an event"))?;
            let mut b = st.launch_builder(&func);
            b.arg(&OPERAND_A)
                .arg(&OPERAND_B)
                .arg(&budget)
                .arg(&mut out)
                .arg(&mut progress)
                .arg(&mut elapsed);
            unsafe { b.launch(cfg) }.map_err(cuda(&format!("launching {name}")))?;
            end.record(st).map_err(cuda("recording an event"))?;
            st.synchronize().map_err(cuda(&format!("running {name}")))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(cuda("reading event times"))? as f64;
            let host_out = st.clone_dtoh(&out).map_err(cuda("reading outputs"))?;
            let host_progress = st.clone_dtoh(&progress).map_err(cuda("reading progress"))?;
            let host_elapsed = st.clone_dtoh(&elapsed).map_err(cuda("reading timers"))?;
            let counted = launch >= s.warmup_launches;
            let tag = if counted {
                format!("repeat {}", launch - s.warmup_launches)
            } else {
                format!("warm-up {launch}")
            };
            output_problems.extend(check_outputs(
                &tag,
                &host_out,
                &host_progress,
                &host_elapsed,
            ));
            if counted {
                launch_ms.push(ms);
                for &ns in host_elapsed
                    .iter()
                    .filter(|&&ns| ns != POISON_U64 && ns > 0)
                {
                    elapsed_sum += ns as f64;
                    elapsed_n += 1;
                }
                samples.push(
                    host_progress
                        .iter()
                        .map(|&p| if p == POISON_U64 { 0 } else { p })
                        .collect(),
                );
            }
        }
        let mut r = VariantResult::measured(v, samples);
        r.resources = Some(resources);
        r.output_problems = output_problems;
        r.launch_ms = launch_ms;
        r.sass = self.compiled.sass.summary(&name).cloned();
        r.sm_clock_mhz = (elapsed_n > 0)
            .then(|| s.budget_cycles as f64 / (elapsed_sum / elapsed_n as f64) * 1000.0);
        Ok(r)
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
