//! Stage 3 of the pipeline: compile. The matrix is built to CUBINs for the device's own
//! architecture, with the ptxas verbose report kept and parsed per kernel, and each CUBIN
//! disassembled. Where the machine has the cores, the matrix is split into a few NVRTC
//! programs (`parts`) compiled on threads of their own, each disassembled as soon as its
//! CUBIN is there: a kernel's code does not depend on the other kernels of its program.
//!
//! This module is the stage's public API ([`compile`], [`compile_as`], [`compile_cached`])
//! and what it returns ([`Compiled`], [`Program`], [`Sass`]); the work is in its modules:
//! [`source`](mod@source) (source and options), `parts`, `nvrtc`,
//! [`disassemble`](mod@disassemble), `cache`, `libraries` (which NVRTC files the
//! process runs), and for the compile-only gate
//! [`toolchain`] (toolchains as data), [`worker`] (a process per toolchain) and
//! [`process_nvrtc`] (`ACCPROBE_NVRTC`). Only `nvrtc` and the worker call NVRTC; the
//! source, options and parts are plain functions, tested everywhere.

pub(crate) mod cache;
pub mod disassemble;
mod error;
pub(crate) mod libraries;
pub(crate) mod nvrtc;
pub(crate) mod parts;
pub mod process_nvrtc;
pub mod ptxas;
pub mod sass;
pub mod source;
pub mod toolchain;
pub mod worker;
mod worker_error;

pub use cache::{
    cache_key, compile_cached, fingerprint, prune_cache, sha256_hex_of, CacheUse, CACHE_UNUSED_DAYS,
};
pub use disassemble::{
    disassemble, disassembler_unavailable, find_disassembler, read_sass, DISASSEMBLER_ENV,
};
pub use error::CompileError;
pub use libraries::loaded_nvrtc;
pub use nvrtc::{compile_source, disable_compute_cache, nvrtc_version, COMPUTE_CACHE_ENV};
pub use parts::{default_parts, parts_for, PARTS_ENV};
pub use source::{
    extra_options, options, source, CEILINGS_SOURCE, EXTRA_OPTIONS_ENV, KERNEL_SOURCE,
};

type Result<T, E = CompileError> = std::result::Result<T, E>;
use crate::model::results::SassSummary;
use crate::model::variant::Variant;
use nvrtc::{compile_program, Reports};
use ptxas::PtxasReport;
use std::collections::BTreeMap;

/// One NVRTC program of a compiled matrix: one of its parts (`parts::deal`), compiled.
#[derive(Debug, Clone, PartialEq)]
pub struct Program {
    pub cubin: Vec<u8>,
    /// The program's whole NVRTC log, ptxas report included.
    pub(crate) log: String,
    /// The disassembler's whole output for the CUBIN, when it ran and could be read.
    pub(crate) sass: Option<String>,
}

/// A compiled matrix.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The programs the matrix was compiled as, in order; each kernel is in one of them.
    pub parts: Vec<Program>,
    /// Every program's NVRTC log, in order.
    pub(crate) log: String,
    pub reports: BTreeMap<String, PtxasReport>,
    pub options: Vec<String>,
    /// The SASS of the CUBINs, per kernel, or why there is none.
    pub sass: Sass,
    /// Seconds until the last CUBIN was there (0 on a cache hit), and from then until the
    /// last SASS was read: with the parts' disassembly overlapping the other parts' NVRTC,
    /// the two add up to the compile's wall time.
    pub(crate) nvrtc_seconds: f64,
    pub(crate) sass_seconds: f64,
}

/// The disassembly of a compiled matrix.
#[derive(Debug, Clone)]
pub enum Sass {
    /// Per kernel (the texts are the parts', in `Program::sass`).
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

/// A compiled part with what was read from it.
struct Built {
    part: Program,
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
        return Err(CompileError::Twice { variant: *v });
    }
    let start = std::time::Instant::now();
    let groups = parts::deal(variants, n);
    let of = groups.len();
    let built: Vec<Result<(Built, f64)>> = crate::error::each_on_a_thread(
        &groups,
        |k, group| {
            let (cubin, log, reports) = compile_program(group, options).map_err(|e| match of {
                1 => e,
                _ => CompileError::Program {
                    k: k + 1,
                    of,
                    source: Box::new(e),
                },
            })?;
            let cubin_at = start.elapsed().as_secs_f64();
            let (text, sass) = disassemble(&cubin, group);
            let part = Program {
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
        |why| Err(CompileError::Panicked(why)),
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

    fn summary(digest: &str) -> SassSummary {
        SassSummary {
            digest: digest.to_string(),
            local_memory_instructions: Vec::new(),
            loop_body: Vec::new(),
            loop_ffma: 0,
            loop_ffma_destinations: Vec::new(),
            ffma_accumulates_in_place: true,
            loop_partials: Vec::new(),
            loop_control: Vec::new(),
            schedule_digest: None,
            schedule_unknown: None,
        }
    }

    /// The SASS of a program holding the kernels `names`, each with the digest `digest`.
    fn read(names: &[&str], digest: &str) -> Sass {
        Sass::Read {
            tool: "nvdisasm".into(),
            kernels: names
                .iter()
                .map(|n| (n.to_string(), summary(digest)))
                .collect(),
        }
    }

    #[test]
    fn sass_of_parts_merges_kernels_and_keeps_the_first_failure() {
        match Sass::merge(vec![read(&["a"], "a"), read(&["b"], "b")]) {
            Sass::Read { kernels, .. } => {
                assert_eq!(kernels.keys().collect::<Vec<_>>(), ["a", "b"])
            }
            other => panic!("{other:?}"),
        }
        let merged = Sass::merge(vec![
            read(&["a"], "a"),
            Sass::Unavailable("none".into()),
            Sass::Failed("part 3".into()),
        ]);
        assert!(matches!(merged, Sass::Failed(w) if w == "part 3"));
        let merged = Sass::merge(vec![read(&["a"], "a"), Sass::Unavailable("none".into())]);
        assert!(matches!(merged, Sass::Unavailable(w) if w == "none"));
    }

    #[test]
    fn a_kernel_in_two_programs_is_refused_wherever_it_is_found() {
        // The SASS of two parts that both hold a kernel: which is the module's?
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
        assert_eq!(e, CompileError::Twice { variant: v });
    }
}
