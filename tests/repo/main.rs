//! The repository checked against itself: the code map ARCHITECTURE.md draws, its
//! documentation's links and tables, and the shape of the tests.

mod architecture;
mod docs;
mod variables;

use std::path::PathBuf;

/// The repository's root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}
