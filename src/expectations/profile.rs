//! Stage 1 of the pipeline: profiles, the hand-written expectations.
//!
//! A profile (`expectations/<name>.yaml`) holds the probe settings, the invariants with
//! their tolerances, the known deviations of one GPU, optionally a reference to generated
//! per-variant baselines, and optionally recorded results to replay. Reading checks
//! everything this stage can and names file, line and column when it refuses; whether each
//! known deviation names a generated case is checked by [`crate::catalog`], which knows
//! the cases (they belong to the verdict stage).

use crate::error::Result;
use crate::expectations::baselines::{self, Baselines, Wider};
use crate::expectations::compile_only::{CompileOnly, CompileOnlyFile};
use crate::expectations::policy::Policy;
use crate::expectations::recorded::{self, RecordedFile};
use crate::expectations::yaml::{at, parse_document};
use crate::model::gpu::GpuIdentity;
use crate::model::results::RunResults;
use crate::model::settings::{Mode, ProbeSettings};
use crate::model::variant::Sink;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A loaded, checked profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The file it came from.
    pub file: PathBuf,
    pub matches: GpuMatch,
    pub probe: ProbeSettings,
    pub invariants: Vec<Invariant>,
    /// Case name -> why it is expected to fail on this GPU.
    pub known_deviations: BTreeMap<String, KnownDeviation>,
    pub baselines: Option<Baselines>,
    /// The validity checks' settings; without them no validity cases are generated.
    pub validity: Option<Validity>,
    /// The accumulator-split policy this profile gates, if any.
    pub heuristic: Option<Heuristic>,
    /// Results to replay on any machine (the study's table, or a committed run).
    pub recorded: Option<RunResults>,
    /// Architectures and toolchains the compile-only gate compiles the matrix for.
    pub compile_only: Option<CompileOnly>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuMatch {
    /// Exact GPU names as the driver reports them (`NVIDIA H200`), compared case-insensitively.
    #[serde(default)]
    pub gpu_names: Vec<String>,
    /// `major.minor` compute capabilities (`9.0`).
    #[serde(default)]
    pub compute_capabilities: Vec<String>,
}

impl GpuMatch {
    /// Whether `gpu` is one this profile is for: by name (case-insensitive), or by compute
    /// capability.
    pub fn by_name(&self, gpu: &GpuIdentity) -> bool {
        self.gpu_names
            .iter()
            .any(|n| n.eq_ignore_ascii_case(&gpu.name))
    }

    pub fn by_capability(&self, gpu: &GpuIdentity) -> bool {
        self.compute_capabilities.contains(&gpu.compute_capability)
    }

    pub fn matches(&self, gpu: &GpuIdentity) -> bool {
        self.by_name(gpu) || self.by_capability(gpu)
    }
}

/// Why a case is expected to fail on this GPU, and where the profile says so.
#[derive(Debug, Clone, PartialEq)]
pub struct KnownDeviation {
    pub reason: String,
    /// 1-based line and column of the case name in the profile.
    pub line: u64,
    pub column: u64,
}

/// A documented property of the results.
#[derive(Debug, Clone, PartialEq)]
pub enum Invariant {
    /// No accumulator count beats `accumulators` by more than `tolerance` (relative) at any chain.
    Peak { accumulators: u32, tolerance: f64 },
    /// progress(accumulators)/progress(over) rises with chain length, each step by more than
    /// `min_increase` (in ratio units).
    GainGrows {
        accumulators: u32,
        over: u32,
        min_increase: f64,
    },
    /// No variant spills registers to local memory.
    NoSpills,
}

impl Invariant {
    /// The invariant's name in case names: `acc2_is_peak`, `acc2_gain_grows`, `no_spills`.
    pub fn id(&self) -> String {
        match self {
            Invariant::Peak { accumulators, .. } => format!("acc{accumulators}_is_peak"),
            Invariant::GainGrows { accumulators, .. } => format!("acc{accumulators}_gain_grows"),
            Invariant::NoSpills => "no_spills".to_string(),
        }
    }
}

/// Settings of the measurement-validity checks: the physical ceilings of a launch.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Validity {
    /// Dependent FFMA latency, cycles (4 on sm_90).
    pub ffma_latency_cycles: u32,
    /// Warp schedulers per SM (4 on sm_90): warps sharing one issue at most one instruction
    /// per cycle between them.
    pub schedulers_per_sm: u32,
    /// How far a launch's duration (CUDA events) may be from budget / SM clock, relative.
    pub duration_tolerance: f64,
}

/// A policy gated by a profile: its pick must reach (1 - tolerance) of the best progress.
#[derive(Debug, Clone, PartialEq)]
pub struct Heuristic {
    pub policy: Policy,
    pub tolerance: f64,
}

// ---------------------------------------------------------------------------------------
// The file format. Spanned fields are those whose values are checked after parsing, so
// that a refusal can point at them.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProfileFile {
    name: Spanned<String>,
    description: String,
    #[serde(default, rename = "match")]
    matches: GpuMatch,
    probe: ProbeFile,
    invariants: Vec<InvariantFile>,
    #[serde(default)]
    known_deviations: Vec<DeviationFile>,
    baselines: Option<BaselinesRef>,
    recorded: Option<RecordedFile>,
    validity: Option<Spanned<Validity>>,
    sink_isolation: Option<SinkFile>,
    heuristic: Option<HeuristicFile>,
    compile_only: Option<CompileOnlyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SinkFile {
    modes: Vec<Spanned<Sink>>,
    accumulators: Vec<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeuristicFile {
    /// Relative to the profile's folder.
    policy: Spanned<String>,
    tolerance: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeFile {
    blocks: Spanned<u32>,
    block_threads: Spanned<u32>,
    warmup_launches: u32,
    repeats: Spanned<u32>,
    budget_cycles: Spanned<u64>,
    chains: Vec<Spanned<u32>>,
    accumulators: Vec<Spanned<u32>>,
    #[serde(default)]
    mode: Mode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum InvariantFile {
    Peak {
        accumulators: Spanned<u32>,
        tolerance: Spanned<f64>,
    },
    GainGrows {
        accumulators: Spanned<u32>,
        over: Spanned<u32>,
        min_increase: Spanned<f64>,
    },
    NoSpills {},
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeviationFile {
    case: Spanned<String>,
    reason: Spanned<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselinesRef {
    /// Relative to the profile's folder.
    file: Spanned<String>,
    tolerance: Spanned<f64>,
    #[serde(default)]
    wider: BTreeMap<String, Spanned<Wider>>,
}

/// Checks a list of positive, distinct counts.
fn counts(
    file: &Path,
    what: &str,
    list: &[Spanned<u32>],
    whole: &Spanned<String>,
) -> Result<Vec<u32>> {
    if list.is_empty() {
        return Err(at(
            file,
            whole,
            format!("probe.{what} is empty: expected at least one count"),
        ));
    }
    let mut out = Vec::new();
    for s in list {
        if s.value == 0 {
            return Err(at(
                file,
                s,
                format!("probe.{what}: 0 is not a count: expected a whole number >= 1"),
            ));
        }
        if out.contains(&s.value) {
            return Err(at(
                file,
                s,
                format!("probe.{what}: {} is listed twice", s.value),
            ));
        }
        out.push(s.value);
    }
    Ok(out)
}

fn tolerance(file: &Path, what: &str, t: &Spanned<f64>) -> Result<f64> {
    if !(t.value.is_finite() && (0.0..1.0).contains(&t.value)) {
        return Err(at(
            file,
            t,
            format!(
                "{what} {} is out of range: expected a fraction in [0, 1), e.g. 0.02 for 2%",
                t.value
            ),
        ));
    }
    Ok(t.value)
}

impl Profile {
    /// Reads a profile given as text, and the files it names (policy, baselines, recorded
    /// results); `file` names it in errors and anchors relative paths. Known deviations are
    /// not yet checked against the cases: [`crate::catalog::parse`] does that.
    pub(crate) fn read(text: &str, file: &Path) -> Result<Profile> {
        let raw: ProfileFile = parse_document(
            text,
            file,
            "profile",
            "a mapping with name, description, probe and invariants",
        )?;
        let dir = file.parent().unwrap_or(Path::new("."));
        let name = raw.name.value.clone();
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(at(
                file,
                &raw.name,
                format!("profile name {name:?}: expected letters, digits, '_' or '-'"),
            ));
        }
        let p = &raw.probe;
        let positive = |s: &Spanned<u32>, what: &str| -> Result<u32> {
            if s.value == 0 {
                Err(at(
                    file,
                    s,
                    format!("probe.{what} is 0: expected a whole number >= 1"),
                ))
            } else {
                Ok(s.value)
            }
        };
        let block_threads = positive(&p.block_threads, "block_threads")?;
        if block_threads % 32 != 0 || block_threads > 1024 {
            return Err(at(file, &p.block_threads, format!("probe.block_threads {block_threads}: expected a multiple of 32 (whole warps) up to 1024")));
        }
        if p.budget_cycles.value == 0 {
            return Err(at(
                file,
                &p.budget_cycles,
                "probe.budget_cycles is 0: expected a clock64 budget >= 1 cycle",
            ));
        }
        let probe = ProbeSettings {
            blocks: positive(&p.blocks, "blocks")?,
            block_threads,
            warmup_launches: p.warmup_launches,
            repeats: positive(&p.repeats, "repeats")?,
            budget_cycles: p.budget_cycles.value,
            chains: counts(file, "chains", &p.chains, &raw.name)?,
            accumulators: counts(file, "accumulators", &p.accumulators, &raw.name)?,
            sink_modes: Vec::new(),
            sink_accumulators: Vec::new(),
            mode: p.mode,
        };
        let mut probe = probe;
        if let Some(si) = &raw.sink_isolation {
            for m in &si.modes {
                if m.value == Sink::A {
                    return Err(at(file, m, "sink_isolation.modes: A is the documented probe itself; list only B, C or D"));
                }
                if probe.sink_modes.contains(&m.value) {
                    return Err(at(
                        file,
                        m,
                        format!("sink mode {:?} is listed twice", m.value),
                    ));
                }
                probe.sink_modes.push(m.value);
            }
            probe.sink_accumulators = counts(
                file,
                "sink_isolation.accumulators",
                &si.accumulators,
                &raw.name,
            )?;
            if let Some(k) = si
                .accumulators
                .iter()
                .find(|k| !probe.accumulators.contains(&k.value))
            {
                return Err(at(file, k, format!("sink_isolation.accumulators: {} is not in probe.accumulators {:?}, so mode A would not be measured at it", k.value, probe.accumulators)));
            }
        }
        let probe = probe;
        let known_k = |s: &Spanned<u32>, what: &str| -> Result<u32> {
            if probe.accumulators.contains(&s.value) {
                Ok(s.value)
            } else {
                Err(at(
                    file,
                    s,
                    format!(
                        "{what}: accumulator count {} is not in probe.accumulators {:?}",
                        s.value, probe.accumulators
                    ),
                ))
            }
        };
        let mut invariants = Vec::new();
        for inv in &raw.invariants {
            invariants.push(match inv {
                InvariantFile::Peak {
                    accumulators,
                    tolerance: t,
                } => Invariant::Peak {
                    accumulators: known_k(accumulators, "peak.accumulators")?,
                    tolerance: tolerance(file, "peak.tolerance", t)?,
                },
                InvariantFile::GainGrows {
                    accumulators,
                    over,
                    min_increase,
                } => {
                    if probe.chains.len() < 2 {
                        return Err(at(
                            file,
                            accumulators,
                            "gain_grows needs at least two chain lengths in probe.chains",
                        ));
                    }
                    if !(min_increase.value.is_finite() && min_increase.value >= 0.0) {
                        return Err(at(
                            file,
                            min_increase,
                            "gain_grows.min_increase: expected a ratio step >= 0",
                        ));
                    }
                    Invariant::GainGrows {
                        accumulators: known_k(accumulators, "gain_grows.accumulators")?,
                        over: known_k(over, "gain_grows.over")?,
                        min_increase: min_increase.value,
                    }
                }
                InvariantFile::NoSpills {} => Invariant::NoSpills,
            });
        }
        let mut profile = Profile {
            name,
            description: raw.description,
            file: file.to_path_buf(),
            matches: raw.matches,
            probe,
            invariants,
            known_deviations: BTreeMap::new(),
            baselines: None,
            validity: None,
            heuristic: None,
            recorded: None,
            compile_only: None,
        };
        if let Some(h) = &raw.heuristic {
            let tolerance = tolerance(file, "heuristic.tolerance", &h.tolerance)?;
            let path = dir.join(&h.policy.value);
            if !path.is_file() {
                return Err(at(
                    file,
                    &h.policy,
                    format!("policy file {} does not exist", path.display()),
                ));
            }
            profile.heuristic = Some(Heuristic {
                policy: Policy::load(&path)?,
                tolerance,
            });
        }
        if let Some(v) = &raw.validity {
            if v.value.ffma_latency_cycles == 0 || v.value.schedulers_per_sm == 0 {
                return Err(at(
                    file,
                    v,
                    "validity: ffma_latency_cycles and schedulers_per_sm must be >= 1",
                ));
            }
            let t = &v.value.duration_tolerance;
            if !(t.is_finite() && *t > 0.0 && *t < 1.0) {
                return Err(at(
                    file,
                    v,
                    format!(
                        "validity.duration_tolerance {t}: expected a fraction in (0, 1), e.g. 0.05"
                    ),
                ));
            }
            profile.validity = Some(v.value);
        }
        if let Some(b) = &raw.baselines {
            let tolerance = tolerance(file, "baselines.tolerance", &b.tolerance)?;
            let path = dir.join(&b.file.value);
            // A missing file is not a load error: every variant case then fails saying to
            // bless one, and `cargo xtask bless` can load the profile to write it.
            let mut wider = BTreeMap::new();
            let variants = profile.probe.variants();
            for (name, w) in &b.wider {
                if !variants.iter().any(|v| &v.name() == name) {
                    return Err(at(file, w, format!("baselines.wider names {name:?}, which is not a variant of this profile")));
                }
                let t = &w.value.tolerance;
                if !(t.is_finite() && *t > tolerance && *t < 1.0) {
                    return Err(at(file, w, format!("baselines.wider.{name}.tolerance {t}: expected more than baselines.tolerance ({tolerance}) and less than 1")));
                }
                if w.value.reason.trim().is_empty() {
                    return Err(at(
                        file,
                        w,
                        format!("baselines.wider.{name}: give the measured reason"),
                    ));
                }
                wider.insert(name.clone(), w.value.clone());
            }
            let mut loaded = if path.exists() {
                baselines::load(&path, &profile.name, file, &variants, tolerance)?
            } else {
                Baselines {
                    tolerance,
                    file: path,
                    progress: BTreeMap::new(),
                    sass: BTreeMap::new(),
                    wider: BTreeMap::new(),
                    origin: None,
                }
            };
            loaded.wider = wider;
            profile.baselines = Some(loaded);
        }
        for d in &raw.known_deviations {
            if d.reason.value.trim().is_empty() {
                return Err(at(
                    file,
                    &d.reason,
                    "known deviation without a reason: give the measured numbers",
                ));
            }
            let deviation = KnownDeviation {
                reason: d.reason.value.clone(),
                line: d.case.referenced.line(),
                column: d.case.referenced.column(),
            };
            if profile
                .known_deviations
                .insert(d.case.value.clone(), deviation)
                .is_some()
            {
                return Err(at(
                    file,
                    &d.case,
                    format!(
                        "case {:?} is listed twice as a known deviation",
                        d.case.value
                    ),
                ));
            }
        }
        if let Some(c) = &raw.compile_only {
            let variants = profile.probe.variants();
            profile.compile_only = Some(c.check(file, &profile.name, &raw.name, &variants)?);
        }
        if let Some(r) = &raw.recorded {
            profile.recorded = Some(recorded::load(file, dir, r, &profile.name, &profile.probe)?);
        }
        Ok(profile)
    }
}
