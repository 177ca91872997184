//! Stage 4 of the pipeline: measure. Loads the compiled matrix on the device and runs it:
//! warm-up launches, then counted repeats, each with poisoned outputs that are checked
//! afterwards, each timed with CUDA events and tagged with the SMs its blocks ran on.
//!
//! Two modes, one engine (`LoadedMatrix::run`): **serial** runs one variant at a
//! time, each launch timed by CUDA events; **wave** launches every variant of a set at
//! once, one stream each (one block each lands on its own SM), repeats as successive
//! waves, and times each launch by the kernel's own `%globaltimer` (events would hold
//! launches back in the driver's hardware queues). Produces plain [`VariantResult`]s.

pub mod contention;
pub mod device;
pub mod lock;
pub mod session;
pub mod target;

use crate::compile::Compiled;
use crate::error::GpuError;
use crate::measure::device::Device;
use crate::model::results::{LaunchTimer, Resources, VariantResult};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use cudarc::driver::{
    result, sys, CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, LaunchConfig,
    PushKernelArg,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The FMA operands: acc = acc * A + B converges to B / (1 - A) = 10, so it stays finite
/// for any budget, and neither is a constant the compiler could fold.
pub const OPERAND_A: f32 = 0.9999;
pub const OPERAND_B: f32 = 0.001;
/// A NaN pattern no kernel computes: an output still holding it was never written.
const POISON_F32: u32 = 0x7FBA_DBAD;
const POISON_U64: u64 = u64::MAX;

/// A compiled matrix loaded on a device, with the streams its sets run on.
pub struct LoadedMatrix {
    ctx: Arc<CudaContext>,
    /// One per part of the compiled matrix, in order.
    modules: Vec<Arc<CudaModule>>,
    compiled: Compiled,
    /// Made with the module, so that measuring does not make (and destroy) them: the
    /// copy stream first, then one per kernel of the CUBIN for the variants of a set.
    streams: Vec<Arc<CudaStream>>,
}

fn cuda(what: &str) -> impl Fn(cudarc::driver::DriverError) -> GpuError + '_ {
    move |e| GpuError::cuda(what, e)
}

/// Where one variant's buffers lie in the set's one allocation (byte offsets; each region
/// aligned to 256 bytes).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Regions {
    out: usize,
    outputs: usize,
    progress: usize,
    elapsed: usize,
    sm_ids: usize,
    warps: usize,
}

impl Regions {
    /// The regions of every variant of a set, one after another, and the total size.
    fn lay_out(vs: &[Variant], s: &ProbeSettings) -> (Vec<Regions>, usize) {
        let align = |x: usize| x.div_ceil(256) * 256;
        let warps = s.warps() as usize;
        let mut at = 0;
        let regions = vs
            .iter()
            .map(|v| {
                let outputs = (s.blocks * s.block_threads * v.outputs_per_thread()) as usize;
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
    fn poison(&self, image: &mut [u8]) {
        for x in image[self.out..self.out + 4 * self.outputs].chunks_exact_mut(4) {
            x.copy_from_slice(&POISON_F32.to_ne_bytes());
        }
        image[self.progress..self.progress + 8 * self.warps].fill(0xFF);
        image[self.elapsed..self.elapsed + 8 * self.warps].fill(0xFF);
        image[self.sm_ids..self.sm_ids + 4 * self.warps].fill(0xFF);
    }

    /// Where the variant's last region ends (its regions are contiguous from `out`).
    fn end(&self) -> usize {
        self.sm_ids + (4 * self.warps).div_ceil(256) * 256
    }

    /// One launch's outputs, progress, timers and SM ids out of a read-back that starts at
    /// byte `base` of the set's layout.
    fn read(&self, back: &[u8], base: usize) -> (Vec<f32>, Vec<u64>, Vec<u64>, Vec<u32>) {
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
struct SetMemory {
    ctx: Arc<CudaContext>,
    device: sys::CUdeviceptr,
    /// The poison image, copied to the device before each launch.
    poison: *mut u8,
    bytes: usize,
    /// Every wave's read-back, one after another.
    back: *mut u8,
    back_bytes: usize,
}

impl SetMemory {
    fn new(ctx: &Arc<CudaContext>, image: &[u8], back_bytes: usize) -> Result<SetMemory, GpuError> {
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

    fn poison(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.poison, self.bytes) }
    }

    /// `len` bytes of the read-back at `at`, to copy into (the device writes them).
    fn back_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts_mut(self.back.add(at), len) }
    }

    /// `len` bytes of the read-back at `at`, once the context was synchronised.
    fn back(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.back_bytes);
        unsafe { std::slice::from_raw_parts(self.back.add(at), len) }
    }

    fn at(&self, offset: usize) -> u64 {
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

/// How the launches of a set are grouped into waves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Schedule {
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
struct Wave {
    slots: std::ops::Range<usize>,
    launch: usize,
    lo: usize,
    hi: usize,
}

impl Wave {
    /// The waves of `launches` launches of each slot (its regions in `placed`).
    fn plan(placed: &[Regions], launches: usize, schedule: Schedule) -> Vec<Wave> {
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

    fn bytes(&self) -> usize {
        self.hi - self.lo
    }

    /// What the GPU was doing for this wave, for an error it reports: the variant in
    /// serial mode, so that a kernel that faults is named.
    fn running(&self, slots: &[Slot]) -> String {
        let vs: Vec<Variant> = slots[self.slots.clone()].iter().map(|x| x.v).collect();
        self.describe(&vs)
    }

    fn describe(&self, vs: &[Variant]) -> String {
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
    /// checked before the next one lands (see [`LoadedMatrix::run`]), so that it does not
    /// grow with the repeats.
    fn read_back_bytes(waves: &[Wave]) -> usize {
        waves.iter().map(Wave::bytes).max().unwrap_or(0)
    }
}

/// One variant of a set: its kernel, stream and what its launches gave.
struct Slot {
    v: Variant,
    func: CudaFunction,
    stream: Arc<CudaStream>,
    regions: Regions,
    /// Recorded after the variant's launches of a wave were queued; the copy stream waits
    /// on it before reading back.
    done: CudaEvent,
    /// Per launch, with [`LaunchTimer::Events`].
    events: Vec<(CudaEvent, CudaEvent)>,
    result: VariantResult,
    elapsed_sum: f64,
    elapsed_n: u64,
}

impl LoadedMatrix {
    pub fn load(device: &Device, compiled: Compiled) -> Result<LoadedMatrix, GpuError> {
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

    pub fn compiled(&self) -> &Compiled {
        &self.compiled
    }

    /// Serial mode: one variant at a time (all its launches, then the next variant's),
    /// each launch timed by CUDA events, as one set. Every variant gets its own outcome: a
    /// variant that cannot be prepared (not in the CUBIN, no ptxas report) gets its own
    /// error, and when the set fails as a whole (a launch the GPU refuses, say) each
    /// variant is measured again alone, so that the error is the failing variant's and the
    /// others are measured (see [`each_its_own`]).
    pub fn measure_serial(
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
        let (regions, _) = Regions::lay_out(vs, s);
        let mut slots = Vec::new();
        let mut outcome: Vec<Option<Result<VariantResult, GpuError>>> = Vec::new();
        for (i, (&v, &r)) in vs.iter().zip(&regions).enumerate() {
            match self.slot(i, v, r, LaunchTimer::Events, launches) {
                Ok(slot) => {
                    slots.push(slot);
                    outcome.push(None);
                }
                Err(e) => outcome.push(Some(Err(e))),
            }
        }
        let mut measured = self
            .run(&regions, slots, s, LaunchTimer::Events, Schedule::OneByOne)
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

    /// Wave mode: every variant at once, one stream each, each launch timed by the kernel.
    /// A variant the GPU refuses to load or launch gets its own error and the wave runs
    /// again without it; any other failure is every variant's (see [`without_refused`]).
    pub fn measure_wave(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
    ) -> Vec<Result<VariantResult, GpuError>> {
        without_refused(
            vs,
            |set| self.wave_set(set, s),
            || self.ctx.synchronize().is_ok(),
        )
    }

    /// [`Self::measure_wave`] of one set: `Err` when the wave failed, with the variant to
    /// blame when it is known (one the GPU refused to load or launch).
    fn wave_set(
        &self,
        vs: &[Variant],
        s: &ProbeSettings,
    ) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)> {
        crate::trace::mark(format!("preparing a wave of {} variant(s)", vs.len()));
        let launches = s.launches() as usize;
        let (regions, _) = Regions::lay_out(vs, s);
        let slots = vs
            .iter()
            .zip(&regions)
            .enumerate()
            .map(|(i, (&v, &r))| {
                self.slot(i, v, r, LaunchTimer::Kernel, launches)
                    .map_err(|e| (Some(v), e))
            })
            .collect::<Result<Vec<Slot>, _>>()?;
        self.run(&regions, slots, s, LaunchTimer::Kernel, Schedule::Together)
    }

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
    fn run(
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
        let launches = s.launches() as usize;
        // The variants' regions lie one after another: the last ends the set's bytes.
        let bytes = regions.last().map_or(0, Regions::end);
        let mut image = vec![0u8; bytes];
        for r in regions {
            r.poison(&mut image);
        }
        let placed: Vec<Regions> = slots.iter().map(|x| x.regions).collect();
        let waves = Wave::plan(&placed, launches, schedule);
        let back_bytes = Wave::read_back_bytes(&waves);
        let mut memory = SetMemory::new(&self.ctx, &image, back_bytes)?;
        let device = memory.device;
        let copies = self.stream(0)?;
        let untimed = Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
        let ready = self
            .ctx
            .new_event(untimed)
            .map_err(cuda("creating events"))?;
        let cfg = LaunchConfig {
            grid_dim: (s.blocks, 1, 1),
            block_dim: (s.block_threads, 1, 1),
            shared_mem_bytes: 0,
        };
        let budget = s.budget_cycles as i64;
        crate::trace::mark(format!(
            "{} variant(s) set up: {bytes} bytes, {} wave(s)",
            slots.len(),
            waves.len()
        ));
        // The wave whose read-back is queued and not yet checked.
        let mut landing: Option<&Wave> = None;
        for wave in &waves {
            unsafe {
                result::memcpy_htod_async(
                    device + wave.lo as u64,
                    &memory.poison()[wave.lo..wave.hi],
                    copies.cu_stream(),
                )
            }
            .map_err(cuda("poisoning outputs"))?;
            ready.record(&copies).map_err(cuda("recording an event"))?;
            // The host waits for the poison (and so for the wave before and its
            // read-back), then launches: the kernels start as they are queued,
            // microseconds apart. Released together by the event instead, 69 kernels
            // starting at the same instant put 6 of 8 warps of 1.7% of the launches into a
            // slower loop rate (H200, 2026-11-30).
            ready.synchronize().map_err(|e| match landing {
                // An error of the kernels (an illegal address) shows here, after the wave
                // that made it: named, as far as the wave says.
                Some(before) => GpuError::cuda(before.running(&slots), e),
                None => GpuError::cuda("poisoning outputs", e),
            })?;
            // Every launch of the wave is queued before any `done`: an event waits in its
            // hardware queue for the work before it, and would hold back the launches
            // queued behind it.
            // No stream waits on `ready`: the host saw it complete, so the poison is
            // written before any of these launches is queued.
            for slot in &mut slots[wave.slots.clone()] {
                let st = slot.stream.clone();
                if let Some((begin, _)) = slot.events.get(wave.launch) {
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
                    .arg(&budget)
                    .arg(&out)
                    .arg(&progress)
                    .arg(&elapsed)
                    .arg(&sm_ids);
                unsafe { b.launch(cfg) }.map_err(|e| {
                    *blame = Some(slot.v);
                    GpuError::cuda(format!("launching {}", slot.v), e)
                })?;
                if let Some((_, end)) = slot.events.get(wave.launch) {
                    end.record(&st).map_err(cuda("recording an event"))?;
                }
            }
            for slot in &slots[wave.slots.clone()] {
                slot.done
                    .record(&slot.stream)
                    .map_err(cuda("recording an event"))?;
                copies
                    .wait(&slot.done)
                    .map_err(cuda("waiting for an event"))?;
            }
            // The wave before landed before `ready` completed: checked now, before this
            // wave's read-back replaces it.
            if let Some(before) = landing.take() {
                Self::check_wave(&mut slots, before, &memory, s)?;
            }
            unsafe {
                result::memcpy_dtoh_async(
                    memory.back_mut(0, wave.bytes()),
                    device + wave.lo as u64,
                    copies.cu_stream(),
                )
            }
            .map_err(cuda("reading outputs"))?;
            landing = Some(wave);
        }
        if let Some(last) = landing {
            copies
                .synchronize()
                .map_err(|e| GpuError::cuda(last.running(&slots), e))?;
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

    /// Stream `i` of the matrix's own (0: the copy stream), or a new one past them.
    fn stream(&self, i: usize) -> Result<Arc<CudaStream>, GpuError> {
        match self.streams.get(i) {
            Some(st) => Ok(st.clone()),
            None => self.ctx.new_stream().map_err(cuda("creating a stream")),
        }
    }

    /// The `index`th variant of a set: its kernel, stream, regions and events.
    fn slot(
        &self,
        index: usize,
        v: Variant,
        regions: Regions,
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
        let untimed = Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING);
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
            regions,
            done: self
                .ctx
                .new_event(untimed)
                .map_err(cuda("creating events"))?,
            events,
            result,
            elapsed_sum: 0.0,
            elapsed_n: 0,
        })
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
        let per_block = (s.block_threads / 32) as usize;
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

/// The outcome of each of `vs` in serial mode, from `run`, which measures a set of them
/// and fails (`Err`) when the set fails as a whole. A set that fails is measured again
/// one variant at a time, so that a variant the GPU refuses (too many registers for the
/// block size, say) fails alone and the others are measured, in the harness, in
/// `cargo xtask probe` and in a nextest run's shared measurement alike. When the context
/// is no longer `healthy` (a sticky error), nothing can run again: every variant gets the
/// set's error.
fn each_its_own(
    vs: &[Variant],
    mut run: impl FnMut(&[Variant]) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError>,
    healthy: impl FnOnce() -> bool,
) -> Vec<Result<VariantResult, GpuError>> {
    let whole = match run(vs) {
        Ok(rs) => return rs,
        Err(e) => e,
    };
    if vs.len() <= 1 || !healthy() {
        return vs.iter().map(|_| Err(whole.clone())).collect();
    }
    vs.iter()
        .map(|v| match run(std::slice::from_ref(v)) {
            Ok(rs) => rs.into_iter().next().unwrap_or_else(|| {
                Err(GpuError::Variant(format!(
                    "measuring {v} alone gave no result"
                )))
            }),
            Err(e) => Err(e),
        })
        .collect()
}

/// How `n` variants of `blocks` blocks each are split into waves on a GPU of `sms` SMs: as
/// few waves as hold no more blocks than there are SMs, so that every block has an SM to
/// itself (with more, blocks would share SMs and measure each other). A variant with more
/// blocks than the GPU has SMs runs alone.
pub fn wave_sets(n: usize, blocks: u32, sms: u32) -> Vec<std::ops::Range<usize>> {
    let per = (sms / blocks.max(1)).max(1) as usize;
    (0..n).step_by(per).map(|a| a..(a + per).min(n)).collect()
}

/// The variants of one wave (indices into `rs`) that had a block on an SM another block of
/// the wave also ran on, in some counted launch, each with what it shared. The block
/// scheduler spread every wave seen so far (on the H200, 2026-11-30: 132 blocks of 66
/// variants on its 132 SMs in every launch), but nothing promises it.
pub fn shared_sms(rs: &[Result<VariantResult, GpuError>]) -> BTreeMap<usize, String> {
    let mut shared = BTreeMap::new();
    let launches = rs
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.sm_ids.len())
        .max()
        .unwrap_or(0);
    for k in 0..launches {
        let mut on: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, r) in rs.iter().enumerate() {
            if let Ok(r) = r {
                for &sm in r.sm_ids.get(k).into_iter().flatten() {
                    on.entry(sm).or_default().push(i);
                }
            }
        }
        for (sm, users) in on.iter().filter(|(_, u)| u.len() > 1) {
            for &i in users {
                shared.entry(i).or_insert_with(|| {
                    let others: Vec<String> = users
                        .iter()
                        .filter(|&&j| j != i)
                        .filter_map(|&j| rs[j].as_ref().ok().map(|r| r.name.clone()))
                        .collect();
                    let with = if others.is_empty() {
                        "another of its own blocks".to_string()
                    } else {
                        others.join(", ")
                    };
                    format!("repeat {k}: a block ran on SM {sm} with {with}")
                });
            }
        }
    }
    shared
}

/// Wave mode's guard on its own premise, one block per SM: the variants of a wave whose
/// blocks shared an SM are measured again as a smaller wave of their own, and a variant
/// that shares one there too (or when every variant of the wave shared) keeps its result
/// with the sharing as an output problem, which fails its validity case.
pub fn own_sms(
    vs: &[Variant],
    mut rs: Vec<Result<VariantResult, GpuError>>,
    rerun: impl FnOnce(&[Variant]) -> Vec<Result<VariantResult, GpuError>>,
) -> Vec<Result<VariantResult, GpuError>> {
    let shared = shared_sms(&rs);
    if shared.is_empty() {
        return rs;
    }
    let again: Vec<usize> = shared.keys().copied().collect();
    let measured = rs.iter().filter(|r| r.is_ok()).count();
    let mut left = shared;
    if again.len() < measured {
        let subset: Vec<Variant> = again.iter().map(|&i| vs[i]).collect();
        let redo = rerun(&subset);
        let still = shared_sms(&redo);
        for (n, (&i, r)) in again.iter().zip(redo).enumerate() {
            if r.is_ok() && !still.contains_key(&n) {
                rs[i] = r;
                left.remove(&i);
            }
        }
    }
    for (i, why) in left {
        if let Ok(r) = &mut rs[i] {
            r.output_problems.push(format!(
                "{why}: the wave's blocks did not each get an SM of their own, so it measured \
                 them against each other (measure serially, or with fewer variants or blocks)"
            ));
        }
    }
    rs
}

/// Wave mode's answer to a wave that failed: when the failure names a variant (one the GPU
/// refused to load or launch) and the context is still usable, that variant gets the error
/// and the wave is run again without it, so the others are still measured together. A
/// failure that names none, or leaves the context unusable, is every variant's error.
fn without_refused(
    vs: &[Variant],
    mut run: impl FnMut(&[Variant]) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)>,
    mut healthy: impl FnMut() -> bool,
) -> Vec<Result<VariantResult, GpuError>> {
    let mut refused: BTreeMap<Variant, GpuError> = BTreeMap::new();
    let mut left: Vec<Variant> = vs.to_vec();
    let measured = loop {
        if left.is_empty() {
            break Ok(Vec::new());
        }
        match run(&left) {
            Ok(rs) => break Ok(rs),
            Err((Some(v), e)) if left.contains(&v) && left.len() > 1 && healthy() => {
                refused.insert(v, e);
                left.retain(|&x| x != v);
            }
            Err((_, e)) => break Err(e),
        }
    };
    let mut measured = measured.map(Vec::into_iter);
    vs.iter()
        .map(|v| {
            if let Some(e) = refused.get(v) {
                return Err(e.clone());
            }
            match &mut measured {
                Ok(rs) => rs
                    .next()
                    .ok_or_else(|| GpuError::Variant(format!("the wave gave no result for {v}"))),
                Err(e) => Err(GpuError::Variant(format!("the wave failed: {e}"))),
            }
        })
        .collect()
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

    fn settings() -> ProbeSettings {
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
            mode: crate::model::settings::Mode::Wave,
        }
    }

    #[test]
    fn a_set_lays_its_variants_out_apart_aligned_and_poisoned() {
        let s = settings();
        let vs = [
            Variant::new(7, 2),
            Variant::new(13, 4).with_sink(crate::model::variant::Sink::C),
            Variant::new(29, 1),
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

    /// A fake serial run: measures a set unless it holds `bad`, which the GPU refuses to
    /// launch (the set then fails as a whole, as `LoadedMatrix::run` does).
    fn refusing(
        bad: Variant,
        sets: &std::cell::RefCell<Vec<Vec<Variant>>>,
    ) -> impl FnMut(&[Variant]) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> + '_ {
        move |set| {
            sets.borrow_mut().push(set.to_vec());
            if set.contains(&bad) {
                return Err(GpuError::cuda(
                    format!("launching {bad}"),
                    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                ));
            }
            Ok(set
                .iter()
                .map(|&v| Ok(VariantResult::measured(v, vec![vec![7]])))
                .collect())
        }
    }

    #[test]
    fn in_serial_mode_a_variant_the_gpu_refuses_fails_alone() {
        // tests/data/faulty: acc128 cannot launch with 1024-thread blocks, acc1 can.
        let (good, bad, other) = (
            Variant::new(128, 1),
            Variant::new(128, 128),
            Variant::new(7, 2),
        );
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, bad, other], refusing(bad, &sets), || true);
        assert_eq!(rs.len(), 3);
        assert_eq!(
            rs[0].as_ref().map(|r| r.name.clone()).ok(),
            Some(good.name())
        );
        assert_eq!(
            rs[2].as_ref().map(|r| r.name.clone()).ok(),
            Some(other.name())
        );
        match &rs[1] {
            Err(e) => assert!(e.to_string().contains(&format!("launching {bad}")), "{e}"),
            Ok(r) => panic!("{bad} was measured: {r:?}"),
        }
        // The set once, then each variant alone.
        assert_eq!(
            *sets.borrow(),
            vec![vec![good, bad, other], vec![good], vec![bad], vec![other]]
        );

        // A set that runs is measured once, as one set.
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, other], refusing(bad, &sets), || true);
        assert!(rs.iter().all(Result::is_ok));
        assert_eq!(sets.borrow().len(), 1);

        // A context left unusable runs nothing more: every variant has the set's error.
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, bad], refusing(bad, &sets), || false);
        assert!(rs
            .iter()
            .all(|r| matches!(r, Err(e) if e.to_string().contains("launching"))));
        assert_eq!(sets.borrow().len(), 1);
        assert!(each_its_own(&[], refusing(bad, &sets), || true).is_empty());
    }

    #[test]
    fn in_wave_mode_a_variant_the_gpu_refuses_is_left_out_and_the_others_run_together() {
        let (good, bad, other) = (
            Variant::new(128, 1),
            Variant::new(128, 128),
            Variant::new(7, 2),
        );
        let sets = std::cell::RefCell::new(Vec::new());
        let wave = |named: bool| {
            let sets = &sets;
            move |set: &[Variant]| {
                sets.borrow_mut().push(set.to_vec());
                if set.contains(&bad) {
                    let e = GpuError::cuda(
                        format!("launching {bad}"),
                        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                    );
                    return Err((named.then_some(bad), e));
                }
                Ok(set
                    .iter()
                    .map(|&v| VariantResult::measured(v, vec![vec![7]]))
                    .collect())
            }
        };
        let rs = without_refused(&[good, bad, other], wave(true), || true);
        let names: Vec<Option<String>> = rs
            .iter()
            .map(|r| r.as_ref().ok().map(|r| r.name.clone()))
            .collect();
        assert_eq!(names, vec![Some(good.name()), None, Some(other.name())]);
        assert!(rs[1]
            .as_ref()
            .is_err_and(|e| e.to_string().contains(&format!("launching {bad}"))));
        // The whole wave once, then the others together (never one at a time).
        assert_eq!(
            *sets.borrow(),
            vec![vec![good, bad, other], vec![good, other]]
        );

        // A failure that names no variant, or leaves the context unusable, is everyone's.
        for (named, healthy) in [(false, true), (true, false)] {
            sets.borrow_mut().clear();
            let rs = without_refused(&[good, bad], wave(named), || healthy);
            assert!(
                rs.iter().all(|r| r
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("the wave failed"))),
                "{rs:?}"
            );
            assert_eq!(sets.borrow().len(), 1);
        }
        // The refused variant alone: its own error, nothing run again.
        sets.borrow_mut().clear();
        let rs = without_refused(&[bad], wave(true), || true);
        assert!(rs[0].is_err());
        assert_eq!(sets.borrow().len(), 1);
        assert!(without_refused(&[], wave(true), || true).is_empty());
    }

    fn on_sms(v: Variant, sms: &[&[u32]]) -> Result<VariantResult, GpuError> {
        let mut r = VariantResult::measured(v, vec![vec![7]; sms.len()]);
        r.sm_ids = sms.iter().map(|s| s.to_vec()).collect();
        Ok(r)
    }

    #[test]
    fn blocks_that_shared_an_sm_are_measured_again_or_fail_their_validity() {
        let (a, b, c) = (Variant::new(7, 1), Variant::new(7, 2), Variant::new(13, 4));
        // b's second block landed on a's SM in repeat 1.
        let wave = vec![
            on_sms(a, &[&[0, 2], &[0, 2]]),
            on_sms(b, &[&[4, 6], &[4, 2]]),
            on_sms(c, &[&[8, 10], &[8, 10]]),
        ];
        let shared = shared_sms(&wave);
        assert_eq!(shared.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(
            shared[&0],
            format!("repeat 1: a block ran on SM 2 with {}", b.name())
        );

        // Measured again apart: clean there, so the new results replace the old.
        let asked = std::cell::RefCell::new(Vec::new());
        let rs = own_sms(&[a, b, c], wave.clone(), |vs| {
            asked.borrow_mut().push(vs.to_vec());
            vec![on_sms(a, &[&[20], &[20]]), on_sms(b, &[&[22], &[22]])]
        });
        assert_eq!(*asked.borrow(), vec![vec![a, b]]);
        assert!(rs
            .iter()
            .all(|r| r.as_ref().unwrap().output_problems.is_empty()));
        assert_eq!(rs[0].as_ref().unwrap().sm_ids, vec![vec![20], vec![20]]);
        assert_eq!(rs[2], wave[2]);

        // Sharing again: the results stay, each with the sharing as an output problem.
        let rs = own_sms(&[a, b, c], wave.clone(), |_| {
            vec![on_sms(a, &[&[5], &[5]]), on_sms(b, &[&[5], &[5]])]
        });
        for r in &rs[..2] {
            let p = &r.as_ref().unwrap().output_problems;
            assert!(
                p.len() == 1 && p[0].contains("did not each get an SM"),
                "{p:?}"
            );
        }
        assert!(rs[2].as_ref().unwrap().output_problems.is_empty());

        // A clean wave is left alone and nothing is measured again.
        let clean = vec![on_sms(a, &[&[0]]), on_sms(c, &[&[1]])];
        assert_eq!(own_sms(&[a, c], clean.clone(), |_| unreachable!()), clean);
        // One variant whose own two blocks shared an SM: nothing smaller to try.
        let alone = vec![on_sms(a, &[&[3, 3]])];
        let rs = own_sms(&[a], alone, |_| unreachable!());
        assert!(
            rs[0].as_ref().unwrap().output_problems[0].contains("with another of its own blocks")
        );
    }

    #[test]
    fn a_wave_never_holds_more_blocks_than_the_gpu_has_sms() {
        // The H200 profile: 69 variants of one block on 132 SMs, one wave.
        assert_eq!(wave_sets(69, 1, 132), vec![0..69]);
        // Two blocks each: 66 variants fill the SMs, the other 3 run in a second wave.
        assert_eq!(wave_sets(69, 2, 132), vec![0..66, 66..69]);
        assert_eq!(wave_sets(132, 1, 132), vec![0..132]);
        assert_eq!(wave_sets(133, 1, 132), vec![0..132, 132..133]);
        // More blocks than SMs: each variant alone.
        assert_eq!(wave_sets(3, 200, 132), vec![0..1, 1..2, 2..3]);
        assert!(wave_sets(0, 1, 132).is_empty());
        // Every variant in exactly one wave, in order.
        for (n, b) in [(69, 3), (24, 7), (1, 1)] {
            let flat: Vec<usize> = wave_sets(n, b, 132).into_iter().flatten().collect();
            assert_eq!(flat, (0..n).collect::<Vec<_>>());
        }
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
