//! One measurement per nextest run. cargo-nextest runs each case in a process of its own
//! and sets `NEXTEST_RUN_ID` for all of them; the processes of one run share
//! `target/accprobe/runs/<run id>/`:
//!
//! - `measure.lock`: the first process that needs the GPU takes it, measures the whole
//!   matrix of every device's profile (whatever case it was started for), writes
//!   `measured.json` and releases the lock. The others wait on the lock (saying so) and
//!   read that file instead of measuring: the GPU is measured once per run, and never by
//!   two of its processes at once. A process that published nothing (no GPU, or only
//!   replay cases to run) leaves the next one to try.
//! - `junit/<pid>.json` and `junit.lock`: every process's case records, merged into the
//!   one JUnit file (see `recorder`).
//!
//! Run folders older than a day are removed when a new run starts.
//!
//! Every file of the run folder is reached only where it resolves inside the folder
//! ([`in_run`]): a symlink on the way that leads out of it (`junit -> /etc`) is refused
//! with its path, so the share never writes, creates or reads a file elsewhere.

use crate::error::GpuError;
use crate::measure::target::{RecordedTarget, Target};
use crate::model::gpu::{Environment, GpuIdentity};
use crate::model::results::RunResults;
use crate::sync::lock_ignoring_poison;
use crate::text::Shown;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// The run's shared folder, with the measuring lock held until the measurement is
/// published (or this process leaves it to the next).
pub(crate) struct RunShare {
    pub(crate) dir: PathBuf,
    lock: Mutex<Option<File>>,
    /// What an earlier process of the run measured, when it did.
    pub(crate) published: Option<Published>,
}

const MEASURED: &str = "measured.json";

/// How long an old run's folder is kept.
const KEEP_RUNS: Duration = Duration::from_secs(24 * 3600);

impl RunShare {
    /// Opens (creates) `runs/<run id>/`, waits for the measuring lock and reads what was
    /// published. When something was, the lock is released at once.
    pub(crate) fn open(runs: &Path, run_id: &str) -> std::io::Result<RunShare> {
        let dir = run_dir(runs, run_id);
        if !dir.is_dir() {
            remove_old_runs(runs);
        }
        in_run(&dir, &dir)?;
        std::fs::create_dir_all(&dir).map_err(|e| naming(&dir, "create", e))?;
        let lock_path = in_run(&dir, &dir.join("measure.lock"))?;
        let file = lock_file(&lock_path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                crate::say_err!(
                    "accprobe: waiting for another process of this nextest run to measure ({})",
                    dir.shown()
                );
                file.lock().map_err(|e| naming(&lock_path, "lock", e))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(naming(&lock_path, "lock", e)),
        }
        let measured = dir.join(MEASURED);
        // Only inside the run folder, and through the bounded reader: a link out of it, a
        // FIFO or a device there is refused, not read.
        let published = match in_run(&dir, &measured).and_then(|m| {
            crate::input::read_text(&m, "measurement", crate::input::RESULTS_LIMIT)
                .map_err(std::io::Error::other)
        }) {
            Ok(t) => match serde_json::from_str::<Published>(&t) {
                Ok(p) => Some(p),
                Err(e) => {
                    crate::say_err!(
                        "accprobe: {}: not a measurement of this suite ({e}); measuring again",
                        measured.shown()
                    );
                    None
                }
            },
            Err(_) if std::fs::symlink_metadata(&measured).is_err() => None,
            Err(e) => {
                crate::say_err!("accprobe: {e}; measuring again");
                None
            }
        };
        let share = RunShare {
            dir,
            lock: Mutex::new(Some(file)),
            published,
        };
        if share.published.is_some() {
            share.release();
        }
        Ok(share)
    }

    /// Whether this process holds the measuring lock (nothing was published yet).
    pub(crate) fn measures(&self) -> bool {
        lock_ignoring_poison(&self.lock).is_some()
    }

    /// Releases the measuring lock.
    pub(crate) fn release(&self) {
        if let Some(f) = lock_ignoring_poison(&self.lock).take() {
            let _ = f.unlock();
        }
    }

    /// Writes what this process measured for the run's later processes, then releases
    /// the lock.
    pub(crate) fn publish(&self, p: &Published) -> std::io::Result<()> {
        let json = serde_json::to_string(p).map_err(std::io::Error::other)?;
        let written = in_run(&self.dir, &self.dir.join(MEASURED))
            .and_then(|path| crate::output::write_atomic(&path, &json));
        self.release();
        written
    }
}

/// The folder of nextest run `run_id` under `runs` (characters other than letters,
/// digits, `-` and `_` become `_`).
pub(crate) fn run_dir(runs: &Path, run_id: &str) -> PathBuf {
    let name: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    runs.join(name)
}

/// `path` when it is the run folder `dir` or a file in it that resolves inside it (every
/// link on the way followed, as the writer and the reader reach it: see
/// [`crate::input::real_path`]), with `dir` itself no link; else an error
/// naming `path` and where it leads. Checked before each file of the run folder is
/// created, written, locked or read.
pub(crate) fn in_run(dir: &Path, path: &Path) -> std::io::Result<PathBuf> {
    let refused = |leads: &Path| {
        std::io::Error::other(format!(
            "{}: refused: it leads to {}, outside the nextest run folder {} (a symlink on \
             the way); nothing of the run is read or written outside it",
            path.shown(),
            leads.shown(),
            dir.shown()
        ))
    };
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refused(&crate::input::real_path(dir)));
    }
    if path == dir {
        return Ok(path.to_path_buf());
    }
    match crate::input::confined(dir, path) {
        Ok(()) => Ok(path.to_path_buf()),
        Err(real) => Err(refused(&real)),
    }
}

/// Opens (creates) the lock file `path`: a regular file, never a FIFO (opening one would
/// block) or a folder; errors name it.
pub(crate) fn lock_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| naming(path, "open the lock file", e))?;
    let m = file
        .metadata()
        .map_err(|e| naming(path, "open the lock file", e))?;
    if !m.is_file() {
        return Err(std::io::Error::other(format!(
            "{}: cannot use it as a lock file: not a regular file",
            path.shown()
        )));
    }
    Ok(file)
}

/// `e`, saying which file it is about and what was being done.
pub(crate) fn naming(path: &Path, doing: &str, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("{}: cannot {doing}: {e}", path.shown()))
}

fn remove_old_runs(runs: &Path) {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return;
    };
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age > KEEP_RUNS);
        if old && e.path().is_dir() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// What the measuring process of a run measured, for all devices.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Published {
    pub(crate) devices: Vec<DeviceRecord>,
}

/// One device's measurement: the results of the variants that were measured and the
/// error of each that was not.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct DeviceRecord {
    pub(crate) ordinal: usize,
    pub(crate) gpu_name: String,
    pub(crate) compute_capability: String,
    /// The profile it was measured for.
    pub(crate) profile: String,
    pub(crate) environment: Environment,
    pub(crate) results: Option<RunResults>,
    /// (variant name, why it was not measured).
    pub(crate) errors: Vec<(String, GpuError)>,
    pub(crate) sass_unavailable: Option<String>,
}

impl Published {
    /// Targets that replay this measurement, one per device.
    pub(crate) fn targets(&self) -> Vec<Arc<dyn Target>> {
        self.devices
            .iter()
            .map(|d| {
                Arc::new(RecordedTarget::published(
                    d.ordinal,
                    GpuIdentity {
                        name: d.gpu_name.clone(),
                        compute_capability: d.compute_capability.clone(),
                    },
                    d.environment.clone(),
                    d.results.clone(),
                    d.errors.clone(),
                    d.sass_unavailable.clone(),
                )) as Arc<dyn Target>
            })
            .collect()
    }
}
