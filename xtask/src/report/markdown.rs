//! The report's Markdown: the inputs it was made from, each input's tables, the
//! invariants side by side and, across NVRTC versions, the toolchain comparison.

use super::Input;
use accprobe::model::variant::Sink;
use accprobe::report::{markdown_grid, markdown_table};
use accprobe::text::{markdown, markdown_code};
use accprobe::verdict::{self, Outcome};

/// The header: what generated the page, the files it was made from, the gain chart.
pub(super) fn intro(inputs: &[Input]) -> String {
    let mut md = String::from("# accprobe report\n\n");
    md.push_str(&format!(
        "From {}. Progress is the mean number of loop iterations per warp in the clock64 budget.\n\n",
        inputs.iter().map(|i| markdown(&i.file.display().to_string())).collect::<Vec<_>>().join(", ")
    ));
    md.push_str("![acc2/acc1 gain against chain length](gain.svg)\n\n");
    md
}

/// One input's section: its environment, the study's table, its progress chart (the file
/// `chart` beside report.md) and a table per sink mode.
pub(super) fn section(i: &Input, chart: &str) -> String {
    let mut md = String::new();
    let p = &i.profile.probe;
    md.push_str(&format!("## {}\n\n", markdown(&i.label)));
    if let Some(e) = &i.results.environment {
        md.push_str(&format!(
            "{}, compute capability {}, {} SMs, driver {}, CUDA {}, NVRTC {}, SM clock {} MHz rated / {} MHz measured, measured {} ({:?} mode), profile {}.\n\n",
            markdown(&e.gpu_name),
            markdown(&e.compute_capability.to_string()),
            e.sm_count,
            markdown(&e.driver_version),
            markdown(&e.cuda_driver_api.to_string()),
            markdown(&e.nvrtc_version),
            e.sm_clock_rated_mhz.map_or("?".into(), |c| format!("{c:.0}")),
            e.sm_clock_measured_mhz.map_or("?".into(), |c| format!("{c:.0}")),
            markdown(&e.date.to_string()),
            i.results.mode,
            markdown_code(&i.profile.name)
        ));
    }
    md.push_str(&markdown_table(
        &i.results,
        &p.chains,
        &p.accumulators,
        Sink::A,
    ));
    md.push_str(&format!(
        "\n![progress relative to acc1, {}]({chart})\n\n",
        markdown(&i.label)
    ));
    for &m in &p.sink_modes {
        md.push_str(&format!("Sink mode {} ({}):\n\n", m.letter(), m.describe()));
        md.push_str(&markdown_table(
            &i.results,
            &p.chains,
            &p.sink_accumulators,
            m,
        ));
        md.push('\n');
    }
    md
}

/// The invariant and policy cases of every input, a column per input.
pub(super) fn invariants(inputs: &[Input]) -> String {
    let mut md = String::new();
    let mut names: Vec<String> = Vec::new();
    for i in inputs {
        for c in accprobe::verdict::cases::cases(&i.profile) {
            if (c.name.starts_with("invariant::") || c.name.starts_with("policy::"))
                && !names.contains(&c.name)
            {
                names.push(c.name.clone());
            }
        }
    }
    let header: Vec<String> = std::iter::once("case".to_string())
        .chain(inputs.iter().map(|i| markdown(&i.label)))
        .collect();
    // Each input's verdicts by case name, evaluated once.
    let verdicts: Vec<std::collections::BTreeMap<String, String>> = inputs
        .iter()
        .map(|i| {
            accprobe::verdict::cases::cases(&i.profile)
                .iter()
                .filter(|c| names.contains(&c.name))
                .map(|c| {
                    (
                        c.name.clone(),
                        verdict_cell(
                            &verdict::judge_with(c, &i.profile, &i.results, i.picks.as_ref())
                                .outcome,
                        ),
                    )
                })
                .collect()
        })
        .collect();
    let rows: Vec<Vec<String>> = names
        .iter()
        .map(|n| {
            std::iter::once(markdown_code(n))
                .chain(
                    verdicts
                        .iter()
                        .map(|v| v.get(n).cloned().unwrap_or_else(|| "-".into())),
                )
                .collect()
        })
        .collect();
    md.push_str("## The invariants side by side\n\n");
    md.push_str(&markdown_grid(&header, &rows));
    md
}

/// A verdict in a cell: a failure bold, with its measured figure against the expected
/// one where the case judges one ([`accprobe::verdict::Failure::figures_text`]).
fn verdict_cell(o: &Outcome) -> String {
    match o {
        Outcome::Fail(f) => match f.figures_text() {
            Some(figures) => format!("**fails**: {}", markdown(&figures)),
            None => "**fails**".into(),
        },
        o => crate::toolchains::class(o).into(),
    }
}

/// When the inputs were compiled by more than one NVRTC (what `cargo xtask toolchains
/// --gpu` measures): `cargo xtask toolchains`'s side-by-side comparison (progress per
/// toolchain, loop bodies that changed, cases that flip), under one heading; else nothing.
pub(super) fn toolchain_view(inputs: &[Input]) -> String {
    let nvrtc = |i: &Input| {
        i.results
            .environment
            .as_ref()
            .map(|e| e.nvrtc_version.clone())
    };
    let mut versions: Vec<Option<String>> = inputs.iter().map(nvrtc).collect();
    versions.dedup();
    if versions.len() < 2 || versions.iter().any(Option::is_none) {
        return String::new();
    }
    let runs: Vec<crate::toolchains::Measured> = inputs
        .iter()
        .map(|i| crate::toolchains::Measured {
            toolchain: format!("NVRTC {} ({})", nvrtc(i).unwrap_or_default(), i.label),
            outcome: Ok(i.results.clone()),
        })
        .collect();
    let compared = crate::toolchains::compare(&inputs[0].profile, &runs);
    let mut out = String::from("\n## Toolchains side by side\n");
    for line in compared.lines().skip_while(|l| !l.starts_with("## ")) {
        match line.strip_prefix("## ") {
            Some(h) => out.push_str(&format!("\n### {h}")),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::verdict_cell;
    use accprobe::verdict::failure::{Bound, Expected};
    use accprobe::verdict::{Failure, Outcome};

    #[test]
    fn a_failed_cell_shows_the_failures_figures_from_its_structure() {
        let peak = Failure::new("acc2 is not the peak: chain 7: ...").figures(
            151.25,
            "progress",
            Expected::new(144.5, "progress", Bound::AtMost, Some(0.02)),
        );
        assert_eq!(
            verdict_cell(&peak.into()),
            "**fails**: 151.2 progress, expected at most 144.5 ±2.00%"
        );
        let missing = Failure::new("no acc2 result at chain 7");
        assert_eq!(verdict_cell(&missing.into()), "**fails**");
        assert_eq!(verdict_cell(&Outcome::Pass("holds".into())), "holds");
    }
}
