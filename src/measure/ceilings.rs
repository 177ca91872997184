//! The ceilings microbenchmark on a device: `kernels/ceilings.cu` compiled by NVRTC for
//! the device's architecture, its two kernels launched a few times each, and the best of
//! each figure kept ([`crate::model::ceilings::Ceilings`]): the lowest cycles per
//! dependent FFMA and the highest issue rate, since a launch can only be slowed (by a
//! clock change or another process's work), never sped up.

use super::cuda;
use super::device::{kernel_driver_version, Device};
use crate::compile;
use crate::error::GpuError;
use crate::model::ceilings::Ceilings;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;

/// FFMAs per loop iteration of each kernel (`CEILINGS_CHAIN`; `CEILINGS_STEPS` x
/// `CEILINGS_ILP` per thread), as `kernels/ceilings.cu` defines them.
const CHAIN: u64 = 256;
const ISSUE_PER_ITERATION: u64 = 32 * 8;
/// Loop iterations: a few million cycles per launch, milliseconds.
const LATENCY_ITERATIONS: i32 = 4096;
const ISSUE_ITERATIONS: i32 = 2048;
/// The warps of the issue-rate block: 32 (1024 threads, the most one block may have),
/// eight per scheduler on a GPU with four, each with eight independent chains.
pub(crate) const ISSUE_WARPS: u32 = 32;
/// Launches of each kernel; the first warms up and is not counted.
const LAUNCHES: usize = 6;

/// Measures `device`'s ceilings.
pub(crate) fn measure(device: &Device) -> Result<Ceilings, GpuError> {
    let (latency_fn, issue_fn) = kernels(device)?;
    let stream = device.ctx.default_stream();
    let mut buffers = Buffers::new(&stream)?;
    let mut latency = f64::INFINITY;
    let mut issue = 0.0f64;
    for launch in 0..LAUNCHES {
        let elapsed = buffers.latency(&stream, &latency_fn)?;
        let (s, e) = buffers.issue(&stream, &issue_fn)?;
        if launch == 0 {
            continue;
        }
        let ffmas = LATENCY_ITERATIONS as u64 * CHAIN;
        latency = latency.min(elapsed as f64 / ffmas as f64);
        let span = e.iter().max().copied().unwrap_or(0) - s.iter().min().copied().unwrap_or(0);
        let warp_ffmas = ISSUE_WARPS as u64 * ISSUE_ITERATIONS as u64 * ISSUE_PER_ITERATION;
        if span > 0 {
            issue = issue.max(warp_ffmas as f64 / span as f64);
        }
    }
    Ok(Ceilings {
        ffma_latency_cycles: latency,
        ffma_issue_per_cycle_per_sm: issue,
        issue_warps: ISSUE_WARPS,
        gpu_name: device.identity.name.clone(),
        compute_capability: device.identity.compute_capability.clone(),
        driver_version: kernel_driver_version(),
        nvrtc_version: device.nvrtc_version.clone(),
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
    })
}

/// The two kernels, compiled for `device` and loaded: `ffma_latency` and `ffma_issue`.
fn kernels(device: &Device) -> Result<(CudaFunction, CudaFunction), GpuError> {
    let (major, minor) = device.capability;
    let options = compile::options(major, minor);
    let (cubin, _log) = compile::compile_source(
        compile::CEILINGS_SOURCE,
        c"accprobe_ceilings.cu",
        "the ceilings microbenchmark",
        &options,
    )
    .map_err(|e| GpuError::Compile(e.to_string()))?;
    let module = device
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .map_err(cuda("loading the ceilings CUBIN"))?;
    let latency_fn = module
        .load_function("ffma_latency")
        .map_err(cuda("finding ffma_latency"))?;
    let issue_fn = module
        .load_function("ffma_issue")
        .map_err(cuda("finding ffma_issue"))?;
    Ok((latency_fn, issue_fn))
}

/// The kernels' buffers on the device: their sink and their clocks.
struct Buffers {
    out: CudaSlice<f32>,
    cycles: CudaSlice<i64>,
    starts: CudaSlice<i64>,
    ends: CudaSlice<i64>,
}

/// One block of `threads` threads.
fn one_block(threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Buffers {
    fn new(stream: &Arc<CudaStream>) -> Result<Buffers, GpuError> {
        let threads = ISSUE_WARPS * 32;
        let alloc = cuda("allocating the ceilings' buffers");
        Ok(Buffers {
            out: stream
                .alloc_zeros::<f32>(threads as usize)
                .map_err(&alloc)?,
            cycles: stream.alloc_zeros::<i64>(1).map_err(&alloc)?,
            starts: stream
                .alloc_zeros::<i64>(ISSUE_WARPS as usize)
                .map_err(&alloc)?,
            ends: stream
                .alloc_zeros::<i64>(ISSUE_WARPS as usize)
                .map_err(&alloc)?,
        })
    }

    /// One launch of `ffma_latency`: the cycles its chain took.
    fn latency(&mut self, stream: &Arc<CudaStream>, f: &CudaFunction) -> Result<i64, GpuError> {
        let (a, b) = (super::OPERAND_A, super::OPERAND_B);
        let mut l = stream.launch_builder(f);
        l.arg(&a)
            .arg(&b)
            .arg(&LATENCY_ITERATIONS)
            .arg(&mut self.out)
            .arg(&mut self.cycles);
        unsafe { l.launch(one_block(32)) }.map_err(cuda("launching ffma_latency"))?;
        stream.synchronize().map_err(cuda("running ffma_latency"))?;
        let elapsed = stream
            .clone_dtoh(&self.cycles)
            .map_err(cuda("reading ffma_latency's clock"))?;
        Ok(elapsed[0])
    }

    /// One launch of `ffma_issue`: each warp's start and end clock.
    fn issue(
        &mut self,
        stream: &Arc<CudaStream>,
        f: &CudaFunction,
    ) -> Result<(Vec<i64>, Vec<i64>), GpuError> {
        let (a, b) = (super::OPERAND_A, super::OPERAND_B);
        let mut i = stream.launch_builder(f);
        i.arg(&a)
            .arg(&b)
            .arg(&ISSUE_ITERATIONS)
            .arg(&mut self.out)
            .arg(&mut self.starts)
            .arg(&mut self.ends);
        unsafe { i.launch(one_block(ISSUE_WARPS * 32)) }.map_err(cuda("launching ffma_issue"))?;
        stream.synchronize().map_err(cuda("running ffma_issue"))?;
        let s = stream
            .clone_dtoh(&self.starts)
            .map_err(cuda("reading ffma_issue's clocks"))?;
        let e = stream
            .clone_dtoh(&self.ends)
            .map_err(cuda("reading ffma_issue's clocks"))?;
        Ok((s, e))
    }
}
