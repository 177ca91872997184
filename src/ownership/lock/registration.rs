//! The registrations of a device's users: every process that opens a device writes
//! `<stem>.pid-<PID>` beside its lock (holding the process's start time and PID namespace)
//! before it creates its context, and removes it when the context is gone, so that the
//! contention checks tell a waiting accprobe's idle context from another program's.

use super::{
    open_shared_dir, shared, DeviceKey, LockDirError, LockDirRefused, LockSettings, Slots,
};
use crate::text::Shown;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// directory, removed when dropped.
#[derive(Debug)]
pub(crate) struct Registration {
    path: PathBuf,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Why this process could not register as a user of a device.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RegisterError {
    #[error(transparent)]
    Dir(#[from] LockDirError),
    #[error("cannot register in {}: {source}", dir.shown())]
    Write {
        dir: PathBuf,
        source: std::io::Error,
    },
}

/// Registers this process as a user of the device `stem` (once per process, shared). The
/// file holds the process's start time, so that a registration left by a killed process
/// never vouches for another process that was given its PID.
pub(crate) fn register(dir: &Path, stem: &str) -> Result<Arc<Registration>, RegisterError> {
    static REGISTERED: Slots<Registration> = Mutex::new(BTreeMap::new());
    shared(&REGISTERED, dir.join(stem), || {
        open_shared_dir(dir)?;
        let path = dir.join(format!("{stem}.pid-{}", std::process::id()));
        let started = start_time(std::process::id()).unwrap_or_default();
        let record = format!("{started} {}", pid_namespace().unwrap_or_default());
        std::fs::write(&path, record.trim_end().as_bytes()).map_err(|source| {
            RegisterError::Write {
                dir: dir.to_path_buf(),
                source,
            }
        })?;
        Ok(Registration { path })
    })
}

/// Registers this process for `key`'s device in the lock directory the environment names,
/// before the process creates a context on it (see the module's note). `Ok(None)` where
/// the device has no stable name, the settings are wrong or the default directory cannot
/// be used (the session says why); `Err` where the directory the user named cannot be
/// used, a configuration error.
pub(crate) fn register_device(
    key: &DeviceKey,
) -> Result<Option<Arc<Registration>>, LockDirRefused> {
    match LockSettings::from_env() {
        Ok(settings) => register_device_in(&settings, key),
        Err(_) => Ok(None),
    }
}

/// [`register_device`] with the given settings.
pub(crate) fn register_device_in(
    settings: &LockSettings,
    key: &DeviceKey,
) -> Result<Option<Arc<Registration>>, LockDirRefused> {
    let Some(stem) = key.stem() else {
        return Ok(None);
    };
    match register(&settings.dir, &stem) {
        Ok(r) => Ok(Some(r)),
        Err(why) => settings.refusal(&why.to_string()).map_or(Ok(None), Err),
    }
}

/// The PIDs of the other live processes registered for the device `stem`. Registrations
/// of processes that are gone (killed before they could remove theirs) are ignored and
/// removed where we may; those whose PID now names a process started at another time, or
/// run by another user than the file's owner, are ignored.
pub(crate) fn peers(dir: &Path, stem: &str) -> Vec<u32> {
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
/// it, each when there (a record written by an older accprobe holds the time alone).
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
    use super::super::tests::temp_dir;
    use super::*;
    use std::time::Duration;

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

    #[test]
    fn a_lock_directory_the_user_named_that_cannot_be_used_is_refused() {
        let dir = temp_dir("named");
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("a-file");
        std::fs::write(&file, b"").unwrap();
        let key = DeviceKey {
            ordinal: 0,
            pci_bus_id: Some("0000:19:00.0".into()),
            uuid: None,
        };
        let named = LockSettings::from_values(Some(file.clone()), None);
        let e = register_device_in(&named, &key).unwrap_err();
        assert_eq!(e.dir, file);
        let e = e.to_string();
        assert!(
            e.starts_with(&format!(
                "ACCPROBE_LOCK_DIR={:?} cannot be used: ",
                file.display().to_string()
            )),
            "{e}"
        );
        // The default directory unusable: registered nowhere, measured without the lock.
        let default = LockSettings {
            named: false,
            ..named.clone()
        };
        assert!(register_device_in(&default, &key).unwrap().is_none());
        // A usable one registers; a device without a stable name needs none.
        let usable = LockSettings::from_values(Some(dir.clone()), None);
        assert!(register_device_in(&usable, &key).unwrap().is_some());
        let unnamed = DeviceKey {
            pci_bus_id: None,
            ..key
        };
        assert!(register_device_in(&named, &unnamed).unwrap().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
