//! What the contention checks saw around a run's measurements: whether the GPU was ours.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the contention checks saw around a run's measurements.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contention {
    /// Checks made: one before and one after each measurement (or attempt at one).
    pub checks: u32,
    /// Measurements repeated (or postponed) because a check found the GPU shared or
    /// throttled.
    pub retries: u32,
    /// Seconds this process waited for another accprobe process to release the GPU.
    #[serde(default)]
    pub lock_wait_s: f64,
    /// Compute processes other than accprobe's seen on the GPU by any check, as NVML
    /// reports their PIDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_pids: Vec<u32>,
    /// Clock throttle reasons that slow the probe, seen by any check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throttle_reasons: Vec<String>,
    /// Variants whose measurement was still disturbed after the retries, with the cause:
    /// their timing cases are errors of the run, not verdicts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub contaminated: BTreeMap<String, String>,
    /// Why the checks for other work could not be made (no NVML), when they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unchecked: Option<String>,
}
