//! Stage 3 of the pipeline: compile. One NVRTC program for the whole matrix, built to a
//! CUBIN for the device's own architecture, with the ptxas verbose report kept and parsed
//! per kernel.
//!
//! Only [`compile`] and [`nvrtc_version`] touch NVRTC; the source and options are plain
//! functions, tested everywhere.

pub mod ptxas;
pub mod sass;
pub mod toolchain;

use crate::error::{Error, Result};
use crate::input;
use crate::model::results::SassSummary;
use crate::model::variant::{Sink, Variant};
use cudarc::nvrtc::{result as nvrtc, sys};
use ptxas::PtxasReport;
use std::collections::BTreeMap;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};

/// The probe kernel, built into the binary so that it runs without the source tree.
pub const KERNEL_SOURCE: &str = include_str!("../../kernels/probe.cu");

/// The kernel source plus one instantiation per variant.
pub fn source(variants: &[Variant]) -> String {
    let mut s = String::from(KERNEL_SOURCE);
    s.push_str("\n// Instantiations appended by accprobe's compile stage.\n");
    for v in variants {
        match v.sink {
            Sink::A => s.push_str(&format!(
                "ACCPROBE_VARIANT({}, {}, {})\n",
                v.chain,
                v.accumulators,
                v.effective()
            )),
            m => s.push_str(&format!(
                "ACCPROBE_SINK_VARIANT({}, {}, {}, {})\n",
                v.chain,
                v.accumulators,
                v.effective(),
                m.letter()
            )),
        }
    }
    s
}

/// NVRTC options for compute capability `major.minor`: real architecture (so NVRTC
/// produces a CUBIN and runs ptxas), verbose ptxas report. Nothing that changes how the
/// compiler lowers the kernels, since that is what the gate checks: `--split-compile`
/// (parallel optimisation) would save NVRTC time, but with NVRTC 13.0 it changed the loop
/// SASS of all 69 kernels of the H200 profile for sm_100 and sm_120 (2026-11-30).
pub fn options(major: i32, minor: i32) -> Vec<String> {
    vec![
        format!("--gpu-architecture=sm_{major}{minor}"),
        "--ptxas-options=--verbose".to_string(),
        "--std=c++17".to_string(),
    ]
}

/// Environment variable with extra NVRTC options, whitespace-separated (e.g.
/// `--maxrregcount=16`): for experiments; they are recorded with the results.
pub const EXTRA_OPTIONS_ENV: &str = "ACCPROBE_EXTRA_OPTIONS";

/// The extra NVRTC options from [`EXTRA_OPTIONS_ENV`].
pub fn extra_options() -> Vec<String> {
    std::env::var(EXTRA_OPTIONS_ENV)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// A compiled matrix.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// The whole NVRTC program log, ptxas report included.
    pub log: String,
    pub reports: BTreeMap<String, PtxasReport>,
    pub options: Vec<String>,
    /// The SASS of the CUBIN, per kernel, or why there is none.
    pub sass: Sass,
    /// Seconds spent in NVRTC (0 on a cache hit) and on the SASS.
    pub nvrtc_seconds: f64,
    pub sass_seconds: f64,
}

/// The disassembly of a compiled matrix.
#[derive(Debug, Clone)]
pub enum Sass {
    /// Per kernel; `text` is the disassembler's whole output.
    Read {
        text: String,
        tool: String,
        kernels: BTreeMap<String, SassSummary>,
    },
    /// No disassembler was found: SASS cases are ignored with this reason.
    Unavailable(String),
    /// The disassembler failed or its output could not be read: SASS cases fail with this.
    Failed(String),
}

impl Sass {
    pub fn summary(&self, kernel: &str) -> Option<&SassSummary> {
        match self {
            Sass::Read { kernels, .. } => kernels.get(kernel),
            _ => None,
        }
    }
}

/// Where to look for a disassembler: `ACCPROBE_DISASSEMBLER` (a path to cuobjdump or
/// nvdisasm), then nvdisasm and cuobjdump on PATH, in `$CUDA_HOME/bin`, in
/// /usr/local/cuda/bin. nvdisasm first: without its dataflow pass (`-ndf`, which only adds
/// branch-stack annotations these kernels do not have) it is the faster of the two, and
/// both give the same digests (`sass::recorded` tests).
pub fn find_disassembler() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ACCPROBE_DISASSEMBLER")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    {
        return Some(p);
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(h) = std::env::var_os("CUDA_HOME") {
        dirs.push(PathBuf::from(h).join("bin"));
    }
    dirs.push(PathBuf::from("/usr/local/cuda/bin"));
    ["nvdisasm", "cuobjdump"]
        .iter()
        .find_map(|tool| dirs.iter().map(|d| d.join(tool)).find(|p| p.is_file()))
}

/// Why SASS will be [`Sass::Unavailable`] on this machine (no disassembler found), or
/// `None` when one is there; known before compiling.
pub fn disassembler_unavailable() -> Option<String> {
    find_disassembler().is_none().then(|| "no SASS disassembler: neither cuobjdump nor nvdisasm found (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin, ACCPROBE_DISASSEMBLER)".to_string())
}

/// Disassembles a CUBIN and summarises each of the `variants`' kernels.
pub fn disassemble(cubin: &[u8], variants: &[Variant]) -> Sass {
    let Some(tool) = find_disassembler() else {
        return Sass::Unavailable(disassembler_unavailable().unwrap_or_default());
    };
    disassemble_with(&tool, cubin, variants)
}

/// [`disassemble`] with `tool`. The CUBIN goes to a file of its own for each call: two
/// devices compile at once in one process (the cache off, or two architectures), and a
/// name made of the process id and the CUBIN's length, as before, let one device's write
/// or removal reach the file the other's disassembler was reading.
fn disassemble_with(tool: &Path, cubin: &[u8], variants: &[Variant]) -> Sass {
    let file = match tempfile::Builder::new()
        .prefix("accprobe-")
        .suffix(".cubin")
        .tempfile()
    {
        Ok(f) => f,
        Err(e) => {
            return Sass::Failed(format!(
                "cannot create a file for the CUBIN in {}: {e}",
                std::env::temp_dir().display()
            ))
        }
    };
    if let Err(e) = std::fs::write(file.path(), cubin) {
        return Sass::Failed(format!("cannot write {}: {e}", file.path().display()));
    }
    let is_nvdisasm = tool
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("nvdisasm"));
    let mut cmd = std::process::Command::new(tool);
    cmd.arg(if is_nvdisasm { "-ndf" } else { "-sass" });
    let out = cmd.arg(file.path()).output();
    drop(file);
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return Sass::Failed(format!(
                "{} failed ({}): {}",
                tool.display(),
                o.status,
                String::from_utf8_lossy(&o.stderr)
            ))
        }
        Err(e) => return Sass::Failed(format!("cannot run {}: {e}", tool.display())),
    };
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    read_sass(text, tool.display().to_string(), variants)
}

/// Summarises disassembly text for each variant's kernel.
pub fn read_sass(text: String, tool: String, variants: &[Variant]) -> Sass {
    let functions = match sass::parse(&text) {
        Ok(f) => f,
        Err(e) => return Sass::Failed(format!("{tool}: {e}")),
    };
    let mut kernels = BTreeMap::new();
    for v in variants {
        let Some(f) = functions.get(&v.name()) else {
            return Sass::Failed(format!("{tool}: no SASS for {v}"));
        };
        match sass::summarise(f) {
            Ok(s) => {
                kernels.insert(v.name(), s);
            }
            Err(e) => return Sass::Failed(format!("{tool}: {v}: {e}")),
        }
    }
    Sass::Read {
        text,
        tool,
        kernels,
    }
}

/// NVRTC (12.x and later) serves repeated compilations from the CUDA compute cache and
/// then runs no ptxas, so the verbose report is empty; this variable turns the cache off.
pub const CACHE_ENV: &str = "CUDA_CACHE_DISABLE";

/// Turns the compute cache off for this process unless the user set the variable. Call
/// before any thread starts (it edits the environment).
pub fn disable_compute_cache() {
    if std::env::var_os(CACHE_ENV).is_none() {
        std::env::set_var(CACHE_ENV, "1");
    }
}

/// NVRTC's version as `major.minor`. Call only after checking that libnvrtc is present.
pub fn nvrtc_version() -> Result<String> {
    let (mut major, mut minor) = (0, 0);
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(|e| Error::msg(format!("nvrtcVersion failed: {e:?}")))?;
    Ok(format!("{major}.{minor}"))
}

fn log_of(prog: sys::nvrtcProgram) -> String {
    match unsafe { nvrtc::get_program_log(prog) } {
        Ok(raw) => {
            let bytes: Vec<u8> = raw
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) => format!("(no program log: {e:?})"),
    }
}

/// Compiles the variants into one CUBIN. Call only after checking that libnvrtc is present.
pub fn compile(variants: &[Variant], options: &[String]) -> Result<Compiled> {
    let start = std::time::Instant::now();
    let src = CString::new(source(variants))
        .map_err(|_| Error::msg("kernel source contains a NUL byte"))?;
    let name = c"accprobe_probe.cu";
    let prog = nvrtc::create_program(&src, Some(name as &CStr))
        .map_err(|e| Error::msg(format!("nvrtcCreateProgram failed: {e:?}")))?;
    let compiled = unsafe { nvrtc::compile_program(prog, options) };
    let log = log_of(prog);
    let out = compiled
        .map_err(|e| {
            Error::msg(format!(
                "NVRTC could not compile the probe ({e:?}) with {options:?}:\n{log}"
            ))
        })
        .and_then(|()| {
            let mut size = 0usize;
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .map_err(|e| {
                    Error::msg(format!(
                        "nvrtcGetCUBINSize failed: {e:?} (is the architecture a real sm_XY?)"
                    ))
                })?;
            let mut cubin = vec![0u8; size];
            unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(|e| Error::msg(format!("nvrtcGetCUBIN failed: {e:?}")))?;
            let reports = ptxas::parse(&log).map_err(|e| Error::msg(format!("{e}\n{log}")))?;
            if let Some(v) = variants.iter().find(|v| !reports.contains_key(&v.name())) {
                return Err(Error::msg(format!(
                    "the ptxas report has no entry for {v} ({} entries, {} log lines): NVRTC skips ptxas, \
                     and its report, when the CUDA compute cache serves the CUBIN; {CACHE_ENV}=1 prevents that",
                    reports.len(),
                    log.lines().count()
                )));
            }
            let nvrtc_seconds = start.elapsed().as_secs_f64();
            let disassembling = std::time::Instant::now();
            let sass = disassemble(&cubin, variants);
            Ok(Compiled {
                sass,
                nvrtc_seconds,
                sass_seconds: disassembling.elapsed().as_secs_f64(),
                cubin,
                log,
                reports,
                options: options.to_vec(),
            })
        });
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn two_disassemblies_at_once_each_read_their_own_cubin() {
        use std::os::unix::fs::PermissionsExt;
        // A disassembler that takes its time and prints the file it was given: two devices
        // of one architecture with the cache off disassemble CUBINs of one length at once.
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("cuobjdump");
        std::fs::write(&tool, "#!/bin/sh\nsleep 0.5\nexec cat \"$2\"\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let cubins = ["the CUBIN of device 0\n", "the CUBIN of device 1\n"];
        assert_eq!(cubins[0].len(), cubins[1].len());
        let read: Vec<Sass> = std::thread::scope(|scope| {
            let handles: Vec<_> = cubins
                .iter()
                .map(|c| scope.spawn(|| disassemble_with(&tool, c.as_bytes(), &[])))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (c, sass) in cubins.iter().zip(&read) {
            match sass {
                Sass::Read { text, .. } => assert_eq!(text, c),
                other => panic!("{c:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn source_instantiates_each_variant_once_with_its_effective_count() {
        let s = source(&[
            Variant::new(7, 8),
            Variant::new(29, 2),
            Variant::new(13, 4).with_sink(Sink::D),
        ]);
        assert!(s.contains("ACCPROBE_SINK_VARIANT(13, 4, 4, D)\n"));
        assert!(s.contains("ACCPROBE_VARIANT(7, 8, 7)\n"));
        assert!(s.contains("ACCPROBE_VARIANT(29, 2, 2)\n"));
        let in_kernel = KERNEL_SOURCE.matches("ACCPROBE_VARIANT(").count();
        assert_eq!(s.matches("ACCPROBE_VARIANT(").count(), in_kernel + 2);
    }

    #[test]
    fn options_target_the_real_architecture_with_verbose_ptxas() {
        let o = options(9, 0);
        assert!(o.contains(&"--gpu-architecture=sm_90".to_string()));
        assert!(o.contains(&"--ptxas-options=--verbose".to_string()));
    }
}

/// How a compilation was served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// No cache folder configured.
    Off,
    /// Served from the cache: nothing compiled.
    Hit,
    /// Not in the cache: compiled and stored.
    Miss,
    /// In the cache but corrupt or unreadable: compiled again and replaced.
    Rebuilt(String),
}

impl std::fmt::Display for CacheUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheUse::Off => f.write_str("off"),
            CacheUse::Hit => f.write_str("hit"),
            CacheUse::Miss => f.write_str("miss"),
            CacheUse::Rebuilt(why) => write!(f, "rebuilt ({why})"),
        }
    }
}

fn sha256_hex(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of `bytes`, in hex.
pub fn sha256_hex_of(bytes: &[u8]) -> String {
    sha256_hex(&[bytes])
}

/// The cache key of a compilation: source, options (the architecture among them) and the
/// NVRTC version.
pub fn cache_key(variants: &[Variant], options: &[String], nvrtc_version: &str) -> String {
    let src = source(variants);
    let opts = options.join("\0");
    sha256_hex(&[src.as_bytes(), opts.as_bytes(), nvrtc_version.as_bytes()])
}

/// A cache entry's files, each checked against the manifest's digests.
fn read_entry(dir: &Path) -> std::result::Result<(Vec<u8>, String, Option<String>), String> {
    let manifest = input::read_text(&dir.join("manifest"), "manifest", input::YAML_LIMIT)
        .map_err(|e| format!("no manifest: {e}"))?;
    let mut want: BTreeMap<&str, &str> = BTreeMap::new();
    for line in manifest.lines() {
        let (name, digest) = line
            .split_once(' ')
            .ok_or_else(|| format!("bad manifest line {line:?}"))?;
        want.insert(name, digest);
    }
    let has_sass = want.contains_key("sass");
    let mut read = |name: &str| -> std::result::Result<Vec<u8>, String> {
        let bytes = input::read_bytes(&dir.join(name), name, input::TOOL_OUTPUT_LIMIT)
            .map_err(|e| format!("{name}: {e}"))?;
        match want.remove(name) {
            Some(d) if d == sha256_hex(&[&bytes]) => Ok(bytes),
            Some(_) => Err(format!("{name} does not match its digest")),
            None => Err(format!("{name} is not in the manifest")),
        }
    };
    let cubin = read("cubin")?;
    let log = String::from_utf8(read("log")?).map_err(|_| "log is not UTF-8".to_string())?;
    let sass = if has_sass {
        Some(String::from_utf8(read("sass")?).map_err(|_| "sass is not UTF-8".to_string())?)
    } else {
        None
    };
    Ok((cubin, log, sass))
}

fn write_entry(dir: &Path, c: &Compiled) -> std::io::Result<()> {
    let parent = dir.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".tmp-{}-{}",
        std::process::id(),
        dir.file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned())
    ));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let mut manifest = String::new();
    let mut put = |name: &str, bytes: &[u8]| -> std::io::Result<()> {
        std::fs::write(tmp.join(name), bytes)?;
        manifest.push_str(&format!("{name} {}\n", sha256_hex(&[bytes])));
        Ok(())
    };
    put("cubin", &c.cubin)?;
    put("log", c.log.as_bytes())?;
    if let Sass::Read { text, .. } = &c.sass {
        put("sass", text.as_bytes())?;
    }
    std::fs::write(tmp.join("manifest"), manifest)?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir)
}

/// This process's lock for one cache entry.
fn entry_lock(key: &str) -> std::sync::Arc<std::sync::Mutex<()>> {
    static LOCKS: std::sync::Mutex<BTreeMap<String, std::sync::Arc<std::sync::Mutex<()>>>> =
        std::sync::Mutex::new(BTreeMap::new());
    LOCKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(key.to_string())
        .or_default()
        .clone()
}

/// [`compile`] through a cache folder: a hit compiles nothing; a corrupt or unreadable
/// entry is never trusted, but compiled again and replaced.
pub fn compile_cached(
    variants: &[Variant],
    options: &[String],
    cache: Option<&Path>,
) -> Result<(Compiled, CacheUse)> {
    let Some(root) = cache else {
        return Ok((compile(variants, options)?, CacheUse::Off));
    };
    let key = cache_key(variants, options, &nvrtc_version()?);
    // Two devices of one architecture ask for the same entry at once: the second waits
    // for the first and reads what it wrote, instead of compiling it a second time.
    let same_entry = entry_lock(&key);
    let _compiling = same_entry.lock().unwrap_or_else(|e| e.into_inner());
    let dir = root.join(&key);
    let status = if dir.exists() {
        match read_entry(&dir) {
            Ok((cubin, log, sass_text)) => {
                let reports = ptxas::parse(&log)
                    .ok()
                    .filter(|r| variants.iter().all(|v| r.contains_key(&v.name())));
                if let Some(reports) = reports {
                    let reading = std::time::Instant::now();
                    let sass = match sass_text {
                        Some(t) => read_sass(t, "cache".into(), variants),
                        None => disassemble(&cubin, variants),
                    };
                    let sass_seconds = reading.elapsed().as_secs_f64();
                    let c = Compiled {
                        cubin,
                        log,
                        reports,
                        options: options.to_vec(),
                        sass,
                        nvrtc_seconds: 0.0,
                        sass_seconds,
                    };
                    return Ok((c, CacheUse::Hit));
                }
                CacheUse::Rebuilt("its ptxas report does not cover every variant".into())
            }
            Err(why) => CacheUse::Rebuilt(why),
        }
    } else {
        CacheUse::Miss
    };
    let c = compile(variants, options)?;
    if let Err(e) = write_entry(&dir, &c) {
        return Ok((
            c,
            CacheUse::Rebuilt(format!("could not store the entry: {e}")),
        ));
    }
    Ok((c, status))
}
