//! `cargo xtask history trend VARIANT`: the variant's median run after run as an SVG chart
//! (one series per driver and NVRTC, so a toolchain change shows as a change of marker),
//! with the profile's baseline and its tolerance band, and the same as a table.

use super::{failed, or_dash, runs, short, Filter, Tolerances};
use crate::report::charts::{draw_line, ticks_at, Chart, COLOURS, LOOKS};
use crate::report::frame::{Area, Canvas, DrawError, Entry, Look, Marker, MARGIN};
use crate::Done;
use accprobe::history::{read, Run, Store};
use accprobe::text::line;
use accprobe::text::Shown;
use plotters::prelude::*;
use std::path::Path;

/// One run's point: its place in the series, its median and what it ran with.
pub struct Point<'a> {
    pub index: usize,
    pub median: f64,
    pub run: &'a Run,
}

/// A run's toolchain, as the chart's legend names it.
fn toolchain(r: &Run) -> String {
    format!(
        "driver {} / NVRTC {}",
        or_dash(r.driver.as_deref()),
        or_dash(r.nvrtc.as_deref())
    )
}

/// How the baseline is drawn: thin, black, dashed, crosses.
const BASELINE_LOOK: Look = Look {
    dash: Some((6, 4)),
    width: 1,
    marker: Marker::Cross,
};

/// The tolerance band `b` ± `t` (relative) and the baseline `b` across `(x0, x1)`, as
/// `entry` says.
fn draw_baseline<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    root: &Area<'b>,
    (x0, x1): (f64, f64),
    (b, t): (f64, f64),
    entry: &Entry,
) -> Result<(), DrawError> {
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x0, b * (1.0 - t)), (x1.max(x0 + 0.5), b * (1.0 + t))],
            GREEN.mix(0.15).filled(),
        )))
        .map_err(DrawError::of)?;
    draw_line(chart, root, &[(x0, b), (x1, b)], entry)
}

/// The runs of `points` grouped by toolchain, in order of first appearance.
fn by_toolchain(points: &[Point]) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let name = toolchain(p.run);
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.1.push((p.index as f64, p.median)),
            None => groups.push((name, vec![(p.index as f64, p.median)])),
        }
    }
    groups
}

/// The chart of `points` (not empty): `baseline` with its relative `tolerance` as a band,
/// the title over the plot and the legend under it, as the report's charts.
pub fn chart(
    svg: &mut String,
    variant: &str,
    points: &[Point],
    baseline: Option<(f64, f64)>,
) -> Result<(), DrawError> {
    let mut ys: Vec<f64> = points.iter().map(|p| p.median).collect();
    if let Some((b, t)) = baseline {
        ys.extend([b * (1.0 - t), b * (1.0 + t)]);
    }
    let (lo, hi) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
    let pad = ((hi - lo) * 0.1).max(hi.abs() * 1e-4).max(1e-9);
    // At most about a dozen ticks, at run numbers.
    let step = points.len().div_ceil(12).max(1);
    let mut ticks: Vec<f64> = points
        .iter()
        .step_by(step)
        .map(|p| p.index as f64)
        .collect();
    ticks.push(points[points.len() - 1].index as f64);
    ticks.dedup();
    let groups = by_toolchain(points);
    let mut entries: Vec<Entry> = groups
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            Entry::new(
                COLOURS[i % COLOURS.len()],
                LOOKS[i % LOOKS.len()],
                name.clone(),
            )
        })
        .collect();
    if let Some((b, t)) = baseline {
        entries.push(Entry::new(
            BLACK,
            BASELINE_LOOK,
            format!("baseline {b:.1}, tolerance ±{:.2}% (the band)", t * 100.0),
        ));
    }
    let title = format!("{}: median progress per run", line(variant));
    let canvas = Canvas::new(svg, &title, 440, &entries)?;
    let mut chart = ChartBuilder::on(&canvas.plot)
        .margin(MARGIN)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(ticks_at(&ticks, 0.03), (lo - pad)..(hi + pad))
        .map_err(DrawError::of)?;
    chart
        .configure_mesh()
        .x_desc("run (oldest first)")
        .y_desc("median loop iterations per warp")
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{:.0}", x + 1.0))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(DrawError::of)?;
    if let (Some(bt), Some(entry)) = (baseline, entries.last()) {
        let span = (
            points[0].index as f64,
            points[points.len() - 1].index as f64,
        );
        draw_baseline(&mut chart, &canvas.root, span, bt, entry)?;
    }
    for ((_, pts), e) in groups.iter().zip(&entries) {
        draw_line(&mut chart, &canvas.root, pts, e)?;
    }
    canvas.finish()
}

pub fn run(dir: &Path, s: &mut dyn Store, variant: &str, filter: &Filter, out: &Path) -> Done {
    let runs = runs(s, filter)?;
    let rows = read::variants(s, Some(variant)).map_err(failed)?;
    let points: Vec<Point> = runs
        .iter()
        .filter_map(|r| {
            rows.iter()
                .find(|v| v.run_id == r.id)
                .map(|v| (r, v.median))
        })
        .enumerate()
        .map(|(index, (run, median))| Point { index, median, run })
        .collect();
    let Some(last) = points.last() else {
        return Err(format!("{variant}: no run of the history holds it").into());
    };
    let profile = last.run.profile.clone();
    let mut tol = Tolerances::new(dir);
    let baseline = tol
        .baselines(&profile)
        .and_then(|b| b.progress.get(variant).copied())
        .map(|b| (b, tol.of(&profile, variant)));
    for p in &points {
        let against = baseline.map_or(String::new(), |(b, _)| {
            format!(" ({:+.3}% of the baseline)", (p.median / b - 1.0) * 100.0)
        });
        say!(
            "{:>4} {} {} {:>12.1}{against}  {}",
            p.index + 1,
            short(&p.run.id),
            or_dash(p.run.measured_at.as_deref()),
            p.median,
            toolchain(p.run)
        );
    }
    let mut svg = String::new();
    chart(&mut svg, variant, &points, baseline).map_err(|e| e.to_string())?;
    let file = out.join(format!("trend-{}.svg", crate::report::slug(variant)));
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.shown()))?;
    accprobe::output::write_atomic(&file, &svg)
        .map_err(|e| format!("cannot write {}: {e}", file.shown()))?;
    say!("chart: {}", file.shown());
    Ok(())
}
