//! Part of stage 3 (compile), for the compile-only gate: toolchains as data. A toolchain is
//! a folder holding an NVRTC library (`libnvrtc.so.*`), named by a path or by a version
//! installed by `ci/toolchains.sh` under the toolchains folder, plus the disassembler that
//! reads its CUBINs; an architecture is compiled, ignored or refused by what the toolchain
//! supports. Each toolchain compiles in a process of its own ([`super::worker`]).

use crate::compile::disassemble::find_disassembler_preferring;
use crate::model::compiled::ArchOutcome;
use crate::text::Shown;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Where `ci/toolchains.sh` installs (default: the workspace's `target/toolchains`), and
/// the variable set (to `1`) where the compile-only cases must run: a toolchain a profile
/// names that is not installed then fails its cases instead of leaving them ignored
/// (`.ci/run` sets it).
pub(crate) use crate::config::REQUIRE_TOOLCHAINS_ENV as REQUIRE_ENV;

/// A toolchain found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    /// As asked for: `12.8`, `13.0.88` or a folder.
    pub(crate) key: String,
    /// The folder holding `libnvrtc.so*`.
    pub lib_dir: PathBuf,
    /// What `ci/toolchains.sh` installed there (`nvidia-cuda-nvrtc-cu12==12.8.93`).
    pub(crate) release: Option<String>,
}

/// Why a toolchain cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolchainError {
    /// The version is not installed on this machine: its cases are ignored with this
    /// (or fail, under `REQUIRE_ENV`).
    #[error("{0}")]
    NotInstalled(String),
    /// Bad input: not a version, a folder without an NVRTC, an NVRTC that does not load.
    #[error("{0}")]
    Invalid(String),
}

/// The toolchains folder: `ACCPROBE_TOOLCHAINS`, else `target/toolchains` under the working
/// directory (like every other path the tools read: never the build tree's).
pub fn default_root() -> PathBuf {
    crate::config::toolchains().unwrap_or_else(|| PathBuf::from("target/toolchains"))
}

/// The NVRTC libraries (`libnvrtc.so`, `libnvrtc.so.12`, ...) directly in `dir`, builtins
/// and `.alt` variants aside.
pub(super) fn nvrtc_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n == "libnvrtc.so" || n.starts_with("libnvrtc.so.")
            })
        })
        .collect();
    v.sort();
    v
}

/// Whether `s` reads as a version: `12.8` or `12.8.93`.
fn is_version(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// The installed NVRTC releases under `root`: (full version, folder), oldest first.
pub fn installed(root: &Path) -> Vec<(String, PathBuf)> {
    let Ok(rd) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut v: Vec<(String, PathBuf)> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let version = name.strip_prefix("nvrtc-")?.to_string();
            is_version(&version).then_some((version, p))
        })
        .collect();
    v.sort_by_key(|(version, _)| version_key(version));
    v
}

fn version_key(v: &str) -> Vec<u32> {
    v.split('.').filter_map(|p| p.parse().ok()).collect()
}

/// Finds the toolchain `spec` names: a folder (holding `libnvrtc.so*` itself or in `lib/`),
/// or a version installed under `root` (`12.8` matches the one `12.8.*` installed there,
/// `12.8.93` exactly that release).
pub fn resolve(spec: &str, root: &Path) -> Result<Toolchain, ToolchainError> {
    let spec = spec.trim();
    if is_version(spec) {
        let all = installed(root);
        let matching: Vec<&(String, PathBuf)> = all
            .iter()
            .filter(|(v, _)| v == spec || v.starts_with(&format!("{spec}.")))
            .collect();
        let names: Vec<&str> = all.iter().map(|(v, _)| v.as_str()).collect();
        return match matching.as_slice() {
            [] => Err(ToolchainError::NotInstalled(format!(
                "no pinned NVRTC {spec} toolchain in {} (installed there: {}); install it with `ci/toolchains.sh {}`",
                root.shown(),
                if names.is_empty() { "none".to_string() } else { names.join(", ") },
                if spec.matches('.').count() == 2 { spec.to_string() } else { format!("{spec}.<patch>") }
            ))),
            [(version, dir)] => {
                let mut t = from_folder(dir, spec)?;
                t.release = t.release.or_else(|| Some(version.clone()));
                Ok(t)
            }
            several => Err(ToolchainError::Invalid(format!(
                "NVRTC {spec} is ambiguous in {}: {}; name the full release",
                root.shown(),
                several.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        };
    }
    let path = Path::new(spec);
    if spec.contains('/') || path.is_dir() {
        return from_folder(path, spec);
    }
    Err(ToolchainError::Invalid(format!(
        "toolchain {spec:?}: expected an NVRTC version such as 12.8 or 13.0.88, or a folder holding libnvrtc.so"
    )))
}

/// The most an `INSTALLED` file (one line naming a distribution) may hold.
const INSTALLED_LIMIT: u64 = 64 << 10;

pub(super) fn from_folder(path: &Path, key: &str) -> Result<Toolchain, ToolchainError> {
    if !path.is_dir() {
        return Err(ToolchainError::Invalid(format!(
            "toolchain {key:?}: {} is not a folder",
            path.shown()
        )));
    }
    let lib_dir = [path.to_path_buf(), path.join("lib")]
        .into_iter()
        .find(|d| !nvrtc_files(d).is_empty())
        .ok_or_else(|| {
            ToolchainError::Invalid(format!(
                "toolchain {key:?}: {} is not an NVRTC: no libnvrtc.so* in it or in its lib/",
                path.shown()
            ))
        })?;
    let lib_dir = lib_dir.canonicalize().unwrap_or(lib_dir);
    // Through `input`: a FIFO or a device there is passed over, not read forever.
    let release = [lib_dir.join("INSTALLED"), lib_dir.join("../INSTALLED")]
        .iter()
        .find_map(|f| crate::input::read_text(f, "INSTALLED", INSTALLED_LIMIT).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    Ok(Toolchain {
        key: key.to_string(),
        lib_dir,
        release,
    })
}

/// The disassembler for compile-only checks: `ACCPROBE_DISASSEMBLER`, else the newest
/// `nvdisasm-*/bin/nvdisasm` under `root`, else what [`crate::compile::find_disassembler`]
/// finds.
pub fn disassembler(root: &Path) -> Option<PathBuf> {
    find_disassembler_preferring(|| newest_installed_nvdisasm(root))
}

/// The newest `nvdisasm-VERSION/bin/nvdisasm` under `root` (`ci/toolchains.sh` installs them).
fn newest_installed_nvdisasm(root: &Path) -> Option<PathBuf> {
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| {
            let v = p
                .file_name()?
                .to_string_lossy()
                .strip_prefix("nvdisasm-")?
                .to_string();
            let tool = p.join("bin/nvdisasm");
            tool.is_file().then(|| (version_key(&v), tool))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, p)| p)
}

/// `LD_LIBRARY_PATH` for a process that must load the NVRTC in `dir`: `dir` first, then
/// this process's own value, when it has one (a compile worker, the process re-executed for
/// `ACCPROBE_NVRTC`).
pub(crate) fn library_path_first(dir: &Path) -> OsString {
    prepended(dir, std::env::var_os("LD_LIBRARY_PATH"))
}

/// `dir`, then `old` when it is set and not empty, as a search path.
fn prepended(dir: &Path, old: Option<OsString>) -> OsString {
    let mut path = dir.as_os_str().to_os_string();
    if let Some(old) = old.filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    path
}

/// `nvdisasm 13.2.51`-like identity of a disassembler: its file name and the version
/// line it prints (`Cuda compilation tools, release 13.2, V13.2.51` -> `V13.2.51`).
pub(crate) fn disassembler_identity(tool: &Path) -> String {
    let name = tool
        .file_name()
        .map_or("?".into(), |n| n.to_string_lossy().into_owned());
    let version = crate::child::Job::new(tool, super::disassemble::time_limit())
        .arg("--version")
        .run()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout.bytes)
                .split_whitespace()
                .rev()
                .find(|w| w.starts_with('V') && w[1..].contains('.'))
                .map(|w| w[1..].to_string())
        });
    match version {
        Some(v) => format!("{name} {v}"),
        None => format!("{name} (version unknown: {})", tool.display()),
    }
}

/// An architecture as a profile names it: `sm_90` -> 90 (`sm_` and two or three digits).
pub(crate) fn arch_number(arch: &str) -> Option<u32> {
    let digits = arch.strip_prefix("sm_")?;
    ((2..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// What a toolchain that supports `supported` does with `arch`: `Ok(())` compiles it;
/// `Err(Unsupported)` when it is newer than the newest or older than the oldest it
/// supports (ignored, with the reason); `Err(Failed)` when it lies within its range but
/// NVRTC does not know it (a typo: not an architecture).
pub(crate) fn classify(arch: &str, supported: &[u32], nvrtc: &str) -> Result<(), ArchOutcome> {
    let listing = supported
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ");
    let Some(n) = arch_number(arch) else {
        return Err(ArchOutcome::Failed(format!(
            "{arch:?} is not an architecture: expected sm_ and its number (sm_90)"
        )));
    };
    if supported.contains(&n) {
        return Ok(());
    }
    let (lo, hi) = (
        supported.iter().min().copied().unwrap_or(0),
        supported.iter().max().copied().unwrap_or(0),
    );
    if n > hi {
        Err(ArchOutcome::Unsupported(format!(
            "NVRTC {nvrtc} does not support {arch}: its newest architecture is sm_{hi} (it supports {listing})"
        )))
    } else if n < lo {
        Err(ArchOutcome::Unsupported(format!(
            "NVRTC {nvrtc} no longer supports {arch}: its oldest architecture is sm_{lo} (it supports {listing})"
        )))
    } else {
        Err(ArchOutcome::Failed(format!(
            "NVRTC {nvrtc} does not know architecture {arch} (it supports {listing})"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_resolve_to_installed_folders_and_refuse_clearly_otherwise() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        for v in ["12.8.93", "13.0.48", "13.0.88"] {
            let lib = root.join(format!("nvrtc-{v}/lib"));
            std::fs::create_dir_all(&lib).unwrap();
            std::fs::write(lib.join("libnvrtc.so.12"), b"").unwrap();
        }
        std::fs::write(
            root.join("nvrtc-12.8.93/INSTALLED"),
            "nvidia-cuda-nvrtc-cu12==12.8.93\n",
        )
        .unwrap();
        let t = resolve("12.8", root).unwrap();
        assert!(t.lib_dir.ends_with("nvrtc-12.8.93/lib"), "{t:?}");
        assert_eq!(
            t.release.as_deref(),
            Some("nvidia-cuda-nvrtc-cu12==12.8.93")
        );
        assert_eq!(
            resolve("13.0.88", root).unwrap().release.as_deref(),
            Some("13.0.88")
        );
        let e = resolve("13.0", root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("ambiguous")),
            "{e}"
        );
        let e = resolve("12.4", root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::NotInstalled(ref m)
            if m.contains("no pinned NVRTC 12.4 toolchain in") && m.contains("12.8.93") && m.contains("ci/toolchains.sh")),
            "{e}"
        );
        let e = resolve("twelve", root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("expected an NVRTC version")),
            "{e}"
        );
        // A folder that holds no NVRTC.
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let e = resolve(empty.to_str().unwrap(), root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("is not an NVRTC: no libnvrtc.so*")),
            "{e}"
        );
        let e = resolve("/nonexistent/nvrtc", root).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        // A folder given directly, or its parent.
        let t = resolve(root.join("nvrtc-13.0.48").to_str().unwrap(), root).unwrap();
        assert!(t.lib_dir.ends_with("nvrtc-13.0.48/lib"));
    }

    #[cfg(unix)]
    #[test]
    fn an_installed_file_that_is_no_regular_file_is_not_read() {
        // A FIFO named INSTALLED (or a link to /dev/zero) would hold the read forever.
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("nvrtc-12.8.93/lib");
        std::fs::create_dir_all(&lib).unwrap();
        std::fs::write(lib.join("libnvrtc.so.12"), b"").unwrap();
        let fifo = root.path().join("nvrtc-12.8.93/INSTALLED");
        match std::process::Command::new("mkfifo").arg(&fifo).status() {
            Ok(s) if s.success() => {}
            _ => return eprintln!("mkfifo unavailable: skipped"),
        }
        let t = resolve("12.8", root.path()).unwrap();
        assert_eq!(t.release.as_deref(), Some("12.8.93"));
    }

    #[test]
    fn a_toolchain_folder_comes_first_on_the_library_path() {
        let dir = Path::new("/opt/nvrtc 13/lib");
        assert_eq!(prepended(dir, None), OsString::from("/opt/nvrtc 13/lib"));
        assert_eq!(
            prepended(dir, Some(OsString::new())),
            OsString::from("/opt/nvrtc 13/lib")
        );
        assert_eq!(
            prepended(dir, Some("/usr/lib:/lib".into())),
            OsString::from("/opt/nvrtc 13/lib:/usr/lib:/lib")
        );
    }

    #[test]
    fn architectures_are_compiled_ignored_as_unsupported_or_refused_as_unknown() {
        let cuda12_4 = [50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90];
        assert_eq!(classify("sm_90", &cuda12_4, "12.4"), Ok(()));
        match classify("sm_100", &cuda12_4, "12.4") {
            Err(ArchOutcome::Unsupported(m)) => {
                assert!(m.contains("newest architecture is sm_90"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        match classify("sm_75", &[80, 90, 100], "13.9") {
            Err(ArchOutcome::Unsupported(m)) => {
                assert!(m.contains("no longer supports sm_75"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        match classify("sm_81", &cuda12_4, "12.4") {
            Err(ArchOutcome::Failed(m)) => {
                assert!(m.contains("does not know architecture sm_81"), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            classify("compute_90", &cuda12_4, "12.4"),
            Err(ArchOutcome::Failed(_))
        ));
        assert_eq!(arch_number("sm_120"), Some(120));
        assert_eq!(arch_number("sm_9"), None);
        assert_eq!(arch_number("sm_90a"), None);
    }
}
