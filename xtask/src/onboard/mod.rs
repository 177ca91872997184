//! `cargo xtask onboard`: a GPU no profile names, onboarded in one reviewed step. It
//! measures the study's probe with its contexts serially and as a wave, then `--runs`
//! more times in the mode the draft chooses, and the GPU's ceilings (through
//! `measure::session`, a session per run, under the device's lock), drafts the profile,
//! its baselines and its recorded results (`accprobe::onboard`), writes them (never over a file, never
//! under CI) and prints what the reviewer should look at. `cargo xtask ceilings`
//! measures and prints the ceilings alone (`ceilings`); `onboard --compare` judges a
//! draft against a hand-written profile (`compare`).

use crate::gpu::{default_cache, env_line, session_on, write_json};
use accprobe::catalog;
use accprobe::expectations::profile::Profile;
use accprobe::measure::device;
use accprobe::model::ceilings::Ceilings;
use accprobe::model::results::RunResults;
use accprobe::model::settings::Mode;
use accprobe::onboard::{self, Draft, Measured};
use accprobe::output::write_atomic;

mod ceilings;
mod compare;

pub use ceilings::ceilings;
pub use compare::compare;
use std::path::Path;

impl From<onboard::OnboardError> for crate::Failure {
    fn from(e: onboard::OnboardError) -> crate::Failure {
        crate::Failure::Message(e.to_string())
    }
}

/// The study's profile in `dir`, which a draft starts from.
fn study(dir: &Path) -> Result<Profile, crate::Failure> {
    crate::paths::find_profile(dir, catalog::DOCUMENTED).map_err(Into::into)
}

/// Refused when profile `name`'s profile or baselines file exists in `dir`, before
/// anything is measured.
fn refuse_taken(dir: &Path, name: &str) -> Result<(), crate::Failure> {
    onboard::refuse_existing(&onboard::profile_files(dir, name)).map_err(|e| e.to_string().into())
}

/// `cargo xtask onboard`: measure, draft, write, review. `out` keeps the measurements;
/// `runs` more runs are measured in the chosen mode, for each variant's steadiness.
pub fn run(dir: &Path, name: Option<&str>, runs: usize, out: &Path) -> crate::Done {
    accprobe::output::refuse_under_ci().map_err(|e| e.to_string())?;
    if let Some(n) = name {
        refuse_taken(dir, n)?;
    }
    let study = study(dir)?;
    let device = device::detect()?;
    let gpu = device.identity.clone();
    let (profiles, _) = catalog::load_dir(dir);
    onboard::refuse_named(&profiles, &gpu).map_err(|e| e.to_string())?;
    let name = name.map_or_else(
        || accprobe::catalog::profile_name(&gpu.name),
        str::to_string,
    );
    refuse_taken(dir, &name)?;
    let measuring = onboard::contexts::measuring(&study, &name);
    let why = format!(
        "onboarding {:?} (compute capability {}) as profile {name:?}: the study's probe and its contexts",
        gpu.name, gpu.compute_capability
    );
    let bar = crate::progress::steps(3 + runs as u64);
    let mut extra = Vec::new();
    let measured = (|| -> Result<Measured, crate::Failure> {
        // One session per run, on the measuring profile as it is, each in its mode.
        let on = |device, mode| {
            session_on(
                device,
                measuring.clone(),
                why.clone(),
                Some(default_cache()),
            )
            .in_mode(Some(mode))
        };
        bar.set_message("serial run");
        let serial = on(device, Mode::Serial).measure_all()?;
        bar.inc(1);
        bar.set_message("wave run");
        let wave_session = on(device::detect()?, Mode::Wave);
        let wave = wave_session.measure_all()?;
        bar.inc(1);
        let (mode, _) = onboard::chosen_mode(&serial, &wave)?;
        for i in 0..runs {
            bar.set_message(format!("{mode:?} run {}/{runs}", i + 1));
            extra.push(on(device::detect()?, mode).measure_all()?);
            bar.inc(1);
        }
        bar.set_message("ceilings");
        let ceilings = wave_session.measure_ceilings()?;
        bar.inc(1);
        Ok(Measured {
            serial,
            wave,
            ceilings,
        })
    })();
    bar.finish_and_clear();
    let measured = measured?;
    keep(out, &name, &measured, &extra)?;
    onboard_measured(dir, &study, &name, &measured, &extra, |v| {
        std::env::var(v).ok()
    })
}

/// Where the measurements are kept: `out/<name>-serial.json`, `-wave.json`, each extra
/// run as `-<mode>-<i>.json` and `-ceilings.json`, whatever happens to the draft.
fn keep(out: &Path, name: &str, m: &Measured, extra: &[RunResults]) -> crate::Done {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut files = vec![
        (out.join(format!("{name}-serial.json")), m.serial.to_json()),
        (out.join(format!("{name}-wave.json")), m.wave.to_json()),
    ];
    for (i, r) in extra.iter().enumerate() {
        let mode = r.mode.name();
        files.push((
            out.join(format!("{name}-{mode}-{}.json", i + 1)),
            r.to_json(),
        ));
    }
    for (file, text) in files {
        write_atomic(&file, &text).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    }
    write_json(&out.join(format!("{name}-ceilings.json")), &m.ceilings)?;
    say!("{}", env_line(&m.serial));
    say!("measurements: {}", out.display());
    Ok(())
}

/// Drafts and writes profile `name` from `m` and the `extra` runs, then prints the
/// review; `var` reads the environment for the CI refusal.
pub fn onboard_measured(
    dir: &Path,
    study: &Profile,
    name: &str,
    m: &Measured,
    extra: &[RunResults],
    var: impl Fn(&str) -> Option<String>,
) -> crate::Done {
    let d = onboard::draft_with(study, dir, Some(name), m, extra)?;
    d.write_unless_ci(var).map_err(|e| e.to_string())?;
    for line in review(&d, study) {
        say!("{line}");
    }
    Ok(())
}

/// What the reviewer looks at, one line each: the GPU, the mode and why, each known
/// deviation with its reason, the ceilings against the study's typed-in figures, the
/// files written and the next commands.
pub fn review(d: &Draft, study: &Profile) -> Vec<String> {
    let p = &d.profile;
    let mut out = vec![format!(
        "drafted profile {:?} for {} (compute capability {}): review it before committing",
        d.name,
        p.matches.gpu_names.join(", "),
        p.matches.compute_capabilities.join(", ")
    )];
    out.push(format!("mode: {} ({})", d.mode.name(), d.mode_why));
    if d.deviations.is_empty() {
        out.push("known deviations: none, every case of the study holds".into());
    } else {
        out.push(format!(
            "known deviations ({}), each reported ignored and failing once it holds again:",
            d.deviations.len()
        ));
        for dev in &d.deviations {
            out.push(format!("  {}: {}", dev.case, dev.reason));
        }
    }
    if !d.mode_dependent.is_empty() {
        out.push(format!(
            "  holds in one mode only (look at these twice): {}",
            d.mode_dependent.join(", ")
        ));
    }
    if !d.unsteady.is_empty() {
        let cases: Vec<String> = d
            .unsteady
            .iter()
            .map(|(c, k)| format!("{c} (fails in {k} of {})", d.runs))
            .collect();
        out.push(format!(
            "  UNSTEADY, failing in some runs of the chosen mode and holding in others (neither a deviation nor a pass keeps them green; measure again or widen by hand): {}",
            cases.join(", ")
        ));
    }
    out.extend(baselines_lines(d));
    out.extend(ceilings_lines(&d.ceilings, p, study));
    out.push("written:".into());
    for f in d.files() {
        out.push(format!("  {}", f.display()));
    }
    out.push("next: run the suite with the draft, then commit the three files for review:".into());
    out.push("  cargo test --release --test probe".into());
    out.push(format!("  git add {} && git commit", d.files_listed(" ")));
    out.push(format!(
        "  (the compile-only digests: add `baselines: baselines/{}-compile.yaml` to compile_only and run `cargo xtask toolchains --profile {} --bless` where ci/toolchains.sh installed the toolchains)",
        d.name, d.name
    ));
    out
}

/// What the draft's baselines tolerate: the run's reach, or each wider tolerance.
fn baselines_lines(d: &Draft) -> Vec<String> {
    let mut out = Vec::new();
    if d.wider.is_empty() {
        out.push(format!(
            "baselines: every variant within {:.1}% of its baseline in all {} runs measured ({} in the chosen mode, 1 in the other): no wider tolerance",
            onboard::steadiness::reach(onboard::BASELINES_TOLERANCE) * 100.0,
            d.runs + 1,
            d.runs
        ));
    } else {
        out.push(format!(
            "wider baselines ({}), variants that moved more than {:.1}% from their baseline in the {} runs measured: each is what the gate no longer sees of it:",
            d.wider.len(),
            onboard::steadiness::reach(onboard::BASELINES_TOLERANCE) * 100.0,
            d.runs + 1
        ));
        for w in &d.wider {
            out.push(format!(
                "  {}: ±{:.1}% ({})",
                w.variant,
                w.tolerance * 100.0,
                w.reason
            ));
        }
    }
    out
}

/// The measured ceilings, the figures the draft holds, and the study's typed-in ones.
fn ceilings_lines(c: &Ceilings, p: &Profile, study: &Profile) -> Vec<String> {
    let mut out = vec![format!("ceilings measured: {}", c.summary())];
    if let Some(v) = p.validity {
        out.push(format!(
            "  validity: ffma_latency_cycles {}, schedulers_per_sm {} (rounded)",
            v.ffma_latency_cycles, v.schedulers_per_sm
        ));
        out.push(format!("  {}", onboard::ceilings::against_published(c, &v)));
        if let Some(s) = study.validity {
            let same = (s.ffma_latency_cycles, s.schedulers_per_sm)
                == (v.ffma_latency_cycles, v.schedulers_per_sm);
            out.push(format!(
                "  profile {:?} types in ffma_latency_cycles {}, schedulers_per_sm {} (Hopper's): {}",
                study.name,
                s.ffma_latency_cycles,
                s.schedulers_per_sm,
                if same {
                    "the same"
                } else {
                    "DIFFERENT: the draft's are this GPU's"
                }
            ));
        }
    }
    out
}

/// The default folder onboarding keeps its measurements in.
pub fn default_out() -> &'static str {
    "target/accprobe/onboard"
}

#[cfg(test)]
mod tests {
    //! On the committed H200 runs, treated as those of a GPU no profile names.
    use super::*;
    use crate::testing::expectations;
    use std::path::PathBuf;

    fn without_h200() -> (tempfile::TempDir, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("expectations");
        for f in ["documented.yaml", "policies/study.yaml"] {
            let to = dir.join(f);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::copy(expectations().join(f), to).unwrap();
        }
        (tmp, dir)
    }

    fn measured() -> Measured {
        let r = |f: &str| RunResults::load(&expectations().join("recorded").join(f)).unwrap();
        Measured {
            // The H200's recorded runs with the contexts, of the kernel with phased starts.
            serial: r("h200-2026-12-04-contexts-serial.json"),
            wave: r("h200-2026-12-04-contexts-wave.json"),
            // Synthetic, not a measurement: the figures h200.yaml types in.
            ceilings: serde_json::from_str(
                &std::fs::read_to_string(
                    crate::testing::root().join("tests/data/onboard/synthetic-ceilings.json"),
                )
                .unwrap(),
            )
            .unwrap(),
        }
    }

    #[test]
    fn onboarding_writes_the_draft_and_the_review_names_what_to_look_at() {
        let (_tmp, dir) = without_h200();
        let s = study(&dir).unwrap();
        onboard_measured(&dir, &s, "h200", &measured(), &[], |_| None).unwrap();
        let d = onboard::draft(&s, &dir, Some("h200"), &measured()).unwrap();
        let text = review(&d, &s).join("\n");
        for want in [
            "drafted profile \"h200\" for NVIDIA H200 (compute capability 9.0)",
            "mode: wave (wave and serial medians agree",
            "known deviations (12)",
            "  policy::study::chain13_w16: the study's policy picks acc2 at N=13 (90,661.5), 95.57% of the best (acc8: 94,863.5) by the blessed progress",
            "  invariant::acc2_is_peak::chain13: on the H200 acc8 and acc16 reach 149,253.0",
            "  policy::study::chain13: the study's policy picks acc2",
            "validity: ffma_latency_cycles 4, schedulers_per_sm 4",
            "(4 warp FFMAs per cycle) and 4 warp schedulers; measured 4.00 warp FFMAs per cycle: the same",
            "types in ffma_latency_cycles 4, schedulers_per_sm 4 (Hopper's): the same",
            "the 60 variants of the other contexts are not judged",
            "baselines: every variant within 0.4% of its baseline in all 2 runs measured (1 in the chosen mode, 1 in the other): no wider tolerance",
            "h200.yaml",
            "baselines/h200.yaml",
            "recorded/h200-2026-12-04-wave.json",
            "cargo test --release --test probe",
            "git add",
        ] {
            assert!(text.contains(want), "{want:?} not in:\n{text}");
        }
        // The written draft, which measures the contexts too, agrees with the hand-written
        // profile: the same known deviations, the baselines within their tolerances.
        let hand = catalog::load(&expectations().join("h200.yaml")).unwrap();
        let drafted = catalog::load(&dir.join("h200.yaml")).unwrap();
        let (lines, agree) = compare::comparison(&drafted, &hand);
        assert!(agree, "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l == "known deviations: the same 12 cases"),
            "{lines:?}"
        );
    }

    #[test]
    fn a_second_onboarding_refuses_naming_the_file_and_changes_nothing() {
        let (_tmp, dir) = without_h200();
        let s = study(&dir).unwrap();
        onboard_measured(&dir, &s, "h200", &measured(), &[], |_| None).unwrap();
        let before = std::fs::read(dir.join("h200.yaml")).unwrap();
        let e = refuse_taken(&dir, "h200").unwrap_err().to_string();
        assert!(
            e.contains(&dir.join("h200.yaml").display().to_string())
                && e.contains("never overwrites"),
            "{e}"
        );
        let e = onboard_measured(&dir, &s, "h200", &measured(), &[], |_| None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("never overwrites"), "{e}");
        assert_eq!(std::fs::read(dir.join("h200.yaml")).unwrap(), before);
    }
}
