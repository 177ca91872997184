//! The device layer as the suite sees it: a [`Target`] compiles the matrix and measures
//! variants on one GPU. [`CudaTarget`] does it on a real device (stages 3 and 4);
//! [`RecordedTarget`] replays a results file, so that the multi-device paths of the suite
//! are tested on machines without a GPU.

use crate::compile::{self, Compiled};
use crate::error::GpuError;
use crate::measure::device::Device;
use crate::measure::LoadedMatrix;
use crate::model::ceilings::Ceilings;
use crate::model::gpu::Environment;
use crate::model::gpu::GpuIdentity;
use crate::model::results::{Contention, RunResults, VariantResult};
use crate::model::settings::Mode;
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use crate::ownership::lock::DeviceKey;
use crate::sync::lock_ignoring_poison;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::Instant;

/// How compiling went, for the results' timings.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileInfo {
    pub(crate) seconds: f64,
    pub(crate) nvrtc_seconds: f64,
    pub(crate) sass_seconds: f64,
    pub cache: String,
}

/// One GPU the suite measures on.
pub trait Target: Send + Sync {
    fn ordinal(&self) -> usize;
    fn identity(&self) -> &GpuIdentity;
    /// Compiles and loads `all` (once); called before measuring, so that compile time is
    /// not counted as GPU time. Nothing to do for a replay.
    fn prepare(&self, _all: &[Variant]) -> Result<(), GpuError> {
        Ok(())
    }
    /// Measures `variants` (compiling `all` first if not yet done), in the settings' mode:
    /// one result per variant, in order; `Err` when nothing could be measured.
    fn measure(
        &self,
        variants: &[Variant],
        settings: &ProbeSettings,
        all: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError>;
    /// The environment to record, with the SM clock the probe measured.
    fn environment(&self, measured_clock_mhz: Option<f64>) -> Environment;
    /// The compiled matrix, once compiled (none for a replay).
    fn compiled(&self) -> Option<&Compiled> {
        None
    }
    fn compile_info(&self) -> Option<CompileInfo> {
        None
    }
    /// After an error: `Err(why)` when the device can no longer be used (a replay can
    /// always go on).
    fn healthy(&self) -> Result<(), GpuError> {
        Ok(())
    }
    /// Why the results will carry no SASS (no disassembler), or `None`; known before
    /// compiling, so that SASS cases can be ignored (or required) before they run.
    fn sass_unavailable(&self) -> Option<String> {
        match self.compiled() {
            Some(c) => match &c.sass {
                compile::Sass::Unavailable(reason) => Some(reason.clone()),
                _ => None,
            },
            None => compile::disassembler_unavailable(),
        }
    }
    /// What names the device for every process on the host (for the cross-process lock
    /// and the NVML checks); `None` for a replay, which needs neither.
    fn device_key(&self) -> Option<DeviceKey> {
        None
    }
    /// Whether `v` is a context variant this target cannot give, being the replay of a
    /// file written before contexts existed (`RunResults::predates`); never for a device.
    fn predates(&self, _v: Variant) -> bool {
        false
    }
    /// For a target that replays another process's measurement (a nextest run's
    /// published results): what that process's contention checks saw, so that what was
    /// disturbed there is an error here too. `None` for a real device (its session checks
    /// for itself) and for plain replays.
    fn contention(&self) -> Option<Contention> {
        None
    }
    /// Measures the device's physical ceilings (`measure::ceilings`); a replay has no
    /// device to measure.
    fn ceilings(&self) -> Result<Ceilings, GpuError> {
        Err(GpuError::Variant(
            "the ceilings are measured on a CUDA device, not on recorded results".into(),
        ))
    }
}

/// The compile options of the matrix for a device of compute capability `capability`.
pub fn matrix_options(capability: (i32, i32)) -> Vec<String> {
    let mut options = compile::options(capability.0, capability.1);
    options.extend(compile::extra_options());
    options
}

/// Compiles `all` with `options` through the cache, timed; for device `ordinal`.
fn compile_matrix(
    ordinal: usize,
    all: &[Variant],
    options: &[String],
    cache: Option<&Path>,
) -> Result<(Compiled, CompileInfo), GpuError> {
    let start = Instant::now();
    let (compiled, cache) = compile::compile_cached(all, options, cache)
        .map_err(|e| GpuError::Compile(e.to_string()))?;
    let info = CompileInfo {
        seconds: start.elapsed().as_secs_f64(),
        nvrtc_seconds: compiled.nvrtc_seconds,
        sass_seconds: compiled.sass_seconds,
        cache: cache.to_string(),
    };
    crate::trace::mark(format!(
        "device {ordinal}: compiled (cache {cache}: NVRTC {:.3} s, SASS {:.3} s)",
        compiled.nvrtc_seconds, compiled.sass_seconds
    ));
    Ok((compiled, info))
}

type Compiling = JoinHandle<Result<(Compiled, CompileInfo), GpuError>>;

/// A device's matrix compiling on a thread of its own from the moment the driver named the
/// device, while its context is created (`crate::measure::device::detect_all_with`): the
/// target's first use takes it when it is for the same variants and options. One not taken
/// is waited for when dropped, so that the process never ends in the middle of storing a
/// cache entry.
pub struct Ahead {
    variants: Vec<Variant>,
    options: Vec<String>,
    handle: Option<Compiling>,
}

impl Ahead {
    /// Starts compiling `variants` for device `ordinal` of compute capability `capability`.
    pub fn start(
        ordinal: usize,
        capability: (i32, i32),
        variants: Vec<Variant>,
        cache: Option<PathBuf>,
    ) -> Ahead {
        let options = matrix_options(capability);
        let (v, o) = (variants.clone(), options.clone());
        crate::trace::mark(format!("device {ordinal}: compiling before its context"));
        let handle = std::thread::spawn(move || compile_matrix(ordinal, &v, &o, cache.as_deref()));
        Ahead {
            variants,
            options,
            handle: Some(handle),
        }
    }

    /// The compile's outcome when it is for `variants` compiled with `options`; `None` (and
    /// the compile left to finish when dropped) when it is for something else.
    pub fn take_for(
        mut self,
        variants: &[Variant],
        options: &[String],
    ) -> Option<Result<(Compiled, CompileInfo), GpuError>> {
        if self.variants != variants || self.options != options {
            return None;
        }
        let handle = self.handle.take()?;
        Some(handle.join().unwrap_or_else(|payload| {
            Err(GpuError::Compile(format!(
                "the thread compiling the matrix panicked: {}",
                crate::error::panic_text(payload.as_ref())
            )))
        }))
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A real CUDA device: compiles through the cache at first use (or takes the compile
/// started before its context), then measures.
pub struct CudaTarget {
    cache: Option<PathBuf>,
    ahead: Mutex<Option<Ahead>>,
    probe: OnceLock<Result<LoadedMatrix, GpuError>>,
    info: OnceLock<CompileInfo>,
    env: OnceLock<Environment>,
    /// Last: dropped after the module and streams that hold its context, so that the
    /// context is gone before the device's registration (see `Device`).
    device: Device,
}

impl CudaTarget {
    pub fn new(device: Device, cache: Option<PathBuf>) -> CudaTarget {
        CudaTarget::with_ahead(device, cache, None)
    }

    /// A target whose first use takes `ahead`'s compile when it is for the same matrix.
    pub(crate) fn with_ahead(
        device: Device,
        cache: Option<PathBuf>,
        ahead: Option<Ahead>,
    ) -> CudaTarget {
        CudaTarget {
            device,
            cache,
            ahead: Mutex::new(ahead),
            probe: OnceLock::new(),
            info: OnceLock::new(),
            env: OnceLock::new(),
        }
    }

    fn probe(&self, all: &[Variant]) -> Result<&LoadedMatrix, GpuError> {
        let p = self.probe.get_or_init(|| {
            let options = matrix_options(self.device.capability);
            let ahead = lock_ignoring_poison(&self.ahead)
                .take()
                .and_then(|a| a.take_for(all, &options));
            let (compiled, info) = match ahead {
                Some(outcome) => outcome?,
                None => compile_matrix(self.device.ordinal, all, &options, self.cache.as_deref())?,
            };
            let _ = self.info.set(info);
            let loaded = LoadedMatrix::load(&self.device, compiled);
            crate::trace::mark(format!("device {}: CUBIN loaded", self.device.ordinal));
            loaded
        });
        p.as_ref().map_err(|e| match e {
            GpuError::Compile(_) => e.clone(),
            other => GpuError::Compile(other.to_string()),
        })
    }
}

impl Target for CudaTarget {
    fn ceilings(&self) -> Result<Ceilings, GpuError> {
        super::ceilings::measure(&self.device)
    }

    fn ordinal(&self) -> usize {
        self.device.ordinal
    }

    fn identity(&self) -> &GpuIdentity {
        &self.device.identity
    }

    fn prepare(&self, all: &[Variant]) -> Result<(), GpuError> {
        self.probe(all).map(|_| ())
    }

    fn measure(
        &self,
        variants: &[Variant],
        settings: &ProbeSettings,
        all: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        let probe = self.probe(all)?;
        self.device
            .ctx
            .bind_to_thread()
            .map_err(|e| GpuError::cuda(format!("binding device {}", self.device.ordinal), e))?;
        match settings.mode {
            Mode::Wave => {
                let sms = self.device.sm_count;
                // A kernel reading global memory is measured alone, after the waves.
                let order = crate::measure::wave_order(variants);
                let ordered: Vec<Variant> = order.iter().map(|&i| variants[i]).collect();
                let rs = probe.measure_wave(&ordered, settings, sms);
                // One block per SM is wave mode's premise: checked for each wave set the run
                // measured, and what broke it measured again (see `own_sms`).
                let rs = crate::measure::own_sms_in_sets(
                    &ordered,
                    rs,
                    |measured| crate::measure::wave_plan(measured, settings.blocks, sms),
                    |again| probe.measure_wave(again, settings, sms),
                );
                Ok(super::waves::in_given_order(&order, rs))
            }
            Mode::Serial => Ok(probe.measure_serial(variants, settings)),
        }
    }

    fn environment(&self, measured_clock_mhz: Option<f64>) -> Environment {
        // Read once (driver version file, date) after compiling; every case asks for it.
        let mut e = match self.compiled() {
            Some(c) => self
                .env
                .get_or_init(|| self.device.environment(&c.options, None))
                .clone(),
            None => self.device.environment(&[], None),
        };
        e.sm_clock_measured_mhz = measured_clock_mhz;
        e
    }

    fn compiled(&self) -> Option<&Compiled> {
        self.probe.get()?.as_ref().ok().map(LoadedMatrix::compiled)
    }

    fn compile_info(&self) -> Option<CompileInfo> {
        self.info.get().cloned()
    }

    fn healthy(&self) -> Result<(), GpuError> {
        self.device
            .ctx
            .synchronize()
            .map_err(|e| GpuError::cuda("synchronising the context", e))
    }

    fn device_key(&self) -> Option<DeviceKey> {
        Some(self.device.key.clone())
    }
}

/// A device that replays recorded results: a results file (the suite's multi-device paths
/// without a GPU), or another process's measurement (a nextest run's published one).
pub struct RecordedTarget {
    ordinal: usize,
    identity: GpuIdentity,
    environment: Environment,
    /// What was measured; `None` when nothing was.
    results: Option<RunResults>,
    /// (variant name, why it was not measured).
    errors: Vec<(String, GpuError)>,
    /// Said after the variant's name when it is neither measured nor in `errors`.
    missing: &'static str,
    sass_unavailable: Option<String>,
    contention: Option<Contention>,
}

impl RecordedTarget {
    /// Replays `results` as device `ordinal`; its identity comes from the results'
    /// environment.
    pub fn new(ordinal: usize, results: RunResults) -> Result<RecordedTarget, GpuError> {
        let e = results.environment.clone().ok_or_else(|| {
            GpuError::Device(
                "recorded results without an environment cannot stand for a device".into(),
            )
        })?;
        Ok(RecordedTarget {
            ordinal,
            identity: GpuIdentity {
                name: e.gpu_name.clone(),
                compute_capability: e.compute_capability.clone(),
            },
            environment: e,
            sass_unavailable: results.sass_unavailable.clone(),
            results: Some(results),
            errors: Vec::new(),
            missing: "is not in the recorded results",
            contention: None,
        })
    }

    /// Replays another process's measurement of device `ordinal`: the `results` of what it
    /// measured (with their environment, else `environment`) and the error of each variant
    /// it did not. It carries what that process's contention checks saw, so that a
    /// measurement disturbed there is an error here too, never a regression.
    pub fn published(
        ordinal: usize,
        identity: GpuIdentity,
        environment: Environment,
        results: Option<RunResults>,
        errors: Vec<(String, GpuError)>,
        sass_unavailable: Option<String>,
    ) -> RecordedTarget {
        RecordedTarget {
            ordinal,
            identity,
            environment: results
                .as_ref()
                .and_then(|r| r.environment.clone())
                .unwrap_or(environment),
            contention: results.as_ref().and_then(|r| r.contention.clone()),
            results,
            errors,
            missing: "was not measured by this nextest run's measuring process",
            sass_unavailable,
        }
    }
}

impl Target for RecordedTarget {
    fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn identity(&self) -> &GpuIdentity {
        &self.identity
    }

    fn measure(
        &self,
        variants: &[Variant],
        _: &ProbeSettings,
        _: &[Variant],
    ) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> {
        Ok(variants
            .iter()
            .map(|&v| {
                if let Some(r) = self.results.as_ref().and_then(|r| r.get(v)) {
                    return Ok(r.clone());
                }
                Err(self
                    .errors
                    .iter()
                    .find(|(name, _)| *name == v.name())
                    .map(|(_, e)| e.clone())
                    .unwrap_or_else(|| GpuError::Variant(format!("{v} {}", self.missing))))
            })
            .collect())
    }

    fn environment(&self, _: Option<f64>) -> Environment {
        self.environment.clone()
    }

    fn sass_unavailable(&self) -> Option<String> {
        self.sass_unavailable.clone()
    }

    fn predates(&self, v: Variant) -> bool {
        self.results.as_ref().is_some_and(|r| r.predates(v))
    }

    /// What the measuring process's contention checks saw, for a published measurement;
    /// `None` for a results file.
    fn contention(&self) -> Option<Contention> {
        self.contention.clone()
    }
}
