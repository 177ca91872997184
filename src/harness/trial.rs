//! A case as libtest-mimic runs it: a body that says how it ended, a panic taken as a
//! failure, and every end recorded for JUnit; and a trial as planned, with why it is
//! ignored at list time when it is.

use super::recorder::{Recorder, Skip};
use crate::report::junit::{self, CaseRecord, Ended, Status};
use crate::text::clean;
use crate::verdict::{self, Outcome};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// What a case the busy GPU kept from being judged says first.
pub(crate) const NOT_JUDGED: &str = "not judged: see gpu::busy";

/// How a case body ended: JUnit's view of it (status, message, kind of failure or skip),
/// for the closing summary why it was ignored, and how long it waited for the device's
/// shared measurement (the run-level `gpu::measure` case's time, not its own).
pub(crate) struct Ending {
    ended: Ended,
    skip: Option<Skip>,
    waited: Duration,
}

impl From<Ended> for Ending {
    fn from(ended: Ended) -> Ending {
        Ending {
            ended,
            skip: None,
            waited: Duration::ZERO,
        }
    }
}

impl From<(Status, String)> for Ending {
    fn from(e: (Status, String)) -> Ending {
        Ended::from(e).into()
    }
}

impl Ending {
    pub(crate) fn skipped(message: String, kind: &'static str, skip: Skip) -> Ending {
        Ending {
            ended: Ended::new(Status::Ignored, message, kind),
            skip: Some(skip),
            waited: Duration::ZERO,
        }
    }

    /// Not judged, the GPU not ours while it was measured: skipped, pointing at
    /// `gpu::busy`, with the cause in the body.
    pub(crate) fn busy(cause: String) -> Ending {
        let skip = Skip::Busy(cause);
        Ending::skipped(skip_reason(&skip), skip.kind(), skip)
    }

    /// This ending, `waited` of its time spent waiting for the shared measurement.
    pub(crate) fn after_waiting(mut self, waited: Duration) -> Ending {
        self.waited = waited;
        self
    }

    /// A verdict in JUnit's terms, with why it was ignored.
    pub(crate) fn of_verdict(verdict: verdict::Verdict) -> Ending {
        let skip = match &verdict.outcome {
            Outcome::KnownDeviation { .. } => Some(Skip::KnownDeviation),
            Outcome::Skipped(reason) => Some(Skip::NotJudged(reason.clone())),
            _ => None,
        };
        Ending {
            ended: junit::ended(verdict),
            skip,
            waited: Duration::ZERO,
        }
    }
}

/// A trial whose body returns how it ended; panics become failures, and every end is
/// recorded for JUnit, with the time of its own work (its wait for the shared
/// measurement left out).
pub(crate) fn trial<R: Into<Ending>>(
    recorder: &Arc<Recorder>,
    suite: String,
    name: String,
    body: impl FnOnce() -> R + Send + 'static,
) -> Trial {
    let recorder = recorder.clone();
    Trial::ignorable_test(name.clone(), move || {
        let started = SystemTime::now();
        let start = Instant::now();
        let ending = catch_unwind(AssertUnwindSafe(|| body().into())).unwrap_or_else(|p| {
            let text = crate::error::panic_text(p.as_ref());
            Ended::new(Status::Failed, format!("panicked: {text}"), "panic").into()
        });
        let Ending {
            ended:
                Ended {
                    status,
                    message,
                    failure,
                    kind,
                },
            skip,
            waited,
        } = ending;
        let case = CaseRecord {
            suite,
            name,
            status: status.clone(),
            message,
            failure,
            duration: start.elapsed().saturating_sub(waited),
            kind: kind.map(str::to_string),
            // Its own work began once the wait was over.
            started: started + waited,
        };
        // What libtest prints comes from files (a profile's reason, a results file's
        // GPU name): through the one sanitiser, never a raw control character.
        let printed = clean(&case.text()).into_owned();
        recorder.push(case, skip);
        match status {
            Status::Passed => Ok(Completion::Completed),
            Status::Ignored => Ok(Completion::ignored_with(printed)),
            // libtest knows no error: it fails, with the cause first ("GPU busy: ...");
            // the JUnit file has it as an <error>.
            Status::Failed | Status::Error => Err(Failed::from(printed)),
        }
    })
}

/// A planned trial: the trial, its suite, and why it is ignored at list time.
pub(crate) struct Planned {
    pub(crate) trial: Trial,
    pub(crate) suite: String,
    pub(crate) ignored: Option<(String, Skip)>,
}

impl Planned {
    /// A trial that runs.
    pub(crate) fn runs(trial: Trial, suite: &str) -> Planned {
        Planned {
            trial,
            suite: suite.to_string(),
            ignored: None,
        }
    }

    /// A trial ignored at list time, for `skip`.
    pub(crate) fn ignored(trial: Trial, suite: &str, skip: Skip) -> Planned {
        Planned {
            trial: trial.with_ignored_flag(true),
            suite: suite.to_string(),
            ignored: Some((skip_reason(&skip), skip)),
        }
    }
}

impl Planned {
    /// The trial libtest runs under `args`. One ignored at list time that `args` does not
    /// run (no `--ignored`, no `--include-ignored`) says its reason on its line, as a case
    /// ignored once it ran does: libtest-mimic prints a bare `ignored` for a trial flagged
    /// ignored, so it runs unflagged and ends ignored with the reason, having done nothing
    /// else. The plan has recorded it already ([`super::plan::Plan::record`]); `--list`
    /// keeps the flag, so that `--list --ignored` and nextest see it ignored.
    pub(crate) fn into_trial(self, args: &Arguments) -> Trial {
        match self.ignored {
            Some((reason, _)) if args.is_ignored(&self.trial) => {
                let printed = clean(&reason).into_owned();
                Trial::ignorable_test(self.trial.name().to_string(), move || {
                    Ok(Completion::ignored_with(printed))
                })
                .with_kind(self.trial.kind().to_string())
            }
            _ => self.trial,
        }
    }
}

/// What a case ignored for `skip` says.
pub(crate) fn skip_reason(skip: &Skip) -> String {
    match skip {
        Skip::NoGpu(r)
        | Skip::NoDisassembler(r)
        | Skip::NoToolchain(r)
        | Skip::NotJudged(r)
        | Skip::ToolchainNotInstalled { reason: r, .. } => r.clone(),
        Skip::KnownDeviation => "known deviation".into(),
        Skip::Interrupted(s) => format!("interrupted by {s}"),
        Skip::Busy(cause) => format!("{NOT_JUDGED}\n{cause}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::junit::SuiteInfo;

    /// Runs `trials` one at a time as libtest-mimic does, with what it prints in a log file
    /// of its own: the conclusion and that text.
    fn run_logged(trials: Vec<libtest_mimic::Trial>) -> (libtest_mimic::Conclusion, String) {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("libtest.log");
        let args = Arguments::from_iter([
            "t",
            "--test-threads",
            "1",
            "--logfile",
            log.to_str().unwrap(),
        ]);
        let conclusion = libtest_mimic::run(&args, trials);
        (
            conclusion,
            std::fs::read_to_string(&log).unwrap_or_default(),
        )
    }

    #[test]
    fn a_panicking_case_is_recorded_as_failed_and_the_next_case_still_runs() {
        let recorder = Arc::new(Recorder::new(None));
        let trials = vec![
            trial(
                &recorder,
                "s".into(),
                "boom".into(),
                || -> (Status, String) { panic!("kernel exploded") },
            ),
            trial(&recorder, "s".into(), "after".into(), || {
                (Status::Passed, "fine".to_string())
            }),
        ];
        let (conclusion, _) = run_logged(trials);
        assert_eq!((conclusion.num_failed, conclusion.num_passed), (1, 1));
        let cases = recorder.cases();
        assert_eq!(cases[0].status, Status::Failed);
        assert_eq!(cases[0].message, "panicked: kernel exploded");
        assert_eq!(cases[1].status, Status::Passed);
        let xml = junit::junit(
            &[SuiteInfo {
                name: "s".into(),
                ..Default::default()
            }],
            &cases,
        );
        assert!(xml.contains("panicked: kernel exploded"), "{xml}");
        assert!(xml.contains("type=\"panic\""), "{xml}");
    }

    #[test]
    fn a_case_time_leaves_out_its_wait_for_the_shared_measurement() {
        let recorder = Arc::new(Recorder::new(None));
        let hour = Duration::from_secs(3600);
        let before = SystemTime::now();
        let trials = vec![trial(&recorder, "s".into(), "waited".into(), move || {
            Ending::from((Status::Passed, String::new())).after_waiting(hour)
        })];
        let (conclusion, _) = run_logged(trials);
        assert_eq!(conclusion.num_passed, 1);
        let c = &recorder.cases()[0];
        assert_eq!(c.duration, Duration::ZERO, "the wait is not its own work");
        assert!(
            c.started >= before + hour,
            "its own work began after the wait"
        );
    }

    #[test]
    fn what_libtest_prints_of_a_message_has_no_raw_control_character() {
        // A known deviation's reason from a profile, a GPU name from a results file.
        let bad = "reason \u{1b}[2J\u{fffe} from a file";
        let recorder = Arc::new(Recorder::new(None));
        let trials = vec![
            trial(&recorder, "s".into(), "ignored".into(), move || {
                Ending::skipped(bad.to_string(), "known-deviation", Skip::KnownDeviation)
            }),
            trial(&recorder, "s".into(), "failed".into(), move || {
                (Status::Failed, bad.to_string())
            }),
        ];
        let (conclusion, printed) = run_logged(trials);
        assert_eq!((conclusion.num_failed, conclusion.num_ignored), (1, 1));
        assert!(printed.contains("reason "), "{printed}");
        assert!(
            !printed.contains('\u{1b}') && !printed.contains('\u{fffe}'),
            "{printed:?}"
        );
    }
}
