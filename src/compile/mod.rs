//! Stage 3 of the pipeline: compile. The matrix is built to CUBINs for the device's own
//! architecture, with the ptxas verbose report kept and parsed per kernel, and each CUBIN
//! disassembled. Where the machine has the cores, the matrix is split into a few NVRTC
//! programs ([`parts`]) compiled on threads of their own, each disassembled as soon as its
//! CUBIN is there: a kernel's code does not depend on the other kernels of its program.
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
/// `--maxrregcount=16`): for experiments; they are recorded with the results. With one
/// that reads a file (`--pre-include=FILE`, `-I`), the compile cache is not used.
pub const EXTRA_OPTIONS_ENV: &str = "ACCPROBE_EXTRA_OPTIONS";

/// The extra NVRTC options from [`EXTRA_OPTIONS_ENV`].
pub fn extra_options() -> Vec<String> {
    std::env::var(EXTRA_OPTIONS_ENV)
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// One NVRTC program of a compiled matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub cubin: Vec<u8>,
    /// The program's whole NVRTC log, ptxas report included.
    pub log: String,
    /// The disassembler's whole output for the CUBIN, when it ran and could be read.
    pub sass: Option<String>,
}

/// A compiled matrix.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The programs the matrix was compiled as, in order; each kernel is in one of them.
    pub parts: Vec<Part>,
    /// Every program's NVRTC log, in order.
    pub log: String,
    pub reports: BTreeMap<String, PtxasReport>,
    pub options: Vec<String>,
    /// The SASS of the CUBINs, per kernel, or why there is none.
    pub sass: Sass,
    /// Seconds until the last CUBIN was there (0 on a cache hit), and from then until the
    /// last SASS was read: with the parts' disassembly overlapping the other parts' NVRTC,
    /// the two add up to the compile's wall time.
    pub nvrtc_seconds: f64,
    pub sass_seconds: f64,
}

/// The disassembly of a compiled matrix.
#[derive(Debug, Clone)]
pub enum Sass {
    /// Per kernel (the texts are the parts', in [`Part::sass`]).
    Read {
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

    /// The SASS of a matrix from its parts': every kernel when every part was read, else
    /// the first part's failure (a failure says more than a missing disassembler). A kernel
    /// in two parts fails: which part's code the GPU runs is not the SASS's to say.
    fn merge(parts: Vec<Sass>) -> Sass {
        let mut all = BTreeMap::new();
        let mut tool = String::new();
        let mut unavailable = None;
        for p in parts {
            match p {
                Sass::Read { tool: t, kernels } => {
                    tool = t;
                    for (name, summary) in kernels {
                        if all.contains_key(&name) {
                            return Sass::Failed(format!("{name} is in the SASS of two programs"));
                        }
                        all.insert(name, summary);
                    }
                }
                Sass::Failed(why) => return Sass::Failed(why),
                Sass::Unavailable(why) => unavailable = unavailable.or(Some(why)),
            }
        }
        match unavailable {
            Some(why) => Sass::Unavailable(why),
            None => Sass::Read { tool, kernels: all },
        }
    }
}

/// Environment variable fixing how many NVRTC programs a matrix is compiled as (1 or more;
/// default [`default_parts`]).
pub const PARTS_ENV: &str = "ACCPROBE_COMPILE_PARTS";

/// How many programs to compile a matrix of `n` variants as, on this machine: one per four
/// cores, at most four, never more than there are variants. On the H200's 16-core host
/// (2026-11-30, NVRTC 13.0, documented profile) four programs on threads brought the CUBINs
/// from 0.30-0.47 s to 0.18 s and, each disassembled as soon as it was there, the whole
/// compile from 0.80-0.97 s to 0.49-0.52 s; more threads did not help (NVRTC's threads
/// contend), and each program costs one more disassembler start (about 0.3 s of CPU), too
/// much on a small machine.
pub fn default_parts(n: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    (cores / 4).clamp(1, 4).min(n.max(1))
}

/// [`default_parts`], unless [`PARTS_ENV`] says otherwise (empty is unset); a value that
/// is not a whole number of 1 or more is an error naming the variable.
pub fn parts_for(n: usize) -> Result<usize> {
    match input::env_text(PARTS_ENV).map_err(Error::msg)? {
        // Empty is unset, as for the suite's other settings.
        None => Ok(default_parts(n)),
        Some(t) if t.trim().is_empty() => Ok(default_parts(n)),
        Some(t) => t
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&p| p >= 1)
            .map(|p| p.min(n.max(1)))
            .ok_or_else(|| {
                Error::msg(format!(
                    "{PARTS_ENV}={t:?} is not a number of NVRTC programs (1 or more)"
                ))
            }),
    }
}

/// `variants` dealt round-robin into `n` parts (so that each gets short and long chains).
pub fn parts(variants: &[Variant], n: usize) -> Vec<Vec<Variant>> {
    let n = n.clamp(1, variants.len().max(1));
    (0..n)
        .map(|i| variants.iter().skip(i).step_by(n).copied().collect())
        .collect()
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

/// Disassembles one CUBIN and summarises each of the `variants`' kernels: the text (when
/// it was read) and the summary, or why there is none.
pub fn disassemble(cubin: &[u8], variants: &[Variant]) -> (Option<String>, Sass) {
    let Some(tool) = find_disassembler() else {
        return (
            None,
            Sass::Unavailable(disassembler_unavailable().unwrap_or_default()),
        );
    };
    match disassemble_with(&tool, cubin) {
        Ok(text) => match read_sass(&text, tool.display().to_string(), variants) {
            read @ Sass::Read { .. } => (Some(text), read),
            other => (None, other),
        },
        Err(why) => (None, Sass::Failed(why)),
    }
}

/// The disassembly of `cubin` by `tool`, or why there is none. The CUBIN goes to a file of
/// its own for each call: two devices compile at once in one process (the cache off, or
/// two architectures), and a name made of the process id and the CUBIN's length, as
/// before, let one device's write or removal reach the file the other's disassembler was
/// reading.
fn disassemble_with(tool: &Path, cubin: &[u8]) -> std::result::Result<String, String> {
    let file = tempfile::Builder::new()
        .prefix("accprobe-")
        .suffix(".cubin")
        .tempfile()
        .map_err(|e| {
            format!(
                "cannot create a file for the CUBIN in {}: {e}",
                std::env::temp_dir().display()
            )
        })?;
    std::fs::write(file.path(), cubin)
        .map_err(|e| format!("cannot write {}: {e}", file.path().display()))?;
    let mut cmd = std::process::Command::new(tool);
    crate::interrupt::unblocked_in_child(&mut cmd).arg(disassembler_flag(tool));
    let out = cmd.arg(file.path()).output();
    drop(file);
    match out {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(format!(
            "{} failed ({}): {}",
            tool.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )),
        Err(e) => Err(format!("cannot run {}: {e}", tool.display())),
    }
}

/// How `tool` is asked for the SASS: `-ndf` when its name says nvdisasm, else `-sass`
/// (cuobjdump). Part of the cache key ([`disassembler_key`]).
fn disassembler_flag(tool: &Path) -> &'static str {
    let is_nvdisasm = tool
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains("nvdisasm"));
    if is_nvdisasm {
        "-ndf"
    } else {
        "-sass"
    }
}

/// Summarises disassembly text for each variant's kernel.
pub fn read_sass(text: &str, tool: String, variants: &[Variant]) -> Sass {
    let functions = match sass::parse(text) {
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
    Sass::Read { tool, kernels }
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

/// One NVRTC program of `variants`: its CUBIN, its log and its ptxas report, which must
/// cover every variant.
fn compile_program(variants: &[Variant], options: &[String]) -> Result<(Vec<u8>, String, Reports)> {
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
            Ok((cubin, log, reports))
        });
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

type Reports = BTreeMap<String, PtxasReport>;

/// A compiled part with what was read from it.
struct Built {
    part: Part,
    reports: Reports,
    sass: Sass,
}

/// The matrix from its parts.
fn assemble(
    built: Vec<Built>,
    options: &[String],
    nvrtc_seconds: f64,
    sass_seconds: f64,
) -> Compiled {
    let mut reports = BTreeMap::new();
    let mut log = String::new();
    let mut sass = Vec::new();
    let mut parts = Vec::new();
    for b in built {
        reports.extend(b.reports);
        log.push_str(&b.part.log);
        if !log.is_empty() && !log.ends_with('\n') {
            log.push('\n');
        }
        sass.push(b.sass);
        parts.push(b.part);
    }
    Compiled {
        parts,
        log,
        reports,
        options: options.to_vec(),
        sass: Sass::merge(sass),
        nvrtc_seconds,
        sass_seconds,
    }
}

/// Compiles the variants as [`parts_for`] programs. Call only after checking that libnvrtc
/// is present.
pub fn compile(variants: &[Variant], options: &[String]) -> Result<Compiled> {
    compile_as(variants, options, parts_for(variants.len())?)
}

/// Compiles the variants as `n` NVRTC programs, each on a thread of its own and
/// disassembled there as soon as its CUBIN is there; the first program that fails fails
/// the whole.
pub fn compile_as(variants: &[Variant], options: &[String], n: usize) -> Result<Compiled> {
    // As one program NVRTC refuses a kernel defined twice; as several, two programs
    // could each hold it, and the matrix would compile or not by the number of cores.
    let mut seen = std::collections::BTreeSet::new();
    if let Some(v) = variants.iter().find(|v| !seen.insert(v.name())) {
        return Err(Error::msg(format!("the matrix lists {v} twice")));
    }
    let start = std::time::Instant::now();
    let groups = parts(variants, n);
    let of = groups.len();
    let built: Vec<Result<(Built, f64)>> = crate::error::each_on_a_thread(
        &groups,
        |k, group| {
            let (cubin, log, reports) = compile_program(group, options).map_err(|e| match of {
                1 => e,
                _ => Error::msg(format!("program {} of {of}: {e}", k + 1)),
            })?;
            let cubin_at = start.elapsed().as_secs_f64();
            let (text, sass) = disassemble(&cubin, group);
            let part = Part {
                cubin,
                log,
                sass: text,
            };
            Ok((
                Built {
                    part,
                    reports,
                    sass,
                },
                cubin_at,
            ))
        },
        |why| Err(Error::msg(format!("a compile thread panicked: {why}"))),
    );
    let built = built.into_iter().collect::<Result<Vec<_>>>()?;
    let nvrtc_seconds = built.iter().map(|(_, t)| *t).fold(0.0, f64::max);
    let sass_seconds = (start.elapsed().as_secs_f64() - nvrtc_seconds).max(0.0);
    Ok(assemble(
        built.into_iter().map(|(b, _)| b).collect(),
        options,
        nvrtc_seconds,
        sass_seconds,
    ))
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
        let read: Vec<std::result::Result<String, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = cubins
                .iter()
                .map(|c| scope.spawn(|| disassemble_with(&tool, c.as_bytes())))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (c, text) in cubins.iter().zip(read) {
            assert_eq!(text.as_deref(), Ok(*c));
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_disassembler_starts_with_sigint_and_sigterm_unblocked() {
        use std::os::unix::fs::PermissionsExt;
        // The suite blocks both signals in every thread (crate::interrupt); a child inherits
        // the mask of the thread that starts it, std's Command does not reset it, and a
        // disassembler that hangs would then ignore a CI's SIGTERM.
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("nvdisasm");
        std::fs::write(&tool, "#!/bin/sh\nexec grep SigBlk /proc/self/status\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let text = std::thread::spawn(move || {
            assert_eq!(crate::interrupt::block_in_this_thread(), 0);
            disassemble_with(&tool, b"cubin")
        })
        .join()
        .unwrap()
        .unwrap();
        let mask = u64::from_str_radix(text.trim().trim_start_matches("SigBlk:").trim(), 16)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let ours = (1 << (libc::SIGINT - 1)) | (1 << (libc::SIGTERM - 1));
        assert_eq!(mask & ours, 0, "blocked in the disassembler: {text}");
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
    fn parts_deal_every_variant_once_and_never_make_an_empty_part() {
        let vs: Vec<Variant> = (1..=10).map(|k| Variant::new(7, k)).collect();
        for n in [1, 3, 4, 10, 50] {
            let ps = parts(&vs, n);
            assert_eq!(ps.len(), n.min(vs.len()));
            assert!(ps.iter().all(|p| !p.is_empty()));
            let mut all: Vec<Variant> = ps.concat();
            all.sort();
            assert_eq!(all, vs, "{n} parts");
        }
        assert_eq!(parts(&vs, 3)[0], vec![vs[0], vs[3], vs[6], vs[9]]);
        assert_eq!(parts(&[], 4), vec![Vec::<Variant>::new()]);
        assert!((1..=4).contains(&default_parts(69)));
        assert_eq!(default_parts(1), 1);
    }

    #[test]
    fn sass_of_parts_merges_kernels_and_keeps_the_first_failure() {
        let read = |name: &str| {
            let mut kernels = BTreeMap::new();
            let summary = SassSummary {
                digest: name.to_string(),
                local_memory_instructions: Vec::new(),
                loop_body: Vec::new(),
                loop_ffma: 0,
                loop_ffma_destinations: Vec::new(),
                ffma_accumulates_in_place: true,
                loop_partials: Vec::new(),
            };
            kernels.insert(name.to_string(), summary);
            Sass::Read {
                tool: "nvdisasm".into(),
                kernels,
            }
        };
        match Sass::merge(vec![read("a"), read("b")]) {
            Sass::Read { kernels, .. } => {
                assert_eq!(kernels.keys().collect::<Vec<_>>(), ["a", "b"])
            }
            other => panic!("{other:?}"),
        }
        let merged = Sass::merge(vec![
            read("a"),
            Sass::Unavailable("none".into()),
            Sass::Failed("part 3".into()),
        ]);
        assert!(matches!(merged, Sass::Failed(w) if w == "part 3"));
        let merged = Sass::merge(vec![read("a"), Sass::Unavailable("none".into())]);
        assert!(matches!(merged, Sass::Unavailable(w) if w == "none"));
    }

    #[test]
    fn a_kernel_in_two_programs_is_refused_wherever_it_is_found() {
        // The SASS of two parts that both hold a kernel: which is the module's?
        let read = |names: &[&str], digest: &str| Sass::Read {
            tool: "nvdisasm".into(),
            kernels: names
                .iter()
                .map(|n| {
                    let summary = SassSummary {
                        digest: digest.to_string(),
                        local_memory_instructions: Vec::new(),
                        loop_body: Vec::new(),
                        loop_ffma: 0,
                        loop_ffma_destinations: Vec::new(),
                        ffma_accumulates_in_place: true,
                        loop_partials: Vec::new(),
                    };
                    (n.to_string(), summary)
                })
                .collect(),
        };
        let merged = Sass::merge(vec![read(&["a", "b"], "one"), read(&["b"], "two")]);
        assert!(
            matches!(&merged, Sass::Failed(w) if w.contains("b") && w.contains("two programs")),
            "{merged:?}"
        );
        // A matrix that lists a variant twice: as one program NVRTC refuses the second
        // definition, as two each program would hold one; refused before compiling.
        let v = Variant::new(7, 2);
        let e = compile_as(&[v, Variant::new(7, 1), v], &[], 2).unwrap_err();
        assert!(e.to_string().contains("twice"), "{e}");
        // A cache entry whose parts' ptxas reports both name a kernel.
        let log = format!(
            "ptxas info    : Compiling entry function '{0}' for 'sm_90'\n\
             ptxas info    : Function properties for {0}\n\
             \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
             ptxas info    : Used 10 registers, used 0 barriers, 392 bytes cmem[0]\n",
            v.name()
        );
        let part = Part {
            cubin: vec![1, 2, 3],
            log,
            sass: Some(String::new()),
        };
        let e = from_cache(vec![part.clone(), part], &[v], &[]).unwrap_err();
        assert!(e.contains(&v.name()) && e.contains("two"), "{e}");
    }

    #[test]
    fn pruning_removes_only_entries_unused_for_long_and_stale_stores() {
        use std::time::{Duration, SystemTime};
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let key = |c: char| c.to_string().repeat(64);
        let day = Duration::from_secs(24 * 3600);
        let entry = |dir: &Path, used: SystemTime| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("manifest"), format!("cubin {}\n", "0".repeat(64))).unwrap();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("manifest"))
                .unwrap();
            f.set_modified(used).unwrap();
        };
        let now = SystemTime::now();
        let r = root.path();
        entry(&r.join(key('a')), now - 40 * day);
        entry(&r.join(key('b')), now - 2 * day);
        // Not entries, whatever their age: never removed.
        entry(&r.join("compile-only"), now - 400 * day);
        entry(&r.join(key('c')).join("nested"), now - 400 * day);
        std::fs::write(r.join(key('d')), "a file named as a key").unwrap();
        entry(&outside.path().join(key('e')), now - 400 * day);
        std::os::unix::fs::symlink(outside.path().join(key('e')), r.join(key('e'))).unwrap();
        std::fs::create_dir_all(r.join(format!(".tmp-123-{}", key('f')))).unwrap();
        std::fs::create_dir_all(r.join(".tmp-mine")).unwrap();

        assert_eq!(prune_cache(r, now), vec![key('a')]);
        // Two hours on, the store's temporary folder is stale; the entry used two days
        // before is still kept.
        assert_eq!(
            prune_cache(r, now + Duration::from_secs(7200)),
            vec![format!(".tmp-123-{}", key('f'))]
        );
        for kept in [
            key('b'),
            "compile-only".into(),
            key('c'),
            key('d'),
            key('e'),
            ".tmp-mine".into(),
        ] {
            assert!(std::fs::symlink_metadata(r.join(&kept)).is_ok(), "{kept}");
        }
        assert!(outside.path().join(key('e')).join("manifest").is_file());
        // 31 days on, the entry used two days before goes too.
        assert_eq!(prune_cache(r, now + 29 * day), vec![key('b')]);
        // A hit marks its entry used.
        entry(&r.join(key('9')), now - 40 * day);
        mark_used(&r.join(key('9')));
        assert!(prune_cache(r, SystemTime::now()).is_empty());
    }

    #[test]
    fn pruning_leaves_folders_that_only_look_like_entries() {
        use std::time::{Duration, SystemTime};
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let key = |c: char| c.to_string().repeat(64);
        let old = SystemTime::now() - Duration::from_secs(400 * 24 * 3600);
        let age = |file: &Path| {
            std::fs::File::open(file)
                .unwrap()
                .set_modified(old)
                .unwrap()
        };
        let digest = "0".repeat(64);
        let folder = |name: &str, files: &[(&str, String)]| {
            let d = r.join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (f, text) in files {
                std::fs::write(d.join(f), text).unwrap();
            }
            age(&d.join("manifest"));
        };
        // An image's metadata in containers/storage's overlay-images: a folder named by a
        // 64-hex id with a file `manifest`, and more beside it.
        folder(
            &key('a'),
            &[
                ("manifest", "{\"schemaVersion\": 2}\n".into()),
                ("=c2hhMjU2", "signatures".into()),
            ],
        );
        // A manifest as the cache writes it, with a file of the user's beside it.
        folder(
            &key('b'),
            &[
                ("manifest", format!("cubin {digest}\n")),
                ("notes.txt", "mine".into()),
            ],
        );
        // ... or a folder of the user's in it.
        folder(&key('c'), &[("manifest", format!("cubin {digest}\n"))]);
        std::fs::create_dir(r.join(key('c')).join("photos")).unwrap();
        // Keys are lower-case.
        folder(&key('D'), &[("manifest", format!("cubin {digest}\n"))]);
        // A store's temporary folder holds an entry's files only.
        let tmp = format!(".tmp-1-{}", key('e'));
        folder(&tmp, &[("manifest", "".into()), ("thesis.tex", "x".into())]);
        age(&r.join(&tmp));
        // An entry as the cache writes it goes.
        folder(
            &key('f'),
            &[
                ("manifest", format!("cubin {digest}\nlog {digest}\n")),
                ("cubin", "".into()),
                ("log", "".into()),
            ],
        );
        assert_eq!(prune_cache(r, SystemTime::now()), vec![key('f')]);
        // The old layout's per-toolchain folders: their old entries go, and the folder when
        // it is left empty; anything else in them stays.
        let entry_in = |dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("manifest"), format!("cubin {digest}\n")).unwrap();
            std::fs::write(dir.join("cubin"), "").unwrap();
            age(&dir.join("manifest"));
        };
        entry_in(&r.join("nvrtc-12.4.127-0123").join(key('1')));
        entry_in(&r.join("nvrtc-mine").join(key('2')));
        std::fs::write(r.join("nvrtc-mine").join("notes.txt"), "mine").unwrap();
        assert_eq!(
            prune_cache(r, SystemTime::now()),
            vec![
                "nvrtc-12.4.127-0123".to_string(),
                format!("nvrtc-12.4.127-0123/{}", key('1')),
                format!("nvrtc-mine/{}", key('2')),
            ]
        );
        assert!(r.join("nvrtc-mine").join("notes.txt").is_file());
    }

    /// With `ACCPROBE_TEST_MARK_USED` set (a folder), marks that entry used; run by
    /// [`a_hit_marks_an_entry_of_another_user_used`] as another user.
    #[test]
    #[ignore]
    fn mark_used_as_told() {
        if let Some(dir) = std::env::var_os("ACCPROBE_TEST_MARK_USED") {
            mark_used(Path::new(&dir));
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
                "compile::tests::mark_used_as_told",
                "--ignored",
                "--quiet",
            ])
            .env("ACCPROBE_TEST_MARK_USED", &dir)
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
            parts: vec![Part {
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
        let e = read_entry(d, 24).unwrap_err();
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
        let e = read_entry(d, 1).unwrap_err();
        assert!(e.contains("more parts than the matrix has variants"), "{e}");
    }

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

    #[test]
    fn options_target_the_real_architecture_with_verbose_ptxas() {
        let o = options(9, 0);
        assert!(o.contains(&"--gpu-architecture=sm_90".to_string()));
        assert!(o.contains(&"--ptxas-options=--verbose".to_string()));
        // None of them reads a file: the cache serves them.
        assert!(!o.iter().any(|o| reads_a_file(o)));
        for file in [
            "--pre-include=a.h",
            "-include=a.h",
            "-include",
            "-I/x",
            "--include-path=/x",
        ] {
            assert!(reads_a_file(file), "{file}");
        }
        for not in ["--maxrregcount=16", "-DX=1", "--pre-includes", "-lineinfo"] {
            assert!(!reads_a_file(not), "{not}");
        }
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
    /// Not looked up, and nothing stored: the toolchain could not be named for the key.
    Unused(String),
    /// Not in the cache: compiled, but could not be stored (a full disk, another process
    /// storing the same entry at that moment).
    Unstored(String),
}

impl std::fmt::Display for CacheUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheUse::Off => f.write_str("off"),
            CacheUse::Hit => f.write_str("hit"),
            CacheUse::Miss => f.write_str("miss"),
            CacheUse::Rebuilt(why) => write!(f, "rebuilt ({why})"),
            CacheUse::Unused(why) => write!(f, "not used ({why})"),
            CacheUse::Unstored(why) => write!(f, "miss ({why})"),
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

/// NVRTC options that read files (a header included before the source, the folders
/// includes search, a precompiled header): what NVRTC compiles then depends on files the
/// cache key does not hold.
const FILE_OPTIONS: [&str; 10] = [
    "--pre-include",
    "-include",
    "--include-path",
    "-I",
    "--use-pch",
    "-use-pch",
    "--pch-dir",
    "-pch-dir",
    "--pch",
    "-pch",
];

/// Whether `option` makes NVRTC read a file ([`FILE_OPTIONS`], as `--opt`, `--opt=VALUE` or,
/// for `-I`, `-IFOLDER`).
fn reads_a_file(option: &str) -> bool {
    option.starts_with("-I")
        || FILE_OPTIONS
            .iter()
            .any(|f| option == *f || option.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
}

/// The cache key of a compilation: source, options (the architecture among them) and the
/// toolchain's [`fingerprint`].
pub fn cache_key(variants: &[Variant], options: &[String], fingerprint: &str) -> String {
    let src = source(variants);
    let opts = options.join("\0");
    sha256_hex(&[src.as_bytes(), opts.as_bytes(), fingerprint.as_bytes()])
}

/// The libnvrtc files mapped into this process (`/proc/self/maps`; none where there is no
/// `/proc`). A file removed or replaced since it was loaded keeps the kernel's ` (deleted)`
/// after its path.
pub fn loaded_nvrtc() -> Vec<PathBuf> {
    mapped_files("libnvrtc.so")
}

/// The files mapped into this process whose names start with `prefix`.
fn mapped_files(prefix: &str) -> Vec<PathBuf> {
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
fn load_builtins(version: &str) {
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
fn unknown_library(loaded: &[PathBuf]) -> Option<String> {
    if loaded.is_empty() {
        return Some(
            "cannot tell which libnvrtc this process loaded (/proc/self/maps names none)".into(),
        );
    }
    loaded.iter().find(|p| replaced(p)).map(|p| {
        format!(
            "the libnvrtc this process loaded, {}, was removed or replaced since",
            p.display()
        )
    })
}

/// Whether a mapped file is gone or another file now has its path.
fn replaced(mapped: &Path) -> bool {
    mapped.to_string_lossy().ends_with(DELETED) || !mapped.is_file()
}

/// The `libnvrtc-builtins.so*` files in the folder of `libnvrtc` (where every NVRTC release
/// puts them): libnvrtc finds its builtins by the library search at its first compile, so
/// they are not yet mapped when the key is made, and another build's builtins would compile
/// the same way under the same libnvrtc name.
fn builtins_beside(libnvrtc: &Path) -> Vec<PathBuf> {
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
        disassembler_flag(tool),
        file_identity(tool)
    )
}

/// What made a cache entry's files: NVRTC's version, the libnvrtc this process loaded and
/// the disassembler, each by [`file_identity`]. `nvrtcVersion` says only major.minor, so
/// without the library NVRTC 13.0.48 and 13.0.88, or a compiler engineer's own build,
/// would share entries, and a gate meant to catch the new compiler would judge the old
/// one's code; the SASS is the disassembler's text. An error where the library cannot be
/// named ([`unknown_library`]). Call only after checking that libnvrtc is present.
pub fn fingerprint() -> Result<String> {
    toolchain_fingerprint()?.map_err(Error::msg)
}

/// [`fingerprint`], with why there is none inside.
fn toolchain_fingerprint() -> Result<std::result::Result<String, String>> {
    // First: it loads libnvrtc, if nothing has yet.
    let version = nvrtc_version()?;
    load_builtins(&version);
    let loaded = loaded_nvrtc();
    if let Some(why) = unknown_library(&loaded) {
        return Ok(Err(why));
    }
    // The builtins that compile may be another folder's than libnvrtc's (see
    // `load_builtins`): those mapped are named beside those in libnvrtc's folder.
    let builtins = mapped_files("libnvrtc-builtins.so");
    if let Some(p) = builtins.iter().find(|p| replaced(p)) {
        return Ok(Err(format!(
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
    Ok(Ok(format!(
        "NVRTC {version} | {} | {disassembler}",
        libraries.join(", ")
    )))
}

/// The file names of part `k` of a cache entry: `cubin`, `log`, `sass` for the first (as
/// entries of one part always were), `cubin.1`, `log.1`, `sass.1` for the second, and on.
fn part_file(name: &str, k: usize) -> String {
    if k == 0 {
        name.to_string()
    } else {
        format!("{name}.{k}")
    }
}

/// A cache entry's parts, each file checked against the manifest's digests; every file the
/// manifest names must be read, and there are never more parts than `max_parts` (the
/// matrix's variants: each program holds one at least).
fn read_entry(dir: &Path, max_parts: usize) -> std::result::Result<Vec<Part>, String> {
    let manifest = input::read_text(&dir.join("manifest"), "manifest", input::YAML_LIMIT)
        .map_err(|e| format!("no manifest: {e}"))?;
    let mut want: BTreeMap<&str, &str> = BTreeMap::new();
    for line in manifest.lines() {
        let (name, digest) = line
            .split_once(' ')
            .ok_or_else(|| format!("bad manifest line {line:?}"))?;
        want.insert(name, digest);
    }
    // What the manifest names, for the parts' optional files; `want` loses each as it is read.
    let named: std::collections::BTreeSet<&str> = want.keys().copied().collect();
    let mut read = |name: &str| -> std::result::Result<Vec<u8>, String> {
        let bytes = input::read_bytes(&dir.join(name), name, input::TOOL_OUTPUT_LIMIT)
            .map_err(|e| format!("{name}: {e}"))?;
        match want.remove(name) {
            Some(d) if d == sha256_hex(&[&bytes]) => Ok(bytes),
            Some(_) => Err(format!("{name} does not match its digest")),
            None => Err(format!("{name} is not in the manifest")),
        }
    };
    let text = |name: &str, bytes: Vec<u8>| {
        String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8"))
    };
    let mut parts = Vec::new();
    for k in 0.. {
        let cubin_name = part_file("cubin", k);
        if k > 0 && !named.contains(cubin_name.as_str()) {
            break;
        }
        if k >= max_parts.max(1) {
            return Err(format!(
                "more parts than the matrix has variants ({max_parts})"
            ));
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
        parts.push(Part { cubin, log, sass });
    }
    match want.keys().next() {
        Some(extra) => Err(format!("{extra} is in the manifest but belongs to no part")),
        None => Ok(parts),
    }
}

/// How long a cache entry may go unused before a store in its folder removes it: the key
/// changes with every kernel, option and toolchain change (and with how the key is made),
/// and an entry no run asks for again would otherwise stay for good (the compile-only
/// cache of our CI had grown to 35 entries, 66 MB, by the end of 2026-11-30). A hit marks
/// its entry used.
pub const CACHE_UNUSED_DAYS: u64 = 30;

/// How old a temporary folder of a store must be before a later store removes it: one left
/// by a process killed while storing (a store takes well under a second).
const STALE_STORE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Marks the entry in `dir` used now (its manifest's modification time), for
/// [`prune_cache`]. A cache that cannot be written (shared read-only) is left as it is.
fn mark_used(dir: &Path) {
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

/// The name of one of the files of a cache entry's parts: `cubin`, `log`, `sass`, with
/// `.K` for later parts ([`part_file`]).
fn is_part_file(name: &str) -> bool {
    let (base, k) = name.split_once('.').unwrap_or((name, "0"));
    matches!(base, "cubin" | "log" | "sass")
        && !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_digit())
}

/// Whether the folder `dir` holds nothing but what a store writes: regular files named as an
/// entry's ([`is_part_file`], `manifest`), the manifest, when `manifest` asks for one, naming
/// only such files with their SHA-256 digests. A folder of someone else's that only looks
/// like an entry (64 hexadecimal digits with a file `manifest`, as containers/storage keeps
/// its images) is never removed, nor anything a user put into an entry.
fn only_entry_files(dir: &Path, manifest: bool) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in rd {
        let Ok(e) = e else { return false };
        let ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n == "manifest" || is_part_file(n));
        if !ours || !e.file_type().is_ok_and(|t| t.is_file()) {
            return false;
        }
    }
    if !manifest {
        return true;
    }
    // A regular file, not a link (checked above); read as every manifest is, bounded.
    input::read_text(&dir.join("manifest"), "manifest", input::YAML_LIMIT).is_ok_and(|text| {
        !text.is_empty()
            && text.lines().all(|l| {
                l.split_once(' ')
                    .is_some_and(|(name, d)| is_part_file(name) && is_sha256_hex(d))
            })
    })
}

/// Whether `s` is a SHA-256 as [`sha256_hex`] writes it (a cache key, a manifest's digest):
/// 64 lower-case hexadecimal digits.
fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Removes from the cache folder `root` the entries unused for [`CACHE_UNUSED_DAYS`] (by
/// their manifest's time) and the temporary folders of stores older than an hour, as of
/// `now`. Only folders that are entries (64 hexadecimal digits, with a manifest) or a
/// store's temporary folder (`.tmp-PID-KEY`), holding nothing but an entry's files, are
/// ever removed, never through a link: nothing else a user may keep there. The old
/// layout's `nvrtc-*` folders are pruned by the same rules (and removed once empty). A
/// process reading an entry removed meanwhile finds it does not match its manifest and
/// compiles it again. Returns the names removed.
pub fn prune_cache(root: &Path, now: std::time::SystemTime) -> Vec<String> {
    let unused = std::time::Duration::from_secs(CACHE_UNUSED_DAYS * 24 * 3600);
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Never through a link: only real folders of the cache.
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        // Builds before 2026-11-30's b5610a8 kept the compile-only entries one folder down,
        // per toolchain (`nvrtc-VERSION-HASH/KEY`): pruned by the same rules, and the folder
        // removed once nothing is left in it.
        if name.starts_with("nvrtc-") {
            let inner = prune_cache(&e.path(), now);
            removed.extend(inner.into_iter().map(|n| format!("{name}/{n}")));
            if std::fs::remove_dir(e.path()).is_ok() {
                removed.push(name);
            }
            continue;
        }
        // An entry has its manifest; a store's temporary folder is `.tmp-PID-KEY`.
        let manifest = std::fs::symlink_metadata(e.path().join("manifest"))
            .ok()
            .filter(|m| m.is_file());
        let store = name
            .strip_prefix(".tmp-")
            .and_then(|r| r.split_once('-'))
            .is_some_and(|(pid, key)| {
                pid.bytes().all(|b| b.is_ascii_digit()) && is_sha256_hex(key)
            });
        let (limit, used, entry) = match manifest {
            Some(m) if is_sha256_hex(&name) => (unused, m.modified(), true),
            _ if store => (STALE_STORE, meta.modified(), false),
            _ => continue,
        };
        let old = used
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > limit);
        if old && only_entry_files(&e.path(), entry) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed.sort();
    removed
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

/// The matrix from a cache entry's parts: each part's kernels are those its ptxas report
/// names, which together must be every variant; a part stored without SASS (no
/// disassembler when it was written) is disassembled now.
fn from_cache(
    parts: Vec<Part>,
    variants: &[Variant],
    options: &[String],
) -> std::result::Result<Compiled, String> {
    let reading = std::time::Instant::now();
    let mut built: Vec<Built> = Vec::new();
    for mut part in parts {
        let reports = ptxas::parse(&part.log).map_err(|e| format!("its ptxas log: {e}"))?;
        if let Some(k) = reports
            .keys()
            .find(|k| built.iter().any(|b| b.reports.contains_key(*k)))
        {
            return Err(format!("{k} is in two of its parts"));
        }
        let mine: Vec<Variant> = variants
            .iter()
            .filter(|v| reports.contains_key(&v.name()))
            .copied()
            .collect();
        let sass = match &part.sass {
            Some(t) => read_sass(t, "cache".into(), &mine),
            None => {
                let (text, sass) = disassemble(&part.cubin, &mine);
                part.sass = text;
                sass
            }
        };
        built.push(Built {
            part,
            reports,
            sass,
        });
    }
    let covered = |v: &Variant| built.iter().any(|b| b.reports.contains_key(&v.name()));
    if !variants.iter().all(covered) {
        return Err("its ptxas report does not cover every variant".into());
    }
    Ok(assemble(
        built,
        options,
        0.0,
        reading.elapsed().as_secs_f64(),
    ))
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
    if let Some(o) = options.iter().find(|o| reads_a_file(o)) {
        return Ok((
            compile(variants, options)?,
            CacheUse::Unused(format!(
                "{o} makes NVRTC read a file the key cannot name: compiled, not cached"
            )),
        ));
    }
    let fingerprint = match toolchain_fingerprint()? {
        Ok(f) => f,
        Err(why) => {
            return Ok((
                compile(variants, options)?,
                CacheUse::Unused(format!("{why}: compiled, not cached")),
            ))
        }
    };
    let key = cache_key(variants, options, &fingerprint);
    // Two devices of one architecture ask for the same entry at once: the second waits
    // for the first and reads what it wrote, instead of compiling it a second time.
    let same_entry = entry_lock(&key);
    let _compiling = same_entry.lock().unwrap_or_else(|e| e.into_inner());
    let dir = root.join(&key);
    let status = if dir.exists() {
        match read_entry(&dir, variants.len()) {
            Ok(parts) => match from_cache(parts, variants, options) {
                Ok(c) => {
                    mark_used(&dir);
                    return Ok((c, CacheUse::Hit));
                }
                Err(why) => CacheUse::Rebuilt(why),
            },
            Err(why) => CacheUse::Rebuilt(why),
        }
    } else {
        CacheUse::Miss
    };
    let c = compile(variants, options)?;
    if let Err(e) = write_entry(&dir, &c) {
        let why = format!("could not store the entry: {e}");
        let status = match status {
            CacheUse::Rebuilt(found) => CacheUse::Rebuilt(format!("{found}; {why}")),
            _ => CacheUse::Unstored(why),
        };
        return Ok((c, status));
    }
    Ok((c, status))
}
