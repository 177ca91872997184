//! Onboarding on recorded results: the committed H200 runs treated as those of a GPU no
//! profile names. What the draft holds, that it loads and replays green, that its known
//! deviations are the hand-written profile's, and every refusal.

use crate::common::onboard::{ceilings, recorded, without_h200};
use crate::common::root;
use accprobe::catalog;
use accprobe::model::settings::Mode;
use accprobe::onboard::{self, Measured};
use accprobe::verdict::cases::cases;
use accprobe::verdict::{evaluate, Outcome};
use std::path::Path;

fn measured() -> Measured {
    Measured {
        serial: recorded("h200-2026-11-30.json"),
        wave: recorded("h200-2026-11-30-wave.json"),
        ceilings: ceilings(),
    }
}

fn study(dir: &Path) -> accprobe::expectations::profile::Profile {
    catalog::load(&dir.join("documented.yaml")).unwrap()
}

#[test]
fn the_draft_on_the_h200_runs_has_the_hand_written_profiles_known_deviations() {
    let (_tmp, dir) = without_h200();
    let d = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    assert_eq!(d.name, "h200", "the slug of NVIDIA H200");
    let hand = catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    let drafted: Vec<&String> = d.profile.known_deviations.keys().collect();
    // The compile-only gate's deviations come from its blessed digests, which a draft
    // does not have yet; and the runs it drafts from (the study's 69 variants) predate
    // the hand-written profile's contexts. On the cases the draft measures (every variant
    // the hand-written case needs is in both runs) the deviations are the same.
    let m = measured();
    let hand_cases = cases(&hand);
    let measures = |name: &str| {
        let case = hand_cases
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("h200.yaml's deviation {name} names no case"));
        case.needs
            .iter()
            .all(|&v| m.serial.get(v).is_some() && m.wave.get(v).is_some())
    };
    let (written, unmeasured): (Vec<&String>, Vec<&String>) = hand
        .known_deviations
        .keys()
        .filter(|c| !c.starts_with("compile::"))
        .partition(|c| measures(c));
    assert_eq!(drafted, written);
    // The others are the contexts' policy deviations (16 and 32 warps, 32 warps with 48
    // values live), of cases the draft does not generate: the documented study measures no
    // context.
    assert_eq!(unmeasured.len(), 8, "{unmeasured:?}");
    let draft_cases: Vec<String> = cases(&d.profile).into_iter().map(|c| c.name).collect();
    for name in &unmeasured {
        let case = hand_cases.iter().find(|c| &&c.name == name).unwrap();
        assert!(
            matches!(case.check, accprobe::verdict::cases::Check::Policy { place, .. }
                if !place.context.is_base()),
            "{name}: {case:?}"
        );
        assert!(!draft_cases.contains(name), "{name}");
    }
    // Each reason gives the measured numbers, date, driver and NVRTC.
    let chain7 = &d.profile.known_deviations["invariant::acc2_is_peak::chain7"].reason;
    assert_eq!(
        chain7,
        "on the H200 acc3 and acc5 reach 181,817.0 (acc7 181,816.5, acc8 181,816.5, acc16 181,816.5) against acc2's 178,570.0 (+1.82%), 2026-11-30, driver 580.159.04, NVRTC 13.0"
    );
    let policy = &d.profile.known_deviations["policy::study::chain13"].reason;
    assert!(
        policy.starts_with("the study's policy picks acc2 at N=13 (144,926.0), 97.10% of the best (acc7, acc8, acc16: 149,253.0) by the blessed progress, below the 98% the gate asks, 2026-11-30, driver 580.159.04, NVRTC 13.0"),
        "{policy}"
    );
    // Wave and serial agree on the committed runs: wave by default, as h200.yaml has it.
    assert_eq!(d.mode, Mode::Wave);
    assert_eq!(d.profile.probe.mode, Mode::Wave);
    assert!(d.mode_why.contains("agree within"), "{}", d.mode_why);
    assert!(d.mode_dependent.is_empty(), "{:?}", d.mode_dependent);
}

#[test]
fn the_draft_holds_the_study_the_match_block_the_ceilings_and_the_gate() {
    let (_tmp, dir) = without_h200();
    let s = study(&dir);
    let d = onboard::draft(&s, &dir, None, &measured()).unwrap();
    let p = catalog::parse(&d.profile_text, &d.profile_file);
    // Its recorded results are not written yet: it reads back once they are (below).
    assert!(p.is_err());
    let p = &d.profile;
    assert_eq!(p.matches.gpu_names, ["NVIDIA H200"]);
    assert_eq!(p.matches.compute_capabilities, ["9.0"]);
    assert_eq!(p.invariants, s.invariants);
    let mut probe = s.probe.clone();
    probe.mode = Mode::Wave;
    assert_eq!(p.probe, probe);
    let v = p.validity.unwrap();
    assert_eq!((v.ffma_latency_cycles, v.schedulers_per_sm), (4, 4));
    assert_eq!(v.duration_tolerance, s.validity.unwrap().duration_tolerance);
    assert_eq!(p.policy_gate, s.policy_gate);
    let c = p.compile_only.as_ref().unwrap();
    assert_eq!(c.architectures, onboard::COMPILE_ARCHITECTURES);
    assert_eq!(c.toolchains, onboard::COMPILE_TOOLCHAINS);
    assert_eq!(p.baselines.as_ref().unwrap().tolerance, 0.005);
    // The ceilings' comment names where they were measured.
    let comments = d.profile_text.replace("\n# ", " ");
    assert!(
        comments.contains("(kernels/ceilings.cu) on NVIDIA H200, driver 580.159.04, NVRTC 13.0, 2026-11-30: dependent FFMA latency 4.000 cycles"),
        "{}",
        d.profile_text
    );
    assert_eq!(
        d.recorded_file,
        dir.join("recorded/h200-2026-11-30-wave.json")
    );
}

#[test]
fn a_written_draft_loads_is_chosen_for_the_gpu_and_replays_green() {
    let (_tmp, dir) = without_h200();
    let d = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    d.write_unless_ci(|_| None).unwrap();
    let (profiles, errors) = catalog::load_dir(&dir);
    assert!(errors.is_empty(), "{errors:?}");
    let gpu = measured().wave.environment.unwrap().identity();
    let sel = catalog::select(&profiles, Some(&gpu), None).unwrap();
    assert_eq!(sel.profile.name, "h200", "{}", sel.why);
    let p = sel.profile;
    // Its known deviations name cases it generates.
    p.check_known_deviations(&cases(&p).into_iter().map(|c| c.name).collect::<Vec<_>>())
        .unwrap();
    let r = p.recorded.clone().unwrap();
    let mut deviations = 0;
    for case in cases(&p) {
        match evaluate(&case, &p, &r) {
            Outcome::Fail(t) => panic!("{}: {t}", case.name),
            Outcome::Error(t) => panic!("{}: {t}", case.name),
            Outcome::KnownDeviation { .. } => deviations += 1,
            _ => {}
        }
    }
    assert_eq!(deviations, 4);
    // And on the serial run too, judged against the wave baselines.
    let serial = recorded("h200-2026-11-30.json");
    for case in cases(&p) {
        let o = evaluate(&case, &p, &serial);
        assert!(!o.is_fail() && !o.is_error(), "{}: {o:?}", case.name);
    }
}

#[test]
fn the_drafted_baselines_agree_with_the_blessed_ones_within_their_tolerance() {
    let (_tmp, dir) = without_h200();
    let d = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    d.write_unless_ci(|_| None).unwrap();
    let p = catalog::load(&d.profile_file).unwrap();
    let drafted = p.baselines.unwrap();
    let hand = catalog::load(&root().join("expectations/h200.yaml")).unwrap();
    let blessed = hand.baselines.unwrap();
    assert_eq!(drafted.progress.len(), 24, "the study's matrix");
    for (name, x) in &drafted.progress {
        let b = blessed.progress[name];
        assert!(
            (x / b - 1.0).abs() <= blessed.tolerance,
            "{name}: {x} vs {b}"
        );
        assert_eq!(
            drafted.sass[name].digest, blessed.sass[name].digest,
            "{name}"
        );
    }
}

#[test]
fn onboarding_never_overwrites_a_profile_baselines_or_recorded_file() {
    let (_tmp, dir) = without_h200();
    let d = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    for i in 0..3 {
        let file = d.files()[i].to_path_buf();
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "someone's file\n").unwrap();
        let e = d.write_unless_ci(|_| None).unwrap_err().to_string();
        assert!(
            e.contains(&file.display().to_string()) && e.contains("never overwrites"),
            "{e}"
        );
        for (j, f) in d.files().iter().enumerate() {
            if i == j {
                assert_eq!(std::fs::read_to_string(f).unwrap(), "someone's file\n");
            } else {
                assert!(!f.exists(), "{} written", f.display());
            }
        }
        std::fs::remove_file(&file).unwrap();
    }
    // A second onboarding after the first refuses and leaves the first's files.
    d.write_unless_ci(|_| None).unwrap();
    let before = std::fs::read(&d.profile_file).unwrap();
    let again = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    let e = again.write_unless_ci(|_| None).unwrap_err().to_string();
    assert!(e.contains("never overwrites"), "{e}");
    assert_eq!(std::fs::read(&d.profile_file).unwrap(), before);
}

#[test]
fn onboarding_refuses_under_ci_and_writes_nothing() {
    let (_tmp, dir) = without_h200();
    let d = onboard::draft(&study(&dir), &dir, None, &measured()).unwrap();
    let e = d
        .write_unless_ci(|v| (v == "GITLAB_CI").then(|| "true".to_string()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("GITLAB_CI") && e.contains("in CI"), "{e}");
    assert!(d.files().iter().all(|f| !f.exists()));
}

#[test]
fn onboarding_refuses_mismatched_or_unusable_measurements() {
    let (_tmp, dir) = without_h200();
    let s = study(&dir);
    let refused = |m: &Measured, name: Option<&str>| {
        onboard::draft(&s, &dir, name, m).unwrap_err().to_string()
    };
    // Names: not a profile name, or the study's own.
    for bad in ["a/b", "", "documented"] {
        let e = refused(&measured(), Some(bad));
        assert!(e.contains("cannot onboard as"), "{e}");
    }
    // Measured under another name than it drafts.
    let e = refused(&measured(), Some("h200-sxm"));
    assert!(e.contains("measured under profile \"h200\""), "{e}");
    // The two runs from two GPUs.
    let mut m = measured();
    m.wave.environment.as_mut().unwrap().gpu_name = "NVIDIA H100".into();
    let e = refused(&m, None);
    assert!(e.contains("needs both from one GPU"), "{e}");
    // The ceilings from another GPU, or not a ceiling.
    let mut m = measured();
    m.ceilings.compute_capability = "8.0".into();
    assert!(refused(&m, None).contains("the ceilings were measured on"));
    let mut m = measured();
    m.ceilings.ffma_issue_per_cycle_per_sm = f64::NAN;
    assert!(refused(&m, None).contains("expected a finite figure"));
    // The modes swapped.
    let m = Measured {
        serial: recorded("h200-2026-11-30-wave.json"),
        wave: recorded("h200-2026-11-30.json"),
        ceilings: ceilings(),
    };
    assert!(refused(&m, None).contains("mode"));
    // Results bless refuses: an output never written.
    let mut m = measured();
    m.wave.variants[0]
        .output_problems
        .push("repeat 0: 1 of 256 output elements never written".into());
    let e = refused(&m, None);
    assert!(e.contains("refusing to bless"), "{e}");
    // No environment: not a measurement.
    let mut m = measured();
    m.serial.environment = None;
    assert!(refused(&m, None).contains("no environment"));
}

#[test]
fn a_refused_draft_says_what_was_wrong_as_data() {
    use accprobe::model::settings::Mode;
    use accprobe::onboard::OnboardError;
    let (_tmp, dir) = without_h200();
    let s = study(&dir);
    let e = onboard::draft(&s, &dir, Some("a/b"), &measured()).unwrap_err();
    assert_eq!(e, OnboardError::BadName { name: "a/b".into() });
    let mut m = measured();
    m.ceilings.ffma_latency_cycles = 0.2;
    let e = onboard::draft(&s, &dir, None, &m).unwrap_err();
    assert_eq!(
        e,
        OnboardError::NotACeiling {
            figure: "ffma_latency_cycles",
            value: 0.2
        }
    );
    let m = Measured {
        serial: recorded("h200-2026-11-30-wave.json"),
        wave: recorded("h200-2026-11-30.json"),
        ceilings: ceilings(),
    };
    let e = onboard::draft(&s, &dir, None, &m).unwrap_err();
    assert_eq!(
        e,
        OnboardError::WrongMode {
            expected: Mode::Serial,
            measured: Mode::Wave
        }
    );
    let mut m = measured();
    m.wave.variants[0]
        .output_problems
        .push("repeat 0: 1 of 256 output elements never written".into());
    let e = onboard::draft(&s, &dir, None, &m).unwrap_err();
    assert!(
        matches!(&e, OnboardError::Refused(accprobe::bless::BlessError::Invalid { reasons }) if reasons.iter().any(|r| r.contains("never written"))),
        "{e:?}"
    );
}

#[test]
fn onboarding_refuses_a_gpu_a_profile_already_names() {
    let gpu = measured().wave.environment.unwrap().identity();
    let (_tmp, dir) = without_h200();
    let (mut profiles, _) = catalog::load_dir(&dir);
    onboard::refuse_named(&profiles, &gpu).unwrap();
    profiles.push(catalog::load(&root().join("expectations/h200.yaml")).unwrap());
    let e = onboard::refuse_named(&profiles, &gpu)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("expectations/h200.yaml") && e.contains("already names GPU \"NVIDIA H200\""),
        "{e}"
    );
}

#[test]
fn a_wave_run_that_disagrees_makes_the_draft_serial() {
    let (_tmp, dir) = without_h200();
    let mut m = measured();
    crate::common::scale(&mut m.wave, "chain29_acc16_effective16", 0.98);
    let d = onboard::draft(&study(&dir), &dir, None, &m).unwrap();
    assert_eq!(d.mode, Mode::Serial);
    assert!(
        d.mode_why.contains("chain29_acc16_effective16"),
        "{}",
        d.mode_why
    );
    assert_eq!(
        d.recorded_file,
        dir.join("recorded/h200-2026-11-30-serial.json")
    );
    d.write_unless_ci(|_| None).unwrap();
    let p = catalog::load(&d.profile_file).unwrap();
    assert_eq!(p.probe.mode, Mode::Serial);
    assert_eq!(p.recorded.unwrap().mode, Mode::Serial);
}

#[test]
fn a_slug_is_a_profile_name_and_the_hint_names_the_command_and_the_files() {
    assert_eq!(catalog::profile_name("NVIDIA H200"), "h200");
    assert_eq!(
        catalog::profile_name("NVIDIA GeForce RTX 4090"),
        "geforce-rtx-4090"
    );
    assert_eq!(
        catalog::profile_name("NVIDIA A100-SXM4-80GB"),
        "a100-sxm4-80gb"
    );
    assert_eq!(catalog::profile_name(" Tesla T4 "), "tesla-t4");
    let h = catalog::onboarding_hint(&accprobe::model::gpu::GpuIdentity {
        name: "NVIDIA A100-SXM4-80GB".into(),
        compute_capability: "8.0".into(),
    });
    assert!(h.contains("`cargo xtask onboard`"), "{h}");
    assert!(
        h.contains("expectations/a100-sxm4-80gb.yaml")
            && h.contains("expectations/baselines/a100-sxm4-80gb.yaml"),
        "{h}"
    );
}
