//! Stage 6 of the pipeline: verdicts. Plain results in, one outcome per case out.
//!
//! Architecture invariant: nothing here touches a GPU; every verdict can be replayed on
//! recorded results on any machine.

pub mod cases;
pub mod compile_only;
pub mod suspect;

use crate::expectations::profile::Profile;
use crate::model::results::{short_digest, RunResults, VariantResult};
use crate::model::settings::RunSettings;
use crate::model::variant::Variant;
use cases::{Case, Check, SpillSource};

/// What a case concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Holds; the text says what was measured.
    Pass(String),
    /// Does not hold; the text gives measured vs expected with the tolerance.
    Fail(String),
    /// Does not hold, and the profile records that as a known deviation of this GPU.
    KnownDeviation { reason: String, detail: String },
    /// Cannot be judged from these results (no SASS, no launch timings); the reason says why.
    Skipped(String),
    /// Not judged: the measurement was disturbed (another process's work on the GPU,
    /// slowed clocks) and stayed so after the retries. An error of the run, not a verdict
    /// about the code: the text starts with the cause (`GPU busy: PID 1234 (name) ...`).
    Error(String),
}

impl Outcome {
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail(_))
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Outcome::Error(_))
    }
}

/// Whether a case judges timing (progress, durations): what a disturbed measurement
/// cannot be judged by. Code shape, spills and the environment can.
fn judges_timing(check: &Check) -> bool {
    matches!(
        check,
        Check::Variant(_)
            | Check::Peak { .. }
            | Check::GainGrows { .. }
            | Check::Ceiling(_)
            | Check::Duration(_)
            | Check::Policy { .. }
    )
}

/// The cause, when a variant a timing case needs was measured while the GPU was not ours.
fn disturbed(case: &Case, results: &RunResults) -> Option<String> {
    if !judges_timing(&case.check) {
        return None;
    }
    let c = results.contention.as_ref()?;
    let hit: Vec<&String> = case
        .needs
        .iter()
        .filter_map(|v| c.contaminated.get(&v.name()))
        .collect();
    let first = hit.first()?;
    Some(if hit.len() > 1 {
        format!(
            "{first} ({} of the {} variants it needs)",
            hit.len(),
            case.needs.len()
        )
    } else {
        first.to_string()
    })
}

/// What kind of failure a failing case is, in one word that reports group failures by
/// (JUnit's `type`): a missing or unusable measurement is not a regression, and a known
/// deviation that went away is neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// A variant the case needs is not in the results, or a report it reads is missing.
    NoResult,
    /// The measurement itself is not valid: a warp made no progress, the output is wrong,
    /// progress above the physical ceiling, launches off their budget.
    InvalidMeasurement,
    /// Progress moved beyond the tolerance of the blessed baseline.
    Regression,
    /// A study invariant (the peak, the gain's growth) does not hold.
    Invariant,
    /// The policy's pick is clearly below the best K, or not measured.
    Policy,
    /// A variant spills to local memory.
    Spill,
    /// The measured loop does not have the shape of the probe (FFMAs, chains).
    SassShape,
    /// The SASS differs from the blessed digest.
    SassChanged,
    /// The profile has baselines, but none for what this case checks.
    NoBaseline,
    /// Results and baselines come from another GPU, driver or NVRTC.
    EnvironmentChanged,
    /// A known deviation of the profile holds again.
    KnownDeviationGone,
}

impl FailureKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::NoResult => "no-result",
            FailureKind::InvalidMeasurement => "invalid-measurement",
            FailureKind::Regression => "regression",
            FailureKind::Invariant => "invariant",
            FailureKind::Policy => "policy",
            FailureKind::Spill => "spill",
            FailureKind::SassShape => "sass-shape",
            FailureKind::SassChanged => "sass-changed",
            FailureKind::NoBaseline => "no-baseline",
            FailureKind::EnvironmentChanged => "environment-changed",
            FailureKind::KnownDeviationGone => "known-deviation-gone",
        }
    }
}

/// A case's outcome and, when it fails, what kind of failure it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub outcome: Outcome,
    /// `Some` exactly when the outcome is [`Outcome::Fail`].
    pub failure: Option<FailureKind>,
}

/// Evaluates one case, then applies the profile's known deviations strictly: a known
/// deviation that holds again fails, so that a change in either direction is seen.
/// Missing or unusable results fail whatever the profile expects: a deviation excuses a
/// measured difference, never the absence of a measurement. A timing case whose variants
/// were measured while the GPU was not ours is an error, not a verdict. A failure that
/// judged a measurement says its first suspect (see [`suspect`]).
pub fn evaluate(case: &Case, profile: &Profile, results: &RunResults) -> Outcome {
    judge(case, profile, results).outcome
}

/// [`evaluate`], with the kind of failure when the case fails.
pub fn judge(case: &Case, profile: &Profile, results: &RunResults) -> Verdict {
    if let Some(cause) = disturbed(case, results) {
        return Verdict {
            outcome: Outcome::Error(cause),
            failure: None,
        };
    }
    let found = match usable(case, results) {
        Ok(found) => found,
        Err((kind, e)) => {
            return Verdict {
                outcome: Outcome::Fail(e),
                failure: Some(kind),
            }
        }
    };
    let raw = evaluate_raw(case, profile, results, &found);
    let (outcome, failure) = apply_known_deviations(&case.name, profile, raw, || {
        failure_kind(&case.check, profile, &found)
    });
    let outcome = match outcome {
        Outcome::Fail(m) if case.check != Check::BaselineEnvironment => {
            match suspect::first_suspect(&case.needs, profile, results) {
                Some(line) => Outcome::Fail(format!("{m}\n{line}")),
                None => Outcome::Fail(m),
            }
        }
        other => other,
    };
    Verdict { outcome, failure }
}

/// The kind of a failure of `check` on the results `found` for it.
fn failure_kind(check: &Check, profile: &Profile, found: &[&VariantResult]) -> FailureKind {
    match check {
        Check::Variant(v) => {
            let r = found[0];
            if r.samples.iter().flatten().any(|&p| p == 0) || !r.output_problems.is_empty() {
                FailureKind::InvalidMeasurement
            } else if r.resources.is_none() {
                FailureKind::NoResult
            } else if spill_problem(r).is_some() {
                FailureKind::Spill
            } else if profile
                .baselines
                .as_ref()
                .is_some_and(|b| !b.progress.contains_key(&v.name()))
            {
                FailureKind::NoBaseline
            } else {
                FailureKind::Regression
            }
        }
        Check::Peak { .. } | Check::GainGrows { .. } => FailureKind::Invariant,
        Check::NoSpills(src) => {
            if found
                .iter()
                .any(|r| matches!(spill_by(*src, r), Ok(Some(_))))
            {
                FailureKind::Spill
            } else {
                FailureKind::NoResult
            }
        }
        Check::SassShape(_) => FailureKind::SassShape,
        Check::SassUnchanged(v) => {
            if profile
                .baselines
                .as_ref()
                .is_some_and(|b| b.sass.contains_key(&v.name()))
            {
                FailureKind::SassChanged
            } else {
                FailureKind::NoBaseline
            }
        }
        Check::BaselineEnvironment => match profile.baselines.as_ref() {
            Some(b) if b.origin.is_none() => FailureKind::NoBaseline,
            _ => FailureKind::EnvironmentChanged,
        },
        Check::Ceiling(_) | Check::Duration(_) => FailureKind::InvalidMeasurement,
        Check::Policy { .. } => {
            if found.is_empty() {
                FailureKind::NoResult
            } else {
                FailureKind::Policy
            }
        }
    }
}

/// Applies the profile's known deviations to case `name`'s raw outcome, strictly: a
/// deviation that fails is excused, one that holds again fails. With the kind of the
/// failure, where it fails (`kind_of_failure` for a failure of the check itself).
fn apply_known_deviations(
    name: &str,
    profile: &Profile,
    raw: Outcome,
    kind_of_failure: impl FnOnce() -> FailureKind,
) -> (Outcome, Option<FailureKind>) {
    match (profile.known_deviations.get(name).map(|d| &d.reason), raw) {
        (None, Outcome::Fail(text)) => (Outcome::Fail(text), Some(kind_of_failure())),
        (None, raw) => (raw, None),
        (Some(reason), Outcome::Fail(detail)) => (
            Outcome::KnownDeviation { reason: reason.clone(), detail },
            None,
        ),
        (Some(reason), Outcome::Pass(detail)) => (
            Outcome::Fail(format!(
                "known deviation no longer present: {name} now holds ({detail}); the profile {} says it should not: {reason}. \
                 If this is the new normal, remove it from known_deviations.",
                profile.file.display()
            )),
            Some(FailureKind::KnownDeviationGone),
        ),
        (Some(_), other) => (other, None),
    }
}

/// [`apply_known_deviations`], the outcome alone (the compile-only gate's cases).
pub(crate) fn with_known_deviations(name: &str, profile: &Profile, raw: Outcome) -> Outcome {
    apply_known_deviations(name, profile, raw, || FailureKind::Invariant).0
}

/// Refuses to judge `results` by `profile` when they were measured with other launch
/// settings than the profile asks for: a verdict never mixes the two.
pub fn comparable(profile: &Profile, results: &RunResults) -> Result<(), String> {
    let Some(measured) = &results.settings else {
        return Ok(());
    };
    let diff = measured.differences(&profile.probe.run_settings());
    if diff.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the results were measured with other settings than profile {:?} ({}) asks for: {}",
            profile.name,
            profile.file.display(),
            diff.join(", ")
        ))
    }
}

/// The results a case needs, each present with a positive, finite progress.
fn usable<'a>(
    case: &Case,
    results: &'a RunResults,
) -> Result<Vec<&'a VariantResult>, (FailureKind, String)> {
    let mut missing = Vec::new();
    let mut unusable = Vec::new();
    let mut found = Vec::new();
    for v in &case.needs {
        match results.get(*v) {
            None => missing.push(v.name()),
            Some(r) if !(r.mean_progress.is_finite() && r.mean_progress > 0.0) => {
                unusable.push(format!(
                    "{v} has progress {}: the probe loop did not run",
                    r.mean_progress
                ))
            }
            Some(r) => found.push(r),
        }
    }
    if !missing.is_empty() {
        return Err((
            FailureKind::NoResult,
            format!(
                "no result for {} in the results (source: {})",
                missing.join(", "),
                results.source
            ),
        ));
    }
    if !unusable.is_empty() {
        return Err((FailureKind::InvalidMeasurement, unusable.join("; ")));
    }
    Ok(found)
}

fn evaluate_raw(
    case: &Case,
    profile: &Profile,
    results: &RunResults,
    found: &[&VariantResult],
) -> Outcome {
    match case.check {
        Check::Variant(v) => variant(v, found[0], profile),
        Check::Peak {
            chain,
            accumulators,
            tolerance,
        } => peak(chain, accumulators, tolerance, found),
        Check::GainGrows {
            accumulators,
            over,
            min_increase,
        } => gain_grows(
            &profile.probe.chains,
            accumulators,
            over,
            min_increase,
            results,
        ),
        Check::NoSpills(src) => no_spills(src, found, results),
        Check::SassShape(v) => sass_shape(v, found[0], results),
        Check::SassUnchanged(v) => sass_unchanged(v, found[0], profile, results),
        Check::BaselineEnvironment => baseline_environment(profile, results),
        Check::Ceiling(v) => ceiling(v, found[0], profile, results),
        Check::Duration(_) => duration(found[0], profile, results),
        Check::Policy {
            chain,
            accumulators,
            tolerance,
        } => policy(chain, accumulators, tolerance, profile, found),
    }
}

fn pct(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}

fn variant(v: Variant, r: &VariantResult, profile: &Profile) -> Outcome {
    let mut problems = Vec::new();
    if let Some(z) = r.samples.iter().flatten().position(|&p| p == 0) {
        let warps = r.samples.first().map_or(1, |w| w.len().max(1));
        problems.push(format!(
            "warp {} of repeat {} made no progress",
            z % warps,
            z / warps
        ));
    }
    problems.extend(
        r.output_problems
            .iter()
            .map(|p| format!("invalid output: {p}")),
    );
    problems.extend(spill_problem(r));
    let mut detail = format!("progress {:.1}", r.mean_progress);
    if let Some(b) = &profile.baselines {
        match b.progress.get(&v.name()) {
            None => problems.push(format!(
                "no baseline for {v} in {}{} (bless one with `cargo xtask bless --profile {} --from RESULTS`)",
                b.file.display(),
                if b.file.exists() { "" } else { ", which does not exist" },
                profile.name
            )),
            Some(&base) => {
                let now = r.baseline_progress();
                let rel = (now - base) / base;
                let wider = b.wider.get(&v.name());
                let tolerance = wider.map_or(b.tolerance, |w| w.tolerance);
                let line = format!(
                    "{} progress {now:.1} vs baseline {base:.1}: {} (tolerance ±{:.2}%{})",
                    if r.summary.is_some() { "median" } else { "mean" },
                    pct(rel),
                    tolerance * 100.0,
                    wider.map_or(String::new(), |w| format!(", wider for this variant: {}", w.reason))
                );
                if rel.abs() > tolerance {
                    let dir = if rel > 0.0 { "faster" } else { "slower" };
                    problems.push(format!(
                        "{line}: {dir} than its baseline beyond tolerance; if the change is expected, re-bless {}",
                        b.file.display()
                    ));
                } else {
                    detail = line;
                }
            }
        }
    }
    if problems.is_empty() {
        Outcome::Pass(detail)
    } else {
        Outcome::Fail(format!("{v}: {}", problems.join("; ")))
    }
}

fn peak(chain: u32, k: u32, tolerance: f64, found: &[&VariantResult]) -> Outcome {
    let Some(target) = found.iter().find(|r| r.accumulators == k) else {
        return Outcome::Fail(format!("no acc{k} result at chain {chain}"));
    };
    let best = found
        .iter()
        .filter(|r| r.accumulators != k)
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress));
    let Some(best) = best else {
        return Outcome::Pass(format!("acc{k} is the only variant at chain {chain}"));
    };
    let limit = target.mean_progress * (1.0 + tolerance);
    let over = best.mean_progress / target.mean_progress - 1.0;
    let text = format!(
        "chain {chain}: acc{k} {:.1}, best other acc{} {:.1} ({} vs acc{k}, tolerance {})",
        target.mean_progress,
        best.accumulators,
        best.mean_progress,
        pct(over),
        pct(tolerance)
    );
    if best.mean_progress > limit || !target.mean_progress.is_finite() {
        Outcome::Fail(format!("acc{k} is not the peak: {text}"))
    } else {
        Outcome::Pass(text)
    }
}

fn gain_grows(
    chains: &[u32],
    k: u32,
    over: u32,
    min_increase: f64,
    results: &RunResults,
) -> Outcome {
    let mut sorted = chains.to_vec();
    sorted.sort_unstable();
    let mut gains = Vec::new();
    for &n in &sorted {
        let (Some(a), Some(b)) = (
            results.get(Variant::new(n, k)),
            results.get(Variant::new(n, over)),
        ) else {
            return Outcome::Fail(format!("chain {n}: acc{k} or acc{over} missing"));
        };
        gains.push((n, a.mean_progress / b.mean_progress));
    }
    let listing = gains
        .iter()
        .map(|(n, g)| format!("N={n}: {g:.4}"))
        .collect::<Vec<_>>()
        .join(", ");
    let text =
        format!("acc{k}/acc{over} {listing} (each step must rise by more than {min_increase})");
    let bad: Vec<String> = gains
        .windows(2)
        // NaN gains count as not rising.
        .filter(|w| {
            (w[1].1 - w[0].1).partial_cmp(&min_increase) != Some(std::cmp::Ordering::Greater)
        })
        .map(|w| {
            format!(
                "N={} -> N={}: {:.4} -> {:.4}",
                w[0].0, w[1].0, w[0].1, w[1].1
            )
        })
        .collect();
    if bad.is_empty() {
        Outcome::Pass(text)
    } else {
        Outcome::Fail(format!(
            "acc{k}/acc{over} gain does not grow with chain length at {}: {text}",
            bad.join(", ")
        ))
    }
}

/// Why a variant counts as spilling, or as unknown, by the ptxas report and the local
/// memory size; `None` when it is clean.
fn spill_problem(r: &VariantResult) -> Option<String> {
    if r.resources.is_none() {
        return Some("no register/spill report".into());
    }
    let mut found: Vec<String> = SpillSource::ALL
        .iter()
        .filter(|s| **s != SpillSource::Sass)
        .filter_map(|s| spill_by(*s, r).ok().flatten())
        .collect();
    found.extend(spill_by(SpillSource::Sass, r).ok().flatten());
    (!found.is_empty()).then(|| format!("spills: {}", found.join("; ")))
}

/// A spill by one source: `Ok(Some(what))` spills, `Ok(None)` clean, `Err(())` this source
/// is absent from the results.
fn spill_by(src: SpillSource, r: &VariantResult) -> Result<Option<String>, ()> {
    match src {
        SpillSource::PtxasReport => {
            let res = r.resources.ok_or(())?;
            let n = res.spill_store_bytes + res.spill_load_bytes;
            Ok((n > 0).then(|| {
                format!(
                    "ptxas reports {} bytes spill stores, {} bytes spill loads",
                    res.spill_store_bytes, res.spill_load_bytes
                )
            }))
        }
        SpillSource::LocalMemory => {
            let res = r.resources.ok_or(())?;
            Ok((res.local_bytes > 0).then(|| format!("{} bytes local memory", res.local_bytes)))
        }
        SpillSource::Sass => {
            let s = r.sass.as_ref().ok_or(())?;
            Ok((!s.local_memory_instructions.is_empty()).then(|| {
                format!(
                    "local memory instructions in the SASS: {}",
                    s.local_memory_instructions.join(", ")
                )
            }))
        }
    }
}

/// The outcome of a SASS case on results without SASS: a failure when the disassembler
/// ran but its output could not be read (the compiler's output changed shape), else
/// skipped with the reason.
fn without_sass(results: &RunResults) -> Outcome {
    if let Some(why) = &results.sass_unreadable {
        return Outcome::Fail(format!("the SASS of this run could not be read: {why}"));
    }
    Outcome::Skipped(
        results
            .sass_unavailable
            .clone()
            .unwrap_or_else(|| format!("the results carry no SASS (source: {})", results.source)),
    )
}

fn no_spills(src: SpillSource, found: &[&VariantResult], results: &RunResults) -> Outcome {
    let mut bad = Vec::new();
    let mut absent = Vec::new();
    for r in found {
        match spill_by(src, r) {
            Ok(Some(p)) => bad.push(format!("{}: {p}", r.name)),
            Ok(None) => {}
            Err(()) => absent.push(r.name.clone()),
        }
    }
    if !bad.is_empty() {
        return Outcome::Fail(format!(
            "spills by the {} (expected none): {}",
            src.id(),
            bad.join("; ")
        ));
    }
    if absent.len() == found.len() && src == SpillSource::Sass {
        return without_sass(results);
    }
    if !absent.is_empty() {
        return Outcome::Fail(format!("no {} for {}", src.id(), absent.join(", ")));
    }
    Outcome::Pass(format!(
        "no spills by the {} in {} variants",
        src.id(),
        found.len()
    ))
}

fn sass_shape(v: Variant, r: &VariantResult, results: &RunResults) -> Outcome {
    let Some(s) = &r.sass else {
        return without_sass(results);
    };
    shape(v, s)
}

/// The loop of `v`'s SASS has N FFMAs (or a multiple) over E round-robin partials, and
/// acc1 accumulates in place.
pub(crate) fn shape(v: Variant, s: &crate::model::results::SassSummary) -> Outcome {
    let (n, e) = (v.chain, v.effective());
    let mut problems = Vec::new();
    let unroll = s.loop_ffma / n;
    if s.loop_ffma == 0 || !s.loop_ffma.is_multiple_of(n) {
        problems.push(format!(
            "the loop has {} FFMAs, expected N = {n} per iteration (or a multiple, if unrolled)",
            s.loop_ffma
        ));
    }
    if s.loop_partials.len() as u32 != e {
        problems.push(format!(
            "the loop has {} independent FFMA chains {:?}, expected E = {e}",
            s.loop_partials.len(),
            s.loop_partials
        ));
    } else if s.loop_partials.iter().max().unwrap_or(&0)
        - s.loop_partials.iter().min().unwrap_or(&0)
        > 1
    {
        problems.push(format!(
            "the chains {:?} are not round-robin (lengths differ by more than one)",
            s.loop_partials
        ));
    }
    if e == 1 && !s.ffma_accumulates_in_place {
        problems.push(
            "acc1 is not a strict chain: some FFMA's destination is not its accumulator source"
                .into(),
        );
    }
    let detail = format!(
        "{} FFMAs per loop ({}), {} chains {:?}, {} distinct destination registers {:?}{}",
        s.loop_ffma,
        if unroll == 1 {
            "not unrolled".to_string()
        } else {
            format!("unrolled x{unroll}")
        },
        s.loop_partials.len(),
        s.loop_partials,
        s.loop_ffma_destinations.len(),
        s.loop_ffma_destinations,
        if e == 1 && s.ffma_accumulates_in_place {
            ", strict single-register chain"
        } else {
            ""
        }
    );
    if problems.is_empty() {
        Outcome::Pass(detail)
    } else {
        Outcome::Fail(format!(
            "{v}: {}\n({detail})\nloop body:\n  {}",
            problems.join("; "),
            s.loop_body.join("\n  ")
        ))
    }
}

fn sass_unchanged(
    v: Variant,
    r: &VariantResult,
    profile: &Profile,
    results: &RunResults,
) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(s) = &r.sass else {
        return without_sass(results);
    };
    let Some(base) = b.sass.get(&v.name()) else {
        return Outcome::Fail(format!(
            "no SASS baseline for {v} in {} (bless one with `cargo xtask bless --profile {} --from RESULTS`)",
            b.file.display(),
            profile.name
        ));
    };
    if base.digest == s.digest {
        return Outcome::Pass(format!("SASS digest {}", s.short_digest()));
    }
    let old = base.loop_body.join("\n") + "\n";
    let new = s.loop_body.join("\n") + "\n";
    let diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .header("blessed loop", "measured loop")
        .to_string();
    Outcome::Fail(format!(
        "{v}: the SASS changed (digest {} -> {}); {}\n{}If the change is expected, re-bless {}",
        short_digest(&base.digest),
        s.short_digest(),
        if old == new {
            "the loop body is the same, the change is outside it"
        } else {
            "the loop body changed"
        },
        diff,
        b.file.display()
    ))
}

/// The launch settings the results were measured with, or why a verdict that needs them
/// is skipped.
fn settings(results: &RunResults) -> Result<RunSettings, Outcome> {
    results.settings.ok_or_else(|| {
        Outcome::Skipped(format!(
            "the results carry no launch settings (schema {} file, source: {}): re-measure to judge this",
            results.schema, results.source
        ))
    })
}

fn ceiling(v: Variant, r: &VariantResult, profile: &Profile, results: &RunResults) -> Outcome {
    let Some(val) = profile.validity else {
        return Outcome::Skipped("the profile has no validity settings".into());
    };
    let p = match settings(results) {
        Ok(p) => p,
        Err(skip) => return skip,
    };
    let warps_per_scheduler = p
        .block_threads
        .div_ceil(32)
        .div_ceil(val.schedulers_per_sm)
        .max(1);
    let (instructions, source) = match &r.sass {
        Some(s) => (s.loop_body.len() as u32, "SASS loop body"),
        None => (v.chain, "N FFMAs, a lower bound without SASS"),
    };
    let budget = p.budget_cycles as f64;
    let issue = budget / (instructions as f64 * warps_per_scheduler as f64);
    let latency = budget * v.effective() as f64 / (v.chain as f64 * val.ffma_latency_cycles as f64);
    let limit = issue.min(latency);
    let best = r.summary.map_or(r.mean_progress, |s| s.max as f64);
    let text = format!(
        "progress {best:.1} vs ceiling {limit:.1} (issue-bound {issue:.1}: {instructions} instructions per iteration from the {source}, \
         {warps_per_scheduler} warps per scheduler; latency-bound {latency:.1}: {} partials, {}-cycle FFMA latency)",
        v.effective(),
        val.ffma_latency_cycles
    );
    if best > limit {
        Outcome::Fail(format!("{v}: {text}: progress above the physical ceiling means the chain was optimised away or the clock misread"))
    } else {
        Outcome::Pass(text)
    }
}

fn duration(r: &VariantResult, profile: &Profile, results: &RunResults) -> Outcome {
    let Some(val) = profile.validity else {
        return Outcome::Skipped("the profile has no validity settings".into());
    };
    if r.launch_ms.is_empty() {
        return Outcome::Skipped(format!(
            "no launch durations in the results (source: {})",
            results.source
        ));
    }
    let Some(mhz) = results
        .environment
        .as_ref()
        .and_then(|e| e.sm_clock_rated_mhz)
    else {
        return Outcome::Skipped("no SM clock in the results' environment".into());
    };
    let p = match settings(results) {
        Ok(p) => p,
        Err(skip) => return skip,
    };
    let expected = p.budget_cycles as f64 / (mhz * 1e3);
    // The median launch is judged, the worst reported: progress counts SM cycles, so one
    // launch that took longer in wall time (the events also time the GPU's launch latency;
    // on the H200 one launch in 500 of a 50-run serial soak took +8.8%, 2026-11-30) does
    // not touch it, while a wrong clock or budget moves every launch.
    let mut sorted = r.launch_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    let worst = sorted
        .iter()
        .copied()
        .max_by(|a, b| {
            (a / expected - 1.0)
                .abs()
                .total_cmp(&(b / expected - 1.0).abs())
        })
        .unwrap_or(expected);
    let rel = median / expected - 1.0;
    let text = format!(
        "{n} launches {}, median {median:.4} ms vs budget / SM clock = {expected:.4} ms at {mhz:.0} MHz: {} (tolerance ±{:.1}%; worst launch {worst:.4} ms, {})",
        r.launch_timer.describe(),
        pct(rel),
        val.duration_tolerance * 100.0,
        pct(worst / expected - 1.0)
    );
    if rel.abs() > val.duration_tolerance || sorted.iter().any(|x| !x.is_finite()) {
        Outcome::Fail(format!("{}: {text}", r.name))
    } else {
        Outcome::Pass(text)
    }
}

fn policy(
    chain: u32,
    k: u32,
    tolerance: f64,
    profile: &Profile,
    found: &[&VariantResult],
) -> Outcome {
    let name = profile
        .policy_gate
        .as_ref()
        .map_or("the policy", |h| h.policy.name.as_str());
    let Some(best) = found
        .iter()
        .max_by(|a, b| a.mean_progress.total_cmp(&b.mean_progress))
    else {
        return Outcome::Fail(format!("no results at chain {chain}"));
    };
    let Some(pick) = found.iter().find(|r| r.accumulators == k) else {
        return Outcome::Fail(format!(
            "policy {name} picks acc{k} at chain {chain}, which the profile does not measure (add {k} to probe.accumulators)"
        ));
    };
    let ratio = pick.mean_progress / best.mean_progress;
    let text = format!(
        "policy {name} picks acc{k} at chain {chain}: {:.1}, {:.2}% of the best, acc{} {:.1} (must reach {:.2}%)",
        pick.mean_progress,
        ratio * 100.0,
        best.accumulators,
        best.mean_progress,
        (1.0 - tolerance) * 100.0
    );
    if ratio < 1.0 - tolerance {
        Outcome::Fail(format!(
            "{text}: the policy's pick is clearly below the best K on this GPU"
        ))
    } else {
        Outcome::Pass(text)
    }
}

fn baseline_environment(profile: &Profile, results: &RunResults) -> Outcome {
    let Some(b) = &profile.baselines else {
        return Outcome::Skipped("the profile has no baselines".into());
    };
    let Some(o) = &b.origin else {
        return Outcome::Fail(format!(
            "no baselines blessed yet in {} (bless with `cargo xtask bless`)",
            b.file.display()
        ));
    };
    let Some(e) = &results.environment else {
        return Outcome::Skipped(format!(
            "the results carry no environment (source: {})",
            results.source
        ));
    };
    let now = e.fingerprint();
    let then = format!(
        "{} / driver {} / NVRTC {}",
        o.gpu_name, o.driver_version, o.nvrtc_version
    );
    if now == then {
        Outcome::Pass(format!("results and baselines both from {now}"))
    } else {
        Outcome::Fail(format!(
            "results from {now}, but the baselines in {} were measured on {then} ({}): another GPU or toolchain \
             is a change to review; re-bless for it",
            b.file.display(),
            o.date
        ))
    }
}
