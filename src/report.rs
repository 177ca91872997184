//! Stage 7 of the pipeline: report. The study's table as text, and the JUnit file.

use crate::profile::ProbeSettings;
use crate::results::RunResults;
use crate::variant::{Sink, Variant};
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

/// Mean progress of one sink mode, per chain (rows, only chains with any result) and
/// accumulator count (columns).
pub fn grid(
    results: &RunResults,
    chains: &[u32],
    accumulators: &[u32],
    sink: Sink,
) -> Vec<(u32, Vec<Option<f64>>)> {
    chains
        .iter()
        .map(|&n| {
            let row = accumulators
                .iter()
                .map(|&k| {
                    results
                        .get(Variant::new(n, k).with_sink(sink))
                        .map(|r| r.mean_progress)
                })
                .collect::<Vec<_>>();
            (n, row)
        })
        .filter(|(_, row)| row.iter().any(Option::is_some))
        .collect()
}

fn best(row: &[Option<f64>]) -> f64 {
    row.iter().flatten().copied().fold(f64::NAN, f64::max)
}

/// Rows of cells: progress with the best of its chain marked `*`, then the gain of each
/// count over acc1 (when acc1 was measured).
fn progress_and_gain(
    grid: &[(u32, Vec<Option<f64>>)],
    accumulators: &[u32],
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let acc1 = accumulators.iter().position(|&k| k == 1);
    let mut progress = Vec::new();
    let mut gain = Vec::new();
    for (n, row) in grid {
        let b = best(row);
        let mut p = vec![n.to_string()];
        let mut g = vec![n.to_string()];
        for cell in row {
            p.push(match cell {
                Some(x) if *x == b => format!("{}*", thousands(*x)),
                Some(x) => thousands(*x),
                None => "-".into(),
            });
            g.push(match (acc1.and_then(|i| row[i]), cell) {
                (Some(base), Some(x)) if base > 0.0 => format!("{:+.1}%", (x / base - 1.0) * 100.0),
                _ => "-".into(),
            });
        }
        progress.push(p);
        gain.push(g);
    }
    (progress, gain)
}

fn text_grid(header: &[String], rows: &[Vec<String>]) -> String {
    let mut t = format!("{:>5}", header[0]);
    for h in &header[1..] {
        t.push_str(&format!(" | {h:>11}"));
    }
    t.push('\n');
    for r in rows {
        t.push_str(&format!("{:>5}", r[0]));
        for c in &r[1..] {
            t.push_str(&format!(" | {c:>11}"));
        }
        t.push('\n');
    }
    t
}

/// A Markdown table (header row first).
pub fn markdown_grid(header: &[String], rows: &[Vec<String>]) -> String {
    let mut t = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        " --- |".repeat(header.len())
    );
    for r in rows {
        t.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    t
}

fn header(accumulators: &[u32]) -> Vec<String> {
    std::iter::once("chain".to_string())
        .chain(accumulators.iter().map(|k| format!("acc{k}")))
        .collect()
}

/// The study's table: progress per chain and accumulator count with the best per chain
/// marked `*`, then the gain of each count over acc1, then the largest spread seen.
/// Cells without a result are `-`.
pub fn table(results: &RunResults, chains: &[u32], accumulators: &[u32]) -> String {
    let g = grid(results, chains, accumulators, Sink::A);
    let (progress, gain) = progress_and_gain(&g, accumulators);
    let h = header(accumulators);
    let mut t = format!(
        "progress (mean loop iterations per warp; * = best of its chain) [{}]\n{}",
        results.source,
        text_grid(&h, &progress)
    );
    t.push_str(&format!("\ngain over acc1\n{}", text_grid(&h, &gain)));
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

/// The study's table as Markdown, for one sink mode: progress (best marked) and gain.
pub fn markdown_table(
    results: &RunResults,
    chains: &[u32],
    accumulators: &[u32],
    sink: Sink,
) -> String {
    let g = grid(results, chains, accumulators, sink);
    let (progress, gain) = progress_and_gain(&g, accumulators);
    let h = header(accumulators);
    format!(
        "{}\nGain over acc1:\n\n{}",
        markdown_grid(&h, &progress),
        markdown_grid(&h, &gain)
    )
}

/// One text table per sink mode (A included, at the sink-isolation counts), with the best
/// K of each chain, so the modes can be compared.
pub fn sink_tables(results: &RunResults, probe: &ProbeSettings) -> String {
    let ks = &probe.sink_accumulators;
    let mut t = String::new();
    for m in std::iter::once(Sink::A).chain(probe.sink_modes.iter().copied()) {
        let g = grid(results, &probe.chains, ks, m);
        let (progress, _) = progress_and_gain(&g, ks);
        t.push_str(&format!(
            "sink mode {} ({})\n{}\n",
            m.letter(),
            m.describe(),
            text_grid(&header(ks), &progress)
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
