//! accprobe: the accumulator-count probe as a GPU regression gate.
//!
//! The pipeline, one module per stage, data flowing one way (see ARCHITECTURE.md):
//! profile -> variant -> compile -> measure -> results -> verdict -> report,
//! with `device` finding the GPU and `suite` driving the generated test cases.

pub mod bless;
pub mod compile;
pub mod device;
pub mod error;
pub mod measure;
pub mod policy;
pub mod profile;
pub mod ptxas;
pub mod report;
pub mod results;
pub mod sass;
pub mod suite;
pub mod target;
pub mod variant;
pub mod verdict;
pub mod yaml;

pub use error::{Error, Result};
