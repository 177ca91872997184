//! The probe section of a profile: its settings, checked, and the bounds past which a run
//! would take hours, compile for minutes, or measure something other than what the probe
//! stands for. A profile beyond one is refused at the value, naming the bound.

use super::file::{ProbeFile, SinkFile};
use crate::error::Result;
use crate::expectations::yaml::at;
use crate::model::settings::ProbeSettings;
use crate::model::variant::Sink;
use serde_saphyr::Spanned;
use std::path::Path;

/// The longest chain and the most accumulators a variant may have. The kernel template
/// unrolls N FFMAs per loop iteration and keeps E = min(K, N) partials in registers; a
/// thread has at most 255 registers, so beyond 256 every extra partial lives in local
/// memory and the loop no longer measures a register accumulation, and an N-FFMA body
/// per variant, for every variant of the matrix in one NVRTC program, is what compile time
/// grows with.
pub(crate) const MAX_COUNT: u32 = 256;
/// The most values `probe.chains` or `probe.accumulators` may list: 64 x 64 variants (and
/// as many again per sink mode) already make one NVRTC program of thousands of kernels.
pub(crate) const MAX_VALUES: usize = 64;
/// The most counted repeats: each is one launch per variant (a wave in wave mode).
pub(crate) const MAX_REPEATS: u32 = 1000;
/// The most warm-up launches: a few settle the clocks; more only add time.
pub(crate) const MAX_WARMUP: u32 = 100;
/// The most blocks per launch: more than any GPU has SMs (an H200 has 132).
pub(crate) const MAX_BLOCKS: u32 = 1024;
/// The longest clock64 budget: 10^10 cycles, a launch of about 5 s at 2 GHz, per variant
/// and repeat.
pub(crate) const MAX_BUDGET_CYCLES: u64 = 10_000_000_000;

/// The checked probe settings of `p` (and of the sink isolation section `sink`, which
/// adds sink modes at some of the probe's accumulator counts).
pub(super) fn probe(file: &Path, p: &ProbeFile, sink: Option<&SinkFile>) -> Result<ProbeSettings> {
    let block_threads = positive(file, &p.block_threads, "block_threads")?;
    if block_threads % 32 != 0 || block_threads > 1024 {
        return Err(at(file, &p.block_threads, format!("probe.block_threads {block_threads}: expected a multiple of 32 (whole warps) up to 1024")));
    }
    bounded(file, p)?;
    let mut probe = ProbeSettings {
        blocks: positive(file, &p.blocks, "blocks")?,
        block_threads,
        warmup_launches: p.warmup_launches.value,
        repeats: positive(file, &p.repeats, "repeats")?,
        budget_cycles: p.budget_cycles.value,
        chains: counts(file, "probe.chains", &p.chains)?,
        accumulators: counts(file, "probe.accumulators", &p.accumulators)?,
        sink_modes: Vec::new(),
        sink_accumulators: Vec::new(),
        contexts: Vec::new(),
        context_chains: Vec::new(),
        context_accumulators: Vec::new(),
        reductions: Vec::new(),
        reduction_accumulators: Vec::new(),
        reduction_contexts: Vec::new(),
        mode: p.mode,
    };
    if let Some(si) = sink {
        sink_isolation(file, si, &mut probe)?;
    }
    Ok(probe)
}

/// `probe.<what>` as given, refused when it is 0.
fn positive(file: &Path, s: &Spanned<u32>, what: &str) -> Result<u32> {
    if s.value == 0 {
        Err(at(
            file,
            s,
            format!("probe.{what} is 0: expected a whole number >= 1"),
        ))
    } else {
        Ok(s.value)
    }
}

/// Refuses the first of `p`'s blocks, repeats, warm-up launches and budget past its bound
/// (a budget of 0 too), naming the bound and why it is there.
fn bounded(file: &Path, p: &ProbeFile) -> Result<()> {
    let at_most = |s: &Spanned<u32>, what: &str, max: u32, why: &str| -> Result<()> {
        if s.value > max {
            Err(at(
                file,
                s,
                format!("probe.{what} {} is above {max}: {why}", s.value),
            ))
        } else {
            Ok(())
        }
    };
    at_most(
        &p.blocks,
        "blocks",
        MAX_BLOCKS,
        "more blocks than any GPU has SMs",
    )?;
    at_most(
        &p.repeats,
        "repeats",
        MAX_REPEATS,
        "each repeat is one more launch of every variant",
    )?;
    at_most(
        &p.warmup_launches,
        "warmup_launches",
        MAX_WARMUP,
        "a few warm-up launches settle the clocks; more only add time",
    )?;
    if p.budget_cycles.value > MAX_BUDGET_CYCLES {
        return Err(at(
            file,
            &p.budget_cycles,
            format!(
                "probe.budget_cycles {} is above {MAX_BUDGET_CYCLES}, about 5 s per launch at 2 GHz",
                p.budget_cycles.value
            ),
        ));
    }
    if p.budget_cycles.value == 0 {
        return Err(at(
            file,
            &p.budget_cycles,
            "probe.budget_cycles is 0: expected a clock64 budget >= 1 cycle",
        ));
    }
    Ok(())
}

/// The sink isolation section's modes and accumulator counts, checked, into `probe`.
fn sink_isolation(file: &Path, si: &SinkFile, probe: &mut ProbeSettings) -> Result<()> {
    for m in &si.modes {
        if m.value == Sink::A {
            return Err(at(
                file,
                m,
                "sink_isolation.modes: A is the documented probe itself; list only B, C or D",
            ));
        }
        if probe.sink_modes.contains(&m.value) {
            return Err(at(
                file,
                m,
                format!("sink mode {:?} is listed twice", m.value),
            ));
        }
        probe.sink_modes.push(m.value);
    }
    probe.sink_accumulators = counts(file, "sink_isolation.accumulators", &si.accumulators)?;
    within(
        file,
        "sink_isolation.accumulators",
        &si.accumulators,
        ("probe.accumulators", &probe.accumulators),
        "so mode A would not be measured at it",
    )
}

/// Refuses the first count of `list` (under the key `what`) that is not one of `of` (the
/// counts of the key `of.0`); `why` says what would then go unmeasured.
pub(super) fn within(
    file: &Path,
    what: &str,
    list: &Spanned<Vec<Spanned<u32>>>,
    of: (&str, &[u32]),
    why: &str,
) -> Result<()> {
    match list.value.iter().find(|k| !of.1.contains(&k.value)) {
        Some(k) => Err(at(
            file,
            k,
            format!("{what}: {} is not in {} {:?}, {why}", k.value, of.0, of.1),
        )),
        None => Ok(()),
    }
}

/// Checks a list (`what` names its key, `probe.chains`) of positive, distinct counts, at most [`MAX_VALUES`] of them, each at most
/// [`MAX_COUNT`]; an empty list is refused at its own position.
pub(super) fn counts(
    file: &Path,
    what: &str,
    whole: &Spanned<Vec<Spanned<u32>>>,
) -> Result<Vec<u32>> {
    let list = &whole.value;
    if list.is_empty() {
        return Err(at(
            file,
            whole,
            format!("{what} is empty: expected at least one count"),
        ));
    }
    if let Some(s) = list.get(MAX_VALUES) {
        return Err(at(
            file,
            s,
            format!(
                "{what} lists {} values: at most {MAX_VALUES} (each is a row or column of variants, all compiled into one program)",
                list.len()
            ),
        ));
    }
    let mut out = Vec::new();
    for s in list {
        if s.value > MAX_COUNT {
            return Err(at(
                file,
                s,
                format!(
                    "{what}: {} is above {MAX_COUNT}, the most this probe measures (the kernel unrolls N FFMAs per iteration and keeps up to N partials in registers; a thread has at most 255)",
                    s.value
                ),
            ));
        }
        if s.value == 0 {
            return Err(at(
                file,
                s,
                format!("{what}: 0 is not a count: expected a whole number >= 1"),
            ));
        }
        if out.contains(&s.value) {
            return Err(at(file, s, format!("{what}: {} is listed twice", s.value)));
        }
        out.push(s.value);
    }
    Ok(out)
}

/// A tolerance: a fraction in [0, 1).
pub(super) fn tolerance(file: &Path, what: &str, t: &Spanned<f64>) -> Result<f64> {
    if !(t.value.is_finite() && (0.0..1.0).contains(&t.value)) {
        return Err(at(
            file,
            t,
            format!(
                "{what} {} is out of range: expected a fraction in [0, 1), e.g. 0.02 for 2%",
                t.value
            ),
        ));
    }
    Ok(t.value)
}
