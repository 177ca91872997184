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
use crate::expectations::yaml::{at, number, parse_document, path_inside, referenced_from};
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
    pub policy_gate: Option<PolicyGate>,
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

/// In words, for messages: "it matches GPU name NVIDIA H200 or compute capability 9.0", or
/// "it matches no GPU (its `matches` names no GPU name or compute capability)".
impl std::fmt::Display for GpuMatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let list = |what: &str, items: &[String]| match items {
            [] => None,
            [one] => Some(format!("{what} {one}")),
            more => Some(format!("{what}s {}", more.join(", "))),
        };
        let parts: Vec<String> = [
            list("GPU name", &self.gpu_names),
            list("compute capability", &self.compute_capabilities),
        ]
        .into_iter()
        .flatten()
        .collect();
        if parts.is_empty() {
            write!(
                f,
                "it matches no GPU (its `matches` names no GPU name or compute capability)"
            )
        } else {
            write!(f, "it matches {}", parts.join(" or "))
        }
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
    #[serde(deserialize_with = "number::plain")]
    pub ffma_latency_cycles: u32,
    /// Warp schedulers per SM (4 on sm_90): warps sharing one issue at most one instruction
    /// per cycle between them.
    #[serde(deserialize_with = "number::plain")]
    pub schedulers_per_sm: u32,
    /// How far a launch's duration (CUDA events) may be from budget / SM clock, relative.
    #[serde(deserialize_with = "number::plain")]
    pub duration_tolerance: f64,
}

/// A policy gated by a profile: its pick must reach (1 - tolerance) of the best progress.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyGate {
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
    policy_gate: Option<PolicyGateFile>,
    compile_only: Option<CompileOnlyFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SinkFile {
    modes: Vec<Spanned<Sink>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    accumulators: Spanned<Vec<Spanned<u32>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyGateFile {
    /// The policy file, relative to the profile's folder.
    file: Spanned<String>,
    #[serde(deserialize_with = "number::spanned")]
    tolerance: Spanned<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProbeFile {
    #[serde(deserialize_with = "number::spanned")]
    blocks: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    block_threads: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    warmup_launches: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    repeats: Spanned<u32>,
    #[serde(deserialize_with = "number::spanned")]
    budget_cycles: Spanned<u64>,
    #[serde(deserialize_with = "number::spanned_seq")]
    chains: Spanned<Vec<Spanned<u32>>>,
    #[serde(deserialize_with = "number::spanned_seq")]
    accumulators: Spanned<Vec<Spanned<u32>>>,
    #[serde(default)]
    mode: Mode,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
enum InvariantFile {
    Peak {
        #[serde(deserialize_with = "number::spanned")]
        accumulators: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
        tolerance: Spanned<f64>,
    },
    GainGrows {
        #[serde(deserialize_with = "number::spanned")]
        accumulators: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
        over: Spanned<u32>,
        #[serde(deserialize_with = "number::spanned")]
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
    #[serde(deserialize_with = "number::spanned")]
    tolerance: Spanned<f64>,
    #[serde(default)]
    wider: BTreeMap<String, Spanned<Wider>>,
}

// ---------------------------------------------------------------------------------------
// Upper bounds on the probe settings. A profile beyond one is refused at the value, naming
// the bound: past them a run would take hours, compile for minutes, or measure something
// other than what the probe stands for.

/// The longest chain and the most accumulators a variant may have. The kernel template
/// unrolls N FFMAs per loop iteration and keeps E = min(K, N) partials in registers; a
/// thread has at most 255 registers, so beyond 256 every extra partial lives in local
/// memory and the loop no longer measures a register accumulation, and an N-FFMA body
/// per variant, for every variant of the matrix in one NVRTC program, is what compile time
/// grows with.
pub const MAX_COUNT: u32 = 256;
/// The most values `probe.chains` or `probe.accumulators` may list: 64 x 64 variants (and
/// as many again per sink mode) already make one NVRTC program of thousands of kernels.
pub const MAX_VALUES: usize = 64;
/// The most counted repeats: each is one launch per variant (a wave in wave mode).
pub const MAX_REPEATS: u32 = 1000;
/// The most warm-up launches: a few settle the clocks; more only add time.
pub const MAX_WARMUP: u32 = 100;
/// The most blocks per launch: more than any GPU has SMs (an H200 has 132).
pub const MAX_BLOCKS: u32 = 1024;
/// The longest clock64 budget: 10^10 cycles, a launch of about 5 s at 2 GHz, per variant
/// and repeat.
pub const MAX_BUDGET_CYCLES: u64 = 10_000_000_000;

/// Checks a list of positive, distinct counts, at most [`MAX_VALUES`] of them, each at most
/// [`MAX_COUNT`]; an empty list is refused at its own position.
fn counts(file: &Path, what: &str, whole: &Spanned<Vec<Spanned<u32>>>) -> Result<Vec<u32>> {
    let list = &whole.value;
    if list.is_empty() {
        return Err(at(
            file,
            whole,
            format!("probe.{what} is empty: expected at least one count"),
        ));
    }
    if let Some(s) = list.get(MAX_VALUES) {
        return Err(at(
            file,
            s,
            format!(
                "probe.{what} lists {} values: at most {MAX_VALUES} (each is a row or column of variants, all compiled into one program)",
                list.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for s in list {
        if s.value > MAX_COUNT {
            return Err(at(
                file,
                s,
                format!(
                    "probe.{what}: {} is above {MAX_COUNT}, the most this probe measures (the kernel unrolls N FFMAs per iteration and keeps up to N partials in registers; a thread has at most 255)",
                    s.value
                ),
            ));
        }
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
        let at_most = |s: &Spanned<u32>, what: &str, max: u32, why: &str| -> Result<()> {
            if s.value > max {
                Err(at(
                    file,
                    s,
                    format!("probe.{what} {} is above {max}: {why}", s.value),
                ))
            } else {
                Ok(())
            }
        };
        at_most(
            &p.blocks,
            "blocks",
            MAX_BLOCKS,
            "more blocks than any GPU has SMs",
        )?;
        at_most(
            &p.repeats,
            "repeats",
            MAX_REPEATS,
            "each repeat is one more launch of every variant",
        )?;
        at_most(
            &p.warmup_launches,
            "warmup_launches",
            MAX_WARMUP,
            "a few warm-up launches settle the clocks; more only add time",
        )?;
        if p.budget_cycles.value > MAX_BUDGET_CYCLES {
            return Err(at(
                file,
                &p.budget_cycles,
                format!(
                    "probe.budget_cycles {} is above {MAX_BUDGET_CYCLES}, about 5 s per launch at 2 GHz",
                    p.budget_cycles.value
                ),
            ));
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
            warmup_launches: p.warmup_launches.value,
            repeats: positive(&p.repeats, "repeats")?,
            budget_cycles: p.budget_cycles.value,
            chains: counts(file, "chains", &p.chains)?,
            accumulators: counts(file, "accumulators", &p.accumulators)?,
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
            probe.sink_accumulators =
                counts(file, "sink_isolation.accumulators", &si.accumulators)?;
            if let Some(k) = si
                .accumulators
                .value
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
            policy_gate: None,
            recorded: None,
            compile_only: None,
        };
        if let Some(h) = &raw.policy_gate {
            let tolerance = tolerance(file, "policy_gate.tolerance", &h.tolerance)?;
            let path = path_inside(file, dir, "policy_gate.file", &h.file)?;
            if !path.exists() {
                return Err(at(
                    file,
                    &h.file,
                    format!("policy file {} does not exist", path.display()),
                ));
            }
            profile.policy_gate = Some(PolicyGate {
                policy: Policy::load(&path).map_err(referenced_from(file, &h.file))?,
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
            let path = path_inside(file, dir, "baselines.file", &b.file)?;
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
                baselines::load(&path, &profile.name, file, &variants, tolerance)
                    .map_err(referenced_from(file, &b.file))?
            } else {
                Baselines {
                    tolerance,
                    file: path,
                    progress: BTreeMap::new(),
                    sass: BTreeMap::new(),
                    wider: BTreeMap::new(),
                    origin: None,
                    read: None,
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
            profile.compile_only = Some(c.check(file, &profile.name, &variants)?);
        }
        if let Some(r) = &raw.recorded {
            profile.recorded = Some(recorded::load(file, dir, r, &profile.name, &profile.probe)?);
        }
        Ok(profile)
    }
}
