//! Which NVRTC library files this process runs: the libnvrtc and builtins mapped into it
//! (`/proc/self/maps`), the builtins beside a libnvrtc, and whether a mapped file is still
//! the one on disk. The compile cache's key names them; the compile worker checks with them
//! that it loaded its toolchain's library.

use crate::text::Shown;
use std::path::{Path, PathBuf};

/// The libnvrtc files mapped into this process (`/proc/self/maps`; none where there is no
/// `/proc`). A file removed or replaced since it was loaded keeps the kernel's ` (deleted)`
/// after its path.
pub fn loaded_nvrtc() -> Vec<PathBuf> {
    mapped_files("libnvrtc.so")
}

/// The files mapped into this process whose names start with `prefix`.
pub(super) fn mapped_files(prefix: &str) -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut v: Vec<PathBuf> = maps
        .lines()
        .filter_map(mapped_path)
        .filter(|p| {
            Path::new(p.strip_suffix(DELETED).unwrap_or(p))
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .map(PathBuf::from)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Loads the builtins of NVRTC `version` (`13.0`) as libnvrtc does at its first compile:
/// by soname, through the dynamic linker's search, in which a folder of `LD_LIBRARY_PATH`
/// comes before libnvrtc's own (libnvrtc has no run path). libnvrtc's own open then finds
/// this one, so `/proc/self/maps` names the builtins that compile before anything has.
/// Nothing happens where they do not load: NVRTC then fails to compile and says why.
pub(super) fn load_builtins(version: &str) {
    let soname = format!("libnvrtc-builtins.so.{version}");
    if let Ok(lib) = unsafe { libloading::Library::new(&soname) } {
        // Kept for the process, as libnvrtc keeps it.
        std::mem::forget(lib);
    }
}

/// What `/proc/self/maps` puts after the path of a mapped file that is gone.
const DELETED: &str = " (deleted)";

/// The path of a `/proc/self/maps` line: everything after its five first fields, spaces
/// included (`/opt/my nvrtc/lib/libnvrtc.so.13`); `None` for an anonymous mapping.
fn mapped_path(line: &str) -> Option<&str> {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start_matches(' ');
        rest = &rest[rest.find(' ')?..];
    }
    Some(rest.trim_start_matches(' ')).filter(|p| !p.is_empty())
}

/// Why the libnvrtc files `loaded` do not say which compiler this process runs: none
/// found (no `/proc`), or one removed or replaced since it was loaded (its path now names
/// another file). The compile cache is then not used: a key without the library would
/// let another build of the same major.minor serve its CUBIN and SASS.
pub(super) fn unknown_library(loaded: &[PathBuf]) -> Option<String> {
    if loaded.is_empty() {
        return Some(
            "cannot tell which libnvrtc this process loaded (/proc/self/maps names none)".into(),
        );
    }
    loaded.iter().find(|p| replaced(p)).map(|p| {
        format!(
            "the libnvrtc this process loaded, {}, was removed or replaced since",
            p.shown()
        )
    })
}

/// Whether a mapped file is gone or another file now has its path.
pub(super) fn replaced(mapped: &Path) -> bool {
    mapped.to_string_lossy().ends_with(DELETED) || !mapped.is_file()
}

/// The `libnvrtc-builtins.so*` files in the folder of `libnvrtc` (where every NVRTC release
/// puts them): libnvrtc finds its builtins by the library search at its first compile, so
/// they are not yet mapped when the key is made, and another build's builtins would compile
/// the same way under the same libnvrtc name.
pub(super) fn builtins_beside(libnvrtc: &Path) -> Vec<PathBuf> {
    let Some(dir) = libnvrtc.parent() else {
        return Vec::new();
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libnvrtc-builtins.so"))
        })
        .collect();
    v.sort();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapped_libraries_are_read_whole_with_spaces_and_when_deleted() {
        let line = |path: &str| {
            format!(
                "7f0a80a00000-7f0a80ea5000 r--p 00000000 fe:00 10076455                   {path}"
            )
        };
        assert_eq!(
            mapped_path(&line("/opt/my nvrtc/lib/libnvrtc.so.13")),
            Some("/opt/my nvrtc/lib/libnvrtc.so.13")
        );
        assert_eq!(
            mapped_path(&line("/tmp/re/lib/libnvrtc.so.13 (deleted)")),
            Some("/tmp/re/lib/libnvrtc.so.13 (deleted)")
        );
        assert_eq!(
            mapped_path("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 "),
            None
        );
        assert_eq!(mapped_path("7ffd1000-7ffd2000 rw-p 00000000 00:00 0"), None);
        assert_eq!(
            mapped_path("7ffd1000-7ffd2000 rw-p 00000000 00:00 0                  [stack]"),
            Some("[stack]")
        );
        // No library, a library replaced since it was loaded: the compiler is unknown.
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("my nvrtc").join("libnvrtc.so.13");
        std::fs::create_dir_all(lib.parent().unwrap()).unwrap();
        std::fs::write(&lib, b"13.0.88").unwrap();
        assert!(unknown_library(&[]).is_some_and(|w| w.contains("/proc/self/maps")));
        assert_eq!(unknown_library(std::slice::from_ref(&lib)), None);
        let gone = PathBuf::from(format!("{}{DELETED}", lib.display()));
        assert!(unknown_library(&[lib.clone(), gone])
            .is_some_and(|w| w.contains("removed or replaced")));
    }

    #[test]
    fn the_builtins_beside_a_libnvrtc_are_part_of_its_toolchain() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnvrtc.so.13");
        for name in [
            "libnvrtc.so.13",
            "libnvrtc-builtins.so.13.0",
            "libnvrtc-builtins.so.13.0.88",
            "libnvrtc-builtins.alt.so.13.0",
            "other.so",
        ] {
            std::fs::write(dir.path().join(name), name).unwrap();
        }
        let names: Vec<String> = builtins_beside(&lib)
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            ["libnvrtc-builtins.so.13.0", "libnvrtc-builtins.so.13.0.88"]
        );
        assert!(builtins_beside(Path::new("/")).is_empty());
    }
}
