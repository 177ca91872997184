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

/// What the ceilings microbenchmark measured, and where.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    /// Cycles per FFMA of one warp's dependent chain.
    pub ffma_latency_cycles: f64,
    /// Warp-level FFMAs issued per cycle on one SM, all its warps together.
    pub ffma_issue_per_cycle_per_sm: f64,
    /// The warps of the issue-rate block.
    pub issue_warps: u32,
    pub gpu_name: String,
    pub compute_capability: String,
    pub driver_version: String,
    pub nvrtc_version: String,
    /// RFC 3339, UTC.
    pub date: String,
}

impl Ceilings {
    /// The figures a profile's `validity:` holds, with `duration_tolerance`; `Err` says
    /// which figure cannot be a ceiling (not finite, or below one half, which would round
    /// to 0).
    pub fn validity(&self, duration_tolerance: f64) -> Result<Validity, String> {
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
            ffma_latency_cycles: whole("ffma_latency_cycles", self.ffma_latency_cycles)?,
            schedulers_per_sm: whole(
                "ffma_issue_per_cycle_per_sm",
                self.ffma_issue_per_cycle_per_sm,
            )?,
            duration_tolerance,
        })
    }

    /// One line for a person: both figures with where they were measured.
    pub fn summary(&self) -> String {
        format!(
            "dependent FFMA latency {:.2} cycles, issue rate {:.2} warp FFMAs per cycle per SM ({} warps), on {} (compute capability {}), driver {}, NVRTC {}, {}",
            self.ffma_latency_cycles,
            self.ffma_issue_per_cycle_per_sm,
            self.issue_warps,
            self.gpu_name,
            self.compute_capability,
            self.driver_version,
            self.nvrtc_version,
            self.date
        )
    }
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
        let v = ceilings(4.03, 3.96).validity(0.05).unwrap();
        assert_eq!((v.ffma_latency_cycles, v.schedulers_per_sm), (4, 4));
        assert_eq!(v.duration_tolerance, 0.05);
        let v = ceilings(5.6, 2.2).validity(0.05).unwrap();
        assert_eq!((v.ffma_latency_cycles, v.schedulers_per_sm), (6, 2));
        for (l, i) in [
            (f64::NAN, 4.0),
            (4.0, 0.2),
            (f64::INFINITY, 4.0),
            (-1.0, 4.0),
        ] {
            let e = ceilings(l, i).validity(0.05).unwrap_err();
            assert!(e.contains("expected a finite figure"), "{e}");
        }
    }
}
