//! The start of a run: the configuration checked before the CUDA driver is loaded, the
//! nextest run's shared folder, and the devices found while the profiles load, each
//! device's matrix compiling from the moment the driver names it.

use super::env::{Paths, RunOptions, SameFile};
use super::shared::RunShare;
use crate::catalog;
use crate::config::ConfigError;
use crate::error::{Error, GpuError, GpuErrorKind};
use crate::expectations::profile::Profile;
use crate::measure::device;
use crate::measure::target::{Ahead, CudaTarget, Target};
use crate::text::Shown;
use libtest_mimic::Arguments;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// The profiles of the expectations folder, and what could not be loaded.
pub(crate) type Loaded = (Vec<Profile>, Vec<Error>);

/// Why a run is refused before it starts: a configuration error, exit 2. Its text is the
/// line to print.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    #[error(transparent)]
    Arguments(#[from] ArgumentError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The device selection's syntax (`ACCPROBE_DEVICES`, `ACCPROBE_DEVICE`).
    #[error(transparent)]
    Devices(#[from] GpuError),
    #[error(transparent)]
    SameFile(#[from] SameFile),
}

/// libtest arguments that libtest would accept but cannot run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgumentError {
    #[error("--test-threads 0: expected at least 1 thread")]
    NoThreads,
    #[error("--logfile {}: is a folder, expected a file", .0.shown())]
    LogIsAFolder(std::path::PathBuf),
    #[error("--logfile {}: cannot be written: {source}", log.shown())]
    LogUnwritable {
        log: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// The configuration of a run, checked before CUDA (a refused run must not wait for the
/// compile started before the context): the arguments, `ACCPROBE_*` options, the device
/// selection's syntax and the paths written. The error is the line to print.
pub(crate) fn configure(args: &Arguments) -> Result<(RunOptions, Paths), Refused> {
    check_arguments(args)?;
    let options = RunOptions::from_env()?;
    device::selection_from_env()?;
    let paths = Paths::from_env();
    paths.check_distinct()?;
    Ok((options, paths))
}

/// What libtest would accept but cannot run: `--test-threads 0` makes libtest-mimic wait
/// forever for a worker that never starts, and a `--logfile` it cannot create makes it
/// panic once the cases are planned.
pub(crate) fn check_arguments(args: &Arguments) -> Result<(), ArgumentError> {
    if args.test_threads == Some(0) {
        return Err(ArgumentError::NoThreads);
    }
    if let Some(log) = &args.logfile {
        // Opened as libtest-mimic will (it creates the file), without truncating it yet.
        let log = std::path::Path::new(log);
        if log.is_dir() {
            return Err(ArgumentError::LogIsAFolder(log.to_path_buf()));
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
            .map_err(|source| ArgumentError::LogUnwritable {
                log: log.to_path_buf(),
                source,
            })?;
    }
    Ok(())
}

/// Under nextest (and not listing): the run's shared folder, its measuring lock taken
/// unless an earlier process published its measurement.
pub(crate) fn open_share(
    args: &Arguments,
    paths: &Paths,
    options: &RunOptions,
) -> Option<RunShare> {
    let id = options.run_id.as_deref().filter(|_| !args.list)?;
    match RunShare::open(&paths.runs, id) {
        Ok(s) => Some(s),
        Err(e) => {
            crate::say_err!(
                "accprobe: cannot share the measurement of nextest run {id} under {}: {e}; measuring in this process",
                paths.runs.shown()
            );
            None
        }
    }
}

/// The devices of a run, or why there are none, and the profiles if they are loaded.
pub(crate) struct Started {
    pub(crate) targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    pub(crate) loaded: Option<Loaded>,
}

/// The devices, or why there are none, and the profiles when they were needed to start
/// compiling (else `None`: loaded later). An earlier process of this nextest run that
/// published its measurement stands for the devices: no CUDA here at all. The profiles
/// load while the driver starts, so that each device's matrix compiles from the moment
/// the driver names the device, while its context is made. A configuration error
/// (`GpuErrorKind::Config`) is the error.
pub(crate) fn start_devices(
    args: &Arguments,
    paths: &Paths,
    options: &RunOptions,
    share: Option<&RunShare>,
) -> Result<Started, GpuError> {
    let start = Instant::now();
    let mut loading = Some(std::thread::spawn({
        let dir = paths.expectations.clone();
        move || catalog::load_dir(&dir)
    }));
    let mut loaded: Option<Loaded> = None;
    let mut ahead: BTreeMap<usize, Ahead> = BTreeMap::new();
    let targets: Result<Vec<Arc<dyn Target>>, GpuError> = match share
        .and_then(|s| s.published.as_ref())
    {
        Some(p) => Ok(p.targets()),
        None => device::detect_all_with(|found| {
            if args.list {
                return;
            }
            let (profiles, _) =
                loaded.get_or_insert_with(|| joined(loading.take().expect("joined once")));
            if let Ok(sel) =
                catalog::select(profiles, Some(&found.identity), options.profile.as_deref())
            {
                let a = Ahead::start(
                    found.ordinal,
                    found.capability,
                    sel.profile.probe.variants(),
                    paths.cache.clone(),
                );
                ahead.insert(found.ordinal, a);
            }
        })
        .map(|devices| {
            devices
                .into_iter()
                .map(|d| {
                    let a = ahead.remove(&d.ordinal);
                    Arc::new(CudaTarget::with_ahead(d, paths.cache.clone(), a)) as Arc<dyn Target>
                })
                .collect()
        }),
    };
    let loaded = loaded.or_else(|| loading.map(joined));
    match &targets {
        Err(e) if e.kind() == GpuErrorKind::Config => return Err(e.clone()),
        Ok(t) if !args.list => crate::say_err!(
            "accprobe: CUDA and NVRTC ready in {:.3} s ({} device(s))",
            start.elapsed().as_secs_f64(),
            t.len()
        ),
        _ => {}
    }
    Ok(Started { targets, loaded })
}

/// What the thread loading the profiles gave (its panic as a load error).
fn joined(loading: std::thread::JoinHandle<Loaded>) -> Loaded {
    loading.join().unwrap_or_else(|payload| {
        let why = crate::error::panic_text(payload.as_ref());
        (
            Vec::new(),
            vec![Error::msg(format!(
                "the thread loading the profiles panicked: {why}"
            ))],
        )
    })
}
