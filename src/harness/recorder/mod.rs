//! The live JUnit recorder: every finished case is recorded, and the JUnit file on disk is
//! rewritten (atomically, at most every [`JUNIT_EVERY`]) so that an interrupted or killed
//! run leaves a complete file for what finished. Every such snapshot also holds one
//! failing `run::unfinished` case, so that a file the run never got to finish (a SIGKILL,
//! a second signal that ends the process at once) reads red to a CI; only the final write
//! of a completed run ([`Recorder::write`]) leaves it out. On a termination signal (see
//! [`crate::interrupt`]) the cases that had not finished are added as skipped ("not
//! finished: interrupted by SIGTERM") beside one failing `run::interrupted` case, and the
//! process exits 128 + the signal; before the cases are planned, the file holds that one
//! failing case.
//!
//! Under cargo-nextest (one process per case) each process writes its records to
//! `<run dir>/junit/<pid>.json`, and the JUnit file is rebuilt from all of the run's
//! records under `<run dir>/junit.lock`: it holds every case the run has finished so far,
//! never only the last process's.

use crate::output::write_atomic;
use crate::report::junit::{self, CaseRecord, Status, SuiteInfo};
use crate::sync::lock_ignoring_poison;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

mod merge;
use merge::{merge, ProcessPart};

/// Why a case was ignored, for the closing summary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub(crate) enum Skip {
    /// No usable GPU here: the reason.
    NoGpu(String),
    /// No SASS disassembler here, for a case that needs SASS: the reason.
    NoDisassembler(String),
    /// The NVRTC toolchain a compile-only case needs cannot be used here: the reason.
    NoToolchain(String),
    /// The NVRTC toolchain of `cases` compile-only cases is not installed and not
    /// required: one case stands for them all.
    ToolchainNotInstalled {
        toolchain: String,
        cases: usize,
        reason: String,
    },
    /// A known deviation (decided after measuring).
    KnownDeviation,
    /// The results cannot judge this case (no SASS, no launch timings or settings in
    /// recorded data, no baselines): the verdict's reason.
    NotJudged(String),
    /// The run was interrupted before the case finished.
    Interrupted(String),
    /// Not judged: the GPU was not ours while the case's variants were measured (other
    /// work on it, slowed clocks, or another process holding it): the cause, which the
    /// run-level `gpu::busy` case reports.
    Busy(String),
}

impl Skip {
    /// The JUnit `type` of a case skipped for this reason.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Skip::NoGpu(_) => "no-gpu",
            Skip::NoDisassembler(_) => "no-disassembler",
            Skip::NoToolchain(_) | Skip::ToolchainNotInstalled { .. } => "no-toolchain",
            Skip::KnownDeviation => "known-deviation",
            Skip::NotJudged(_) => "cannot-judge",
            Skip::Interrupted(_) => "interrupted",
            Skip::Busy(_) => "gpu-busy",
        }
    }
}

/// One finished case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) case: CaseRecord,
    pub(crate) skip: Option<Skip>,
}

/// Collects how each case ended, for the JUnit file.
#[derive(Default)]
pub(crate) struct Recorder {
    pub(crate) records: Mutex<Vec<Record>>,
    /// Where the JUnit file goes; `None` in unit tests.
    junit: Option<PathBuf>,
    /// Under nextest: the run's folder, where every process's records are merged.
    merge: Option<PathBuf>,
    suites: Mutex<Vec<SuiteInfo>>,
    /// (suite, case) of every case this process will run, for the interrupt report.
    expected: Mutex<Vec<(String, String)>>,
    /// Whether the cases are planned ([`Recorder::plan`]): an interrupt before has no
    /// case to list.
    planned: std::sync::atomic::AtomicBool,
    last_write: Mutex<Option<Instant>>,
    /// Set by [`Recorder::interrupt`]: from then on the record is final, so that a case
    /// finishing while the signal is handled can neither appear twice nor overwrite the
    /// interrupted file.
    closed: std::sync::atomic::AtomicBool,
    /// Set by [`Recorder::write`], the final write: a later snapshot would make the
    /// completed file red again.
    finished: std::sync::atomic::AtomicBool,
    started: Option<SystemTime>,
}

/// Which write of the JUnit file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    /// While the run goes on: with the failing [`UNFINISHED_CASE`].
    Snapshot,
    /// The run's own end: what finished, nothing more.
    Final,
    /// On a signal (or a failing stdout): the interrupted file, the last word.
    Interrupted,
}

/// How often, at most, the JUnit file is rewritten while cases finish, so that an
/// interrupted or killed run leaves a complete file for what ran.
pub(crate) const JUNIT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The recorder of the run in progress, for the interrupt handler.
pub(crate) static CURRENT: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);

/// One JUnit write at a time in the process, whichever recorder writes (the file lock is
/// per process), so that the interrupted file is the last one written.
static WRITING: Mutex<()> = Mutex::new(());

/// Set when the process has no JUnit file to write (`--list`): a signal then only ends it.
static NOTHING_TO_REPORT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that this process writes no JUnit file (`--list`), also when interrupted.
pub(crate) fn nothing_to_report() {
    NOTHING_TO_REPORT.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The suite and name of the case an interrupted run adds, failing.
pub const INTERRUPTED_SUITE: &str = "interrupted";
pub const INTERRUPTED_CASE: &str = "run::interrupted";
/// The failing case every snapshot written while the run goes on holds (in the suite
/// [`INTERRUPTED_SUITE`]), and the final write does not.
pub(crate) const UNFINISHED_CASE: &str = "run::unfinished";

/// The suite and name of the failing case a rebuilt JUnit file gets when a record of
/// the run cannot be read (its cases are missing).
pub(crate) const RECORDS_SUITE: &str = "records";
pub(crate) const RECORDS_CASE: &str = "run::records";

impl Recorder {
    /// Writes to `junit` (when given); under nextest, `merge` is the run's folder.
    pub(crate) fn new(junit: Option<PathBuf>) -> Recorder {
        Recorder {
            junit,
            started: Some(SystemTime::now()),
            ..Default::default()
        }
    }

    pub(crate) fn merging(mut self, run_dir: Option<PathBuf>) -> Recorder {
        self.merge = run_dir;
        self
    }

    pub(crate) fn push(&self, case: CaseRecord, skip: Option<Skip>) {
        {
            let mut records = lock_ignoring_poison(&self.records);
            if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            records.push(Record { case, skip });
        }
        let due = {
            let mut last = lock_ignoring_poison(&self.last_write);
            let due = last.is_none_or(|t| t.elapsed() >= JUNIT_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            let _ = self.snapshot();
        }
    }

    /// The suites of the JUnit file; after an interrupt the file is final and this does
    /// nothing.
    pub(crate) fn set_suites(&self, suites: Vec<SuiteInfo>) {
        let mut known = lock_ignoring_poison(&self.suites);
        if !self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            *known = suites;
        }
    }

    /// The plan, at once: the suites, the cases ignored at list time (recorded as
    /// finished) and the cases this process is about to run (on interruption, those not
    /// finished are reported as such). After an interrupt it does nothing: the file then
    /// says the run was interrupted before its cases were planned.
    pub(crate) fn plan(
        &self,
        suites: Vec<SuiteInfo>,
        ignored: Vec<Record>,
        expected: Vec<(String, String)>,
    ) {
        let mut records = lock_ignoring_poison(&self.records);
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        self.set_suites(suites);
        records.extend(ignored);
        *lock_ignoring_poison(&self.expected) = expected;
        self.planned
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The cases this process is about to run (the plan without suites or ignored cases).
    #[cfg(test)]
    pub(crate) fn expect(&self, cases: Vec<(String, String)>) {
        self.plan(Vec::new(), Vec::new(), cases);
    }

    /// The finished cases so far, with why each ignored one was.
    pub(crate) fn records(&self) -> Vec<Record> {
        lock_ignoring_poison(&self.records).clone()
    }

    /// Whether this process's records are one part of a run's (under nextest): then no
    /// process holds every case.
    pub(crate) fn merges(&self) -> bool {
        self.merge.is_some()
    }

    /// The finished cases so far.
    #[cfg(test)]
    pub(crate) fn cases(&self) -> Vec<CaseRecord> {
        lock_ignoring_poison(&self.records)
            .iter()
            .map(|r| r.case.clone())
            .collect()
    }

    /// Records every expected case that has not finished as skipped, interrupted by
    /// `signal`, and one failing case saying so; then writes the JUnit file. Before the
    /// plan, the failing case is all the file holds.
    pub(crate) fn interrupt(&self, signal: &str) -> std::io::Result<()> {
        let reason = format!("not finished: interrupted by {signal}");
        {
            let mut records = lock_ignoring_poison(&self.records);
            self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
            let planned = self.planned.load(std::sync::atomic::Ordering::SeqCst);
            let done: HashSet<(String, String)> = records
                .iter()
                .map(|r| (r.case.suite.clone(), r.case.name.clone()))
                .collect();
            let expected = lock_ignoring_poison(&self.expected).clone();
            let mut unfinished = 0;
            for (suite, name) in expected {
                if !done.contains(&(suite.clone(), name.clone())) {
                    unfinished += 1;
                    records.push(Record {
                        case: CaseRecord {
                            suite,
                            name,
                            status: Status::Ignored,
                            message: reason.clone(),
                            failure: None,
                            duration: std::time::Duration::ZERO,
                            kind: Some("interrupted".into()),
                            started: std::time::SystemTime::now(),
                        },
                        skip: Some(Skip::Interrupted(signal.to_string())),
                    });
                }
            }
            let finished = records.len() - unfinished;
            let message = if planned {
                interrupted_message(signal, finished, unfinished)
            } else {
                format!(
                    "the run was interrupted by {signal} before its cases were planned: \
                     no case ran; {NOT_GREEN}"
                )
            };
            records.push(Record {
                case: CaseRecord {
                    suite: INTERRUPTED_SUITE.into(),
                    name: INTERRUPTED_CASE.into(),
                    status: Status::Failed,
                    message,
                    failure: None,
                    duration: std::time::Duration::ZERO,
                    kind: Some("interrupted".into()),
                    started: std::time::SystemTime::now(),
                },
                skip: None,
            });
        }
        {
            let mut suites = lock_ignoring_poison(&self.suites);
            if !suites.iter().any(|s| s.name == INTERRUPTED_SUITE) {
                suites.push(SuiteInfo {
                    name: INTERRUPTED_SUITE.into(),
                    properties: vec![("signal".into(), signal.into())],
                    ..Default::default()
                });
            }
        }
        self.write_file(WriteKind::Interrupted)
    }

    /// Writes the JUnit file of the completed run, atomically (under nextest: with what
    /// the run's other processes finished): what finished, without the failing
    /// [`UNFINISHED_CASE`] of the snapshots. Later snapshots do nothing.
    pub(crate) fn write(&self) -> std::io::Result<()> {
        self.write_file(WriteKind::Final)
    }

    /// Writes the JUnit file for what has finished so far while the run goes on, with a
    /// failing [`UNFINISHED_CASE`]: a run that never gets to its final write leaves a red
    /// file. After the final write it does nothing.
    pub(crate) fn snapshot(&self) -> std::io::Result<()> {
        self.write_file(WriteKind::Snapshot)
    }

    fn write_file(&self, what: WriteKind) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(path) = &self.junit else {
            return Ok(());
        };
        let _one_at_a_time = lock_ignoring_poison(&WRITING);
        // Once a signal is taken the interrupted file is the last word.
        if (self.closed.load(SeqCst) || crate::interrupt::taken()) && what != WriteKind::Interrupted
        {
            return Ok(());
        }
        if what == WriteKind::Snapshot && self.finished.load(SeqCst) {
            return Ok(());
        }
        let mut suites = lock_ignoring_poison(&self.suites).clone();
        let mut records = lock_ignoring_poison(&self.records).clone();
        if what == WriteKind::Snapshot {
            records.push(unfinished(records.len()));
        } else if what == WriteKind::Final {
            self.finished.store(true, SeqCst);
        }
        // A case whose suite is not (yet) known still counts.
        for r in &records {
            if !suites.iter().any(|s| s.name == r.case.suite) {
                suites.push(SuiteInfo {
                    name: r.case.suite.clone(),
                    ..Default::default()
                });
            }
        }
        match &self.merge {
            None => {
                let cases: Vec<CaseRecord> = records.into_iter().map(|r| r.case).collect();
                write_atomic(path, &junit::junit(&suites, &cases))
            }
            Some(dir) => {
                let part = ProcessPart {
                    started: self.started.unwrap_or(SystemTime::UNIX_EPOCH),
                    pid: std::process::id(),
                    suites,
                    records,
                };
                merge(dir, path, &part)
            }
        }
    }
}

/// The failing case of a snapshot written while the run goes on, `finished` cases in.
fn unfinished(finished: usize) -> Record {
    Record {
        case: CaseRecord {
            suite: INTERRUPTED_SUITE.into(),
            name: UNFINISHED_CASE.into(),
            status: Status::Failed,
            message: format!(
                "the run has not finished: this file is a snapshot written while it runs \
                 ({finished} cases finished so far), which its final write replaces; a run \
                 that is over left it when it was killed or ended before that write"
            ),
            failure: None,
            duration: std::time::Duration::ZERO,
            kind: Some("unfinished".into()),
            started: SystemTime::now(),
        },
        skip: None,
    }
}

/// What the failing `run::interrupted` case says once the cases were planned: how many
/// finished and how many did not (the skipped ones are named only when there are some),
/// and why the run is not green although no case failed.
fn interrupted_message(signal: &str, finished: usize, unfinished: usize) -> String {
    let skipped = match unfinished {
        0 => String::new(),
        _ => ", reported skipped as not finished".to_string(),
    };
    format!(
        "the run was interrupted by {signal}: {finished} cases finished, {unfinished} did \
         not{skipped}; {NOT_GREEN}"
    )
}

/// Why an interrupted run is red, whenever the signal came.
const NOT_GREEN: &str = "the run is not green because it was stopped before its end, so its \
                         results, tables and closing summary may be missing";

/// On a termination signal: write the JUnit file with what finished and what did not
/// (before the plan: one failing `run::interrupted` case), then exit 128 + the signal
/// (see [`crate::interrupt`]: within `crate::interrupt::ACT_LIMIT` even when the file
/// cannot be written, and at once on a second signal). A compile worker and `--list`
/// write nothing. Call it first in `main`, before the process starts any thread.
pub fn install_interrupt_handler() {
    crate::interrupt::install("accprobe", |name| {
        if writes_nothing() {
            return;
        }
        let current = lock_ignoring_poison(&CURRENT).clone();
        // Before the run has its recorder: the one the environment names, with no plan.
        let r = current.unwrap_or_else(|| {
            let paths = super::Paths::from_env();
            let run_dir =
                super::env::run_id_from_env().map(|id| super::shared::run_dir(&paths.runs, &id));
            Arc::new(Recorder::new(Some(paths.junit)).merging(run_dir))
        });
        match r.interrupt(name) {
            Ok(()) => crate::say_err!(
                "accprobe: interrupted by {name}; the JUnit file marks the cases that did not finish"
            ),
            Err(e) => {
                crate::say_err!("accprobe: interrupted by {name}; cannot write the JUnit file: {e}")
            }
        }
    });
}

/// Whether this process writes no JUnit file: a compile worker, or `--list` (said by
/// [`nothing_to_report`], or among the arguments before they are parsed).
fn writes_nothing() -> bool {
    NOTHING_TO_REPORT.load(std::sync::atomic::Ordering::SeqCst)
        || crate::config::compile_worker().is_some()
        || std::env::args_os().any(|a| a == "--list")
}

#[cfg(test)]
mod tests;
