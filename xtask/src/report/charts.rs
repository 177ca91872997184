//! The report's SVG charts: progress against K per input, and acc2/acc1 gain against
//! chain length for every input, the study's numbers as reference in each, each in its
//! frame (`frame.rs`: the title over the plot, the legend under it).

use super::frame::{draw_markers, Area, Canvas, DrawError, Entry, Look, Marker, MARGIN};
use super::Input;
use accprobe::model::results::RunResults;
use accprobe::model::variant::Variant;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

pub(crate) const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// An f64 axis with ticks exactly at the given values (the measured K or N), not at
/// round numbers. (plotters' own `with_key_points` does not keep f64's label formatter.)
pub(crate) struct Ticks {
    inner: RangedCoordf64,
    at: Vec<f64>,
}

impl Ranged for Ticks {
    type ValueType = f64;
    type FormatOption = DefaultFormatting;

    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }

    fn key_points<H: KeyPointHint>(&self, _: H) -> Vec<f64> {
        self.at.clone()
    }
}

/// The charts' coordinates: f64 both ways, ticks on x exactly at the measured values.
pub(crate) type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticks, RangedCoordf64>>;

pub(crate) const LOOKS: [Look; 4] = [
    Look {
        dash: None,
        width: 6,
        marker: Marker::Dot,
    },
    Look {
        dash: Some((10, 6)),
        width: 2,
        marker: Marker::Square,
    },
    Look {
        dash: Some((3, 4)),
        width: 2,
        marker: Marker::Triangle,
    },
    Look {
        dash: Some((16, 4)),
        width: 1,
        marker: Marker::Cross,
    },
];

/// The study's reference series: thin, black, short dashes, crosses.
const STUDY_LOOK: Look = Look {
    dash: Some((5, 4)),
    width: 1,
    marker: Marker::Cross,
};

/// Draws `pts` as a line in `e`'s colour and look, its markers on `root` (which the chart
/// is drawn in).
pub(crate) fn draw_line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    root: &Area<'b>,
    pts: &[(f64, f64)],
    e: &Entry,
) -> Result<(), DrawError> {
    let style = e.colour.stroke_width(e.look.width);
    match e.look.dash {
        None => chart.draw_series(LineSeries::new(pts.to_vec(), style)),
        Some((d, g)) => chart.draw_series(DashedLineSeries::new(pts.to_vec(), d, g, style)),
    }
    .map_err(DrawError::of)?;
    let at: Vec<(i32, i32)> = pts.iter().map(|p| chart.backend_coord(p)).collect();
    draw_markers(root, &at, e.colour, e.look)
}

/// An x range that spans `values` with a margin of `pad` (of the span) each side, and
/// ticks exactly at each of `values`.
pub(crate) fn ticks_at(values: &[f64], pad: f64) -> Ticks {
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let margin = ((hi - lo) * pad).max(0.5);
    Ticks {
        inner: ((lo - margin)..(hi + margin)).into(),
        at: values.to_vec(),
    }
}

/// Progress relative to acc1 against K (log2 axis, a tick at each measured K), one line
/// per chain length, the study's table dashed beside it.
pub(super) fn progress_chart(
    svg: &mut String,
    input: &Input,
    study: &RunResults,
) -> Result<(), DrawError> {
    let p = &input.profile.probe;
    let series = |r: &RunResults, n: u32| -> Vec<(f64, f64)> {
        let base = r.get(Variant::new(n, 1)).map(|x| x.mean_progress);
        p.accumulators
            .iter()
            .filter_map(|&k| {
                Some((
                    (k as f64).log2(),
                    r.get(Variant::new(n, k))?.mean_progress / base?,
                ))
            })
            .collect()
    };
    let solid = Look {
        dash: None,
        width: 3,
        marker: Marker::Dot,
    };
    let mut lines: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut entries: Vec<Entry> = Vec::new();
    for (i, &n) in p.chains.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        lines.push(series(&input.results, n));
        entries.push(Entry::new(c, solid, format!("N={n} measured")));
        let reference = series(study, n);
        if !reference.is_empty() {
            lines.push(reference);
            entries.push(Entry::new(
                c,
                STUDY_LOOK,
                format!("N={n} study (docs/study.md)"),
            ));
        }
    }
    let (lo, hi) = lines
        .iter()
        .flatten()
        .fold((f64::MAX, f64::MIN), |(a, b), &(_, y)| (a.min(y), b.max(y)));
    let mut ks: Vec<f64> = p.accumulators.iter().map(|&k| (k as f64).log2()).collect();
    ks.sort_by(f64::total_cmp);
    ks.dedup();
    let title = format!(
        "Progress relative to acc1 vs accumulator count: {}",
        input.label
    );
    let canvas = Canvas::new(svg, &title, 500, &entries)?;
    let mut chart = ChartBuilder::on(&canvas.plot)
        .margin(MARGIN)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(ticks_at(&ks, 0.03), (lo - 0.05)..(hi + 0.05))
        .map_err(DrawError::of)?;
    chart
        .configure_mesh()
        .x_desc("accumulator count K (log scale)")
        .y_desc("progress / progress of acc1 at the same chain")
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{:.0}", 2f64.powf(*x)))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(DrawError::of)?;
    for (pts, e) in lines.iter().zip(&entries) {
        draw_line(&mut chart, &canvas.root, pts, e)?;
    }
    canvas.finish()
}

/// acc2/acc1 against chain length (the axis spans the measured chains, a tick at each):
/// one line per input, each in its own look so that coinciding inputs stay visible, the
/// study's dashed black.
pub(super) fn gain_chart(
    svg: &mut String,
    inputs: &[Input],
    study: &RunResults,
    chains: &[u32],
) -> Result<(), DrawError> {
    let gains = |r: &RunResults| -> Vec<(f64, f64)> {
        chains
            .iter()
            .filter_map(|&n| {
                let a = r.get(Variant::new(n, 2))?.mean_progress;
                let b = r.get(Variant::new(n, 1))?.mean_progress;
                Some((n as f64, a / b))
            })
            .collect()
    };
    let mut lines: Vec<Vec<(f64, f64)>> = inputs.iter().map(|i| gains(&i.results)).collect();
    lines.push(gains(study));
    let mut entries: Vec<Entry> = inputs
        .iter()
        .enumerate()
        .map(|(i, input)| {
            Entry::new(
                COLOURS[i % COLOURS.len()],
                LOOKS[i % LOOKS.len()],
                input.label.clone(),
            )
        })
        .collect();
    entries.push(Entry::new(
        BLACK,
        STUDY_LOOK,
        "study (docs/study.md)".into(),
    ));
    let all: Vec<f64> = lines.iter().flatten().map(|x| x.1).collect();
    let hi = all.iter().copied().fold(1.0, f64::max);
    let lo = all.iter().copied().fold(hi, f64::min);
    let mut ns: Vec<f64> = chains.iter().map(|&n| n as f64).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    let canvas = Canvas::new(svg, "acc2 / acc1 gain vs chain length", 460, &entries)?;
    let mut chart = ChartBuilder::on(&canvas.plot)
        .margin(MARGIN)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(ticks_at(&ns, 0.05), (lo - 0.05).min(0.95)..hi + 0.1)
        .map_err(DrawError::of)?;
    chart
        .configure_mesh()
        .x_desc("chain length N (FFMAs per iteration)")
        .y_desc("progress(acc2) / progress(acc1)")
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(DrawError::of)?;
    for (pts, e) in lines.iter().zip(&entries) {
        draw_line(&mut chart, &canvas.root, pts, e)?;
    }
    canvas.finish()
}
