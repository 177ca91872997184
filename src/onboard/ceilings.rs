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

use crate::expectations::profile::Validity;
pub use crate::model::ceilings::Ceilings;

/// The figures a profile's `validity:` holds, with `duration_tolerance`; `Err` says
/// which figure cannot be a ceiling (not finite, or below one half, which would round
/// to 0).
pub fn validity(c: &Ceilings, duration_tolerance: f64) -> Result<Validity, String> {
    let whole = |what: &str, x: f64| -> Result<u32, String> {
        if x.is_finite() && (0.5..1e6).contains(&x) {
            Ok(x.round() as u32)
        } else {
            Err(format!(
                "the ceilings measurement gave {what} = {x}: expected a finite figure of at least 0.5"
            ))
        }
    };
    Ok(Validity {
        ffma_latency_cycles: whole("ffma_latency_cycles", c.ffma_latency_cycles)?,
        schedulers_per_sm: whole("ffma_issue_per_cycle_per_sm", c.ffma_issue_per_cycle_per_sm)?,
        duration_tolerance,
    })
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
            assert!(e.contains("expected a finite figure"), "{e}");
        }
    }
}
