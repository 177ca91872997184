//! accprobe: the accumulator-count probe as a GPU regression gate.
//!
//! The pipeline, one module per stage, data flowing one way (see ARCHITECTURE.md):
//!
//! ```text
//! expectations -> model::variant -> compile -> measure -> model::results -> verdict -> report
//! ```
//!
//! The modules below are declared by layer, each layer importing only those above it and
//! the support modules: the stages' data and judgement (plain computation, tested on every
//! machine), the GPU (the only code that calls CUDA, NVRTC or NVML), the services built on
//! both, and the front end. `cargo xtask` is a second front end, in its own crate.

// Stages without the GPU: the data every stage shares, the expectations, the verdict and
// what a run writes.
pub mod expectations;
pub mod model;
pub mod report;
pub mod verdict;

// The GPU: the compile stage (NVRTC), the measure stage (CUDA), and whether the GPU was ours
// while it measured (the device lock, NVML's view of other work).
pub mod compile;
pub mod measure;
pub mod ownership;

// Services over the stages: profiles loaded and chosen, baselines blessed, the compile-only
// gate, the policy gate, onboarding a new GPU, the results history.
pub mod bless;
pub mod catalog;
pub mod compile_only;
pub mod history;
pub mod onboard;
pub mod policy_gate;

// The libtest front end (`tests/probe.rs`).
pub mod harness;

// Support, which any layer may use and which uses no layer (but `config`, which reads
// ACCPROBE_MODE into `model`'s `Mode`): child processes, the environment's settings, digests, errors,
// bounded reading, writing files, signals, locks that survive a panic, how outside text is
// shown, and the trace.
pub mod child;
pub mod config;
pub(crate) mod digest;
pub mod error;
pub mod input;
pub mod interrupt;
pub mod output;
pub mod sync;
pub mod text;
pub mod trace;

pub use error::{Error, Result};
