//! The cases a profile generates: the verdict stage's vocabulary. Each case names what it
//! checks and which variants it needs measured.

use crate::expectations::policy::Accumulation;
use crate::expectations::policy_source::PolicyContext;
use crate::expectations::profile::{Invariant, Profile};
use crate::model::variant::Variant;

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
    /// The measured loop's schedule digest (text and control fields) is the blessed one.
    SassSchedule(Variant),
    /// The results come from the GPU, driver and NVRTC the baselines were measured with.
    BaselineEnvironment,
    /// Progress does not exceed the physical ceiling of the launch.
    Ceiling(Variant),
    /// Each launch took budget / SM clock, within the tolerance.
    Duration(Variant),
    /// The K the policy picks for the context (named as in [`policy_contexts`]) reaches
    /// (1 - tolerance) of the best progress at its chain.
    Policy {
        context: String,
        chain: u32,
        tolerance: f64,
    },
    /// The K the policy picks for the context measures no worse than its blessed pick,
    /// beyond the tolerance.
    PolicyPick {
        context: String,
        chain: u32,
        tolerance: f64,
    },
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
        let id = inv.id();
        match *inv {
            Invariant::Peak {
                accumulators,
                tolerance,
            } => cases.extend(profile.probe.chains.iter().map(|&chain| Case {
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
    if let Some(h) = &profile.policy_gate {
        let contexts = policy_contexts(profile);
        let at_chain = |chain: u32| main.iter().copied().filter(|v| v.chain == chain).collect();
        for c in &contexts {
            let chain = c.accumulation.chain;
            cases.push(Case {
                name: format!("policy::{}::{}", h.source.name(), c.name),
                check: Check::Policy {
                    context: c.name.clone(),
                    chain,
                    tolerance: h.tolerance,
                },
                needs: at_chain(chain),
            });
        }
        if profile.baselines.is_some() {
            for c in contexts {
                let chain = c.accumulation.chain;
                cases.push(Case {
                    name: format!("policy::{}::picks::{}", h.source.name(), c.name),
                    check: Check::PolicyPick {
                        context: c.name,
                        chain,
                        tolerance: h.tolerance,
                    },
                    needs: at_chain(chain),
                });
            }
        }
    }
    cases
}

/// The contexts a profile's policy is asked about, in a stable order: the probe kernel at
/// each chain length (`chain<N>`), as the gate's probe context describes it. Empty
/// without a `policy_gate:`.
pub fn policy_contexts(profile: &Profile) -> Vec<PolicyContext> {
    let Some(h) = &profile.policy_gate else {
        return Vec::new();
    };
    let probe = h.source.probe_context();
    profile
        .probe
        .chains
        .iter()
        .map(|&chain| PolicyContext {
            name: format!("chain{chain}"),
            accumulation: Accumulation { chain, ..probe },
        })
        .collect()
}

/// A case's name on one device of a run: `gpuN::` in front, N being the device's ordinal,
/// when the run has several devices (`ordinal` is then `Some`); the name as it is else.
pub fn on_device(name: &str, ordinal: Option<usize>) -> String {
    match ordinal {
        Some(n) => format!("gpu{n}::{name}"),
        None => name.to_string(),
    }
}
