//! The `reductions:` section of a profile (docs/reference.md, "reductions"): the real
//! accumulations measured beside the probe, checked. Each kernel is measured at each of
//! `accumulators` in the base context (the profile's block) and at each of `warps`; its
//! `invariants` are judged in each of those contexts.

use super::contexts::warps;
use super::file::{ReductionInvariantFile, ReductionsFile};
use super::probe::{counts, tolerance};
use super::ReductionInvariant;
use crate::error::Result;
use crate::expectations::yaml::at;
use crate::model::context::{Context, CONTEXT_WARPS};
use crate::model::settings::ProbeSettings;
use crate::model::variant::{Workload, REDUCTION_ITEMS};
use serde_saphyr::Spanned;
use std::path::Path;

/// Adds the checked `reductions:` section `r` to `probe` (whose block is already checked)
/// and gives its invariants.
pub(super) fn reductions(
    file: &Path,
    r: &Spanned<ReductionsFile>,
    probe: &mut ProbeSettings,
) -> Result<Vec<ReductionInvariant>> {
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
    let contexts = contexts(file, s, probe.block_threads / 32)?;
    let invariants = invariants(file, &s.invariants, &kernels, &accumulators)?;
    probe.reductions = kernels;
    probe.reduction_accumulators = accumulators;
    probe.reduction_contexts = contexts;
    Ok(invariants)
}

/// The section's contexts: the base, then one per `warps` value (`base_warps` is the
/// profile's block), each once; `warps: []` is refused.
fn contexts(file: &Path, s: &ReductionsFile, base_warps: u32) -> Result<Vec<Context>> {
    if let Some(w) = s.warps.as_ref().filter(|w| w.value.is_empty()) {
        return Err(at(
            file,
            w,
            format!(
                "reductions.warps is empty: expected one or more of {CONTEXT_WARPS:?}, or the key left out to measure only the profile's block"
            ),
        ));
    }
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
    Ok(contexts)
}

/// The section's invariants, each about one of `kernels` at one of `accumulators`; a
/// kernel has at most one peak.
fn invariants(
    file: &Path,
    raw: &[ReductionInvariantFile],
    kernels: &[Workload],
    accumulators: &[u32],
) -> Result<Vec<ReductionInvariant>> {
    let mut out = Vec::new();
    for inv in raw {
        let ReductionInvariantFile::Peak(p) = inv;
        let Some(kernel) = Workload::reduction(&p.kernel.value).filter(|w| kernels.contains(w))
        else {
            return Err(at(
                file,
                &p.kernel,
                format!(
                    "reductions.invariants: peak.kernel {:?} is not one of reductions.kernels ({})",
                    p.kernel.value,
                    kernels
                        .iter()
                        .map(|w| w.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        if !accumulators.contains(&p.accumulators.value) {
            return Err(at(
                file,
                &p.accumulators,
                format!(
                    "reductions.invariants: peak.accumulators {} is not in reductions.accumulators {accumulators:?}",
                    p.accumulators.value
                ),
            ));
        }
        if out
            .iter()
            .any(|ReductionInvariant::Peak { kernel: k, .. }| *k == kernel)
        {
            return Err(at(
                file,
                &p.kernel,
                format!("reductions.invariants: {kernel} has a peak already (one a kernel)"),
            ));
        }
        out.push(ReductionInvariant::Peak {
            kernel,
            accumulators: p.accumulators.value,
            tolerance: tolerance(file, "reductions.invariants: peak.tolerance", &p.tolerance)?,
        });
    }
    Ok(out)
}

fn names() -> String {
    Workload::REDUCTIONS.map(Workload::name).join(", ")
}
