//! The physical ceilings of a GPU as the ceilings microbenchmark measures them
//! (`kernels/ceilings.cu`, launched by `measure::ceilings`): plain data, which onboarding
//! turns into a profile's `validity:` (`onboard::ceilings`).

/// What the ceilings microbenchmark measured, and where.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceilings {
    /// Cycles per FFMA of one warp's dependent chain.
    pub ffma_latency_cycles: f64,
    /// Warp-level FFMAs issued per cycle on one SM, all its warps together.
    pub ffma_issue_per_cycle_per_sm: f64,
    /// The warps of the issue-rate block.
    pub(crate) issue_warps: u32,
    pub(crate) gpu_name: String,
    pub compute_capability: String,
    pub(crate) driver_version: String,
    pub(crate) nvrtc_version: String,
    /// RFC 3339, UTC.
    pub(crate) date: String,
}

impl Ceilings {
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
