//! The contexts a drafted profile measures besides the base (docs/study.md, "Contexts"):
//! the inputs the accumulator-split heuristic's conditions name, as the H200 profile
//! measures them (expectations/h200.yaml): occupancy (16 and 32 warps on the SM),
//! surrounding ILP (4 independent FFMA side chains), register pressure (48 values live
//! across the loop), each varied alone, and the corner where pressure meets occupancy;
//! at chains 7, 13 and 29 and K 1, 2, 4 and 8.
//!
//! Onboarding measures them ([`measuring`]); the draft names those the measurement holds
//! (`measured`: a run written before contexts existed holds none, and a profile naming a
//! context its baselines lack would fail every run), and `section` writes them with a
//! comment saying what each is for.

use crate::expectations::profile::Profile;
use crate::model::context::{other_warps, register_limit, Context};
use crate::model::results::RunResults;
use crate::model::settings::ProbeSettings;

/// The chains the contexts are measured at.
pub(crate) const CHAINS: [u32; 3] = [7, 13, 29];
/// The accumulator counts they are measured at.
pub(crate) const ACCUMULATORS: [u32; 4] = [1, 2, 4, 8];
/// Occupancy: the block's warps (one block per SM).
pub(crate) const WARPS: [u32; 2] = [16, 32];
/// Surrounding ILP: independent FFMA side chains per iteration.
pub(crate) const SIDE_CHAINS: [u32; 1] = [4];
/// Register pressure: values live across the loop.
pub(crate) const LIVE_VALUES: [u32; 1] = [48];
/// The corners: (warps, live values) together.
pub(crate) const CORNERS: [(u32, u32); 1] = [(32, 48)];

/// `probe` with the default contexts, those it can hold: chains and counts it measures
/// the base at, warps a context may have other than its own block's; and with the default
/// real accumulations ([`super::reductions::with_defaults`]).
pub(crate) fn with_defaults(probe: &ProbeSettings) -> ProbeSettings {
    let mut p = probe.clone();
    let base_warps = p.block_threads / 32;
    let warps_ok = |w: u32| other_warps(&WARPS, base_warps).any(|o| o == w);
    p.context_chains = CHAINS
        .into_iter()
        .filter(|c| p.chains.contains(c))
        .collect();
    p.context_accumulators = ACCUMULATORS
        .into_iter()
        .filter(|k| p.accumulators.contains(k))
        .collect();
    let mut contexts: Vec<Context> = Vec::new();
    contexts.extend(other_warps(&WARPS, base_warps).map(|w| Context {
        warps: Some(w),
        ..Context::BASE
    }));
    contexts.extend(SIDE_CHAINS.map(|s| Context {
        side_chains: s,
        ..Context::BASE
    }));
    contexts.extend(LIVE_VALUES.map(|v| Context {
        live_values: v,
        ..Context::BASE
    }));
    contexts.extend(
        CORNERS
            .into_iter()
            .filter(|&(w, _)| warps_ok(w))
            .map(|(w, v)| Context {
                warps: Some(w),
                live_values: v,
                ..Context::BASE
            }),
    );
    if p.context_chains.is_empty() || p.context_accumulators.is_empty() {
        contexts.clear();
    }
    if contexts.is_empty() {
        p.context_chains.clear();
        p.context_accumulators.clear();
    }
    p.contexts = contexts;
    super::reductions::with_defaults(&mut p);
    p
}

/// The profile onboarding measures under: the study's as `name`, with the default
/// contexts.
pub fn measuring(study: &Profile, name: &str) -> Profile {
    let mut p = study.clone();
    p.name = name.to_string();
    p.probe = with_defaults(&study.probe);
    p
}

/// `probe` keeping only the contexts `r` measured (holds a result for any variant of),
/// and the real accumulations it measured ([`super::reductions::measured`]): what a draft
/// from `r` can name. A context measured in part is kept, and refused with
/// the variants missing when the draft is blessed (`bless::check`).
pub(crate) fn measured(probe: &ProbeSettings, r: &RunResults) -> ProbeSettings {
    let mut p = probe.clone();
    let (chains, ks) = (p.context_chains.clone(), p.context_accumulators.clone());
    p.contexts.retain(|&c| {
        crate::model::variant::matrix(&chains, &ks)
            .into_iter()
            .any(|v| r.get(v.with_context(c)).is_some())
    });
    if p.contexts.is_empty() {
        p.context_chains.clear();
        p.context_accumulators.clear();
    }
    super::reductions::measured(&mut p, r);
    p
}

/// What `c` is for, in the words of the study's heuristic (one line of the comment).
fn purpose(c: &Context, base_warps: u32) -> String {
    match (c.warps, c.side_chains, c.live_values) {
        (Some(w), 0, 0) => format!(
            "occupancy: {w} warps on the SM instead of {base_warps} (one block of {} threads), so the warps compete for the schedulers",
            w * 32
        ),
        (None, s, 0) if s > 0 => format!(
            "surrounding ILP: {s} independent FFMA side chains per iteration that do not feed the accumulation"
        ),
        (None, 0, v) if v > 0 => format!(
            "register pressure: {v} values held live in registers across the loop"
        ),
        _ => {
            let mut parts = Vec::new();
            if let Some(w) = c.warps {
                parts.push(format!("{w} warps on the SM"));
            }
            if c.side_chains > 0 {
                parts.push(format!("{} side chains", c.side_chains));
            }
            if c.live_values > 0 {
                parts.push(format!("{} values live", c.live_values));
            }
            format!(
                "a corner, where the inputs meet: {}{}",
                parts.join(" with "),
                c.warps.map_or(String::new(), |w| format!(
                    " (at {w} warps a thread may hold {} registers)",
                    register_limit(w)
                ))
            )
        }
    }
}

/// The `contexts:` section of `probe` as YAML with its comment, or `""` when it measures
/// none.
pub(super) fn section(probe: &ProbeSettings) -> String {
    if probe.contexts.is_empty() {
        return String::new();
    }
    let base_warps = probe.block_threads / 32;
    let list = |xs: &[u32]| {
        let xs: Vec<String> = xs.iter().map(u32::to_string).collect();
        format!("[{}]", xs.join(", "))
    };
    let only = |f: &dyn Fn(&Context) -> Option<u32>| -> Vec<u32> {
        probe.contexts.iter().filter_map(f).collect()
    };
    let warps = only(&|c| match c {
        Context {
            warps: Some(w),
            side_chains: 0,
            live_values: 0,
        } => Some(*w),
        _ => None,
    });
    let sides = only(&|c| {
        (c.warps.is_none() && c.live_values == 0 && c.side_chains > 0).then_some(c.side_chains)
    });
    let lives = only(&|c| {
        (c.warps.is_none() && c.side_chains == 0 && c.live_values > 0).then_some(c.live_values)
    });
    let corners: Vec<&Context> = probe
        .contexts
        .iter()
        .filter(|c| {
            [c.warps.is_some(), c.side_chains > 0, c.live_values > 0]
                .iter()
                .filter(|&&b| b)
                .count()
                > 1
        })
        .collect();
    let n = probe.context_chains.len() * probe.context_accumulators.len();
    let mut lines = vec![format!(
        "The contexts the accumulator-split heuristic's conditions name (docs/study.md, \"Contexts\"), measured besides the base at these chains and counts, {n} variants each, sink mode A; the policy gate judges the policy in each (policy::<name>::chainN_<context>). Each is for:"
    )];
    lines.extend(probe.contexts.iter().map(|c| {
        format!(
            "- {}: {}.",
            c.suffix().trim_start_matches('_'),
            purpose(c, base_warps)
        )
    }));
    let mut s = super::comments::comment(&lines);
    s.push_str("contexts:\n");
    s.push_str(&format!("  chains: {}\n", list(&probe.context_chains)));
    s.push_str(&format!(
        "  accumulators: {}\n",
        list(&probe.context_accumulators)
    ));
    for (key, xs) in [
        ("warps", warps),
        ("side_chains", sides),
        ("live_values", lives),
    ] {
        if !xs.is_empty() {
            s.push_str(&format!("  {key}: {}\n", list(&xs)));
        }
    }
    if !corners.is_empty() {
        s.push_str("  corners:\n");
        for c in corners {
            let parts = corner_parts(c);
            s.push_str(&format!("    - {{{}}}\n", parts.join(", ")));
        }
    }
    s
}

/// The inputs a corner sets, as its YAML mapping's entries.
fn corner_parts(c: &Context) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(w) = c.warps {
        parts.push(format!("warps: {w}"));
    }
    if c.side_chains > 0 {
        parts.push(format!("side_chains: {}", c.side_chains));
    }
    if c.live_values > 0 {
        parts.push(format!("live_values: {}", c.live_values));
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn study_probe() -> ProbeSettings {
        crate::catalog::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/documented.yaml"),
        )
        .unwrap()
        .probe
    }

    #[test]
    fn the_defaults_are_the_h200_profiles_contexts_and_fit_the_probe() {
        let p = with_defaults(&study_probe());
        let h200 = crate::catalog::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/h200.yaml"),
        )
        .unwrap()
        .probe;
        assert_eq!(p.contexts, h200.contexts);
        assert_eq!(p.context_chains, h200.context_chains);
        assert_eq!(p.context_accumulators, h200.context_accumulators);
        let text = section(&p);
        assert!(text.contains("  warps: [16, 32]\n  side_chains: [4]\n  live_values: [48]\n  corners:\n    - {warps: 32, live_values: 48}\n"), "{text}");
        let comment = text.replace("\n# ", " ");
        assert!(
            comment.contains("(at 32 warps a thread may hold 64 registers)"),
            "{text}"
        );
        // A block of 16 warps cannot list 16 as a context, nor a chain it does not measure.
        let mut q = study_probe();
        q.block_threads = 512;
        q.chains = vec![13];
        let p = with_defaults(&q);
        assert!(
            p.contexts.iter().all(|c| c.warps != Some(16)),
            "{:?}",
            p.contexts
        );
        assert_eq!(p.context_chains, [13]);
        // No chain in common: no contexts, and no section.
        q.chains = vec![5];
        let p = with_defaults(&q);
        assert!(p.contexts.is_empty() && p.context_chains.is_empty());
        assert_eq!(section(&p), "");
    }
}
