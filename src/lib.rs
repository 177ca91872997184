//! accprobe: the accumulator-count probe as a GPU regression gate.
//!
//! The pipeline, one module per stage, data flowing one way (see ARCHITECTURE.md):
//!
//! ```text
//! expectations -> model::variant -> compile -> measure -> model::results -> verdict -> report
//! ```
//!
//! `model` holds the plain data every stage shares; `catalog` loads and chooses profiles;
//! `bless` turns results into baselines. Two thin front ends use the same library: the
//! libtest harness (`harness`, behind `tests/probe.rs`) and `cargo xtask`.

pub mod bless;
pub mod catalog;
pub mod child;
pub mod compile;
pub mod compile_only;
pub mod config;
pub mod error;
pub mod expectations;
pub mod harness;
pub mod history;
pub mod input;
pub mod interrupt;
pub mod measure;
pub mod model;
pub mod onboard;
pub mod output;
pub mod ownership;
pub mod policy_gate;
pub mod report;
pub mod sync;
pub mod text;
pub mod trace;
pub mod verdict;

pub use error::{Error, Result};
