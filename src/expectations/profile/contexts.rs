//! The `contexts:` section of a profile (docs/reference.md, "contexts"): the contexts the
//! profile measures besides the base, checked. Each value of `warps`, `side_chains` and
//! `live_values` is one context with that input varied alone; each of `corners` sets two
//! or more inputs together. All are measured at `chains` x `accumulators`, sink mode A.

use super::file::{ContextsFile, CornerFile};
use super::probe::{counts, within};
use crate::error::Result;
use crate::expectations::yaml::at;
use crate::model::context::{Context, CONTEXT_WARPS, MAX_CONTEXT_VALUES};
use crate::model::settings::ProbeSettings;
use serde_saphyr::Spanned;
use std::path::Path;

/// The most contexts a profile may measure besides the base: each multiplies the
/// section's chains x accumulators kernels, all compiled for every run.
pub(crate) const MAX_CONTEXTS: usize = 16;

/// Adds the checked `contexts:` section `c` to `probe` (whose chains, accumulators and
/// block are already checked).
pub(super) fn contexts(
    file: &Path,
    c: &Spanned<ContextsFile>,
    probe: &mut ProbeSettings,
) -> Result<()> {
    let s = &c.value;
    let unmeasured = "so the base context would not be measured at it";
    let chains = counts(file, "contexts.chains", &s.chains)?;
    within(
        file,
        "contexts.chains",
        &s.chains,
        ("probe.chains", &probe.chains),
        unmeasured,
    )?;
    let accumulators = counts(file, "contexts.accumulators", &s.accumulators)?;
    within(
        file,
        "contexts.accumulators",
        &s.accumulators,
        ("probe.accumulators", &probe.accumulators),
        unmeasured,
    )?;
    let base_warps = probe.block_threads / 32;
    let mut found: Vec<Context> = Vec::new();
    let mut add = |ctx: Context, s: &dyn Fn(String) -> crate::error::Error| -> Result<()> {
        if found.contains(&ctx) {
            return Err(s(format!("context {ctx} is listed twice")));
        }
        if found.len() == MAX_CONTEXTS {
            return Err(s(format!(
                "more than {MAX_CONTEXTS} contexts: each adds {} kernels to every run's compile",
                chains.len() * accumulators.len()
            )));
        }
        found.push(ctx);
        Ok(())
    };
    for w in list(&s.warps) {
        let ctx = Context {
            warps: Some(warps(file, w, "contexts.warps", base_warps)?),
            ..Context::BASE
        };
        add(ctx, &|m| at(file, w, m))?;
    }
    for v in list(&s.side_chains) {
        let ctx = Context {
            side_chains: value(file, v, "contexts.side_chains")?,
            ..Context::BASE
        };
        add(ctx, &|m| at(file, v, m))?;
    }
    for v in list(&s.live_values) {
        let ctx = Context {
            live_values: value(file, v, "contexts.live_values")?,
            ..Context::BASE
        };
        add(ctx, &|m| at(file, v, m))?;
    }
    for corner in &s.corners {
        let ctx = self::corner(file, corner, base_warps)?;
        add(ctx, &|m| at(file, corner, m))?;
    }
    if found.is_empty() {
        return Err(at(
            file,
            c,
            "contexts: no context listed: expected warps, side_chains, live_values or corners",
        ));
    }
    probe.contexts = found;
    probe.context_chains = chains;
    probe.context_accumulators = accumulators;
    Ok(())
}

fn list(l: &Option<Spanned<Vec<Spanned<u32>>>>) -> &[Spanned<u32>] {
    l.as_ref().map_or(&[], |l| &l.value)
}

/// A block's warps: one of [`CONTEXT_WARPS`], and not the base's own.
pub(super) fn warps(file: &Path, w: &Spanned<u32>, what: &str, base: u32) -> Result<u32> {
    if !CONTEXT_WARPS.contains(&w.value) {
        return Err(at(
            file,
            w,
            format!(
                "{what}: {} warps: expected one of {CONTEXT_WARPS:?} (one block of 256, 512 or 1024 threads, so that a variant keeps one SM)",
                w.value
            ),
        ));
    }
    if w.value == base {
        return Err(at(
            file,
            w,
            format!(
                "{what}: {} warps is the base context (probe.block_threads {}): list only other counts",
                w.value,
                base * 32
            ),
        ));
    }
    Ok(w.value)
}

/// A count of side chains or live values: 1 to [`MAX_CONTEXT_VALUES`].
fn value(file: &Path, v: &Spanned<u32>, what: &str) -> Result<u32> {
    if v.value == 0 || v.value > MAX_CONTEXT_VALUES {
        return Err(at(
            file,
            v,
            format!(
                "{what}: {}: expected 1 to {MAX_CONTEXT_VALUES} (0 is the base context; more than a thread's registers is a typo)",
                v.value
            ),
        ));
    }
    Ok(v.value)
}

/// A corner: at least two inputs set.
fn corner(file: &Path, c: &Spanned<CornerFile>, base_warps: u32) -> Result<Context> {
    let f = &c.value;
    let mut ctx = Context::BASE;
    if let Some(w) = &f.warps {
        ctx.warps = Some(warps(file, w, "contexts.corners.warps", base_warps)?);
    }
    if let Some(v) = &f.side_chains {
        ctx.side_chains = value(file, v, "contexts.corners.side_chains")?;
    }
    if let Some(v) = &f.live_values {
        ctx.live_values = value(file, v, "contexts.corners.live_values")?;
    }
    let set = [
        f.warps.is_some(),
        f.side_chains.is_some(),
        f.live_values.is_some(),
    ]
    .iter()
    .filter(|&&x| x)
    .count();
    if set < 2 {
        return Err(at(
            file,
            c,
            "contexts.corners: a corner sets at least two of warps, side_chains and live_values (one input alone goes in its own list)",
        ));
    }
    Ok(ctx)
}
