//! Recorded results a profile replays on every machine: the study's table written in the
//! profile, or a committed results file (`expectations/recorded/`).

use crate::error::{Error, Result};
use crate::expectations::yaml::number::{self, Unquoted};
use crate::expectations::yaml::{at, path_inside, referenced_from};
use crate::model::results::{Resources, RunResults, VariantResult, SCHEMA};
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use crate::text::Shown;
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RecordedFile {
    /// Where the figures come from.
    source: String,
    /// Spill bytes observed in every variant, when the source states it.
    #[serde(default, deserialize_with = "number::optional")]
    spill_bytes: Option<u32>,
    /// chain -> accumulators -> average progress.
    progress: Option<Spanned<Table>>,
    /// A results file, relative to the profile's folder.
    results: Option<Spanned<String>>,
}

/// A recorded table: chain -> accumulators -> average progress, every number unquoted.
type Table = BTreeMap<Unquoted<u32>, BTreeMap<Unquoted<u32>, Unquoted<f64>>>;

/// The results a profile replays: its recorded table, or the results file it names
/// (relative to `dir`), which must have been measured with the profile's settings.
pub(crate) fn load(
    file: &Path,
    dir: &Path,
    r: &RecordedFile,
    profile: &str,
    probe: &ProbeSettings,
) -> Result<RunResults> {
    match (&r.progress, &r.results) {
        (Some(table), None) => Ok(RunResults {
            schema: SCHEMA,
            mode: Default::default(),
            // The study states its setup; the profile restates it.
            settings: Some(probe.run_settings()),
            profile: profile.to_string(),
            source: r.source.clone(),
            environment: None,
            variants: table_variants(file, table, r.spill_bytes, probe)?,
            sass_unavailable: None,
            sass_unreadable: None,
            contention: None,
            timings: None,
        }),
        (None, Some(path)) => results_file(file, dir, path, probe),
        _ => Err(Error::in_file(
            file,
            "recorded: expected exactly one of `progress` (a table) or `results` (a results file)",
        )),
    }
}

/// The variants of a recorded table: one figure for each variant of the documented matrix
/// (sink mode A), which is all a table holds, and none outside it.
fn table_variants(
    file: &Path,
    table: &Spanned<Table>,
    spill_bytes: Option<u32>,
    probe: &ProbeSettings,
) -> Result<Vec<VariantResult>> {
    let variants = probe.main_variants();
    let resources = spill_bytes.map(|b| Resources {
        spill_store_bytes: b,
        spill_load_bytes: b,
        ..Default::default()
    });
    let mut out = Vec::new();
    for v in &variants {
        let Some(p) = table
            .value
            .get(&Unquoted(v.chain))
            .and_then(|row| row.get(&Unquoted(v.accumulators)))
        else {
            return Err(at(
                file,
                table,
                format!(
                    "recorded.progress has no figure for chain {} acc {} ({v})",
                    v.chain, v.accumulators
                ),
            ));
        };
        out.push(VariantResult::recorded(*v, p.0, resources));
    }
    let extra = table
        .value
        .iter()
        .flat_map(|(n, row)| row.keys().map(move |k| Variant::new(n.0, k.0)))
        .find(|v| !variants.contains(v));
    if let Some(v) = extra {
        return Err(at(file, table, format!("recorded.progress has chain {} acc {}, which is outside probe.chains x probe.accumulators", v.chain, v.accumulators)));
    }
    Ok(out)
}

/// The results file `path` names (relative to `dir`), read, and refused when it was
/// measured with other settings than the profile's.
fn results_file(
    file: &Path,
    dir: &Path,
    path: &Spanned<String>,
    probe: &ProbeSettings,
) -> Result<RunResults> {
    let results_file = path_inside(file, dir, "recorded.results", path)?;
    if !results_file.exists() {
        return Err(at(
            file,
            path,
            format!(
                "recorded results file {} does not exist",
                results_file.shown()
            ),
        ));
    }
    let results = RunResults::load(&results_file).map_err(referenced_from(file, path))?;
    if let Some(s) = &results.settings {
        let diff = s.differences(&probe.run_settings());
        if !diff.is_empty() {
            return Err(at(
                file,
                path,
                format!(
                    "recorded results {} were measured with other settings than the profile's probe section ({}): re-measure, or replay them under a profile with their settings",
                    results_file.shown(),
                    diff.join(", ")
                ),
            ));
        }
    }
    Ok(results)
}
