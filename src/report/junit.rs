//! The JUnit file: one suite per device and profile or per replayed profile, one case per
//! generated case, with how it ended and why.
//!
//! What readers see (GitLab's test report, the GitHub JUnit actions, junitparser, the
//! Jenkins/xunit `junit-10.xsd` schema):
//! - `<testsuites>` carries the run's `timestamp` and `time` (first case start to last case
//!   end); each `<testsuite>` its own `timestamp`, `time` and the `hostname` that ran it.
//! - Each `<testcase>` has its libtest name (what `cargo test --test probe -- --exact NAME`
//!   takes), its real duration, and the classname `accprobe::probe [SUITE]`: the binary
//!   id, as cargo-nextest writes it, then the suite (device and profile, or the replayed
//!   profile), because GitLab folds every suite of a job into one list and keeps only
//!   classname and name.
//! - A failure or skip has a one-line `message` attribute, a verdict's failure its
//!   verdict and the head of its first suspect within 200 characters
//!   ([`super::message::failure_message`]: the GitHub job summary shows no more), any other text its first
//!   line; and the whole text as the element's body ([`Failure::text`] for a verdict's
//!   failure), where readers keep the newlines (attributes fold them);
//!   a failure has a `type` that says what kind of failure it is (`regression`,
//!   `no-result`, `known-deviation-gone`, ...: [`crate::verdict::FailureKind`]), a skip the
//!   kind of reason (`no-gpu`, `known-deviation`, `cannot-judge`).
//! - A suite none of whose cases ran (all filtered out) is left out.
//! - Every text goes through [`crate::text`] first: bodies keep their newlines, names,
//!   attributes and properties are one line, and nothing XML cannot hold (a control
//!   character, U+FFFE) reaches the file, whatever a profile or a results file holds.
//! - Messages, bodies, outputs and property values hold no character XML writes as an
//!   entity ([`crate::text::for_viewers`]: `→` for `->`, `’` for an apostrophe): Allure
//!   prints `&gt;` and `&apos;` as they are. Bodies keep their newlines, which GitLab,
//!   junit2html and xunit-viewer show and junit-viewer folds; the message, one line,
//!   carries the verdict and the suspect whichever a viewer does.

use super::message::{message, viewed_message};
use crate::text::{clean, for_viewers, line};
use crate::verdict::{Failure, Outcome, Verdict};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::time::{Duration, SystemTime};

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct CaseRecord {
    pub suite: String,
    pub name: String,
    pub status: Status,
    /// The text of a case that is no verdict's failure: the reason it was ignored, what a
    /// pass measured, why the run failed it; empty when `failure` holds the failure.
    pub message: String,
    /// The failure, when a verdict failed the case: each output renders it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Box<Failure>>,
    pub duration: Duration,
    /// What kind of failure or skip (JUnit's `type`), when known.
    pub kind: Option<String>,
    /// When the case started.
    pub started: SystemTime,
}

impl CaseRecord {
    /// The whole text of the case: its failure's ([`Failure::text`]) or its message.
    pub(crate) fn text(&self) -> String {
        self.failure
            .as_ref()
            .map_or_else(|| self.message.clone(), |f| f.text())
    }
}

/// How a case's body ended: its status, its text or its verdict's failure, and the kind
/// of failure or skip.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ended {
    pub(crate) status: Status,
    /// As [`CaseRecord::message`]: empty when `failure` holds the failure.
    pub(crate) message: String,
    pub(crate) failure: Option<Box<Failure>>,
    pub(crate) kind: Option<&'static str>,
}

impl From<(Status, String)> for Ended {
    fn from((status, message): (Status, String)) -> Ended {
        Ended {
            status,
            message,
            failure: None,
            kind: None,
        }
    }
}

impl Ended {
    pub(crate) fn new(status: Status, message: impl Into<String>, kind: &'static str) -> Ended {
        Ended {
            status,
            message: message.into(),
            failure: None,
            kind: Some(kind),
        }
    }
}

/// One JUnit test suite: a device and profile, or a replay of recorded results.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct SuiteInfo {
    pub name: String,
    pub properties: Vec<(String, String)>,
    pub system_out: String,
}

/// The type of a failure that says nothing more specific.
pub(crate) const FAILED: &str = "failure";
/// The type of a skip that says nothing more specific.
pub(crate) const SKIPPED: &str = "skipped";

/// The classname of the cases of suite `suite`: the binary id (as cargo-nextest writes
/// it) and the suite.
pub(crate) fn classname(suite: &str) -> String {
    format!("accprobe::probe [{suite}]")
}

/// The status element of a case that did not pass: a one-line message, the whole text as
/// the body, and a type.
fn not_passed(mut st: TestCaseStatus, c: &CaseRecord, default_kind: &str) -> TestCaseStatus {
    let text = c.text();
    let text = for_viewers(&text);
    st.set_message(match &c.failure {
        Some(f) => viewed_message(f, |t| for_viewers(t).into_owned()),
        None => message(&text, None),
    });
    st.set_type(line(c.kind.as_deref().unwrap_or(default_kind)));
    if !text.is_empty() {
        st.set_description(clean(&text));
    }
    st
}

/// The wall-clock span of `cases`: when the first started, and until the last ended.
fn span<'a>(cases: impl Iterator<Item = &'a CaseRecord>) -> Option<(SystemTime, Duration)> {
    let mut first: Option<SystemTime> = None;
    let mut last: Option<SystemTime> = None;
    for c in cases {
        let end = c.started + c.duration;
        first = Some(first.map_or(c.started, |f| f.min(c.started)));
        last = Some(last.map_or(end, |l| l.max(end)));
    }
    let (first, last) = (first?, last?);
    Some((first, last.duration_since(first).unwrap_or_default()))
}

/// The name of this machine, for the suites' `hostname`.
fn hostname() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}

/// The JUnit XML for the suites and the cases recorded in them; suites in the order given,
/// cases in the order recorded.
pub fn junit(suites: &[SuiteInfo], cases: &[CaseRecord]) -> String {
    let mut report = Report::new("accprobe");
    if let Some((start, time)) = span(cases.iter()) {
        report
            .set_timestamp(chrono::DateTime::<chrono::Utc>::from(start))
            .set_time(time);
    }
    let host = hostname();
    for s in suites {
        let in_suite = || cases.iter().filter(|c| c.suite == s.name);
        let Some((start, time)) = span(in_suite()) else {
            continue;
        };
        let mut suite = TestSuite::new(line(&s.name));
        suite
            .set_timestamp(chrono::DateTime::<chrono::Utc>::from(start))
            .set_time(time);
        suite.extra.insert("hostname".into(), line(&host).into());
        for (k, v) in &s.properties {
            suite.add_property(Property::new(line(k), line(&for_viewers(v))));
        }
        if !s.system_out.is_empty() {
            suite.set_system_out(clean(&for_viewers(&s.system_out)));
        }
        let classname = classname(&s.name);
        for c in in_suite() {
            let status = match c.status {
                Status::Passed => TestCaseStatus::success(),
                Status::Failed => not_passed(
                    TestCaseStatus::non_success(NonSuccessKind::Failure),
                    c,
                    FAILED,
                ),
                Status::Error => not_passed(
                    TestCaseStatus::non_success(NonSuccessKind::Error),
                    c,
                    "gpu-busy",
                ),
                Status::Ignored => not_passed(TestCaseStatus::skipped(), c, SKIPPED),
            };
            let mut case = TestCase::new(line(&c.name), status);
            case.set_classname(line(&classname)).set_time(c.duration);
            if c.status == Status::Passed && !c.message.is_empty() {
                case.set_system_out(clean(&for_viewers(&c.message)));
            }
            suite.add_test_case(case);
        }
        report.add_test_suite(suite);
    }
    report.to_string().expect("JUnit serialises")
}

/// A verdict in JUnit's terms: the status, and the text or the failure that goes with it.
pub(crate) fn status(outcome: Outcome) -> (Status, String, Option<Box<Failure>>) {
    match outcome {
        Outcome::Pass(d) => (Status::Passed, d, None),
        Outcome::Fail(f) => (Status::Failed, String::new(), Some(f)),
        Outcome::Skipped(reason) => (Status::Ignored, reason, None),
        Outcome::Error(cause) => (Status::Error, cause, None),
        Outcome::KnownDeviation { reason, detail } => (
            Status::Ignored,
            format!("known deviation: {reason} (measured now: {detail})"),
            None,
        ),
    }
}

impl From<Outcome> for Ended {
    /// An outcome with no kind of failure or skip.
    fn from(outcome: Outcome) -> Ended {
        let (status, message, failure) = status(outcome);
        Ended {
            status,
            message,
            failure,
            kind: None,
        }
    }
}

/// A verdict in JUnit's terms, with the kind of failure or skip.
pub(crate) fn ended(verdict: Verdict) -> Ended {
    let kind = match (&verdict.outcome, verdict.failure) {
        (Outcome::Fail(_), Some(k)) => Some(k.as_str()),
        (Outcome::Fail(_), None) => Some(FAILED),
        (Outcome::KnownDeviation { .. }, _) => Some("known-deviation"),
        (Outcome::Skipped(_), _) => Some("cannot-judge"),
        (Outcome::Error(_), _) => Some("gpu-busy"),
        (Outcome::Pass(_), _) => None,
    };
    let (status, message, failure) = status(verdict.outcome);
    Ended {
        status,
        message,
        failure,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quick_junit::Report;

    fn rec(name: &str, status: Status, message: &str, kind: Option<&'static str>) -> CaseRecord {
        CaseRecord {
            suite: "gpu".into(),
            name: name.into(),
            status,
            message: message.into(),
            failure: None,
            duration: Duration::from_millis(5),
            kind: kind.map(str::to_string),
            started: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
        }
    }

    #[test]
    fn junit_carries_failures_skips_and_properties_and_escapes_text() {
        let suites = [SuiteInfo {
            name: "gpu".into(),
            properties: vec![("gpu_name".into(), "NVIDIA <H200>".into())],
            system_out: "table & more".into(),
        }];
        let xml = junit(
            &suites,
            &[
                rec("a", Status::Passed, "ok", None),
                rec("b", Status::Failed, "acc3 > acc2 \"by\" 3%", None),
                rec("c", Status::Ignored, "no CUDA driver", Some("no-gpu")),
                rec(
                    "d",
                    Status::Error,
                    "GPU busy: PID 1234 (python3) had a context",
                    Some("gpu-busy"),
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
        assert!(xml.contains("NVIDIA ＜H200＞"), "{xml}");
        assert!(xml.contains("no CUDA driver"), "{xml}");
        assert!(xml.contains("table ＆ more"), "{xml}");
        assert!(
            xml.contains("acc3 ＞ acc2 “by” 3%")
                && !xml.contains("&quot;")
                && !xml.contains("&gt;"),
            "{xml}"
        );
        assert!(
            xml.contains("type=\"failure\""),
            "a failure always has a type: {xml}"
        );
        assert!(xml.contains("type=\"no-gpu\""), "{xml}");
    }

    #[test]
    fn a_multi_line_failure_has_a_one_line_message_and_the_whole_text_as_body() {
        let diff = "chain7_acc2: the SASS changed (digest a -> b); the loop body changed\n\
                    --- blessed loop\n+++ measured loop\n-FFMA R1, R2, R3, R1 ;\n+FFMA R1, R2, R3, R4 ;\n";
        let suites = [SuiteInfo {
            name: "gpu".into(),
            ..Default::default()
        }];
        let xml = junit(
            &suites,
            &[rec("sass", Status::Failed, diff, Some("sass-changed"))],
        );
        let report = Report::deserialize_from_str(&xml).unwrap();
        let case = &report.test_suites[0].test_cases[0];
        let TestCaseStatus::NonSuccess {
            message,
            ty,
            description,
            ..
        } = &case.status
        else {
            panic!("{xml}")
        };
        let message = message.as_ref().unwrap().as_str();
        assert_eq!(
            message, "chain7_acc2: the SASS changed (digest a → b); the loop body changed",
            "the verdict alone, whole: the diff is the body's"
        );
        assert_eq!(ty.as_ref().map(|t| t.as_str()), Some("sass-changed"));
        assert_eq!(
            description.as_ref().map(|d| d.as_str()),
            Some(diff.trim_end().replace("->", "→").as_str()),
            "the body keeps every line of the diff (quick-junit's reader trims the end)"
        );
    }

    #[test]
    fn a_verdicts_failure_is_rendered_from_its_structure_in_message_and_body() {
        let mut f = Failure::new("chain7_acc2: slower -> than its baseline").detail("diff line");
        f.suspect = Some(crate::verdict::suspect::Suspect {
            who: crate::verdict::suspect::Who::Hardware,
            what: "same SASS and toolchain".into(),
            detail: "clocks".into(),
        });
        let mut c = rec("r", Status::Failed, "", Some("regression"));
        c.failure = Some(Box::new(f));
        let xml = junit(
            &[SuiteInfo {
                name: "gpu".into(),
                ..Default::default()
            }],
            &[c],
        );
        let report = Report::deserialize_from_str(&xml).unwrap();
        let TestCaseStatus::NonSuccess {
            message,
            description,
            ..
        } = &report.test_suites[0].test_cases[0].status
        else {
            panic!("{xml}")
        };
        assert_eq!(
            message.as_ref().map(|m| m.as_str()),
            Some(
                "chain7_acc2: slower → than its baseline; first suspect: the hardware, clocks \
                 or contention (same SASS and toolchain)"
            )
        );
        assert_eq!(
            description.as_ref().map(|d| d.as_str()),
            Some(
                "chain7_acc2: slower → than its baseline\nfirst suspect: the hardware, clocks or \
                 contention (same SASS and toolchain) — clocks\ndiff line"
            )
        );
    }

    #[test]
    fn suites_and_the_run_carry_timestamp_time_and_hostname_and_empty_suites_are_left_out() {
        let suites = [
            SuiteInfo {
                name: "gpu".into(),
                ..Default::default()
            },
            SuiteInfo {
                name: "replay documented".into(),
                ..Default::default()
            },
        ];
        let mut late = rec("b", Status::Passed, "", None);
        late.started += Duration::from_millis(995);
        let xml = junit(&suites, &[rec("a", Status::Passed, "", None), late]);
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(
            report.time,
            Some(Duration::from_secs(1)),
            "first start to last end"
        );
        assert_eq!(
            report.timestamp.map(|t| t.to_rfc3339()),
            Some("2023-11-14T22:13:20+00:00".to_string())
        );
        assert_eq!(
            report.test_suites.len(),
            1,
            "the replay suite ran no case (filtered out), so it is not in the file: {xml}"
        );
        let s = &report.test_suites[0];
        assert_eq!(s.time, Some(Duration::from_secs(1)));
        assert!(s.timestamp.is_some());
        let host = s.extra.get("hostname").map(|h| h.as_str()).unwrap_or("");
        assert!(!host.is_empty(), "{xml}");
        assert_eq!(
            s.test_cases[0].classname.as_ref().map(|c| c.as_str()),
            Some("accprobe::probe [gpu]")
        );
        assert_eq!(s.test_cases[1].time, Some(Duration::from_millis(5)));
    }

    #[test]
    fn bytes_from_a_file_never_make_the_junit_file_ill_formed() {
        // What a profile (its comments reach known-deviation reasons) or a replayed results
        // file (its gpu_name reaches the properties) may hold.
        let bad = "H200\u{fffe}\u{ffff}\u{1b}[31m\u{7}\u{9b}2J\r";
        let suites = [SuiteInfo {
            name: format!("replay {bad}"),
            properties: vec![("gpu_name".into(), bad.into())],
            system_out: format!("table of {bad}\nsecond line"),
        }];
        let cases = [
            CaseRecord {
                suite: format!("replay {bad}"),
                ..rec(
                    &format!("case {bad}"),
                    Status::Failed,
                    &format!("{bad}\nmore {bad}"),
                    None,
                )
            },
            CaseRecord {
                suite: format!("replay {bad}"),
                ..rec("passed", Status::Passed, bad, None)
            },
        ];
        let xml = junit(&suites, &cases);
        let allowed = |c: char| {
            matches!(c, '\t' | '\n' | '\r')
                || ('\u{20}'..='\u{d7ff}').contains(&c)
                || ('\u{e000}'..='\u{fffd}').contains(&c)
                || c >= '\u{10000}'
        };
        if let Some(c) = xml
            .chars()
            .find(|&c| !allowed(c) || c.is_control() && c != '\n')
        {
            panic!("{c:?} is in the JUnit file: {xml}");
        }
        let report = Report::deserialize_from_str(&xml).unwrap();
        let suite = &report.test_suites[0];
        assert_eq!(suite.test_cases.len(), 2, "{xml}");
        assert!(
            xml.contains("H200\\u{fffe}\\u{ffff}\\u{1b}[31m"),
            "escaped visibly, not dropped: {xml}"
        );
    }
}
