//! The accumulator-split heuristic (docs/study.md, "The heuristic, and what gating means") as data,
//! and a small evaluator that returns the accumulator count K for an accumulation.
//!
//! A policy lives in `expectations/policies/<name>.yaml` (hand-written). Profiles that gate
//! it name it, with a tolerance: at every chain length the K it picks must reach at least
//! (1 - tolerance) of the best measured progress.

use crate::error::Result;
use crate::expectations::yaml::{at, is_case_name, number, parse_document, read_text, CASE_NAME};
use crate::model::place::Place;
use crate::model::workload::{Loads, Workload};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::path::{Path, PathBuf};

/// An accumulation to lower, as the policy sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Accumulation {
    /// N: how many FMAs feed the accumulation per iteration.
    #[serde(default, deserialize_with = "number::plain")]
    pub chain: u32,
    /// Registers per thread free for extra partials.
    #[serde(deserialize_with = "number::plain")]
    pub register_headroom: u32,
    /// The sum of the partials (the sink) is isolated from the loop or amortised.
    pub sink_isolated: bool,
    /// The surrounding code has independent work that extra partials can overlap with.
    pub surrounding_ilp: bool,
    /// More live registers would not reduce occupancy.
    pub occupancy_safe: bool,
    /// S: independent FFMA side chains per iteration that do not feed the accumulation.
    #[serde(default, deserialize_with = "number::plain")]
    pub side_chains: u32,
    /// Warps resident on the SM.
    #[serde(default, deserialize_with = "number::plain")]
    pub warps_per_sm: u32,
    /// The most registers a thread may hold at that occupancy (the architecture's limit).
    #[serde(default, deserialize_with = "number::plain")]
    pub register_limit: u32,
    /// The kernel the accumulation is in: the probe, or a real accumulation. A policy
    /// file's `probe_context` is the probe's, so these three are never read from one.
    #[serde(skip_deserializing)]
    pub kernel: Workload,
    /// The accumulations each element feeds (2 for a layer norm's sum and sum of squares).
    #[serde(skip_deserializing, default = "one")]
    pub accumulations: u32,
    /// Where the elements are loaded from.
    #[serde(skip_deserializing)]
    pub loads: Loads,
}

/// One accumulation an element, the probe's.
fn one() -> u32 {
    1
}

impl Accumulation {
    /// This accumulation as it stands at `place`: its chain and its kernel's fields.
    pub(crate) fn at(self, place: &Place) -> Accumulation {
        Accumulation {
            chain: place.chain,
            kernel: place.workload,
            accumulations: place.workload.accumulations(),
            loads: place.workload.loads(),
            ..self
        }
    }
}

/// When K >= 3 is allowed, and which K.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wide {
    #[serde(deserialize_with = "number::plain")]
    pub(crate) accumulators: u32,
    /// Extra live registers per partial beyond the default count.
    #[serde(deserialize_with = "number::plain")]
    pub(crate) registers_per_accumulator: u32,
    pub(crate) requires_sink_isolated: bool,
    pub(crate) requires_surrounding_ilp: bool,
    pub(crate) requires_occupancy_safe: bool,
}

/// A policy, loaded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: String,
    pub(crate) file: PathBuf,
    /// Chains up to this length keep K = 1.
    pub(crate) short_chain_max: u32,
    pub(crate) default_accumulators: u32,
    pub(crate) wide: Option<Wide>,
    /// The accumulation the probe kernel stands for (its `chain` is set per case): what the
    /// policy is asked where the results carry no ptxas register count (a recorded table);
    /// elsewhere each case asks with the context as measured (`verdict::policy`).
    pub(crate) probe_context: Accumulation,
}

/// A thread has at most 255 registers (sm_50 to sm_90), so neither a headroom nor a
/// per-partial cost above it means anything: a larger value is a typo.
pub(crate) const MAX_REGISTERS_PER_THREAD: u32 = 255;
/// The most accumulators a policy may pick: the probe's own cap on accumulator counts
/// ([`crate::expectations::profile::probe::MAX_COUNT`]), beyond which no measurement could judge it.
pub(crate) const MAX_POLICY_ACCUMULATORS: u32 = 256;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyFile {
    name: Spanned<String>,
    #[serde(deserialize_with = "number::plain")]
    short_chain_max: u32,
    #[serde(deserialize_with = "number::spanned")]
    default_accumulators: Spanned<u32>,
    wide: Option<Spanned<Wide>>,
    probe_context: Spanned<Accumulation>,
}

impl Policy {
    pub fn load(file: &Path) -> Result<Policy> {
        let text = read_text(file, "policy")?;
        Self::parse(&text, file)
    }

    pub fn parse(text: &str, file: &Path) -> Result<Policy> {
        let raw: PolicyFile = parse_document(
            text,
            file,
            "policy",
            "name, short_chain_max, default_accumulators and probe_context",
        )?;
        if raw.default_accumulators.value == 0 {
            return Err(at(
                file,
                &raw.default_accumulators,
                "default_accumulators is 0: expected K >= 1",
            ));
        }
        if raw.default_accumulators.value > MAX_POLICY_ACCUMULATORS {
            return Err(at(
                file,
                &raw.default_accumulators,
                format!(
                    "default_accumulators {} is above {MAX_POLICY_ACCUMULATORS}, the most accumulators a profile can measure",
                    raw.default_accumulators.value
                ),
            ));
        }
        if let Some(w) = &raw.wide {
            check_wide(file, w, raw.default_accumulators.value)?;
        }
        if raw.probe_context.value.register_headroom > MAX_REGISTERS_PER_THREAD {
            return Err(at(
                file,
                &raw.probe_context,
                format!(
                    "probe_context.register_headroom {} is above {MAX_REGISTERS_PER_THREAD}, the most registers a thread has",
                    raw.probe_context.value.register_headroom
                ),
            ));
        }
        if !is_case_name(&raw.name.value) {
            return Err(at(
                file,
                &raw.name,
                format!("policy name {:?}: {CASE_NAME}", raw.name.value),
            ));
        }
        Ok(Policy {
            name: raw.name.value,
            file: file.to_path_buf(),
            short_chain_max: raw.short_chain_max,
            default_accumulators: raw.default_accumulators.value,
            wide: raw.wide.map(|w| w.value),
            probe_context: raw.probe_context.value,
        })
    }

    /// The accumulator count for `a`: K = 1 for very short chains; the default otherwise;
    /// the wide count only when every condition it requires holds and the register
    /// headroom pays for the extra partials. Never more partials than the chain can feed.
    pub fn choose(&self, a: &Accumulation) -> u32 {
        let k = if a.chain <= self.short_chain_max {
            1
        } else {
            match &self.wide {
                Some(w)
                    if (!w.requires_sink_isolated || a.sink_isolated)
                        && (!w.requires_surrounding_ilp || a.surrounding_ilp)
                        && (!w.requires_occupancy_safe || a.occupancy_safe)
                        && u64::from(a.register_headroom)
                            >= u64::from(
                                w.accumulators.saturating_sub(self.default_accumulators),
                            ) * u64::from(w.registers_per_accumulator) =>
                {
                    w.accumulators
                }
                _ => self.default_accumulators,
            }
        };
        k.min(a.chain.max(1))
    }

    /// What the policy picks for the probe kernel at chain length `n`.
    pub fn choose_for_probe(&self, n: u32) -> u32 {
        self.choose(&Accumulation {
            chain: n,
            ..self.probe_context
        })
    }
}

/// The `wide:` rule: within what a profile can measure and a thread holds, and wider than
/// `default_accumulators`.
fn check_wide(file: &Path, w: &Spanned<Wide>, default_accumulators: u32) -> Result<()> {
    if w.value.accumulators > MAX_POLICY_ACCUMULATORS {
        return Err(at(
            file,
            w,
            format!(
                "wide.accumulators {} is above {MAX_POLICY_ACCUMULATORS}, the most accumulators a profile can measure",
                w.value.accumulators
            ),
        ));
    }
    if w.value.registers_per_accumulator > MAX_REGISTERS_PER_THREAD {
        return Err(at(
            file,
            w,
            format!(
                "wide.registers_per_accumulator {} is above {MAX_REGISTERS_PER_THREAD}, the most registers a thread has",
                w.value.registers_per_accumulator
            ),
        ));
    }
    if w.value.accumulators <= default_accumulators {
        return Err(at(
            file,
            w,
            format!(
                "wide.accumulators {} must exceed default_accumulators {}",
                w.value.accumulators, default_accumulators
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const STUDY: &str = "\
name: study
short_chain_max: 4
default_accumulators: 2
wide:
  accumulators: 4
  registers_per_accumulator: 1
  requires_sink_isolated: true
  requires_surrounding_ilp: true
  requires_occupancy_safe: true
probe_context:
  register_headroom: 200
  sink_isolated: true
  surrounding_ilp: false
  occupancy_safe: true
";

    fn policy() -> Policy {
        Policy::parse(STUDY, Path::new("p.yaml")).unwrap()
    }

    fn acc(chain: u32, headroom: u32, ilp: bool) -> Accumulation {
        Accumulation {
            chain,
            register_headroom: headroom,
            sink_isolated: true,
            surrounding_ilp: ilp,
            occupancy_safe: true,
            side_chains: 0,
            warps_per_sm: 0,
            register_limit: 0,
            kernel: Workload::Probe,
            accumulations: 1,
            loads: Loads::None,
        }
    }

    #[test]
    fn a_probe_context_is_the_probe_s_and_cannot_name_a_kernel() {
        let p = policy();
        assert_eq!(p.probe_context.kernel, Workload::Probe);
        assert_eq!(p.probe_context.accumulations, 1);
        assert_eq!(p.probe_context.loads, Loads::None);
        let with_kernel = STUDY.replace("probe_context:", "probe_context:\n  kernel: dot");
        assert_ne!(with_kernel, STUDY);
        let e = Policy::parse(&with_kernel, Path::new("p.yaml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("kernel"), "{e}");
    }

    #[test]
    fn short_chains_keep_one_accumulator_and_others_get_two() {
        let p = policy();
        assert_eq!(p.choose(&acc(3, 200, true)), 1);
        assert_eq!(p.choose(&acc(7, 200, false)), 2);
        assert_eq!(p.choose_for_probe(29), 2);
    }

    #[test]
    fn wide_splits_need_every_condition_and_the_registers() {
        let p = policy();
        assert_eq!(p.choose(&acc(29, 200, true)), 4);
        assert_eq!(
            p.choose(&acc(29, 1, true)),
            2,
            "headroom 1 < 2 extra partials"
        );
        assert_eq!(
            p.choose(&Accumulation {
                occupancy_safe: false,
                ..acc(29, 200, true)
            }),
            2
        );
        assert_eq!(
            p.choose(&Accumulation {
                sink_isolated: false,
                ..acc(29, 200, true)
            }),
            2
        );
    }

    #[test]
    fn choose_never_overflows_at_u32_max() {
        // Built directly, past the load-time bounds: choose must hold for any values (tests
        // build with overflow checks on, so an overflow would panic here).
        let wide = |accumulators, registers_per_accumulator| Wide {
            accumulators,
            registers_per_accumulator,
            requires_sink_isolated: false,
            requires_surrounding_ilp: false,
            requires_occupancy_safe: false,
        };
        let mut p = policy();
        p.default_accumulators = 1;
        p.wide = Some(wide(u32::MAX, u32::MAX));
        for chain in [0, 1, 5, u32::MAX] {
            for headroom in [0, 255, u32::MAX] {
                let k = p.choose(&acc(chain, headroom, true));
                assert!(k >= 1 && k <= chain.max(1), "chain {chain}: K {k}");
            }
        }
        // (2^32 - 2) extra partials at 2^32 - 1 registers each: no headroom pays for that.
        assert_eq!(p.choose(&acc(u32::MAX, u32::MAX, true)), 1);
        // One extra partial at u32::MAX registers: exactly paid for by u32::MAX headroom.
        p.wide = Some(wide(2, u32::MAX));
        assert_eq!(p.choose(&acc(u32::MAX, u32::MAX, true)), 2);
        assert_eq!(p.choose(&acc(u32::MAX, u32::MAX - 1, true)), 1);
        // A wide count below the default (impossible once loaded) does not underflow.
        p.default_accumulators = u32::MAX;
        p.wide = Some(wide(2, 1));
        assert_eq!(p.choose(&acc(u32::MAX, 0, true)), 2);
        assert_eq!(p.choose_for_probe(u32::MAX), 2);
    }

    #[test]
    fn probe_context_reads_the_context_fields_and_does_without_them() {
        let old = policy().probe_context;
        assert_eq!(
            (old.side_chains, old.warps_per_sm, old.register_limit),
            (0, 0, 0)
        );
        let text = format!("{STUDY}  side_chains: 4\n  warps_per_sm: 16\n  register_limit: 128\n");
        let p = Policy::parse(&text, Path::new("p.yaml")).unwrap();
        let c = p.probe_context;
        assert_eq!(
            (c.side_chains, c.warps_per_sm, c.register_limit),
            (4, 16, 128)
        );
        let e = Policy::parse(
            &text.replace("warps_per_sm: 16", "warps_per_sm: \"16\""),
            Path::new("p.yaml"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:16:17:"), "{e}");
    }

    #[test]
    fn bad_policies_name_the_line() {
        let e = Policy::parse(
            &STUDY.replace("default_accumulators: 2", "default_accumulators: 0"),
            Path::new("p.yaml"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:3:23:"), "{e}");
        let e = Policy::parse(
            &STUDY.replace("accumulators: 4", "accumulators: 2"),
            Path::new("p.yaml"),
        )
        .unwrap_err();
        assert!(e.to_string().contains("must exceed"), "{e}");
        let e = Policy::parse(
            &STUDY.replace("surrounding_ilp: false", "surrounding_ilp: maybe"),
            Path::new("p.yaml"),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:13:20:"), "{e}");
    }
}
