//! The compile cache's key: the source, the options and the toolchain's fingerprint (NVRTC's
//! version, the library files it runs and the disassembler, each as the file it is now),
//! hashed with SHA-256.

use crate::compile::disassemble::{disassembler_flag, find_disassembler};
use crate::compile::libraries::{
    builtins_beside, load_builtins, loaded_nvrtc, mapped_files, replaced, unknown_library,
};
use crate::compile::nvrtc::nvrtc_version;
use crate::compile::source::source;
use crate::compile::CompileError;
use crate::model::variant::Variant;
use std::path::{Path, PathBuf};

/// SHA-256 of `parts`, each after its length (so that no two lists of parts share the
/// bytes hashed), in lower-case hex.
pub(super) fn sha256_hex(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    crate::digest::hex(&h.finalize())
}

/// SHA-256 of `bytes`, in hex.
pub fn sha256_hex_of(bytes: &[u8]) -> String {
    sha256_hex(&[bytes])
}

/// Whether `s` is a SHA-256 as [`sha256_hex`] writes it (a cache key, a manifest's digest):
/// 64 lower-case hexadecimal digits.
pub(super) fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The cache key of a compilation: source, options (the architecture among them) and the
/// toolchain's [`fingerprint`].
pub fn cache_key(variants: &[Variant], options: &[String], fingerprint: &str) -> String {
    let src = source(variants);
    let opts = options.join("\0");
    sha256_hex(&[src.as_bytes(), opts.as_bytes(), fingerprint.as_bytes()])
}

/// A file as it is now: the file a path leads to (links followed, so that a link moved to
/// another release, or a relative path from another folder, names what it now runs), its
/// size and modification time (a reinstall or another release changes them).
fn file_identity(path: &Path) -> String {
    let real = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    match std::fs::metadata(&real) {
        Ok(m) => {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!("{} {} {modified}", real.display(), m.len())
        }
        Err(_) => format!("{} (unreadable)", path.display()),
    }
}

/// The disassembler as the cache key names it: the file it runs and how it is run (the
/// flag goes by the name it is called by, which a link may give another file).
fn disassembler_key(tool: &Path) -> String {
    format!(
        "{} {} ({})",
        tool.display(),
        disassembler_flag(tool).join(" "),
        file_identity(tool)
    )
}

/// What made a cache entry's files: NVRTC's version, the libnvrtc this process loaded and
/// the disassembler, each by `file_identity`. `nvrtcVersion` says only major.minor, so
/// without the library NVRTC 13.0.48 and 13.0.88, or a compiler engineer's own build,
/// would share entries, and a gate meant to catch the new compiler would judge the old
/// one's code; the SASS is the disassembler's text. An error where the library cannot be
/// named (`unknown_library`). Call only after checking that libnvrtc is present.
pub fn fingerprint() -> Result<String, Unfingerprinted> {
    toolchain_fingerprint()
}

/// Why there is no [`fingerprint`]: NVRTC did not say its version, or a file it runs
/// cannot be named (the compile cache then compiles without it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unfingerprinted {
    #[error(transparent)]
    Nvrtc(CompileError),
    #[error("{0}")]
    Unnamed(String),
}

/// [`fingerprint`], with why there is none.
pub(super) fn toolchain_fingerprint() -> std::result::Result<String, Unfingerprinted> {
    // First: it loads libnvrtc, if nothing has yet.
    let version = nvrtc_version().map_err(Unfingerprinted::Nvrtc)?;
    load_builtins(&version);
    let loaded = loaded_nvrtc();
    if let Some(why) = unknown_library(&loaded) {
        return Err(Unfingerprinted::Unnamed(why));
    }
    // The builtins that compile may be another folder's than libnvrtc's (see
    // `load_builtins`): those mapped are named beside those in libnvrtc's folder.
    let builtins = mapped_files("libnvrtc-builtins.so");
    if let Some(p) = builtins.iter().find(|p| replaced(p)) {
        return Err(Unfingerprinted::Unnamed(format!(
            "the NVRTC builtins this process loaded, {}, were removed or replaced since",
            p.display()
        )));
    }
    let mut files: Vec<PathBuf> = loaded.clone();
    files.extend(loaded.iter().flat_map(|p| builtins_beside(p)));
    files.extend(builtins);
    // One file under two names (a link beside the library, its target mapped) once.
    let mut libraries: Vec<String> = files.iter().map(|p| file_identity(p)).collect();
    libraries.sort();
    libraries.dedup();
    let disassembler =
        find_disassembler().map_or("no disassembler".to_string(), |p| disassembler_key(&p));
    Ok(format!(
        "NVRTC {version} | {} | {disassembler}",
        libraries.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn the_key_names_how_the_disassembler_is_run() {
        // One program under two names: run as nvdisasm (`-ndf`) and as cuobjdump (`-sass`)
        // it prints other text, so the two must not share entries.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("disassembler");
        std::fs::write(&real, "#!/bin/sh\necho \"$1\"\n").unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::os::unix::fs::symlink(&real, a.join("nvdisasm")).unwrap();
        std::os::unix::fs::symlink(&real, b.join("cuobjdump")).unwrap();
        assert_ne!(
            disassembler_key(&a.join("nvdisasm")),
            disassembler_key(&b.join("cuobjdump"))
        );
    }

    #[test]
    fn a_file_is_known_by_path_size_and_time() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnvrtc.so.13");
        std::fs::write(&lib, b"release one").unwrap();
        let one = file_identity(&lib);
        assert!(
            one.contains("libnvrtc.so.13") && one.contains(" 11 "),
            "{one}"
        );
        // Another release of the same size, written later: another identity.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&lib, b"release two").unwrap();
        assert_ne!(file_identity(&lib), one);
        assert!(file_identity(&dir.path().join("gone")).ends_with("(unreadable)"));
        // ACCPROBE_DISASSEMBLER a link moved from one release to another of the same size
        // and time (`cp -p`, a tar): the file it leads to tells them apart.
        let (a, b) = (dir.path().join("13.0"), dir.path().join("13.2"));
        std::fs::write(&a, b"nvdisasm A").unwrap();
        std::fs::write(&b, b"nvdisasm B").unwrap();
        let t = std::fs::metadata(&a).unwrap().modified().unwrap();
        std::fs::File::options()
            .write(true)
            .open(&b)
            .unwrap()
            .set_modified(t)
            .unwrap();
        let link = dir.path().join("nvdisasm");
        std::os::unix::fs::symlink(&a, &link).unwrap();
        let before = file_identity(&link);
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&b, &link).unwrap();
        assert_ne!(file_identity(&link), before);
    }
}
