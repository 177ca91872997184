//! The GPU found at run time: whether there is one (and if not, why), its identity and
//! the environment recorded with every measurement.
//!
//! Architecture invariant: this module and `measure` are the only ones that call the CUDA
//! driver, and nothing calls it before [`detect`] has checked that libcuda and libnvrtc
//! can be loaded (cudarc panics otherwise).

use crate::error::{panic_text, GpuError};
use crate::model::gpu::{Environment, GpuIdentity};
use crate::ownership::lock::{
    format_uuid, normalize_bus_id, register_device, DeviceKey, Registration,
};
use cudarc::driver::{sys, CudaContext};
use std::sync::Arc;

/// Sets what the process needs before the CUDA driver and NVRTC start: no compute cache
/// (so ptxas reports). Call before any thread starts: it edits the environment.
///
/// It leaves `CUDA_DEVICE_MAX_CONNECTIONS` (the hardware queues a context opens) at the
/// driver's default of 8: a wave needs no more, since nothing in it waits between launches
/// (see `crate::measure::LoadedMatrix::run`), and more queues make creating and releasing
/// the context slower (docs/speed.md).
pub fn prepare_process_environment() {
    crate::compile::disable_compute_cache();
}

/// Environment variable choosing the device ordinal (default 0).
pub use crate::config::DEVICE_ENV;

/// A usable GPU, with a context on it.
pub struct Device {
    pub(crate) ordinal: usize,
    pub(crate) ctx: Arc<CudaContext>,
    /// What names the device for every process on the host (lock and NVML checks).
    pub(crate) key: DeviceKey,
    pub identity: GpuIdentity,
    pub(crate) capability: (i32, i32),
    pub(crate) sm_count: u32,
    pub(crate) sm_clock_rated_mhz: Option<f64>,
    pub(crate) cuda_driver_api: String,
    pub(crate) nvrtc_version: String,
    /// This process's registration as a user of the device, made before the context and
    /// dropped after it (fields drop in order): see `crate::ownership::lock`.
    _registration: Option<Arc<Registration>>,
}

/// Finds the GPU, or says why there is none: the reason GPU cases are ignored with.
pub fn detect() -> Result<Device, GpuError> {
    let named = selection_from_env()?;
    let devices = start(
        |count| match &named {
            Some(o) => Ok(check_range(o, count)?.into_iter().take(1).collect()),
            None => Ok(vec![0]),
        },
        |_| {},
    )?;
    devices.into_iter().next().ok_or(GpuError::NoDevice)
}

/// Every device the suite should test: those `ACCPROBE_DEVICES` names (or the one
/// `ACCPROBE_DEVICE` names), else all visible devices. `Err` is the reason there is none;
/// a malformed list is a [`GpuError::Config`] before the driver is loaded, an ordinal out
/// of range one as soon as the device count is known. `found` is called for each device
/// as soon as the driver names it, before its context is created (which takes a while):
/// what depends only on the device's identity, compiling its matrix say, can start then.
pub(crate) fn detect_all_with(found: impl FnMut(&Found)) -> Result<Vec<Device>, GpuError> {
    let named = selection_from_env()?;
    start(
        |count| match &named {
            Some(o) => check_range(o, count),
            None => Ok((0..count).collect()),
        },
        found,
    )
}

/// A device as the driver names it before any context exists.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub(crate) ordinal: usize,
    pub(crate) identity: GpuIdentity,
    pub(crate) capability: (i32, i32),
}

/// The name and compute capability of device `ordinal`, read without a context.
fn identify(ordinal: usize) -> Result<Found, GpuError> {
    use cudarc::driver::result::device;
    let err = |what: &str, e: cudarc::driver::DriverError| {
        GpuError::Device(format!(
            "cannot read {what} of device {ordinal}: {}",
            driver_text(&e)
        ))
    };
    let dev = device::get(ordinal as i32).map_err(|e| err("the handle", e))?;
    let name = device::get_name(dev).map_err(|e| err("the name", e))?;
    let attribute = |a, what: &str| {
        // SAFETY: `dev` is a device handle the driver gave for this ordinal.
        unsafe { device::get_attribute(dev, a) }.map_err(|e| err(what, e))
    };
    let capability = (
        attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "the compute capability",
        )?,
        attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "the compute capability",
        )?,
    );
    Ok(Found {
        ordinal,
        identity: GpuIdentity {
            name,
            compute_capability: format!("{}.{}", capability.0, capability.1),
        },
        capability,
    })
}

/// Starts CUDA on the devices `choose` picks from the device count, doing in parallel
/// what does not depend on each other: loading NVRTC (and reading its version) and NVML
/// (for the contention checks) while the driver initialises, and one context per device,
/// each on a thread of its own. `found` hears of each device before its context is made.
fn start(
    choose: impl FnOnce(usize) -> Result<Vec<usize>, GpuError>,
    mut found: impl FnMut(&Found),
) -> Result<Vec<Device>, GpuError> {
    libraries_present()?;
    let nvrtc = std::thread::spawn(|| {
        let v = crate::compile::nvrtc_version()
            .map_err(|e| GpuError::Init(format!("cannot read the NVRTC version: {e}")));
        crate::trace::mark("NVRTC loaded");
        v
    });
    crate::ownership::contention::start_nvml();
    let count = driver_ready()?;
    crate::trace::mark(format!("CUDA driver initialised ({count} device(s))"));
    let identified: Vec<Result<Found, GpuError>> =
        choose(count)?.into_iter().map(identify).collect();
    for f in identified.iter().flatten() {
        found(f);
    }
    let opened: Vec<Result<Device, GpuError>> = crate::error::each_on_a_thread(
        &identified,
        |_, f| f.clone().and_then(open),
        |why| {
            Err(GpuError::Init(format!(
                "a thread opening a device panicked: {why}"
            )))
        },
    );
    // A device that cannot be used says more than NVRTC's state: its error comes first.
    let mut devices = opened
        .into_iter()
        .collect::<Result<Vec<Device>, GpuError>>()?;
    let nvrtc_version = nvrtc.join().unwrap_or_else(|payload| {
        Err(GpuError::Init(format!(
            "libnvrtc could not be used (the thread loading it panicked: {})",
            panic_text(payload.as_ref())
        )))
    })?;
    for d in &mut devices {
        d.nvrtc_version = nvrtc_version.clone();
    }
    Ok(devices)
}

/// The ordinals `ACCPROBE_DEVICES` (or else `ACCPROBE_DEVICE`) names, syntax checked
/// without touching the driver; `None` when neither is set (or set empty).
pub(crate) fn selection_from_env() -> Result<Option<Vec<usize>>, GpuError> {
    Ok(crate::config::devices()?)
}

#[cfg(test)]
use crate::config::ordinal_list as parse_ordinal_list;
use crate::config::ConfigError;

/// Each of `ordinals` must be below `count`, the number of visible devices.
fn check_range(ordinals: &[usize], count: usize) -> Result<Vec<usize>, GpuError> {
    match ordinals.iter().find(|&&o| o >= count) {
        Some(&ordinal) => Err(ConfigError::NoSuchDevice { ordinal, count }.into()),
        None => Ok(ordinals.to_vec()),
    }
}

/// `0,2` -> [0, 2], each below `count`, none twice.
#[cfg(test)]
pub(crate) fn parse_ordinals(text: &str, count: usize) -> Result<Vec<usize>, GpuError> {
    let ordinals = parse_ordinal_list(text).map_err(ConfigError::from)?;
    check_range(&ordinals, count)
}

/// Checks that libcuda and libnvrtc can be loaded (cudarc panics on a missing library).
fn libraries_present() -> Result<(), GpuError> {
    if !unsafe { sys::is_culib_present() } {
        return Err(GpuError::NoDriver);
    }
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(GpuError::NoNvrtc);
    }
    Ok(())
}

/// Initialises the driver and counts devices ([`libraries_present`] first).
fn driver_ready() -> Result<usize, GpuError> {
    cudarc::driver::result::init()
        .map_err(|e| GpuError::Init(format!("cuInit: {}", driver_text(&e))))?;
    let count = CudaContext::device_count()
        .map_err(|e| GpuError::Init(format!("cuDeviceGetCount: {}", driver_text(&e))))?;
    if count <= 0 {
        return Err(GpuError::NoDevice);
    }
    Ok(count as usize)
}

/// What names device `ordinal` across processes, read without a context.
fn device_key(ordinal: usize) -> DeviceKey {
    let dev = cudarc::driver::result::device::get(ordinal as i32).ok();
    let pci_bus_id = dev.and_then(|dev| {
        let mut buf = [0 as std::ffi::c_char; 64];
        // SAFETY: the buffer is as long as we say; the driver writes a NUL-terminated
        // string into it.
        unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), 64, dev) }
            .result()
            .ok()?;
        // SAFETY: NUL-terminated by the driver, within the buffer.
        unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }
            .to_str()
            .ok()
            .and_then(normalize_bus_id)
    });
    let uuid = dev
        .and_then(|d| cudarc::driver::result::device::get_uuid(d).ok())
        .map(|u| format_uuid(u.bytes.map(|b| b as u8)));
    DeviceKey {
        ordinal,
        pci_bus_id,
        uuid,
    }
}

/// A context on the device `found` names, and what else identifies it. The process
/// registers as a user of the device before the context exists, so that another accprobe
/// measuring on it never sees our context unannounced (it would take it for other work
/// and wait to measure again). A lock directory the user named that cannot be used is a
/// [`GpuError::Config`].
fn open(found: Found) -> Result<Device, GpuError> {
    let Found {
        ordinal,
        identity,
        capability,
    } = found;
    let key = device_key(ordinal);
    let registration = register_device(&key).map_err(ConfigError::from)?;
    let ctx = CudaContext::new(ordinal).map_err(|e| {
        GpuError::Device(format!(
            "cannot create a context on device {ordinal}: {}",
            driver_text(&e)
        ))
    })?;
    let err = |what: &str, e: cudarc::driver::DriverError| {
        GpuError::Device(format!(
            "cannot read {what} of device {ordinal}: {}",
            driver_text(&e)
        ))
    };
    let sm_count = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| err("the SM count", e))? as u32;
    let sm_clock_rated_mhz = ctx
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
        .ok()
        .filter(|&khz| khz > 0)
        .map(|khz| khz as f64 / 1000.0);
    let mut api = 0;
    unsafe { sys::cuDriverGetVersion(&mut api) }
        .result()
        .map_err(|e| GpuError::Device(format!("cuDriverGetVersion failed: {}", driver_text(&e))))?;
    crate::trace::mark(format!("context on device {ordinal} ready"));
    Ok(Device {
        ordinal,
        identity,
        ctx,
        key,
        capability,
        sm_count,
        sm_clock_rated_mhz,
        cuda_driver_api: format!("{}.{}", api / 1000, (api % 1000) / 10),
        // Read once for all devices, on its own thread (see `start`).
        nvrtc_version: String::new(),
        _registration: registration,
    })
}

/// The kernel driver's version from `/proc/driver/nvidia/version`
/// (`NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ...`), or `unknown`.
pub(crate) fn kernel_driver_version() -> String {
    std::fs::read_to_string("/proc/driver/nvidia/version")
        .ok()
        .and_then(|t| parse_driver_version(&t))
        .unwrap_or_else(|| "unknown".to_string())
}

fn parse_driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version"))?;
    // "... Kernel Module  580.159.04 ..." or "... Open Kernel Module for x86_64  580.159.04 ...":
    // the first dotted number after "Module".
    let after = line.split_once("Module")?.1;
    after
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_string)
}

impl Device {
    pub(crate) fn environment(
        &self,
        compile_options: &[String],
        measured_clock_mhz: Option<f64>,
    ) -> Environment {
        Environment {
            gpu_name: self.identity.name.clone(),
            compute_capability: self.identity.compute_capability.clone(),
            sm_count: self.sm_count,
            driver_version: kernel_driver_version(),
            cuda_driver_api: self.cuda_driver_api.clone(),
            nvrtc_version: self.nvrtc_version.clone(),
            nvrtc_origin: crate::compile::process_nvrtc::process_origin(),
            nvrtc_library: crate::compile::loaded_nvrtc()
                .first()
                .map(|p| p.display().to_string()),
            sm_clock_rated_mhz: self.sm_clock_rated_mhz,
            sm_clock_measured_mhz: measured_clock_mhz,
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            compile_options: compile_options.to_vec(),
        }
    }
}

/// A CUDA driver error in plain words, `CUDA_ERROR_NO_DEVICE (no CUDA-capable device is
/// detected)`: cudarc's own text is its `Debug` (`DriverError(CUDA_ERROR_NO_DEVICE, ...)`).
fn driver_text(e: &cudarc::driver::DriverError) -> String {
    match e.error_string() {
        Ok(text) => format!("{:?} ({})", e.0, text.to_string_lossy()),
        Err(_) => format!("{:?}", e.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_version_is_read_from_the_nvrm_line() {
        let t = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  2 2025\nGCC version: gcc 12\n";
        assert_eq!(parse_driver_version(t).as_deref(), Some("580.159.04"));
        // The open kernel module's line.
        let open = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n";
        assert_eq!(parse_driver_version(open).as_deref(), Some("580.159.04"));
        assert_eq!(parse_driver_version("garbage"), None);
        assert_eq!(parse_driver_version("NVRM version: Module"), None);
    }

    #[test]
    fn device_lists_are_checked_against_the_visible_count() {
        assert_eq!(parse_ordinals("0,2", 4), Ok(vec![0, 2]));
        assert_eq!(parse_ordinals(" 1 , 1 ", 4), Ok(vec![1]));
        assert!(parse_ordinals("4", 4)
            .unwrap_err()
            .to_string()
            .contains("not an ordinal below 4"));
        assert!(parse_ordinals("a", 4)
            .unwrap_err()
            .to_string()
            .contains("not a device ordinal"));
        assert!(parse_ordinals("-1", 4).is_err());
        let e = parse_ordinals("", 4).unwrap_err();
        assert!(e.to_string().contains("names no device"));
        assert_eq!(e.kind(), crate::error::GpuErrorKind::Config);
        assert_eq!(
            parse_ordinal_list(" 3 ,1"),
            Ok(vec![3, 1]),
            "syntax only, before the count is known"
        );
        assert!(parse_ordinal_list(",").is_err());
        assert!(parse_ordinal_list("0,x").is_err());
        assert_eq!(
            parse_ordinals("1,3", 2),
            Err(ConfigError::NoSuchDevice {
                ordinal: 3,
                count: 2
            }
            .into()),
            "the ordinal out of range and the count, as numbers"
        );
    }
}
