//! The gate on committed data, with no GPU: verdicts, faults, profiles, policies, the
//! compile-only gate, bless, onboarding, the device lock and contention checks, and the
//! environment's one rule. One module per concern; what they share (committed data and
//! its mutations, the onboarding fixtures) is `tests/common/`.

#[path = "../common/mod.rs"]
mod common;

mod bless;
mod compile_only_gate;
mod config;
mod contention;
mod contexts;
mod expectations;
mod faults;
mod lock;
mod onboard;
mod onboard_contexts;
mod policy_gate;
mod policy_picks;
mod reductions;
mod schedule;
mod suspect;
mod validity;
mod verdicts;
