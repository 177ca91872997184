//! The context a variant's accumulation runs in (docs/study.md, "Contexts"): the inputs of
//! the accumulator-split heuristic besides the chain length, made measurable.
//!
//! - Occupancy: the warps of the one block on the SM (`warps`; `None` is the profile's
//!   `probe.block_threads`).
//! - Surrounding ILP: `side_chains` independent FFMA chains, one FFMA each per iteration,
//!   that do not feed the accumulation.
//! - Register pressure: `live_values` values held in registers across the loop.
//!
//! The sink placement, the fourth input, is the variant's [`crate::model::variant::Sink`].
//! The base context (the profile's block, no side chain, no live value) is the documented
//! probe; its kernels keep the study's names. Any other context appends its suffix to the
//! variant's name: `_w16` (16 warps), `_s4` (4 side chains), `_v48` (48 live values), in
//! that order, each only when it differs from the base: `chain13_acc2_effective2_w32_v48`.

use std::fmt;

/// One context. `Default` is the base context. In a results file (schema 4) a variant
/// of another context carries it as `context`, each part only when it differs from the base.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(deny_unknown_fields)]
pub struct Context {
    /// Warps of the block (one block per SM); `None`: the profile's `probe.block_threads`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) warps: Option<u32>,
    /// S: independent FFMA side chains per iteration that do not feed the accumulation.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) side_chains: u32,
    /// V: values held live in registers across the loop.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub(crate) live_values: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The largest number of side chains or live values a context may ask for: more than a
/// thread's 255 registers could hold is a typo.
pub(crate) const MAX_CONTEXT_VALUES: u32 = 255;

/// The warps a context may put on the SM: one block of 256, 512 or 1024 threads.
pub(crate) const CONTEXT_WARPS: [u32; 3] = [8, 16, 32];

/// Those of `warps` a context may have besides a block of `base_warps` warps.
pub(crate) fn other_warps(warps: &[u32], base_warps: u32) -> impl Iterator<Item = u32> + '_ {
    warps
        .iter()
        .copied()
        .filter(move |&w| CONTEXT_WARPS.contains(&w) && w != base_warps)
}

impl Context {
    /// The documented probe's context.
    pub const BASE: Context = Context {
        warps: None,
        side_chains: 0,
        live_values: 0,
    };

    pub fn is_base(&self) -> bool {
        *self == Context::BASE
    }

    /// What the variant name gets appended: `""` for the base, else `_w16_s4_v48` with only
    /// the parts that differ from the base.
    pub(crate) fn suffix(&self) -> String {
        let mut s = String::new();
        if let Some(w) = self.warps {
            s.push_str(&format!("_w{w}"));
        }
        if self.side_chains > 0 {
            s.push_str(&format!("_s{}", self.side_chains));
        }
        if self.live_values > 0 {
            s.push_str(&format!("_v{}", self.live_values));
        }
        s
    }

    /// Parses a [`Context::suffix`] back (the whole remainder of a variant name); `None`
    /// unless it is exactly what `suffix` writes for some context.
    pub(crate) fn parse_suffix(rest: &str) -> Option<Context> {
        let mut c = Context::BASE;
        let mut rest = rest;
        if let Some(r) = rest.strip_prefix("_w") {
            let (n, r) = leading_number(r)?;
            c.warps = Some(n);
            rest = r;
        }
        if let Some(r) = rest.strip_prefix("_s") {
            let (n, r) = leading_number(r)?;
            c.side_chains = n;
            rest = r;
        }
        if let Some(r) = rest.strip_prefix("_v") {
            let (n, r) = leading_number(r)?;
            c.live_values = n;
            rest = r;
        }
        rest.is_empty().then_some(c)
    }

    /// The threads of one block of a variant in this context, `base` being the profile's.
    pub(crate) fn block_threads(&self, base: u32) -> u32 {
        self.warps.map_or(base, |w| w * 32)
    }
}

/// A positive decimal number without a leading zero at the start of `s`, and what follows.
fn leading_number(s: &str) -> Option<(u32, &str)> {
    let end = s.bytes().take_while(u8::is_ascii_digit).count();
    let (n, rest) = s.split_at(end);
    if n.is_empty() || n.starts_with('0') {
        return None;
    }
    Some((n.parse().ok()?, rest))
}

impl fmt::Display for Context {
    /// How a case name or a report names the context: `base`, or the suffix without its
    /// first underscore (`w32_v48`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_base() {
            f.write_str("base")
        } else {
            f.write_str(&self.suffix()[1..])
        }
    }
}

/// The registers a thread may hold when `warps` warps are resident on one SM: 65536
/// registers per SM shared by `warps * 32` threads, at most 255 per thread, rounded down
/// to the allocation granularity of 8 registers per thread. The figures are those of the
/// CUDA C++ Programming Guide's table "Technical Specifications per Compute Capability"
/// (compute capabilities 5.0 to 12.0: 64K 32-bit registers per SM, 255 per thread) and
/// the CUDA Occupancy Calculator's register allocation unit (256 registers per warp, i.e.
/// 8 per thread). `warps = 0` reads as one warp.
pub(crate) fn register_limit(warps: u32) -> u32 {
    const REGISTERS_PER_SM: u32 = 65536;
    const MAX_PER_THREAD: u32 = 255;
    const GRANULARITY: u32 = 8;
    let threads = warps.max(1).saturating_mul(32);
    let per_thread = (REGISTERS_PER_SM / threads).min(MAX_PER_THREAD);
    per_thread / GRANULARITY * GRANULARITY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_limit_follows_the_register_file_and_its_granularity() {
        // 8 warps: 256 registers a thread, capped at 255, rounded down to 248.
        assert_eq!(register_limit(8), 248);
        assert_eq!(register_limit(16), 128);
        assert_eq!(register_limit(32), 64);
        assert_eq!(register_limit(64), 32);
        // 12 warps: 170 a thread, rounded down to 168.
        assert_eq!(register_limit(12), 168);
        assert_eq!(register_limit(1), 248);
        assert_eq!(register_limit(0), 248);
        assert_eq!(register_limit(u32::MAX), 0);
    }

    #[test]
    fn suffixes_round_trip_and_name_only_what_differs() {
        assert_eq!(Context::BASE.suffix(), "");
        assert_eq!(Context::BASE.to_string(), "base");
        let c = Context {
            warps: Some(32),
            side_chains: 0,
            live_values: 48,
        };
        assert_eq!(c.suffix(), "_w32_v48");
        assert_eq!(c.to_string(), "w32_v48");
        assert_eq!(Context::parse_suffix("_w32_v48"), Some(c));
        assert_eq!(Context::parse_suffix(""), Some(Context::BASE));
        for bad in ["_v48_w32", "_w", "_w032", "_s0", "_w16_", "_x4", "_w16x"] {
            assert_eq!(Context::parse_suffix(bad), None, "{bad}");
        }
        assert_eq!(c.block_threads(256), 1024);
        assert_eq!(Context::BASE.block_threads(256), 256);
    }
}
