//! The report's SVG charts: progress against K per input, and acc2/acc1 gain against
//! chain length for every input, the study's numbers as reference in each.

use super::Input;
use accprobe::model::results::RunResults;
use accprobe::model::variant::Variant;
use accprobe::text::line;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

/// What the plotting library said when a chart could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(String);

impl DrawError {
    pub(crate) fn of(e: impl std::fmt::Display) -> DrawError {
        DrawError(e.to_string())
    }
}

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

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Marker {
    Dot,
    Square,
    Triangle,
    Cross,
}

/// How one series is drawn: its dash pattern (`None`: solid), width and marker. Series
/// that coincide (serial and wave agree within 0.5%) stay apart by all three, and by the
/// order they are drawn in: the widest, solid one first, the dashed ones over it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Look {
    pub(crate) dash: Option<(u32, u32)>,
    pub(crate) width: u32,
    pub(crate) marker: Marker,
}

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

/// Draws `pts` as a line in `look` with its markers, labelled in the legend with a swatch
/// of the same dashes, width and marker.
pub(crate) fn draw_line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    pts: &[(f64, f64)],
    c: RGBColor,
    look: Look,
    label: String,
) -> Result<(), DrawError> {
    let style = c.stroke_width(look.width);
    let label = line(&label).into_owned();
    let anno = match look.dash {
        None => chart.draw_series(LineSeries::new(pts.to_vec(), style)),
        Some((d, g)) => chart.draw_series(DashedLineSeries::new(pts.to_vec(), d, g, style)),
    }
    .map_err(DrawError::of)?;
    // A solid swatch is a dash as long as the swatch.
    let (d, g) = look.dash.unwrap_or((24, 0));
    let swatch = move |(x, y): (i32, i32)| {
        EmptyElement::at((x, y)) + DashedPathElement::new(vec![(0, 0), (24, 0)], d, g, style)
    };
    let mark = c.stroke_width(2);
    anno.label(label);
    match look.marker {
        Marker::Dot => anno.legend(move |p| swatch(p) + Circle::new((12, 0), 4, c.filled())),
        Marker::Square => {
            anno.legend(move |p| swatch(p) + Rectangle::new([(8, -4), (16, 4)], mark))
        }
        Marker::Triangle => {
            anno.legend(move |p| swatch(p) + TriangleMarker::new((12, 0), 5, c.filled()))
        }
        Marker::Cross => anno.legend(move |p| swatch(p) + Cross::new((12, 0), 4, mark)),
    };
    let r = if look.width > 4 { 5 } else { 4 };
    match look.marker {
        Marker::Dot => chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, r, c.filled())))
            .map(|_| ()),
        Marker::Square => chart
            .draw_series(
                pts.iter()
                    .map(|&p| EmptyElement::at(p) + Rectangle::new([(-5, -5), (5, 5)], mark)),
            )
            .map(|_| ()),
        Marker::Triangle => chart
            .draw_series(pts.iter().map(|&p| TriangleMarker::new(p, 6, c.filled())))
            .map(|_| ()),
        Marker::Cross => chart
            .draw_series(pts.iter().map(|&p| Cross::new(p, 5, mark)))
            .map(|_| ()),
    }
    .map_err(DrawError::of)
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

/// Draws the legend at `position` over a light background, with a border.
pub(crate) fn legend<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    position: SeriesLabelPosition,
) -> Result<(), DrawError> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(DrawError::of)
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
    let all: Vec<f64> = p
        .chains
        .iter()
        .flat_map(|&n| {
            series(&input.results, n)
                .into_iter()
                .chain(series(study, n))
        })
        .map(|x| x.1)
        .collect();
    let (lo, hi) = all
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &y| (a.min(y), b.max(y)));
    let mut ks: Vec<f64> = p.accumulators.iter().map(|&k| (k as f64).log2()).collect();
    ks.sort_by(f64::total_cmp);
    ks.dedup();
    let root = SVGBackend::with_string(svg, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(DrawError::of)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Progress relative to acc1 vs accumulator count: {}",
                line(&input.label)
            ),
            ("sans-serif", 20),
        )
        .margin(15)
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
    for (i, &n) in p.chains.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        let measured = series(&input.results, n);
        let solid = Look {
            dash: None,
            width: 3,
            marker: Marker::Dot,
        };
        draw_line(&mut chart, &measured, c, solid, format!("N={n} measured"))?;
        let reference = series(study, n);
        if !reference.is_empty() {
            draw_line(
                &mut chart,
                &reference,
                c,
                STUDY_LOOK,
                format!("N={n} study (docs/study.md)"),
            )?;
        }
    }
    legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
    root.present().map_err(DrawError::of)
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
    let all: Vec<f64> = inputs
        .iter()
        .flat_map(|i| gains(&i.results))
        .chain(gains(study))
        .map(|x| x.1)
        .collect();
    let hi = all.iter().copied().fold(1.0, f64::max);
    let lo = all.iter().copied().fold(hi, f64::min);
    let mut ns: Vec<f64> = chains.iter().map(|&n| n as f64).collect();
    ns.sort_by(f64::total_cmp);
    ns.dedup();
    let root = SVGBackend::with_string(svg, (900, 520)).into_drawing_area();
    root.fill(&WHITE).map_err(DrawError::of)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("acc2 / acc1 gain vs chain length", ("sans-serif", 20))
        .margin(15)
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
    for (i, input) in inputs.iter().enumerate() {
        draw_line(
            &mut chart,
            &gains(&input.results),
            COLOURS[i % COLOURS.len()],
            LOOKS[i % LOOKS.len()],
            input.label.clone(),
        )?;
    }
    draw_line(
        &mut chart,
        &gains(study),
        BLACK,
        STUDY_LOOK,
        "study (docs/study.md)".into(),
    )?;
    legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(DrawError::of)
}
