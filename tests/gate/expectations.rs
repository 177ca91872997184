//! Loading and choosing profiles. The bad-input corpus: every file under tests/data/bad/ must be refused with an error
//! that names the file (and line and column where the format has them), never a panic.
//! Adding a case is adding a file: YAML files say what the error must contain in a first
//! line `# expect: ...` (a leading `:L:C:` there means "at line L, column C of the file").
//! Profiles in bad/profiles/baselines-*.yaml name a bad generated file in
//! bad/profiles/baselines/ (a profile reaches only its own folder tree), and the error must
//! point into that file. No error may be longer than 2,000 characters or carry a control
//! character other than a newline: the bad file's bytes must not reach a terminal or the
//! JUnit XML raw.

use crate::common::root;
use accprobe::catalog;
use accprobe::expectations::policy::Policy;
use accprobe::model::gpu::GpuIdentity;
use accprobe::model::results::RunResults;
use accprobe::verdict::cases::cases;
use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bad")
}

fn files(folder: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(corpus().join(folder))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// The `# expect:` line of a file, if it has one.
fn expectation(path: &Path) -> Option<String> {
    let bytes = std::fs::read(path).ok()?;
    let first = bytes.split(|&b| b == b'\n').next()?;
    let line = std::str::from_utf8(first).ok()?;
    line.strip_prefix("# expect: ").map(str::to_string)
}

/// Loads `path` with `load`; returns why it fails, or why the test fails.
fn check(path: &Path, load: fn(&Path) -> Result<(), String>) -> Result<(), String> {
    let owned = path.to_path_buf();
    let error = match catch_unwind(move || load(&owned)) {
        Err(_) => return Err("panicked".into()),
        Ok(Ok(())) => return Err("was accepted".into()),
        Ok(Err(e)) => e,
    };
    // What the file holds may be quoted, briefly: never kilobytes of it.
    if error.chars().count() > 2000 {
        return Err(format!("error of {} characters", error.chars().count()));
    }
    if let Some(c) = error.chars().find(|&c| c.is_control() && c != '\n') {
        return Err(format!("error carries control character {c:?}: {error:?}"));
    }
    if let Some(w) = library_words(&error) {
        return Err(format!("error speaks a library's words ({w:?}): {error}"));
    }
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let want = expectation(path);
    // The file the error must name: the generated file a profile points at, else itself.
    let named = match want.as_deref().and_then(|w| {
        w.split_once(':')
            .filter(|(f, _)| f.ends_with(".yaml") && f.contains('/'))
    }) {
        Some((f, _)) => f.to_string(),
        None => name.clone(),
    };
    if !error.contains(&named) {
        return Err(format!("error does not name {named}: {error}"));
    }
    if let Some(w) = want {
        // `[file]:L:C: words` or `words`: the position must follow the file's name, and the
        // words must be in the message.
        let (position, words) = split_position(&w);
        if let Some((file, l, c)) = position {
            let at = format!(
                "{}:{l}:{c}:",
                if file.is_empty() { name.as_str() } else { file }
            );
            if !error.contains(&at) {
                return Err(format!("error is not at {at}: {error}"));
            }
        }
        if !error.contains(words) {
            return Err(format!("error lacks {words:?}: {error}"));
        }
    }
    Ok(())
}

/// The first words of `error` that are a library's, not accprobe's: its API (what to set
/// in its options, which type to use) or a value as Rust's Debug writes it
/// (`ScalarBytes { total_scalar_bytes: 67108894 }`), neither of which a profile's author
/// can act on.
fn library_words(error: &str) -> Option<String> {
    for w in [
        "Options",
        "Option<",
        "DuplicateKeyPolicy",
        "from_str",
        "budget breached",
        "use String",
    ] {
        if error.contains(w) {
            return Some(w.to_string());
        }
    }
    // `Name { field: ...`: a struct's Debug.
    error.match_indices(" { ").find_map(|(at, _)| {
        let word: String = error[..at]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        let debug = word.starts_with(|c: char| c.is_ascii_uppercase())
            && error[at + 3..]
                .split_once(": ")
                .is_some_and(|(f, _)| f.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
        debug.then_some(format!("{word} {{"))
    })
}

/// Splits `dir/file.yaml:4:27: words` or `:4:27: words` into the position and the words.
fn split_position(w: &str) -> (Option<(&str, &str, &str)>, &str) {
    let parts: Vec<&str> = w.splitn(4, ':').collect();
    if parts.len() == 4
        && !parts[1].is_empty()
        && parts[1].bytes().all(|b| b.is_ascii_digit())
        && parts[2].bytes().all(|b| b.is_ascii_digit())
        && !parts[2].is_empty()
    {
        (Some((parts[0], parts[1], parts[2])), parts[3].trim())
    } else {
        (None, w)
    }
}

fn run_folder(folder: &str, load: fn(&Path) -> Result<(), String>) -> (usize, Vec<String>) {
    let mut problems = Vec::new();
    let all = files(folder);
    for f in &all {
        if let Err(p) = check(f, load) {
            problems.push(format!("{}: {p}", f.display()));
        }
    }
    (all.len(), problems)
}

#[test]
fn every_bad_file_is_refused_with_its_name_and_position_and_never_a_panic() {
    let profiles = run_folder("profiles", |p| {
        catalog::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let policies = run_folder("policies", |p| {
        Policy::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let results = run_folder("results", |p| {
        RunResults::load(p).map(|_| ()).map_err(|e| e.to_string())
    });
    let total = profiles.0 + policies.0 + results.0;
    assert!(total >= 20, "the corpus has {total} files");
    let problems: Vec<String> = [profiles.1, policies.1, results.1].concat();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn results_errors_carry_a_position_where_json_has_one() {
    for f in files("results") {
        let e = RunResults::load(&f).unwrap_err();
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name == "invalid-utf8.json" || name == "other-schema.json" {
            continue; // not a syntax error: no position to give
        }
        assert!(e.position.is_some(), "{name}: {e}");
    }
}

// --- a good profile, and selection --------------------------------------------------

const GOOD: &str = "\
name: t
description: d
probe:
  blocks: 1
  block_threads: 256
  warmup_launches: 1
  repeats: 10
  budget_cycles: 1000
  chains: [7, 13]
  accumulators: [1, 2]
invariants:
  - peak: {accumulators: 2, tolerance: 0.0}
  - gain_grows: {accumulators: 2, over: 1, min_increase: 0.0}
  - no_spills: {}
";

#[test]
fn the_good_fixture_loads() {
    let p = catalog::parse(GOOD, Path::new("expectations/t.yaml")).unwrap();
    assert_eq!(cases(&p).len(), 4 + 4 + 2 + 1 + 3);
}

fn gpu(name: &str, cc: &str) -> GpuIdentity {
    GpuIdentity {
        name: name.into(),
        compute_capability: cc.into(),
    }
}

#[test]
fn selection_by_name_capability_force_and_fallback() {
    let (profiles, errors) = catalog::load_dir(&root().join("expectations"));
    assert!(errors.is_empty(), "{errors:?}");
    let pick = |g: Option<GpuIdentity>, f: Option<&str>| catalog::select(&profiles, g.as_ref(), f);
    let s = pick(Some(gpu("NVIDIA H200", "9.0")), None).unwrap();
    assert_eq!(s.profile.name, "h200");
    assert!(s.why.contains("matches GPU name"), "{}", s.why);
    let s = pick(Some(gpu("NVIDIA H100 80GB HBM3", "9.0")), None).unwrap();
    assert_eq!(s.profile.name, "h200");
    assert!(s.why.contains("compute capability 9.0"), "{}", s.why);
    let s = pick(Some(gpu("NVIDIA A100-SXM4-80GB", "8.0")), None).unwrap();
    assert_eq!(s.profile.name, "documented");
    assert!(
        s.why
            .contains("no profile matches GPU \"NVIDIA A100-SXM4-80GB\""),
        "{}",
        s.why
    );
    let s = pick(Some(gpu("NVIDIA H200", "9.0")), Some("documented")).unwrap();
    assert_eq!(s.profile.name, "documented");
    assert!(s.why.contains("forced by ACCPROBE_PROFILE"), "{}", s.why);
    let e = pick(None, Some("nope")).unwrap_err().to_string();
    assert!(e.contains("names no profile") && e.contains("h200"), "{e}");
}

/// Each inconsistent results file is refused for its own inconsistency, naming the variant
/// and pointing at its entry: before any verdict (replay, gate, bless, report) reads it.
#[test]
fn inconsistent_results_are_refused_for_what_is_wrong_with_them() {
    let v = "variant \"chain7_acc2_effective2\" (entry 2)";
    let table: &[(&str, &str, &str)] = &[
        (
            "summary-contradicts-samples.json",
            v,
            "the summary contradicts the samples: max 250 (samples: 202)",
        ),
        (
            "mean-contradicts-samples.json",
            v,
            "mean_progress 210 is not the mean of the samples (201)",
        ),
        (
            "missing-warps.json",
            "variant \"chain7_acc1_effective1\" (entry 1)",
            "repeat 0 has 2 samples, but the settings launch 8 warps",
        ),
        (
            "ragged-repeats.json",
            v,
            "repeat 1 has 1 warps' samples, repeat 0 has 2",
        ),
        (
            "repeats-not-settings.json",
            v,
            "3 repeats of samples, but the settings ask for 2",
        ),
        (
            "empty-samples-with-summary.json",
            v,
            "a summary without samples",
        ),
        (
            "samples-without-summary.json",
            v,
            "samples without a summary",
        ),
        (
            "duplicate-variant.json",
            "variant \"chain7_acc2_effective2\" (entry 3)",
            "a second entry for chain7_acc2_effective2",
        ),
        (
            "name-mismatch.json",
            "variant \"chain7_acc4_effective4\" (entry 2)",
            "expected \"chain7_acc2_effective2\"",
        ),
        (
            "effective-not-min.json",
            v,
            "effective 1 is not min(accumulators 2, chain 7) = 2",
        ),
        (
            "poison-sample.json",
            v,
            "repeat 1 warp 0 holds the poison value 18446744073709551615",
        ),
        (
            "sample-above-budget.json",
            v,
            "repeat 0 warp 0 made 200 iterations, more than its budget of 150 cycles",
        ),
        (
            "loop-stl-not-listed.json",
            v,
            "\"STL [R1], R10\", which local_memory_instructions does not list",
        ),
        (
            "launch-times-not-repeats.json",
            v,
            "1 launch times for 2 repeats",
        ),
        (
            "sm-ids-not-repeats.json",
            v,
            "3 repeats of SM ids for 2 repeats",
        ),
    ];
    let mut problems = Vec::new();
    for &(name, variant, says) in table {
        let path = corpus().join("results").join(name);
        let e = RunResults::load(&path).unwrap_err();
        let text = e.to_string();
        if !(text.contains("inconsistent results") && text.contains(variant) && text.contains(says))
        {
            problems.push(format!("{name}: expected {variant}: {says}; got {text}"));
        }
        if e.position.is_none() {
            problems.push(format!("{name}: no position: {text}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Every inconsistent file in the folder is in the table above.
    for f in files("results") {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let text = RunResults::load(&f).unwrap_err().to_string();
        assert!(
            !text.contains("inconsistent results") || table.iter().any(|t| t.0 == name),
            "{name} is not in the table"
        );
    }
}

#[test]
fn two_profiles_for_one_gpu_are_an_error_naming_both_files() {
    let dir = std::env::temp_dir().join(format!("accprobe-two-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let documented = std::fs::read_to_string(root().join("expectations/documented.yaml")).unwrap();
    let write = |file: &str, name: &str, matches: &str| {
        let text = documented.replacen(
            "name: documented",
            &format!("name: {name}\nmatch:\n{matches}"),
            1,
        );
        std::fs::write(dir.join(file), text).unwrap();
    };
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::copy(
        root().join("expectations/policies/study.yaml"),
        dir.join("policies/study.yaml"),
    )
    .unwrap();
    write(
        "a.yaml",
        "a",
        "  gpu_names: [\"NVIDIA H200\"]\n  compute_capabilities: [\"9.0\"]",
    );
    write("b.yaml", "b", "  gpu_names: [\"nvidia h200\"]");
    write("c.yaml", "c", "  compute_capabilities: [\"9.0\"]");
    write("d.yaml", "d", "  compute_capabilities: [\"9.0\", \"8.0\"]");
    let (profiles, errors) = catalog::load_dir(&dir);
    assert!(errors.is_empty(), "{errors:?}");
    // By name: a and b both name the H200; c and d only match its capability.
    let e = catalog::select(&profiles, Some(&gpu("NVIDIA H200", "9.0")), None).unwrap_err();
    assert!(
        matches!(&e, catalog::SelectError::Ambiguous { by_name: true, profiles, .. }
            if profiles.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>() == ["a", "b"]),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("matches 2 profiles by GPU name")
            && e.contains(&dir.join("a.yaml").display().to_string())
            && e.contains(&dir.join("b.yaml").display().to_string()),
        "{e}"
    );
    // By capability, where none names the GPU: a, c and d.
    let e = catalog::select(&profiles, Some(&gpu("NVIDIA H100", "9.0")), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("matches 3 profiles by compute capability 9.0"),
        "{e}"
    );
    // One match is chosen, and forcing one resolves the ambiguity.
    let s = catalog::select(&profiles, Some(&gpu("NVIDIA A100", "8.0")), None).unwrap();
    assert_eq!(s.profile.name, "d");
    let s = catalog::select(&profiles, Some(&gpu("NVIDIA H200", "9.0")), Some("b")).unwrap();
    assert_eq!(s.profile.name, "b");
    std::fs::remove_dir_all(dir).unwrap();
}

// --- confinement on real paths ------------------------------------------------------

/// Every path a profile names is confined to the profile's real folder: a symlink (to a
/// file, or a symlinked folder on the way) that leads out of it is refused before the file
/// is read, so its content never appears in the error; a link that stays inside is fine.
#[test]
fn a_symlink_out_of_the_profile_folder_is_refused_and_its_content_never_shown() {
    use std::os::unix::fs::symlink;
    let top = std::env::temp_dir().join(format!("accprobe-confine-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let (dir, outside) = (top.join("expectations"), top.join("outside"));
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.yaml");
    std::fs::write(&secret, "root:x:0:0:SECRET-LINE:/root:/bin/bash\n").unwrap();
    symlink(&secret, dir.join("baselines/linked.yaml")).unwrap();
    symlink(&outside, dir.join("elsewhere")).unwrap();
    symlink("../outside/missing.yaml", dir.join("dangling.yaml")).unwrap();
    symlink("../outside/not-yet", dir.join("gone")).unwrap();
    symlink("loop", dir.join("loop")).unwrap();
    let head = GOOD.replace("name: t", "name: p");
    for (key, section) in [
        (
            "baselines.file",
            "baselines:\n  file: baselines/linked.yaml\n  tolerance: 0.005\n",
        ),
        (
            "baselines.file",
            "baselines:\n  file: elsewhere/secret.yaml\n  tolerance: 0.005\n",
        ),
        (
            "baselines.file",
            "baselines:\n  file: dangling.yaml\n  tolerance: 0.005\n",
        ),
        (
            "baselines.file",
            "baselines:\n  file: gone/x.yaml\n  tolerance: 0.005\n",
        ),
        (
            "policy_gate.file",
            "policy_gate:\n  file: baselines/linked.yaml\n  tolerance: 0.02\n",
        ),
        (
            "recorded.results",
            "recorded:\n  source: a run\n  results: elsewhere/secret.yaml\n",
        ),
        (
            "compile_only.baselines",
            "compile_only:\n  architectures: [sm_90]\n  toolchains: [\"12.8\"]\n  baselines: baselines/linked.yaml\n",
        ),
    ] {
        let profile = dir.join("p.yaml");
        std::fs::write(&profile, format!("{head}{section}")).unwrap();
        let e = catalog::load(&profile).unwrap_err().to_string();
        assert!(
            e.contains(key) && e.contains("outside the profile's folder"),
            "{key}: {e}"
        );
        assert!(e.starts_with(&profile.display().to_string()), "{e}");
        assert!(!e.contains("SECRET"), "the refused file was read: {e}");
    }
    // A link that stays inside the folder is read as the file it names.
    std::fs::copy(
        root().join("expectations/policies/study.yaml"),
        dir.join("baselines/policy.yaml"),
    )
    .unwrap();
    symlink("baselines/policy.yaml", dir.join("inside.yaml")).unwrap();
    let profile = dir.join("p.yaml");
    std::fs::write(
        &profile,
        format!("{head}policy_gate:\n  file: inside.yaml\n  tolerance: 0.02\n"),
    )
    .unwrap();
    assert!(catalog::load(&profile).unwrap().policy_gate.is_some());
    // A link to itself stays inside: refused as unreadable, never a hang or a panic.
    std::fs::write(
        &profile,
        format!("{head}policy_gate:\n  file: loop\n  tolerance: 0.02\n"),
    )
    .unwrap();
    let e = catalog::load(&profile).unwrap_err().to_string();
    assert!(e.contains("loop"), "{e}");
    std::fs::remove_dir_all(top).unwrap();
}

#[test]
fn a_reductions_section_adds_each_kernel_at_each_k_in_the_base_and_at_each_warps() {
    let text = format!(
        "{GOOD}reductions:\n  kernels: [softmax, dot]\n  accumulators: [1, 4]\n  warps: [32]\n"
    );
    let p = catalog::parse(&text, Path::new("expectations/t.yaml")).unwrap();
    let names: Vec<String> = p
        .probe
        .variants()
        .iter()
        .filter(|v| !v.workload.is_probe())
        .map(|v| v.name())
        .collect();
    assert_eq!(
        names,
        [
            "softmax_acc1",
            "softmax_acc4",
            "softmax_acc1_w32",
            "softmax_acc4_w32",
            "dot_acc1",
            "dot_acc4",
            "dot_acc1_w32",
            "dot_acc4_w32",
        ]
    );
    // Each is its own case, and the probe's variants are as they were.
    let cases = accprobe::verdict::cases::cases(&p);
    assert!(cases
        .iter()
        .any(|c| c.name == "sass::softmax_acc4_w32::shape"));
    assert!(cases.iter().any(|c| c.name == "probe::dot_acc1"));
    let without = catalog::parse(GOOD, Path::new("expectations/t.yaml")).unwrap();
    assert_eq!(without.probe.main_variants(), p.probe.main_variants());
}

#[test]
fn a_contexts_section_adds_each_input_alone_and_each_corner() {
    let text = format!(
        "{GOOD}contexts:\n  chains: [13]\n  accumulators: [1, 2]\n  warps: [16, 32]\n  side_chains: [4]\n  live_values: [48]\n  corners:\n    - {{warps: 32, live_values: 48}}\n"
    );
    let p = catalog::parse(&text, Path::new("expectations/t.yaml")).unwrap();
    let names: Vec<String> = p
        .probe
        .variants()
        .iter()
        .filter(|v| !v.is_base())
        .map(|v| v.name())
        .collect();
    assert_eq!(
        names,
        [
            "chain13_acc1_effective1_w16",
            "chain13_acc2_effective2_w16",
            "chain13_acc1_effective1_w32",
            "chain13_acc2_effective2_w32",
            "chain13_acc1_effective1_s4",
            "chain13_acc2_effective2_s4",
            "chain13_acc1_effective1_v48",
            "chain13_acc2_effective2_v48",
            "chain13_acc1_effective1_w32_v48",
            "chain13_acc2_effective2_w32_v48",
        ]
    );
    let w32 = p.probe.variants()[6];
    assert_eq!(p.probe.block_threads_of(&w32), 1024);
    assert_eq!(p.probe.warps_of(&w32), 32);
}

#[test]
fn a_section_written_with_no_value_is_refused_where_it_stands_not_read_as_left_out() {
    let lines = GOOD.lines().count() + 1;
    for key in [
        "reductions",
        "contexts",
        "policy_gate",
        "validity",
        "sink_isolation",
        "compile_only",
        "baselines",
        "recorded",
    ] {
        let text = format!("{GOOD}{key}:\n");
        let e = catalog::parse(&text, Path::new("expectations/t.yaml"))
            .err()
            .unwrap_or_else(|| panic!("{key}: with no value was accepted"))
            .to_string();
        assert!(e.contains("expectations/t.yaml"), "{key}: {e}");
        assert!(
            e.contains(&format!(":{lines}:")),
            "{key} (line {lines}): {e}"
        );
    }
    // Left out, each is simply not there.
    assert!(catalog::parse(GOOD, Path::new("expectations/t.yaml")).is_ok());
}

#[test]
fn reductions_warps_written_empty_is_refused_naming_what_it_takes() {
    let text =
        format!("{GOOD}reductions:\n  kernels: [dot]\n  accumulators: [1, 2]\n  warps: []\n");
    let e = catalog::parse(&text, Path::new("expectations/t.yaml"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("reductions.warps is empty"), "{e}");
    assert!(e.contains("left out"), "{e}");
}
