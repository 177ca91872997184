//! Stage 5 of the pipeline: results, as plain data (imported by every stage).
//!
//! What the measure stage produced (or what a study recorded), with the environment it
//! came from. Everything downstream (verdicts, tables, JUnit, baselines) reads this and
//! never a GPU. Stored as versioned JSON.

use crate::error::{Error, Result};
use crate::model::gpu::Environment;
use crate::model::settings::{Mode, RunSettings};
use crate::model::variant::{Sink, Variant};

fn is_sink_a(s: &Sink) -> bool {
    *s == Sink::A
}
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// Bumped whenever a field changes meaning. 2 added `settings` (and renamed a SASS
/// summary's `loop_chains` to `loop_partials`); 3 added a variant's `launch_timer` (what
/// timed its `launch_ms`; events in older files). Files of schema 1 and 2 are still read.
pub const SCHEMA: u32 = 3;
/// The oldest schema this accprobe reads.
pub const OLDEST_SCHEMA: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunResults {
    pub schema: u32,
    /// The profile the run was made under.
    pub profile: String,
    /// `measured` (this tool on a GPU) or where a recorded table came from.
    pub source: String,
    pub environment: Option<Environment>,
    pub variants: Vec<VariantResult>,
    /// How the variants shared the GPU while measured.
    #[serde(default)]
    pub mode: Mode,
    /// The launch settings the run was measured with (schema 2; `None` in schema 1 files,
    /// whose settings-dependent verdicts are then skipped with that reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<RunSettings>,
    /// Where the run's time went, when measured by this tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Why the variants carry no SASS (no disassembler on the machine), when they do not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sass_unavailable: Option<String>,
    /// Why the SASS the disassembler gave could not be read or summarised (a compiler
    /// change such as device debug code): then the SASS cases fail, never skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sass_unreadable: Option<String>,
    /// Whether the GPU was ours while it measured: the cross-process lock and the checks
    /// for other processes' work and clock throttling before and after each measurement.
    /// Absent in replays and in files from before these checks (schema 2 still).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
}

/// What the contention checks saw around a run's measurements.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contention {
    /// Checks made: one before and one after each measurement (or attempt at one).
    pub checks: u32,
    /// Measurements repeated (or postponed) because a check found the GPU shared or
    /// throttled.
    pub retries: u32,
    /// Seconds this process waited for another accprobe process to release the GPU.
    #[serde(default)]
    pub lock_wait_s: f64,
    /// Compute processes other than accprobe's seen on the GPU by any check, as NVML
    /// reports their PIDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_pids: Vec<u32>,
    /// Clock throttle reasons that slow the probe, seen by any check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// Variants whose measurement was still disturbed after the retries, with the cause:
    /// their timing cases are errors of the run, not verdicts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contaminated: BTreeMap<String, String>,
    /// Why the checks for other work could not be made (no NVML), when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
}

/// Host-side timings of a run, seconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timings {
    /// Compiling (or loading from the cache) and disassembling the matrix.
    pub compile_s: f64,
    /// Of which in NVRTC (0 on a cache hit).
    #[serde(default)]
    pub nvrtc_s: f64,
    /// Of which disassembling (or reading the cached SASS) and summarising it.
    #[serde(default)]
    pub sass_s: f64,
    /// How the compile cache served it: off, hit, miss or rebuilt.
    pub compile_cache: String,
    /// Measuring: every launch, poisoning and read-back included (not the device lock,
    /// the contention checks or the waits between attempts).
    pub gpu_s: f64,
}

/// What the SASS of one variant shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SassSummary {
    /// SHA-256 of the whole function's normalised instructions.
    pub digest: String,
    /// Local-memory instructions (`LDL`/`STL`) anywhere in the function.
    pub local_memory_instructions: Vec<String>,
    /// The measured loop, normalised: from the back branch's target to the back branch.
    pub loop_body: Vec<String>,
    /// FFMAs in the loop body.
    pub loop_ffma: u32,
    /// Distinct FFMA destination registers in the loop, in order of first appearance.
    pub loop_ffma_destinations: Vec<String>,
    /// Every loop FFMA's destination is also one of its sources (the accumulator).
    pub ffma_accumulates_in_place: bool,
    /// FFMAs per independent partial in the loop: a partial's dependency path starts at an
    /// FFMA whose sources no earlier loop FFMA wrote, and follows through FFMAs and MOVs.
    /// This counts partials even where ptxas renames registers between iterations (it does
    /// at N=29). (Schema 1 files called it `loop_chains`.)
    #[serde(alias = "loop_chains")]
    pub loop_partials: Vec<u32>,
}

/// The first 16 characters of a SASS digest, for messages. Safe on any text: a digest
/// read from a file may be short, or not hex at all (never slice it by bytes); control
/// characters are shown as U+FFFD so a message stays one line.
pub fn short_digest(digest: &str) -> String {
    digest
        .chars()
        .take(16)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

impl SassSummary {
    /// [`short_digest`] of this summary's digest.
    pub fn short_digest(&self) -> String {
        short_digest(&self.digest)
    }
}

/// What timed a variant's launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchTimer {
    /// CUDA events around each launch on its stream (they include the launch latency):
    /// serial mode.
    #[default]
    Events,
    /// The kernel's own `%globaltimer` around its loop, the longest warp of the launch:
    /// wave mode, where events would make the variants wait for each other.
    Kernel,
}

impl LaunchTimer {
    pub fn is_events(&self) -> bool {
        *self == LaunchTimer::Events
    }

    /// How a report names it.
    pub fn describe(&self) -> &'static str {
        match self {
            LaunchTimer::Events => "by CUDA events",
            LaunchTimer::Kernel => "by the kernel's %globaltimer",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VariantResult {
    pub name: String,
    pub chain: u32,
    pub accumulators: u32,
    pub effective: u32,
    /// The sink mode (`A`, the documented probe, when absent).
    #[serde(default, skip_serializing_if = "is_sink_a")]
    pub sink: Sink,
    /// Average progress (loop iterations per warp) over warps and repeats: the study's figure.
    pub mean_progress: f64,
    /// Present when per-warp samples exist (measured, not a recorded table).
    pub summary: Option<Summary>,
    /// Every warp's progress of every counted repeat: `samples[repeat][warp]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Vec<u64>>,
    pub resources: Option<Resources>,
    /// Problems found in the kernel's outputs (unwritten or non-finite elements); empty when valid.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_problems: Vec<String>,
    /// SM clock over the counted launches: budget cycles / elapsed %globaltimer time, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// What the SASS of the kernel that ran shows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sass: Option<SassSummary>,
    /// Each counted launch's duration, ms, as `launch_timer` took it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_ms: Vec<f64>,
    /// What timed `launch_ms` (CUDA events when absent: every file before schema 3).
    #[serde(default, skip_serializing_if = "LaunchTimer::is_events")]
    pub launch_timer: LaunchTimer,
    /// The SM (`%smid`) of each block of each counted launch: `sm_ids[repeat][block]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_ids: Vec<Vec<u32>>,
}

impl VariantResult {
    pub fn variant(&self) -> Variant {
        Variant::new(self.chain, self.accumulators).with_sink(self.sink)
    }

    /// The figure baselines hold: the median over warps and repeats when there are
    /// samples (robust to a minority of slow launches), else the recorded mean.
    pub fn baseline_progress(&self) -> f64 {
        self.summary.map_or(self.mean_progress, |s| s.median)
    }

    /// A result carrying only the study's averaged figure.
    pub fn recorded(variant: Variant, mean_progress: f64, resources: Option<Resources>) -> Self {
        VariantResult {
            name: variant.name(),
            chain: variant.chain,
            accumulators: variant.accumulators,
            effective: variant.effective(),
            sink: variant.sink,
            mean_progress,
            summary: None,
            samples: Vec::new(),
            resources,
            output_problems: Vec::new(),
            sm_clock_mhz: None,
            sass: None,
            launch_ms: Vec::new(),
            launch_timer: LaunchTimer::Events,
            sm_ids: Vec::new(),
        }
    }

    /// A measured result: the mean and summary come from the samples.
    pub fn measured(variant: Variant, samples: Vec<Vec<u64>>) -> Self {
        let summary = Summary::of(samples.iter().flatten().copied());
        let mut r = Self::recorded(variant, summary.map_or(0.0, |s| s.mean), None);
        r.summary = summary;
        r.samples = samples;
        r
    }
}

/// Registers and local memory of one compiled variant, from the ptxas report and the
/// loaded function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    pub registers: u32,
    pub stack_frame_bytes: u32,
    pub spill_store_bytes: u32,
    pub spill_load_bytes: u32,
    /// CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES of the loaded function.
    pub local_bytes: u32,
}

impl Resources {
    /// Everything that says registers went to local memory, as text; `None` when clean.
    pub fn spill_report(&self) -> Option<String> {
        let mut found = Vec::new();
        if self.spill_store_bytes > 0 {
            found.push(format!("{} bytes spill stores", self.spill_store_bytes));
        }
        if self.spill_load_bytes > 0 {
            found.push(format!("{} bytes spill loads", self.spill_load_bytes));
        }
        if self.local_bytes > 0 {
            found.push(format!("{} bytes local memory", self.local_bytes));
        }
        (!found.is_empty()).then(|| found.join(", "))
    }
}

/// Mean, median, extremes and relative spread of a set of progress samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Summary {
    pub count: u64,
    pub mean: f64,
    /// The middle sample, or the mean of the two middle ones for an even count.
    pub median: f64,
    pub min: u64,
    pub max: u64,
    /// (max - min) / mean.
    pub relative_spread: f64,
}

impl Summary {
    /// `None` for no samples.
    pub fn of(samples: impl IntoIterator<Item = u64>) -> Option<Summary> {
        let mut v: Vec<u64> = samples.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let median = if n % 2 == 1 {
            v[n / 2] as f64
        } else {
            (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
        };
        let (min, max) = (v[0], v[n - 1]);
        let relative_spread = if mean > 0.0 {
            (max - min) as f64 / mean
        } else {
            0.0
        };
        Some(Summary {
            count: n as u64,
            mean,
            median,
            min,
            max,
            relative_spread,
        })
    }
}

impl RunResults {
    pub fn get(&self, v: Variant) -> Option<&VariantResult> {
        self.variants.iter().find(|r| r.variant() == v)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialise")
    }

    /// Whether the file is consistent with itself, before any verdict reads it: every
    /// problem found, each naming its variant. A recorded table (a mean, no samples, no
    /// summary) is consistent; a measured variant's summary and mean must be what its
    /// samples give, its samples must be whole repeats of every warp of the recorded
    /// settings, below the physical ceiling (one loop iteration per budget cycle at most;
    /// never the poison value), its launch times and SMs one per repeat, every
    /// local-memory instruction in its loop must be listed in its SASS summary, and the
    /// summary's loop figures (FFMAs, destinations, in place, partials) must be what its
    /// stored loop body gives ([`loop_shape`], the compile stage's own function).
    pub fn check(&self) -> Result<(), Vec<String>> {
        let problems: Vec<String> = self.problems().into_iter().map(|(_, p)| p).collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems)
        }
    }

    /// Each problem [`RunResults::check`] finds, with the index of the variant entry it is
    /// about.
    fn problems(&self) -> Vec<(usize, String)> {
        let mut out = Vec::new();
        let mut seen: Vec<Variant> = Vec::new();
        for (i, r) in self.variants.iter().enumerate() {
            let v = r.variant();
            let mut say =
                |p: String| out.push((i, format!("variant {:?} (entry {}): {p}", r.name, i + 1)));
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
            if seen.contains(&v) {
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
                for p in shape_problems(sass) {
                    say(p);
                }
            }
        }
        out
    }

    pub fn from_json(text: &str, file: &Path) -> Result<RunResults> {
        let r: RunResults = serde_json::from_str(text).map_err(|e| {
            Error::at(
                file,
                e.line() as u64,
                e.column() as u64,
                // serde_json quotes the offending value (keep it short and printable), and
                // its text ends with " at line L column C": the position is already in
                // front, as file:line:col.
                format!(
                    "not a results file: {}",
                    crate::error::excerpt(
                        e.to_string().trim_end_matches(&format!(
                            " at line {} column {}",
                            e.line(),
                            e.column()
                        )),
                        300
                    )
                ),
            )
        })?;
        if !(OLDEST_SCHEMA..=SCHEMA).contains(&r.schema) {
            return Err(Error::in_file(
                file,
                format!(
                    "results schema {} is not one this accprobe reads ({OLDEST_SCHEMA} to {SCHEMA})",
                    r.schema
                ),
            ));
        }
        let problems = r.problems();
        if let Some(&(first, _)) = problems.first() {
            let message = format!(
                "inconsistent results, refused before any verdict reads them: {}",
                problems
                    .iter()
                    .map(|(_, p)| p.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            );
            return Err(match variant_position(text, first) {
                Some((line, column)) => Error::at(file, line, column, message),
                None => Error::in_file(file, message),
            });
        }
        Ok(r)
    }

    pub fn load(file: &Path) -> Result<RunResults> {
        let text = crate::input::read_text(file, "results", crate::input::RESULTS_LIMIT)?;
        Self::from_json(&text, file)
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
        (Some(s), false) => {
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
    }
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
        let warps = s.warps() as usize;
        if let Some(i) = r.samples.iter().position(|w| w.len() != warps) {
            say(format!(
                "repeat {i} has {} samples, but the settings launch {warps} warps ({} blocks of {} threads)",
                r.samples[i].len(),
                s.blocks,
                s.block_threads
            ));
        }
        if repeats != s.repeats as usize {
            say(format!(
                "{repeats} repeats of samples, but the settings ask for {}",
                s.repeats
            ));
        }
    }
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

/// A SASS instruction's text without its predicate: `@!P0 BRA 0x10` -> `BRA 0x10`. The
/// predicate ends at any run of whitespace (a run of spaces or a tab once made the opcode
/// read differently in the compile stage and in the normalised loop body; found by the
/// sass fuzz target).
fn unpredicated(text: &str) -> &str {
    let t = text.trim_start();
    if t.starts_with('@') {
        t.split_once(char::is_whitespace)
            .map_or("", |x| x.1.trim_start())
    } else {
        t
    }
}

/// The opcode of a SASS instruction's text, its predicate and modifiers dropped:
/// `@P0 STL.64 [R1], R2` -> `STL`. The one definition, which the compile stage's parser
/// (`compile::sass`) and the results check share.
pub fn sass_opcode(text: &str) -> &str {
    let op = unpredicated(text).split_whitespace().next().unwrap_or("");
    op.split('.').next().unwrap_or(op)
}

/// A SASS instruction's operands, `.reuse` flags removed:
/// `FFMA R10, R10, R9.reuse, UR8` -> [R10, R10, R9, UR8].
pub fn sass_operands(text: &str) -> Vec<String> {
    let rest = unpredicated(text)
        .split_once(char::is_whitespace)
        .map_or("", |x| x.1);
    rest.split(',')
        .map(|o| o.trim().replace(".reuse", ""))
        .filter(|o| !o.is_empty())
        .collect()
}

/// For each instruction of a loop body, the FFMA chain (partial accumulator) it extends,
/// numbered in order of first appearance; `None` for anything but an FFMA. A chain starts
/// at an FFMA whose sources no earlier FFMA of the chain wrote, and follows through FFMAs
/// and MOVs; any other instruction writing a register ends what it held.
pub fn chain_of_each<S: AsRef<str>>(body: &[S]) -> Vec<Option<usize>> {
    let mut holder: BTreeMap<String, usize> = BTreeMap::new();
    let mut next = 0;
    let mut out = Vec::new();
    for i in body {
        let ops = sass_operands(i.as_ref());
        let Some(dest) = ops
            .first()
            .filter(|d| d.starts_with('R') && *d != "RZ")
            .cloned()
        else {
            out.push(None);
            continue;
        };
        match sass_opcode(i.as_ref()) {
            "FFMA" => {
                let chain = ops[1..]
                    .iter()
                    .find_map(|s| holder.get(s).copied())
                    .unwrap_or_else(|| {
                        next += 1;
                        next - 1
                    });
                holder.insert(dest, chain);
                out.push(Some(chain));
                continue;
            }
            "MOV" => match ops.get(1).and_then(|s| holder.get(s).copied()) {
                Some(c) => {
                    holder.insert(dest, c);
                }
                None => {
                    holder.remove(&dest);
                }
            },
            _ => {
                holder.remove(&dest);
            }
        }
        out.push(None);
    }
    out
}

/// What a loop body alone determines of a [`SassSummary`]: its FFMAs, their destinations,
/// whether they accumulate in place, and the partials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopShape {
    pub loop_ffma: u32,
    pub loop_ffma_destinations: Vec<String>,
    pub ffma_accumulates_in_place: bool,
    pub loop_partials: Vec<u32>,
}

/// The [`LoopShape`] of a normalised loop body: what the compile stage stores in a
/// summary, and what [`RunResults::check`] recomputes from the stored body.
pub fn loop_shape<S: AsRef<str>>(body: &[S]) -> LoopShape {
    let ffmas: Vec<&str> = body
        .iter()
        .map(AsRef::as_ref)
        .filter(|i| sass_opcode(i) == "FFMA")
        .collect();
    let mut dests: Vec<String> = Vec::new();
    let mut in_place = !ffmas.is_empty();
    for f in &ffmas {
        let ops = sass_operands(f);
        let Some(d) = ops.first() else { continue };
        if !dests.contains(d) {
            dests.push(d.clone());
        }
        in_place &= ops[1..].contains(d);
    }
    let mut partials: Vec<u32> = Vec::new();
    for c in chain_of_each(body).into_iter().flatten() {
        if c >= partials.len() {
            partials.resize(c + 1, 0);
        }
        partials[c] += 1;
    }
    LoopShape {
        loop_ffma: ffmas.len() as u32,
        loop_ffma_destinations: dests,
        ffma_accumulates_in_place: in_place,
        loop_partials: partials,
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
fn variant_position(text: &str, index: usize) -> Option<(u64, u64)> {
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
    use approx::assert_relative_eq;

    #[test]
    fn a_file_that_is_not_results_gives_its_position_once() {
        let e = RunResults::from_json("# README\n", Path::new("README.md")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "README.md:1:1: not a results file: expected value"
        );
    }

    #[test]
    fn median_is_the_mean_of_the_middle_pair_for_even_counts() {
        let s = Summary::of([4, 1, 3, 2]).unwrap();
        assert_relative_eq!(s.median, 2.5);
        assert_relative_eq!(s.mean, 2.5);
        let s = Summary::of([5, 1, 3]).unwrap();
        assert_relative_eq!(s.median, 3.0);
        assert_eq!((s.min, s.max, s.count), (1, 5, 3));
    }

    #[test]
    fn spread_is_range_over_mean() {
        let s = Summary::of([90, 100, 110]).unwrap();
        assert_relative_eq!(s.relative_spread, 0.2);
        assert!(Summary::of([]).is_none());
        assert_relative_eq!(Summary::of([7, 7]).unwrap().relative_spread, 0.0);
    }

    #[test]
    fn measured_result_takes_its_mean_from_every_warp_of_every_repeat() {
        let r = VariantResult::measured(Variant::new(7, 2), vec![vec![10, 20], vec![30, 40]]);
        assert_relative_eq!(r.mean_progress, 25.0);
        assert_eq!(r.summary.unwrap().count, 4);
        assert_eq!(r.name, "chain7_acc2_effective2");
    }

    #[test]
    fn json_round_trips_and_rejects_other_schemas_with_position() {
        let r = RunResults {
            schema: SCHEMA,
            mode: Default::default(),
            settings: None,
            profile: "p".into(),
            source: "measured".into(),
            environment: None,
            variants: vec![VariantResult::measured(Variant::new(7, 1), vec![vec![3]])],
            sass_unavailable: None,
            sass_unreadable: None,
            timings: None,
            contention: None,
        };
        let path = Path::new("r.json");
        assert_eq!(RunResults::from_json(&r.to_json(), path).unwrap(), r);
        let other = r
            .to_json()
            .replace(&format!("\"schema\": {SCHEMA}"), "\"schema\": 99");
        let e = RunResults::from_json(&other, path).unwrap_err();
        assert!(e.to_string().contains("schema 99"), "{e}");
        let e = RunResults::from_json("{\n  \"schema\": 2,\n  \"bogus\": 2\n}", path).unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(3), "{e}");
        assert!(e.to_string().starts_with("r.json:3:"), "{e}");
    }

    #[test]
    fn loop_shape_counts_ffmas_partials_and_in_place_accumulation() {
        let body = [
            // Normalised, as a results file stores them: no address, no `;`.
            "FFMA R10, R10, R9.reuse, UR8",
            "@P0 FFMA R11, R11, R9, UR8",
            "MOV R12, R10",
            "FFMA R12, R12, R9, UR8",
            "IADD3 R2, R2, 0x1, RZ",
            "@P1 BRA -5",
        ];
        assert_eq!(
            loop_shape(&body),
            LoopShape {
                loop_ffma: 3,
                loop_ffma_destinations: vec!["R10".into(), "R11".into(), "R12".into()],
                ffma_accumulates_in_place: true,
                loop_partials: vec![2, 1],
            }
        );
        let none: [&str; 0] = [];
        assert_eq!(loop_shape(&none).loop_ffma, 0);
        assert!(!loop_shape(&none).ffma_accumulates_in_place);
        assert_eq!(sass_opcode("@!P0\tSTL.64 [R1], R2"), "STL");
    }

    #[test]
    fn short_digests_never_panic_on_short_or_non_ascii_text() {
        assert_eq!(short_digest("ab"), "ab");
        assert_eq!(short_digest(""), "");
        assert_eq!(short_digest(&"é".repeat(20)), "é".repeat(16));
        assert_eq!(short_digest("0123456789abcdef0123"), "0123456789abcdef");
        assert_eq!(short_digest("a\nb"), "a\u{fffd}b");
    }

    #[test]
    fn spill_report_names_each_source() {
        assert_eq!(Resources::default().spill_report(), None);
        let r = Resources {
            spill_store_bytes: 8,
            local_bytes: 16,
            ..Default::default()
        };
        assert_eq!(
            r.spill_report().unwrap(),
            "8 bytes spill stores, 16 bytes local memory"
        );
    }
}
