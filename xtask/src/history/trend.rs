//! `cargo xtask history trend VARIANT`: the variant's median run after run as an SVG chart
//! (one series per driver and NVRTC, so a toolchain change shows as a change of marker),
//! with the profile's baseline and its tolerance band, and the same as a table.

use super::{failed, or_dash, runs, short, Filter, Tolerances};
use crate::report::charts::{
    draw_line, legend, ticks_at, Chart, DrawError, Look, Marker, COLOURS, LOOKS,
};
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

/// The tolerance band `b` ± `t` (relative) and the baseline `b` across `(x0, x1)`.
fn draw_baseline<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    (x0, x1): (f64, f64),
    b: f64,
    t: f64,
) -> Result<(), DrawError> {
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(x0, b * (1.0 - t)), (x1.max(x0 + 0.5), b * (1.0 + t))],
            GREEN.mix(0.15).filled(),
        )))
        .map_err(DrawError::of)?
        .label(format!("tolerance ±{:.2}%", t * 100.0))
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 24, y + 5)], GREEN.mix(0.3).filled()));
    let look = Look {
        dash: Some((6, 4)),
        width: 1,
        marker: Marker::Cross,
    };
    draw_line(
        chart,
        &[(x0, b), (x1, b)],
        BLACK,
        look,
        format!("baseline {b:.1}"),
    )
}

/// The chart of `points` (not empty): `baseline` with its relative `tolerance` as a band.
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
    let xs = ticks_at(&ticks, 0.03);
    let root = SVGBackend::with_string(svg, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(DrawError::of)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{}: median progress per run", line(variant)),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(xs, (lo - pad)..(hi + pad))
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
    if let Some((b, t)) = baseline {
        let span = (
            points[0].index as f64,
            points[points.len() - 1].index as f64,
        );
        draw_baseline(&mut chart, span, b, t)?;
    }
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in points {
        let name = toolchain(p.run);
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.1.push((p.index as f64, p.median)),
            None => groups.push((name, vec![(p.index as f64, p.median)])),
        }
    }
    for (i, (name, pts)) in groups.into_iter().enumerate() {
        draw_line(
            &mut chart,
            &pts,
            COLOURS[i % COLOURS.len()],
            LOOKS[i % LOOKS.len()],
            name,
        )?;
    }
    legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    root.present().map_err(DrawError::of)
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
