//! What the command tests share: the checkout they run in and its committed results.

use std::path::PathBuf;

/// The workspace the tests run in.
pub fn root() -> PathBuf {
    crate::paths::workspace().unwrap()
}

pub fn expectations() -> PathBuf {
    root().join("expectations")
}

/// The run the H200 baselines were blessed from (wave mode, the profile's).
pub fn committed() -> PathBuf {
    root().join("expectations/recorded/h200-2026-11-30-wave.json")
}
