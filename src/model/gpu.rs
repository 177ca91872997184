//! What identifies a GPU, and the environment a measurement was taken in.

use crate::text::Shown;
use serde::{Deserialize, Serialize};

/// What identifies a GPU for profile selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    pub name: String,
    pub compute_capability: String,
}

/// Where a measurement was taken: enough to tell a GPU, driver or toolchain change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Environment {
    pub gpu_name: String,
    /// `major.minor`, e.g. `9.0`.
    pub compute_capability: String,
    pub sm_count: u32,
    /// The kernel driver's version (e.g. `580.159.04`), or `unknown`.
    pub driver_version: String,
    /// The CUDA version the driver supports (cuDriverGetVersion), e.g. `13.0`.
    pub cuda_driver_api: String,
    pub nvrtc_version: String,
    /// Where the NVRTC came from when `ACCPROBE_NVRTC` selected it (`ACCPROBE_NVRTC:
    /// nvidia-cuda-nvrtc-cu12==12.8.93`); absent for the one the dynamic linker found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nvrtc_origin: Option<String>,
    /// The libnvrtc file the process loaded (`.../libnvrtc.so.13.0.88`): the release, which
    /// `nvrtc_version` (major.minor) does not tell; absent where it cannot be read (no
    /// `/proc`) and in files from accprobe versions that did not record it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) nvrtc_library: Option<String>,
    /// The device's rated SM clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE), MHz.
    pub sm_clock_rated_mhz: Option<f64>,
    /// The SM clock seen during the probe: clock64 budget over %globaltimer time, MHz.
    pub sm_clock_measured_mhz: Option<f64>,
    /// RFC 3339, UTC.
    pub date: String,
    /// The NVRTC options the kernels were compiled with.
    pub compile_options: Vec<String>,
}

/// A GPU, driver and NVRTC on one line, as a message shows them (each [`Shown`]).
pub(crate) fn fingerprint_of(gpu_name: &str, driver_version: &str, nvrtc_version: &str) -> String {
    format!(
        "{} / driver {} / NVRTC {}",
        gpu_name.shown(),
        driver_version.shown(),
        nvrtc_version.shown()
    )
}

impl Environment {
    /// The GPU, driver and NVRTC on one line: what tells a hardware or toolchain change.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(&self.gpu_name, &self.driver_version, &self.nvrtc_version)
    }

    /// One line for a person: the GPU with its compute capability and SMs, driver, NVRTC,
    /// rated SM clock and date.
    pub fn summary(&self) -> String {
        format!(
            "{} (sm {}, {} SMs), driver {}, NVRTC {}, SM clock {} MHz, {}",
            self.gpu_name.shown(),
            self.compute_capability.shown(),
            self.sm_count,
            self.driver_version.shown(),
            self.nvrtc_version.shown(),
            self.sm_clock_rated_mhz
                .map_or("?".into(), |c| format!("{c:.0}")),
            self.date.shown()
        )
    }

    /// Everything, as name/value pairs (JUnit properties).
    pub(crate) fn properties(&self) -> Vec<(String, String)> {
        let opt = |x: Option<f64>| x.map_or("unknown".to_string(), |v| format!("{v:.0}"));
        vec![
            ("gpu_name".into(), self.gpu_name.clone()),
            ("compute_capability".into(), self.compute_capability.clone()),
            ("sm_count".into(), self.sm_count.to_string()),
            ("driver_version".into(), self.driver_version.clone()),
            ("cuda_driver_api".into(), self.cuda_driver_api.clone()),
            ("nvrtc_version".into(), self.nvrtc_version.clone()),
            ("sm_clock_rated_mhz".into(), opt(self.sm_clock_rated_mhz)),
            (
                "sm_clock_measured_mhz".into(),
                opt(self.sm_clock_measured_mhz),
            ),
            ("date".into(), self.date.clone()),
            ("compile_options".into(), self.compile_options.join(" ")),
        ]
        .into_iter()
        .chain(
            self.nvrtc_origin
                .clone()
                .map(|o| ("nvrtc_origin".to_string(), o)),
        )
        .chain(
            self.nvrtc_library
                .clone()
                .map(|l| ("nvrtc_library".to_string(), l)),
        )
        .collect()
    }

    /// What identifies the GPU, for profile matching.
    pub fn identity(&self) -> GpuIdentity {
        GpuIdentity {
            name: self.gpu_name.clone(),
            compute_capability: self.compute_capability.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nvrtc_library_is_recorded_when_known_and_older_files_read_without_it() {
        // The environment of the H200 run the profile replays, written before the field.
        let text = include_str!("../../expectations/recorded/h200-2026-11-30-wave.json");
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        let mut e: Environment = serde_json::from_value(v["environment"].clone()).unwrap();
        assert_eq!(e.nvrtc_library, None);
        assert!(!e.properties().iter().any(|(k, _)| k == "nvrtc_library"));
        let lib = "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libnvrtc.so.13.0.88";
        e.nvrtc_library = Some(lib.into());
        assert!(e
            .properties()
            .contains(&("nvrtc_library".into(), lib.into())));
        let again: Environment = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(again, e);
        // Not part of the fingerprint: baselines blessed before it still match.
        assert!(!e.fingerprint().contains("libnvrtc"));
    }
}
