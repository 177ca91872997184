//! The cases a profile generates: the verdict stage's vocabulary. Each case names what it
//! checks and which variants it needs measured.

use crate::expectations::policy_source::PolicyContext;
use crate::expectations::profile::{Invariant, PolicyGate, Profile, ReductionInvariant};
use crate::model::place::Place;
use crate::model::results::RunResults;
use crate::model::variant::{Context, Sink, Variant, Workload};

pub(crate) use super::spills::SpillSource;

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
    /// One [`ReductionInvariant::Peak`] in one context.
    KernelPeak {
        kernel: Workload,
        context: Context,
        accumulators: u32,
        tolerance: f64,
    },
    /// No variant spills, by one source.
    NoSpills(SpillSource),
    /// The measured loop has N FFMAs (times the unroll factor) over E independent chains;
    /// for E = 1 each FFMA accumulates in place (the strict chain).
    SassShape(Variant),
    /// The SASS digest is the blessed one.
    SassUnchanged(Variant),
    /// The measured loop's schedule digest (text and control fields) is the blessed one.
    SassSchedule(Variant),
    /// The results come from the GPU, driver and NVRTC the baselines were measured with.
    BaselineEnvironment,
    /// Progress does not exceed the physical ceiling of the launch.
    Ceiling(Variant),
    /// Each launch took budget / SM clock, within the tolerance.
    Duration(Variant),
    /// The K the policy picks at this place (a probe chain in a sink mode and context, or
    /// a real accumulation in a context), asked about it as measured (the policy context
    /// [`Place::name`] names), reaches (1 - tolerance) of the best progress measured there.
    Policy { place: Place, tolerance: f64 },
    /// The K the policy picks for the same policy context measures no worse than its
    /// blessed pick, beyond the tolerance.
    PolicyPick { place: Place, tolerance: f64 },
}

/// Every case `profile` generates, in a stable order.
pub fn cases(profile: &Profile) -> Vec<Case> {
    let all = profile.probe.variants();
    let main = profile.probe.main_variants();
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
    if profile.baselines.is_some() {
        cases.push(Case {
            name: "baselines::environment".into(),
            check: Check::BaselineEnvironment,
            needs: Vec::new(),
        });
        cases.extend(per_variant("sass", "unchanged", Check::SassUnchanged));
        cases.extend(per_variant("sass", "schedule", Check::SassSchedule));
    }
    if profile.validity.is_some() {
        cases.extend(per_variant("validity", "ceiling", Check::Ceiling));
        cases.extend(per_variant("validity", "duration", Check::Duration));
    }
    for inv in &profile.invariants {
        cases.extend(invariant_cases(inv, profile, &all, &main));
    }
    for inv in &profile.reduction_invariants {
        cases.extend(reduction_invariant_cases(inv, profile));
    }
    if let Some(h) = &profile.policy_gate {
        cases.extend(policy_cases(h, profile, &all));
    }
    cases
}

/// The cases of invariant `inv`; `all` are the profile's variants, `main` its main ones.
fn invariant_cases(
    inv: &Invariant,
    profile: &Profile,
    all: &[Variant],
    main: &[Variant],
) -> Vec<Case> {
    let id = inv.id();
    match *inv {
        Invariant::Peak {
            accumulators,
            tolerance,
        } => profile
            .probe
            .chains
            .iter()
            .map(|&chain| Case {
                name: format!("invariant::{id}::chain{chain}"),
                check: Check::Peak {
                    chain,
                    accumulators,
                    tolerance,
                },
                needs: main.iter().copied().filter(|v| v.chain == chain).collect(),
            })
            .collect(),
        Invariant::GainGrows {
            accumulators,
            over,
            min_increase,
        } => vec![Case {
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
        }],
        // The study's invariant is about the contexts it describes: the base. A spill
        // in another context is data for the policy (a wide K that spills loses).
        Invariant::NoSpills => SpillSource::ALL
            .iter()
            .map(|src| Case {
                name: format!("invariant::{id}::{}", src.id()),
                check: Check::NoSpills(*src),
                needs: all.iter().copied().filter(Variant::is_base).collect(),
            })
            .collect(),
    }
}

/// The cases of real-accumulation invariant `inv`, one a context the kernel is measured
/// in: `invariant::acc8_is_peak::dot`, `invariant::acc8_is_peak::dot_w16`.
fn reduction_invariant_cases(inv: &ReductionInvariant, profile: &Profile) -> Vec<Case> {
    let ReductionInvariant::Peak {
        kernel,
        accumulators,
        tolerance,
    } = *inv;
    let p = &profile.probe;
    p.reduction_contexts
        .iter()
        .map(|&context| Case {
            name: format!(
                "invariant::acc{accumulators}_is_peak::{kernel}{}",
                context.suffix()
            ),
            check: Check::KernelPeak {
                kernel,
                context,
                accumulators,
                tolerance,
            },
            needs: p
                .reduction_accumulators
                .iter()
                .map(|&k| Variant::reduction(kernel, k).with_context(context))
                .collect(),
        })
        .collect()
}

/// The cases of the policy gate `h`: one a policy context, and with baselines one a
/// blessed pick.
fn policy_cases(h: &PolicyGate, profile: &Profile, all: &[Variant]) -> Vec<Case> {
    let contexts = policy_contexts(profile, None);
    let at = |c: &PolicyContext| -> Vec<Variant> {
        all.iter().copied().filter(|v| c.place.holds(v)).collect()
    };
    let mut cases = Vec::new();
    for c in &contexts {
        cases.push(Case {
            name: format!("policy::{}::{}", h.source.name(), c.name),
            check: Check::Policy {
                place: c.place,
                tolerance: h.tolerance,
            },
            needs: at(c),
        });
    }
    if profile.baselines.is_some() {
        for c in &contexts {
            cases.push(Case {
                name: format!("policy::{}::picks::{}", h.source.name(), c.name),
                check: Check::PolicyPick {
                    place: c.place,
                    tolerance: h.tolerance,
                },
                needs: at(c),
            });
        }
    }
    cases
}

/// Every place a profile's policy is asked about, in a stable order: the base probe
/// kernel at each chain (`chain<N>`), each sink mode at each chain (`chain<N>_sink<M>`),
/// each probe context at each context chain (`chain<N>_<context>`), then each real
/// accumulation in each of its contexts (`dot`, `dot_w16`).
pub fn policy_places(profile: &Profile) -> Vec<Place> {
    let p = &profile.probe;
    let mut places = Vec::new();
    for &chain in &p.chains {
        places.push(Place::probe(chain, Sink::A, Context::BASE));
    }
    for &sink in &p.sink_modes {
        for &chain in &p.chains {
            places.push(Place::probe(chain, sink, Context::BASE));
        }
    }
    for &context in &p.contexts {
        for &chain in &p.context_chains {
            places.push(Place::probe(chain, Sink::A, context));
        }
    }
    for &kernel in &p.reductions {
        for &context in &p.reduction_contexts {
            places.push(Place::kernel(kernel, context));
        }
    }
    places
}

/// The contexts a profile's policy is asked about ([`policy_places`]). Each accumulation
/// is the one `results` measured there (`verdict::policy::accumulation`); without
/// results, or where they carry no ptxas register count (a recorded table), the policy's
/// `probe_context` stands for it, with the place's chain and kernel. A place `results`
/// predate (a file written before contexts or real accumulations,
/// `RunResults::predates`) is left out: nothing measured it, and its cases are skipped
/// ([`unrecorded`]). Empty without a `policy_gate:`.
pub fn policy_contexts(profile: &Profile, results: Option<&RunResults>) -> Vec<PolicyContext> {
    let Some(h) = &profile.policy_gate else {
        return Vec::new();
    };
    let p = &profile.probe;
    let counts = |place: &Place| {
        if place.workload.is_probe() {
            &p.context_accumulators
        } else {
            &p.reduction_accumulators
        }
    };
    let predated = |place: &Place| {
        results.is_some_and(|r| counts(place).iter().any(|&k| r.predates(place.variant(k))))
    };
    policy_places(profile)
        .into_iter()
        .filter(|place| !predated(place))
        .map(|place| {
            let accumulation = match results {
                Some(r) => super::policy::accumulation_on(&h.source, place, profile, r),
                None => h.source.probe_context().at(&place),
            };
            PolicyContext {
                name: place.name(),
                place,
                accumulation,
            }
        })
        .collect()
}

/// Why `case` is not judged on `results`, if it is not: it needs a context variant the
/// results predate (`RunResults::predates`: a file written before contexts existed, such
/// as a recorded run older than the profile's contexts). Any other missing variant is no
/// reason: that case fails, as a missing measurement always does.
pub fn unrecorded(case: &Case, results: &RunResults) -> Option<String> {
    let v = case.needs.iter().find(|v| results.predates(**v))?;
    let what = if v.workload.is_probe() {
        format!("context {}", v.context)
    } else {
        "the real accumulations".to_string()
    };
    Some(format!(
        "the results (schema {}) predate {what}: they hold no {v}; a run measured since judges it",
        results.schema
    ))
}

/// A case's name on one device of a run: `gpuN::` in front, N being the device's ordinal,
/// when the run has several devices (`ordinal` is then `Some`); the name as it is else.
pub(crate) fn on_device(name: &str, ordinal: Option<usize>) -> String {
    match ordinal {
        Some(n) => format!("gpu{n}::{name}"),
        None => name.to_string(),
    }
}
