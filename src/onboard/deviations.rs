//! The known deviations of a drafted profile: every case of the study's expectations that
//! does not hold on the measurement, each with a reason that gives the measured numbers,
//! the date, the driver and the NVRTC (the style of the hand-written profiles).

use super::OnboardError;
use crate::expectations::profile::Profile;
use crate::model::place::Place;
use crate::model::results::{RunResults, VariantResult};
use crate::report::thousands as figure;
use crate::verdict::cases::{cases, Check};
use crate::verdict::{at_place, evaluate, judged_standing, Basis, Outcome};

/// A case that does not hold, and why, in the reason's words.
#[derive(Debug, Clone, PartialEq)]
pub struct Deviation {
    pub case: String,
    pub reason: String,
}

/// Every case of `profile` (which records no known deviations yet) that fails on
/// `results`, in case order. The cases judged against the baselines (`probe::`,
/// `sass::..::unchanged` and `::schedule`, `baselines::environment`, the policy's blessed
/// picks) are left out: the baselines are
/// blessed from these results, so those hold on them (`bless::check` refuses results
/// with output problems or spills, the rest of what a `probe::` case checks). `Err` when
/// a case could not be judged because the measurement was disturbed: a deviation must
/// come from an undisturbed measurement.
pub(crate) fn find(
    profile: &Profile,
    results: &RunResults,
) -> Result<Vec<Deviation>, OnboardError> {
    let when = measured_when(results);
    let gpu = gpu_short_name(results);
    let mut out = Vec::new();
    for case in cases(profile) {
        if matches!(
            case.check,
            Check::Variant(_)
                | Check::SassUnchanged(_)
                | Check::SassSchedule(_)
                | Check::BaselineEnvironment
                | Check::PolicyPick { .. }
        ) {
            continue;
        }
        match evaluate(&case, profile, results) {
            Outcome::Fail(failure) => {
                let what = match case.check {
                    Check::Peak {
                        chain,
                        accumulators,
                        tolerance,
                    } => peak(&gpu, chain, accumulators, tolerance, results),
                    Check::Policy { place, .. } => file_pick(profile, results, &place.name())
                        .and_then(|k| policy(profile, &place, k, &at_place(results, &place))),
                    _ => None,
                }
                .unwrap_or_else(|| format!("on the {gpu}: {}", failure.text()));
                out.push(Deviation {
                    case: case.name,
                    reason: format!("{what}, {when}"),
                });
            }
            Outcome::Error(why) => {
                return Err(OnboardError::Disturbed {
                    run: None,
                    case: case.name,
                    why,
                })
            }
            _ => {}
        }
    }
    Ok(out)
}

/// "2026-11-30, driver 580.159.04, NVRTC 13.0".
fn measured_when(results: &RunResults) -> String {
    match &results.environment {
        Some(e) => format!(
            "{}, driver {}, NVRTC {}",
            e.date.get(..10).unwrap_or(&e.date),
            e.driver_version,
            e.nvrtc_version
        ),
        None => format!("source {}", results.source),
    }
}

/// The GPU's name without its vendor: `H200` for `NVIDIA H200`.
fn gpu_short_name(results: &RunResults) -> String {
    let name = results
        .environment
        .as_ref()
        .map_or("GPU", |e| e.gpu_name.as_str());
    name.strip_prefix("NVIDIA ").unwrap_or(name).to_string()
}

/// The main variants (sink mode A) at `chain`.
fn at_chain(results: &RunResults, chain: u32) -> Vec<&VariantResult> {
    results
        .variants
        .iter()
        .filter(|r| {
            r.workload.is_probe()
                && r.chain == chain
                && r.variant().sink == Default::default()
                && r.context.is_base()
        })
        .collect()
}

/// "acc3 and acc5", "acc7, acc8 and acc16".
fn and_list(ks: &[u32]) -> String {
    let names: Vec<String> = ks.iter().map(|k| format!("acc{k}")).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Those of `found` (K and progress) at the best progress (to the 0.1 the figures are
/// given to), and it.
fn best(found: &[(u32, f64)]) -> Option<(Vec<u32>, f64)> {
    let top = found
        .iter()
        .map(|&(_, p)| p)
        .filter(|p| p.is_finite())
        .fold(f64::NEG_INFINITY, f64::max);
    let ks: Vec<u32> = found
        .iter()
        .filter(|&&(_, p)| figure(p) == figure(top))
        .map(|&(k, _)| k)
        .collect();
    (!ks.is_empty()).then_some((ks, top))
}

/// Each of `found` as its K and this run's mean progress.
fn means(found: &[&VariantResult]) -> Vec<(u32, f64)> {
    found
        .iter()
        .map(|r| (r.accumulators, r.mean_progress))
        .collect()
}

/// "on the H200 acc3 and acc5 reach 181,817.0 against acc2's 178,570.0 (+1.82%)", and the
/// others above acc`k`'s tolerance in brackets.
fn peak(gpu: &str, chain: u32, k: u32, tolerance: f64, results: &RunResults) -> Option<String> {
    let found = at_chain(results, chain);
    let target = found.iter().find(|r| r.accumulators == k)?;
    let others: Vec<&VariantResult> = found
        .iter()
        .filter(|r| r.accumulators != k)
        .copied()
        .collect();
    let (ks, top) = best(&means(&others))?;
    let verb = if ks.len() == 1 { "reaches" } else { "reach" };
    let limit = target.mean_progress * (1.0 + tolerance);
    let also: Vec<String> = others
        .iter()
        .filter(|r| !ks.contains(&r.accumulators) && r.mean_progress > limit)
        .map(|r| format!("acc{} {}", r.accumulators, figure(r.mean_progress)))
        .collect();
    let also = if also.is_empty() {
        String::new()
    } else {
        format!(" ({})", also.join(", "))
    };
    Some(format!(
        "on the {gpu} {} {verb} {}{also} against acc{k}'s {} ({:+.2}%)",
        and_list(&ks),
        figure(top),
        figure(target.mean_progress),
        (top / target.mean_progress - 1.0) * 100.0
    ))
}

/// The K the profile's policy file picks for `context` as `results` measured it (a draft
/// gates a policy file).
fn file_pick(profile: &Profile, results: &RunResults, context: &str) -> Option<u32> {
    let gate = profile.policy_gate.as_ref()?;
    gate.source
        .file_picks(&crate::verdict::cases::policy_contexts(
            profile,
            Some(results),
        ))?
        .of(context)
        .ok()
}

/// "the study's policy picks acc2 at N=13 (144,926.5), 97.10% of the best (acc7, acc8,
/// acc16: 149,253.0) by the blessed progress, below the 98% the gate asks": the figures
/// the policy case judges on (the blessed progress while every variant holds its
/// baseline, else this run's).
fn policy(profile: &Profile, place: &Place, k: u32, found: &[&VariantResult]) -> Option<String> {
    let gate = profile.policy_gate.as_ref()?;
    let (pick, basis) = judged_standing(k, found, profile).ok()?;
    let figures = match (basis, &profile.baselines) {
        (Basis::Blessed, Some(b)) => found
            .iter()
            .map(|r| Some((r.accumulators, *b.progress.get(&r.name)?)))
            .collect::<Option<Vec<_>>>()?,
        _ => means(found),
    };
    let (ks, top) = best(&figures)?;
    let names: Vec<String> = ks.iter().map(|k| format!("acc{k}")).collect();
    Some(format!(
        "the {}'s policy picks acc{k} at {} ({}), {:.2}% of the best ({}: {}) by {basis}, below the {}% the gate asks",
        gate.source.name(),
        if place.workload.is_probe() {
            format!("N={}", place.chain)
        } else {
            place.describe()
        },
        figure(pick.progress),
        pick.progress / top * 100.0,
        names.join(", "),
        figure(top),
        format!("{:.2}", (1.0 - gate.tolerance) * 100.0)
            .trim_end_matches('0')
            .trim_end_matches('.')
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulator_counts_are_listed_in_words() {
        assert_eq!(and_list(&[7, 8, 16]), "acc7, acc8 and acc16");
        assert_eq!(and_list(&[3]), "acc3");
    }
}
