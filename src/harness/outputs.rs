//! What a finished session leaves: its JUnit suite, its table (stdout, or stderr when
//! stdout is libtest's JSON), and, in the process that measured, its results file, ptxas
//! log and CUBINs, each path said on stderr, and its record in the history.

use super::env::Paths;
use super::gpu;
use super::recorder::Record;
use super::stdout;
use crate::error::Error;
use crate::history::{self, About, Origin, RunRecord};
use crate::measure::session::GpuSession;
use crate::model::results::RunResults;
use crate::output::{write_atomic, write_atomic_bytes};
use crate::report;
use crate::report::junit::{CaseRecord, SuiteInfo};
use crate::text::Shown;
use libtest_mimic::Arguments;
use std::path::{Path, PathBuf};

/// Where the suite's own lines (the tables, the closing summary) go besides stderr: where
/// libtest writes its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lines<'a> {
    /// On stdout, after libtest's.
    Stdout,
    /// In libtest's `--logfile`, after libtest's lines: a run that keeps its lines off
    /// the terminal keeps these off it too.
    Log(&'a str),
    /// On stderr: stdout (or the `--logfile`) is libtest's JSON (`--format json`) and
    /// stays JSON.
    Stderr,
}

impl Lines<'_> {
    pub(crate) fn for_args(args: &Arguments) -> Lines<'_> {
        match (&args.format, &args.logfile) {
            (Some(libtest_mimic::FormatSetting::Json), _) => Lines::Stderr,
            (_, Some(log)) => Lines::Log(log),
            (_, None) => Lines::Stdout,
        }
    }

    /// Prints `text` (which ends in a newline) where the lines go; said on stderr when the
    /// `--logfile` cannot take it.
    pub(crate) fn say(self, text: &str) {
        match self {
            Lines::Stdout => stdout::say(text),
            Lines::Log(log) => append(log, text),
            Lines::Stderr => crate::interrupt::to_stderr(text),
        }
    }
}

/// Appends `text` to libtest's `--logfile` `log`, after libtest's own lines; said on
/// stderr when it cannot.
fn append(log: &str, text: &str) {
    use std::io::Write;
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(log)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = appended {
        crate::say_err!("accprobe: cannot append to --logfile {log}: {e}");
        crate::interrupt::to_stderr(text);
    }
}

/// How the sessions of a run finish.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Finishing<'a> {
    pub(crate) paths: &'a Paths,
    /// Whether the run has several devices: file names then carry `-gpuN`.
    pub(crate) several: bool,
    /// Whether this process measured (under nextest only the one that did writes the
    /// results, log and CUBIN).
    pub(crate) measured_here: bool,
    pub(crate) lines: Lines<'a>,
}

impl Finishing<'_> {
    /// The JUnit suite of a finished session; prints its table and, when it measured
    /// here, writes its results, ptxas log and CUBIN, and returns the results written.
    pub(crate) fn session(&self, s: &GpuSession) -> (SuiteInfo, Option<RunResults>) {
        let mut info = SuiteInfo {
            name: gpu::suite_name(s),
            properties: vec![
                ("profile".into(), s.profile.name.clone()),
                ("profile_file".into(), s.profile.file.display().to_string()),
                ("profile_selection".into(), s.selection_note.clone()),
            ],
            system_out: String::new(),
        };
        if let Err(reason) = s.target() {
            info.properties
                .push(("no_gpu_reason".into(), reason.to_string()));
        }
        if !self.measured_here {
            return (info, None);
        }
        let results_path = self.results_path(s);
        let results = s.measured_results();
        if let Some(r) = &results {
            info.properties.extend(
                r.environment
                    .as_ref()
                    .map(|e| e.properties())
                    .unwrap_or_default(),
            );
            let table = report::table(r, &s.profile.probe.chains, &s.profile.probe.accumulators);
            self.lines.say(&format!(
                "\n{}: {}\n{table}\n",
                s.device_label(),
                s.selection_note
            ));
            info.system_out = format!("{}\n{table}", s.selection_note);
            match write_atomic(&results_path, &r.to_json()) {
                Ok(()) => crate::say_err!("results: {}", results_path.shown()),
                Err(e) => crate::say_err!("{}", Error::io(&results_path, "write results", e)),
            }
        }
        if let Some(c) = s.compiled() {
            let [log_path, _] = Paths::beside_results(&results_path);
            if let Err(e) = write_atomic(&log_path, &c.log) {
                crate::say_err!("{}", Error::io(&log_path, "write the ptxas log", e));
            }
            write_cubins(&results_path, &c.parts);
        }
        (info, results)
    }

    /// Appends each measured session's record (its results and the cases of its suite,
    /// when `records` holds the whole run's) to the history. Decides nothing: a store that
    /// cannot take them is a warning, and the records wait in the spool (see
    /// [`crate::history`]).
    pub(crate) fn history(
        &self,
        measured: &[(&GpuSession, RunResults)],
        records: Option<&[Record]>,
    ) {
        let runs: Vec<RunRecord> = measured
            .iter()
            .map(|(s, r)| {
                let suite = gpu::suite_name(s);
                let cases: Option<Vec<CaseRecord>> = records.map(|all| {
                    all.iter()
                        .filter(|x| x.case.suite == suite)
                        .map(|x| x.case.clone())
                        .collect()
                });
                let key = s.target().ok().and_then(|t| t.device_key());
                let about = About::here(
                    &s.profile,
                    key.as_ref().and_then(|k| k.pci_bus_id.clone()),
                    key.and_then(|k| k.uuid),
                );
                history::build(r, cases.as_deref(), Origin::Suite, about)
            })
            .collect();
        if runs.is_empty() {
            return;
        }
        if let Some(w) = history::write(&self.paths.history, &self.paths.history_spool, &runs) {
            for line in w.lines() {
                crate::say_err!("{line}");
            }
        }
    }

    /// The results file of a session: `-gpuN` in its name when the run has several
    /// devices.
    fn results_path(&self, s: &GpuSession) -> PathBuf {
        let results = &self.paths.results;
        match (s.target(), self.several) {
            (Ok(t), true) => {
                let stem = results
                    .file_stem()
                    .map_or("results".into(), |x| x.to_string_lossy().into_owned());
                results.with_file_name(format!("{stem}-gpu{}.json", t.ordinal()))
            }
            _ => results.clone(),
        }
    }
}

/// One CUBIN per NVRTC program: `results.cubin`, then `results.1.cubin`, ...; those of an
/// earlier run with more programs (`results.K.cubin`, K at least the count) are removed, so
/// that the folder never mixes the CUBINs of two runs.
fn write_cubins(results_path: &Path, parts: &[crate::compile::Program]) {
    for (k, part) in parts.iter().enumerate() {
        let cubin_path = match k {
            0 => Paths::beside_results(results_path)[1].clone(),
            _ => results_path.with_extension(format!("{k}.cubin")),
        };
        if let Err(e) = write_atomic_bytes(&cubin_path, &part.cubin) {
            crate::say_err!("{}", Error::io(&cubin_path, "write the CUBIN", e));
        }
    }
    // Those this function wrote before are consecutive: stop at the first that is absent.
    for k in parts.len().max(1).. {
        let stale = results_path.with_extension(format!("{k}.cubin"));
        if std::fs::remove_file(&stale).is_err() {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubins_of_an_earlier_run_with_more_programs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.json");
        let part = |b: u8| crate::compile::Program {
            cubin: vec![b; 4],
            log: String::new(),
            sass: None,
        };
        write_cubins(&results, &[part(0), part(1), part(2), part(3)]);
        let other = dir.path().join("results-gpu1.1.cubin");
        std::fs::write(&other, b"another device's").unwrap();
        write_cubins(&results, &[part(9)]);
        assert_eq!(
            std::fs::read(dir.path().join("results.cubin")).unwrap(),
            [9; 4]
        );
        for k in 1..4 {
            let stale = dir.path().join(format!("results.{k}.cubin"));
            assert!(
                !stale.exists(),
                "{} left from the run before",
                stale.shown()
            );
        }
        assert!(other.exists());
    }

    #[test]
    fn the_suites_lines_go_where_libtests_go_and_never_into_json() {
        let lines = |a: &[&str]| -> String {
            format!(
                "{:?}",
                Lines::for_args(&Arguments::from_iter(a.iter().copied()))
            )
        };
        assert_eq!(lines(&["t", "--format", "json"]), "Stderr");
        assert_eq!(lines(&["t"]), "Stdout");
        assert_eq!(lines(&["t", "--format", "terse"]), "Stdout");
        assert_eq!(lines(&["t", "--logfile", "log"]), "Log(\"log\")");
        assert_eq!(
            lines(&["t", "--format", "json", "--logfile", "log"]),
            "Stderr"
        );
    }
}
