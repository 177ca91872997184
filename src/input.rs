//! Every file accprobe reads goes through here: regular files only, and never more than a
//! stated size, so that `--results /dev/zero`, a FIFO or a runaway file is a clear error
//! instead of a hang or unbounded memory. Also the one reading of yes/no environment
//! variables (`flag`), and where a path really leads (`real_path`, `confined`), which
//! a reader checks before it reads and the generated-file writer before it writes.

use crate::error::{Error, Result};
use crate::text::Shown;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The most a results file may hold (the full H200 matrix with every sample is ~2 MiB).
pub const RESULTS_LIMIT: u64 = 256 << 20;
/// The most a hand-written or generated YAML file (profile, baselines, policy) may hold.
pub const YAML_LIMIT: u64 = 4 << 20;
/// The most a tool's output read back from a file (ptxas log, SASS, CUBIN) may hold.
pub(crate) const TOOL_OUTPUT_LIMIT: u64 = 256 << 20;

/// What kind of file `m` is, in words, for errors about non-regular files.
fn kind(m: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn mib(n: u64) -> String {
    format!("{} MiB", n >> 20)
}

/// The bytes of `file`, a regular file of at most `limit` bytes; `what` names it in
/// errors (`results`, `profile`).
pub(crate) fn read_bytes(file: &Path, what: &str, limit: u64) -> Result<Vec<u8>> {
    // Checked before opening: opening a FIFO for reading would block.
    let m = std::fs::metadata(file).map_err(|e| Error::io(file, &format!("read {what}"), e))?;
    if !m.is_file() {
        return Err(Error::in_file(
            file,
            format!(
                "cannot read {what}: {} is {}, expected a regular file",
                file.shown(),
                kind(&m)
            ),
        ));
    }
    let too_big = || {
        Error::in_file(
            file,
            format!(
                "cannot read {what}: larger than {}, the most a {what} file may hold",
                mib(limit)
            ),
        )
    };
    if m.len() > limit {
        return Err(too_big());
    }
    let f = std::fs::File::open(file).map_err(|e| Error::io(file, &format!("read {what}"), e))?;
    let mut bytes = Vec::with_capacity(m.len() as usize);
    // One byte past the limit tells a file that grew since its metadata was read.
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(file, &format!("read {what}"), e))?;
    if bytes.len() as u64 > limit {
        return Err(too_big());
    }
    Ok(bytes)
}

/// `read_bytes` as UTF-8 text.
pub fn read_text(file: &Path, what: &str, limit: u64) -> Result<String> {
    String::from_utf8(read_bytes(file, what, limit)?).map_err(|e| {
        Error::in_file(
            file,
            format!(
                "{what} is not valid UTF-8 (byte offset {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// A yes/no setting as the environment gives it (read through `config`): `1`/`true`/`yes`
/// -> true, empty/`0`/`false` -> false (any case, spaces trimmed), anything else `None` (a
/// configuration error).
pub(crate) fn flag(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" => Some(true),
        "" | "0" | "false" => Some(false),
        _ => None,
    }
}

/// `Ok` when the file `path` reaches ([`real_path`]: links followed) is inside the real
/// folder `dir` (canonicalised), else `Err` with where it leads. A link that stays inside
/// the folder is fine. Checked when a profile is read and again by the generated-file
/// writer (`output::generated`) just before it writes, so that neither reads nor writes a file outside the profile's folder.
pub(crate) fn confined(dir: &Path, path: &Path) -> std::result::Result<(), PathBuf> {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let real_dir = dir.canonicalize().unwrap_or_else(|_| real_path(dir));
    let real = real_path(path);
    if real.starts_with(&real_dir) && real != real_dir {
        Ok(())
    } else {
        Err(real)
    }
}

/// The most symlinks followed before a path is taken as it is (Linux's own limit).
const MAX_LINKS: usize = 40;

/// The file `p` names, absolute, as the atomic writer and a reader reach it: resolved one
/// component at a time as the kernel does, every symlink on the way followed (a dangling
/// one too: to the file it would create), `..` taken on the real parent, and what does
/// not exist yet kept as written (creating it would make it so). Confinement and "one
/// file" checks compare these, never the spelling.
pub(crate) fn real_path(p: &Path) -> PathBuf {
    let mut out = if p.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"))
    };
    // The components still to walk, the next one last.
    let mut todo: Vec<std::ffi::OsString> = Vec::new();
    let push = |todo: &mut Vec<std::ffi::OsString>, p: &Path| {
        todo.extend(p.components().rev().map(|c| c.as_os_str().to_os_string()));
    };
    push(&mut todo, p);
    let mut links = 0;
    while let Some(c) = todo.pop() {
        match c.to_str() {
            Some("/") => out = PathBuf::from("/"),
            Some(".") => {}
            Some("..") => {
                out.pop();
            }
            _ => {
                let next = out.join(&c);
                let link = std::fs::symlink_metadata(&next)
                    .is_ok_and(|m| m.file_type().is_symlink())
                    .then(|| std::fs::read_link(&next).ok())
                    .flatten();
                match link {
                    Some(target) if links < MAX_LINKS => {
                        links += 1;
                        // An absolute target starts again at the root (its first component).
                        push(&mut todo, &target);
                    }
                    _ => out = next,
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_fifos_and_folders_are_refused_before_reading() {
        for (path, words) in [
            ("/dev/zero", "is a character device"),
            ("/dev/null", "is a character device"),
            ("/tmp", "is a folder"),
        ] {
            let e = read_bytes(Path::new(path), "results", RESULTS_LIMIT).unwrap_err();
            assert!(e.to_string().contains(words), "{e}");
            assert!(e.to_string().starts_with(path), "{e}");
        }
        let dir = std::env::temp_dir().join(format!("accprobe-input-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("pipe.json");
        if std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .is_ok_and(|s| s.success())
        {
            // No writer: opening it would block forever.
            let e = read_bytes(&fifo, "results", RESULTS_LIMIT).unwrap_err();
            assert!(e.to_string().contains("is a FIFO"), "{e}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_over_the_limit_are_refused_and_those_within_are_read() {
        let dir = std::env::temp_dir().join(format!("accprobe-input-big-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("p.yaml");
        std::fs::write(&f, "x".repeat(100)).unwrap();
        assert_eq!(read_text(&f, "profile", 100).unwrap().len(), 100);
        let e = read_text(&f, "profile", 99).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        std::fs::write(&f, b"ok\xff").unwrap();
        let e = read_text(&f, "profile", 100).unwrap_err();
        assert!(
            e.to_string().contains("not valid UTF-8 (byte offset 2)"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
