//! Stage 1 of the pipeline: the expectations. Hand-written profiles and policies, the
//! generated baselines file each profile names, and the recorded results it replays.
//! Everything here reads files and checks them, naming file, line and column on refusal;
//! nothing here knows a GPU.

pub mod baselines;
pub mod compile_only;
pub mod policy;
pub mod policy_error;
pub mod policy_source;
pub mod profile;
pub(crate) mod recorded;
pub(crate) mod yaml;
mod yaml_words;
