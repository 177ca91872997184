//! What the onboarding tests share: a copy of expectations/ where no profile names the
//! H200, the committed runs, and the synthetic ceilings.

use super::root;
use accprobe::model::results::RunResults;
use accprobe::onboard::Ceilings;
use std::path::PathBuf;

/// A copy of expectations/ with only the study's profile and policy: the H200 is a GPU no
/// profile names there.
pub fn without_h200() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("expectations");
    for f in ["documented.yaml", "policies/study.yaml"] {
        let to = dir.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root().join("expectations").join(f), to).unwrap();
    }
    (tmp, dir)
}

/// A committed recorded run, by file name.
pub fn recorded(file: &str) -> RunResults {
    RunResults::load(&root().join("expectations/recorded").join(file)).unwrap()
}

/// Ceilings for the committed H200 runs: synthetic, not a measurement (the figures
/// h200.yaml types in), shared with xtask's tests.
pub fn ceilings() -> Ceilings {
    let text =
        std::fs::read_to_string(root().join("tests/data/onboard/synthetic-ceilings.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}
