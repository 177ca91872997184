//! Verdicts over arbitrary results: a results file read from the input, every case of the
//! committed profiles (documented, h200) evaluated against it. Never a panic, and a case
//! whose results are missing or unusable always fails, whatever the profile expects.
#![no_main]
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::verdict::cases::{cases, Case};
use accprobe::verdict::evaluate;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::LazyLock;

static PROFILES: LazyLock<Vec<(Profile, Vec<Case>)>> = LazyLock::new(|| {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../expectations");
    ["documented", "h200"]
        .iter()
        .map(|name| {
            let p = accprobe::catalog::load(&dir.join(format!("{name}.yaml")))
                .expect("committed profile loads");
            let cases = cases(&p);
            (p, cases)
        })
        .collect()
});

fuzz_target!(|text: &str| {
    let Ok(results) = RunResults::from_json(text, Path::new("fuzz.json")) else {
        return;
    };
    for (profile, cases) in PROFILES.iter() {
        for case in cases {
            let outcome = evaluate(case, profile, &results);
            let unusable = case.needs.iter().any(|v| {
                results
                    .get(*v)
                    .is_none_or(|r| !(r.mean_progress.is_finite() && r.mean_progress > 0.0))
            });
            if unusable {
                assert!(
                    outcome.is_fail(),
                    "{}: missing or unusable results gave {outcome:?}",
                    case.name
                );
            }
        }
    }
});
