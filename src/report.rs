//! Stage 7 of the pipeline: report. The study's table as text, and the JUnit file.

use crate::results::RunResults;
use crate::variant::Variant;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// `49078.0` -> `49,078.0`.
pub fn thousands(x: f64) -> String {
    let s = format!("{x:.1}");
    let (int, frac) = s.split_once('.').unwrap_or((&s, "0"));
    let (sign, digits) = int.strip_prefix('-').map_or(("", int), |d| ("-", d));
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    format!("{sign}{out}.{frac}")
}

/// The study's table: progress per chain and accumulator count with the best per chain
/// marked `*`, then the gain of each count over acc1, then the largest spread seen.
/// Cells without a result are `-`.
pub fn table(results: &RunResults, chains: &[u32], accumulators: &[u32]) -> String {
    // Only the chains something was measured for (a filtered run measures fewer).
    let chains: Vec<u32> = chains
        .iter()
        .copied()
        .filter(|&n| {
            accumulators
                .iter()
                .any(|&k| results.get(Variant::new(n, k)).is_some())
        })
        .collect();
    let chains = chains.as_slice();
    let mut t = String::new();
    let header: String = accumulators
        .iter()
        .map(|k| format!(" | {:>11}", format!("acc{k}")))
        .collect();
    t.push_str(&format!(
        "progress (mean loop iterations per warp; * = best of its chain) [{}]\n",
        results.source
    ));
    t.push_str(&format!("chain{header}\n"));
    for &n in chains {
        let row: Vec<Option<f64>> = accumulators
            .iter()
            .map(|&k| results.get(Variant::new(n, k)).map(|r| r.mean_progress))
            .collect();
        let best = row.iter().flatten().copied().fold(f64::NAN, f64::max);
        t.push_str(&format!("{n:>5}"));
        for p in &row {
            let cell = match p {
                Some(p) if *p == best => format!("{}*", thousands(*p)),
                Some(p) => format!("{} ", thousands(*p)),
                None => "- ".to_string(),
            };
            t.push_str(&format!(" | {cell:>11}"));
        }
        t.push('\n');
    }
    t.push_str(&format!("\ngain over acc1\nchain{header}\n"));
    for &n in chains {
        let base = results.get(Variant::new(n, 1)).map(|r| r.mean_progress);
        t.push_str(&format!("{n:>5}"));
        for &k in accumulators {
            let cell = match (base, results.get(Variant::new(n, k))) {
                (Some(b), Some(r)) if b > 0.0 => {
                    format!("{:+.1}%", (r.mean_progress / b - 1.0) * 100.0)
                }
                _ => "-".to_string(),
            };
            t.push_str(&format!(" | {cell:>11}"));
        }
        t.push('\n');
    }
    let spread = results
        .variants
        .iter()
        .filter_map(|r| r.summary.map(|s| (s.relative_spread, &r.name)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((s, name)) = spread {
        t.push_str(&format!(
            "\nlargest relative spread (max-min)/mean over warps and repeats: {:.4}% ({name})\n",
            s * 100.0
        ));
    }
    t
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    Passed,
    Failed,
    Ignored,
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

/// Writes `contents` to a temporary file beside `path`, then renames it over `path`, so a
/// reader never sees half a file.
pub fn write_atomic(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{VariantResult, SCHEMA};

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(49078.0), "49,078.0");
        assert_eq!(thousands(999.94), "999.9");
        assert_eq!(thousands(1234567.25), "1,234,567.2");
        assert_eq!(thousands(-1000.0), "-1,000.0");
    }

    #[test]
    fn table_marks_the_best_per_chain_and_gives_gains() {
        let r = RunResults {
            schema: SCHEMA,
            mode: Default::default(),
            profile: "p".into(),
            source: "test".into(),
            environment: None,
            variants: vec![
                VariantResult::recorded(Variant::new(7, 1), 100.0, None),
                VariantResult::recorded(Variant::new(7, 2), 150.0, None),
            ],
            sass_unavailable: None,
            timings: None,
        };
        let t = table(&r, &[7, 13], &[1, 2, 4]);
        assert!(
            !t.contains("   13 |"),
            "chains without results are left out: {t}"
        );
        assert!(t.contains("150.0*"), "{t}");
        assert!(t.contains("100.0 "), "{t}");
        assert!(t.contains("+50.0%"), "{t}");
        assert!(t.lines().nth(2).unwrap().trim_end().ends_with('-'), "{t}");
    }

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
            ],
        );
        assert!(xml.contains("tests=\"3\""), "{xml}");
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("skipped=\"1\""), "{xml}");
        assert!(xml.contains("NVIDIA &lt;H200&gt;"), "{xml}");
        assert!(xml.contains("no CUDA driver"), "{xml}");
        assert!(xml.contains("table &amp; more"), "{xml}");
    }

    #[test]
    fn atomic_write_replaces_the_file_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("accprobe-report-{}", std::process::id()));
        let path = dir.join("sub/junit.xml");
        write_atomic(&path, "one").unwrap();
        write_atomic(&path, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let left: Vec<_> = std::fs::read_dir(path.parent().unwrap()).unwrap().collect();
        assert_eq!(left.len(), 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
