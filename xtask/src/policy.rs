//! `cargo xtask policy compare`: two policies side by side on one results file, context by
//! context: each one's pick, the best K, the loss of each pick against it, and where the
//! second policy helps or hurts, or where the two cannot be compared (docs/policies.md).
//! Exit 1 when B hurts anywhere beyond the profile's `policy_gate.tolerance`, else 3 when a
//! context cannot be compared, else 0.

use crate::paths::find_profile;
use accprobe::expectations::policy::Policy;
use accprobe::expectations::policy_error::PolicyError;
use accprobe::expectations::policy_source::{
    Picks, PolicyCommand, PolicyContext, PolicySource, Program, DEFAULT_TIME_LIMIT,
};
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::policy_gate::{ask_source, Measured};
use accprobe::text::Shown;
use accprobe::verdict::{self, cases::policy_contexts, Standing};
use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use std::path::Path;

/// `--policy`: a policy file (`.yaml`/`.yml`), else a program and its arguments, split on
/// whitespace (`python3 examples/policies/study.py`). A program with a `/` is relative to
/// the working directory, a bare name is looked up on `PATH`; either runs in the working
/// directory, asked about the profile's contexts with its gate's probe context.
pub fn source(spec: &str, profile: &Profile, cwd: &Path) -> Result<PolicySource, SourceError> {
    let is_yaml = [".yaml", ".yml"].iter().any(|e| spec.ends_with(e));
    if is_yaml {
        return Ok(PolicySource::File(Policy::load(&cwd.join(spec))?));
    }
    let mut words = spec.split_whitespace();
    let Some(first) = words.next() else {
        return Err(SourceError::Empty);
    };
    let gate = profile
        .policy_gate
        .as_ref()
        .ok_or_else(|| SourceError::NoGate {
            profile: profile.name.clone(),
        })?;
    let program = if first.contains('/') {
        Program::InFolder(cwd.join(first))
    } else {
        Program::OnPath(first.to_string())
    };
    Ok(PolicySource::Command(PolicyCommand {
        name: spec.to_string(),
        program,
        args: words.map(str::to_string).collect(),
        dir: cwd.to_path_buf(),
        time_limit: DEFAULT_TIME_LIMIT,
        probe_context: gate.source.probe_context(),
    }))
}

/// Why a `--policy` names no policy to compare.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The policy file does not load (the error names its file, line and column).
    #[error(transparent)]
    Load(#[from] accprobe::Error),
    #[error("--policy is empty: expected a policy file or a command")]
    Empty,
    /// A program is asked with the gate's probe context, which this profile lacks.
    #[error("profile {profile:?} has no policy_gate: its probe context is what a policy program is asked about")]
    NoGate { profile: String },
}

impl From<SourceError> for crate::Failure {
    fn from(e: SourceError) -> crate::Failure {
        crate::Failure::Message(e.to_string())
    }
}

/// One context of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub context: String,
    pub chain: u32,
    /// Each policy's pick and where it stands; `Err` with the K it picked that the
    /// results do not hold.
    pub a: Result<Standing, u32>,
    pub b: Result<Standing, u32>,
}

/// What B does against A in one context.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Change {
    Same,
    /// B's pick over A's, relative: within the tolerance either way.
    Within(f64),
    Helps(f64),
    Hurts(f64),
    /// A pick (A's or B's) the results do not hold: nothing shows whether the change is
    /// safe. Counted apart from hurting, with an exit code of its own.
    Unmeasured,
}

impl Row {
    pub fn change(&self, tolerance: f64) -> Change {
        match (&self.a, &self.b) {
            (Ok(a), Ok(b)) if a.k == b.k => Change::Same,
            (Ok(a), Ok(b)) => {
                let d = b.progress / a.progress - 1.0;
                if d < -tolerance {
                    Change::Hurts(d)
                } else if d > tolerance {
                    Change::Helps(d)
                } else {
                    Change::Within(d)
                }
            }
            _ => Change::Unmeasured,
        }
    }
}

/// Both policies' picks in every context of `profile`, placed on `results`.
pub fn compare(
    profile: &Profile,
    results: &RunResults,
    a: &PolicySource,
    b: &PolicySource,
) -> Result<Vec<Row>, PolicyError> {
    let contexts = policy_contexts_for(profile, a, results);
    let measured = Measured::of(profile);
    let picks_a = placed(&contexts, results, &ask_source(a, &contexts, measured))?;
    let picks_b = placed(&contexts, results, &ask_source(b, &contexts, measured))?;
    Ok(contexts
        .iter()
        .zip(picks_a.into_iter().zip(picks_b))
        .map(|(c, (a, b))| Row {
            context: c.name.clone(),
            chain: c.accumulation.chain,
            a,
            b,
        })
        .collect())
}

/// Where each context's pick in `picks` stands on `results` (`Err(k)`: K `k` not
/// measured there), in the order of `contexts`; the policy's error when it gave none.
pub fn placed(
    contexts: &[PolicyContext],
    results: &RunResults,
    picks: &Picks,
) -> Result<Vec<Result<Standing, u32>>, PolicyError> {
    contexts
        .iter()
        .map(|c| {
            let k = picks.of(&c.name)?;
            let found = verdict::at_place(results, &c.place);
            Ok(verdict::standing(k, &found).map_err(|_| k))
        })
        .collect()
}

/// The profile's contexts; a profile without a gate is asked about with `a`'s probe
/// context (a policy file's own).
fn policy_contexts_for(
    profile: &Profile,
    a: &PolicySource,
    results: &RunResults,
) -> Vec<PolicyContext> {
    if profile.policy_gate.is_some() {
        return policy_contexts(profile, Some(results));
    }
    let mut p = profile.clone();
    p.policy_gate = Some(accprobe::expectations::profile::PolicyGate {
        source: a.clone(),
        tolerance: 0.0,
    });
    policy_contexts(&p, Some(results))
}

/// The comparison as a table, A and B named by `labels`.
pub fn table(rows: &[Row], labels: [&str; 2], tolerance: f64) -> String {
    let mut t = Table::new();
    let pick = |s: &Result<Standing, u32>| match s {
        Ok(s) => format!("acc{} {:.1}", s.k, s.progress),
        Err(k) => format!("acc{k} not measured"),
    };
    let loss = |s: &Result<Standing, u32>| match s {
        Ok(s) => format!("{:.2}%", s.loss() * 100.0),
        Err(_) => "?".into(),
    };
    t.load_style(UTF8_FULL_CONDENSED).set_header(vec![
        "context".to_string(),
        "best K".into(),
        format!("A: {}", labels[0].shown()),
        "A loss".into(),
        format!("B: {}", labels[1].shown()),
        "B loss".into(),
        "B against A".into(),
    ]);
    for r in rows {
        let best = r.a.as_ref().or(r.b.as_ref()).map_or_else(
            |_| "?".to_string(),
            |s| format!("acc{} {:.1}", s.best_k, s.best_progress),
        );
        let change = match r.change(tolerance) {
            Change::Same => "same pick".to_string(),
            Change::Within(d) => format!("within tolerance ({:+.2}%)", d * 100.0),
            Change::Helps(d) => format!("helps {:+.2}%", d * 100.0),
            Change::Hurts(d) => format!("HURTS {:+.2}%", d * 100.0),
            Change::Unmeasured => "cannot compare: a pick is not measured".into(),
        };
        t.add_row(vec![
            r.context.clone(),
            best,
            pick(&r.a),
            loss(&r.a),
            pick(&r.b),
            loss(&r.b),
            change,
        ]);
    }
    t.to_string()
}

/// The contexts where B hurts beyond `tolerance`, and those that cannot be compared (a
/// pick the results do not hold), in the order of `rows`.
pub fn tally(rows: &[Row], tolerance: f64) -> (Vec<&str>, Vec<&str>) {
    let of = |want: fn(Change) -> bool| -> Vec<&str> {
        rows.iter()
            .filter(|r| want(r.change(tolerance)))
            .map(|r| r.context.as_str())
            .collect()
    };
    (
        of(|c| matches!(c, Change::Hurts(_))),
        of(|c| c == Change::Unmeasured),
    )
}

/// The contexts of `names`, for the closing line: ` (a, b)`, or nothing.
fn listed(names: &[&str]) -> String {
    match names.is_empty() {
        true => String::new(),
        false => format!(" ({})", names.join(", ")),
    }
}

/// Prints the comparison; `Failure::Printed` (exit 1) when B hurts anywhere beyond the
/// tolerance, else `Failure::Incomparable` (exit 3) when a context cannot be compared (a
/// pick the results do not hold, or a policy that gave no picks).
pub fn run(dir: &Path, results: &Path, profile: Option<&str>, specs: &[String]) -> crate::Done {
    let [a_spec, b_spec] = specs else {
        return Err(format!("expected two --policy (A, then B), got {}", specs.len()).into());
    };
    let r = RunResults::load(results).map_err(|e| e.to_string())?;
    let p = find_profile(dir, profile.unwrap_or(&r.profile))?;
    verdict::comparable(&p, &r).map_err(|e| format!("{}: {e}", results.shown()))?;
    let cwd = std::env::current_dir().map_err(|e| format!("the working directory: {e}"))?;
    let a = source(a_spec, &p, &cwd)?;
    let b = source(b_spec, &p, &cwd)?;
    let tolerance = p.policy_gate.as_ref().map_or(0.0, |g| g.tolerance);
    let rows = match compare(&p, &r, &a, &b) {
        Ok(rows) => rows,
        Err(e) => {
            // A policy that gave no picks: nothing can be compared.
            warn!("error: {e}");
            return Err(crate::Failure::Incomparable);
        }
    };
    say!("{}", table(&rows, [a_spec, b_spec], tolerance));
    let (hurts, uncompared) = tally(&rows, tolerance);
    let helps = rows
        .iter()
        .filter(|r| matches!(r.change(tolerance), Change::Helps(_)))
        .count();
    say!(
        "\npolicy compare: {} contexts of {} (tolerance {:.2}%): B helps in {helps}, hurts in {}{}, cannot be compared in {}{}",
        rows.len(),
        results.shown(),
        tolerance * 100.0,
        hurts.len(),
        listed(&hurts),
        uncompared.len(),
        listed(&uncompared),
    );
    if !hurts.is_empty() {
        Err(crate::Failure::Printed)
    } else if !uncompared.is_empty() {
        Err(crate::Failure::Incomparable)
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{committed, expectations, root};

    fn h200() -> (Profile, RunResults) {
        let p = find_profile(&expectations(), "h200").unwrap();
        (p, RunResults::load(&committed()).unwrap())
    }

    /// The study policy with `from` replaced by `to`, written into `dir`.
    fn changed(dir: &Path, from: &str, to: &str) -> String {
        let text = std::fs::read_to_string(expectations().join("policies/study.yaml")).unwrap();
        assert!(text.contains(from));
        let file = dir.join("changed.yaml");
        std::fs::write(&file, text.replace(from, to)).unwrap();
        file.to_str().unwrap().to_string()
    }

    #[test]
    fn a_policy_spec_that_names_none_says_why_by_its_variant() {
        let (mut p, _) = h200();
        assert!(matches!(source("  ", &p, &root()), Err(SourceError::Empty)));
        let missing = source("no-such-policy.yaml", &p, &root()).unwrap_err();
        assert!(
            matches!(&missing, SourceError::Load(e) if e.file.as_deref() == Some(&*root().join("no-such-policy.yaml"))),
            "{missing:?}"
        );
        p.policy_gate = None;
        let e = source("python3 x.py", &p, &root()).unwrap_err();
        assert!(
            matches!(&e, SourceError::NoGate { profile } if *profile == p.name),
            "{e:?}"
        );
        assert!(e.to_string().contains("has no policy_gate"), "{e}");
    }

    #[test]
    fn a_changed_default_hurts_at_chain13_and_is_listed() {
        let dir = tempfile::tempdir().unwrap();
        let (p, r) = h200();
        let a = source("expectations/policies/study.yaml", &p, &root()).unwrap();
        let spec = changed(
            dir.path(),
            "default_accumulators: 2",
            "default_accumulators: 3",
        );
        let b = source(&spec, &p, &root()).unwrap();
        let rows = compare(&p, &r, &a, &b).unwrap();
        // The base chains, then each sink mode at each chain; the contexts the recorded
        // run predates are not asked about.
        let names: Vec<&str> = rows.iter().map(|r| r.context.as_str()).collect();
        assert_eq!(names[..3], ["chain7", "chain13", "chain29"]);
        assert_eq!(
            names[3..6],
            ["chain7_sinkB", "chain13_sinkB", "chain29_sinkB"]
        );
        assert_eq!(names.len(), 3 + 3 * p.probe.sink_modes.len(), "{names:?}");
        let at13 = &rows[1];
        assert_eq!(at13.a.unwrap().k, 2);
        assert_eq!(at13.b.unwrap().k, 3);
        assert!(matches!(at13.change(0.02), Change::Hurts(d) if (d * 100.0 + 2.82).abs() < 0.01));
        let text = table(&rows, ["study", "changed"], 0.02);
        assert!(
            text.contains("acc2 144926.0")
                && text.contains("acc3 140844.0")
                && text.contains("HURTS -2.82%")
                && text.contains("acc16 149253.0"),
            "{text}"
        );
    }

    #[test]
    fn a_better_default_helps_and_the_same_policy_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (p, r) = h200();
        let study = source("expectations/policies/study.yaml", &p, &root()).unwrap();
        let text = std::fs::read_to_string(expectations().join("policies/study.yaml")).unwrap();
        let file = dir.path().join("k5.yaml");
        std::fs::write(
            &file,
            text.replace("  accumulators: 4", "  accumulators: 7")
                .replace("default_accumulators: 2", "default_accumulators: 5"),
        )
        .unwrap();
        let k5 = source(file.to_str().unwrap(), &p, &root()).unwrap();
        let rows = compare(&p, &r, &study, &k5).unwrap();
        assert!(matches!(rows[1].change(0.02), Change::Helps(d) if d > 0.02));
        let same = compare(&p, &r, &study, &study).unwrap();
        assert!(same.iter().all(|r| r.change(0.02) == Change::Same));
        // The loss of a pick is against the best K of its chain.
        let l = same[1].a.unwrap().loss();
        assert!((l - (1.0 - 144926.0 / 149253.0)).abs() < 1e-9, "{l}");
    }

    #[test]
    fn the_command_exits_1_when_b_hurts_and_0_when_it_does_not() {
        let dir = tempfile::tempdir().unwrap();
        let study = expectations()
            .join("policies/study.yaml")
            .to_str()
            .unwrap()
            .to_string();
        let worse = changed(
            dir.path(),
            "default_accumulators: 2",
            "default_accumulators: 3",
        );
        let run_it = |specs: &[String]| run(&expectations(), &committed(), Some("h200"), specs);
        assert_eq!(
            run_it(&[study.clone(), worse.clone()]),
            Err(crate::Failure::Printed)
        );
        assert_eq!(run_it(&[worse, study.clone()]), Ok(()));
        assert!(
            matches!(run_it(&[study]), Err(crate::Failure::Message(m)) if m.contains("two --policy"))
        );
    }

    #[test]
    fn a_pick_not_measured_cannot_compare_exits_3_and_is_not_counted_as_hurting() {
        let dir = tempfile::tempdir().unwrap();
        let (p, r) = h200();
        let study = expectations()
            .join("policies/study.yaml")
            .to_str()
            .unwrap()
            .to_string();
        // The study policy with `edits`, in a file of its own.
        let text = std::fs::read_to_string(expectations().join("policies/study.yaml")).unwrap();
        let write = |name: &str, edits: &[(&str, &str)]| {
            let file = dir.path().join(name);
            let text = edits.iter().fold(text.clone(), |t, (a, b)| t.replace(a, b));
            std::fs::write(&file, text).unwrap();
            file.to_str().unwrap().to_string()
        };
        // K=6 is not among the H200's probe.accumulators: no context can be compared. (The
        // wide K, which no context of the run uses, must stay above the default.)
        let six = [
            ("default_accumulators: 2", "default_accumulators: 6"),
            ("  accumulators: 4", "  accumulators: 7"),
        ];
        let unmeasured = write("unmeasured.yaml", &six);
        let a = source(&study, &p, &root()).unwrap();
        let b = source(&unmeasured, &p, &root()).unwrap();
        let rows = compare(&p, &r, &a, &b).unwrap();
        assert!(rows.iter().all(|r| r.change(0.02) == Change::Unmeasured));
        let (hurts, uncompared) = tally(&rows, 0.02);
        assert_eq!((hurts.len(), uncompared.len()), (0, rows.len()));
        let run_it = |specs: &[String]| run(&expectations(), &committed(), Some("h200"), specs);
        assert_eq!(
            run_it(&[study.clone(), unmeasured]),
            Err(crate::Failure::Incomparable)
        );
        // Where B also hurts (K=1 up to chain 10, so at chain 7), the hurt decides: exit 1.
        let both = write(
            "both.yaml",
            &[
                six[0],
                six[1],
                ("short_chain_max: 4", "short_chain_max: 10"),
            ],
        );
        let rows = compare(&p, &r, &a, &source(&both, &p, &root()).unwrap()).unwrap();
        let (hurts, uncompared) = tally(&rows, 0.02);
        assert!(
            hurts.contains(&"chain7") && uncompared.contains(&"chain13"),
            "{hurts:?} {uncompared:?}"
        );
        assert!(!hurts.iter().any(|h| uncompared.contains(h)));
        assert_eq!(run_it(&[study.clone(), both]), Err(crate::Failure::Printed));
        // A policy that gives no picks at all (a program that fails): nothing is compared.
        assert_eq!(
            run_it(&[study, "false".into()]),
            Err(crate::Failure::Incomparable)
        );
    }

    #[test]
    fn a_policy_program_is_compared_like_a_file() {
        let has_python = accprobe::child::Job::new("python3", std::time::Duration::from_secs(60))
            .arg("--version")
            .run()
            .is_ok_and(|o| o.status.is_some_and(|s| s.success()));
        if !has_python {
            println!("skipped: python3 is not on PATH");
            return;
        }
        let (p, r) = h200();
        let file = source("expectations/policies/study.yaml", &p, &root()).unwrap();
        let program = source("python3 examples/policies/study.py", &p, &root()).unwrap();
        assert!(matches!(program, PolicySource::Command(_)));
        let rows = compare(&p, &r, &file, &program).unwrap();
        assert!(rows.iter().all(|r| r.change(0.02) == Change::Same));
        // A program that fails is an error, not a comparison.
        let e = compare(&p, &r, &file, &source("false", &p, &root()).unwrap()).unwrap_err();
        assert!(e.to_string().contains("exited with status 1"), "{e}");
        assert!(
            matches!(&e, PolicyError::Program(f) if matches!(f.fault, accprobe::expectations::policy_error::ProgramFault::Ended { status, .. } if status.code() == Some(1))),
            "{e:?}"
        );
    }
}
