//! Whether a results file is consistent with itself, before any verdict reads it.

use super::REDUCTIONS_SCHEMA;
use super::{loop_shape, sass_opcode, RunResults, SassSummary, Summary, VariantResult};
use crate::model::settings::RunSettings;
use crate::model::variant::{Sink, Variant, REDUCTION_ITEMS};

/// One thing wrong with a results file: the variant entry it is about (its index in
/// `variants`, 0-based, and its name) and what is wrong with it, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("variant {variant:?} (entry {}): {what}", .entry + 1)]
pub struct Problem {
    pub entry: usize,
    pub variant: String,
    pub(crate) what: String,
}

/// Every [`Problem`] [`RunResults::check`] finds, in the order of the entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Inconsistent {
    pub problems: Vec<Problem>,
}

impl RunResults {
    /// Whether the file is consistent with itself, before any verdict reads it: every
    /// problem found, each naming its variant. A recorded table (a mean, no samples, no
    /// summary) is consistent; a measured variant's summary and mean must be what its
    /// samples give, its samples must be whole repeats of every warp of the recorded
    /// settings, below the physical ceiling (one loop iteration per budget cycle at most;
    /// never the poison value), its launch times and SMs one per repeat, every
    /// local-memory instruction in its loop must be listed in its SASS summary, and the
    /// summary's loop figures (FFMAs, destinations, in place, partials) must be what its
    /// stored loop body gives (`loop_shape`, the compile stage's own function).
    pub fn check(&self) -> Result<(), Inconsistent> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Inconsistent { problems })
        }
    }

    /// Each problem [`RunResults::check`] finds.
    fn problems(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        let mut seen: Vec<Variant> = Vec::new();
        for (i, r) in self.variants.iter().enumerate() {
            let v = r.variant();
            let mut say = |what: String| {
                out.push(Problem {
                    entry: i,
                    variant: r.name.clone(),
                    what,
                })
            };
            if r.chain == 0 || r.accumulators == 0 {
                say(format!(
                    "chain {} and accumulators {} must both be at least 1",
                    r.chain, r.accumulators
                ));
            }
            if r.effective != v.effective() {
                say(format!(
                    "effective {} is not min(accumulators {}, chain {}) = {}",
                    r.effective,
                    r.accumulators,
                    r.chain,
                    v.effective()
                ));
            }
            if r.name != v.name() {
                say(format!(
                    "the name does not match chain {}, accumulators {}, sink {}: expected {:?}",
                    r.chain,
                    r.accumulators,
                    r.sink.letter(),
                    v.name()
                ));
            }
            if !v.workload.is_probe() {
                // A real accumulation's name leaves chain and sink out: they are fixed, so
                // the name check above cannot catch a wrong one.
                if r.chain != REDUCTION_ITEMS || r.sink != Sink::A {
                    say(format!(
                        "a real accumulation has chain {REDUCTION_ITEMS} and sink A, not chain {} and sink {}",
                        r.chain,
                        r.sink.letter()
                    ));
                }
                if r.accumulators > REDUCTION_ITEMS {
                    say(format!(
                        "accumulators {} is more than the {REDUCTION_ITEMS} elements a thread handles an iteration",
                        r.accumulators
                    ));
                }
                if self.schema < REDUCTIONS_SCHEMA {
                    say(format!(
                        "a real accumulation in a schema {} file: they exist from schema {REDUCTIONS_SCHEMA}",
                        self.schema
                    ));
                }
            }
            if seen.iter().any(|s| s.name() == v.name()) {
                say(format!("a second entry for {v}: each variant appears once"));
            }
            seen.push(v);
            samples_problems(r, self.settings.as_ref(), &mut say);
            if let Some(sass) = &r.sass {
                for unlisted in unlisted_local_memory(sass) {
                    say(format!(
                        "the SASS loop body has {unlisted:?}, which local_memory_instructions does not list"
                    ));
                }
                for p in shape_problems(sass)
                    .into_iter()
                    .chain(super::schedule::schedule_problems(sass))
                {
                    say(p);
                }
            }
        }
        out
    }
}

/// Two summary figures agree: equal, or within 1e-9 relative (JSON round trips of sums).
fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// What is wrong with a variant's samples, summary and per-repeat records.
fn samples_problems(
    r: &VariantResult,
    settings: Option<&RunSettings>,
    say: &mut impl FnMut(String),
) {
    match (&r.summary, r.samples.is_empty()) {
        (None, true) => {
            // A recorded table: a mean and nothing else; nothing per repeat either.
            if !r.launch_ms.is_empty() || !r.sm_ids.is_empty() {
                say("launch times or SMs without samples".into());
            }
            return;
        }
        (Some(_), true) => {
            say(
                "a summary without samples: the summary cannot be checked, so it is not trusted"
                    .into(),
            );
            return;
        }
        (None, false) => say("samples without a summary".into()),
        (Some(s), false) => summary_problems(r, s, say),
    }
    repeat_problems(r, settings, say);
    sample_problems(r, settings, say);
    record_problems(r, settings, say);
}

/// Where the stored summary `s` (and the mean) contradicts the samples it summarises.
fn summary_problems(r: &VariantResult, s: &Summary, say: &mut impl FnMut(String)) {
    if let Some(again) = Summary::of(r.samples.iter().flatten().copied()) {
        let mut differs = Vec::new();
        if s.count != again.count {
            differs.push(format!("count {} (samples: {})", s.count, again.count));
        }
        if s.min != again.min {
            differs.push(format!("min {} (samples: {})", s.min, again.min));
        }
        if s.max != again.max {
            differs.push(format!("max {} (samples: {})", s.max, again.max));
        }
        for (name, stored, from_samples) in [
            ("mean", s.mean, again.mean),
            ("median", s.median, again.median),
            ("relative_spread", s.relative_spread, again.relative_spread),
        ] {
            if !close(stored, from_samples) {
                differs.push(format!("{name} {stored} (samples: {from_samples})"));
            }
        }
        if !differs.is_empty() {
            say(format!(
                "the summary contradicts the samples: {}",
                differs.join(", ")
            ));
        }
        if !close(r.mean_progress, again.mean) {
            say(format!(
                "mean_progress {} is not the mean of the samples ({})",
                r.mean_progress, again.mean
            ));
        }
    }
}

/// Whether every repeat measured every warp, as many repeats as the settings ask for.
fn repeat_problems(
    r: &VariantResult,
    settings: Option<&RunSettings>,
    say: &mut impl FnMut(String),
) {
    let repeats = r.samples.len();
    if let Some(i) = r.samples.iter().position(Vec::is_empty) {
        say(format!("repeat {i} has no samples"));
    }
    let first = r.samples[0].len();
    if let Some(i) = r.samples.iter().position(|w| w.len() != first) {
        say(format!(
            "repeat {i} has {} warps' samples, repeat 0 has {first}: every repeat measures every warp",
            r.samples[i].len()
        ));
    }
    if let Some(s) = settings {
        let v = r.variant();
        let warps = s.warps_of(&v) as usize;
        if let Some(i) = r.samples.iter().position(|w| w.len() != warps) {
            say(format!(
                "repeat {i} has {} samples, but the settings launch {warps} warps ({} blocks of {} threads)",
                r.samples[i].len(),
                s.blocks,
                s.block_threads_of(&v)
            ));
        }
        if repeats != s.repeats as usize {
            say(format!(
                "{repeats} repeats of samples, but the settings ask for {}",
                s.repeats
            ));
        }
    }
}

/// Samples no warp can have written: the poison value, more iterations than cycles.
fn sample_problems(
    r: &VariantResult,
    settings: Option<&RunSettings>,
    say: &mut impl FnMut(String),
) {
    let ceiling = settings.map_or(u64::MAX - 1, |s| s.budget_cycles);
    for (i, row) in r.samples.iter().enumerate() {
        if let Some(w) = row.iter().position(|&p| p == u64::MAX) {
            say(format!(
                "repeat {i} warp {w} holds the poison value {}: that warp never wrote its progress",
                u64::MAX
            ));
        } else if let Some(w) = row.iter().position(|&p| p > ceiling) {
            say(format!(
                "repeat {i} warp {w} made {} iterations, more than its budget of {ceiling} cycles allows (at most one iteration per cycle)",
                row[w]
            ));
        }
    }
}

/// Whether the per-repeat records (launch times, the blocks' SMs) match the repeats.
fn record_problems(
    r: &VariantResult,
    settings: Option<&RunSettings>,
    say: &mut impl FnMut(String),
) {
    let repeats = r.samples.len();
    if !r.launch_ms.is_empty() && r.launch_ms.len() != repeats {
        say(format!(
            "{} launch times for {repeats} repeats",
            r.launch_ms.len()
        ));
    }
    if !r.sm_ids.is_empty() {
        if r.sm_ids.len() != repeats {
            say(format!(
                "{} repeats of SM ids for {repeats} repeats",
                r.sm_ids.len()
            ));
        }
        if let Some(s) = settings {
            if let Some(i) = r.sm_ids.iter().position(|b| b.len() != s.blocks as usize) {
                say(format!(
                    "repeat {i} records the SMs of {} blocks, but the settings launch {}",
                    r.sm_ids[i].len(),
                    s.blocks
                ));
            }
        }
    }
}

/// Where a summary's loop figures differ from what its stored loop body gives.
fn shape_problems(sass: &SassSummary) -> Vec<String> {
    let got = loop_shape(&sass.loop_body);
    let mut out = Vec::new();
    if sass.loop_ffma != got.loop_ffma {
        out.push(format!(
            "the SASS summary says loop_ffma {}, but its loop_body has {} FFMAs",
            sass.loop_ffma, got.loop_ffma
        ));
    }
    if sass.loop_ffma_destinations != got.loop_ffma_destinations {
        out.push(format!(
            "the SASS summary says loop_ffma_destinations {:?}, but its loop_body gives {:?}",
            sass.loop_ffma_destinations, got.loop_ffma_destinations
        ));
    }
    if sass.ffma_accumulates_in_place != got.ffma_accumulates_in_place {
        out.push(format!(
            "the SASS summary says ffma_accumulates_in_place {}, but its loop_body gives {}",
            sass.ffma_accumulates_in_place, got.ffma_accumulates_in_place
        ));
    }
    if sass.loop_partials != got.loop_partials {
        out.push(format!(
            "the SASS summary says loop_partials {:?}, but its loop_body gives {:?}",
            sass.loop_partials, got.loop_partials
        ));
    }
    out
}

/// The loop body's local-memory instructions that `local_memory_instructions` (entries
/// `/*addr*/ TEXT`) does not list, each entry matching one loop instruction at most.
fn unlisted_local_memory(sass: &SassSummary) -> Vec<String> {
    let mut listed: Vec<String> = sass
        .local_memory_instructions
        .iter()
        .map(|e| {
            let t = e.trim_start();
            let t = match t.strip_prefix("/*").and_then(|x| x.split_once("*/")) {
                Some((_, rest)) => rest,
                None => t,
            };
            t.split_whitespace().collect::<Vec<_>>().join(" ")
        })
        .collect();
    let mut unlisted = Vec::new();
    for i in &sass.loop_body {
        if !matches!(sass_opcode(i), "STL" | "LDL") {
            continue;
        }
        let normal = i.split_whitespace().collect::<Vec<_>>().join(" ");
        match listed.iter().position(|l| *l == normal) {
            Some(k) => {
                listed.swap_remove(k);
            }
            None => unlisted.push(i.clone()),
        }
    }
    unlisted
}

/// Line and column of the `index`-th variant entry's `"name"` key in a results file's
/// text, if it can be found. Only a variant has a `"name"` key (the environment's is
/// `"gpu_name"`), and one inside a string would be escaped, so the `index`-th such key is
/// that entry's.
pub(super) fn variant_position(text: &str, index: usize) -> Option<(u64, u64)> {
    let mut from = 0;
    let mut found = 0;
    while let Some(k) = text[from..].find("\"name\"") {
        let at = from + k;
        from = at + 6;
        if !text[from..].trim_start().starts_with(':') {
            continue;
        }
        if found == index {
            let before = &text[..at];
            let line = before.matches('\n').count() as u64 + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as u64 + 1;
            return Some((line, column));
        }
        found += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::variant::Workload;

    /// The committed H200 run, as a schema-5 file with one real accumulation: `dot_acc4`
    /// carrying the first probe entry's samples (so that only what is changed can fail).
    fn with_dot() -> RunResults {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut r = RunResults::load(
            &root.join("expectations/recorded/h200-2026-12-04-contexts-wave.json"),
        )
        .unwrap();
        r.schema = REDUCTIONS_SCHEMA;
        let mut dot = r.variants[0].clone();
        dot.workload = Workload::Dot;
        (dot.chain, dot.accumulators, dot.effective) = (REDUCTION_ITEMS, 4, 4);
        dot.name = "dot_acc4".into();
        dot.sass = None;
        r.variants.push(dot);
        r
    }

    fn said(r: &RunResults) -> Vec<String> {
        r.problems().into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn a_real_accumulation_with_a_wrong_chain_sink_k_schema_or_twice_is_inconsistent() {
        assert_eq!(said(&with_dot()), Vec::<String>::new());
        let mut r = with_dot();
        let dot = r.variants.last_mut().unwrap();
        (dot.chain, dot.effective) = (7, 4);
        let s = said(&r);
        assert!(
            s.len() == 1 && s[0].contains("\"dot_acc4\"") && s[0].contains("not chain 7"),
            "{s:?}"
        );
        let mut r = with_dot();
        r.variants.last_mut().unwrap().sink = Sink::B;
        assert!(
            said(&r).iter().any(|p| p.contains("and sink B")),
            "{:?}",
            said(&r)
        );
        let mut r = with_dot();
        let dot = r.variants.last_mut().unwrap();
        (dot.accumulators, dot.effective, dot.name) = (300, REDUCTION_ITEMS, "dot_acc300".into());
        assert!(
            said(&r)
                .iter()
                .any(|p| p.contains("accumulators 300 is more than the 16")),
            "{:?}",
            said(&r)
        );
        let mut r = with_dot();
        r.schema = REDUCTIONS_SCHEMA - 1;
        assert!(
            said(&r).iter().any(|p| p.contains("in a schema 4 file")),
            "{:?}",
            said(&r)
        );
        // Two entries of one name, though one claims another chain: a second entry.
        let mut r = with_dot();
        let mut again = r.variants.last().unwrap().clone();
        again.chain = 7;
        r.variants.push(again);
        assert!(
            said(&r)
                .iter()
                .any(|p| p.contains("a second entry for dot_acc4")),
            "{:?}",
            said(&r)
        );
    }
}
