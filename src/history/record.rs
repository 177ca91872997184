//! One run's record, built from what the run wrote: its results (the run, its variants)
//! and, for a judged run, its cases as the JUnit file has them. The record is plain data,
//! serialisable for the spool, and turns into the rows a store inserts.

use super::rows::{CaseRow, Row, Run, VariantRow};
use super::schema::{CASES, RUNS, VARIANTS};
use super::store::{Rows, StoreError};
use crate::model::results::{RunResults, VariantResult};
use crate::report::junit::{CaseRecord, Status};
use serde::{Deserialize, Serialize};

/// A run with its variants and cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub run: Run,
    pub variants: Vec<VariantRow>,
    pub cases: Vec<CaseRow>,
}

/// Which front end made the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The GPU suite (`cargo test --test probe`): judged, with its cases.
    Suite,
    /// `cargo xtask probe`: measured, not judged.
    Probe,
    /// `cargo xtask history import`: a results file written before.
    Import,
}

impl Origin {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Origin::Suite => "suite",
            Origin::Probe => "probe",
            Origin::Import => "import",
        }
    }
}

/// What the front end knows of a run beyond its results.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct About {
    pub host: Option<String>,
    pub gpu_uuid: Option<String>,
    pub pci_bus_id: Option<String>,
    pub checkout_commit: Option<String>,
    pub profile_digest: Option<String>,
    pub run_s: Option<f64>,
}

impl About {
    /// What this process knows of its run of `profile` on the device of that PCI bus id
    /// and UUID: this host, the checkout's commit, the profile's digest, its time so far.
    pub fn here(
        profile: &crate::expectations::profile::Profile,
        pci_bus_id: Option<String>,
        gpu_uuid: Option<String>,
    ) -> About {
        let mut files = vec![profile.file.as_path()];
        files.extend(profile.baselines.as_ref().map(|b| b.file.as_path()));
        About {
            host: Some(gethostname::gethostname().to_string_lossy().into_owned()),
            gpu_uuid,
            pci_bus_id,
            checkout_commit: super::checkout::commit(std::path::Path::new(".")),
            profile_digest: digest_of(&files),
            run_s: crate::trace::started().then(crate::trace::elapsed),
        }
    }
}

/// The SHA-256 of `files`' bytes, one after another; `None` when one cannot be read.
pub(crate) fn digest_of(files: &[&std::path::Path]) -> Option<String> {
    let mut all = Vec::new();
    for f in files {
        let bytes = crate::input::read_bytes(f, "a profile file", crate::input::YAML_LIMIT).ok()?;
        all.extend_from_slice(&bytes);
        all.push(0);
    }
    Some(crate::digest::sha256_hex(&all))
}

/// The id of a run whose results file reads `results_json`: see [`Run::id`].
pub fn run_id(results_json: &str) -> String {
    let digest = crate::digest::sha256_hex(results_json.as_bytes());
    digest[..32].to_string()
}

/// The record of the run that measured `results`: judged by `cases` (the run's cases of
/// this device, in JUnit order) when it was judged.
pub fn build(
    results: &RunResults,
    cases: Option<&[CaseRecord]>,
    origin: Origin,
    about: About,
) -> RunRecord {
    let id = run_id(&results.to_json());
    let verdict = match cases {
        None => "unjudged",
        Some(cs)
            if cs
                .iter()
                .any(|c| matches!(c.status, Status::Failed | Status::Error)) =>
        {
            "failed"
        }
        Some(_) => "passed",
    };
    let run = run_row(results, &id, verdict, origin, about);
    let mut sorted: Vec<&VariantResult> = results.variants.iter().collect();
    // In the order a store gives them back: by name.
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let variants = sorted.into_iter().map(|v| variant_row(&id, v)).collect();
    let cases = cases
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(seq, c)| case_row(&id, seq, c))
        .collect();
    RunRecord {
        run,
        variants,
        cases,
    }
}

/// The `runs` row of the run that measured `results`.
fn run_row(results: &RunResults, id: &str, verdict: &str, origin: Origin, about: About) -> Run {
    let env = results.environment.as_ref();
    Run {
        id: id.into(),
        recorded_at: super::now(),
        measured_at: env.map(|e| e.date.clone()),
        origin: origin.as_str().into(),
        host: about.host,
        gpu_name: env.map(|e| e.gpu_name.clone()),
        gpu_uuid: about.gpu_uuid,
        pci_bus_id: about.pci_bus_id,
        compute_capability: env.map(|e| e.compute_capability.clone()),
        driver: env.map(|e| e.driver_version.clone()),
        cuda_driver_api: env.map(|e| e.cuda_driver_api.clone()),
        nvrtc: env.map(|e| e.nvrtc_version.clone()),
        nvrtc_library: env.and_then(|e| e.nvrtc_library.clone()),
        toolchain: env.and_then(|e| e.nvrtc_origin.clone()),
        compile_options: env.map(|e| e.compile_options.join(" ")),
        checkout_commit: about.checkout_commit,
        profile: results.profile.clone(),
        profile_digest: about.profile_digest,
        mode: results.mode.name().into(),
        source: results.source.clone(),
        verdict: verdict.into(),
        run_s: about.run_s,
        gpu_s: results.timings.as_ref().map(|t| t.gpu_s),
        results_schema: i64::from(results.schema),
        accprobe_version: env!("CARGO_PKG_VERSION").into(),
    }
}

/// The `variants` row of `v`.
fn variant_row(id: &str, v: &VariantResult) -> VariantRow {
    VariantRow {
        run_id: id.into(),
        name: v.name.clone(),
        chain: v.chain.into(),
        accumulators: v.accumulators.into(),
        effective: v.effective.into(),
        sink: v.sink.letter().to_string(),
        context: v.context.to_string(),
        median: v.baseline_progress(),
        mean: v.mean_progress,
        spread: v.summary.map(|s| s.relative_spread),
        samples: v.summary.map_or(0, |s| s.count as i64),
        registers: v.resources.as_ref().map(|r| r.registers.into()),
        spill_store_bytes: v.resources.as_ref().map(|r| r.spill_store_bytes.into()),
        spill_load_bytes: v.resources.as_ref().map(|r| r.spill_load_bytes.into()),
        sass_digest: v.sass.as_ref().map(|s| s.digest.clone()),
        schedule_digest: v.sass.as_ref().and_then(|s| s.schedule_digest.clone()),
        sm_clock_mhz: v.sm_clock_mhz,
    }
}

fn case_row(run_id: &str, seq: usize, c: &CaseRecord) -> CaseRow {
    CaseRow {
        run_id: run_id.into(),
        seq: seq as i64,
        suite: c.suite.clone(),
        name: c.name.clone(),
        outcome: match c.status {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Ignored => "ignored",
            Status::Error => "error",
        }
        .into(),
        kind: c.kind.clone(),
        // The head a JUnit message carries (crate::report::message::failure_message).
        suspect: c
            .failure
            .as_ref()
            .and_then(|f| f.suspect.as_ref())
            .map(|s| s.head()),
        // The whole text, as the JUnit body has it.
        message: c.text(),
    }
}

impl RunRecord {
    /// The rows a store inserts, `runs` first.
    pub fn rows(&self) -> Rows {
        vec![
            (&RUNS, vec![self.run.to_values()]),
            (
                &VARIANTS,
                self.variants.iter().map(Row::to_values).collect(),
            ),
            (&CASES, self.cases.iter().map(Row::to_values).collect()),
        ]
    }
}

/// `rows` of one table as `T`s.
pub(crate) fn typed<T: Row>(rows: &[Vec<crate::history::Value>]) -> Result<Vec<T>, StoreError> {
    rows.iter().map(|r| T::from_values(r)).collect()
}
