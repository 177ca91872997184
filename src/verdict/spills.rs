//! Spills, by each source (the ptxas report, the local memory size, `LDL`/`STL` in the
//! SASS): the `invariant::no_spills::<source>` cases, and the spill checks that the
//! `probe::` cases and the failure kinds share.

use super::sass::without_sass;
use super::{Failure, Outcome};
use crate::model::results::{RunResults, VariantResult};
use crate::text::joined;

/// Where a spill is looked for; each is its own verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpillSource {
    /// ptxas's spill stores and loads.
    PtxasReport,
    /// The loaded function's local memory size.
    LocalMemory,
    /// `LDL`/`STL` instructions in the SASS.
    Sass,
}

impl SpillSource {
    pub(crate) const ALL: [SpillSource; 3] = [
        SpillSource::PtxasReport,
        SpillSource::LocalMemory,
        SpillSource::Sass,
    ];

    pub(crate) fn id(&self) -> &'static str {
        match self {
            SpillSource::PtxasReport => "ptxas_report",
            SpillSource::LocalMemory => "local_memory",
            SpillSource::Sass => "sass",
        }
    }
}

/// Why a variant counts as spilling, or as unknown, by the ptxas report and the local
/// memory size; `None` when it is clean.
pub(super) fn spill_problem(r: &VariantResult) -> Option<String> {
    if r.resources.is_none() {
        return Some("no register/spill report".into());
    }
    let mut found: Vec<String> = SpillSource::ALL
        .iter()
        .filter(|s| **s != SpillSource::Sass)
        .filter_map(|s| spill_by(*s, r).ok().flatten())
        .collect();
    found.extend(spill_by(SpillSource::Sass, r).ok().flatten());
    (!found.is_empty()).then(|| format!("spills: {}", found.join("; ")))
}

/// A spill by one source: `Ok(Some(what))` spills, `Ok(None)` clean, `Err(())` this source
/// is absent from the results.
pub(super) fn spill_by(src: SpillSource, r: &VariantResult) -> Result<Option<String>, ()> {
    match src {
        SpillSource::PtxasReport => {
            let res = r.resources.ok_or(())?;
            let n = res.spill_store_bytes + res.spill_load_bytes;
            Ok((n > 0).then(|| {
                format!(
                    "ptxas reports {} bytes spill stores, {} bytes spill loads",
                    res.spill_store_bytes, res.spill_load_bytes
                )
            }))
        }
        SpillSource::LocalMemory => {
            let res = r.resources.ok_or(())?;
            Ok((res.local_bytes > 0).then(|| format!("{} bytes local memory", res.local_bytes)))
        }
        SpillSource::Sass => {
            let s = r.sass.as_ref().ok_or(())?;
            Ok((!s.local_memory_instructions.is_empty()).then(|| {
                format!(
                    "local memory instructions in the SASS: {}",
                    joined(&s.local_memory_instructions, ", ")
                )
            }))
        }
    }
}

/// No variant of `found` spills by `src`. A result without that source fails, except SASS
/// missing from every result, which is [`without_sass`]'s outcome.
pub(super) fn no_spills(
    src: SpillSource,
    found: &[&VariantResult],
    results: &RunResults,
) -> Outcome {
    let mut bad = Vec::new();
    let mut absent = Vec::new();
    for r in found {
        match spill_by(src, r) {
            Ok(Some(p)) => bad.push(format!("{}: {p}", r.name)),
            Ok(None) => {}
            Err(()) => absent.push(r.name.clone()),
        }
    }
    if !bad.is_empty() {
        return Failure::new(format!(
            "spills by the {} (expected none): {}",
            src.id(),
            bad.join("; ")
        ))
        .into();
    }
    if absent.len() == found.len() && src == SpillSource::Sass {
        return without_sass(results);
    }
    if !absent.is_empty() {
        return Failure::new(format!("no {} for {}", src.id(), absent.join(", ")))
            .at(absent.join(", "))
            .into();
    }
    Outcome::Pass(format!(
        "no spills by the {} in {} variants",
        src.id(),
        found.len()
    ))
}
