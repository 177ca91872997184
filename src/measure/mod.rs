//! Stage 4 of the pipeline: measure. Loads the compiled matrix on the device and runs it:
//! warm-up launches, then counted repeats, each with poisoned outputs that are checked
//! afterwards, each timed and tagged with the SMs its blocks ran on.
//!
//! Two modes, one engine (`LoadedMatrix::run`): **serial** runs one variant at a
//! time, each launch timed by CUDA events; **wave** runs every variant of a wave set at
//! once, one stream each (one block each lands on its own SM), each variant's next launch
//! queued by the host as soon as its last has ended, and times each launch by the kernel's
//! own `%globaltimer` (events would hold launches back in the driver's hardware queues).
//! Produces plain [`crate::model::results::VariantResult`]s.
//!
//! - `matrix`: the loaded matrix and the two modes' entry points;
//! - `memory`: where a run's buffers lie, and the memory that holds them;
//! - `waves`: the groups a run's variants run in, and how many a wave may hold;
//! - `pacing`: the order in which the host queues a run's launches;
//! - `engine`: runs a run's groups on the GPU and keeps what each launch gave;
//! - `outputs`: what is wrong with one launch's outputs;
//! - `isolation`: a variant the GPU refuses fails alone;
//! - `sm_sharing`: blocks that shared an SM are measured again apart.

pub(crate) mod ceilings;
pub mod device;
mod exclusivity;
pub mod session;
pub mod target;

mod engine;
mod isolation;
mod matrix;
mod memory;
mod outputs;
mod pacing;
mod sm_sharing;
mod waves;

pub(crate) use engine::{OPERAND_A, OPERAND_B};
pub(crate) use matrix::LoadedMatrix;
pub(crate) use sm_sharing::own_sms_in_sets;
pub use waves::{measured_alone, wave_order, wave_plan, wave_sets};

use crate::error::GpuError;

/// A CUDA driver error while doing `what`, for `map_err`.
fn cuda(what: &str) -> impl Fn(cudarc::driver::DriverError) -> GpuError + '_ {
    move |e| GpuError::cuda(what, e)
}
