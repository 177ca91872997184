//! The `reductions:` section of a profile (docs/reference.md, "reductions"): the real
//! accumulations measured beside the probe, checked. Each kernel is measured at each of
//! `accumulators` in the base context (the profile's block) and at each of `warps`.

use super::contexts::warps;
use super::file::ReductionsFile;
use super::probe::counts;
use crate::error::Result;
use crate::expectations::yaml::at;
use crate::model::context::Context;
use crate::model::settings::ProbeSettings;
use crate::model::variant::{Workload, REDUCTION_ITEMS};
use serde_saphyr::Spanned;
use std::path::Path;

/// Adds the checked `reductions:` section `r` to `probe` (whose block is already checked).
pub(super) fn reductions(
    file: &Path,
    r: &Spanned<ReductionsFile>,
    probe: &mut ProbeSettings,
) -> Result<()> {
    let s = &r.value;
    if s.kernels.value.is_empty() {
        return Err(at(
            file,
            &s.kernels,
            format!(
                "reductions.kernels is empty: expected one or more of {}",
                names()
            ),
        ));
    }
    let mut kernels = Vec::new();
    for k in &s.kernels.value {
        let Some(w) = Workload::reduction(&k.value) else {
            return Err(at(
                file,
                k,
                format!(
                    "reductions.kernels: {:?} is not a real accumulation: expected one of {}",
                    k.value,
                    names()
                ),
            ));
        };
        if kernels.contains(&w) {
            return Err(at(
                file,
                k,
                format!("reductions.kernels: {w} is listed twice"),
            ));
        }
        kernels.push(w);
    }
    let accumulators = counts(file, "reductions.accumulators", &s.accumulators)?;
    if let Some(k) = s
        .accumulators
        .value
        .iter()
        .find(|k| k.value > REDUCTION_ITEMS)
    {
        return Err(at(
            file,
            k,
            format!(
                "reductions.accumulators: {} is above {REDUCTION_ITEMS}, the elements a thread handles an iteration (element j feeds partial j % K: more partials than elements stay empty)",
                k.value
            ),
        ));
    }
    let base_warps = probe.block_threads / 32;
    let mut contexts = vec![Context::BASE];
    for w in s.warps.iter().flat_map(|w| &w.value) {
        let ctx = Context {
            warps: Some(warps(file, w, "reductions.warps", base_warps)?),
            ..Context::BASE
        };
        if contexts.contains(&ctx) {
            return Err(at(
                file,
                w,
                format!("reductions.warps: {} is listed twice", w.value),
            ));
        }
        contexts.push(ctx);
    }
    probe.reductions = kernels;
    probe.reduction_accumulators = accumulators;
    probe.reduction_contexts = contexts;
    Ok(())
}

fn names() -> String {
    Workload::REDUCTIONS.map(Workload::name).join(", ")
}
