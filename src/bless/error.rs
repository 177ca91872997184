//! Why results may not become a profile's baselines.

use crate::expectations::policy_error::PolicyError;

/// A bless refused: what was wrong, with the reasons a person reads (one line each).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BlessError {
    /// Results without an environment: recorded, never measured.
    #[error("the results have no environment: only measured results can be blessed")]
    Unmeasured,
    /// Results that do not describe `profile` on this GPU (another GPU, profile, launch
    /// settings or mode; a variant missing or whose figure would be zero), whatever
    /// `--allow-invalid` says.
    #[error("refusing to bless: these results cannot be profile {profile:?}'s baselines (--allow-invalid does not change that):\n  {}", .reasons.join("\n  "))]
    NotThisProfile {
        profile: String,
        reasons: Vec<String>,
    },
    /// Results that failed their validity checks, without `--allow-invalid`.
    #[error("refusing to bless results that failed validity checks (pass --allow-invalid to bless them anyway):\n  {}", .reasons.join("\n  "))]
    Invalid { reasons: Vec<String> },
    /// The gated policy gave no pick for `context`.
    #[error("refusing to bless: policy {policy} in context {context}: {source}")]
    NoPick {
        policy: String,
        context: String,
        #[source]
        source: PolicyError,
    },
    /// The policy's pick `k` for `context` is not in the results.
    #[error("refusing to bless: policy {policy} in context {context}: its pick acc{k} is not in the results")]
    PickNotMeasured {
        policy: String,
        context: String,
        k: u32,
    },
}
