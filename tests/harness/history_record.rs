//! The GPU suite writes each device's record at its end, and the history decides nothing.

use crate::support::{recorded_h200, Sandbox};
use accprobe::config::HistoryStore;
use accprobe::harness::{self, RunOptions};
use accprobe::history::{self, read};
use std::process::ExitCode;

const SUITE: &str = "gpu0 NVIDIA H200 / profile h200";

#[test]
fn the_suite_appends_its_record_with_its_cases() {
    let sb = Sandbox::new("history-record", &["documented", "h200"]);
    let (code, report) = sb.run_on(vec![recorded_h200(0)], &[]);
    assert_eq!(code, ExitCode::SUCCESS);
    let paths = sb.paths();
    let mut s = history::open(&paths.history, false).unwrap().unwrap();
    let runs = read::runs(s.as_mut()).unwrap();
    assert_eq!(runs.len(), 1, "one device, one record");
    let run = &runs[0];
    let results_text = std::fs::read_to_string(&paths.results).unwrap();
    assert_eq!(
        run.id,
        history::record::run_id(&results_text),
        "keyed by the results file"
    );
    assert_eq!(
        (run.origin.as_str(), run.verdict.as_str()),
        ("suite", "passed")
    );
    assert_eq!(run.profile, "h200");
    assert_eq!(run.gpu_name.as_deref(), Some("NVIDIA H200"));
    assert!(run.host.is_some(), "{run:?}");
    assert!(run.profile_digest.is_some(), "{run:?}");
    let record = read::record(s.as_mut(), run).unwrap();
    let results = accprobe::model::results::RunResults::load(&paths.results).unwrap();
    assert_eq!(record.variants.len(), results.variants.len());
    let suite = report
        .test_suites
        .iter()
        .find(|x| x.name.as_str() == SUITE)
        .unwrap();
    let names: Vec<&str> = record.cases.iter().map(|c| c.name.as_str()).collect();
    let junit: Vec<&str> = suite.test_cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names, junit,
        "the cases of the device's suite, in JUnit order"
    );
    assert!(record.cases.iter().all(|c| c.suite == SUITE));
    // The same run again is the same record: nothing is added.
    let (code, _) = sb.run_on(vec![recorded_h200(0)], &[]);
    assert_eq!(code, ExitCode::SUCCESS);
    assert_eq!(read::runs(s.as_mut()).unwrap().len(), 1);
}

#[test]
fn a_store_that_cannot_be_written_changes_no_verdict() {
    let sb = Sandbox::new("history-unwritable", &["documented", "h200"]);
    // A folder where the database file should be.
    let folder = sb.dir.join("out/history.sqlite");
    std::fs::create_dir_all(&folder).unwrap();
    let mut paths = sb.paths();
    paths.history = HistoryStore::Sqlite(folder.clone());
    let args = sb.args(&[]);
    let run = |paths: &harness::Paths| {
        harness::run(
            &args,
            paths,
            Ok(vec![recorded_h200(0)]),
            &RunOptions::default(),
        )
    };
    assert_eq!(
        run(&paths),
        ExitCode::SUCCESS,
        "the verdict is the suite's alone"
    );
    let spool = history::Spool::of(&paths.history_spool, &paths.history);
    assert_eq!(spool.pending().len(), 1, "the record waits in the spool");
    // The next run that can write there writes it (and its own, the same run).
    std::fs::remove_dir(&folder).unwrap();
    assert_eq!(run(&paths), ExitCode::SUCCESS);
    assert!(spool.pending().is_empty());
    let mut s = history::open(&paths.history, false).unwrap().unwrap();
    assert_eq!(read::runs(s.as_mut()).unwrap().len(), 1);
    // Off: nothing is written, and the run is as green.
    paths.history = HistoryStore::Off;
    assert_eq!(run(&paths), ExitCode::SUCCESS);
}
