//! Blessing arbitrary results: the check, then the baselines file it would write, for the
//! committed h200 profile and a one-chain profile (quick to satisfy). Nothing is written
//! to the repository: each profile is a copy in a temporary folder, without its recorded
//! run, whose baselines file is the one written here. What the check lets through must be
//! written so that the profile loads it back with the same figures and SASS, and blessing
//! the same results again must report no change.
#![no_main]
use accprobe::bless;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use libfuzzer_sys::fuzz_target;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

const SMALL: &str = "\
name: small
description: one chain, two accumulator counts, one sink mode
match:
  gpu_names: [\"NVIDIA H200\"]
  compute_capabilities: [\"9.0\"]
probe:
  blocks: 1
  block_threads: 64
  warmup_launches: 1
  repeats: 2
  budget_cycles: 1000
  chains: [3]
  accumulators: [1, 2]
invariants:
  - no_spills: {}
sink_isolation:
  modes: [C]
  accumulators: [2]
baselines:
  file: baselines/small.yaml
  tolerance: 0.01
";

struct Setup {
    profiles: Vec<Profile>,
}

static SETUP: LazyLock<Setup> = LazyLock::new(|| {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = std::env::temp_dir().join(format!("accprobe-fuzz-bless-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    // The h200 profile as committed without its recorded run (the sections from
    // `recorded:` on), beside copies of its policy and committed baselines: a profile
    // reaches only files in its own folder.
    let h200 = std::fs::read_to_string(repo.join("expectations/h200.yaml")).unwrap();
    let h200 = h200[..h200.find("\nrecorded:").expect("h200 has a recorded run")].to_string();
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::copy(
        repo.join("expectations/policies/study.yaml"),
        dir.join("policies/study.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("h200.yaml"), h200).unwrap();
    std::fs::copy(
        repo.join("expectations/baselines/h200.yaml"),
        dir.join("baselines/h200.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("small.yaml"), SMALL).unwrap();
    let profiles = ["h200", "small"]
        .iter()
        .map(|n| {
            accprobe::catalog::load(&dir.join(format!("{n}.yaml"))).expect("fuzz profile loads")
        })
        .collect();
    Setup { profiles }
});

fn baselines_file(p: &Profile) -> PathBuf {
    p.baselines
        .as_ref()
        .expect("both profiles have baselines")
        .file
        .clone()
}

fuzz_target!(|text: &str| {
    let Ok(results) = RunResults::from_json(text, Path::new("fuzz.json")) else {
        return;
    };
    for p in &SETUP.profiles {
        let strict = bless::check(p, &results, false);
        if bless::check(p, &results, true).is_err() {
            assert!(
                strict.is_err(),
                "--allow-invalid refused what the strict check accepts"
            );
            continue;
        }
        let file = baselines_file(p);
        let b = bless::prepare(
            p,
            &results,
            "fuzz.json",
            "fuzz",
            &file,
            p.baselines.as_ref(),
        );
        if strict.is_err() {
            continue;
        }
        // Accepted: the written file must load back as this profile's baselines.
        std::fs::write(&file, &b.contents).unwrap();
        let reloaded = match accprobe::catalog::load(&p.file) {
            Ok(r) => r,
            Err(e) => panic!("blessed baselines do not load: {e}\n{}", b.contents),
        };
        let back = reloaded.baselines.expect("baselines");
        for v in p.probe.variants() {
            let r = results.get(v).expect("the check found every variant");
            let blessed = back.progress[&v.name()];
            assert!(
                (blessed - r.baseline_progress()).abs()
                    <= 0.05 + 1e-9 * r.baseline_progress().abs(),
                "{v}: blessed {blessed}, measured {}",
                r.baseline_progress()
            );
            match &r.sass {
                Some(s) => {
                    let sb = &back.sass[&v.name()];
                    assert_eq!(
                        (&sb.digest, &sb.loop_body),
                        (&s.digest, &s.loop_body),
                        "{v}"
                    );
                }
                None => assert!(!back.sass.contains_key(&v.name()), "{v}"),
            }
        }
        // Blessing the same results again changes nothing.
        let again = bless::prepare(p, &results, "fuzz.json", "fuzz", &file, Some(&back));
        assert!(
            again.diff.is_empty(),
            "re-blessing the same results reports {:?}",
            again.diff
        );
    }
});
