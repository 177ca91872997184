//! The report's policy map: for one input, the gated policy's pick in every context, laid
//! out by chain (a column per chain length, a row per kind of context), each cell coloured
//! by the loss of the pick against the best K measured there: green at no loss, yellow at
//! the profile's `policy_gate.tolerance`, red from twice it; grey where the pick was not
//! measured. Each cell says the pick, the best K and the loss, so that it reads without
//! the colours too.

use super::frame::{draw_title, title_lines, DrawError, TITLE_LINE};
use super::{layout, Input};
use crate::policy::placed;
use accprobe::expectations::policy_source::PolicyContext;
use accprobe::text::line;
use accprobe::verdict::cases::policy_contexts;
use accprobe::verdict::Standing;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::HPos;

const CELL_W: i32 = 190;
const CELL_H: i32 = 64;
const LEFT: i32 = 170;
const TOP: i32 = 90;
const LEGEND_H: i32 = 70;

/// The longest policy name drawn: past it the name is cut with `...`.
const LABEL_CHARS: usize = 24;
/// The font sizes (as plotters is asked for them) of the line under the title, of the
/// headers, row labels and cells, and of the legend.
const NOTE: i32 = 14;
const LABEL: i32 = 15;

/// One cell of the map.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Cell {
    pub(super) context: String,
    pub(super) row: String,
    pub(super) chain: u32,
    pub(super) pick: Result<Standing, u32>,
}

/// The row a context is drawn in: for the probe, its name without the leading `chain<N>`
/// and `_` of its chain (`chain13_w16` -> `w16`), `probe kernel` when nothing is left; for
/// a real accumulation, `kernel` and its name (`kernel dot_w16`), in the column of the
/// elements it handles a thread. For the drawing only: a context name means nothing else
/// to the gate.
fn row_of(c: &PolicyContext) -> String {
    if !c.place.workload.is_probe() {
        return format!("kernel {}", c.name);
    }
    let prefix = format!("chain{}", c.accumulation.chain);
    match c.name.strip_prefix(&prefix) {
        Some(rest) => {
            let rest = rest.trim_start_matches(['_', '-']);
            if rest.is_empty() {
                "probe kernel".to_string()
            } else {
                rest.to_string()
            }
        }
        None => c.name.clone(),
    }
}

/// The cells of `input`'s map, or why there is none: no policy gate, or a policy that gave
/// no picks.
pub(super) fn cells(input: &Input) -> Result<Vec<Cell>, String> {
    let Some(picks) = &input.picks else {
        return Err("the profile gates no policy".into());
    };
    let contexts = policy_contexts(&input.profile, Some(&input.results));
    let placed = placed(&contexts, &input.results, picks).map_err(|e| e.to_string())?;
    Ok(contexts
        .iter()
        .zip(placed)
        .map(|(c, pick)| Cell {
            context: c.name.clone(),
            row: row_of(c),
            chain: c.accumulation.chain,
            pick,
        })
        .collect())
}

/// The colour of a loss: green (none) through yellow (`tolerance`) to red (twice it, and
/// beyond).
pub(super) fn colour(loss: f64, tolerance: f64) -> RGBColor {
    let scale = if tolerance > 0.0 { tolerance } else { 0.02 };
    let t = (loss / (2.0 * scale)).clamp(0.0, 1.0);
    let mix =
        |a: u8, b: u8, f: f64| (f64::from(a) + (f64::from(b) - f64::from(a)) * f).round() as u8;
    let (green, yellow, red) = ((46, 160, 67), (240, 200, 40), (214, 39, 40));
    let (from, to, f): ((u8, u8, u8), (u8, u8, u8), f64) = if t <= 0.5 {
        (green, yellow, t * 2.0)
    } else {
        (yellow, red, (t - 0.5) * 2.0)
    };
    RGBColor(
        mix(from.0, to.0, f),
        mix(from.1, to.1, f),
        mix(from.2, to.2, f),
    )
}

const GREY: RGBColor = RGBColor(190, 190, 190);

fn cut(s: &str) -> String {
    let s = line(s);
    if s.chars().count() > LABEL_CHARS {
        format!("{}...", s.chars().take(LABEL_CHARS - 3).collect::<String>())
    } else {
        s.into_owned()
    }
}

/// Draws the map of `cells` (policy `policy`, for `label`) into `svg`.
pub(super) fn draw(
    svg: &mut String,
    cells: &[Cell],
    policy: &str,
    label: &str,
    tolerance: f64,
) -> Result<(), DrawError> {
    let mut chains: Vec<u32> = cells.iter().map(|c| c.chain).collect();
    chains.sort_unstable();
    chains.dedup();
    let mut rows: Vec<&str> = Vec::new();
    for c in cells {
        if !rows.contains(&c.row.as_str()) {
            rows.push(&c.row);
        }
    }
    let cols = chains.len().max(1) as i32;
    let (legend, legend_x, legend_end) = legend(tolerance);
    let note_px = layout::svg_px(f64::from(NOTE));
    let width = (LEFT + CELL_W * cols + 20).max(legend_end + 15).max(720);
    let title = title_lines(&format!("Policy map: {}, {label}", cut(policy)), width - 30);
    // The rows move down by the title's lines past its first.
    let top = TOP + TITLE_LINE * (title.len() as i32 - 1).max(0);
    let height = top + CELL_H * rows.len().max(1) as i32 + LEGEND_H;
    let root = SVGBackend::with_string(svg, (width as u32, height as u32)).into_drawing_area();
    root.fill(&WHITE).map_err(DrawError::of)?;
    let font = |size: i32| ("sans-serif", size).into_font();
    let text = |s: String, at: (i32, i32), size: i32| Text::new(s, at, font(size));
    draw_title(&root, &title, 15, 12, HPos::Left)?;
    root.draw(&text(
        layout::fit(
            "each cell: the pick, the best K measured there, and the pick's loss against it",
            note_px,
            f64::from(width - 30),
        ),
        (15, top - 50),
        NOTE,
    ))
    .map_err(DrawError::of)?;
    for (j, n) in chains.iter().enumerate() {
        let x = LEFT + CELL_W * j as i32;
        root.draw(&text(format!("chain N={n}"), (x + 8, top - 24), LABEL))
            .map_err(DrawError::of)?;
    }
    let label_px = layout::svg_px(f64::from(LABEL));
    for (i, r) in rows.iter().enumerate() {
        let y = top + CELL_H * i as i32;
        let r = layout::fit(&line(r), label_px, f64::from(LEFT - 18));
        root.draw(&text(r, (10, y + CELL_H / 2 - 8), LABEL))
            .map_err(DrawError::of)?;
    }
    draw_cells(&root, cells, (&chains, &rows), top, tolerance)?;
    let y = top + CELL_H * rows.len().max(1) as i32 + 20;
    for ((c, what), x) in legend.iter().zip(legend_x) {
        root.draw(&Rectangle::new([(x, y), (x + 22, y + 22)], c.filled()))
            .map_err(DrawError::of)?;
        root.draw(&text(what.clone(), (x + 28, y + 3), NOTE))
            .map_err(DrawError::of)?;
    }
    root.present().map_err(DrawError::of)
}

/// The legend's entries (a colour and what it means), the x of each, and where the last
/// one's text ends: each entry a swatch, its text, and a gap before the next.
fn legend(tolerance: f64) -> (Vec<(RGBColor, String)>, Vec<i32>, i32) {
    let legend = vec![
        (colour(0.0, tolerance), "no loss".to_string()),
        (
            colour(tolerance, tolerance),
            format!("{:.2}% (the tolerance)", tolerance * 100.0),
        ),
        (
            colour(2.0 * tolerance, tolerance),
            format!("{:.2}% or more", 2.0 * tolerance * 100.0),
        ),
        (GREY, "pick not measured".to_string()),
    ];
    let note_px = layout::svg_px(f64::from(NOTE));
    let legend_x: Vec<i32> = legend
        .iter()
        .scan(15, |x, (_, what)| {
            let at = *x;
            *x += 28 + layout::text_width(what, note_px).ceil() as i32 + 24;
            Some(at)
        })
        .collect();
    let end = legend_x.last().copied().unwrap_or(15)
        + 28
        + legend
            .last()
            .map_or(0, |(_, w)| layout::text_width(w, note_px).ceil() as i32);
    (legend, legend_x, end)
}

/// Each cell at its chain's column and row's line under `top`: coloured by its loss, with
/// the pick, the best K, and the loss (or that the pick was not measured).
fn draw_cells(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    cells: &[Cell],
    (chains, rows): (&[u32], &[&str]),
    top: i32,
    tolerance: f64,
) -> Result<(), DrawError> {
    let text = |s: String, at: (i32, i32)| Text::new(s, at, ("sans-serif", LABEL).into_font());
    for c in cells {
        let j = chains.iter().position(|n| *n == c.chain).unwrap_or(0) as i32;
        let i = rows.iter().position(|r| *r == c.row).unwrap_or(0) as i32;
        let (x, y) = (LEFT + CELL_W * j, top + CELL_H * i);
        let (fill, first, second) = match &c.pick {
            Ok(s) => (
                colour(s.loss(), tolerance),
                format!("acc{} (best acc{})", s.k, s.best_k),
                format!("loss {:.2}%", s.loss() * 100.0),
            ),
            Err(k) => (GREY, format!("acc{k}"), "not measured".into()),
        };
        root.draw(&Rectangle::new(
            [(x + 2, y + 2), (x + CELL_W - 2, y + CELL_H - 2)],
            fill.filled(),
        ))
        .map_err(DrawError::of)?;
        root.draw(&text(first, (x + 10, y + 10)))
            .map_err(DrawError::of)?;
        root.draw(&text(second, (x + 10, y + 34)))
            .map_err(DrawError::of)?;
    }
    Ok(())
}
