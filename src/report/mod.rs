//! Stage 7 of the pipeline: report. The study's table as text and Markdown (here), the
//! JUnit file (`junit`) and its one-line failure messages (`message`). Every text from a
//! file or a device goes through [`crate::text`] on its way out.

use crate::model::results::RunResults;
use crate::model::settings::ProbeSettings;
use crate::model::variant::{Sink, Variant};

pub mod junit;
pub mod message;

use crate::text;

/// `49078.0` -> `49,078.0`.
pub(crate) fn thousands(x: f64) -> String {
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
pub(crate) fn grid(
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
/// marked `*`, then the gain of each count over acc1, then the largest spread seen. A
/// run the contention checks found disturbed says so in its title ("measured under
/// contention, not judged"): its figures are not the GPU's.
/// Cells without a result are `-`. Text from the results file (its source, a variant's
/// name) goes through [`text::line`]: the table is printed to a terminal.
pub fn table(results: &RunResults, chains: &[u32], accumulators: &[u32]) -> String {
    let g = grid(results, chains, accumulators, Sink::A);
    let (progress, gain) = progress_and_gain(&g, accumulators);
    let h = header(accumulators);
    let disturbed = results
        .contention
        .as_ref()
        .map_or(0, |c| c.contaminated.len());
    let source = match disturbed {
        0 => text::line(&results.source).into_owned(),
        n => format!(
            "{} under contention, not judged: {n} of {} variants disturbed",
            text::line(&results.source),
            results.variants.len()
        ),
    };
    let mut t = format!(
        "progress (mean loop iterations per warp; * = best of its chain) [{source}]\n{}",
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
            s * 100.0,
            name = text::line(name)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::results::{VariantResult, SCHEMA};

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
            settings: None,
            profile: "p".into(),
            source: "test".into(),
            environment: None,
            variants: vec![
                VariantResult::recorded(Variant::new(7, 1), 100.0, None),
                VariantResult::recorded(Variant::new(7, 2), 150.0, None),
            ],
            sass_unavailable: None,
            sass_unreadable: None,
            contention: None,
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
        assert!(
            t.starts_with(
                "progress (mean loop iterations per warp; * = best of its chain) [test]\n"
            ),
            "{t}"
        );
        let mut busy = r.clone();
        let mut c = crate::model::results::Contention::default();
        c.contaminated
            .insert("chain7_acc2_effective2".into(), "GPU busy: PID 1".into());
        busy.contention = Some(c);
        let t = table(&busy, &[7], &[1, 2]);
        assert!(
            t.lines()
                .next()
                .unwrap()
                .ends_with("[test under contention, not judged: 1 of 2 variants disturbed]"),
            "{t}"
        );
    }
}
