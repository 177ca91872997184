//! One entry of the compile cache on disk: a folder named by the key, holding each
//! program's CUBIN, log and SASS and a manifest of their SHA-256 digests. Read back only
//! when every file matches the manifest; stored through a temporary folder renamed into
//! place; marked used on each hit.

use super::key::sha256_hex;
use super::names::part_file;
use super::prune::prune_cache;
use crate::compile::{Compiled, Program};
use crate::error::{Error, LineError};
use crate::input;
use std::collections::BTreeMap;
use std::path::Path;

/// Why a cache entry is not trusted: it is compiled again and replaced, and the reason
/// goes into [`super::CacheUse::Rebuilt`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Untrusted {
    #[error("no manifest: {0}")]
    NoManifest(Error),
    #[error("bad manifest line {0:?}")]
    ManifestLine(String),
    #[error("{name}: {error}")]
    Unreadable { name: String, error: Error },
    #[error("{0} does not match its digest")]
    Digest(String),
    #[error("{0} is not in the manifest")]
    NotInManifest(String),
    #[error("{0} is not UTF-8")]
    NotUtf8(String),
    #[error("more parts than the matrix has variants ({0})")]
    TooManyParts(usize),
    #[error("{0} is in the manifest but belongs to no part")]
    Unclaimed(String),
    #[error("its ptxas log: {0}")]
    PtxasLog(LineError),
    #[error("{0} is in two of its parts")]
    InTwoParts(String),
    #[error("its ptxas report does not cover every variant")]
    Uncovered,
}

/// A cache entry's parts, each file checked against the manifest's digests; every file the
/// manifest names must be read, and there are never more parts than `max_parts` (the
/// matrix's variants: each program holds one at least).
pub(super) fn read_entry(
    dir: &Path,
    max_parts: usize,
) -> std::result::Result<Vec<Program>, Untrusted> {
    let manifest = input::read_text(&dir.join("manifest"), "manifest", input::YAML_LIMIT)
        .map_err(Untrusted::NoManifest)?;
    let mut want: BTreeMap<&str, &str> = BTreeMap::new();
    for line in manifest.lines() {
        let (name, digest) = line
            .split_once(' ')
            .ok_or_else(|| Untrusted::ManifestLine(line.to_string()))?;
        want.insert(name, digest);
    }
    // What the manifest names, for the parts' optional files; `want` loses each as it is read.
    let named: std::collections::BTreeSet<&str> = want.keys().copied().collect();
    let mut read = |name: &str| -> std::result::Result<Vec<u8>, Untrusted> {
        let bytes = input::read_bytes(&dir.join(name), name, input::TOOL_OUTPUT_LIMIT).map_err(
            |error| Untrusted::Unreadable {
                name: name.to_string(),
                error,
            },
        )?;
        match want.remove(name) {
            Some(d) if d == sha256_hex(&[&bytes]) => Ok(bytes),
            Some(_) => Err(Untrusted::Digest(name.to_string())),
            None => Err(Untrusted::NotInManifest(name.to_string())),
        }
    };
    let text = |name: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|_| Untrusted::NotUtf8(name.to_string()))
    };
    let mut parts = Vec::new();
    for k in 0.. {
        let cubin_name = part_file("cubin", k);
        if k > 0 && !named.contains(cubin_name.as_str()) {
            break;
        }
        if k >= max_parts.max(1) {
            return Err(Untrusted::TooManyParts(max_parts));
        }
        let cubin = read(&cubin_name)?;
        let log_name = part_file("log", k);
        let log = text(&log_name, read(&log_name)?)?;
        let sass_name = part_file("sass", k);
        let sass = if named.contains(sass_name.as_str()) {
            Some(text(&sass_name, read(&sass_name)?)?)
        } else {
            None
        };
        parts.push(Program { cubin, log, sass });
    }
    match want.keys().next() {
        Some(extra) => Err(Untrusted::Unclaimed(extra.to_string())),
        None => Ok(parts),
    }
}

/// Marks the entry in `dir` used now (its manifest's modification time), for
/// [`prune_cache`]. A cache that cannot be written (shared read-only) is left as it is.
pub(super) fn mark_used(dir: &Path) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // Never through a link (the manifest may have been replaced since it was read), and
    // a FIFO put in its place must not make the open wait for a reader for good.
    let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join("manifest"))
    else {
        return;
    };
    if f.metadata().is_ok_and(|m| m.is_file()) {
        // "Now" as a null pointer, not a time given: anyone who may write the file may set
        // that, where a given time needs the file's owner (in a cache a group shares, most
        // entries are another user's: `File::set_modified` would fail on them).
        // SAFETY: a file descriptor this function holds open; null is allowed.
        unsafe { libc::futimens(f.as_raw_fd(), std::ptr::null()) };
    }
}

pub(super) fn write_entry(dir: &Path, c: &Compiled) -> std::io::Result<()> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        dir.file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    let stored = fill_entry(&tmp, c).and_then(|()| {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::rename(&tmp, dir)
    });
    // A write that failed (a full disk) or a rename that did (another process stored the
    // entry between the removal and the rename) must not leave a whole entry behind.
    if stored.is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    } else {
        // The folder only grows when an entry is stored: that is when old ones go.
        prune_cache(parent, std::time::SystemTime::now());
    }
    stored
}

/// The files of an entry and its manifest, in the folder `tmp`.
fn fill_entry(tmp: &Path, c: &Compiled) -> std::io::Result<()> {
    std::fs::create_dir_all(tmp)?;
    let mut manifest = String::new();
    let mut put = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
        std::fs::write(tmp.join(name), bytes)?;
        manifest.push_str(&format!("{name} {}\n", sha256_hex(&[bytes])));
        Ok(())
    };
    for (k, p) in c.parts.iter().enumerate() {
        put(&part_file("cubin", k), &p.cubin)?;
        put(&part_file("log", k), p.log.as_bytes())?;
        if let Some(text) = &p.sass {
            put(&part_file("sass", k), text.as_bytes())?;
        }
    }
    std::fs::write(tmp.join("manifest"), manifest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::Sass;

    /// With `ACCPROBE_TEST_MARK_USED` set (a folder), marks that entry used; run by
    /// [`a_hit_marks_an_entry_of_another_user_used`] as another user.
    #[test]
    #[ignore]
    fn mark_used_as_told() {
        if let Some(dir) = crate::config::test_mark_used() {
            mark_used(&dir);
        }
    }

    #[test]
    fn a_hit_marks_an_entry_of_another_user_used() {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        use std::time::{Duration, SystemTime};
        // Another user's process is needed: only root may start one.
        if unsafe { libc::geteuid() } != 0 {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("b".repeat(64));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("manifest"), "").unwrap();
        // A cache a group shares: the entry is another's, but anyone may write it.
        for (p, mode) in [
            (root.path(), 0o777),
            (&dir, 0o777),
            (&dir.join("manifest"), 0o666),
        ] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let old = SystemTime::now() - Duration::from_secs(40 * 24 * 3600);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("manifest"))
            .unwrap();
        f.set_modified(old).unwrap();
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "compile::cache::entry::tests::mark_used_as_told",
                "--ignored",
                "--quiet",
            ])
            .env(crate::config::TEST_MARK_USED_ENV, &dir)
            .uid(65534)
            .gid(65534)
            .status();
        // Where this binary cannot be run as another user (a build folder only root may
        // enter, no CAP_SETUID in a container), there is no one else to be.
        let status = match status {
            Ok(s) => s,
            Err(e) => {
                eprintln!("skipped: cannot run this test binary as uid 65534: {e}");
                return;
            }
        };
        assert!(status.success());
        let used = std::fs::metadata(dir.join("manifest"))
            .unwrap()
            .modified()
            .unwrap();
        assert!(used > old + Duration::from_secs(24 * 3600), "{used:?}");
    }

    #[test]
    fn marking_used_neither_follows_a_link_nor_blocks_on_a_fifo() {
        use std::time::{Duration, SystemTime};
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::write(&outside, "someone's file").unwrap();
        let old = SystemTime::now() - Duration::from_secs(400 * 24 * 3600);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&outside)
            .unwrap();
        f.set_modified(old).unwrap();
        let linked = root.path().join("linked");
        std::fs::create_dir(&linked).unwrap();
        std::os::unix::fs::symlink(&outside, linked.join("manifest")).unwrap();
        mark_used(&linked);
        let t = std::fs::metadata(&outside).unwrap().modified().unwrap();
        assert_eq!(t, old, "the file the link leads to was marked");
        // A FIFO put in the manifest's place (after the entry was read) with no reader:
        // opening it to write would wait for one for good.
        let fifo = root.path().join("fifo");
        std::fs::create_dir(&fifo).unwrap();
        let path =
            std::ffi::CString::new(fifo.join("manifest").into_os_string().into_encoded_bytes())
                .unwrap();
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            mark_used(&fifo);
            let _ = done.send(());
        });
        assert!(
            finished.recv_timeout(Duration::from_secs(5)).is_ok(),
            "marking a FIFO used still waits after 5 s"
        );
    }

    #[test]
    fn a_cache_entry_that_cannot_be_stored_leaves_no_temporary_folder() {
        let root = tempfile::tempdir().unwrap();
        // What stands at the entry's place cannot be removed nor replaced by a folder
        // (another process's entry, renamed there between our removal and our rename,
        // does the same: ENOTEMPTY).
        let dir = root.path().join("key");
        std::fs::write(&dir, b"not a folder").unwrap();
        let c = Compiled {
            parts: vec![Program {
                cubin: vec![1, 2, 3],
                log: "log".into(),
                sass: None,
            }],
            log: "log".into(),
            reports: BTreeMap::new(),
            options: Vec::new(),
            sass: Sass::Unavailable("none".into()),
            nvrtc_seconds: 0.0,
            sass_seconds: 0.0,
        };
        assert!(write_entry(&dir, &c).is_err());
        let left: Vec<_> = std::fs::read_dir(root.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, [std::ffi::OsString::from("key")], "{left:?}");
    }

    #[test]
    fn cache_entries_with_parts_missing_or_extra_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut manifest = String::new();
        for name in ["cubin", "log", "cubin.2", "log.2"] {
            std::fs::write(d.join(name), name).unwrap();
            manifest.push_str(&format!("{name} {}\n", sha256_hex(&[name.as_bytes()])));
        }
        std::fs::write(d.join("manifest"), &manifest).unwrap();
        let e = read_entry(d, 24).unwrap_err().to_string();
        assert!(
            e.contains("cubin.2") && e.contains("belongs to no part"),
            "{e}"
        );
        // The second part named without the first part's files is not read either.
        std::fs::write(d.join("manifest"), manifest.replace("cubin ", "cubin.1 ")).unwrap();
        assert!(read_entry(d, 24).is_err());
        // Two parts of a matrix of one variant: more programs than kernels.
        let mut two = String::new();
        for name in ["cubin", "log", "cubin.1", "log.1"] {
            std::fs::write(d.join(name), name).unwrap();
            two.push_str(&format!("{name} {}\n", sha256_hex(&[name.as_bytes()])));
        }
        std::fs::write(d.join("manifest"), &two).unwrap();
        assert_eq!(read_entry(d, 2).map(|p| p.len()), Ok(2));
        let e = read_entry(d, 1).unwrap_err().to_string();
        assert!(e.contains("more parts than the matrix has variants"), "{e}");
    }
}
