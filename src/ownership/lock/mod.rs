//! One measuring process per GPU on a host: a lock file per device, held by the process
//! that measures on it (`std::fs::File::try_lock`: an advisory lock the kernel drops when
//! the process ends, however it ends), waited on with a message and a time limit.
//!
//! The lock file is keyed by what names the device for every process alike (its PCI bus
//! id, else its UUID; never the ordinal, which `CUDA_VISIBLE_DEVICES` renumbers) and lives
//! in a directory all processes share: `ACCPROBE_LOCK_DIR`, default `/tmp/accprobe-locks`.
//! The holder writes its PID and since when into the file, for the message of those who
//! wait. Every process that opens a device registers its PID beside the lock
//! (`<key>.pid-<PID>`, holding the process's start time) *before* it creates its context,
//! and keeps the registration until the context is gone, so that the contention checks
//! can tell a waiting accprobe's idle context from another program's at every moment.

mod key;
mod registration;
mod settings;

pub use key::{format_uuid, normalize_bus_id, DeviceKey};
pub(crate) use registration::{peers, register, register_device, Registration};
pub use settings::{
    LockDirRefused, LockSettings, DEFAULT_DIR, DEFAULT_TIMEOUT, LOCK_DIR_ENV, LOCK_TIMEOUT_ENV,
};

use crate::sync::lock_ignoring_poison;
use crate::text::Shown;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holder {
    pub(crate) pid: Option<u32>,
    pub(crate) since: Option<String>,
}

impl Holder {
    fn parse(text: &str) -> Holder {
        let mut h = Holder::default();
        for line in text.lines() {
            match line.split_once(' ') {
                Some(("pid", v)) => h.pid = v.trim().parse().ok(),
                Some(("since", v)) => h.since = Some(v.trim().to_string()),
                _ => {}
            }
        }
        h
    }

    /// `held by PID 1234 since <its start, RFC 3339 UTC>`.
    pub(crate) fn describe(&self) -> String {
        match (self.pid, &self.since) {
            (Some(p), Some(s)) => format!("held by PID {p} since {s}"),
            (Some(p), None) => format!("held by PID {p}"),
            _ => "held by another process".into(),
        }
    }
}

/// A device's lock, held by this process until dropped.
#[derive(Debug)]
pub struct DeviceLock {
    _file: File,
    /// How long this process waited for it.
    pub(crate) waited: Duration,
}

/// Why a lock could not be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Another process still held it at the time limit.
    Timeout { holder: Holder, waited: Duration },
    /// The lock file could not be made or locked.
    Io(String),
}

/// What a waiter is told, for its messages.
pub enum Waiting<'a> {
    /// The lock is held: the first time, then about every minute.
    Held {
        holder: &'a Holder,
        waited: Duration,
    },
    /// It is ours after `waited`.
    Acquired { waited: Duration },
}

/// The shared lock directory could not be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot create the lock directory {}: {source}", dir.shown())]
pub(crate) struct LockDirError {
    pub(crate) dir: PathBuf,
    pub(crate) source: std::io::Error,
}

/// Makes the shared lock directory where it is missing (sticky and writable by all).
fn open_shared_dir(dir: &Path) -> Result<(), LockDirError> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir).map_err(|source| LockDirError {
            dir: dir.to_path_buf(),
            source,
        })?;
        // Every user's accprobe must be able to lock here (sticky, like /tmp).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
        }
    }
    Ok(())
}

/// Takes the lock of `key` in `dir`, waiting up to `timeout` (polling every `poll`) and
/// telling `tell` how the wait goes.
pub fn acquire(
    dir: &Path,
    stem: &str,
    timeout: Duration,
    poll: Duration,
    mut tell: impl FnMut(Waiting),
) -> Result<DeviceLock, LockError> {
    open_shared_dir(dir).map_err(|e| LockError::Io(e.to_string()))?;
    let path = dir.join(format!("{stem}.lock"));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| LockError::Io(format!("cannot open the lock file {}: {e}", path.shown())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
    }
    let start = Instant::now();
    let mut next_message = Duration::ZERO;
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(TryLockError::WouldBlock) => {
                let waited = start.elapsed();
                let holder = Holder::parse(&std::fs::read_to_string(&path).unwrap_or_default());
                if waited >= timeout {
                    return Err(LockError::Timeout { holder, waited });
                }
                if waited >= next_message {
                    tell(Waiting::Held {
                        holder: &holder,
                        waited,
                    });
                    next_message = waited + Duration::from_secs(60);
                }
                std::thread::sleep(poll.min(timeout - waited));
            }
            Err(TryLockError::Error(e)) => {
                return Err(LockError::Io(format!("cannot lock {}: {e}", path.shown())))
            }
        }
    }
    let waited = start.elapsed();
    let since = humantime::format_rfc3339_seconds(SystemTime::now());
    let _ = file.set_len(0).and_then(|_| {
        file.write_all(format!("pid {}\nsince {since}\n", std::process::id()).as_bytes())
    });
    if waited > poll {
        tell(Waiting::Acquired { waited });
    }
    Ok(DeviceLock {
        _file: file,
        waited,
    })
}

/// One value per key per process, alive while anyone holds its `Arc`; made again after.
type Slots<T> = Mutex<BTreeMap<PathBuf, Arc<Mutex<Weak<T>>>>>;

fn shared<T, E>(
    slots: &Slots<T>,
    key: PathBuf,
    make: impl FnOnce() -> Result<T, E>,
) -> Result<Arc<T>, E> {
    let slot = lock_ignoring_poison(slots).entry(key).or_default().clone();
    // Only this key's slot is held while `make` waits: other devices go on.
    let mut weak = lock_ignoring_poison(&slot);
    if let Some(t) = weak.upgrade() {
        return Ok(t);
    }
    let t = Arc::new(make()?);
    *weak = Arc::downgrade(&t);
    Ok(t)
}

/// The lock of `stem` for this process: taken at the first call, shared by every session
/// of the process on that device (a second `try_lock` from the same process would wait on
/// itself), released when the last one drops it or the process ends.
pub(crate) fn acquire_shared(
    dir: &Path,
    stem: &str,
    timeout: Duration,
    poll: Duration,
    tell: impl FnMut(Waiting),
) -> Result<Arc<DeviceLock>, LockError> {
    static HELD: Slots<DeviceLock> = Mutex::new(BTreeMap::new());
    shared(&HELD, dir.join(stem), || {
        acquire(dir, stem, timeout, poll, tell)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test's lock files.
    pub(super) fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accprobe-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_second_holder_waits_is_told_who_holds_and_gives_up_at_the_limit() {
        let dir = temp_dir("wait");
        let first = acquire(
            &dir,
            "pci-x",
            Duration::ZERO,
            Duration::from_millis(1),
            |_| {},
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.join("pci-x.lock")).unwrap();
        assert!(
            text.starts_with(&format!("pid {}\nsince ", std::process::id())),
            "{text}"
        );
        // Another open file description of the same file conflicts, as another process's.
        let mut told = Vec::new();
        let e = acquire(
            &dir,
            "pci-x",
            Duration::from_millis(50),
            Duration::from_millis(5),
            |w| {
                if let Waiting::Held { holder, .. } = w {
                    told.push(holder.describe());
                }
            },
        )
        .unwrap_err();
        let own = format!("held by PID {} since ", std::process::id());
        assert!(told.len() == 1 && told[0].starts_with(&own), "{told:?}");
        match e {
            LockError::Timeout { holder, waited } => {
                assert_eq!(holder.pid, Some(std::process::id()));
                assert!(waited >= Duration::from_millis(50));
            }
            other => panic!("{other:?}"),
        }
        // Another device is free.
        acquire(
            &dir,
            "pci-y",
            Duration::ZERO,
            Duration::from_millis(1),
            |_| {},
        )
        .unwrap();
        // Released on drop: the waiter gets it.
        drop(first);
        acquire(
            &dir,
            "pci-x",
            Duration::ZERO,
            Duration::from_millis(1),
            |_| {},
        )
        .unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_waiter_gets_the_lock_when_the_holder_lets_go() {
        let dir = temp_dir("handover");
        let first = acquire(&dir, "k", Duration::ZERO, Duration::from_millis(1), |_| {}).unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            drop(first);
        });
        let mut acquired = None;
        let lock = acquire(
            &dir,
            "k",
            Duration::from_secs(30),
            Duration::from_millis(5),
            |w| {
                if let Waiting::Acquired { waited } = w {
                    acquired = Some(waited);
                }
            },
        )
        .unwrap();
        releaser.join().unwrap();
        assert!(acquired.is_some() && lock.waited >= Duration::from_millis(50));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn sessions_of_one_process_share_the_lock_and_release_it_with_the_last() {
        let dir = temp_dir("shared");
        let quick = |_: Waiting| {};
        let a = acquire_shared(&dir, "k", Duration::ZERO, Duration::from_millis(1), quick).unwrap();
        // A second session of the same process does not wait on its own lock.
        let b = acquire_shared(&dir, "k", Duration::ZERO, Duration::from_millis(1), quick).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        drop(a);
        assert!(acquire(&dir, "k", Duration::ZERO, Duration::from_millis(1), quick).is_err());
        drop(b);
        assert!(acquire(&dir, "k", Duration::ZERO, Duration::from_millis(1), quick).is_ok());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
