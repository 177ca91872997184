//! The drafted profile as YAML text, one section after another, each with the comment a
//! reviewer reads before committing it. Strings are written as JSON strings, which YAML
//! reads as double-quoted scalars, so that no GPU name or reason can break the file.

use super::ceilings::Ceilings;
use super::comments::{comment, comment_at, quoted};
use super::deviations::Deviation;
use super::steadiness::{reach, Wide, LEAST, MARGIN, STEP};
use crate::expectations::profile::{Invariant, Profile, Validity};
use crate::model::results::RunResults;
use crate::model::settings::{Mode, ProbeSettings};

/// What the sections are made from.
pub(super) struct Parts<'a> {
    pub(crate) name: &'a str,
    pub(crate) study: &'a Profile,
    /// The drafted probe: the study's, with the contexts the measurement holds.
    pub(crate) probe: &'a ProbeSettings,
    pub(crate) measured: &'a RunResults,
    /// How many runs were measured in the chosen mode (the blessed one among them).
    pub(crate) runs: usize,
    pub(crate) wider: &'a [Wide],
    pub(crate) gpu_name: &'a str,
    pub(crate) compute_capability: &'a str,
    pub(crate) mode: Mode,
    pub(crate) mode_why: &'a str,
    pub(crate) deviations: &'a [Deviation],
    pub(crate) ceilings: &'a Ceilings,
    pub(crate) validity: Validity,
    pub(crate) baselines_tolerance: f64,
    pub(crate) policy_file: Option<String>,
    pub(crate) recorded: &'a str,
    pub(crate) compile_architectures: &'a [&'a str],
    pub(crate) compile_toolchains: &'a [&'a str],
}

fn list<T: std::fmt::Display>(items: &[T]) -> String {
    let items: Vec<String> = items.iter().map(T::to_string).collect();
    format!("[{}]", items.join(", "))
}

/// The whole file: each section of the draft, in file order. A new profile section is one
/// more entry of this list and one function.
pub(super) fn profile(p: &Parts) -> String {
    [
        header(p),
        probe(p),
        super::contexts::section(p.probe),
        super::reductions::section(p.probe, p.measured),
        invariants(p),
        policy_gate(p),
        compile_only(p),
        validity(p),
        known_deviations(p),
        baselines(p),
        recorded(p),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect::<Vec<_>>()
    .join("\n")
}

fn when(r: &RunResults) -> String {
    r.environment.as_ref().map_or_else(
        || r.source.clone(),
        |e| {
            format!(
                "{}, driver {}, NVRTC {}",
                e.date.get(..10).unwrap_or(&e.date),
                e.driver_version,
                e.nvrtc_version
            )
        },
    )
}

fn header(p: &Parts) -> String {
    let mut s = comment(&[format!(
        "{} (compute capability {}): drafted by `cargo xtask onboard` from measurements of the study's probe on this GPU in serial and wave mode and {} more {} run(s), {}. Review every known deviation below before committing it; from then on the file is hand-written. The per-variant baselines it references are generated into baselines/{}.yaml.",
        p.gpu_name,
        p.compute_capability,
        p.runs.saturating_sub(1),
        p.mode.name(),
        when(p.measured),
        p.name
    )]);
    s.push_str(&format!("name: {}\n", p.name));
    s.push_str(&format!(
        "description: {}\n",
        quoted(&format!(
            "{} with the study's setup, drafted by cargo xtask onboard: the study's invariants, {} known deviation(s) measured on this GPU.",
            p.gpu_name,
            p.deviations.len()
        ))
    ));
    s.push_str("match:\n");
    s.push_str(&format!("  gpu_names: [{}]\n", quoted(p.gpu_name)));
    s.push_str(&format!(
        "  compute_capabilities: [{}]\n",
        quoted(p.compute_capability)
    ));
    s
}

fn probe(p: &Parts) -> String {
    let q = p.probe;
    let mut s = comment(&[format!(
        "The study's probe settings (profile {:?}).",
        p.study.name
    )]);
    s.push_str("probe:\n");
    s.push_str(&format!("  blocks: {}\n", q.blocks));
    s.push_str(&format!("  block_threads: {}\n", q.block_threads));
    s.push_str(&format!("  warmup_launches: {}\n", q.warmup_launches));
    s.push_str(&format!("  repeats: {}\n", q.repeats));
    s.push_str(&format!("  budget_cycles: {}\n", q.budget_cycles));
    s.push_str(&format!("  chains: {}\n", list(&q.chains)));
    s.push_str(&format!("  accumulators: {}\n", list(&q.accumulators)));
    s.push_str(&comment_at(
        "  ",
        &[format!(
            "{}, chosen by measuring both: {}. `ACCPROBE_MODE` measures in the other.",
            match p.mode {
                Mode::Wave => "Wave",
                Mode::Serial => "Serial",
            },
            p.mode_why
        )],
    ));
    s.push_str(&format!("  mode: {}\n", p.mode.name()));
    if !q.sink_modes.is_empty() {
        let modes: Vec<String> = q.sink_modes.iter().map(|m| format!("{m:?}")).collect();
        s.push_str(&format!(
            "\nsink_isolation:\n  modes: {}\n  accumulators: {}\n",
            list(&modes),
            list(&q.sink_accumulators)
        ));
    }
    s
}

fn invariants(p: &Parts) -> String {
    let mut s = comment(&["The study's invariants, as it states them.".into()]);
    s.push_str("invariants:\n");
    for inv in &p.study.invariants {
        s.push_str(&match inv {
            Invariant::Peak {
                accumulators,
                tolerance,
            } => format!("  - peak: {{accumulators: {accumulators}, tolerance: {tolerance:?}}}\n"),
            Invariant::GainGrows {
                accumulators,
                over,
                min_increase,
            } => format!(
                "  - gain_grows: {{accumulators: {accumulators}, over: {over}, min_increase: {min_increase:?}}}\n"
            ),
            Invariant::NoSpills => "  - no_spills: {}\n".into(),
        });
    }
    s
}

fn policy_gate(p: &Parts) -> String {
    match (&p.study.policy_gate, &p.policy_file) {
        (Some(g), Some(file)) => {
            let mut s = comment(&[format!(
                "The accumulator-split policy, gated as profile {:?} gates it.",
                p.study.name
            )]);
            s.push_str(&format!(
                "policy_gate:\n  file: {}\n  tolerance: {:?}\n",
                quoted(file),
                g.tolerance
            ));
            s
        }
        _ => String::new(),
    }
}

fn compile_only(p: &Parts) -> String {
    let mut s = comment(&[format!(
        "The compile-only gate (docs/toolchains.md): the matrix compiled for the GPUs CI does not have, under each NVRTC listed, on any machine. No digests file yet: add `baselines: baselines/{}-compile.yaml` here and run `cargo xtask toolchains --profile {} --bless` where the toolchains are installed (ci/toolchains.sh) to gate the SASS digests too.",
        p.name, p.name
    )]);
    let toolchains: Vec<String> = p.compile_toolchains.iter().map(|t| quoted(t)).collect();
    s.push_str(&format!(
        "compile_only:\n  architectures: {}\n  toolchains: {}\n",
        list(p.compile_architectures),
        list(&toolchains)
    ));
    s
}

fn validity(p: &Parts) -> String {
    let c = p.ceilings;
    let mut s = comment(&[format!(
        "Physical ceilings every measurement must respect, measured by the ceilings microbenchmark (kernels/ceilings.cu) on {}, driver {}, NVRTC {}, {}: dependent FFMA latency {:.3} cycles; {:.3} warp FFMAs issued per cycle per SM ({} warps), the warps that issue in one cycle: schedulers_per_sm. Rounded to whole numbers; each launch must take budget / SM clock within the tolerance.",
        c.gpu_name,
        c.driver_version,
        c.nvrtc_version,
        c.date.get(..10).unwrap_or(&c.date),
        c.ffma_latency_cycles,
        c.ffma_issue_per_cycle_per_sm,
        c.issue_warps
    )]);
    s.push_str(&format!(
        "validity:\n  ffma_latency_cycles: {}\n  schedulers_per_sm: {}\n  duration_tolerance: {:?}\n",
        p.validity.ffma_latency_cycles, p.validity.schedulers_per_sm, p.validity.duration_tolerance
    ));
    s
}

fn known_deviations(p: &Parts) -> String {
    if p.deviations.is_empty() {
        return comment(&[
            "Every case of the study holds on this measurement: no known deviations.".into(),
        ]);
    }
    let mut s = comment(&["The cases that do not hold on this measurement (REVIEW: each is reported ignored, and fails once it holds again).".into()]);
    s.push_str("known_deviations:\n");
    for d in p.deviations {
        s.push_str(&format!(
            "  - case: {}\n    reason: {}\n",
            quoted(&d.case),
            quoted(&d.reason)
        ));
    }
    s
}

fn baselines(p: &Parts) -> String {
    let mut s = format!(
        "baselines:\n  file: {}\n  tolerance: {:?}\n",
        quoted(&format!("baselines/{}.yaml", p.name)),
        p.baselines_tolerance
    );
    if p.wider.is_empty() {
        return s;
    }
    s.push_str(&comment_at(
        "  ",
        &[format!(
            "Variants whose median moved more than {:.1}% from its baseline ({MARGIN} times that is more than the tolerance) in some run onboarding measured ({} {} run(s), the blessed one among them, and the other mode's; {}, {}): each widened to {MARGIN} times its largest distance from it, rounded up to {:.1}%, at least {:.0}% (the H200's rule, docs/profiles.md). REVIEW: a width is what the gate no longer sees of that variant.",
            reach(p.baselines_tolerance) * 100.0,
            p.runs,
            p.mode.name(),
            p.gpu_name,
            when(p.measured),
            STEP * 100.0,
            LEAST * 100.0
        )],
    ));
    s.push_str("  wider:\n");
    for w in p.wider {
        s.push_str(&format!(
            "    {}:\n      tolerance: {:?}\n      reason: {}\n",
            quoted(&w.variant),
            w.tolerance,
            quoted(&w.reason)
        ));
    }
    s
}

fn recorded(p: &Parts) -> String {
    format!(
        "recorded:\n  source: {}\n  results: {}\n",
        quoted(&format!(
            "cargo xtask onboard on {}, {}",
            p.gpu_name,
            when(p.measured)
        )),
        quoted(p.recorded)
    )
}
