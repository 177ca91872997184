//! Every file accprobe writes goes through here, and names made safe as file names.
//!
//! What a user points an output at is respected, never destroyed:
//! - a regular file (or a path that does not exist yet) is replaced atomically: the
//!   contents go to a temporary file in the same folder (`tempfile`), which is synced and
//!   renamed over the target, so a reader never sees half a file; when anything fails the
//!   temporary file is removed, not left behind, also when a signal ends the process in
//!   the middle of the write (`interrupt::in_flight`);
//! - a symlink is followed: the atomic replacement happens at the file it resolves to, and
//!   the link stays a link;
//! - anything else that is not a folder (`/dev/null`, `/dev/stdout`, `/dev/full`, a FIFO)
//!   is written through, opened for writing as it is: a device node is never replaced by a
//!   regular file;
//! - a folder is refused with an error that says so.

pub(crate) mod generated;

pub use generated::{refuse_if_ci, refuse_under_ci, write_generated, write_generated_unless_ci};

use crate::text::Shown;
use std::fs::OpenOptions;
use std::io::{Error, ErrorKind, Write};
use std::path::{Path, PathBuf};

/// How many symlinks are followed before giving up (Linux's own limit).
const MAX_LINKS: usize = 40;

/// `name` as one file name component: ASCII letters, digits, `.` and `-` kept, anything
/// else (a `/` among them) replaced by `replacement`. Lock files and toolchain results use
/// it; each keeps its own `replacement`, so the names already on disk stay the same.
pub fn file_safe(name: &str, replacement: char) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                c
            } else {
                replacement
            }
        })
        .collect()
}

/// Writes `contents` to `path` as the module documentation says.
pub fn write_atomic(path: &Path, contents: &str) -> std::io::Result<()> {
    write_atomic_bytes(path, contents.as_bytes())
}

/// [`write_atomic`] for bytes (a CUBIN).
pub(crate) fn write_atomic_bytes(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let target = resolve_links(path)?;
    match std::fs::metadata(&target) {
        Ok(m) if m.is_dir() => Err(Error::new(
            ErrorKind::IsADirectory,
            format!("{} is a folder, not a file", target.shown()),
        )),
        Ok(m) if !m.is_file() => write_through(&target, contents),
        Ok(_) => replace(&target, contents),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            if target == path {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
            }
            replace(&target, contents)
        }
        Err(e) => Err(e),
    }
}

/// The file `path` names once every symlink on it is followed (`path` itself when it is
/// not a link). A dangling link resolves to the file it would create.
fn resolve_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&current)?;
                current = match current.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(current),
        }
    }
    Err(Error::other(format!(
        "{}: more than {MAX_LINKS} symlinks to follow (a symlink loop?)",
        path.shown()
    )))
}

/// Writes into an existing non-regular file (a device or a FIFO) without replacing it.
fn write_through(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut f = OpenOptions::new().write(true).open(path)?;
    f.write_all(contents)?;
    f.flush()
}

/// The atomic replacement of a regular file: a `tempfile::NamedTempFile` in the target's
/// folder (same file system, so the rename is atomic), synced, then persisted over the
/// target. On any error the temporary file is deleted when it is dropped.
fn replace(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // tempfile creates 0600 files; the file that replaces the target keeps the target's
    // mode, and a new file gets what any other program's would (0666 less the umask), so
    // a CI uploader or a colleague can still read it.
    use std::os::unix::fs::PermissionsExt;
    let existing = std::fs::metadata(path).ok().map(|m| m.permissions());
    let mode = existing
        .clone()
        .unwrap_or_else(|| std::fs::Permissions::from_mode(0o666));
    // Registered while it is in flight: a signal that ends the process before the rename
    // removes it (`interrupt::in_flight`), where tempfile's own removal would not run.
    let (mut tmp, _in_flight) = crate::interrupt::in_flight(|| {
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".tmp")
            .permissions(mode)
            .tempfile_in(dir)?;
        let path = tmp.path().to_path_buf();
        Ok((tmp, path))
    })?;
    if let Some(p) = existing {
        tmp.as_file().set_permissions(p)?;
    }
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_safe_keeps_letters_digits_dots_and_dashes_only() {
        assert_eq!(file_safe("0000:19:00.0", '-'), "0000-19-00.0");
        assert_eq!(file_safe("usr/local/cuda 12.8", '_'), "usr_local_cuda_12.8");
        assert_eq!(file_safe("GPU-ab_é", '_'), "GPU-ab__");
        assert_eq!(file_safe("", '_'), "");
    }

    #[test]
    fn a_written_file_is_readable_by_others_and_keeps_the_mode_it_had() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let new = dir.join("new.xml");
        write_atomic(&new, "a").unwrap();
        let mode = std::fs::metadata(&new).unwrap().permissions().mode() & 0o777;
        assert_eq!(
            mode & 0o044,
            0o044,
            "group and others can read it: {mode:o}"
        );
        let kept = dir.join("kept.xml");
        std::fs::write(&kept, "a").unwrap();
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&kept, "b").unwrap();
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }
    use std::os::unix::fs::{symlink, FileTypeExt};

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("sub/junit.xml");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        assert_eq!(entries(path.parent().unwrap()), ["junit.xml"]);
    }

    #[test]
    fn device_nodes_are_written_through_and_never_replaced() {
        for dev in ["/dev/null", "/dev/full"] {
            let dev = Path::new(dev);
            if !dev.exists() {
                continue;
            }
            let result = write_atomic(dev, "<testsuites/>");
            if dev.ends_with("full") {
                let e = result.expect_err("/dev/full has no space: the write must fail");
                assert_eq!(e.raw_os_error(), Some(28), "ENOSPC, not a rename: {e}");
            } else {
                result.unwrap();
            }
            let m = std::fs::metadata(dev).unwrap();
            assert!(
                m.file_type().is_char_device(),
                "{} was replaced",
                dev.shown()
            );
        }
    }

    #[test]
    fn a_fifo_is_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("mkfifo unavailable: skipped");
            return;
        }
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        write_atomic(&fifo, "through the pipe").unwrap();
        assert_eq!(reader.join().unwrap(), "through the pipe");
        let m = std::fs::symlink_metadata(&fifo).unwrap();
        assert!(m.file_type().is_fifo(), "the FIFO was replaced");
        assert_eq!(entries(dir), ["pipe"]);
    }

    #[test]
    fn a_symlink_is_written_through_and_stays_a_link() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        std::fs::create_dir_all(dir.join("real")).unwrap();
        std::fs::write(dir.join("real/results.json"), "old").unwrap();
        symlink("real/results.json", dir.join("results.json")).unwrap();
        // A chain of two links, the second relative to its own folder.
        symlink(dir.join("results.json"), dir.join("real/chain.json")).unwrap();
        write_atomic(&dir.join("real/chain.json"), "new").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("real/results.json")).unwrap(),
            "new"
        );
        for link in ["results.json", "real/chain.json"] {
            let m = std::fs::symlink_metadata(dir.join(link)).unwrap();
            assert!(m.file_type().is_symlink(), "{link} was replaced");
        }
        // A dangling link creates the file it points at.
        symlink("real/fresh.json", dir.join("fresh.json")).unwrap();
        write_atomic(&dir.join("fresh.json"), "fresh").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("real/fresh.json")).unwrap(),
            "fresh"
        );
        assert_eq!(
            entries(&dir.join("real")),
            ["chain.json", "fresh.json", "results.json"]
        );
        // A loop is an error, not a hang.
        symlink("b", dir.join("a")).unwrap();
        symlink("a", dir.join("b")).unwrap();
        let e = write_atomic(&dir.join("a"), "x").unwrap_err();
        assert!(e.to_string().contains("symlink loop"), "{e}");
    }

    #[test]
    fn a_folder_is_refused_and_no_temporary_file_is_left() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let target = dir.join("junit.xml");
        std::fs::create_dir_all(target.join("inside")).unwrap();
        let e = write_atomic(&target, "x").unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        // Past the check (a folder appearing between check and rename): the rename fails
        // and the temporary file goes with the error.
        let e = replace(&target, b"x").unwrap_err();
        assert!(!e.to_string().is_empty());
        assert_eq!(entries(dir), ["junit.xml"], "nothing beside the target");
    }

    #[test]
    fn a_write_into_a_read_only_folder_fails_and_leaves_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let out = dir.join("out");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("results.json"), "old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o555)).unwrap();
        let result = write_atomic(&out.join("results.json"), "new");
        // root writes into read-only folders: then the write succeeds, and still nothing
        // but the target may be there.
        let privileged = std::fs::write(out.join("probe"), "").is_ok();
        let _ = std::fs::remove_file(out.join("probe"));
        if privileged {
            result.unwrap();
            assert_eq!(
                std::fs::read_to_string(out.join("results.json")).unwrap(),
                "new"
            );
        } else {
            let e = result.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
            assert_eq!(
                std::fs::read_to_string(out.join("results.json")).unwrap(),
                "old"
            );
        }
        assert_eq!(entries(&out), ["results.json"]);
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}
