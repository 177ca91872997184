//! Part of stage 3 (compile), for the compile-only gate: the compile worker. cudarc loads
//! libnvrtc once per process, by soname through the dynamic linker (so `LD_LIBRARY_PATH`
//! decides which one), and keeps it. Two NVRTC versions cannot live in one process through
//! it, so each toolchain gets a process of its own: the parent spawns its own executable as
//! a **compile worker** (`WORKER_ENV` names the request file) with `LD_LIBRARY_PATH`
//! starting at the toolchain's folder. The worker checks that the library it loaded is that
//! folder's, compiles the matrix for each asked architecture through the compile cache
//! (CUBIN, ptxas log and SASS), and writes the summaries as JSON for the parent.

use super::process_nvrtc::{ACTIVE_ENV, NVRTC_ENV};
use super::toolchain::{
    arch_number, classify, disassembler_identity, library_path_first, nvrtc_files, Toolchain,
};
pub use super::worker_error::{LoadError, RequestError, WorkerError};
use crate::compile::{self, Sass};
use crate::model::compiled::{
    ArchOutcome, CompiledMatrix, CompiledVariant, PtxasFigures, ToolchainIdentity,
};
use crate::model::variant::Variant;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Set by the parent for a compile worker: the request file.
pub(crate) use crate::config::WORKER_ENV;

/// What the parent asks a compile worker for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Request {
    pub(crate) toolchain: Toolchain,
    pub(crate) architectures: Vec<String>,
    /// Variant names (`chain7_acc2_effective2_sinkB`).
    pub(crate) variants: Vec<String>,
    pub(crate) cache: Option<PathBuf>,
    pub(crate) disassembler: Option<PathBuf>,
    /// Where the worker writes its [`Report`].
    pub(crate) out: PathBuf,
}

/// What a compile worker found: the toolchain it loaded (or why it could not), and each
/// architecture's outcome in the order asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Report {
    pub toolchain: Result<ToolchainIdentity, LoadError>,
    pub architectures: Vec<(String, ArchOutcome)>,
}

/// Whether this process's `main` called [`worker_main`], so that this executable, spawned
/// again, becomes a worker (and not, say, a test binary running its tests again).
static WORKER_CAPABLE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether this executable can serve as a compile worker: why not, if it cannot.
pub(crate) fn can_spawn_workers() -> Result<(), WorkerError> {
    if WORKER_CAPABLE.load(std::sync::atomic::Ordering::SeqCst) {
        Ok(())
    } else {
        Err(WorkerError::NotAWorker)
    }
}

/// In a compile worker (`ACCPROBE_COMPILE_WORKER` set): does the work and returns the exit
/// code; elsewhere `None`. Call first thing in `main`, before anything loads NVRTC.
pub fn worker_main() -> Option<ExitCode> {
    WORKER_CAPABLE.store(true, std::sync::atomic::Ordering::SeqCst);
    let file = crate::config::compile_worker()?;
    let file = PathBuf::from(file);
    let run = || -> Result<(), RequestError> {
        let text = std::fs::read_to_string(&file).map_err(|source| RequestError::Read {
            file: file.clone(),
            source,
        })?;
        let req: Request = serde_json::from_str(&text).map_err(|source| RequestError::Parse {
            file: file.clone(),
            source,
        })?;
        let report = work(&req);
        let json = serde_json::to_string(&report).map_err(RequestError::Encode)?;
        std::fs::write(&req.out, json).map_err(|source| RequestError::Write {
            file: req.out.clone(),
            source,
        })
    };
    Some(match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            crate::say_err!("accprobe compile worker: {e}");
            ExitCode::from(2)
        }
    })
}

/// Loads the toolchain's NVRTC in this process and checks it is the one its folder holds.
fn load(t: &Toolchain) -> Result<ToolchainIdentity, LoadError> {
    let lib = nvrtc_files(&t.lib_dir)
        .into_iter()
        .next()
        .ok_or_else(|| LoadError::NoLibrary {
            dir: t.lib_dir.clone(),
        })?;
    // Opened by path first, for a clear error when the file is not a loadable library or
    // not an NVRTC; kept open for the process.
    let handle = unsafe { libloading::Library::new(&lib) }.map_err(|e| LoadError::NotLoadable {
        lib: lib.clone(),
        why: e.to_string(),
    })?;
    unsafe { handle.get::<unsafe extern "C" fn(*mut i32, *mut i32) -> i32>(b"nvrtcVersion\0") }
        .map_err(|e| LoadError::NoVersion {
            lib: lib.clone(),
            why: e.to_string(),
        })?;
    std::mem::forget(handle);
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(LoadError::NotFound {
            ld_library_path: std::env::var("LD_LIBRARY_PATH").unwrap_or_default(),
        });
    }
    let nvrtc_version = compile::nvrtc_version().map_err(|e| LoadError::Version(e.to_string()))?;
    let want = t.lib_dir.canonicalize().unwrap_or(t.lib_dir.clone());
    let mapped = compile::loaded_nvrtc();
    if let Some(other) = mapped.iter().find(|p| p.parent() != Some(want.as_path())) {
        return Err(LoadError::OtherLoaded {
            loaded: other.clone(),
            wanted: want,
        });
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
fn supported_architectures() -> Result<Vec<u32>, LoadError> {
    use cudarc::nvrtc::sys;
    let failed = |call: &'static str| {
        move |e: cudarc::nvrtc::result::NvrtcError| LoadError::Call {
            call: call.to_string(),
            why: format!("{e:?}"),
        }
    };
    let mut n = 0;
    unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .map_err(failed("nvrtcGetNumSupportedArchs"))?;
    let mut v = vec![0i32; n.max(0) as usize];
    unsafe { sys::nvrtcGetSupportedArchs(v.as_mut_ptr()) }
        .result()
        .map_err(failed("nvrtcGetSupportedArchs"))?;
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
            std::env::set_var(compile::DISASSEMBLER_ENV, d);
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
) -> Result<Report, WorkerError> {
    can_spawn_workers()?;
    let exe = std::env::current_exe().map_err(|e| WorkerError::NoExecutable(Arc::new(e)))?;
    // A folder of its own, made here (never one already there: a name made of the process
    // id and the toolchain could be a link to another folder, or another user's, whose
    // report the parent would then read).
    let folder = tempfile::Builder::new()
        .prefix("accprobe-worker-")
        .tempdir()
        .map_err(|e| WorkerError::Folder {
            dir: std::env::temp_dir(),
            source: Arc::new(e),
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
    let json = serde_json::to_string(&req).expect("a request is plain data");
    std::fs::write(&req_file, json).map_err(|e| WorkerError::WriteRequest {
        file: req_file.clone(),
        source: Arc::new(e),
    })?;
    let ran = crate::child::Job::new(&exe, WORKER_LIMIT)
        .env(WORKER_ENV, &req_file)
        .env("LD_LIBRARY_PATH", library_path_first(&t.lib_dir))
        .env(compile::COMPUTE_CACHE_ENV, "1")
        .env_remove(NVRTC_ENV)
        .env_remove(ACTIVE_ENV)
        .run()
        .map_err(|e| WorkerError::Run {
            exe: exe.clone(),
            source: Arc::new(e),
        })?;
    let report = std::fs::read_to_string(&req.out);
    drop(folder);
    let stderr = String::from_utf8_lossy(&ran.stderr.bytes)
        .trim()
        .to_string();
    let (key, lib_dir) = (t.key.clone(), t.lib_dir.clone());
    match (ran.status, report) {
        (None, _) => Err(WorkerError::TimedOut {
            key,
            lib_dir,
            limit: WORKER_LIMIT,
            stderr,
        }),
        (Some(s), Ok(text)) if s.success() => {
            serde_json::from_str(&text).map_err(|e| WorkerError::BadReport(Arc::new(e)))
        }
        (Some(status), _) => Err(WorkerError::Failed {
            key,
            lib_dir,
            status,
            stderr,
        }),
    }
}

/// How long a compile worker may take: its toolchain's matrices for every architecture
/// asked take about a minute cold on a loaded 2-core machine (docs/toolchains.md), and its
/// disassembler has a limit of its own (`ACCPROBE_DISASSEMBLER_TIMEOUT`) per CUBIN.
const WORKER_LIMIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);
