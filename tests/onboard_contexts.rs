//! Onboarding with the heuristic gate's contexts, on real H200 runs treated as those of a
//! GPU no profile names (2026-12-02, driver 580.159.04, NVRTC 13.0.88): a serial and a
//! wave run of the 129-variant matrix (expectations/recorded/h200-2026-12-02-contexts-*)
//! and ten more wave runs (tests/data/onboard/contexts/wave-runs.json, each variant's
//! median and means, set into the recorded wave run). The draft measures the contexts,
//! chooses its mode on the base context alone, records the contexts' policy losses as
//! known deviations, widens exactly the variants that moved, and replays green on every
//! run it was drafted from.

mod common;

use accprobe::catalog;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::model::settings::Mode;
use accprobe::onboard::{self, Draft, Measured};
use accprobe::verdict::cases::cases;
use accprobe::verdict::{evaluate, Outcome};
use common::onboard::{ceilings, recorded, without_h200};
use common::root;
use std::collections::BTreeMap;
use std::path::Path;

fn measured() -> Measured {
    Measured {
        serial: recorded("h200-2026-12-02-contexts-serial.json"),
        wave: recorded("h200-2026-12-02-contexts-wave.json"),
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
            Outcome::Fail(t) | Outcome::Error(t) => panic!("{what}: {}: {t}", case.name),
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
    // The base context's variants agree (0.0003%; the 69 measured, the sink modes of
    // h200.yaml's runs among them); the contexts' 5.20% is reported, not judged.
    assert_eq!(d.mode, Mode::Wave, "{}", d.mode_why);
    assert_eq!(d.profile.probe.mode, Mode::Wave);
    assert!(
        d.mode_why
            .contains("within 0.0003% for all 69 variants of the base context"),
        "{}",
        d.mode_why
    );
    assert!(
        d.mode_why
            .contains("the 60 variants of the other contexts are not judged")
            && d.mode_why
                .contains("up to 5.20% (chain29_acc2_effective2_w16)"),
        "{}",
        d.mode_why
    );
    let comment = d.profile_text.replace("\n  # ", " ");
    assert!(
        comment.contains("up to 5.20% (chain29_acc2_effective2_w16)"),
        "{comment}"
    );
    // Judging every variant, as before contexts, the draft would have been serial.
    let all = onboard::mode::compare(&measured().serial, &measured().wave, 0.005).unwrap();
    assert!(all
        .rows
        .iter()
        .any(|r| !r.base && r.median_difference > 0.005));
    assert_eq!(d.runs, 11);
    assert_eq!(
        d.recorded_file,
        dir.join("recorded/h200-2026-12-02-wave.json")
    );
}

#[test]
#[ignore = "onboarding decides the draft's policy deviations on each run's mean progress, the gate on the blessed progress: to reconcile, with fixtures from the phased kernel (issue 31 note)"]
fn the_known_deviations_are_the_hand_written_profiles_with_the_contexts_policy_losses() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    let hand = catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    // The runs were measured on an H200 where two of the unsteady ones hold: the draft has
    // every other deviation (chain13_w16, unsteady too, fails in every one of these runs)
    // and not those two.
    let holding = ["policy::study::chain29_w16", "policy::study::chain13_w32"];
    let written: Vec<&String> = hand
        .known_deviations
        .keys()
        .filter(|c| !c.starts_with("compile::") && !holding.contains(&c.as_str()))
        .collect();
    for case in holding.iter().chain(&["policy::study::chain13_w16"]) {
        assert!(hand.known_deviations[*case].unsteady, "{case}");
    }
    let found: Vec<&String> = d.profile.known_deviations.keys().collect();
    assert_eq!(found, written);
    for case in [
        "policy::study::chain13_w16",
        "policy::study::chain7_w32",
        "policy::study::chain7_w32_v48",
        "policy::study::chain29_v48",
        "invariant::acc2_is_peak::chain13",
        "policy::study::chain13",
    ] {
        let reason = &d.profile.known_deviations[case].reason;
        // Measured figures, date, driver, NVRTC, and in how many runs it failed.
        assert!(
            reason.contains("% of the best (acc") || reason.contains("on the H200 acc"),
            "{case}: {reason}"
        );
        assert!(
            reason.contains(", 2026-12-02, driver 580.159.04, NVRTC 13.0; failing in 11 of the 11 wave runs measured"),
            "{case}: {reason}"
        );
    }
    let w16 = &d.profile.known_deviations["policy::study::chain13_w16"].reason;
    assert!(
        w16.starts_with("the study's policy picks acc2 at N=13 (94,786.0), 93.91% of the best (acc8: 100,937.2), below the 98% the gate asks"),
        "{w16}"
    );
    assert!(d.unsteady.is_empty(), "{:?}", d.unsteady);
}

#[test]
fn the_wider_baselines_are_exactly_the_variants_that_moved() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    let m = measured();
    let extra = extra_runs();
    let runs: Vec<&RunResults> = [&m.serial, &m.wave].into_iter().chain(&extra).collect();
    let mut moved = BTreeMap::new();
    for v in &m.wave.variants {
        if !d.profile.probe.variants().contains(&v.variant()) {
            continue;
        }
        let base = (v.baseline_progress() * 10.0).round() / 10.0;
        let far = runs
            .iter()
            .map(|r| (r.get(v.variant()).unwrap().baseline_progress() - base).abs() / base)
            .fold(0.0, f64::max);
        if far > 0.003 {
            moved.insert(v.name.clone(), far);
        }
    }
    let wider = &d.profile.baselines.as_ref().unwrap().wider;
    assert_eq!(
        wider.keys().collect::<Vec<_>>(),
        moved.keys().collect::<Vec<_>>()
    );
    assert_eq!(moved.len(), 14, "{moved:?}");
    assert!(
        moved.keys().all(|n| n.contains("_w") || n.contains("_v")),
        "{moved:?}"
    );
    for (name, far) in &moved {
        let t = wider[name].tolerance;
        // 1.25 times the distance rounded up to 0.5%, at least 1%.
        let least = t >= 0.01 && t >= far * 1.25;
        let tight = t == 0.01 || t - 0.005 < far * 1.25;
        assert!(least && tight, "{name}: {t} for {far}");
        let steps = t * 200.0;
        assert!(
            (steps.round() - steps).abs() < 1e-9,
            "{name}: {t} is not in 0.5% steps"
        );
    }
    assert_eq!(wider["chain7_acc4_effective4_w16"].tolerance, 0.07);
    assert_eq!(wider["chain13_acc2_effective2_w32_v48"].tolerance, 0.06);
    let reason = &wider["chain7_acc4_effective4_w16"].reason;
    assert_eq!(
        reason,
        "median 124,999.0 in the blessed wave run; medians 124,999.0 to 124,999.0 in 11 wave runs (0.00% from it at most), 131,669.0 to 131,669.0 in 1 serial run (5.34% from it at most); 1.25 times the largest distance, rounded up to 0.5%, at least 1%; H200, 2026-12-02, driver 580.159.04, NVRTC 13.0"
    );
    assert_eq!(d.wider.len(), 14);
    assert!(
        d.profile_text.contains("  wider:\n    \"chain"),
        "{}",
        d.profile_text
    );
}

#[test]
#[ignore = "onboarding decides the draft's policy deviations on each run's mean progress, the gate on the blessed progress: to reconcile, with fixtures from the phased kernel (issue 31 note)"]
fn the_written_draft_loads_and_replays_green_on_every_run_it_was_drafted_from() {
    let (_tmp, dir) = without_h200();
    let d = drafted(&dir);
    d.write_unless_ci(|_| None).unwrap();
    let (profiles, errors) = catalog::load_dir(&dir);
    assert!(errors.is_empty(), "{errors:?}");
    let p = profiles.into_iter().find(|p| p.name == "h200").unwrap();
    assert_eq!(p.baselines.as_ref().unwrap().progress.len(), 84);
    let deviations: Vec<String> = p.known_deviations.keys().cloned().collect();
    assert_eq!(deviations.len(), 8);
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
    // Without the wider entries, some extra run is red: the widths are what keeps it green.
    let mut narrow = p.clone();
    narrow.baselines.as_mut().unwrap().wider.clear();
    let red = extra_runs().iter().any(|run| {
        cases(&narrow)
            .iter()
            .any(|c| evaluate(c, &narrow, run).is_fail())
    });
    assert!(red, "no extra run needs the wider baselines");
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
    common::scale(&mut other, "chain13_acc2_effective2_w32", 0.1);
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
    // acc2 at N=13 in 16 warps as fast as the best: the policy's pick holds there.
    let best = runs[3]
        .get(accprobe::model::variant::Variant::new(13, 8).with_context(
            accprobe::model::context::Context {
                warps: Some(16),
                ..Default::default()
            },
        ))
        .unwrap()
        .mean_progress;
    let v = runs[3]
        .variants
        .iter_mut()
        .find(|v| v.name == "chain13_acc2_effective2_w16")
        .unwrap();
    v.mean_progress = best;
    let d = onboard::draft_with(&study(&dir), &dir, None, &measured(), &runs).unwrap();
    assert_eq!(d.unsteady, [("policy::study::chain13_w16".to_string(), 10)]);
    assert!(d.profile.known_deviations["policy::study::chain13_w16"]
        .reason
        .ends_with("failing in 10 of the 11 wave runs measured"));
}
