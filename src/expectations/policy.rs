//! The accumulator-split heuristic (docs/study.md, "The heuristic, and what gating means") as data,
//! and a small evaluator that returns the accumulator count K for an accumulation.
//!
//! A policy lives in `expectations/policies/<name>.yaml` (hand-written). Profiles that gate
//! it name it, with a tolerance: at every chain length the K it picks must reach at least
//! (1 - tolerance) of the best measured progress.

use crate::error::Result;
use crate::expectations::yaml::{at, number, parse_document, read_text};
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
}

/// When K >= 3 is allowed, and which K.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wide {
    #[serde(deserialize_with = "number::plain")]
    pub accumulators: u32,
    /// Extra live registers per partial beyond the default count.
    #[serde(deserialize_with = "number::plain")]
    pub registers_per_accumulator: u32,
    pub requires_sink_isolated: bool,
    pub requires_surrounding_ilp: bool,
    pub requires_occupancy_safe: bool,
}

/// A policy, loaded and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    pub name: String,
    pub file: PathBuf,
    /// Chains up to this length keep K = 1.
    pub short_chain_max: u32,
    pub default_accumulators: u32,
    pub wide: Option<Wide>,
    /// The accumulation the probe kernel stands for (its `chain` is set per case).
    pub probe_context: Accumulation,
}

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
        if let Some(w) = &raw.wide {
            if w.value.accumulators <= raw.default_accumulators.value {
                return Err(at(
                    file,
                    w,
                    format!(
                        "wide.accumulators {} must exceed default_accumulators {}",
                        w.value.accumulators, raw.default_accumulators.value
                    ),
                ));
            }
        }
        if raw.name.value.trim().is_empty() {
            return Err(at(file, &raw.name, "policy name is empty"));
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
                        && a.register_headroom
                            >= (w.accumulators - self.default_accumulators)
                                * w.registers_per_accumulator =>
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
        }
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
