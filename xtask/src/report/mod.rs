//! `cargo xtask report`: a Markdown summary and SVG charts from one or more results files
//! (several GPUs or drivers side by side), with the study's recorded numbers as reference.

use crate::find_profile;
use accprobe::expectations::profile::Profile;
use accprobe::model::results::RunResults;
use accprobe::model::variant::{Sink, Variant};
use accprobe::report::text::{line, markdown, markdown_code};
use accprobe::report::{markdown_grid, markdown_table, write_atomic};
use accprobe::verdict::{self, Outcome};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use std::path::{Path, PathBuf};

/// A results file with the profile it is judged against and a short label.
struct Input {
    label: String,
    file: PathBuf,
    results: RunResults,
    profile: Profile,
}

fn label(r: &RunResults, file: &Path) -> String {
    match &r.environment {
        Some(e) => format!(
            "{} / {} mode",
            e.fingerprint(),
            match r.mode {
                accprobe::model::settings::Mode::Serial => "serial",
                accprobe::model::settings::Mode::Wave => "wave",
            }
        ),
        None => file
            .file_stem()
            .map_or("results".into(), |s| s.to_string_lossy().into_owned()),
    }
}

/// The longest slug a chart's file name is built from: a label may hold a whole input
/// path (see [`distinguish`]), and a file name component has at most 255 bytes.
const SLUG_CHARS: usize = 48;

/// `s` as a short file name component: lowercase ASCII letters and digits joined by `-`,
/// at most [`SLUG_CHARS`] characters.
fn slug(s: &str) -> String {
    let full = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect::<String>()
        .split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    full.chars()
        .take(SLUG_CHARS)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// An f64 axis with ticks exactly at the given values (the measured K or N), not at
/// round numbers. (plotters' own `with_key_points` does not keep f64's label formatter.)
struct Ticks {
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
type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticks, RangedCoordf64>>;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Marker {
    Dot,
    Square,
    Triangle,
    Cross,
}

/// How one series is drawn: its dash pattern (`None`: solid), width and marker. Series
/// that coincide (serial and wave agree within 0.5%) stay apart by all three, and by the
/// order they are drawn in: the widest, solid one first, the dashed ones over it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Look {
    dash: Option<(u32, u32)>,
    width: u32,
    marker: Marker,
}

const LOOKS: [Look; 4] = [
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
fn draw_line<'a, 'b: 'a>(
    chart: &mut Chart<'a, 'b>,
    pts: &[(f64, f64)],
    c: RGBColor,
    look: Look,
    label: String,
) -> Result<(), String> {
    let style = c.stroke_width(look.width);
    let label = line(&label).into_owned();
    let anno = match look.dash {
        None => chart.draw_series(LineSeries::new(pts.to_vec(), style)),
        Some((d, g)) => chart.draw_series(DashedLineSeries::new(pts.to_vec(), d, g, style)),
    }
    .map_err(|e| e.to_string())?;
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
    .map_err(|e| e.to_string())
}

/// An x range that spans `values` with a margin of `pad` (of the span) each side, and
/// ticks exactly at each of `values`.
fn ticks_at(values: &[f64], pad: f64) -> Ticks {
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
fn progress_chart(svg: &mut String, input: &Input, study: &RunResults) -> Result<(), String> {
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
    root.fill(&WHITE).map_err(|e| e.to_string())?;
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
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("accumulator count K (log scale)")
        .y_desc("progress / progress of acc1 at the same chain")
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{:.0}", 2f64.powf(*x)))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(|e| e.to_string())?;
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

/// acc2/acc1 against chain length (the axis spans the measured chains, a tick at each):
/// one line per input, each in its own look so that coinciding inputs stay visible, the
/// study's dashed black.
fn gain_chart(
    svg: &mut String,
    inputs: &[Input],
    study: &RunResults,
    chains: &[u32],
) -> Result<(), String> {
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
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let mut chart = ChartBuilder::on(&root)
        .caption("acc2 / acc1 gain vs chain length", ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(ticks_at(&ns, 0.05), (lo - 0.05).min(0.95)..hi + 0.1)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("chain length N (FFMAs per iteration)")
        .y_desc("progress(acc2) / progress(acc1)")
        .light_line_style(WHITE)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.2}"))
        .draw()
        .map_err(|e| e.to_string())?;
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
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

fn verdict_cell(o: &Outcome) -> &'static str {
    match o {
        Outcome::Pass(_) => "holds",
        Outcome::Fail(_) => "**fails**",
        Outcome::KnownDeviation { .. } => "fails (known deviation)",
        Outcome::Skipped(_) => "skipped",
        Outcome::Error(_) => "not judged (GPU busy)",
    }
}

/// Makes every input's label distinct, so that headings, legends and chart files tell
/// them apart: a label two inputs share gets the file name, and where even that repeats
/// (one file given twice), a number.
fn distinguish(inputs: &mut [Input]) {
    let shared: Vec<String> = inputs
        .iter()
        .map(|i| i.label.clone())
        .filter(|l| inputs.iter().filter(|j| &j.label == l).count() > 1)
        .collect();
    for i in inputs.iter_mut() {
        if shared.contains(&i.label) {
            i.label = format!("{} ({})", i.label, i.file.display());
        }
    }
    let mut seen: Vec<String> = Vec::new();
    for i in inputs.iter_mut() {
        let n = seen.iter().filter(|l| **l == i.label).count();
        seen.push(i.label.clone());
        if n > 0 {
            i.label = format!("{} #{}", i.label, n + 1);
        }
    }
}

/// When the inputs were compiled by more than one NVRTC (what `cargo xtask toolchains
/// --gpu` measures): `cargo xtask toolchains`'s side-by-side comparison (progress per
/// toolchain, loop bodies that changed, cases that flip), under one heading; else nothing.
fn toolchain_view(inputs: &[Input]) -> String {
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

/// `stem.ext`, or `stem-2.ext`, `stem-3.ext`... when a name is already in `used`: two
/// charts never share a file (slugs of distinct labels can coincide).
fn unique_name(used: &mut Vec<String>, stem: &str, ext: &str) -> String {
    let mut name = format!("{stem}.{ext}");
    let mut n = 1;
    while used.contains(&name) || name == "gain.svg" {
        n += 1;
        name = format!("{stem}-{n}.{ext}");
    }
    used.push(name.clone());
    name
}

/// Why `file` is another kind of JSON than a results file, if it is: a JSON object
/// without the `schema` every results file has (what `agree` and `bench` write, which a
/// glob such as `docs/results/*.json` also matches). Anything else is left to the results
/// reader, so that a broken results file is an error, not skipped.
fn other_json(file: &Path) -> Option<String> {
    let text = accprobe::input::read_text(file, "results", accprobe::input::RESULTS_LIMIT).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let object = value.as_object()?;
    if object.contains_key("schema") {
        return None;
    }
    let kind = if object.contains_key("tolerance") && object.contains_key("accepted") {
        "an agreement file (cargo xtask agree)"
    } else if object.contains_key("runs") && object.contains_key("median_wave_gpu_s") {
        "a bench file (cargo xtask bench)"
    } else {
        "a JSON object without a results `schema`"
    };
    Some(format!("not a results file: {kind}"))
}

/// Why the chart for `path` could not be drawn, naming it.
fn chart_error(path: &Path, e: &str) -> String {
    format!("cannot draw {}: {e}", path.display())
}

/// Writes a drawn chart, atomically, like every output; an error names the file.
fn write_chart(path: &Path, svg: &str) -> Result<(), String> {
    write_atomic(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Writes `report.md`, `progress-<gpu>.svg` per input and `gain.svg` into `out`.
pub fn run(dir: &Path, files: &[PathBuf], out: &Path) -> Result<(), String> {
    if files.is_empty() {
        return Err("give at least one results file".into());
    }
    let study_profile = find_profile(dir, accprobe::catalog::DOCUMENTED)?;
    let study = study_profile
        .recorded
        .clone()
        .ok_or("the documented profile has no recorded table")?;
    let mut inputs = Vec::new();
    for f in files {
        if let Some(what) = other_json(f) {
            warn!("report: skipped {}: {what}", f.display());
            continue;
        }
        let results = RunResults::load(f).map_err(|e| e.to_string())?;
        let profile = find_profile(dir, &results.profile)?;
        inputs.push(Input {
            label: label(&results, f),
            file: f.clone(),
            results,
            profile,
        });
    }
    distinguish(&mut inputs);
    if inputs.is_empty() {
        return Err(format!(
            "none of {} is a results file",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut charts_written: Vec<String> = Vec::new();
    let mut md = String::from(
        "<!-- Generated by `cargo xtask report`; do not edit by hand. -->\n# accprobe report\n\n",
    );
    md.push_str(&format!(
        "From {}. Progress is the mean number of loop iterations per warp in the clock64 budget.\n\n",
        inputs.iter().map(|i| markdown(&i.file.display().to_string())).collect::<Vec<_>>().join(", ")
    ));
    md.push_str("![acc2/acc1 gain against chain length](gain.svg)\n\n");
    for i in &inputs {
        let p = &i.profile.probe;
        md.push_str(&format!("## {}\n\n", markdown(&i.label)));
        if let Some(e) = &i.results.environment {
            md.push_str(&format!(
                "{}, compute capability {}, {} SMs, driver {}, CUDA {}, NVRTC {}, SM clock {} MHz rated / {} MHz measured, measured {} ({:?} mode), profile `{}`.\n\n",
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
        let chart = unique_name(
            &mut charts_written,
            &format!("progress-{}", slug(&i.label)),
            "svg",
        );
        let mut svg = String::new();
        progress_chart(&mut svg, i, &study).map_err(|e| chart_error(&out.join(&chart), &e))?;
        write_chart(&out.join(&chart), &svg)?;
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
    }
    // The invariants side by side.
    let mut names: Vec<String> = Vec::new();
    for i in &inputs {
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
    let verdicts: Vec<std::collections::BTreeMap<String, &'static str>> = inputs
        .iter()
        .map(|i| {
            accprobe::verdict::cases::cases(&i.profile)
                .iter()
                .filter(|c| names.contains(&c.name))
                .map(|c| {
                    (
                        c.name.clone(),
                        verdict_cell(&verdict::evaluate(c, &i.profile, &i.results)),
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
                        .map(|v| v.get(n).copied().unwrap_or("-").to_string()),
                )
                .collect()
        })
        .collect();
    md.push_str("## The invariants side by side\n\n");
    md.push_str(&markdown_grid(&header, &rows));
    md.push_str(&toolchain_view(&inputs));
    let chains = inputs[0].profile.probe.chains.clone();
    let gain = out.join("gain.svg");
    let mut svg = String::new();
    gain_chart(&mut svg, &inputs, &study, &chains).map_err(|e| chart_error(&gain, &e))?;
    write_chart(&gain, &svg)?;
    let path = out.join("report.md");
    write_atomic(&path, &md).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    say!("report: {} (and SVG charts beside it)", path.display());
    Ok(())
}
