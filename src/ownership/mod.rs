//! GPU ownership: whether a measurement had its GPU to itself. `lock` is the device's
//! cross-process lock (one measuring process per GPU, whoever else runs the suite on the
//! machine), `contention` the checks for other processes' work and for clock throttling
//! around each measurement. Apart from the engine that measures (`measure`), which takes
//! the lock and the checks through its session; this layer knows nothing of what is
//! measured and depends only on the support modules.

pub mod contention;
pub mod lock;
