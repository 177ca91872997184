//! `cargo xtask gate`: every verdict of a profile on a results file, on any machine.

use crate::paths::find_profile;
use accprobe::model::results::RunResults;
use accprobe::report;
use accprobe::text::Shown;
use accprobe::verdict::{self, cases::cases, Outcome};
use std::path::Path;

/// Prints every case's verdict; `Err("")` when any failed (already printed).
pub fn run(dir: &Path, results: &Path, profile: Option<&str>) -> crate::Done {
    let r = RunResults::load(results).map_err(|e| e.to_string())?;
    let p = find_profile(dir, profile.unwrap_or(&r.profile))?;
    verdict::comparable(&p, &r).map_err(|e| format!("{}: {e}", results.shown()))?;
    say!(
        "{}",
        report::table(&r, &p.probe.chains, &p.probe.accumulators)
    );
    let mut failed = 0;
    let mut errors = 0;
    let picks = accprobe::policy_gate::ask(&p, Some(&r));
    for case in cases(&p) {
        let (tag, text) = match verdict::judge_with(&case, &p, &r, picks.as_ref()).outcome {
            Outcome::Pass(d) => ("ok     ", d),
            Outcome::Fail(m) => {
                failed += 1;
                ("FAILED ", m.text())
            }
            Outcome::Skipped(reason) => ("skipped", reason),
            Outcome::Error(cause) => {
                errors += 1;
                ("ERROR  ", cause)
            }
            Outcome::KnownDeviation { reason, detail } => {
                ("ignored", format!("known deviation: {reason} ({detail})"))
            }
        };
        say!("{tag} {}: {text}", case.name);
    }
    say!(
        "\ngate: {} against profile {:?}: {}",
        results.shown(),
        p.name,
        match (failed, errors) {
            (0, 0) => "passed".to_string(),
            (f, 0) => format!("{f} failed"),
            (f, e) =>
                format!("{f} failed, {e} not judged (the GPU was not ours while it measured)"),
        }
    );
    if failed == 0 && errors == 0 {
        Ok(())
    } else {
        Err(crate::Failure::Printed)
    }
}

#[cfg(test)]
mod tests {
    //! On the committed results files, no GPU needed.
    use crate::testing::{committed, expectations};
    use crate::{gate, Failure};

    #[test]
    fn gate_passes_the_committed_run_and_fails_a_slower_one() {
        gate::run(&expectations(), &committed(), None).unwrap();
        let mut r = accprobe::model::results::RunResults::load(&committed()).unwrap();
        let v = r
            .variants
            .iter_mut()
            .find(|v| v.name == "chain13_acc2_effective2")
            .unwrap();
        // 3% slower, consistently: every sample, and the summary and mean they give (a
        // results file whose summary contradicts its samples is refused before any verdict).
        for x in v.samples.iter_mut().flatten() {
            *x = *x * 97 / 100;
        }
        let fresh =
            accprobe::model::results::VariantResult::measured(v.variant(), v.samples.clone());
        v.summary = fresh.summary;
        v.mean_progress = fresh.mean_progress;
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let slower = dir.join("slower.json");
        std::fs::write(&slower, r.to_json()).unwrap();
        assert_eq!(
            gate::run(&expectations(), &slower, None),
            Err(Failure::Printed),
            "failures are printed, not returned"
        );
        let e = gate::run(&expectations(), &dir.join("missing.json"), None).unwrap_err();
        assert!(
            e.to_string().contains("missing.json") && e.to_string().contains("cannot read results"),
            "{e}"
        );
    }
}
