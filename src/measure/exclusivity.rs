//! How a measuring session keeps its GPU to itself: the device's cross-process lock and the
//! checks for other processes' work around each measurement, with their settings from the
//! environment.

use crate::config::ConfigError;
use crate::error::GpuError;
use crate::measure::target::Target;
use crate::ownership::contention::{Monitor, NvmlMonitor};
use crate::ownership::lock::{DeviceKey, LockSettings};
use crate::sync::lock_ignoring_poison;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How many times a disturbed measurement is made again, and the seconds to wait before
/// each (see `config`).
pub use crate::config::{RETRIES_ENV, WAIT_ENV};

/// How a session keeps its GPU to itself: the device's cross-process lock and the checks
/// for other work around each measurement.
pub struct Exclusivity {
    /// The device (its key has a file stem) and where and how long to wait for its lock;
    /// `None`: no lock (a replay). `Err`: the lock's or the contention checks' settings
    /// are wrong (a configuration error, told at first use).
    pub lock: Option<(DeviceKey, Result<LockSettings, ConfigError>)>,
    /// What reads the GPU's state; `None`: no checks (a replay).
    pub monitor: Option<Arc<dyn Monitor>>,
    /// A disturbed measurement is made again at most this many times...
    pub retries: u32,
    /// ...each after this wait.
    pub wait: Duration,
}

impl Exclusivity {
    /// No lock, no checks.
    pub(crate) fn none() -> Exclusivity {
        Exclusivity {
            lock: None,
            monitor: None,
            retries: 0,
            wait: Duration::ZERO,
        }
    }

    /// The guard for a target: a lock and NVML checks for a real device (one with a
    /// [`DeviceKey`]), none for a replay; settings from the environment.
    pub(crate) fn for_target(target: &Result<Arc<dyn Target>, GpuError>) -> Exclusivity {
        let Some(key) = target.as_ref().ok().and_then(|t| t.device_key()) else {
            return Exclusivity::none();
        };
        let contention = contention_settings();
        let (retries, wait) = contention.clone().unwrap_or((0, Duration::ZERO));
        let settings = contention.and_then(|_| LockSettings::from_env());
        Exclusivity {
            monitor: Some(Arc::new(NvmlMonitor::new(
                key.pci_bus_id.clone(),
                key.uuid.clone(),
            ))),
            lock: (key.stem().is_some() || settings.is_err()).then_some((key, settings)),
            retries,
            wait,
        }
    }

    pub(crate) fn active(&self) -> bool {
        self.lock.is_some() || self.monitor.is_some()
    }
}

/// `ACCPROBE_CONTENTION_RETRIES` and `ACCPROBE_CONTENTION_WAIT`, through `config`: a value
/// that is not a number of 0 or more is a configuration error, as for every variable.
fn contention_settings() -> Result<(u32, Duration), ConfigError> {
    Ok((
        crate::config::contention_retries()?,
        crate::config::contention_wait()?,
    ))
}

/// Says once per process what the checks cannot see.
pub(crate) fn note_once(text: &str) {
    static SAID: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut said = lock_ignoring_poison(&SAID);
    if !said.iter().any(|s| s == text) {
        crate::say_err!("accprobe: {text}");
        said.push(text.to_string());
    }
}
