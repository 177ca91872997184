//! Stage 1 of the pipeline: profiles, the hand-written expectations.
//!
//! A profile (`expectations/<name>.yaml`) holds the probe settings, the invariants with
//! their tolerances, the known deviations of one GPU, optionally a reference to generated
//! per-variant baselines, and optionally recorded results to replay. Loading checks
//! everything a later stage relies on and names file, line and column when it refuses.
//!
//! The profile also says which cases exist ([`Profile::cases`]): one per variant, one per
//! invariant and chain length, one for the gain trend, one for spills.

use crate::error::{Error, Result};
use crate::measure::Mode;
use crate::policy::Policy;
use crate::results::{Resources, RunResults, VariantResult};
use crate::variant::{matrix, Sink, Variant};
use crate::yaml::{at, parse_document, parse_yaml, read_text};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The profile that applies when no other matches the GPU: the study itself.
pub const DOCUMENTED: &str = "documented";
/// Environment variable that forces a profile, by name or by path to a YAML file.
pub const PROFILE_ENV: &str = "ACCPROBE_PROFILE";

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
    pub known_deviations: BTreeMap<String, String>,
    pub baselines: Option<Baselines>,
    /// The validity checks' settings; without them no validity cases are generated.
    pub validity: Option<Validity>,
    /// The accumulator-split policy this profile gates, if any.
    pub heuristic: Option<Heuristic>,
    /// Results to replay on any machine (the study's table, or a committed run).
    pub recorded: Option<RunResults>,
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

/// How the probe runs. Defaults are none: every profile states its setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSettings {
    pub blocks: u32,
    pub block_threads: u32,
    pub warmup_launches: u32,
    pub repeats: u32,
    pub budget_cycles: u64,
    pub chains: Vec<u32>,
    pub accumulators: Vec<u32>,
    /// Sink-isolation modes measured besides the documented probe (mode A).
    pub sink_modes: Vec<Sink>,
    /// The accumulator counts the sink modes are measured at.
    pub sink_accumulators: Vec<u32>,
    /// Serial (one variant at a time) or wave (all at once, one SM each).
    pub mode: Mode,
}

impl ProbeSettings {
    /// Every variant: the documented matrix, then each sink mode's.
    pub fn variants(&self) -> Vec<Variant> {
        let mut all = self.main_variants();
        for &m in &self.sink_modes {
            all.extend(
                matrix(&self.chains, &self.sink_accumulators)
                    .into_iter()
                    .map(|v| v.with_sink(m)),
            );
        }
        all
    }

    /// The documented matrix (sink mode A): what the invariants are about.
    pub fn main_variants(&self) -> Vec<Variant> {
        matrix(&self.chains, &self.accumulators)
    }

    pub fn warps(&self) -> u32 {
        self.blocks * self.block_threads / 32
    }
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

#[derive(Debug, Clone, PartialEq)]
pub struct Baselines {
    /// Allowed relative distance from the baseline, in either direction.
    pub tolerance: f64,
    /// The generated file they came from.
    pub file: PathBuf,
    pub progress: BTreeMap<String, f64>,
    /// Per variant: the SASS digest and loop body it was blessed with.
    pub sass: BTreeMap<String, SassBaseline>,
    /// Variants with a wider tolerance than `tolerance`, each with the measured reason.
    pub wider: BTreeMap<String, Wider>,
    /// Where the baselines were measured (`None` until a file is blessed).
    pub origin: Option<BaselineOrigin>,
}

/// A wider baseline tolerance for one variant, and why (measured numbers).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wider {
    pub tolerance: f64,
    pub reason: String,
}

/// A variant's blessed SASS fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct SassBaseline {
    pub digest: String,
    pub loop_body: Vec<String>,
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

/// Where a spill is looked for; each is its own verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillSource {
    /// ptxas's spill stores and loads.
    PtxasReport,
    /// The loaded function's local memory size.
    LocalMemory,
    /// `LDL`/`STL` instructions in the SASS.
    Sass,
}

impl SpillSource {
    pub const ALL: [SpillSource; 3] = [
        SpillSource::PtxasReport,
        SpillSource::LocalMemory,
        SpillSource::Sass,
    ];

    pub fn id(&self) -> &'static str {
        match self {
            SpillSource::PtxasReport => "ptxas_report",
            SpillSource::LocalMemory => "local_memory",
            SpillSource::Sass => "sass",
        }
    }
}

/// One generated test case: what it checks and which variants it needs measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub name: String,
    pub check: Check,
    pub needs: Vec<Variant>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// It ran, its output is valid, it is within its baseline, it does not spill.
    Variant(Variant),
    /// One [`Invariant::Peak`] at one chain length.
    Peak {
        chain: u32,
        accumulators: u32,
        tolerance: f64,
    },
    GainGrows {
        accumulators: u32,
        over: u32,
        min_increase: f64,
    },
    /// No variant spills, by one source.
    NoSpills(SpillSource),
    /// The measured loop has N FFMAs (times the unroll factor) over E independent chains;
    /// for E = 1 each FFMA accumulates in place (the strict chain).
    SassShape(Variant),
    /// The SASS digest is the blessed one.
    SassUnchanged(Variant),
    /// The results come from the GPU, driver and NVRTC the baselines were measured with.
    BaselineEnvironment,
    /// Progress does not exceed the physical ceiling of the launch.
    Ceiling(Variant),
    /// Each launch took budget / SM clock, within the tolerance.
    Duration(Variant),
    /// The K a policy picks at this chain reaches (1 - tolerance) of the best progress.
    Policy {
        chain: u32,
        accumulators: u32,
        tolerance: f64,
    },
}

impl Profile {
    /// Every case this profile generates, in a stable order.
    pub fn cases(&self) -> Vec<Case> {
        let all = self.probe.variants();
        let main = self.probe.main_variants();
        let mut cases: Vec<Case> = all
            .iter()
            .map(|&v| Case {
                name: format!("probe::{v}"),
                check: Check::Variant(v),
                needs: vec![v],
            })
            .collect();
        let per_variant = |prefix: &str, suffix: &str, check: fn(Variant) -> Check| -> Vec<Case> {
            all.iter()
                .map(|&v| Case {
                    name: format!("{prefix}::{v}::{suffix}"),
                    check: check(v),
                    needs: vec![v],
                })
                .collect()
        };
        cases.extend(per_variant("sass", "shape", Check::SassShape));
        if self.baselines.is_some() {
            cases.push(Case {
                name: "baselines::environment".into(),
                check: Check::BaselineEnvironment,
                needs: Vec::new(),
            });
            cases.extend(per_variant("sass", "unchanged", Check::SassUnchanged));
        }
        if self.validity.is_some() {
            cases.extend(per_variant("validity", "ceiling", Check::Ceiling));
            cases.extend(per_variant("validity", "duration", Check::Duration));
        }
        for inv in &self.invariants {
            let id = inv.id();
            match *inv {
                Invariant::Peak {
                    accumulators,
                    tolerance,
                } => cases.extend(self.probe.chains.iter().map(|&chain| Case {
                    name: format!("invariant::{id}::chain{chain}"),
                    check: Check::Peak {
                        chain,
                        accumulators,
                        tolerance,
                    },
                    needs: main.iter().copied().filter(|v| v.chain == chain).collect(),
                })),
                Invariant::GainGrows {
                    accumulators,
                    over,
                    min_increase,
                } => cases.push(Case {
                    name: format!("invariant::{id}"),
                    check: Check::GainGrows {
                        accumulators,
                        over,
                        min_increase,
                    },
                    needs: main
                        .iter()
                        .copied()
                        .filter(|v| v.accumulators == accumulators || v.accumulators == over)
                        .collect(),
                }),
                Invariant::NoSpills => cases.extend(SpillSource::ALL.iter().map(|src| Case {
                    name: format!("invariant::{id}::{}", src.id()),
                    check: Check::NoSpills(*src),
                    needs: all.clone(),
                })),
            }
        }
        if let Some(h) = &self.heuristic {
            for &chain in &self.probe.chains {
                cases.push(Case {
                    name: format!("policy::{}::chain{chain}", h.policy.name),
                    check: Check::Policy {
                        chain,
                        accumulators: h.policy.choose_for_probe(chain),
                        tolerance: h.tolerance,
                    },
                    needs: main.iter().copied().filter(|v| v.chain == chain).collect(),
                });
            }
        }
        cases
    }
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RecordedFile {
    /// Where the figures come from.
    source: String,
    /// Spill bytes observed in every variant, when the source states it.
    spill_bytes: Option<u32>,
    /// chain -> accumulators -> average progress.
    progress: Option<Spanned<BTreeMap<u32, BTreeMap<u32, f64>>>>,
    /// A results file, relative to the profile's folder.
    results: Option<Spanned<String>>,
}

/// The generated baselines file (`expectations/baselines/<profile>.yaml`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselinesFile {
    profile: Spanned<String>,
    measured: BaselineOrigin,
    progress: HashMap<Spanned<String>, Spanned<f64>>,
    #[serde(default)]
    sass: HashMap<Spanned<String>, SassBaseline>,
}

/// Where a baseline was measured; kept in the generated file for reviewers.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct BaselineOrigin {
    pub results: String,
    pub gpu_name: String,
    pub driver_version: String,
    pub nvrtc_version: String,
    pub date: String,
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
    /// Reads and checks one profile file, and the generated files it names.
    pub fn load(file: &Path) -> Result<Profile> {
        let text = read_text(file, "profile")?;
        Self::parse(&text, file)
    }

    /// Checks a profile given as text; `file` names it in errors and anchors relative paths.
    pub fn parse(text: &str, file: &Path) -> Result<Profile> {
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
                load_baselines(&path, &profile, tolerance)?
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
        let case_names: Vec<String> = profile.cases().into_iter().map(|c| c.name).collect();
        for d in &raw.known_deviations {
            if !case_names.contains(&d.case.value) {
                return Err(at(file, &d.case, format!("known deviation names case {:?}, which this profile does not generate (cases look like {:?})", d.case.value, case_names.iter().find(|n| n.starts_with("invariant::")).unwrap_or(&case_names[0]))));
            }
            if d.reason.value.trim().is_empty() {
                return Err(at(
                    file,
                    &d.reason,
                    "known deviation without a reason: give the measured numbers",
                ));
            }
            if profile
                .known_deviations
                .insert(d.case.value.clone(), d.reason.value.clone())
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
        if let Some(r) = &raw.recorded {
            profile.recorded = Some(recorded(file, dir, r, &profile)?);
        }
        Ok(profile)
    }
}

fn load_baselines(path: &Path, profile: &Profile, tolerance: f64) -> Result<Baselines> {
    let raw: BaselinesFile = parse_yaml(&read_text(path, "baselines")?, path)?;
    if raw.profile.value != profile.name {
        return Err(at(
            path,
            &raw.profile,
            format!(
                "baselines are for profile {:?}, but {} is profile {:?}",
                raw.profile.value,
                profile.file.display(),
                profile.name
            ),
        ));
    }
    let variants = profile.probe.variants();
    let known = |k: &Spanned<String>, what: &str| -> Result<()> {
        if variants.iter().any(|x| x.name() == k.value) {
            Ok(())
        } else {
            Err(at(
                path,
                k,
                format!(
                    "{what} for {:?}, which is not a variant of profile {:?}",
                    k.value, profile.name
                ),
            ))
        }
    };
    let mut progress = BTreeMap::new();
    for (k, v) in &raw.progress {
        known(k, "baseline")?;
        if !(v.value.is_finite() && v.value > 0.0) {
            return Err(at(
                path,
                v,
                format!(
                    "baseline progress {} for {}: expected a positive number",
                    v.value, k.value
                ),
            ));
        }
        progress.insert(k.value.clone(), v.value);
    }
    let mut sass = BTreeMap::new();
    for (k, v) in &raw.sass {
        known(k, "SASS baseline")?;
        sass.insert(k.value.clone(), v.clone());
    }
    Ok(Baselines {
        tolerance,
        file: path.to_path_buf(),
        progress,
        sass,
        wider: BTreeMap::new(),
        origin: Some(raw.measured),
    })
}

fn recorded(file: &Path, dir: &Path, r: &RecordedFile, profile: &Profile) -> Result<RunResults> {
    // A recorded table holds the documented matrix (sink mode A) only.
    let variants = profile.probe.main_variants();
    match (&r.progress, &r.results) {
        (Some(table), None) => {
            let resources = r.spill_bytes.map(|b| Resources {
                spill_store_bytes: b,
                spill_load_bytes: b,
                ..Default::default()
            });
            let mut out = Vec::new();
            for v in &variants {
                let Some(p) = table
                    .value
                    .get(&v.chain)
                    .and_then(|row| row.get(&v.accumulators))
                else {
                    return Err(at(
                        file,
                        table,
                        format!(
                            "recorded.progress has no figure for chain {} acc {} ({v})",
                            v.chain, v.accumulators
                        ),
                    ));
                };
                out.push(VariantResult::recorded(*v, *p, resources));
            }
            let extra = table
                .value
                .iter()
                .flat_map(|(n, row)| row.keys().map(move |k| Variant::new(*n, *k)))
                .find(|v| !variants.contains(v));
            if let Some(v) = extra {
                return Err(at(file, table, format!("recorded.progress has chain {} acc {}, which is outside probe.chains x probe.accumulators", v.chain, v.accumulators)));
            }
            Ok(RunResults {
                schema: crate::results::SCHEMA,
                mode: Default::default(),
                profile: profile.name.clone(),
                source: r.source.clone(),
                environment: None,
                variants: out,
                sass_unavailable: None,
                timings: None,
            })
        }
        (None, Some(path)) => {
            let results_file = dir.join(&path.value);
            if !results_file.is_file() {
                return Err(at(
                    file,
                    path,
                    format!(
                        "recorded results file {} does not exist",
                        results_file.display()
                    ),
                ));
            }
            RunResults::load(&results_file)
        }
        _ => Err(Error::in_file(
            file,
            "recorded: expected exactly one of `progress` (a table) or `results` (a results file)",
        )),
    }
}

/// Every `*.yaml` profile directly in `dir`, sorted by file name; each file that fails to
/// load is returned as an error beside the ones that loaded.
pub fn load_dir(dir: &Path) -> (Vec<Profile>, Vec<Error>) {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect(),
        Err(e) => return (Vec::new(), vec![Error::io(dir, "list profiles", e)]),
    };
    files.sort();
    let (mut ok, mut bad) = (Vec::new(), Vec::new());
    for f in files {
        match Profile::load(&f) {
            Ok(p) => {
                if let Some(first) = ok.iter().find(|q: &&Profile| q.name == p.name) {
                    bad.push(Error::in_file(
                        &f,
                        format!(
                            "profile name {:?} is already used by {}",
                            p.name,
                            first.file.display()
                        ),
                    ));
                } else {
                    ok.push(p);
                }
            }
            Err(e) => bad.push(e),
        }
    }
    (ok, bad)
}

/// What identifies a GPU for profile selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuIdentity {
    pub name: String,
    pub compute_capability: String,
}

/// The profile chosen for a run, and a sentence saying why.
#[derive(Debug, Clone)]
pub struct Selection {
    pub profile: Profile,
    pub why: String,
}

/// Chooses the profile: the one `forced` names (a profile name or a YAML path), else the
/// first whose GPU names match, else the first whose compute capability matches, else the
/// documented one.
pub fn select(
    profiles: &[Profile],
    gpu: Option<&GpuIdentity>,
    forced: Option<&str>,
) -> Result<Selection> {
    if let Some(f) = forced.filter(|f| !f.is_empty()) {
        if let Some(p) = profiles.iter().find(|p| p.name == f) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!("profile {:?} forced by {PROFILE_ENV}", p.name),
            });
        }
        let path = Path::new(f);
        if path.is_file() {
            let p = Profile::load(path)?;
            return Ok(Selection {
                why: format!("profile {:?} forced by {PROFILE_ENV}={f}", p.name),
                profile: p,
            });
        }
        let names: Vec<&str> = profiles.iter().map(|p| p.name.as_str()).collect();
        return Err(Error::msg(format!(
            "{PROFILE_ENV}={f:?} names no profile (known: {names:?}) and no file"
        )));
    }
    if let Some(g) = gpu {
        if let Some(p) = profiles.iter().find(|p| {
            p.matches
                .gpu_names
                .iter()
                .any(|n| n.eq_ignore_ascii_case(&g.name))
        }) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!("profile {:?} matches GPU name {:?}", p.name, g.name),
            });
        }
        if let Some(p) = profiles.iter().find(|p| {
            p.matches
                .compute_capabilities
                .contains(&g.compute_capability)
        }) {
            return Ok(Selection {
                profile: p.clone(),
                why: format!(
                    "profile {:?} matches compute capability {} of {:?}",
                    p.name, g.compute_capability, g.name
                ),
            });
        }
    }
    let doc = profiles
        .iter()
        .find(|p| p.name == DOCUMENTED)
        .ok_or_else(|| {
            Error::msg(format!(
                "no profile matches and the fallback profile {DOCUMENTED:?} is missing"
            ))
        })?;
    let why = match gpu {
        Some(g) => format!("no profile matches GPU {:?} (compute capability {}): the documented profile applies, and its invariants are the study's, not this GPU's", g.name, g.compute_capability),
        None => "no GPU: the documented profile names the cases".to_string(),
    };
    Ok(Selection {
        profile: doc.clone(),
        why,
    })
}
