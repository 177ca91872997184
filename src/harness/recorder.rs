//! The live JUnit recorder: every finished case is recorded, and the JUnit file on disk is
//! rewritten (atomically, at most every [`JUNIT_EVERY`]) so that an interrupted or killed
//! run leaves a complete file for what finished.

use crate::report::junit::{self, CaseRecord, SuiteInfo};
use crate::report::write_atomic;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Collects how each case ended, for the JUnit file.
#[derive(Default)]
pub struct Recorder {
    pub cases: Mutex<Vec<CaseRecord>>,
    /// Where the JUnit file goes, and the suites known so far; `None` in unit tests.
    junit: Option<PathBuf>,
    suites: Mutex<Vec<SuiteInfo>>,
    last_write: Mutex<Option<Instant>>,
}

/// How often, at most, the JUnit file is rewritten while cases finish, so that an
/// interrupted or killed run leaves a complete file for what ran.
pub const JUNIT_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// The recorder of the run in progress, for the interrupt handler.
pub static CURRENT: Mutex<Option<Arc<Recorder>>> = Mutex::new(None);

impl Recorder {
    pub fn new(junit: Option<PathBuf>) -> Recorder {
        Recorder {
            cases: Mutex::default(),
            junit,
            suites: Mutex::default(),
            last_write: Mutex::new(None),
        }
    }

    pub fn push(&self, r: CaseRecord) {
        self.cases.lock().unwrap_or_else(|e| e.into_inner()).push(r);
        let due = {
            let mut last = self.last_write.lock().unwrap_or_else(|e| e.into_inner());
            let due = last.is_none_or(|t| t.elapsed() >= JUNIT_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if due {
            let _ = self.write();
        }
    }

    pub fn set_suites(&self, suites: Vec<SuiteInfo>) {
        *self.suites.lock().unwrap_or_else(|e| e.into_inner()) = suites;
    }

    /// Writes the JUnit file for what has finished so far, atomically.
    pub fn write(&self) -> std::io::Result<()> {
        let Some(path) = &self.junit else {
            return Ok(());
        };
        let suites = self
            .suites
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let cases = self.cases.lock().unwrap_or_else(|e| e.into_inner()).clone();
        write_atomic(path, &junit::junit(&suites, &cases))
    }
}

/// On SIGINT or SIGTERM: write the JUnit file for what ran, then exit 130.
pub fn install_interrupt_handler() {
    let _ = ctrlc::set_handler(|| {
        if let Some(r) = CURRENT.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = r.write();
            eprintln!("accprobe: interrupted; the JUnit file holds the cases that finished");
        }
        std::process::exit(130);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::junit::Status;
    use std::path::Path;

    fn cases_in(path: &Path) -> usize {
        let xml = std::fs::read_to_string(path).unwrap();
        let report =
            quick_junit::Report::deserialize_from_str(&xml).expect("well-formed at every moment");
        report.test_suites.iter().map(|s| s.test_cases.len()).sum()
    }

    #[test]
    fn the_junit_file_is_complete_for_what_finished_while_the_run_goes_on() {
        let dir = std::env::temp_dir().join(format!("accprobe-junit-live-{}", std::process::id()));
        let path = dir.join("junit.xml");
        let r = Recorder::new(Some(path.clone()));
        r.set_suites(vec![SuiteInfo {
            name: "s".into(),
            ..Default::default()
        }]);
        let case = |i: usize| CaseRecord {
            suite: "s".into(),
            name: format!("c{i}"),
            status: Status::Passed,
            message: String::new(),
            duration: std::time::Duration::ZERO,
            kind: None,
            started: std::time::SystemTime::now(),
        };
        r.push(case(0));
        // The first finished case is on disk at once: a run killed now leaves a valid file.
        assert_eq!(cases_in(&path), 1);
        for i in 1..50 {
            r.push(case(i));
        }
        let seen = cases_in(&path);
        assert!((1..=50).contains(&seen), "{seen}");
        std::thread::sleep(JUNIT_EVERY + std::time::Duration::from_millis(50));
        r.push(case(50));
        assert_eq!(cases_in(&path), 51, "at most JUNIT_EVERY behind");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
