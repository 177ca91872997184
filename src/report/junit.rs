//! The JUnit file: one suite per device and profile or per replayed profile, one case per
//! generated case, with how it ended and why.

use crate::verdict::Outcome;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::Duration;

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Ignored,
    /// Could not be judged: the run went wrong around the case (the GPU was busy or held
    /// by another process). JUnit's `<error>`, never a `<failure>`; libtest, which knows
    /// only pass, fail and ignore, counts it as failed.
    Error,
}

/// One case as it goes into JUnit.
#[derive(Debug, Clone)]
pub struct CaseRecord {
    pub suite: String,
    pub name: String,
    pub status: Status,
    /// The failure message, the reason it was ignored, or what a pass measured.
    pub message: String,
    pub duration: Duration,
}

/// One JUnit test suite: a device and profile, or a replay of recorded results.
#[derive(Debug, Clone, Default)]
pub struct SuiteInfo {
    pub name: String,
    pub properties: Vec<(String, String)>,
    pub system_out: String,
}

/// The JUnit XML for the suites and the cases recorded in them; suites in the order given,
/// cases in the order recorded.
pub fn junit(suites: &[SuiteInfo], cases: &[CaseRecord]) -> String {
    let mut report = Report::new("accprobe");
    for s in suites {
        let mut suite = TestSuite::new(s.name.as_str());
        for (k, v) in &s.properties {
            suite.add_property(Property::new(k.as_str(), v.as_str()));
        }
        if !s.system_out.is_empty() {
            suite.set_system_out(s.system_out.as_str());
        }
        for c in cases.iter().filter(|c| c.suite == s.name) {
            let status = match c.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Failed => {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    st.set_message(c.message.as_str());
                    st
                }
                Status::Error => {
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
                    st.set_message(c.message.as_str());
                    st.set_type("accprobe.GpuBusy");
                    st
                }
                Status::Ignored => {
                    let mut st = TestCaseStatus::skipped();
                    st.set_message(c.message.as_str());
                    st
                }
            };
            let mut case = TestCase::new(c.name.as_str(), status);
            case.set_classname(s.name.as_str()).set_time(c.duration);
            if c.status == Status::Passed && !c.message.is_empty() {
                case.set_system_out(c.message.as_str());
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string().expect("JUnit serialises")
}

/// A verdict in JUnit's terms: the status and the text that goes with it.
pub fn status(outcome: Outcome) -> (Status, String) {
    match outcome {
        Outcome::Pass(d) => (Status::Passed, d),
        Outcome::Fail(m) => (Status::Failed, m),
        Outcome::Skipped(reason) => (Status::Ignored, reason),
        Outcome::Error(cause) => (Status::Error, cause),
        Outcome::KnownDeviation { reason, detail } => (
            Status::Ignored,
            format!("known deviation: {reason} (measured now: {detail})"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn junit_carries_failures_skips_and_properties_and_escapes_text() {
        let suites = [SuiteInfo {
            name: "gpu".into(),
            properties: vec![("gpu_name".into(), "NVIDIA <H200>".into())],
            system_out: "table & more".into(),
        }];
        let rec = |name: &str, status, message: &str| CaseRecord {
            suite: "gpu".into(),
            name: name.into(),
            status,
            message: message.into(),
            duration: Duration::from_millis(5),
        };
        let xml = junit(
            &suites,
            &[
                rec("a", Status::Passed, "ok"),
                rec("b", Status::Failed, "acc3 > acc2 \"by\" 3%"),
                rec("c", Status::Ignored, "no CUDA driver"),
                rec(
                    "d",
                    Status::Error,
                    "GPU busy: PID 1234 (python3) had a context",
                ),
            ],
        );
        assert!(xml.contains("tests=\"4\""), "{xml}");
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("errors=\"1\""), "{xml}");
        assert!(
            xml.contains("<error message=\"GPU busy: PID 1234 (python3) had a context\""),
            "{xml}"
        );
        assert!(xml.contains("skipped=\"1\""), "{xml}");
        assert!(xml.contains("NVIDIA &lt;H200&gt;"), "{xml}");
        assert!(xml.contains("no CUDA driver"), "{xml}");
        assert!(xml.contains("table &amp; more"), "{xml}");
    }
}
