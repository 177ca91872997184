//! Bless: what it refuses, and the generated baselines file it writes.

use crate::common::*;
use accprobe::catalog;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::model::variant::Variant;

#[test]
fn bless_refuses_other_gpus_invalid_runs_and_ci() {
    use accprobe::bless;
    let p = load("h200");
    let good = p.recorded.clone().unwrap();
    bless::check(&p, &good, false).unwrap();

    let mut other = good.clone();
    let env = other.environment.as_mut().unwrap();
    env.gpu_name = "NVIDIA A100-SXM4-80GB".into();
    env.compute_capability = "8.0".into();
    let e = bless::check(&p, &other, false).unwrap_err().to_string();
    assert!(e.contains("A100") && e.contains("does not match"), "{e}");

    let mut invalid = good.clone();
    invalid.variants[3]
        .output_problems
        .push("repeat 0: 1 of 256 output elements never written".into());
    invalid.variants[5].resources.as_mut().unwrap().local_bytes = 8;
    let e = bless::check(&p, &invalid, false).unwrap_err().to_string();
    assert!(
        e.contains("never written") && e.contains("8 bytes local memory"),
        "{e}"
    );
    bless::check(&p, &invalid, true).unwrap();

    assert!(p.recorded.as_ref().unwrap().environment.is_some());
    let doc = load("documented");
    let e = bless::check(&doc, doc.recorded.as_ref().unwrap(), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("only measured results can be blessed"), "{e}");
}

/// The environment with only `name` set to `value`.
fn only(name: &'static str, value: &'static str) -> impl Fn(&str) -> Option<String> {
    move |n| (n == name).then(|| value.to_string())
}

#[test]
fn bless_refuses_under_every_ci_system_and_says_what_counts() {
    use accprobe::config::CI_VARIABLES;
    use accprobe::output::refuse_if_ci;
    assert!(refuse_if_ci(|_| None).is_ok());
    for name in CI_VARIABLES {
        for value in ["true", "1", "yes"] {
            let e = refuse_if_ci(only(name, value)).unwrap_err().to_string();
            assert!(
                e.contains(&format!("{name}=\"{value}\" is set")) && e.contains("CI=false or CI=0"),
                "{name}={value}: {e}"
            );
        }
        // Set but empty is unset.
        assert!(refuse_if_ci(only(name, "")).is_ok(), "{name}=\"\"");
    }
    for name in [
        "GITHUB_ACTIONS",
        "GITLAB_CI",
        "BUILDKITE",
        "JENKINS_URL",
        "TF_BUILD",
    ] {
        assert!(CI_VARIABLES.contains(&name), "{name}");
        // Only CI's own false and 0 mean "not CI"; a CI system's variable counts anyway.
        assert!(refuse_if_ci(only(name, "false")).is_err(), "{name}=false");
    }
    assert!(refuse_if_ci(only("CI", "false")).is_ok());
    assert!(refuse_if_ci(only("CI", "0")).is_ok());
    // CI=false does not hide a CI system's own variable.
    let both = |n: &str| match n {
        "CI" => Some("false".to_string()),
        "GITHUB_ACTIONS" => Some("true".to_string()),
        _ => None,
    };
    assert!(refuse_if_ci(both).is_err());
}

/// The results file the committed h200 profile names under `recorded:`, relative to its
/// folder (read from the profile, so that a re-recorded run needs no change here).
fn h200_recorded_file() -> String {
    let text = std::fs::read_to_string(root().join("expectations/h200.yaml")).unwrap();
    let at = text
        .find("\nrecorded:\n")
        .expect("h200.yaml has a recorded: section");
    text[at..]
        .lines()
        .find_map(|l| l.trim().strip_prefix("results: "))
        .expect("recorded: names its results")
        .trim()
        .to_string()
}

/// Copies the H200 profile into `dir` as [`copy_h200_profile_to`] does, with the results
/// file it records now (the contexts run), which that helper's list predates.
fn copy_h200_to(dir: &std::path::Path) {
    copy_h200_profile_to(dir);
    let f = h200_recorded_file();
    let to = dir.join(&f);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(root().join("expectations").join(&f), to).unwrap();
}

/// The committed H200 run, and the profile it belongs to.
fn h200_run() -> (Profile, RunResults) {
    let p = load("h200");
    let r = p.recorded.clone().unwrap();
    (p, r)
}

fn bless_error(p: &Profile, r: &RunResults, allow_invalid: bool) -> String {
    accprobe::bless::check(p, r, allow_invalid)
        .unwrap_err()
        .to_string()
}

#[test]
fn bless_refuses_zero_progress_even_with_allow_invalid() {
    let (p, mut r) = h200_run();
    let v = Variant::new(13, 4);
    // A median that would round to 0.0 in the baselines file: the profile would not load.
    for progress in [0.0, 0.04, f64::NAN] {
        set(&mut r, v, progress);
        for allow in [false, true] {
            let e = bless_error(&p, &r, allow);
            assert!(
                e.contains("chain13_acc4_effective4: progress")
                    && e.contains("did not run")
                    && e.contains("--allow-invalid does not change that"),
                "{progress}: {e}"
            );
        }
    }
}

#[test]
fn bless_refuses_a_spill_seen_only_in_the_sass() {
    let (p, good) = h200_run();
    let mut listed = good.clone();
    let sass = listed.variants[2].sass.as_mut().unwrap();
    sass.local_memory_instructions
        .push("/*0100*/ STL [R1], R10".into());
    let e = bless_error(&p, &listed, false);
    assert!(
        e.contains("spills: local-memory instructions in the SASS: /*0100*/ STL [R1], R10")
            && e.contains("--allow-invalid to bless them anyway"),
        "{e}"
    );
    accprobe::bless::check(&p, &listed, true).unwrap();
    let mut in_loop = good.clone();
    in_loop.variants[2]
        .sass
        .as_mut()
        .unwrap()
        .loop_body
        .insert(1, "@P0 LDL.64 R2, [R1+0x8]".into());
    let e = bless_error(&p, &in_loop, false);
    assert!(e.contains("@P0 LDL.64 R2, [R1+0x8]"), "{e}");
    accprobe::bless::check(&p, &in_loop, true).unwrap();
}

#[test]
fn bless_refuses_another_profile_settings_or_mode_even_with_allow_invalid() {
    use accprobe::model::settings::Mode;
    let (p, good) = h200_run();
    let mut other = good.clone();
    other.profile = "documented".into();
    let mut settings = good.clone();
    settings.settings.as_mut().unwrap().budget_cycles = 20_000_000;
    let mut unsettled = good.clone();
    unsettled.settings = None;
    let mut serial = good.clone();
    serial.mode = Mode::Serial;
    for (r, says) in [
        (
            &other,
            "measured under profile \"documented\", not \"h200\"",
        ),
        (
            &settings,
            "budget_cycles: asked 10000000, measured 20000000",
        ),
        (&unsettled, "record no launch settings"),
        (&serial, "measured in Serial mode"),
    ] {
        for allow in [false, true] {
            let e = bless_error(&p, r, allow);
            assert!(e.contains(says), "{says}: {e}");
        }
    }
}

#[test]
fn bless_refuses_an_h100_into_the_h200_profile() {
    let (p, good) = h200_run();
    assert_eq!(p.matches.compute_capabilities, ["9.0"]);
    let mut h100 = good.clone();
    h100.environment.as_mut().unwrap().gpu_name = "NVIDIA H100 80GB HBM3".into();
    assert_eq!(h100.environment.as_ref().unwrap().compute_capability, "9.0");
    for allow in [false, true] {
        let e = bless_error(&p, &h100, allow);
        assert!(
            e.contains("\"NVIDIA H100 80GB HBM3\" (compute capability 9.0), which profile \"h200\" does not match: not one of its GPUs")
                && e.contains("capability alone is not enough"),
            "{e}"
        );
    }
    // What the results say of their GPU stays on its line of the refusal.
    let mut forged = good.clone();
    let env = forged.environment.as_mut().unwrap();
    env.gpu_name = "NVIDIA H100\nFORGED name".into();
    env.compute_capability = "9.0\nFORGED capability".into();
    let e = bless_error(&p, &forged, false);
    assert!(e.contains("9.0\\nFORGED capability"), "{e}");
    assert!(!e.lines().any(|l| l.starts_with("FORGED")), "{e}");
    // The name is compared case-insensitively, as profile selection does.
    let mut shouting = good.clone();
    shouting.environment.as_mut().unwrap().gpu_name = "nvidia h200".into();
    accprobe::bless::check(&p, &shouting, false).unwrap();
}

#[test]
fn bless_writes_a_loadable_generated_file_and_a_readable_diff() {
    use accprobe::bless;
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    set(&mut r, Variant::new(7, 1), 150_000.0);
    let dir = std::env::temp_dir().join(format!("accprobe-bless-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    let file = dir.join("baselines/h200.yaml");
    let current = p.baselines.as_ref().unwrap();
    let b = bless::prepare(
        &p,
        &r,
        "run.json",
        "cargo xtask bless --profile h200 --from run.json",
        &file,
        Some(current),
    );
    assert_eq!(
        b.diff,
        vec!["~ chain7_acc1_effective1: 147058.0 -> 150000.0 (+2.001%)"]
    );
    assert!(b
        .contents
        .starts_with("# Generated by `cargo xtask bless --profile h200 --from run.json`."));
    let unchanged = bless::prepare(
        &p,
        p.recorded.as_ref().unwrap(),
        "x",
        "x",
        &file,
        Some(current),
    );
    assert!(unchanged.diff.is_empty(), "{:?}", unchanged.diff);
    // The written file loads as this profile's baselines.
    std::fs::write(&file, &b.contents).unwrap();
    copy_h200_to(&dir);
    let reloaded = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert_eq!(
        reloaded.baselines.unwrap().progress["chain7_acc1_effective1"],
        150_000.0
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bless_carries_sass_digests_and_loop_bodies_into_the_generated_file() {
    use accprobe::bless;
    let sass = h200_sass();
    let (p, r) = h200_blessed(&sass, &sass);
    let dir = std::env::temp_dir().join(format!("accprobe-bless-sass-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    let file = dir.join("baselines/h200.yaml");
    let plain = load("h200");
    // Every variant of the matrix, the contexts' included, carries its SASS in the run.
    let variants = p.probe.variants().len();
    assert_eq!(variants, r.variants.len());
    assert_eq!(p.baselines.as_ref().unwrap().sass.len(), variants);
    // The committed baselines are what blessing the committed run with the committed SASS
    // gives, digests and loop schedules included: nothing to change.
    let same = bless::prepare(&p, &r, "run.json", "cmd", &file, plain.baselines.as_ref());
    assert!(same.diff.is_empty(), "{:?}", same.diff);
    let again = bless::prepare(&p, &r, "run.json", "cmd", &file, p.baselines.as_ref());
    assert!(again.diff.is_empty(), "{:?}", again.diff);
    // One kernel's SASS otherwise: blessing it reports that variant's digest and nothing
    // else's.
    let changed = mutate(&sass, "chain7_acc1_effective1", "FFMA", "FMUL");
    let (_, other) = h200_blessed(&sass, &changed);
    let one = bless::prepare(
        &p,
        &other,
        "run.json",
        "cmd",
        &file,
        plain.baselines.as_ref(),
    );
    assert!(
        !one.diff.is_empty()
            && one
                .diff
                .iter()
                .all(|l| l.starts_with("~ chain7_acc1_effective1: ")),
        "{:?}",
        one.diff
    );
    assert!(
        one.diff.iter().any(|l| l.contains("SASS digest")),
        "{:?}",
        one.diff
    );
    let b = bless::prepare(&p, &r, "run.json", "cmd", &file, None);
    assert_eq!(
        b.diff.iter().filter(|l| l.contains("SASS digest")).count(),
        variants,
        "{:?}",
        b.diff
    );
    assert_eq!(
        b.diff
            .iter()
            .filter(|l| l.contains(": loop schedule "))
            .count(),
        variants,
        "{:?}",
        b.diff
    );
    assert!(
        b.diff
            .iter()
            .any(|l| l.starts_with("+ chain7_acc1_effective1: SASS digest ")),
        "{:?}",
        b.diff
    );
    std::fs::write(&file, &b.contents).unwrap();
    copy_h200_to(&dir);
    let reloaded = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert_eq!(reloaded.baselines.unwrap().sass, p.baselines.unwrap().sass);
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn bless_records_the_compile_options_and_a_file_without_them_still_loads() {
    use accprobe::bless;
    let dir = std::env::temp_dir().join(format!("accprobe-bless-opts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    copy_h200_to(&dir);
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    let mut r = p.recorded.clone().unwrap();
    let options = vec!["--gpu-architecture=sm_90".to_string(), "-O3".to_string()];
    r.environment.as_mut().unwrap().compile_options = options.clone();
    let file = dir.join("baselines/h200.yaml");
    let b = bless::prepare(&p, &r, "run.json", "cmd", &file, None);
    assert!(b.contents.contains("compile_options:"), "{}", b.contents);
    std::fs::write(&file, &b.contents).unwrap();
    let back = catalog::load(&dir.join("h200.yaml")).unwrap();
    let origin = back.baselines.unwrap().origin.unwrap();
    assert_eq!(origin.compile_options, options);
    // A file blessed before the options were recorded loads, with no options to compare.
    let old: String = b
        .contents
        .lines()
        .filter(|l| !l.contains("compile_options") && !l.starts_with("  - "))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(!old.contains("-O3"), "{old}");
    std::fs::write(&file, &old).unwrap();
    let back = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert!(back
        .baselines
        .unwrap()
        .origin
        .unwrap()
        .compile_options
        .is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

/// Fuzzing found (seed fuzz/seeds/bless/del-in-driver-version.json) that a control
/// character in a recorded string made a blessed file the profile could not read back.
#[test]
fn any_string_in_the_results_is_written_so_that_the_profile_reads_it_back() {
    use accprobe::bless;
    let dir = std::env::temp_dir().join(format!("accprobe-bless-del-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    copy_h200_to(&dir);
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    let mut r = p.recorded.clone().unwrap();
    let odd = "580.159.04\u{7f}\u{85}\t\"'#: x";
    r.environment.as_mut().unwrap().driver_version = odd.into();
    let file = dir.join("baselines/h200.yaml");
    let b = bless::prepare(&p, &r, "run.json", "cmd", &file, None);
    std::fs::write(&file, &b.contents).unwrap();
    let back = catalog::load(&dir.join("h200.yaml")).unwrap();
    let origin = back.baselines.unwrap().origin.unwrap();
    assert_eq!(origin.driver_version, odd);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Fuzzing found (seed fuzz/seeds/bless/progress-tie-100.25.json) that re-blessing the
/// same run reported a change when the figure sat on a rounding tie.
#[test]
fn blessing_the_blessed_run_again_changes_nothing_even_on_a_rounding_tie() {
    use accprobe::bless;
    let dir = std::env::temp_dir().join(format!("accprobe-bless-tie-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    copy_h200_to(&dir);
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    let mut r = p.recorded.clone().unwrap();
    let v = r
        .variants
        .iter_mut()
        .find(|v| v.name == "chain7_acc1_effective1")
        .unwrap();
    v.summary.as_mut().unwrap().median = 147_058.25;
    let file = dir.join("baselines/h200.yaml");
    let first = bless::prepare(&p, &r, "run.json", "cmd", &file, None);
    std::fs::write(&file, &first.contents).unwrap();
    let blessed = catalog::load(&dir.join("h200.yaml")).unwrap();
    let again = bless::prepare(
        &blessed,
        &r,
        "run.json",
        "cmd",
        &file,
        blessed.baselines.as_ref(),
    );
    assert!(again.diff.is_empty(), "{:?}", again.diff);
    assert_eq!(again.contents, first.contents);
    std::fs::remove_dir_all(dir).unwrap();
}

// --- two blesses at once, and links out of the profile's folder -------------------------

const BLESS_CHILD: &str = "ACCPROBE_TEST_BLESS_CHILD";

/// A folder with the h200 profile and its committed baselines.
fn h200_folder(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("accprobe-bless-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_h200_to(&dir);
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    std::fs::copy(
        root().join("expectations/baselines/h200.yaml"),
        dir.join("baselines/h200.yaml"),
    )
    .unwrap();
    dir
}

/// The child of `two_blesses_at_once_never_lose_a_change`: loads the profile in the folder
/// `$ACCPROBE_TEST_BLESS_CHILD`, prepares a blessing with chain7_acc1 at the progress
/// `$BLESS_CHILD_PROGRESS`, says so with a `ready-<progress>` file, waits for `go`, then
/// writes. Exits 0 when written, 1 when refused (saying why on stderr).
#[test]
#[ignore = "run as a child process by two_blesses_at_once_never_lose_a_change"]
fn bless_child() {
    let Some(dir) = std::env::var_os(BLESS_CHILD).map(std::path::PathBuf::from) else {
        return;
    };
    let progress: f64 = std::env::var("BLESS_CHILD_PROGRESS")
        .unwrap()
        .parse()
        .unwrap();
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    let mut r = p.recorded.clone().unwrap();
    set(&mut r, Variant::new(7, 1), progress);
    let file = p.baselines.as_ref().unwrap().file.clone();
    let b = accprobe::bless::prepare(&p, &r, "run.json", "cmd", &file, p.baselines.as_ref());
    std::fs::write(dir.join(format!("ready-{progress}")), "").unwrap();
    // Bounded: a parent that never says go does not leave this process behind.
    for _ in 0..6000 {
        if dir.join("go").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    match b.write() {
        Ok(()) => std::process::exit(0),
        Err(e) => {
            eprintln!("refused: {e}");
            std::process::exit(1)
        }
    }
}

/// Two processes bless one profile from different results at the same moment: one
/// writes, the other writes nothing and says the file changed since it read it; the
/// file holds the first one's baselines, whole.
#[test]
fn two_blesses_at_once_never_lose_a_change() {
    let dir = h200_folder("race");
    let spawn = |progress: &str| {
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--exact", "bless::bless_child", "--ignored", "--nocapture"])
            .env(BLESS_CHILD, &dir)
            .env("BLESS_CHILD_PROGRESS", progress)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        for name in accprobe::config::CI_VARIABLES {
            cmd.env_remove(name);
        }
        cmd.spawn().unwrap()
    };
    let children = [spawn("150000"), spawn("160000")];
    for _ in 0..6000 {
        if dir.join("ready-150000").exists() && dir.join("ready-160000").exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    std::fs::write(dir.join("go"), "").unwrap();
    let outs: Vec<std::process::Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let said: Vec<String> = outs
        .iter()
        .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
        .collect();
    assert!(
        codes == [Some(0), Some(1)] || codes == [Some(1), Some(0)],
        "exactly one writes: {codes:?} {said:?}"
    );
    let loser = codes.iter().position(|c| *c == Some(1)).unwrap();
    assert!(
        said[loser].contains("changed since this bless read it")
            && said[loser].contains("that change is kept"),
        "{}",
        said[loser]
    );
    let winner = [150_000.0, 160_000.0][1 - loser];
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert_eq!(
        p.baselines.unwrap().progress["chain7_acc1_effective1"],
        winner
    );
    std::fs::remove_dir_all(dir).unwrap();
}

/// A baselines file that is a link out of the profile's folder is neither read (the
/// profile is refused) nor written through (bless refuses before reading it).
#[test]
fn bless_never_writes_through_a_link_out_of_the_profile_folder() {
    let dir = h200_folder("link-out");
    let outside = dir.with_extension("outside");
    let _ = std::fs::remove_dir_all(&outside);
    std::fs::create_dir_all(&outside).unwrap();
    let victim = outside.join("victim.yaml");
    std::fs::write(&victim, "precious\n").unwrap();
    let p = catalog::load(&dir.join("h200.yaml")).unwrap();
    let file = p.baselines.as_ref().unwrap().file.clone();
    let mut r = p.recorded.clone().unwrap();
    set(&mut r, Variant::new(7, 1), 150_000.0);
    let b = accprobe::bless::prepare(&p, &r, "run.json", "cmd", &file, p.baselines.as_ref());
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&victim, &file).unwrap();
    assert!(!b.unchanged());
    let e = b.write().unwrap_err().to_string();
    assert!(e.contains("outside the profile's folder"), "{e}");
    assert!(!e.contains("precious"), "{e}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    // A dangling link out of the folder too: bless would create the file it names.
    std::fs::remove_file(&victim).unwrap();
    let e = b.write().unwrap_err().to_string();
    assert!(e.contains("outside the profile's folder"), "{e}");
    assert!(!victim.exists());
    std::fs::remove_dir_all(dir).unwrap();
    std::fs::remove_dir_all(outside).unwrap();
}
