//! Plain data every stage may import: the variant matrix (stage 2), the probe settings,
//! the GPU's identity and environment, and results (stage 5). Nothing here touches a GPU,
//! reads a file it was not handed, or imports another stage.

pub mod ceilings;
pub mod compiled;
pub mod context;
pub mod gpu;
pub mod median;
pub mod place;
pub mod results;
pub mod settings;
pub mod variant;
pub mod workload;
