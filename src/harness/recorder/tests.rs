use super::*;

fn cases_in(path: &Path) -> usize {
    let xml = std::fs::read_to_string(path).unwrap();
    let report =
        quick_junit::Report::deserialize_from_str(&xml).expect("well-formed at every moment");
    report.test_suites.iter().map(|s| s.test_cases.len()).sum()
}

fn case(suite: &str, name: &str, status: Status) -> CaseRecord {
    CaseRecord {
        suite: suite.into(),
        name: name.into(),
        status,
        message: String::new(),
        failure: None,
        duration: std::time::Duration::ZERO,
        kind: None,
        started: std::time::SystemTime::now(),
    }
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
    let case = |i: usize| case("s", &format!("c{i}"), Status::Passed);
    r.push(case(0), None);
    // The first finished case is on disk at once: a run killed now leaves a valid file
    // (with the failing run::unfinished case beside it).
    assert_eq!(cases_in(&path), 2);
    for i in 1..50 {
        r.push(case(i), None);
    }
    let seen = cases_in(&path);
    assert!((2..=51).contains(&seen), "{seen}");
    std::thread::sleep(JUNIT_EVERY + std::time::Duration::from_millis(50));
    r.push(case(50), None);
    assert_eq!(cases_in(&path), 52, "at most JUNIT_EVERY behind");
    std::fs::remove_dir_all(dir).unwrap();
}

/// The failures of the JUnit file at `path` and the names of its failing cases.
fn failing_in(path: &Path) -> (usize, Vec<String>) {
    let xml = std::fs::read_to_string(path).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    let names = report
        .test_suites
        .iter()
        .flat_map(|s| &s.test_cases)
        .filter(|c| matches!(c.status, quick_junit::TestCaseStatus::NonSuccess { .. }))
        .map(|c| c.name.to_string())
        .collect();
    (report.failures, names)
}

#[test]
fn every_snapshot_reads_red_until_the_final_write_replaces_it() {
    // A run killed (or ended at once by a second signal) leaves the last snapshot: a CI
    // must not read it as green.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("junit.xml");
    let r = Recorder::new(Some(path.clone()));
    r.plan(
        vec![SuiteInfo {
            name: "s".into(),
            ..Default::default()
        }],
        Vec::new(),
        vec![("s".into(), "c0".into()), ("s".into(), "c1".into())],
    );
    r.snapshot().unwrap();
    assert_eq!(failing_in(&path), (1, vec![UNFINISHED_CASE.to_string()]));
    r.push(case("s", "c0", Status::Passed), None);
    r.push(case("s", "c1", Status::Passed), None);
    r.snapshot().unwrap();
    let (failures, names) = failing_in(&path);
    assert_eq!((failures, names), (1, vec![UNFINISHED_CASE.to_string()]));
    let xml = std::fs::read_to_string(&path).unwrap();
    assert!(xml.contains("2 cases finished so far"), "{xml}");
    r.write().unwrap();
    assert_eq!(
        failing_in(&path),
        (0, Vec::new()),
        "the completed run is green"
    );
    assert_eq!(cases_in(&path), 2, "and holds its cases only");
    // A snapshot after the final write leaves the completed file as it is.
    r.snapshot().unwrap();
    assert_eq!(failing_in(&path), (0, Vec::new()));
}

#[test]
fn an_interrupt_reports_the_unfinished_cases_and_fails_the_run() {
    let r = Recorder::new(None);
    r.expect(vec![
        ("s".into(), "a".into()),
        ("s".into(), "b".into()),
        ("s".into(), "c".into()),
    ]);
    r.push(case("s", "a", Status::Passed), None);
    r.interrupt("SIGTERM").unwrap();
    let cases = r.cases();
    let names: Vec<(&str, &Status, &str)> = cases
        .iter()
        .map(|c| (c.name.as_str(), &c.status, c.message.as_str()))
        .collect();
    assert_eq!(names[0], ("a", &Status::Passed, ""));
    assert_eq!(
        names[1],
        (
            "b",
            &Status::Ignored,
            "not finished: interrupted by SIGTERM"
        )
    );
    assert_eq!(names[2].0, "c");
    assert_eq!(names[3].0, INTERRUPTED_CASE);
    assert_eq!(names[3].1, &Status::Failed);
    assert!(
        names[3]
            .2
            .contains("1 cases finished, 2 did not, reported skipped as not finished;"),
        "{}",
        names[3].2
    );
}

#[test]
fn an_interrupt_after_every_case_finished_says_why_the_run_is_red_without_noise() {
    let r = Recorder::new(None);
    r.expect(vec![("s".into(), "a".into())]);
    r.push(case("s", "a", Status::Passed), None);
    r.interrupt("SIGTERM").unwrap();
    let cases = r.cases();
    let last = cases.last().unwrap();
    assert_eq!(
        (last.name.as_str(), &last.status),
        (INTERRUPTED_CASE, &Status::Failed)
    );
    let m = &last.message;
    assert!(m.contains("1 cases finished, 0 did not;"), "{m}");
    assert!(
        !m.contains('(') && !m.contains("reported skipped"),
        "nothing was skipped, so nothing says so: {m}"
    );
    assert!(
        m.contains("not green because it was stopped before its end"),
        "{m}"
    );
}

#[test]
fn processes_of_one_nextest_run_add_to_one_junit_file() {
    let dir = std::env::temp_dir().join(format!("accprobe-junit-merge-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let path = dir.join("junit.xml");
    let suites = vec![SuiteInfo {
        name: "s".into(),
        ..Default::default()
    }];
    // Two "processes": parts written as two different pids would.
    for (i, (name, status)) in [("a", Status::Passed), ("b", Status::Failed)]
        .into_iter()
        .enumerate()
    {
        let part = ProcessPart {
            started: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(i as u64),
            pid: 1_000_000 + i as u32,
            suites: suites.clone(),
            records: vec![Record {
                case: case("s", name, status),
                skip: None,
            }],
        };
        merge(&dir, &path, &part).unwrap();
    }
    assert_eq!(
        cases_in(&path),
        2,
        "the second process did not overwrite the first"
    );
    // A retry of `b` that passes replaces its record; nothing is counted twice.
    let retry = ProcessPart {
        started: SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(9),
        pid: 1_000_009,
        suites,
        records: vec![Record {
            case: case("s", "b", Status::Passed),
            skip: None,
        }],
    };
    merge(&dir, &path, &retry).unwrap();
    let xml = std::fs::read_to_string(&path).unwrap();
    let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    assert_eq!(report.test_suites[0].tests, 2);
    assert_eq!(report.test_suites[0].failures, 0);
    std::fs::remove_dir_all(dir).unwrap();
}
