//! The measuring service: one GPU session per device. It holds the target (or why there is
//! none) and the profile chosen for it, and measures each variant at most once, at first
//! use, under the device's lock, so its GPU is used by one caller at a time. The libtest
//! harness and `cargo xtask` both measure through it.

use crate::compile;
use crate::error::GpuError;
use crate::expectations::profile::Profile;
use crate::measure::target::Target;
use crate::model::results::{RunResults, Timings, VariantResult, SCHEMA};
use crate::model::settings::Mode;
use crate::model::variant::Variant;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

/// The GPU side of one run on one device: a target (or the reason there is none), the
/// profile chosen for it, and each variant measured at first use.
pub struct GpuSession {
    pub profile: Profile,
    pub selection_note: String,
    target: Result<Arc<dyn Target>, GpuError>,
    measured: Mutex<BTreeMap<Variant, Result<VariantResult, GpuError>>>,
    /// The variants the cases that will run need (after libtest's filters).
    pub planned: Mutex<Vec<Variant>>,
    /// Seconds spent measuring so far.
    gpu_seconds: Mutex<f64>,
    /// Set when a CUDA error left the device unusable: why.
    unusable: OnceLock<String>,
    /// Whether case names carry the device (more than one device in the run).
    pub prefix: bool,
}

impl GpuSession {
    /// A session for `profile` on `target` (or the reason there is none). Nothing happens
    /// on the GPU until results are asked for.
    pub fn new(
        profile: Profile,
        selection_note: String,
        target: Result<Arc<dyn Target>, GpuError>,
    ) -> GpuSession {
        GpuSession {
            profile,
            selection_note,
            target,
            measured: Mutex::new(BTreeMap::new()),
            planned: Mutex::new(Vec::new()),
            gpu_seconds: Mutex::new(0.0),
            unusable: OnceLock::new(),
            prefix: false,
        }
    }

    /// Measures every variant of the profile (in its mode) and returns the whole run, with
    /// environment and timings.
    pub fn measure_all(&self) -> Result<RunResults, GpuError> {
        let all = self.profile.probe.variants();
        *self.planned.lock().unwrap_or_else(|e| e.into_inner()) = all.clone();
        self.results_for(&all)?;
        self.measured_results()
            .ok_or_else(|| GpuError::Variant("nothing was measured".into()))
    }

    /// The target, or why there is none.
    pub fn target(&self) -> Result<&Arc<dyn Target>, &GpuError> {
        self.target.as_ref()
    }

    pub fn device_label(&self) -> String {
        match &self.target {
            Ok(t) => format!("gpu{} {}", t.ordinal(), t.identity().name),
            Err(_) => "no gpu".to_string(),
        }
    }

    /// The case name on this device: `gpuN::` in front when the run has several devices.
    pub fn case_name(&self, name: &str) -> String {
        match (&self.target, self.prefix) {
            (Ok(t), true) => format!("gpu{}::{name}", t.ordinal()),
            _ => name.to_string(),
        }
    }

    /// Results for `needs`, measuring what has not been measured yet. Holds this device's
    /// lock for the whole time, so its GPU work is one case at a time; other devices run
    /// in parallel.
    pub fn results_for(&self, needs: &[Variant]) -> Result<RunResults, GpuError> {
        let target = self.target.as_ref().map_err(Clone::clone)?;
        let mut measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cause) = self.unusable.get() {
            return Err(GpuError::Unusable(cause.clone()));
        }
        let all = self.profile.probe.variants();
        target.prepare(&all)?;
        let measuring = Instant::now();
        let missing: Vec<Variant> = needs
            .iter()
            .copied()
            .filter(|v| !measured.contains_key(v))
            .collect();
        if !missing.is_empty() {
            // In wave mode, one wave for everything this run will need (the planned set),
            // so that later cases find their variants measured.
            let mut batch = missing;
            if self.profile.probe.mode == Mode::Wave {
                let planned = self
                    .planned
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                batch.extend(planned.into_iter().filter(|v| !measured.contains_key(v)));
                batch.sort();
                batch.dedup();
            }
            match target.measure(&batch, &self.profile.probe, &all) {
                Ok(rs) => {
                    for (v, r) in batch.iter().zip(rs) {
                        measured.insert(*v, r);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let mut variants = Vec::new();
        let mut broken = Vec::new();
        for &v in needs {
            match &measured[&v] {
                Ok(r) => variants.push(r.clone()),
                Err(e) => broken.push(format!("{v}: {e}")),
            }
        }
        *self.gpu_seconds.lock().unwrap_or_else(|e| e.into_inner()) +=
            measuring.elapsed().as_secs_f64();
        if !broken.is_empty() {
            // A sticky error (an illegal address, say) leaves the context unusable: the
            // cases after this one then fail with this cause instead of running.
            if let Err(e) = target.healthy() {
                let _ = self.unusable.set(format!("{}: {e}", broken.join("; ")));
            }
            return Err(GpuError::Variant(broken.join("; ")));
        }
        Ok(RunResults {
            schema: SCHEMA,
            mode: self.profile.probe.mode,
            settings: Some(self.profile.probe.run_settings()),
            profile: self.profile.name.clone(),
            source: "measured".into(),
            environment: Some(target.environment(None)),
            variants,
            sass_unavailable: target.sass_unavailable(),
            timings: self.timings(),
        })
    }

    fn timings(&self) -> Option<Timings> {
        let c = self.target.as_ref().ok()?.compile_info()?;
        Some(Timings {
            compile_s: c.seconds,
            nvrtc_s: c.nvrtc_seconds,
            sass_s: c.sass_seconds,
            compile_cache: c.cache,
            gpu_s: *self.gpu_seconds.lock().unwrap_or_else(|e| e.into_inner()),
        })
    }

    /// Everything measured so far, with the environment, or `None` when nothing was.
    pub fn measured_results(&self) -> Option<RunResults> {
        let target = self.target.as_ref().ok()?;
        let measured = self.measured.lock().unwrap_or_else(|e| e.into_inner());
        let variants: Vec<VariantResult> = self
            .profile
            .probe
            .variants()
            .iter()
            .filter_map(|v| measured.get(v).and_then(|r| r.as_ref().ok()).cloned())
            .collect();
        if variants.is_empty() {
            return None;
        }
        let mut clocks: Vec<f64> = variants.iter().filter_map(|r| r.sm_clock_mhz).collect();
        clocks.sort_by(f64::total_cmp);
        Some(RunResults {
            schema: SCHEMA,
            mode: self.profile.probe.mode,
            settings: Some(self.profile.probe.run_settings()),
            profile: self.profile.name.clone(),
            source: "measured".into(),
            environment: Some(target.environment(clocks.get(clocks.len() / 2).copied())),
            variants,
            sass_unavailable: target.sass_unavailable(),
            timings: self.timings(),
        })
    }

    /// The compiled matrix (CUBIN and ptxas log), when it was compiled.
    pub fn compiled(&self) -> Option<&compile::Compiled> {
        self.target.as_ref().ok()?.compiled()
    }
}
