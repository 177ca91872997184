//! The JUnit writer with arbitrary suite and case names and messages (control characters
//! included): the XML must always parse back, with the same number of cases.
#![no_main]
use accprobe::report::junit::{junit, CaseRecord, Status, SuiteInfo};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|input: (String, Vec<(String, u8, String)>, String)| {
    let (suite, cases, out) = input;
    let suites = [SuiteInfo { name: suite.clone(), properties: vec![(suite.clone(), out.clone())], system_out: out }];
    let records: Vec<CaseRecord> = cases
        .into_iter()
        .map(|(name, s, message)| CaseRecord {
            suite: suite.clone(),
            name,
            status: match s % 3 {
                0 => Status::Passed,
                1 => Status::Failed,
                _ => Status::Ignored,
            },
            message,
            duration: Duration::from_millis(s as u64),
        })
        .collect();
    let xml = junit(&suites, &records);
    let back = quick_junit::Report::deserialize_from_str(&xml).expect("our JUnit parses back");
    assert_eq!(back.test_suites[0].test_cases.len(), records.len());
});
