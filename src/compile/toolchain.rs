//! Part of stage 3 (compile): toolchains as data. A toolchain is a folder holding an NVRTC
//! library (`libnvrtc.so.*`), named by a path or by a version installed by
//! `ci/toolchains.sh` under the toolchains folder, plus the disassembler that reads its
//! CUBINs.
//!
//! cudarc loads libnvrtc once per process, by soname through the dynamic linker (so
//! `LD_LIBRARY_PATH` decides which one), and keeps it. Two NVRTC versions cannot live in
//! one process through it, so each toolchain gets a process of its own: the parent spawns
//! its own executable as a **compile worker** (`ACCPROBE_COMPILE_WORKER` names the request
//! file) with `LD_LIBRARY_PATH` set to the toolchain's folder. The worker checks that the
//! library it loaded is that folder's, compiles the matrix for each asked architecture
//! through the compile cache (CUBIN, ptxas log and SASS), and writes the summaries as JSON
//! for the parent. The GPU path is unchanged: one NVRTC per process, the one the dynamic
//! linker finds, unless `ACCPROBE_NVRTC` selects one ([`select_for_process`]).

use crate::compile::{self, Sass};
use crate::model::compiled::{
    ArchOutcome, CompiledMatrix, CompiledVariant, PtxasFigures, ToolchainIdentity,
};
use crate::model::variant::Variant;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// A folder or an installed version (`12.8`, `12.8.93`): the NVRTC the process uses.
pub const NVRTC_ENV: &str = "ACCPROBE_NVRTC";
/// Where `ci/toolchains.sh` installs (default: the workspace's `target/toolchains`).
pub const TOOLCHAINS_ENV: &str = "ACCPROBE_TOOLCHAINS";
/// Set (to `1`) where the compile-only cases must run: a toolchain a profile names that is
/// not installed then fails its cases instead of leaving them ignored (`.ci/run` sets it).
pub const REQUIRE_ENV: &str = "ACCPROBE_REQUIRE_TOOLCHAINS";
/// Set by the parent for a compile worker: the request file.
pub const WORKER_ENV: &str = "ACCPROBE_COMPILE_WORKER";
/// Set after [`select_for_process`] re-executed the process with the selected folder first
/// on `LD_LIBRARY_PATH`: that folder.
pub const ACTIVE_ENV: &str = "ACCPROBE_NVRTC_ACTIVE";

/// A toolchain found on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    /// As asked for: `12.8`, `13.0.88` or a folder.
    pub key: String,
    /// The folder holding `libnvrtc.so*`.
    pub lib_dir: PathBuf,
    /// What `ci/toolchains.sh` installed there (`nvidia-cuda-nvrtc-cu12==12.8.93`).
    pub release: Option<String>,
}

/// Why a toolchain cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolchainError {
    /// The version is not installed on this machine: its cases are ignored with this
    /// (or fail, under [`REQUIRE_ENV`]).
    #[error("{0}")]
    NotInstalled(String),
    /// Bad input: not a version, a folder without an NVRTC, an NVRTC that does not load.
    #[error("{0}")]
    Invalid(String),
}

/// The toolchains folder: `ACCPROBE_TOOLCHAINS`, else `target/toolchains` under the working
/// directory (like every other path the tools read: never the build tree's).
pub fn default_root() -> PathBuf {
    match std::env::var_os(TOOLCHAINS_ENV).filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from("target/toolchains"),
    }
}

/// The NVRTC libraries (`libnvrtc.so`, `libnvrtc.so.12`, ...) directly in `dir`, builtins
/// and `.alt` variants aside.
fn nvrtc_files(dir: &Path) -> Vec<PathBuf> {
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
                "NVRTC {spec} is not installed in {} (installed: {}); install it with `ci/toolchains.sh {}`",
                root.display(),
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
                root.display(),
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

fn from_folder(path: &Path, key: &str) -> Result<Toolchain, ToolchainError> {
    if !path.is_dir() {
        return Err(ToolchainError::Invalid(format!(
            "toolchain {key:?}: {} is not a folder",
            path.display()
        )));
    }
    let lib_dir = [path.to_path_buf(), path.join("lib")]
        .into_iter()
        .find(|d| !nvrtc_files(d).is_empty())
        .ok_or_else(|| {
            ToolchainError::Invalid(format!(
                "toolchain {key:?}: {} is not an NVRTC: no libnvrtc.so* in it or in its lib/",
                path.display()
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
/// `nvdisasm-*/bin/nvdisasm` under `root`, else what [`compile::find_disassembler`] finds.
pub fn disassembler(root: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ACCPROBE_DISASSEMBLER")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
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
    found
        .pop()
        .map(|(_, p)| p)
        .or_else(compile::find_disassembler)
}

/// `nvdisasm 13.2.51`-like identity of a disassembler: its file name and the version
/// line it prints (`Cuda compilation tools, release 13.2, V13.2.51` -> `V13.2.51`).
pub fn disassembler_identity(tool: &Path) -> String {
    let name = tool
        .file_name()
        .map_or("?".into(), |n| n.to_string_lossy().into_owned());
    let version = crate::interrupt::unblocked_in_child(&mut Command::new(tool))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
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
pub fn arch_number(arch: &str) -> Option<u32> {
    let digits = arch.strip_prefix("sm_")?;
    ((2..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// What a toolchain that supports `supported` does with `arch`: `Ok(())` compiles it;
/// `Err(Unsupported)` when it is newer than the newest or older than the oldest it
/// supports (ignored, with the reason); `Err(Failed)` when it lies within its range but
/// NVRTC does not know it (a typo: not an architecture).
pub fn classify(arch: &str, supported: &[u32], nvrtc: &str) -> Result<(), ArchOutcome> {
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

// ---------------------------------------------------------------------------------------
// The worker.

/// What the parent asks a compile worker for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub toolchain: Toolchain,
    pub architectures: Vec<String>,
    /// Variant names (`chain7_acc2_effective2_sinkB`).
    pub variants: Vec<String>,
    pub cache: Option<PathBuf>,
    pub disassembler: Option<PathBuf>,
    /// Where the worker writes its [`Report`].
    pub out: PathBuf,
}

/// What a compile worker found: the toolchain it loaded (or why it could not), and each
/// architecture's outcome in the order asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub toolchain: Result<ToolchainIdentity, String>,
    pub architectures: Vec<(String, ArchOutcome)>,
}

/// Whether this process's `main` called [`worker_main`], so that this executable, spawned
/// again, becomes a worker (and not, say, a test binary running its tests again).
static WORKER_CAPABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this executable can serve as a compile worker: why not, if it cannot.
pub fn can_spawn_workers() -> Result<(), String> {
    if WORKER_CAPABLE.load(std::sync::atomic::Ordering::SeqCst) {
        Ok(())
    } else {
        Err("this executable does not run compile workers (its main does not call compile::toolchain::worker_main): \
             compile-only cases run in the suite (tests/probe.rs) and in `cargo xtask toolchains`"
            .into())
    }
}

/// In a compile worker (`ACCPROBE_COMPILE_WORKER` set): does the work and returns the exit
/// code; elsewhere `None`. Call first thing in `main`, before anything loads NVRTC.
pub fn worker_main() -> Option<ExitCode> {
    WORKER_CAPABLE.store(true, std::sync::atomic::Ordering::SeqCst);
    let file = std::env::var_os(WORKER_ENV)?;
    let run = || -> Result<(), String> {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read the worker request {file:?}: {e}"))?;
        let req: Request =
            serde_json::from_str(&text).map_err(|e| format!("bad worker request {file:?}: {e}"))?;
        let report = work(&req);
        let json = serde_json::to_string(&report).map_err(|e| e.to_string())?;
        std::fs::write(&req.out, json)
            .map_err(|e| format!("cannot write {}: {e}", req.out.display()))
    };
    Some(match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("accprobe compile worker: {e}");
            ExitCode::from(2)
        }
    })
}

/// Loads the toolchain's NVRTC in this process and checks it is the one its folder holds.
fn load(t: &Toolchain) -> Result<ToolchainIdentity, String> {
    let lib = nvrtc_files(&t.lib_dir)
        .into_iter()
        .next()
        .ok_or_else(|| format!("{} holds no libnvrtc.so*", t.lib_dir.display()))?;
    // Opened by path first, for a clear error when the file is not a loadable library or
    // not an NVRTC; kept open for the process.
    let handle = unsafe { libloading::Library::new(&lib) }
        .map_err(|e| format!("{} is not an NVRTC: it does not load: {e}", lib.display()))?;
    unsafe { handle.get::<unsafe extern "C" fn(*mut i32, *mut i32) -> i32>(b"nvrtcVersion\0") }
        .map_err(|e| {
            format!(
                "{} is not an NVRTC: it has no nvrtcVersion: {e}",
                lib.display()
            )
        })?;
    std::mem::forget(handle);
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(format!(
            "cudarc finds no libnvrtc with LD_LIBRARY_PATH={}",
            std::env::var("LD_LIBRARY_PATH").unwrap_or_default()
        ));
    }
    let nvrtc_version = compile::nvrtc_version().map_err(|e| e.to_string())?;
    let want = t.lib_dir.canonicalize().unwrap_or(t.lib_dir.clone());
    let mapped = compile::loaded_nvrtc();
    if let Some(other) = mapped.iter().find(|p| p.parent() != Some(want.as_path())) {
        return Err(format!(
            "another NVRTC was loaded ({}) instead of the one in {}: check LD_LIBRARY_PATH",
            other.display(),
            want.display()
        ));
    }
    let supported = supported_architectures()?;
    Ok(ToolchainIdentity {
        key: t.key.clone(),
        nvrtc_version,
        release: t.release.clone(),
        library: mapped.first().unwrap_or(&lib).display().to_string(),
        supported: supported.iter().map(|a| format!("sm_{a}")).collect(),
    })
}

/// `nvrtcGetSupportedArchs` of the loaded NVRTC.
fn supported_architectures() -> Result<Vec<u32>, String> {
    use cudarc::nvrtc::sys;
    let mut n = 0;
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(|e| format!("nvrtcGetNumSupportedArchs failed: {e:?}"))?;
    let mut v = vec![0i32; n.max(0) as usize];
    unsafe { sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) }
        .result()
        .map_err(|e| format!("nvrtcGetSupportedArchs failed: {e:?}"))?;
    Ok(v.into_iter().filter(|&a| a > 0).map(|a| a as u32).collect())
}

/// The worker's whole job, in this process (whose NVRTC is the toolchain's).
fn work(req: &Request) -> Report {
    let identity = match load(&req.toolchain) {
        Ok(i) => i,
        Err(e) => {
            return Report {
                toolchain: Err(e),
                architectures: Vec::new(),
            }
        }
    };
    compile::disable_compute_cache();
    let variants: Vec<Variant> = req
        .variants
        .iter()
        .filter_map(|n| Variant::parse(n))
        .collect();
    let disassembler = match &req.disassembler {
        Some(d) => {
            std::env::set_var("ACCPROBE_DISASSEMBLER", d);
            disassembler_identity(d)
        }
        None => "none".to_string(),
    };
    // The entries' keys name the library and the disassembler (`compile::fingerprint`).
    let cache = req.cache.clone();
    let supported: Vec<u32> = identity
        .supported
        .iter()
        .filter_map(|a| arch_number(a))
        .collect();
    let mut architectures = Vec::new();
    for arch in &req.architectures {
        let outcome = match classify(arch, &supported, &identity.nvrtc_version) {
            Err(o) => o,
            Ok(()) => compile_arch(arch, &variants, cache.as_deref(), &identity, &disassembler),
        };
        architectures.push((arch.clone(), outcome));
    }
    Report {
        toolchain: Ok(identity),
        architectures,
    }
}

fn compile_arch(
    arch: &str,
    variants: &[Variant],
    cache: Option<&Path>,
    identity: &ToolchainIdentity,
    disassembler: &str,
) -> ArchOutcome {
    let n = arch_number(arch).unwrap_or(0) as i32;
    let options = compile::options(n / 10, n % 10);
    let (c, cache_use) = match compile::compile_cached(variants, &options, cache) {
        Ok(x) => x,
        Err(e) => return ArchOutcome::Failed(format!("{arch}: {e}")),
    };
    let sass_unavailable = match &c.sass {
        Sass::Read { .. } => None,
        Sass::Unavailable(r) | Sass::Failed(r) => Some(r.clone()),
    };
    let mut out = std::collections::BTreeMap::new();
    for v in variants {
        let Some(r) = c.reports.get(&v.name()) else {
            return ArchOutcome::Failed(format!("{arch}: no ptxas report for {v}"));
        };
        out.insert(
            v.name(),
            CompiledVariant {
                ptxas: PtxasFigures {
                    registers: r.registers,
                    stack_frame_bytes: r.stack_frame_bytes,
                    spill_store_bytes: r.spill_store_bytes,
                    spill_load_bytes: r.spill_load_bytes,
                },
                sass: c.sass.summary(&v.name()).cloned(),
            },
        );
    }
    ArchOutcome::Compiled(Box::new(CompiledMatrix {
        architecture: arch.to_string(),
        toolchain: identity.clone(),
        disassembler: disassembler.to_string(),
        variants: out,
        sass_unavailable,
        nvrtc_seconds: c.nvrtc_seconds,
        sass_seconds: c.sass_seconds,
        cache: cache_use.to_string(),
    }))
}

/// Runs a compile worker for toolchain `t` (this executable again, with `t`'s folder first
/// on `LD_LIBRARY_PATH`) and returns its report; `Err` when the worker itself failed.
pub fn spawn_worker(
    t: &Toolchain,
    architectures: &[String],
    variants: &[Variant],
    cache: Option<&Path>,
    disassembler: Option<&Path>,
) -> Result<Report, String> {
    can_spawn_workers()?;
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    // A folder of its own, made here (never one already there: a name made of the process
    // id and the toolchain could be a link to another folder, or another user's, whose
    // report the parent would then read).
    let folder = tempfile::Builder::new()
        .prefix("accprobe-worker-")
        .tempdir()
        .map_err(|e| {
            format!(
                "cannot create a folder for the compile worker in {}: {e}",
                std::env::temp_dir().display()
            )
        })?;
    let tmp = folder.path();
    let req = Request {
        toolchain: t.clone(),
        architectures: architectures.to_vec(),
        variants: variants.iter().map(Variant::name).collect(),
        cache: cache.map(Path::to_path_buf),
        disassembler: disassembler.map(Path::to_path_buf),
        out: tmp.join("report.json"),
    };
    let req_file = tmp.join("request.json");
    std::fs::write(
        &req_file,
        serde_json::to_string(&req).map_err(|e| e.to_string())?,
    )
    .map_err(|e| format!("cannot write {}: {e}", req_file.display()))?;
    let path = match std::env::var_os("LD_LIBRARY_PATH") {
        Some(old) if !old.is_empty() => {
            let mut p = t.lib_dir.clone().into_os_string();
            p.push(":");
            p.push(old);
            p
        }
        _ => t.lib_dir.clone().into_os_string(),
    };
    let mut cmd = Command::new(&exe);
    crate::interrupt::unblocked_in_child(&mut cmd);
    // The worker ends with this process: a run that is cancelled or killed (SIGTERM from a
    // CI, nextest's timeout, SIGKILL) leaves no compiler running on, unwatched. The signal
    // follows the thread that spawns it, which waits here until the worker ends.
    let parent = std::process::id();
    // SAFETY: prctl and getppid are async-signal-safe, as pre_exec requires.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before the call above.
            if libc::getppid() as u32 != parent {
                return Err(std::io::Error::other("the parent process has ended"));
            }
            Ok(())
        });
    }
    let out = cmd
        .env(WORKER_ENV, &req_file)
        .env("LD_LIBRARY_PATH", path)
        .env(compile::CACHE_ENV, "1")
        .env_remove(NVRTC_ENV)
        .env_remove(ACTIVE_ENV)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start the compile worker {}: {e}", exe.display()))?;
    let report = std::fs::read_to_string(&req.out);
    drop(folder);
    match report {
        Ok(text) if out.status.success() => serde_json::from_str(&text)
            .map_err(|e| format!("unreadable compile worker report: {e}")),
        _ => Err(format!(
            "the compile worker for NVRTC {} ({}) failed ({}): {}",
            t.key,
            t.lib_dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

// ---------------------------------------------------------------------------------------
// One NVRTC for the whole process: ACCPROBE_NVRTC.

/// With `ACCPROBE_NVRTC` set (a folder or an installed version), makes this process use
/// that NVRTC: re-executes it once with the toolchain's folder first on `LD_LIBRARY_PATH`
/// (the dynamic linker reads it only at start), then returns the toolchain. Without it,
/// `Ok(None)`: the process keeps the NVRTC the dynamic linker finds. Call first in `main`,
/// before any thread starts and before NVRTC is loaded. `Err` is a configuration error.
pub fn select_for_process() -> Result<Option<Toolchain>, ToolchainError> {
    let Some(spec) = std::env::var(NVRTC_ENV).ok().filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let t = resolve(&spec, &default_root()).map_err(|e| match e {
        ToolchainError::NotInstalled(m) => ToolchainError::Invalid(format!("{NVRTC_ENV}: {m}")),
        ToolchainError::Invalid(m) => ToolchainError::Invalid(format!("{NVRTC_ENV}: {m}")),
    })?;
    let active = std::env::var_os(ACTIVE_ENV).map(PathBuf::from);
    if active.as_deref() == Some(t.lib_dir.as_path()) {
        return Ok(Some(t));
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| ToolchainError::Invalid(format!("cannot find this executable: {e}")))?;
    let mut path = t.lib_dir.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|o| !o.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let err = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", path)
        .env(ACTIVE_ENV, &t.lib_dir)
        .exec();
    Err(ToolchainError::Invalid(format!(
        "cannot re-execute with {NVRTC_ENV}={spec}: {err}"
    )))
}

/// Where this process's NVRTC came from, for the results' environment: `None` without
/// `ACCPROBE_NVRTC`; else the release or folder, checked against what is mapped.
pub fn process_origin() -> Option<String> {
    let dir = std::env::var_os(ACTIVE_ENV).map(PathBuf::from)?;
    let t = from_folder(&dir, &dir.display().to_string()).ok();
    let what = t
        .and_then(|t| t.release)
        .unwrap_or_else(|| dir.display().to_string());
    let mapped = compile::loaded_nvrtc();
    Some(
        match mapped.iter().find(|p| p.parent() != Some(dir.as_path())) {
            Some(other) => format!(
                "{NVRTC_ENV} asked for {what}, but {} is loaded",
                other.display()
            ),
            None => format!("{NVRTC_ENV}: {what}"),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("accprobe-tc-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn versions_resolve_to_installed_folders_and_refuse_clearly_otherwise() {
        let root = temp("resolve");
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
        let t = resolve("12.8", &root).unwrap();
        assert!(t.lib_dir.ends_with("nvrtc-12.8.93/lib"), "{t:?}");
        assert_eq!(
            t.release.as_deref(),
            Some("nvidia-cuda-nvrtc-cu12==12.8.93")
        );
        assert_eq!(
            resolve("13.0.88", &root).unwrap().release.as_deref(),
            Some("13.0.88")
        );
        let e = resolve("13.0", &root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("ambiguous")),
            "{e}"
        );
        let e = resolve("12.4", &root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::NotInstalled(ref m)
            if m.contains("12.4 is not installed") && m.contains("12.8.93") && m.contains("ci/toolchains.sh")),
            "{e}"
        );
        let e = resolve("twelve", &root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("expected an NVRTC version")),
            "{e}"
        );
        // A folder that holds no NVRTC.
        let empty = root.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        let e = resolve(empty.to_str().unwrap(), &root).unwrap_err();
        assert!(
            matches!(e, ToolchainError::Invalid(ref m) if m.contains("is not an NVRTC: no libnvrtc.so*")),
            "{e}"
        );
        let e = resolve("/nonexistent/nvrtc", &root).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        // A folder given directly, or its parent.
        let t = resolve(root.join("nvrtc-13.0.48").to_str().unwrap(), &root).unwrap();
        assert!(t.lib_dir.ends_with("nvrtc-13.0.48/lib"));
        std::fs::remove_dir_all(root).unwrap();
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
