//! Onboarding with the heuristic gate's contexts, on real H200 runs treated as those of a
//! GPU no profile names (2026-12-04, driver 580.159.04, NVRTC 13.0.88, the kernel with
//! phased starts): a serial and a wave run of the 129-variant matrix
//! (expectations/recorded/h200-2026-12-04-contexts-*) and ten more wave runs of the same
//! process sequence (tests/data/onboard/contexts/wave-runs.json, each variant's median and
//! means, set into the recorded wave run). The draft measures the contexts, chooses its
//! mode on the base context, judges its cases as the gate will judge them once committed
//! (the policy's picks on the blessed progress), records the contexts' policy losses as
//! known deviations, needs no wider baseline, and replays green on every run it was
//! drafted from.

use crate::common::onboard::{ceilings, recorded, without_h200};
use crate::common::root;
use accprobe::catalog;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::model::settings::Mode;
use accprobe::onboard::{self, Draft, Measured};
use accprobe::verdict::cases::cases;
use accprobe::verdict::{evaluate, Outcome};
use std::collections::BTreeMap;
use std::path::Path;

fn measured() -> Measured {
    Measured {
        serial: recorded("h200-2026-12-04-contexts-serial.json"),
        wave: recorded("h200-2026-12-04-contexts-wave.json"),
        ceilings: ceilings(),
    }
}

#[derive(serde::Deserialize)]
struct Trimmed {
    runs: Vec<TrimmedRun>,
}

#[derive(serde::Deserialize)]
struct TrimmedRun {
    date: String,
    /// Per variant: [median progress, summary mean, mean progress].
    variants: BTreeMap<String, [f64; 3]>,
}

/// The ten extra wave runs: the recorded wave run with each variant's figures as that run
/// measured them.
fn extra_runs() -> Vec<RunResults> {
    let text =
        std::fs::read_to_string(root().join("tests/data/onboard/contexts/wave-runs.json")).unwrap();
    let t: Trimmed = serde_json::from_str(&text).unwrap();
    assert_eq!(t.runs.len(), 10);
    let wave = measured().wave;
    t.runs
        .iter()
        .map(|run| {
            let mut r = wave.clone();
            r.environment.as_mut().unwrap().date = run.date.clone();
            assert_eq!(run.variants.len(), r.variants.len());
            for v in &mut r.variants {
                let [median, mean, mean_progress] = run.variants[&v.name];
                let s = v.summary.as_mut().unwrap();
                (s.median, s.mean) = (median, mean);
                v.mean_progress = mean_progress;
            }
            r
        })
        .collect()
}

fn study(dir: &Path) -> Profile {
    catalog::load(&dir.join("documented.yaml")).unwrap()
}

fn drafted(dir: &Path) -> Draft {
    onboard::draft_with(&study(dir), dir, None, &measured(), &extra_runs()).unwrap()
}

/// Every case of `p` on `r`: none fails or errs; the known deviations that deviate.
fn replay(p: &Profile, r: &RunResults, what: &str) -> Vec<String> {
    let mut deviating = Vec::new();
    for case in cases(p) {
        match evaluate(&case, p, r) {
            Outcome::Fail(t) => panic!("{what}: {}: {t}", case.name),
            Outcome::Error(t) => panic!("{what}: {}: {t}", case.name),
            Outcome::KnownDeviation { .. } => deviating.push(case.name),
            _ => {}
        }
    }
    deviating
}

#[test]
fn the_draft_measures_the_contexts_and_chooses_wave_on_the_base_context() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    let hand = catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    assert_eq!(d.profile.probe.contexts, hand.probe.contexts);
    assert_eq!(d.profile.probe.context_chains, [7, 13, 29]);
    assert_eq!(d.profile.probe.context_accumulators, [1, 2, 4, 8]);
    // 24 study variants and 5 contexts of 12 (the recorded runs also hold the sink modes
    // h200.yaml measures, which the study's draft does not name).
    assert_eq!(d.profile.probe.variants().len(), 84);
    assert!(d
        .baselines
        .contents
        .contains("chain29_acc8_effective8_w32_v48"));
    for want in [
        "\ncontexts:\n  chains: [7, 13, 29]\n  accumulators: [1, 2, 4, 8]\n  warps: [16, 32]\n",
        "# - w16: occupancy: 16 warps on the SM instead of 8",
        "# - s4: surrounding ILP: 4 independent FFMA side chains",
        "# - v48: register pressure: 48 values held live",
        "# - w32_v48: a corner, where the inputs meet: 32 warps on the SM with 48 values live (at 32 warps a thread may hold 64 registers)",
    ] {
        let text = d.profile_text.replace("\n# ", " ").replace(" - ", "\n# - ");
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    // The base context's variants agree within 0.20% (the 69 measured, the sink modes of
    // h200.yaml's runs among them); the contexts' 0.33% is reported, not judged.
    assert_eq!(d.mode, Mode::Wave, "{}", d.mode_why);
    assert_eq!(d.profile.probe.mode, Mode::Wave);
    assert!(
        d.mode_why
            .contains("within 0.1964% for all 69 variants of the base context"),
        "{}",
        d.mode_why
    );
    assert!(
        d.mode_why
            .contains("the 60 variants of the other contexts are not judged")
            && d.mode_why
                .contains("up to 0.33% (chain29_acc2_effective2_v48)"),
        "{}",
        d.mode_why
    );
    let comment = d.profile_text.replace("\n  # ", " ");
    assert!(
        comment.contains("up to 0.33% (chain29_acc2_effective2_v48)"),
        "{comment}"
    );
    // With phased starts the contexts agree between modes too: judging every variant
    // would also choose wave.
    let all = onboard::mode::compare(&measured().serial, &measured().wave, 0.005).unwrap();
    assert!(all.rows.iter().any(|r| !r.base));
    assert!(
        all.rows.iter().all(|r| r.median_difference.abs() <= 0.005),
        "{:?}",
        all.rows
            .iter()
            .map(|r| r.median_difference)
            .fold(0.0, f64::max)
    );
    assert_eq!(d.runs, 11);
    assert_eq!(
        d.recorded_file,
        dir.join("recorded/h200-2026-12-04-wave.json")
    );
}

#[test]
fn the_known_deviations_are_the_hand_written_profiles_with_the_contexts_policy_losses() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    let hand = catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    let written: Vec<&String> = hand
        .known_deviations
        .keys()
        .filter(|c| !c.starts_with("compile::"))
        .collect();
    let found: Vec<&String> = d.profile.known_deviations.keys().collect();
    assert_eq!(found, written);
    assert_eq!(found.len(), 12);
    for (case, dev) in &d.profile.known_deviations {
        let reason = &dev.reason;
        // Measured figures, date, driver, NVRTC, and in how many runs it failed.
        assert!(
            reason.contains("% of the best (acc") || reason.contains("on the H200 acc"),
            "{case}: {reason}"
        );
        assert!(
            reason.contains(", 2026-12-04, driver 580.159.04, NVRTC 13.0; failing in 11 of the 11 wave runs measured"),
            "{case}: {reason}"
        );
        // The contexts' policy losses with the figures the hand-written profile gives:
        // both judged on the same blessed progress.
        if case.starts_with("policy::") && case.contains("_w") {
            let figures = reason
                .split_once(" at N=")
                .and_then(|(_, rest)| rest.split_once(" (").map(|(_, f)| f))
                .and_then(|f| f.split_once(", below").map(|(f, _)| f))
                .unwrap();
            assert!(
                figures.ends_with("by the blessed progress"),
                "{case}: {reason}"
            );
            assert!(
                hand.known_deviations[case].reason.contains(figures),
                "{case}: {figures:?} not in {:?}",
                hand.known_deviations[case].reason
            );
        }
    }
    let w16 = &d.profile.known_deviations["policy::study::chain13_w16"].reason;
    assert!(
        w16.starts_with("the study's policy picks acc2 at N=13 (90,661.5), 95.57% of the best (acc8: 94,863.5) by the blessed progress, below the 98% the gate asks"),
        "{w16}"
    );
    assert!(d.unsteady.is_empty(), "{:?}", d.unsteady);
    assert!(d.mode_dependent.is_empty(), "{:?}", d.mode_dependent);
}

/// The variants of `d` whose median, in some run of `runs`, is so far from its blessed
/// baseline that 1.25 times the distance is more than the 0.5% tolerance.
fn moved(d: &Draft, wave: &RunResults, runs: &[&RunResults]) -> BTreeMap<String, f64> {
    let mut moved = BTreeMap::new();
    for v in &wave.variants {
        if !d.profile.probe.variants().contains(&v.variant()) {
            continue;
        }
        let base = (v.baseline_progress() * 10.0).round() / 10.0;
        let far = runs
            .iter()
            .map(|r| (r.get(v.variant()).unwrap().baseline_progress() - base).abs() / base)
            .fold(0.0, f64::max);
        if far * 1.25 > 0.005 {
            moved.insert(v.name.clone(), far);
        }
    }
    moved
}

#[test]
fn no_variant_needs_a_wider_baseline_and_one_that_moves_gets_one() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    let m = measured();
    let extra = extra_runs();
    let runs: Vec<&RunResults> = [&m.serial, &m.wave].into_iter().chain(&extra).collect();
    assert!(moved(&d, &m.wave, &runs).is_empty());
    assert!(d.wider.is_empty(), "{:?}", d.wider);
    assert!(d.profile.baselines.as_ref().unwrap().wider.is_empty());
    assert!(!d.profile_text.contains("  wider:"), "{}", d.profile_text);
    // One extra run where one 16-warp variant measured 2% slower (1.87% below the
    // baseline): exactly it is widened, to 1.25 times that, rounded up to 0.5%.
    let mut slow = extra_runs();
    crate::common::scale(&mut slow[4], "chain7_acc4_effective4_w16", 0.98);
    let d = onboard::draft_with(&study(&dir), &dir, None, &m, &slow).unwrap();
    let runs: Vec<&RunResults> = [&m.serial, &m.wave].into_iter().chain(&slow).collect();
    let far = moved(&d, &m.wave, &runs);
    assert_eq!(
        far.keys().collect::<Vec<_>>(),
        ["chain7_acc4_effective4_w16"]
    );
    let wider = &d.profile.baselines.as_ref().unwrap().wider;
    assert_eq!(
        wider.keys().collect::<Vec<_>>(),
        far.keys().collect::<Vec<_>>()
    );
    assert_eq!(wider["chain7_acc4_effective4_w16"].tolerance, 0.025);
    let reason = &wider["chain7_acc4_effective4_w16"].reason;
    let far = far["chain7_acc4_effective4_w16"];
    assert!(
        reason.starts_with("median 124,263.5 in the blessed wave run; medians ")
            && reason.contains(&format!(" in 11 wave runs ({:.2}% from it at most), ", far * 100.0))
            && reason.ends_with(" in 1 serial run (0.06% from it at most); 1.25 times the largest distance, rounded up to 0.5%, at least 1%; H200, 2026-12-04, driver 580.159.04, NVRTC 13.0"),
        "{reason}"
    );
    assert!(
        d.profile_text
            .contains("  wider:\n    \"chain7_acc4_effective4_w16\""),
        "{}",
        d.profile_text
    );
}

#[test]
fn the_written_draft_loads_and_replays_green_on_every_run_it_was_drafted_from() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    d.write_unless_ci(|_| None).unwrap();
    let (profiles, errors) = catalog::load_dir(&dir);
    assert!(errors.is_empty(), "{errors:?}");
    let p = profiles.into_iter().find(|p| p.name == "h200").unwrap();
    assert_eq!(p.baselines.as_ref().unwrap().progress.len(), 84);
    let deviations: Vec<String> = p.known_deviations.keys().cloned().collect();
    assert_eq!(deviations.len(), 12);
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let r = p.recorded.clone().unwrap();
    assert_eq!(sorted(replay(&p, &r, "recorded")), deviations);
    for (i, run) in extra_runs().iter().enumerate() {
        let what = format!("extra run {}", i + 1);
        assert_eq!(sorted(replay(&p, run, &what)), deviations, "{what}");
    }
    // And the draft still sees: a context variant 1% slower in one run is red in its case.
    let mut slow = extra_runs().remove(7);
    crate::common::scale(&mut slow, "chain29_acc8_effective8_w32", 0.99);
    let red: Vec<String> = cases(&p)
        .iter()
        .filter(|c| evaluate(c, &p, &slow).is_fail())
        .map(|c| c.name.clone())
        .collect();
    assert!(
        red.iter()
            .any(|c| c.starts_with("probe::") && c.contains("chain29_acc8_effective8_w32")),
        "{red:?}"
    );
}

#[test]
fn extra_runs_from_another_mode_gpu_or_toolchain_are_refused() {
    let (_tmp, dir) = without_h200();
    let s = study(&dir);
    let refused = |runs: &[RunResults]| {
        onboard::draft_with(&s, &dir, None, &measured(), runs)
            .unwrap_err()
            .to_string()
    };
    let e = refused(&[measured().serial]);
    assert!(
        e.contains("extra run 1 of 1 was measured in Serial mode"),
        "{e}"
    );
    let mut other = extra_runs().remove(0);
    other.environment.as_mut().unwrap().driver_version = "590.1".into();
    let e = refused(&[other]);
    assert!(
        e.contains("driver 590.1") && e.contains("one GPU and toolchain"),
        "{e}"
    );
    let mut other = extra_runs().remove(0);
    other.environment = None;
    assert!(refused(&[other]).contains("has no environment"));
    // A run missing a variant the draft measures.
    let mut other = extra_runs().remove(0);
    other
        .variants
        .retain(|v| v.name != "chain13_acc2_effective2_w32");
    let e = refused(&[other]);
    assert!(e.contains("chain13_acc2_effective2_w32"), "{e}");
    // A variant that moved past any tolerance.
    let mut other = extra_runs().remove(0);
    crate::common::scale(&mut other, "chain13_acc2_effective2_w32", 0.1);
    let e = refused(&[other]);
    assert!(
        e.contains("no tolerance below 100%") && e.contains("idle GPU"),
        "{e}"
    );
}

#[test]
fn a_known_deviation_that_holds_in_one_extra_run_is_unsteady() {
    let (_tmp, dir) = without_h200();
    let mut runs = extra_runs();
    // acc2 at N=13 ahead of every other K in one run's means: the peak invariant holds
    // there (the medians, and so the baselines, do not move).
    let top = runs[3]
        .variants
        .iter()
        .filter(|v| v.chain == 13 && v.name.ends_with(&format!("_effective{}", v.accumulators)))
        .map(|v| v.mean_progress)
        .fold(0.0, f64::max);
    crate::common::variant(&mut runs[3], "chain13_acc2_effective2").mean_progress = top * 1.05;
    let d = onboard::draft_with(&study(&dir), &dir, None, &measured(), &runs).unwrap();
    assert_eq!(
        d.unsteady,
        [("invariant::acc2_is_peak::chain13".to_string(), 10)]
    );
    assert!(
        d.profile.known_deviations["invariant::acc2_is_peak::chain13"]
            .reason
            .ends_with("failing in 10 of the 11 wave runs measured")
    );
}

#[test]
fn a_policy_deviation_is_judged_on_the_blessed_progress_as_the_gate_judges_it() {
    let (_tmp, dir) = without_h200();
    let mut runs = extra_runs();
    // In one run acc2 at N=13 in 16 warps reaches the best K's mean while its median holds
    // its baseline: the gate judges the pick on the blessed figures, so it still fails
    // there, and so does the draft.
    let best = crate::common::variant(&mut runs[3], "chain13_acc8_effective8_w16").mean_progress;
    crate::common::variant(&mut runs[3], "chain13_acc2_effective2_w16").mean_progress = best;
    let d = onboard::draft_with(&study(&dir), &dir, None, &measured(), &runs).unwrap();
    assert!(d.unsteady.is_empty(), "{:?}", d.unsteady);
    assert!(d.profile.known_deviations["policy::study::chain13_w16"]
        .reason
        .ends_with("failing in 11 of the 11 wave runs measured"));
}
