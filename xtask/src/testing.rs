//! What the command tests share: the checkout they run in and its committed results.

use std::path::PathBuf;

/// The workspace the tests run in.
pub fn root() -> PathBuf {
    crate::paths::workspace().unwrap()
}

pub fn expectations() -> PathBuf {
    root().join("expectations")
}

/// The H200 study's committed wave run: its 69 variants (the base and sink-isolation
/// ones), before the contexts were measured.
pub fn committed() -> PathBuf {
    root().join("expectations/recorded/h200-2026-11-30-wave.json")
}

/// The run the H200 baselines are blessed from (wave mode, with the contexts: the
/// profile's `recorded:` results).
pub fn blessed_from() -> PathBuf {
    root().join("expectations/recorded/h200-2026-12-04-contexts-wave.json")
}
