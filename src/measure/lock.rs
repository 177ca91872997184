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

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime};

/// The directory of the lock files (default [`DEFAULT_DIR`]).
pub const LOCK_DIR_ENV: &str = "ACCPROBE_LOCK_DIR";
/// How long, in seconds, to wait for a GPU another process measures on (default
/// [`DEFAULT_TIMEOUT`]); `0` gives up at once.
pub const LOCK_TIMEOUT_ENV: &str = "ACCPROBE_LOCK_TIMEOUT";
/// Shared by every user and process of the host, unlike `$XDG_RUNTIME_DIR` or `$TMPDIR`.
pub const DEFAULT_DIR: &str = "/tmp/accprobe-locks";
/// Long enough for another suite's whole run on the GPU (a default run takes minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(900);

/// What identifies a GPU across processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceKey {
    /// This process's ordinal for it, for messages.
    pub ordinal: usize,
    /// `0000:19:00.0`, normalised by [`normalize_bus_id`].
    pub pci_bus_id: Option<String>,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as NVML writes it.
    pub uuid: Option<String>,
}

impl DeviceKey {
    /// The file name stem of the device's lock: `pci-0000-19-00.0` or `uuid-GPU-...`;
    /// `None` when nothing stable names the device.
    pub fn stem(&self) -> Option<String> {
        let clean = |s: &str| {
            s.chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect::<String>()
        };
        match (&self.pci_bus_id, &self.uuid) {
            (Some(b), _) => Some(format!("pci-{}", clean(b))),
            (None, Some(u)) => Some(format!("uuid-{}", clean(u))),
            (None, None) => None,
        }
    }

    /// `GPU 0 (0000:19:00.0)`.
    pub fn label(&self) -> String {
        match self.pci_bus_id.as_ref().or(self.uuid.as_ref()) {
            Some(id) => format!("GPU {} ({id})", self.ordinal),
            None => format!("GPU {}", self.ordinal),
        }
    }
}

/// A CUDA UUID as NVML writes it: `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`.
pub fn format_uuid(b: [u8; 16]) -> String {
    let hex =
        |r: std::ops::Range<usize>| b[r].iter().map(|x| format!("{x:02x}")).collect::<String>();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        hex(0..4),
        hex(4..6),
        hex(6..8),
        hex(8..10),
        hex(10..16)
    )
}

/// `0000:19:00.0`, `00000000:19:00.0` and `19:00.0` (hex, any case) all become
/// `0000:19:00.0`; `None` when it is not a bus id.
pub fn normalize_bus_id(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('\0');
    let (head, function) = text.rsplit_once('.')?;
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match parts[..] {
        [d, b, v] => (d, b, v),
        [b, v] => ("0", b, v),
        _ => return None,
    };
    let hex = |s: &str, max: u64| {
        u64::from_str_radix(s, 16)
            .ok()
            .filter(|&x| x <= max && !s.is_empty())
    };
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain, 0xFFFF_FFFF)?,
        hex(bus, 0xFF)?,
        hex(device, 0x1F)?,
        hex(function, 0x7)?
    ))
}

/// The lock directory and time limit, from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct LockSettings {
    pub dir: PathBuf,
    pub timeout: Duration,
}

impl LockSettings {
    /// `ACCPROBE_LOCK_DIR` and `ACCPROBE_LOCK_TIMEOUT` (empty, or only spaces, means
    /// unset, as for every variable); a timeout that is not a number of seconds is a
    /// configuration error.
    pub fn from_env() -> Result<LockSettings, String> {
        Self::from_values(
            std::env::var_os(LOCK_DIR_ENV).map(PathBuf::from),
            crate::input::env_text(LOCK_TIMEOUT_ENV)?.filter(|t| !t.trim().is_empty()),
        )
    }

    pub fn from_values(
        dir: Option<PathBuf>,
        timeout: Option<String>,
    ) -> Result<LockSettings, String> {
        let timeout = match timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) => {
                let secs: f64 = t
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| {
                        format!("{LOCK_TIMEOUT_ENV}={t:?} is not a number of seconds (0 or more)")
                    })?;
                Duration::from_secs_f64(secs.min(1e9))
            }
        };
        Ok(LockSettings {
            dir: dir
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
            timeout,
        })
    }
}

/// Who holds a lock, as written in its file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Holder {
    pub pid: Option<u32>,
    pub since: Option<String>,
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

    /// `held by PID 1234 since 2026-11-30T10:00:00Z`.
    pub fn describe(&self) -> String {
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
    pub path: PathBuf,
    /// How long this process waited for it.
    pub waited: Duration,
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

fn open_shared_dir(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create the lock directory {}: {e}", dir.display()))?;
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
    open_shared_dir(dir).map_err(LockError::Io)?;
    let path = dir.join(format!("{stem}.lock"));
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| LockError::Io(format!("cannot open the lock file {}: {e}", path.display())))?;
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
                return Err(LockError::Io(format!(
                    "cannot lock {}: {e}",
                    path.display()
                )))
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
        path,
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
    let slot = slots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key)
        .or_default()
        .clone();
    // Only this key's slot is held while `make` waits: other devices go on.
    let mut weak = slot.lock().unwrap_or_else(|e| e.into_inner());
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
pub fn acquire_shared(
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

/// This process's registration as a user of a device: `<stem>.pid-<PID>` in the lock
/// directory, removed when dropped.
#[derive(Debug)]
pub struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Registers this process as a user of the device `stem` (once per process, shared). The
/// file holds the process's start time, so that a registration left by a killed process
/// never vouches for another process that was given its PID.
pub fn register(dir: &Path, stem: &str) -> Result<Arc<Registration>, String> {
    static REGISTERED: Slots<Registration> = Mutex::new(BTreeMap::new());
    shared(&REGISTERED, dir.join(stem), || {
        open_shared_dir(dir)?;
        let path = dir.join(format!("{stem}.pid-{}", std::process::id()));
        let started = start_time(std::process::id()).unwrap_or_default();
        let record = format!("{started} {}", pid_namespace().unwrap_or_default());
        std::fs::write(&path, record.trim_end().as_bytes())
            .map_err(|e| format!("cannot register in {}: {e}", dir.display()))?;
        Ok(Registration { path })
    })
}

/// Registers this process for `key`'s device in the lock directory the environment names,
/// before the process creates a context on it (see the module's note); `None` where the
/// device has no stable name or the directory cannot be used (the session says why).
pub fn register_device(key: &DeviceKey) -> Option<Arc<Registration>> {
    let settings = LockSettings::from_env().ok()?;
    register(&settings.dir, &key.stem()?).ok()
}

/// The PIDs of the other live processes registered for the device `stem`. Registrations
/// of processes that are gone (killed before they could remove theirs) are ignored and
/// removed where we may; those whose PID now names a process started at another time, or
/// run by another user than the file's owner, are ignored.
pub fn peers(dir: &Path, stem: &str) -> Vec<u32> {
    let prefix = format!("{stem}.pid-");
    let own = std::process::id();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let pid: u32 = e
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .and_then(|p| p.parse().ok())?;
            if pid == own {
                return None;
            }
            let (started, namespace) = record(&e.path());
            if namespace.is_some_and(|ns| Some(ns) != pid_namespace()) {
                // Written in another PID namespace (a container sharing the folder): its
                // PID means nothing here, so it is neither a peer nor ours to remove.
                return None;
            }
            if !alive(pid) {
                // Left by a killed process (or one ended by a signal): not a peer, and not
                // worth keeping. Best effort: another user's file stays.
                let _ = std::fs::remove_file(e.path());
                return None;
            }
            same_process(pid, &e.path(), started.as_deref()).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether the registration at `path` was written by the process that has `pid` now: the
/// file's owner is the user that process runs as (the directory is shared by every user:
/// no one may vouch for another's processes), and its recorded start time is that
/// process's (an empty or unreadable record, from a version that wrote none or a system
/// without `/proc`, is taken as it is).
fn same_process(pid: u32, path: &Path, recorded: Option<&str>) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let owner = std::fs::symlink_metadata(path).map(|m| m.uid());
        let runs_as = std::fs::metadata(format!("/proc/{pid}")).map(|m| m.uid());
        if let (Ok(owner), Ok(runs_as)) = (owner, runs_as) {
            if owner != runs_as {
                return false;
            }
        }
    }
    match (start_time(pid), recorded) {
        (Some(now), Some(recorded)) => recorded == now,
        _ => true,
    }
}

/// A registration's record: the start time and the PID namespace of the process that wrote
/// it, each when there (files of the first builds of 2026-11-30 hold the time alone).
fn record(path: &Path) -> (Option<String>, Option<String>) {
    let text = crate::input::read_text(path, "registration", 256).unwrap_or_default();
    let mut words = text.split_whitespace().map(str::to_string);
    (words.next(), words.next())
}

/// This process's PID namespace (`pid:[4026531836]`), where `/proc` tells it.
fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.display().to_string())
}

/// When process `pid` started, in clock ticks since boot (`/proc/PID/stat`, field 22), as
/// text; `None` where there is no `/proc`.
fn start_time(pid: u32) -> Option<String> {
    // Bytes: the command name (field 2) is the executable's, and need not be UTF-8.
    let stat = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    // It may hold spaces and parentheses too: count after its end.
    let end = stat.iter().rposition(|&b| b == b')')?;
    let after = std::str::from_utf8(&stat[end + 1..]).ok()?;
    after.split_whitespace().nth(19).map(str::to_string)
}

/// Whether `pid` runs (by `/proc`; assumed alive where there is no `/proc`).
fn alive(pid: u32) -> bool {
    !Path::new("/proc/self").exists() || Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accprobe-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn bus_ids_are_normalised_and_keys_name_a_file() {
        for id in [
            "0000:19:00.0",
            "00000000:19:00.0",
            "19:00.0",
            "0000:19:00.0\0",
        ] {
            assert_eq!(
                normalize_bus_id(id).as_deref(),
                Some("0000:19:00.0"),
                "{id}"
            );
        }
        assert_eq!(
            normalize_bus_id("0000:AB:1F.7").as_deref(),
            Some("0000:ab:1f.7")
        );
        for bad in [
            "",
            "abc",
            "0000:19:00",
            "0000:19:00.9",
            "x:19:00.0",
            "1:2:3:4.0",
        ] {
            assert_eq!(normalize_bus_id(bad), None, "{bad}");
        }
        let key = DeviceKey {
            ordinal: 0,
            pci_bus_id: Some("0000:19:00.0".into()),
            uuid: Some("GPU-1234".into()),
        };
        assert_eq!(key.stem().as_deref(), Some("pci-0000-19-00.0"));
        assert_eq!(key.label(), "GPU 0 (0000:19:00.0)");
        let uuid_only = DeviceKey {
            pci_bus_id: None,
            ..key.clone()
        };
        assert_eq!(uuid_only.stem().as_deref(), Some("uuid-GPU-1234"));
        let none = DeviceKey {
            ordinal: 3,
            pci_bus_id: None,
            uuid: None,
        };
        assert_eq!((none.stem(), none.label()), (None, "GPU 3".to_string()));
    }

    #[test]
    fn settings_come_from_the_environment_values_and_refuse_bad_timeouts() {
        let d = LockSettings::from_values(None, None).unwrap();
        assert_eq!(d.dir, PathBuf::from(DEFAULT_DIR));
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        let s = LockSettings::from_values(Some("/x".into()), Some("2.5".into())).unwrap();
        assert_eq!(
            (s.dir, s.timeout),
            ("/x".into(), Duration::from_millis(2500))
        );
        for bad in ["-1", "abc", "", "NaN", "inf"] {
            let e = LockSettings::from_values(None, Some(bad.into())).unwrap_err();
            assert!(e.contains(LOCK_TIMEOUT_ENV), "{e}");
        }
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
        let text = std::fs::read_to_string(&first.path).unwrap();
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

    #[test]
    fn registrations_name_live_peers_only_and_go_with_their_process() {
        let dir = temp_dir("peers");
        let me = register(&dir, "k").unwrap();
        assert!(dir.join(format!("k.pid-{}", std::process::id())).exists());
        // Our own registration is not a peer; a live process's is; a dead one's is not.
        let parent = std::os::unix::process::parent_id();
        std::fs::write(dir.join(format!("k.pid-{parent}")), b"").unwrap();
        std::fs::write(dir.join("k.pid-4294967294"), b"").unwrap();
        std::fs::write(dir.join(format!("other.pid-{parent}")), b"").unwrap();
        assert_eq!(peers(&dir, "k"), vec![parent]);
        // What we wrote is our start time; the parent's PID with another start time is a
        // registration left by a process that is gone, whose PID was given again.
        let written = record(&dir.join(format!("k.pid-{}", std::process::id())));
        assert_eq!(written, (start_time(std::process::id()), pid_namespace()));
        let parent_started = start_time(parent).unwrap();
        std::fs::write(
            dir.join(format!("k.pid-{parent}")),
            parent_started.as_bytes(),
        )
        .unwrap();
        assert_eq!(peers(&dir, "k"), vec![parent]);
        std::fs::write(dir.join(format!("k.pid-{parent}")), b"1").unwrap();
        assert_eq!(
            peers(&dir, "k"),
            Vec::<u32>::new(),
            "a reused PID is no peer"
        );
        // A dead process's registration is removed by whoever looks.
        assert!(!dir.join("k.pid-4294967294").exists());
        // Written in another PID namespace: its PID means nothing here; neither a peer nor
        // removed, even where that PID is not alive here.
        let elsewhere = format!("{parent_started} pid:[1]");
        std::fs::write(dir.join(format!("k.pid-{parent}")), &elsewhere).unwrap();
        std::fs::write(dir.join("k.pid-4294967293"), &elsewhere).unwrap();
        assert_eq!(peers(&dir, "k"), Vec::<u32>::new());
        assert!(dir.join("k.pid-4294967293").exists());
        // Written by another user than the process runs as: it vouches for nothing (only
        // root can give a file away, so only then is this checked).
        {
            use std::os::unix::fs::MetadataExt;
            let path = dir.join(format!("k.pid-{parent}"));
            let ours = format!("{parent_started} {}", pid_namespace().unwrap_or_default());
            std::fs::write(&path, ours.trim_end()).unwrap();
            assert_eq!(peers(&dir, "k"), vec![parent]);
            let root = std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0);
            if root && std::os::unix::fs::chown(&path, Some(65534), Some(65534)).is_ok() {
                assert_eq!(peers(&dir, "k"), Vec::<u32>::new(), "another user's file");
            }
        }
        drop(me);
        assert!(!dir.join(format!("k.pid-{}", std::process::id())).exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A `sleep` started under an executable named `name` (its comm).
    fn sleeper(dir: &Path, name: &std::ffi::OsStr) -> std::process::Child {
        let exe = dir.join(name);
        std::fs::copy("/bin/sleep", &exe).unwrap();
        // Another test's fork may still hold the copy open for writing: retry ETXTBSY.
        for _ in 0..50 {
            match std::process::Command::new(&exe).arg("5").spawn() {
                Err(e) if e.raw_os_error() == Some(26) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                other => return other.unwrap(),
            }
        }
        panic!("cannot start {}", exe.display())
    }

    #[test]
    fn start_time_reads_field_22_whatever_the_process_is_called() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let mut plain = sleeper(dir.path(), std::ffi::OsStr::new("plain"));
        let mut odd = sleeper(dir.path(), std::ffi::OsStr::new("a) b (c) 1 2"));
        let mut bytes = sleeper(dir.path(), std::ffi::OsStr::from_bytes(b"x\xff)y z"));
        let ticks = |c: &std::process::Child| start_time(c.id()).map(|t| t.parse::<u64>().unwrap());
        let base = ticks(&plain).expect("plain");
        for c in [&odd, &bytes] {
            let t = ticks(c);
            assert!(
                t.is_some_and(|t| t.abs_diff(base) < 100),
                "PID {}: {t:?} vs {base}",
                c.id()
            );
        }
        for c in [&mut plain, &mut odd, &mut bytes] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
