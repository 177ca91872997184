//! The physical ceilings of a GPU as its microbenchmark (`kernels/ceilings.cu`,
//! `measure::ceilings`) measures them, and how they become a profile's `validity:`.
//!
//! Two figures, both from `clock64`:
//! - the dependent-FFMA latency: one warp runs a long chain of FFMAs, each reading the one
//!   before; cycles per FFMA;
//! - the issue rate per SM: enough warps on one SM, each with independent FFMAs, to keep
//!   every scheduler issuing; warp-level FFMAs per cycle per SM. A scheduler issues at most
//!   one warp instruction per cycle, so this rate is the number of warps that issue in the
//!   same cycle: what the validity check calls `schedulers_per_sm`.
//!
//! Both are rounded to the nearest whole number for the profile; the draft's comment keeps
//! the measured figures.

use super::OnboardError;
use crate::expectations::profile::Validity;
pub use crate::model::ceilings::Ceilings;

/// The figures a profile's `validity:` holds, with `duration_tolerance`; `Err` says
/// which figure cannot be a ceiling (not finite, or below one half, which would round
/// to 0).
pub fn validity(c: &Ceilings, duration_tolerance: f64) -> Result<Validity, OnboardError> {
    let whole = |figure: &'static str, value: f64| {
        if value.is_finite() && (0.5..1e6).contains(&value) {
            Ok(value.round() as u32)
        } else {
            Err(OnboardError::NotACeiling { figure, value })
        }
    };
    Ok(Validity {
        ffma_latency_cycles: whole("ffma_latency_cycles", c.ffma_latency_cycles)?,
        schedulers_per_sm: whole("ffma_issue_per_cycle_per_sm", c.ffma_issue_per_cycle_per_sm)?,
        duration_tolerance,
    })
}

/// What NVIDIA's CUDA C++ Programming Guide publishes for a compute capability: the
/// 32-bit floating-point multiply-add results per clock per SM ("Arithmetic
/// Instructions", its throughput table) and the warp schedulers per SM (its section on the
/// compute capability). Only the capabilities docs/profiles.md's table gives figures for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Published {
    pub(crate) fp32_fma_per_clock_per_sm: u32,
    pub(crate) schedulers_per_sm: u32,
}

impl Published {
    /// The same rate as warp FFMAs per cycle per SM (32 results each): what the ceilings
    /// microbenchmark measures.
    pub(crate) fn warp_ffma_per_cycle(&self) -> u32 {
        self.fp32_fma_per_clock_per_sm / 32
    }
}

/// The published figures for `compute_capability` (`8.0`), where docs/profiles.md's table
/// gives them.
pub(crate) fn published(compute_capability: &str) -> Option<Published> {
    let (fp32, schedulers) = match compute_capability {
        "8.0" => (64, 4),
        "8.6" | "8.9" | "9.0" => (128, 4),
        _ => return None,
    };
    Some(Published {
        fp32_fma_per_clock_per_sm: fp32,
        schedulers_per_sm: schedulers,
    })
}

/// How the measured ceilings compare with the published figures for their GPU, in one
/// line for the reviewer; a measured issue rate below the published scheduler count says
/// that the draft's `schedulers_per_sm` makes the issue ceiling tighter than the hardware's.
pub fn against_published(c: &Ceilings, v: &Validity) -> String {
    let Some(p) = published(&c.compute_capability) else {
        return format!(
            "no published figures for compute capability {} in docs/profiles.md's table: the measurement is the only source",
            c.compute_capability
        );
    };
    let mut line = format!(
        "the CUDA C++ Programming Guide gives compute capability {}: {} FP32 FMA results per clock per SM ({} warp FFMAs per cycle) and {} warp schedulers; measured {:.2} warp FFMAs per cycle: {}",
        c.compute_capability,
        p.fp32_fma_per_clock_per_sm,
        p.warp_ffma_per_cycle(),
        p.schedulers_per_sm,
        c.ffma_issue_per_cycle_per_sm,
        if v.schedulers_per_sm == p.warp_ffma_per_cycle() {
            "the same"
        } else {
            "DIFFERENT"
        }
    );
    if v.schedulers_per_sm < p.schedulers_per_sm {
        line.push_str(&format!(
            "; schedulers_per_sm {} is below the {} schedulers, so the issue ceiling is tighter than the hardware's: set it to {} if a validity::...::ceiling case fails",
            v.schedulers_per_sm, p.schedulers_per_sm, p.schedulers_per_sm
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ceilings(latency: f64, issue: f64) -> Ceilings {
        Ceilings {
            ffma_latency_cycles: latency,
            ffma_issue_per_cycle_per_sm: issue,
            issue_warps: 32,
            gpu_name: "GPU".into(),
            compute_capability: "9.0".into(),
            driver_version: "1".into(),
            nvrtc_version: "13.0".into(),
            date: "2026-12-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn measured_ceilings_round_to_the_validity_figures_and_bad_ones_are_refused() {
        let v = validity(&ceilings(4.03, 3.96), 0.05).unwrap();
        assert_eq!((v.ffma_latency_cycles, v.schedulers_per_sm), (4, 4));
        assert_eq!(v.duration_tolerance, 0.05);
        let v = validity(&ceilings(5.6, 2.2), 0.05).unwrap();
        assert_eq!((v.ffma_latency_cycles, v.schedulers_per_sm), (6, 2));
        for (l, i) in [
            (f64::NAN, 4.0),
            (4.0, 0.2),
            (f64::INFINITY, 4.0),
            (-1.0, 4.0),
        ] {
            let e = validity(&ceilings(l, i), 0.05).unwrap_err();
            assert!(e.to_string().contains("expected a finite figure"), "{e}");
            let figure = if l == 4.0 {
                "ffma_issue_per_cycle_per_sm"
            } else {
                "ffma_latency_cycles"
            };
            assert!(
                matches!(e, OnboardError::NotACeiling { figure: f, .. } if f == figure),
                "{e:?}"
            );
        }
    }

    #[test]
    fn the_comparison_with_the_published_figures_flags_a_rate_below_the_schedulers() {
        let mut c = ceilings(4.0, 3.93);
        let v = validity(&c, 0.05).unwrap();
        let line = against_published(&c, &v);
        assert!(line.contains("128 FP32 FMA results per clock per SM (4 warp FFMAs per cycle) and 4 warp schedulers; measured 3.93 warp FFMAs per cycle: the same"), "{line}");
        assert!(!line.contains("tighter"), "{line}");
        c.compute_capability = "8.0".into();
        c.ffma_issue_per_cycle_per_sm = 1.96;
        let v = validity(&c, 0.05).unwrap();
        let line = against_published(&c, &v);
        assert!(
            line.contains("(2 warp FFMAs per cycle) and 4 warp schedulers"),
            "{line}"
        );
        assert!(
            line.contains("the same; schedulers_per_sm 2 is below the 4 schedulers"),
            "{line}"
        );
        c.compute_capability = "12.0".into();
        assert!(
            against_published(&c, &v).contains("no published figures for compute capability 12.0")
        );
    }
}
