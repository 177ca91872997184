//! The cases a profile generates: the verdict stage's vocabulary. Each case names what it
//! checks and which variants it needs measured.

use crate::expectations::profile::{Invariant, Profile};
use crate::model::results::RunResults;
use crate::model::variant::{Context, Sink, Variant};

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
    /// The K a policy picks at this chain, asked about this sink mode and context as
    /// measured, reaches (1 - tolerance) of the best progress measured there.
    Policy {
        chain: u32,
        sink: Sink,
        context: Context,
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
            // The study's invariant is about the contexts it describes: the base. A spill
            // in another context is data for the policy (a wide K that spills loses).
            Invariant::NoSpills => cases.extend(SpillSource::ALL.iter().map(|src| Case {
                name: format!("invariant::{id}::{}", src.id()),
                check: Check::NoSpills(*src),
                needs: all.iter().copied().filter(Variant::is_base).collect(),
            })),
        }
    }
    if let Some(h) = &profile.policy_gate {
        let mut ask = |chain: u32, sink: Sink, context: Context| {
            let mut name = format!("policy::{}::chain{chain}", h.policy.name);
            if sink != Sink::A {
                name.push_str(&format!("_sink{}", sink.letter()));
            }
            name.push_str(&context.suffix());
            cases.push(Case {
                name,
                check: Check::Policy {
                    chain,
                    sink,
                    context,
                    tolerance: h.tolerance,
                },
                needs: all
                    .iter()
                    .copied()
                    .filter(|v| v.chain == chain && v.sink == sink && v.context == context)
                    .collect(),
            });
        };
        let p = &profile.probe;
        for &chain in &p.chains {
            ask(chain, Sink::A, Context::BASE);
        }
        for &sink in &p.sink_modes {
            for &chain in &p.chains {
                ask(chain, sink, Context::BASE);
            }
        }
        for &context in &p.contexts {
            for &chain in &p.context_chains {
                ask(chain, Sink::A, context);
            }
        }
    }
    cases
}

/// Why `case` is not judged on `results`, if it is not: it needs a context variant the
/// results predate ([`RunResults::predates`]: a file written before contexts existed, such
/// as a recorded run older than the profile's contexts). Any other missing variant is no
/// reason: that case fails, as a missing measurement always does.
pub fn unrecorded(case: &Case, results: &RunResults) -> Option<String> {
    let v = case.needs.iter().find(|v| results.predates(**v))?;
    Some(format!(
        "the results (schema {}) predate context {}: they hold no {v}; a run measured since judges it",
        results.schema, v.context
    ))
}

/// A case's name on one device of a run: `gpuN::` in front, N being the device's ordinal,
/// when the run has several devices (`ordinal` is then `Some`); the name as it is else.
pub fn on_device(name: &str, ordinal: Option<usize>) -> String {
    match ordinal {
        Some(n) => format!("gpu{n}::{name}"),
        None => name.to_string(),
    }
}
