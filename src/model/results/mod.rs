//! Stage 5 of the pipeline: results, as plain data (imported by every stage).
//!
//! What the measure stage produced (or what a study recorded), with the environment it
//! came from. Everything downstream (verdicts, tables, JUnit, baselines) reads this and
//! never a GPU. Stored as versioned JSON.
//!
//! This file holds the types, the schema and the reader; beside it, `check.rs` is the
//! self-consistency check every file passes before a verdict reads it, `loop_shape.rs` the
//! shape of a SASS loop body, and `contention.rs` what the contention checks saw.

mod carried;
mod check;
mod contention;
mod loop_shape;
mod schedule;

pub(crate) use carried::carried_chains;
pub use contention::Contention;
pub(crate) use loop_shape::{
    chain_of_each, loop_shape, sass_opcode, sass_operands, single_dependent_chain,
    without_side_chains,
};
pub use schedule::{renumber, schedule_digest, total_stall, Control};

use crate::error::{Error, Result};
use crate::model::gpu::Environment;
use crate::model::settings::{Mode, RunSettings};
use crate::model::variant::{Context, Sink, Variant, Workload};
use serde::{Deserialize, Serialize};
use std::path::Path;

fn is_sink_a(s: &Sink) -> bool {
    *s == Sink::A
}

/// Bumped whenever a field changes meaning. 2 added `settings` (and renamed a SASS
/// summary's `loop_chains` to `loop_partials`); 3 added a variant's `launch_timer` (what
/// timed its `launch_ms`; events in older files); 4 added a variant's `context` (the base
/// context in older files); 5 added a variant's `workload` (the probe in older files).
/// Files of schema 1 to 4 are still read.
pub const SCHEMA: u32 = 5;
/// The oldest schema this accprobe reads.
pub(crate) const OLDEST_SCHEMA: u32 = 1;
/// The first schema that can hold a context other than the base.
pub const CONTEXTS_SCHEMA: u32 = 4;
/// The first schema that can hold a real accumulation (docs/study.md, "Real reductions").
pub const REDUCTIONS_SCHEMA: u32 = 5;

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
    pub(crate) ffma_accumulates_in_place: bool,
    /// FFMAs per independent partial in the loop: a partial's dependency path starts at an
    /// FFMA whose sources no earlier loop FFMA wrote, and follows through FFMAs and MOVs.
    /// This counts partials even where ptxas renames registers between iterations (it does
    /// at N=29). (Schema 1 files called it `loop_chains`.)
    #[serde(alias = "loop_chains")]
    pub loop_partials: Vec<u32>,
    /// The measured loop's schedule: each loop instruction's control fields in
    /// [`Control`]'s notation, scoreboards renumbered by first use in the loop ([`renumber`]);
    /// empty where they were not decoded (see `schedule_unknown`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loop_control: Vec<String>,
    /// The loop's [`schedule_digest`] (normalised text and `loop_control`); `None` where
    /// the control fields were not decoded. Files written before it existed have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_digest: Option<String>,
    /// Why the control fields were not decoded: `control fields not decoded: layout of
    /// sm_100 unknown`, or the listing carries no encodings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_unknown: Option<String>,
}

/// The first 16 characters of a SASS digest, for messages. Safe on any text: a digest
/// read from a file may be short, or not hex at all (never slice it by bytes); control
/// characters are shown as U+FFFD so a message stays one line.
pub(crate) fn short_digest(digest: &str) -> String {
    digest
        .chars()
        .take(16)
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

impl SassSummary {
    /// `short_digest` of this summary's digest.
    pub fn short_digest(&self) -> String {
        short_digest(&self.digest)
    }
}

/// What timed a variant's launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum LaunchTimer {
    /// CUDA events around each launch on its stream (they include the launch latency):
    /// serial mode.
    #[default]
    Events,
    /// The kernel's own `%globaltimer` around its loop, the longest warp of the launch:
    /// wave mode, where events would make the variants wait for each other.
    Kernel,
}

impl LaunchTimer {
    pub(crate) fn is_events(&self) -> bool {
        *self == LaunchTimer::Events
    }

    /// How a report names it.
    pub(crate) fn describe(&self) -> &'static str {
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
    pub(crate) effective: u32,
    /// The sink mode (`A`, the documented probe, when absent).
    #[serde(default, skip_serializing_if = "is_sink_a")]
    pub sink: Sink,
    /// The context (the base, the documented probe's, when absent).
    #[serde(default, skip_serializing_if = "Context::is_base")]
    pub context: Context,
    /// The kernel (the probe when absent).
    #[serde(default, skip_serializing_if = "Workload::is_probe_ref")]
    pub workload: Workload,
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
    pub(crate) launch_timer: LaunchTimer,
    /// The SM (`%smid`) of each block of each counted launch: `sm_ids[repeat][block]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sm_ids: Vec<Vec<u32>>,
}

impl VariantResult {
    pub fn variant(&self) -> Variant {
        Variant {
            workload: self.workload,
            ..Variant::new(self.chain, self.accumulators)
                .with_sink(self.sink)
                .with_context(self.context)
        }
    }

    /// The figure baselines hold: the median over warps and repeats when there are
    /// samples (robust to a minority of slow launches), else the recorded mean.
    pub fn baseline_progress(&self) -> f64 {
        self.summary.map_or(self.mean_progress, |s| s.median)
    }

    /// A result carrying only the study's averaged figure.
    pub(crate) fn recorded(
        variant: Variant,
        mean_progress: f64,
        resources: Option<Resources>,
    ) -> Self {
        VariantResult {
            name: variant.name(),
            chain: variant.chain,
            accumulators: variant.accumulators,
            effective: variant.effective(),
            sink: variant.sink,
            context: variant.context,
            workload: variant.workload,
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
    pub(crate) fn spill_report(&self) -> Option<String> {
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
    pub(crate) count: u64,
    pub mean: f64,
    /// The middle sample, or the mean of the two middle ones for an even count
    /// (`model::median`).
    pub median: f64,
    pub(crate) min: u64,
    pub max: u64,
    /// (max - min) / mean.
    pub(crate) relative_spread: f64,
}

impl Summary {
    /// `None` for no samples.
    pub(crate) fn of(samples: impl IntoIterator<Item = u64>) -> Option<Summary> {
        let mut v: Vec<u64> = samples.into_iter().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let n = v.len();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let median = crate::model::median::median(v.iter().map(|&x| x as f64))?;
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

    /// Whether `v` is a variant this file cannot hold: a context variant in a file written
    /// before contexts existed (schema below [`CONTEXTS_SCHEMA`]), or a real accumulation
    /// in one written before them ([`REDUCTIONS_SCHEMA`]), and no result for it.
    /// Such a run is not judged on `v`, never failed or passed for it.
    pub(crate) fn predates(&self, v: Variant) -> bool {
        let newer = if !v.workload.is_probe() {
            REDUCTIONS_SCHEMA
        } else if !v.is_base() {
            CONTEXTS_SCHEMA
        } else {
            return false;
        };
        self.schema < newer && self.get(v).is_none()
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialise")
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
                    crate::text::excerpt(
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
        if let Err(e) = r.check() {
            let message =
                format!("inconsistent results, refused before any verdict reads them: {e}");
            return Err(match check::variant_position(text, e.problems[0].entry) {
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
            variants: vec![
                VariantResult::measured(Variant::new(7, 1), vec![vec![3]]),
                VariantResult::measured(
                    Variant::new(7, 1).with_context(Context {
                        warps: Some(16),
                        ..Context::BASE
                    }),
                    vec![vec![3; 16]],
                ),
            ],
            sass_unavailable: None,
            sass_unreadable: None,
            timings: None,
            contention: None,
        };
        let path = Path::new("r.json");
        assert_eq!(RunResults::from_json(&r.to_json(), path).unwrap(), r);
        // The base context is not written: older readers' files stay as they were.
        assert_eq!(r.to_json().matches("\"context\"").count(), 1);
        assert!(r.to_json().contains("\"warps\": 16"));
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
