//! The report's history section: for each input, the runs the results history holds of
//! its GPU model, profile and mode, the change points of every variant over them (the
//! Mann-Whitney window test of `cargo xtask history changes`), and trend charts of the
//! variants worth a look: those asked for, those with a change point, and the few whose
//! latest median is farthest from its baseline.

use super::{chart_error, slug, unique_name, write_file, Input, ReportError};
use crate::history::changes::describe;
use crate::history::trend::{chart, Point};
use accprobe::history::changes::{changes, Change, Method};
use accprobe::history::{read, Run, Store, StoreError};
use accprobe::text::{markdown, markdown_code};
use std::collections::BTreeMap;
use std::path::Path;

/// The history a report reads, and the variants charted whatever they show.
pub struct History {
    pub store: Box<dyn Store>,
    pub asked: Vec<String>,
}

/// How many variants, farthest from their baseline in the latest run, are charted beside
/// those asked for and those with a change point.
const FARTHEST: usize = 3;

/// One variant's series over the input's runs: (run index, median), oldest first.
type Series = Vec<(usize, f64)>;

/// The runs of `h` of `input`'s GPU model, profile and mode, oldest first, and each
/// variant's series over them.
fn series_of(
    h: &mut History,
    input: &Input,
) -> Result<(Vec<Run>, BTreeMap<String, Series>), StoreError> {
    let r = &input.results;
    let gpu = r.environment.as_ref().map(|e| e.gpu_name.clone());
    let mode = r.mode.name();
    let mut runs = read::runs(h.store.as_mut())?;
    runs.retain(|run| run.gpu_name == gpu && run.profile == r.profile && run.mode == mode);
    let order: BTreeMap<&str, usize> = runs
        .iter()
        .enumerate()
        .map(|(i, x)| (x.id.as_str(), i))
        .collect();
    let mut series: BTreeMap<String, Series> = BTreeMap::new();
    for v in read::variants(h.store.as_mut(), None)? {
        if let Some(&i) = order.get(v.run_id.as_str()) {
            series.entry(v.name).or_default().push((i, v.median));
        }
    }
    for s in series.values_mut() {
        s.sort_by_key(|p| p.0);
    }
    Ok((runs, series))
}

/// Why a variant is charted, as its caption says.
enum Why {
    Asked,
    Changed,
    Far(f64),
}

/// The variants to chart, in that order: asked, changed, farthest from the baseline.
fn chosen(
    input: &Input,
    h: &History,
    series: &BTreeMap<String, Series>,
    found: &BTreeMap<&str, Vec<Change>>,
    last: usize,
) -> Vec<(String, Why)> {
    let mut out: Vec<(String, Why)> = h.asked.iter().map(|v| (v.clone(), Why::Asked)).collect();
    for v in found.keys() {
        out.push((v.to_string(), Why::Changed));
    }
    let baselines = input.profile.baselines.as_ref();
    let mut far: Vec<(String, f64)> = series
        .iter()
        .filter_map(|(name, s)| {
            let &(at, m) = s.last()?;
            let b = *baselines?.progress.get(name)?;
            (at == last && b > 0.0).then(|| (name.clone(), m / b - 1.0))
        })
        .collect();
    far.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()).then(a.0.cmp(&b.0)));
    out.extend(
        far.into_iter()
            .take(FARTHEST)
            .map(|(v, d)| (v, Why::Far(d))),
    );
    let mut seen = Vec::new();
    out.retain(|(v, _)| {
        let new = !seen.contains(v);
        seen.push(v.clone());
        new
    });
    out
}

/// The section of `input`: the runs, the change points, the trend charts (written into
/// `out`, named uniquely among `used`).
pub(super) fn section(
    h: &mut History,
    input: &Input,
    out: &Path,
    used: &mut Vec<String>,
) -> Result<String, ReportError> {
    let (runs, series) = series_of(h, input).map_err(|e| ReportError::History(e.to_string()))?;
    let mut md = format!("### History of {}\n\n", markdown(&input.label));
    if runs.len() < 2 {
        md.push_str(&format!(
            "The history ({}) holds {} run(s) of this GPU, profile and mode: a trend needs two.\n\n",
            markdown(h.store.name()),
            runs.len()
        ));
        return Ok(md);
    }
    let method = Method::default();
    let refs: Vec<&Run> = runs.iter().collect();
    let mut found: BTreeMap<&str, Vec<Change>> = BTreeMap::new();
    for (name, s) in &series {
        let medians: Vec<f64> = s.iter().map(|p| p.1).collect();
        let c = changes(&medians, &method);
        if !c.is_empty() {
            found.insert(name, c);
        }
    }
    md.push_str(&intro(h, &runs, &method, &found, &series, &refs));
    for (variant, why) in chosen(input, h, &series, &found, runs.len() - 1) {
        md.push_str(&trend(input, &variant, &why, &series, &runs, out, used)?);
    }
    Ok(md)
}

/// The section's first lines: which runs, which method, every change point found.
fn intro(
    h: &History,
    runs: &[Run],
    m: &Method,
    found: &BTreeMap<&str, Vec<Change>>,
    series: &BTreeMap<String, Series>,
    refs: &[&Run],
) -> String {
    let when = |r: &Run| markdown(r.measured_at.as_deref().unwrap_or("-"));
    let mut md = format!(
        "{} runs in {}, measured {} to {}. Change points (Mann-Whitney window test, window {} runs, alpha {}, min shift {:.2}%): ",
        runs.len(),
        markdown(h.store.name()),
        when(&runs[0]),
        when(&runs[runs.len() - 1]),
        m.window,
        m.alpha,
        m.min_shift * 100.0
    );
    if found.is_empty() {
        md.push_str("none.\n\n");
        return md;
    }
    md.push_str(&format!(
        "{}.\n\n",
        found.values().map(Vec::len).sum::<usize>()
    ));
    for (name, cs) in found {
        let those: Vec<&Run> = series[*name].iter().map(|p| refs[p.0]).collect();
        for c in cs {
            md.push_str(&format!("- {}\n", markdown(&describe(name, c, &those))));
        }
    }
    md.push('\n');
    md
}

/// One trend chart, written, and the Markdown that shows it.
fn trend(
    input: &Input,
    variant: &str,
    why: &Why,
    series: &BTreeMap<String, Series>,
    runs: &[Run],
    out: &Path,
    used: &mut Vec<String>,
) -> Result<String, ReportError> {
    let Some(s) = series.get(variant) else {
        return Ok(format!(
            "{}: no run of the history holds it.\n\n",
            markdown_code(variant)
        ));
    };
    let points: Vec<Point> = s
        .iter()
        .enumerate()
        .map(|(index, &(i, median))| Point {
            index,
            median,
            run: &runs[i],
        })
        .collect();
    let baseline = input.profile.baselines.as_ref().and_then(|b| {
        let p = *b.progress.get(variant)?;
        Some((p, b.tolerance_of(variant)))
    });
    let name = unique_name(
        used,
        &format!("trend-{}-{}", slug(&input.label), slug(variant)),
        "svg",
    );
    let mut svg = String::new();
    chart(&mut svg, variant, &points, baseline).map_err(|e| chart_error(&out.join(&name), e))?;
    write_file(&out.join(&name), &svg)?;
    let because = match why {
        Why::Asked => "asked for with --trend".to_string(),
        Why::Changed => "a change point".to_string(),
        Why::Far(d) => format!("{:+.3}% of its baseline in the latest run", d * 100.0),
    };
    Ok(format!(
        "{} ({because}):\n\n![trend of {}]({name})\n\n",
        markdown_code(variant),
        markdown(variant)
    ))
}
