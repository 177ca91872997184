//! The JUnit writer with arbitrary suite and case names, messages, properties and captured
//! output, control characters included: the XML must always parse back, with the same
//! number of cases. The input is text, so that seeds can be written by hand: records are
//! separated by RS (0x1e), fields by US (0x1f). The first record is the suite name, the
//! second its captured output; each further one is a case: status (`p`assed, `f`ailed,
//! anything else ignored), name, message (which may span lines).
#![no_main]
use accprobe::report::junit::{junit, CaseRecord, Status, SuiteInfo};
use accprobe::verdict::Failure;
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|text: &str| {
    let mut records = text.split('\x1e');
    let suite = records.next().unwrap_or_default().to_string();
    let out = records.next().unwrap_or_default().to_string();
    let suites = [SuiteInfo {
        name: suite.clone(),
        properties: vec![(suite.clone(), out.clone())],
        system_out: out,
    }];
    let cases: Vec<CaseRecord> = records
        .enumerate()
        .map(|(i, r)| {
            let mut f = r.splitn(3, '\x1f');
            let status = match f.next().unwrap_or_default() {
                "p" => Status::Passed,
                "f" => Status::Failed,
                "e" => Status::Error,
                _ => Status::Ignored,
            };
            let name = f.next().unwrap_or_default().to_string();
            let text = f.next().unwrap_or_default().to_string();
            // A failure renders from its structure: the fuzzed text as its verdict.
            let failure = (status == Status::Failed).then(|| Box::new(Failure::new(text.clone())));
            CaseRecord {
                suite: suite.clone(),
                name,
                status,
                message: if failure.is_some() {
                    String::new()
                } else {
                    text
                },
                failure,
                duration: Duration::from_millis(i as u64),
                kind: (i % 2 == 0).then(|| "regression".to_string()),
                started: std::time::UNIX_EPOCH + Duration::from_secs(i as u64),
            }
        })
        .collect();
    let xml = junit(&suites, &cases);
    let back = quick_junit::Report::deserialize_from_str(&xml).expect("our JUnit parses back");
    // Suites none of whose cases ran are left out, so count cases over all suites.
    let written: usize = back.test_suites.iter().map(|s| s.test_cases.len()).sum();
    assert_eq!(written, cases.len());
});
