//! Host tests: everything that needs no GPU, on the committed profiles and on the data
//! recorded on the H200 (tests/data/h200/, docs/results/). Each mutation test changes
//! recorded data the way a regression would and checks that the right case fails with a
//! message that gives measured against expected.

use accprobe::catalog;
use accprobe::compile::ptxas;
use accprobe::expectations::profile::Profile;
use accprobe::model::gpu::GpuIdentity;
use accprobe::model::results::{Resources, RunResults};
use accprobe::model::variant::Variant;
use accprobe::verdict::cases::{cases, Case};
use accprobe::verdict::{evaluate, Outcome};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn load(name: &str) -> Profile {
    catalog::load(&root().join("expectations").join(format!("{name}.yaml"))).unwrap()
}

fn case<'a>(cases: &'a [Case], name: &str) -> &'a Case {
    cases
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

/// Sets a variant's progress: its mean and, where it has samples, its median too.
fn set(results: &mut RunResults, v: Variant, progress: f64) {
    let r = results
        .variants
        .iter_mut()
        .find(|r| r.variant() == v)
        .unwrap();
    r.mean_progress = progress;
    if let Some(s) = r.summary.as_mut() {
        s.mean = progress;
        s.median = progress;
    }
}

fn outcome(p: &Profile, r: &RunResults, name: &str) -> Outcome {
    evaluate(case(&cases(p), name), p, r)
}

fn fail_text(o: Outcome) -> String {
    match o {
        Outcome::Fail(m) => m,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn documented_profile_passes_on_its_recorded_table() {
    let p = load("documented");
    let r = p.recorded.clone().unwrap();
    let cases = cases(&p);
    // 24 variants, 24 SASS shapes, 24 ceilings, 24 durations, 3 peaks, 1 trend, 3 spill
    // sources, 3 policy checks.
    assert_eq!(cases.len(), 24 * 4 + 3 + 1 + 3 + 3);
    let mut passed = 0;
    for c in &cases {
        match evaluate(c, &p, &r) {
            Outcome::Pass(_) => passed += 1,
            // The study's table has no SASS and no launch timings.
            Outcome::Skipped(reason) => assert!(
                (c.name.starts_with("sass::") || c.name == "invariant::no_spills::sass")
                    && reason.contains("carry no SASS")
                    || c.name.ends_with("::duration") && reason.contains("no launch durations"),
                "{}: {reason}",
                c.name
            ),
            o => panic!("{}: {o:?}", c.name),
        }
    }
    assert_eq!(passed, 24 + 24 + 3 + 1 + 2 + 3);
}

#[test]
fn acc3_above_acc2_at_chain13_fails_the_peak_case_with_both_figures() {
    let p = load("documented");
    let mut r = p.recorded.clone().unwrap();
    set(&mut r, Variant::new(13, 3), 44_000.0);
    let m = fail_text(outcome(&p, &r, "invariant::acc2_is_peak::chain13"));
    assert!(m.contains("acc2 is not the peak"), "{m}");
    assert!(
        m.contains("acc2 43579.5") && m.contains("acc3 44000.0"),
        "{m}"
    );
    assert!(
        m.contains("+0.96%") && m.contains("tolerance +0.00%"),
        "{m}"
    );
    // The other chains are untouched.
    assert!(matches!(
        outcome(&p, &r, "invariant::acc2_is_peak::chain7"),
        Outcome::Pass(_)
    ));
}

#[test]
fn a_flat_gain_trend_fails_the_trend_case() {
    let p = load("documented");
    let mut r = p.recorded.clone().unwrap();
    // acc2/acc1 at N=13 made equal to N=7's 52404.9/49078.0.
    let ratio = 52_404.9 / 49_078.0;
    set(&mut r, Variant::new(13, 2), 38_814.2 * ratio);
    let m = fail_text(outcome(&p, &r, "invariant::acc2_gain_grows"));
    assert!(m.contains("does not grow"), "{m}");
    assert!(m.contains("N=7 -> N=13: 1.0678 -> 1.0678"), "{m}");
}

#[test]
fn a_spill_in_the_ptxas_log_fails_the_variant_and_no_spills() {
    let log = std::fs::read_to_string(root().join("tests/data/h200/ptxas.log")).unwrap();
    let clean = ptxas::parse(&log).unwrap();
    assert_eq!(
        clean.len(),
        69,
        "24 documented variants and 45 sink-isolation ones"
    );
    assert!(clean
        .values()
        .all(|r| r.spill_store_bytes == 0 && r.spill_load_bytes == 0));
    // ptxas reporting spills for chain29_acc16 after a register cap, say.
    let spilled = log.replacen(
        "Function properties for chain29_acc16_effective16\nptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
        "Function properties for chain29_acc16_effective16\nptxas         .     24 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads",
        1,
    );
    assert_ne!(spilled, log, "the recorded log has the expected shape");
    let reports = ptxas::parse(&spilled).unwrap();
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    for v in r.variants.iter_mut() {
        let rep = reports[&v.name];
        let local = v.resources.unwrap().local_bytes;
        v.resources = Some(Resources {
            registers: rep.registers,
            stack_frame_bytes: rep.stack_frame_bytes,
            spill_store_bytes: rep.spill_store_bytes,
            spill_load_bytes: rep.spill_load_bytes,
            local_bytes: local,
        });
    }
    let m = fail_text(outcome(&p, &r, "invariant::no_spills::ptxas_report"));
    assert!(
        m.contains(
            "chain29_acc16_effective16: ptxas reports 24 bytes spill stores, 24 bytes spill loads"
        ),
        "{m}"
    );
    let m = fail_text(outcome(&p, &r, "probe::chain29_acc16_effective16"));
    assert!(m.contains("spills"), "{m}");
    assert!(matches!(
        outcome(&p, &r, "probe::chain29_acc8_effective8"),
        Outcome::Pass(_)
    ));
}

#[test]
fn h200_profile_is_green_on_its_recorded_run_with_four_known_deviations() {
    let p = load("h200");
    let r = p.recorded.clone().unwrap();
    let env = r.environment.as_ref().unwrap();
    assert_eq!(
        (
            env.gpu_name.as_str(),
            env.driver_version.as_str(),
            env.nvrtc_version.as_str()
        ),
        ("NVIDIA H200", "580.159.04", "13.0")
    );
    let mut deviations = 0;
    for c in cases(&p) {
        match evaluate(&c, &p, &r) {
            Outcome::Pass(_) => {}
            Outcome::KnownDeviation { .. } => deviations += 1,
            Outcome::Skipped(reason) => panic!("{}: skipped: {reason}", c.name),
            Outcome::Fail(m) => panic!("{}: {m}", c.name),
        }
    }
    // acc2 is not the peak at N = 7, 13, 29; the study's policy loses 2.9% at N = 13.
    assert_eq!(deviations, 4);
}

#[test]
fn a_known_deviation_that_holds_again_fails() {
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    // acc2 at N=13 back on top.
    set(&mut r, Variant::new(13, 2), 150_000.0);
    let m = fail_text(outcome(&p, &r, "invariant::acc2_is_peak::chain13"));
    assert!(m.contains("known deviation no longer present"), "{m}");
    assert!(m.contains("remove it from known_deviations"), "{m}");
}

#[test]
fn baselines_are_two_sided_and_say_how_to_bless() {
    let p = load("h200");
    let v = Variant::new(29, 4);
    for (factor, word) in [(0.97, "slower"), (1.03, "faster")] {
        let mut r = p.recorded.clone().unwrap();
        set(&mut r, v, 101_010.0 * factor);
        let m = fail_text(outcome(&p, &r, "probe::chain29_acc4_effective4"));
        assert!(m.contains(word), "{m}");
        assert!(
            m.contains("vs baseline 101010.0") && m.contains("tolerance ±0.50%"),
            "{m}"
        );
        assert!(m.contains("re-bless"), "{m}");
    }
    let mut r = p.recorded.clone().unwrap();
    set(&mut r, v, 101_010.0 * 1.004);
    assert!(matches!(
        outcome(&p, &r, "probe::chain29_acc4_effective4"),
        Outcome::Pass(_)
    ));
}

#[test]
fn invalid_outputs_and_missing_variants_fail() {
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    r.variants[0]
        .output_problems
        .push("repeat 3: 5 of 256 output elements never written".into());
    let m = fail_text(outcome(&p, &r, "probe::chain7_acc1_effective1"));
    assert!(
        m.contains("invalid output: repeat 3: 5 of 256 output elements never written"),
        "{m}"
    );
    r.variants.retain(|v| v.name != "chain13_acc2_effective2");
    let m = fail_text(outcome(&p, &r, "invariant::acc2_is_peak::chain13"));
    assert!(m.contains("no result for chain13_acc2_effective2"), "{m}");
}

// --- bad input: each error names file, line and column -------------------------------

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

fn bad(text: &str) -> String {
    let e = catalog::parse(text, Path::new("expectations/t.yaml")).unwrap_err();
    e.to_string()
}

#[test]
fn the_good_fixture_loads() {
    let p = catalog::parse(GOOD, Path::new("expectations/t.yaml")).unwrap();
    assert_eq!(cases(&p).len(), 4 + 4 + 2 + 1 + 3);
}

#[test]
fn bad_profiles_name_file_line_column_and_what_was_expected() {
    let cases: &[(&str, &str, &str)] = &[
        (&GOOD.replace("chains: [7, 13]", "chains: [7, 0]"), "t.yaml:9:15:", "0 is not a count"),
        (&GOOD.replace("budget_cycles: 1000", "budget_cycles: 0"), "t.yaml:8:18:", "budget_cycles is 0"),
        (&GOOD.replace("tolerance: 0.0}", "tolerance: 1.5}"), "t.yaml:12:40:", "expected a fraction in [0, 1)"),
        (&GOOD.replace("tolerance: 0.0}", "tolerance: -0.1}"), "t.yaml:12:40:", "out of range"),
        (&GOOD.replace("block_threads: 256", "block_threads: 100"), "t.yaml:5:18:", "multiple of 32"),
        (&GOOD.replace("repeats: 10", "repeats: 10\n  colour: blue"), "t.yaml:8:3:", "unknown field `colour`"),
        (&GOOD.replace("name: t\n", "name: t\nname: u\n"), "t.yaml:2:1:", "duplicate mapping key"),
        (&GOOD.replace("repeats: 10", "repeats: ten"), "t.yaml:7:12:", "u32"),
        (&GOOD.replace("accumulators: 2, tolerance", "accumulators: 4, tolerance"), "t.yaml:12:26:", "not in probe.accumulators"),
        (&GOOD.replace("  - no_spills: {}", "  - no_spill: {}"), "t.yaml:14:5:", "unknown variant `no_spill`"),
        (&format!("{GOOD}known_deviations:\n  - case: invariant::acc2_is_peak::chain99\n    reason: r\n"), "t.yaml:16:11:", "does not generate"),
        (&GOOD.replace("chains: [7, 13]", "chains: [7, 7]"), "t.yaml:9:15:", "listed twice"),
    ];
    for (text, position, words) in cases {
        let e = bad(text);
        eprintln!("{e}");
        assert!(
            e.starts_with(&format!("expectations/{position}")),
            "wanted {position}: {e}"
        );
        assert!(e.contains(words), "wanted {words:?}: {e}");
    }
}

#[test]
fn empty_and_non_utf8_files_are_clear_errors() {
    assert!(bad("").contains("profile is empty"));
    let dir = std::env::temp_dir().join(format!("accprobe-host-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("latin1.yaml");
    std::fs::write(&f, b"name: caf\xe9\n").unwrap();
    let e = catalog::load(&f).unwrap_err().to_string();
    assert!(
        e.contains("latin1.yaml") && e.contains("not valid UTF-8 (byte offset 9)"),
        "{e}"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

// --- profile selection ----------------------------------------------------------------

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

#[test]
fn zero_or_nan_progress_fails_even_where_a_deviation_is_known() {
    let p = load("h200");
    for bad in [0.0, f64::NAN] {
        let mut r = p.recorded.clone().unwrap();
        set(&mut r, Variant::new(13, 4), bad);
        let m = fail_text(outcome(&p, &r, "invariant::acc2_is_peak::chain13"));
        assert!(
            m.contains("chain13_acc4_effective4 has progress") && m.contains("did not run"),
            "{m}"
        );
        let m = fail_text(outcome(&p, &r, "probe::chain13_acc4_effective4"));
        assert!(m.contains("did not run"), "{m}");
    }
}

// --- bless ------------------------------------------------------------------------------

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

    assert!(bless::refuse_if_ci(Some("true")).is_err());
    assert!(bless::refuse_if_ci(Some("1")).is_err());
    assert!(bless::refuse_if_ci(None).is_ok());
    assert!(bless::refuse_if_ci(Some("false")).is_ok());
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
    copy_h200_profile_to(&dir);
    let reloaded = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert_eq!(
        reloaded.baselines.unwrap().progress["chain7_acc1_effective1"],
        150_000.0
    );
    std::fs::remove_dir_all(dir).unwrap();
}

// --- SASS: mutated disassembly fails the right case ---------------------------------------

/// The H200 profile with SASS baselines taken from `sass`, and its recorded results with
/// the SASS summaries of `mutated` attached.
fn with_sass(sass: &str, mutated: &str) -> (Profile, RunResults) {
    use accprobe::compile::{read_sass, Sass};
    let mut p = load("h200");
    let variants = p.probe.variants();
    let summaries = |text: &str| match read_sass(text.to_string(), "test".into(), &variants) {
        Sass::Read { kernels, .. } => kernels,
        other => panic!("{other:?}"),
    };
    let base = summaries(sass);
    let b = p.baselines.as_mut().unwrap();
    b.sass = base
        .iter()
        .map(|(k, s)| {
            (
                k.clone(),
                accprobe::expectations::baselines::SassBaseline {
                    digest: s.digest.clone(),
                    loop_body: s.loop_body.clone(),
                },
            )
        })
        .collect();
    let now = summaries(mutated);
    let mut r = p.recorded.clone().unwrap();
    for v in r.variants.iter_mut() {
        v.sass = Some(now[&v.name].clone());
    }
    (p, r)
}

fn h200_sass() -> String {
    std::fs::read_to_string(root().join("tests/data/h200/sass.txt")).unwrap()
}

/// Replaces the first occurrence of `from` after the header of `function`.
fn mutate(sass: &str, function: &str, from: &str, to: &str) -> String {
    let at = sass.find(&format!("Function : {function}\n")).unwrap();
    let rel = sass[at..]
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not in {function}"));
    format!(
        "{}{}{}",
        &sass[..at + rel],
        to,
        &sass[at + rel + from.len()..]
    )
}

#[test]
fn unmutated_sass_passes_every_sass_case_on_the_h200() {
    let sass = h200_sass();
    let (p, r) = with_sass(&sass, &sass);
    for c in cases(&p)
        .iter()
        .filter(|c| c.name.starts_with("sass::") || c.name.starts_with("invariant::no_spills"))
    {
        let o = evaluate(c, &p, &r);
        assert!(matches!(o, Outcome::Pass(_)), "{}: {o:?}", c.name);
    }
    let shape = outcome(&p, &r, "sass::chain29_acc1_effective1::shape");
    assert!(
        matches!(&shape, Outcome::Pass(d) if d.contains("strict single-register chain") && d.contains("not unrolled")),
        "{shape:?}"
    );
}

#[test]
fn an_stl_in_the_sass_fails_the_sass_spill_case_and_the_variant() {
    let sass = h200_sass();
    let stl = mutate(&sass, "chain13_acc8_effective8", "FFMA R", "STL [R1], R");
    let (p, r) = with_sass(&sass, &stl);
    let m = fail_text(outcome(&p, &r, "invariant::no_spills::sass"));
    assert!(
        m.contains("chain13_acc8_effective8: local memory instructions in the SASS")
            && m.contains("STL [R1]"),
        "{m}"
    );
    assert!(matches!(
        outcome(&p, &r, "invariant::no_spills::ptxas_report"),
        Outcome::Pass(_)
    ));
    let m = fail_text(outcome(&p, &r, "probe::chain13_acc8_effective8"));
    assert!(m.contains("STL"), "{m}");
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc8_effective8::unchanged"));
    assert!(m.contains("-FFMA") && m.contains("+STL"), "{m}");
}

#[test]
fn a_removed_ffma_fails_the_shape_and_the_digest() {
    let sass = h200_sass();
    let fewer = mutate(
        &sass,
        "chain7_acc2_effective2",
        "FFMA R10, R10, R9.reuse, UR8 ;",
        "NOP ;",
    );
    let (p, r) = with_sass(&sass, &fewer);
    let m = fail_text(outcome(&p, &r, "sass::chain7_acc2_effective2::shape"));
    assert!(m.contains("the loop has 6 FFMAs, expected N = 7"), "{m}");
    assert!(m.contains("loop body:\n  NOP"), "{m}");
    let m = fail_text(outcome(&p, &r, "sass::chain7_acc2_effective2::unchanged"));
    assert!(
        m.contains("the loop body changed") && m.contains("+NOP"),
        "{m}"
    );
    assert!(matches!(
        outcome(&p, &r, "sass::chain7_acc1_effective1::shape"),
        Outcome::Pass(_)
    ));
}

#[test]
fn a_renamed_register_breaks_the_strict_chain_of_acc1() {
    let sass = h200_sass();
    let renamed = mutate(
        &sass,
        "chain13_acc1_effective1",
        "FFMA R10, R10, R9, UR8",
        "FFMA R12, R10, R9, UR8",
    );
    let (p, r) = with_sass(&sass, &renamed);
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc1_effective1::shape"));
    assert!(m.contains("acc1 is not a strict chain"), "{m}");
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc1_effective1::unchanged"));
    assert!(
        m.contains("-FFMA R10, R10, R9, UR8") && m.contains("+FFMA R12, R10, R9, UR8"),
        "{m}"
    );
}

#[test]
fn progress_above_the_physical_ceiling_fails_validity() {
    let sass = h200_sass();
    let (p, mut r) = with_sass(&sass, &sass);
    // acc1 at N=29 can do at most one FFMA every 4 cycles: 10M / (29 * 4) = 86,206.9.
    let ok = outcome(&p, &r, "validity::chain29_acc1_effective1::ceiling");
    assert!(
        matches!(&ok, Outcome::Pass(d) if d.contains("latency-bound 86206.9")),
        "{ok:?}"
    );
    set(&mut r, Variant::new(29, 1), 90_000.0);
    r.variants
        .iter_mut()
        .find(|v| v.name == "chain29_acc1_effective1")
        .unwrap()
        .summary = None;
    let m = fail_text(outcome(
        &p,
        &r,
        "validity::chain29_acc1_effective1::ceiling",
    ));
    assert!(
        m.contains("above the physical ceiling") && m.contains("optimised away"),
        "{m}"
    );
}

#[test]
fn launch_durations_far_from_budget_over_clock_fail_validity() {
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    // 10M cycles at 1980 MHz = 5.0505 ms.
    for v in r.variants.iter_mut() {
        v.launch_ms = vec![5.06; 10];
    }
    assert!(matches!(
        outcome(&p, &r, "validity::chain7_acc1_effective1::duration"),
        Outcome::Pass(_)
    ));
    r.variants[0].launch_ms[4] = 5.6;
    let m = fail_text(outcome(
        &p,
        &r,
        "validity::chain7_acc1_effective1::duration",
    ));
    assert!(
        m.contains("worst 5.6000 ms vs budget / SM clock = 5.0505 ms at 1980 MHz")
            && m.contains("±5.0%"),
        "{m}"
    );
}

#[test]
fn bless_carries_sass_digests_and_loop_bodies_into_the_generated_file() {
    use accprobe::bless;
    let sass = h200_sass();
    let (p, r) = with_sass(&sass, &sass);
    let dir = std::env::temp_dir().join(format!("accprobe-bless-sass-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("baselines")).unwrap();
    let file = dir.join("baselines/h200.yaml");
    let plain = load("h200");
    // The committed baselines are what blessing the committed run gives: nothing changes.
    let same = bless::prepare(&p, &r, "run.json", "cmd", &file, plain.baselines.as_ref());
    assert!(same.diff.is_empty(), "{:?}", same.diff);
    let b = bless::prepare(&p, &r, "run.json", "cmd", &file, None);
    assert_eq!(
        b.diff.iter().filter(|l| l.contains("SASS digest")).count(),
        69,
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
    copy_h200_profile_to(&dir);
    let reloaded = catalog::load(&dir.join("h200.yaml")).unwrap();
    assert_eq!(reloaded.baselines.unwrap().sass, p.baselines.unwrap().sass);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Copies the H200 profile into `dir` (beside a `baselines/` folder the test fills), its
/// recorded results and policy still read from the source tree.
fn copy_h200_profile_to(dir: &Path) {
    let text = std::fs::read_to_string(root().join("expectations/h200.yaml"))
        .unwrap()
        .replace(
            "recorded/",
            &format!("{}/expectations/recorded/", root().display()),
        )
        .replace(
            "policies/",
            &format!("{}/expectations/policies/", root().display()),
        );
    std::fs::write(dir.join("h200.yaml"), text).unwrap();
}

// --- the heuristic gate ---------------------------------------------------------------------

#[test]
fn the_shipped_policy_passes_on_the_study_and_changed_policies_fail() {
    use accprobe::expectations::policy::Policy;
    let p = load("documented");
    let r = p.recorded.clone().unwrap();
    let shipped = &p.heuristic.as_ref().unwrap().policy;
    for n in [7, 13, 29] {
        assert_eq!(shipped.choose_for_probe(n), 2);
        assert!(matches!(
            outcome(&p, &r, &format!("policy::study::chain{n}")),
            Outcome::Pass(_)
        ));
    }
    let text = std::fs::read_to_string(root().join("expectations/policies/study.yaml")).unwrap();
    let file = Path::new("expectations/policies/changed.yaml");
    let with_policy = |policy: Policy| {
        let mut q = p.clone();
        q.heuristic.as_mut().unwrap().policy = policy;
        q
    };
    // Default K=4: 43,621.8 at N=7 is 83.2% of acc2's 52,404.9.
    // (The wide count must stay above the default, so it moves to 8.)
    let k4_text = text
        .replace("  accumulators: 4", "  accumulators: 8")
        .replace("default_accumulators: 2", "default_accumulators: 4");
    let k4 = Policy::parse(&k4_text, file).unwrap();
    assert_eq!(k4.choose_for_probe(7), 4);
    let q = with_policy(k4);
    for n in [7, 13, 29] {
        let m = fail_text(outcome(&q, &r, &format!("policy::study::chain{n}")));
        assert!(
            m.contains("picks acc4") && m.contains("clearly below the best K"),
            "{m}"
        );
    }
    let m = fail_text(outcome(&q, &r, "policy::study::chain7"));
    assert!(
        m.contains("43621.8, 83.24% of the best, acc2 52404.9 (must reach 98.00%)"),
        "{m}"
    );
    // K=1 up to N=13: fails at 7 and 13, still passes at 29.
    let short = Policy::parse(
        &text.replace("short_chain_max: 4", "short_chain_max: 13"),
        file,
    )
    .unwrap();
    let q = with_policy(short);
    assert!(fail_text(outcome(&q, &r, "policy::study::chain7")).contains("picks acc1"));
    assert!(fail_text(outcome(&q, &r, "policy::study::chain13")).contains("89.07% of the best"));
    assert!(matches!(
        outcome(&q, &r, "policy::study::chain29"),
        Outcome::Pass(_)
    ));
    // A pick the profile does not measure fails with what to do.
    let k6 = Policy::parse(
        &text
            .replace("accumulators: 4", "accumulators: 6")
            .replace("surrounding_ilp: false", "surrounding_ilp: true"),
        file,
    )
    .unwrap();
    let m = fail_text(outcome(&with_policy(k6), &r, "policy::study::chain29"));
    assert!(
        m.contains("picks acc6") && m.contains("add 6 to probe.accumulators"),
        "{m}"
    );
}

#[test]
fn a_wider_tolerance_applies_to_its_variant_only() {
    let p = load("h200");
    let mut r = p.recorded.clone().unwrap();
    // The known slow mode's median: between 178,570 and 166,666.
    set(&mut r, Variant::new(7, 16), 172_618.0);
    let o = outcome(&p, &r, "probe::chain7_acc16_effective7");
    assert!(
        matches!(&o, Outcome::Pass(d) if d.contains("-3.33%") && d.contains("wider for this variant: bimodal")),
        "{o:?}"
    );
    set(&mut r, Variant::new(7, 16), 160_000.0);
    let m = fail_text(outcome(&p, &r, "probe::chain7_acc16_effective7"));
    assert!(m.contains("tolerance ±7.00%"), "{m}");
    set(&mut r, Variant::new(7, 8), 172_618.0);
    let m = fail_text(outcome(&p, &r, "probe::chain7_acc8_effective7"));
    assert!(m.contains("tolerance ±0.50%)"), "{m}");
}

// --- the kind of a failure (JUnit's `type`) ---------------------------------------------

#[test]
fn each_failure_says_what_kind_it_is() {
    use accprobe::verdict::{judge, FailureKind};
    let p = load("h200");
    let kind = |r: &RunResults, name: &str| {
        let v = judge(case(&cases(&p), name), &p, r);
        assert!(v.outcome.is_fail() == v.failure.is_some(), "{name}: {v:?}");
        v.failure
    };
    let recorded = p.recorded.clone().unwrap();
    assert_eq!(kind(&recorded, "probe::chain13_acc2_effective2"), None);

    let mut r = recorded.clone();
    set(&mut r, Variant::new(29, 4), 101_010.0 * 0.97);
    assert_eq!(
        kind(&r, "probe::chain29_acc4_effective4"),
        Some(FailureKind::Regression)
    );

    let mut r = recorded.clone();
    set(&mut r, Variant::new(13, 2), 150_000.0);
    assert_eq!(
        kind(&r, "invariant::acc2_is_peak::chain13"),
        Some(FailureKind::KnownDeviationGone)
    );

    let mut r = recorded.clone();
    set(&mut r, Variant::new(13, 4), 0.0);
    assert_eq!(
        kind(&r, "invariant::acc2_is_peak::chain13"),
        Some(FailureKind::InvalidMeasurement)
    );

    let mut r = recorded.clone();
    r.variants[0].output_problems.push("never written".into());
    assert_eq!(
        kind(&r, "probe::chain7_acc1_effective1"),
        Some(FailureKind::InvalidMeasurement)
    );

    let mut r = recorded.clone();
    r.variants.retain(|v| v.name != "chain13_acc2_effective2");
    assert_eq!(
        kind(&r, "invariant::acc2_is_peak::chain13"),
        Some(FailureKind::NoResult)
    );
    assert_eq!(FailureKind::NoResult.as_str(), "no-result");
}
