//! The compile-only gate's service: compiles a profile's matrix for its `compile_only:`
//! architectures under each of its toolchains, one worker process per toolchain
//! (`compile::worker`), at most once per process, and hands each (architecture,
//! toolchain) its outcome. Used by the libtest front end (the `compile::` cases) and by
//! `cargo xtask toolchains`. Also: blessing compile-only baselines.

use crate::compile::toolchain::{self, ToolchainError};
use crate::compile::worker;
use crate::error::Result;
use crate::expectations::baselines::{self, CompileOrigin, Digests, COMPILE_DIGEST_CHARS};
use crate::expectations::compile_only::CompileOnly;
use crate::expectations::profile::Profile;
use crate::model::compiled::{ArchOutcome, CompiledMatrix};
use crate::text::Shown;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

/// What one toolchain's worker gave, per architecture, or why it gave nothing.
#[derive(Debug, Clone)]
pub struct ToolchainRun {
    /// Architecture -> outcome; every architecture of the profile is present.
    pub(crate) outcomes: BTreeMap<String, ArchOutcome>,
    /// Wall-clock seconds of the worker (0 when none ran).
    pub seconds: f64,
}

/// The compile-only side of one profile on this machine.
pub struct CompileOnlySession {
    pub(crate) profile: Profile,
    root: PathBuf,
    cache: Option<PathBuf>,
    disassembler: Option<PathBuf>,
    /// Whether a toolchain that is not installed fails (else: ignored with the reason).
    require: bool,
    runs: BTreeMap<String, OnceLock<ToolchainRun>>,
}

/// Whether `ACCPROBE_REQUIRE_TOOLCHAINS` asks for every toolchain to be there.
pub(crate) fn required_by_env() -> bool {
    // A value that is neither yes nor no counts as yes here; both front ends refuse it at
    // start (`config::check`, exit 2) before anything reads it.
    crate::config::require_toolchains().unwrap_or(true)
}

/// Why a toolchain that is not installed fails instead of being ignored: required by the
/// variable, or by the caller (`cargo xtask toolchains` compiles every toolchain of the
/// profile).
pub fn why_required() -> String {
    if required_by_env() {
        format!(
            "{} is set: the compile-only cases must run here",
            toolchain::REQUIRE_ENV
        )
    } else {
        "this command compiles every toolchain of the profile".to_string()
    }
}

impl CompileOnlySession {
    /// `None` when the profile has no `compile_only:` section. Nothing is compiled until an
    /// outcome is asked for.
    pub fn new(
        profile: Profile,
        root: PathBuf,
        cache: Option<PathBuf>,
        require: bool,
    ) -> Option<CompileOnlySession> {
        let c = profile.compile_only.as_ref()?;
        let runs = c
            .toolchains
            .iter()
            .map(|t| (t.clone(), OnceLock::new()))
            .collect();
        let disassembler = toolchain::disassembler(&root);
        Some(CompileOnlySession {
            profile,
            root,
            cache,
            disassembler,
            require,
            runs,
        })
    }

    pub fn toolchains(&self) -> Vec<String> {
        self.runs.keys().cloned().collect()
    }

    /// Why toolchain `tc`'s cases cannot run on this machine, known before anything
    /// compiles (so that they are ignored at list time, as nextest needs): it is not
    /// installed (unless required), or this executable runs no compile workers. `None`
    /// when they can run.
    pub(crate) fn unavailable(&self, tc: &str) -> Option<String> {
        if let Err(ToolchainError::NotInstalled(m)) = toolchain::resolve(tc, &self.root) {
            if !self.require {
                return Some(m);
            }
        }
        worker::can_spawn_workers().err().map(|e| e.to_string())
    }

    /// The run of toolchain `tc` (a key of the profile's list), compiled at first call.
    pub fn run(&self, tc: &str) -> &ToolchainRun {
        let cell = self
            .runs
            .get(tc)
            .unwrap_or_else(|| panic!("toolchain {tc} is not in the profile's compile_only list"));
        cell.get_or_init(|| self.compile(tc))
    }

    /// The run of toolchain `tc` if it has compiled already.
    pub fn peek(&self, tc: &str) -> Option<&ToolchainRun> {
        self.runs.get(tc)?.get()
    }

    /// What toolchain `tc` made of architecture `arch`.
    pub fn outcome(&self, tc: &str, arch: &str) -> ArchOutcome {
        self.run(tc).outcomes.get(arch).cloned().unwrap_or_else(|| {
            ArchOutcome::Failed(format!("{arch} was not compiled by NVRTC {tc}"))
        })
    }

    fn compile(&self, tc: &str) -> ToolchainRun {
        let archs = self
            .profile
            .compile_only
            .as_ref()
            .map(|c| c.architectures.clone())
            .unwrap_or_default();
        let all = |o: ArchOutcome| ToolchainRun {
            outcomes: archs.iter().map(|a| (a.clone(), o.clone())).collect(),
            seconds: 0.0,
        };
        if let Err(why) = worker::can_spawn_workers() {
            return all(ArchOutcome::Unsupported(why.to_string()));
        }
        let t = match toolchain::resolve(tc, &self.root) {
            Ok(t) => t,
            Err(ToolchainError::NotInstalled(m)) if !self.require => {
                return all(ArchOutcome::Unsupported(m))
            }
            Err(ToolchainError::NotInstalled(m)) => {
                return all(ArchOutcome::Failed(format!("{m} ({})", why_required())));
            }
            Err(ToolchainError::Invalid(m)) => return all(ArchOutcome::Failed(m)),
        };
        let start = Instant::now();
        let report = worker::spawn_worker(
            &t,
            &archs,
            &self.profile.probe.variants(),
            self.cache.as_deref(),
            self.disassembler.as_deref(),
        );
        let seconds = start.elapsed().as_secs_f64();
        match report {
            Err(e) => all(ArchOutcome::Failed(e.to_string())),
            Ok(r) => match r.toolchain {
                Err(e) => all(ArchOutcome::Failed(format!(
                    "NVRTC {tc} ({}): {e}",
                    t.lib_dir.shown()
                ))),
                Ok(_) => ToolchainRun {
                    outcomes: r.architectures.into_iter().collect(),
                    seconds,
                },
            },
        }
    }
}

/// What blessing compile-only baselines would write, and what changes.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileBlessing {
    pub file: PathBuf,
    pub(crate) contents: String,
    /// One line per changed, added or removed digest, and per (architecture, toolchain)
    /// that could not be blessed.
    pub diff: Vec<String>,
    /// The profile's folder, which `file` must really be in when it is written.
    pub(crate) folder: PathBuf,
    /// The digest of `file` as the diff saw it (`None`: absent).
    pub(crate) before: Option<String>,
}

/// Why compile-only baselines cannot be blessed from a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompileBlessError {
    #[error("profile {profile:?} has no compile_only section")]
    NoSection { profile: String },
    #[error("profile {profile:?} ({}) names no compile_only.baselines file to bless into", .file.shown())]
    NoBaselinesFile { profile: String, file: PathBuf },
    #[error("no toolchain compiled anything: install them with ci/toolchains.sh")]
    NothingCompiled,
    /// The matrices were disassembled by these different tools.
    #[error("the matrices were disassembled by different tools ({}): digests would not compare", .tools.join(", "))]
    Disassemblers { tools: Vec<String> },
    /// Architecture `arch` with toolchain `toolchain` failed to compile (`why`).
    #[error("{arch} with NVRTC {toolchain} failed; nothing blessed: {why}")]
    Failed {
        arch: String,
        toolchain: String,
        why: String,
    },
    /// Architecture `arch` with toolchain `toolchain` compiled, but has no SASS (`why`).
    #[error("{arch} with NVRTC {toolchain}: no SASS to bless: {why}")]
    NoSass {
        arch: String,
        toolchain: String,
        why: String,
    },
}

/// The compile-only baselines of `session`'s profile from what it compiled (compiling
/// every toolchain first). Refuses when nothing compiled, when a matrix has no SASS, or
/// when the disassemblers differ between toolchains.
pub fn prepare_compile_bless(
    session: &CompileOnlySession,
    command: &str,
) -> Result<CompileBlessing, CompileBlessError> {
    let p = &session.profile;
    let c = p
        .compile_only
        .as_ref()
        .ok_or_else(|| CompileBlessError::NoSection {
            profile: p.name.clone(),
        })?;
    let b = c
        .baselines
        .as_ref()
        .ok_or_else(|| CompileBlessError::NoBaselinesFile {
            profile: p.name.clone(),
            file: p.file.clone(),
        })?;
    let Blessed {
        digests,
        schedules,
        toolchains,
        mut disassemblers,
        mut diff,
    } = Blessed::of(session, c)?;
    if toolchains.is_empty() {
        return Err(CompileBlessError::NothingCompiled);
    }
    if disassemblers.len() > 1 {
        return Err(CompileBlessError::Disassemblers {
            tools: disassemblers,
        });
    }
    let origin = CompileOrigin {
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        disassembler: disassemblers.remove(0),
        toolchains,
    };
    let header = compile_header(p, command);
    let contents = baselines::render_compile(&header, &p.name, &origin, &digests, &schedules);
    diff_digests("", &b.digests, &digests, &mut diff);
    diff_digests(" loop schedule", &b.schedules, &schedules, &mut diff);
    Ok(CompileBlessing {
        file: b.file.clone(),
        contents,
        diff,
        folder: crate::bless::profile_folder(p),
        before: b.read.clone(),
    })
}

/// What a compile-only bless records from a session's matrices.
struct Blessed {
    digests: Digests,
    schedules: Digests,
    /// The profile's toolchain name -> the toolchain as it describes itself.
    toolchains: BTreeMap<String, String>,
    disassemblers: Vec<String>,
    /// The diff's lines so far: the (architecture, toolchain) pairs not blessed.
    diff: Vec<String>,
}

impl Blessed {
    /// Every (toolchain, architecture) of `c` that `session` compiled; refused where one
    /// failed or has no SASS.
    fn of(session: &CompileOnlySession, c: &CompileOnly) -> Result<Blessed, CompileBlessError> {
        let mut out = Blessed {
            digests: BTreeMap::new(),
            schedules: BTreeMap::new(),
            toolchains: BTreeMap::new(),
            disassemblers: Vec::new(),
            diff: Vec::new(),
        };
        for tc in &c.toolchains {
            for arch in &c.architectures {
                match session.outcome(tc, arch) {
                    ArchOutcome::Compiled(m) => out.add(tc, arch, &m)?,
                    ArchOutcome::Unsupported(r) => out
                        .diff
                        .push(format!("  {arch} with NVRTC {tc}: not blessed: {r}")),
                    ArchOutcome::Failed(why) => {
                        return Err(CompileBlessError::Failed {
                            arch: arch.clone(),
                            toolchain: tc.clone(),
                            why,
                        })
                    }
                }
            }
        }
        Ok(out)
    }

    /// The digests of the matrix `m`, compiled for `arch` by toolchain `tc`.
    fn add(&mut self, tc: &str, arch: &str, m: &CompiledMatrix) -> Result<(), CompileBlessError> {
        if let Some(why) = &m.sass_unavailable {
            return Err(CompileBlessError::NoSass {
                arch: arch.to_string(),
                toolchain: tc.to_string(),
                why: why.clone(),
            });
        }
        self.toolchains
            .insert(tc.to_string(), m.toolchain.describe());
        if !self.disassemblers.contains(&m.disassembler) {
            self.disassemblers.push(m.disassembler.clone());
        }
        let per = self
            .digests
            .entry(arch.to_string())
            .or_default()
            .entry(tc.to_string())
            .or_default();
        for (v, cv) in &m.variants {
            if let Some(s) = &cv.sass {
                per.insert(v.clone(), s.digest[..COMPILE_DIGEST_CHARS].to_string());
            }
        }
        for (v, cv) in &m.variants {
            let Some(d) = cv.sass.as_ref().and_then(|s| s.schedule_digest.as_ref()) else {
                continue;
            };
            self.schedules
                .entry(arch.to_string())
                .or_default()
                .entry(tc.to_string())
                .or_default()
                .insert(v.clone(), d[..COMPILE_DIGEST_CHARS].to_string());
        }
        Ok(())
    }
}

/// The generated compile-only baselines file's header.
fn compile_header(p: &Profile, command: &str) -> [String; 5] {
    let profile_file = p.file.file_name().map_or_else(
        || p.file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    [
        format!("Generated by `{command}` (compile only: no GPU involved)."),
        "Do not edit by hand: re-bless after reviewing the SASS change. The architectures and".into(),
        format!("toolchains are listed in the hand-written profile, expectations/{profile_file}."),
        format!(
            "digests: the first {COMPILE_DIGEST_CHARS} hex digits of each variant's SASS digest, per architecture and NVRTC."
        ),
        "schedules: the same of each measured loop's schedule digest (instructions and control fields), where decoded.".into(),
    ]
}

/// The lines of a bless's diff for one map of digests: `+` new, `~` changed, `-` gone, each
/// named by architecture, toolchain and variant, then `what` (` loop schedule`).
fn diff_digests(what: &str, old: &Digests, new: &Digests, diff: &mut Vec<String>) {
    let get = |m: &'_ Digests, arch: &str, tc: &str, v: &str| -> Option<String> {
        m.get(arch)?.get(tc)?.get(v).cloned()
    };
    for (arch, per_tc) in new {
        for (tc, per_v) in per_tc {
            for (v, d) in per_v {
                match get(old, arch, tc, v) {
                    None => diff.push(format!("+ {arch} NVRTC {tc} {v}{what}: {d}")),
                    Some(o) if &o != d => {
                        diff.push(format!("~ {arch} NVRTC {tc} {v}{what}: {o} -> {d}"))
                    }
                    _ => {}
                }
            }
        }
    }
    for (arch, per_tc) in old {
        for (tc, per_v) in per_tc {
            for v in per_v.keys() {
                if get(new, arch, tc, v).is_none() {
                    diff.push(format!("- {arch} NVRTC {tc} {v}{what}"));
                }
            }
        }
    }
}

impl CompileBlessing {
    /// Writes the file as every bless does ([`crate::output::write_generated`]): under the
    /// profile folder's lock, never over a change made since the diff, never under CI,
    /// never outside the profile's folder.
    pub fn write(&self) -> Result<()> {
        crate::output::write_generated(
            &self.folder,
            &self.file,
            self.before.as_deref(),
            &self.contents,
            "compile baselines",
        )
    }
}

/// The compile cache folder of the compile-only gate under a run's cache folder.
pub fn cache_under(cache: Option<&Path>) -> Option<PathBuf> {
    cache.map(|c| c.join("compile-only"))
}
