//! Stage 6 of the pipeline: verdicts. Plain results in, one outcome per case out.
//!
//! Architecture invariant: nothing here touches a GPU; every verdict can be replayed on
//! recorded results on any machine.

use crate::profile::{Case, Check, Profile};
use crate::results::{RunResults, VariantResult};
use crate::variant::Variant;

/// What a case concluded.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Holds; the text says what was measured.
    Pass(String),
    /// Does not hold; the text gives measured vs expected with the tolerance.
    Fail(String),
    /// Does not hold, and the profile records that as a known deviation of this GPU.
    KnownDeviation { reason: String, detail: String },
}

impl Outcome {
    pub fn is_fail(&self) -> bool {
        matches!(self, Outcome::Fail(_))
    }
}

/// Evaluates one case, then applies the profile's known deviations strictly: a known
/// deviation that holds again fails, so that a change in either direction is seen.
/// Missing or unusable results fail whatever the profile expects: a deviation excuses a
/// measured difference, never the absence of a measurement.
pub fn evaluate(case: &Case, profile: &Profile, results: &RunResults) -> Outcome {
    let found = match usable(case, results) {
        Ok(found) => found,
        Err(e) => return Outcome::Fail(e),
    };
    let raw = evaluate_raw(case, profile, results, &found);
    match (profile.known_deviations.get(&case.name), raw) {
        (None, raw) => raw,
        (Some(reason), Outcome::Fail(detail)) => Outcome::KnownDeviation { reason: reason.clone(), detail },
        (Some(reason), Outcome::Pass(detail)) => Outcome::Fail(format!(
            "known deviation no longer present: {} now holds ({detail}); the profile {} says it should not: {reason}. \
             If this is the new normal, remove it from known_deviations.",
            case.name,
            profile.file.display()
        )),
        (Some(_), other) => other,
    }
}

/// The results a case needs, each present with a positive, finite progress.
fn usable<'a>(case: &Case, results: &'a RunResults) -> Result<Vec<&'a VariantResult>, String> {
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
        return Err(format!(
            "no result for {} in the results (source: {})",
            missing.join(", "),
            results.source
        ));
    }
    if !unusable.is_empty() {
        return Err(unusable.join("; "));
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
        Check::NoSpills => no_spills(found),
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
                let rel = (r.mean_progress - base) / base;
                let line = format!(
                    "progress {:.1} vs baseline {base:.1}: {} (tolerance ±{:.2}%)",
                    r.mean_progress,
                    pct(rel),
                    b.tolerance * 100.0
                );
                if rel.abs() > b.tolerance {
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

/// Why a variant counts as spilling, or as unknown; `None` when it is clean.
fn spill_problem(r: &VariantResult) -> Option<String> {
    match r.resources {
        None => Some("no register/spill report".into()),
        Some(res) => res.spill_report().map(|s| format!("spills: {s}")),
    }
}

fn no_spills(found: &[&VariantResult]) -> Outcome {
    let bad: Vec<String> = found
        .iter()
        .filter_map(|r| spill_problem(r).map(|p| format!("{}: {p}", r.name)))
        .collect();
    if bad.is_empty() {
        Outcome::Pass(format!("no spills in {} variants", found.len()))
    } else {
        Outcome::Fail(format!("spills (expected none): {}", bad.join("; ")))
    }
}
