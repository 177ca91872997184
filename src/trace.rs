//! Where a run's time goes: with `ACCPROBE_TRACE=1`, each stage marks on stderr how long
//! after the start of the process it reached a point (the CUDA driver ready, each context,
//! NVRTC, compiled, the lock, each measurement and its contention checks). Plain lines,
//! for `cargo xtask` and the suite alike; off by default.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();
static ON: AtomicBool = AtomicBool::new(false);

/// Starts the clock (the first call wins) and reads `ACCPROBE_TRACE`; `Err` says what is
/// wrong with its value.
pub fn start() -> Result<(), crate::config::ConfigError> {
    START.get_or_init(Instant::now);
    ON.store(crate::config::trace()?, Ordering::Relaxed);
    Ok(())
}

/// Whether [`start`] was called.
pub(crate) fn started() -> bool {
    START.get().is_some()
}

/// Seconds since [`start`] (0 before it).
pub(crate) fn elapsed() -> f64 {
    START.get().map_or(0.0, |t| t.elapsed().as_secs_f64())
}

/// Whether the marks are on.
pub(crate) fn enabled() -> bool {
    ON.load(Ordering::Relaxed)
}

/// One mark, when the marks are on: `accprobe: trace 0.123 s: what`.
pub(crate) fn mark(what: impl std::fmt::Display) {
    if enabled() {
        crate::say_err!("accprobe: trace {:.3} s: {what}", elapsed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_runs_from_the_first_start() {
        // The environment of the test process is not ours to change; only the clock.
        let _ = start();
        let a = elapsed();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let _ = start();
        assert!(elapsed() > a, "a second start must not reset the clock");
    }
}
