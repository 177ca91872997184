//! A chart's frame: its canvas, with the title's lines over the plot and the legend under
//! it (so that a long label never runs off the canvas and the legend never covers a line),
//! and how a series is drawn: its look and its markers, on its points and in the legend.

use super::layout;
use accprobe::text::line;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What the plotting library said when a chart could not be drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DrawError(String);

impl DrawError {
    pub(crate) fn of(e: impl std::fmt::Display) -> DrawError {
        DrawError(e.to_string())
    }
}

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

/// Draws `look`'s marker in `c` at each of `at` (pixels of `root`): on a line's points and
/// on its swatch in the legend alike.
pub(super) fn draw_markers(
    root: &Area,
    at: &[(i32, i32)],
    c: RGBColor,
    look: Look,
) -> Result<(), DrawError> {
    let r = if look.width > 4 { 5 } else { 4 };
    let mark = c.stroke_width(2);
    for &p in at {
        match look.marker {
            Marker::Dot => root.draw(&Circle::new(p, r, c.filled())),
            Marker::Square => root.draw(&Rectangle::new(
                [(p.0 - r, p.1 - r), (p.0 + r, p.1 + r)],
                mark,
            )),
            Marker::Triangle => root.draw(&TriangleMarker::new(p, r + 1, c.filled())),
            Marker::Cross => root.draw(&Cross::new(p, r, mark)),
        }
        .map_err(DrawError::of)?;
    }
    Ok(())
}

/// A chart's canvas: the title's lines over the plot, the legend under it, so that a long
/// label never runs off the canvas and the legend never covers a line.
pub(crate) struct Canvas<'b, 'e> {
    pub(crate) root: Area<'b>,
    /// Where the plot is drawn, between the title and the legend.
    pub(crate) plot: Area<'b>,
    legend: Legend<'e>,
    /// The top of the legend, in pixels of `root`.
    legend_top: i32,
}

impl<'b, 'e> Canvas<'b, 'e> {
    /// A canvas in `svg` for a plot `plot_height` pixels high, titled `title`, with a
    /// legend of `entries`.
    pub(crate) fn new(
        svg: &'b mut String,
        title: &str,
        plot_height: i32,
        entries: &'e [Entry],
    ) -> Result<Canvas<'b, 'e>, DrawError> {
        let lines = title_lines(title, WIDTH as i32 - 2 * MARGIN);
        let title_height = MARGIN + TITLE_LINE * lines.len() as i32;
        let legend = Legend::of(entries);
        let height = title_height + plot_height + legend.height();
        let root = SVGBackend::with_string(svg, (WIDTH, height as u32)).into_drawing_area();
        root.fill(&WHITE).map_err(DrawError::of)?;
        draw_title(&root, &lines, WIDTH as i32 / 2, MARGIN, HPos::Center)?;
        let (above, _) = root.split_vertically(title_height + plot_height);
        let (_, plot) = above.split_vertically(title_height);
        Ok(Canvas {
            root,
            plot,
            legend,
            legend_top: title_height + plot_height,
        })
    }

    /// Draws the legend and ends the drawing.
    pub(crate) fn finish(self) -> Result<(), DrawError> {
        self.legend.draw(&self.root, self.legend_top)?;
        self.root.present().map_err(DrawError::of)
    }
}

/// The drawing area of a whole chart.
pub(crate) type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;

/// The canvas width of the charts; their outer margin.
const WIDTH: u32 = 900;
pub(crate) const MARGIN: i32 = 15;
/// A title's size (as plotters is asked for it) and a line of it (pixels).
const TITLE_SIZE: f64 = 20.0;
pub(super) const TITLE_LINE: i32 = 24;

/// `title`, through the one sanitiser, on at most three lines of `width` pixels.
pub(super) fn title_lines(title: &str, width: i32) -> Vec<String> {
    layout::wrap(
        &line(title),
        layout::svg_px(TITLE_SIZE),
        f64::from(width),
        3,
    )
}

/// Draws `lines`, a title, from `(x, top)` of `root` down, each placed at `x` by `h`.
pub(super) fn draw_title(
    root: &Area,
    lines: &[String],
    x: i32,
    top: i32,
    h: HPos,
) -> Result<(), DrawError> {
    let style = TextStyle::from(("sans-serif", TITLE_SIZE).into_font()).pos(Pos::new(h, VPos::Top));
    for (i, l) in lines.iter().enumerate() {
        root.draw(&Text::new(
            l.clone(),
            (x, top + TITLE_LINE * i as i32),
            style.clone(),
        ))
        .map_err(DrawError::of)?;
    }
    Ok(())
}

/// One line of a legend: how its series is drawn, and its label.
pub(crate) struct Entry {
    pub(super) colour: RGBColor,
    pub(super) look: Look,
    label: String,
}

impl Entry {
    /// An entry labelled `label`, which goes through the one sanitiser.
    pub(crate) fn new(colour: RGBColor, look: Look, label: String) -> Entry {
        Entry {
            colour,
            look,
            label: line(&label).into_owned(),
        }
    }
}

/// A legend's font size as plotters is asked for it; a row, the swatch (a
/// piece of the line with its marker) and the gap before the label, the inner padding,
/// and the gap between columns (pixels).
const LEGEND_SIZE: f64 = 13.0;
const ROW: i32 = 20;
const SWATCH: i32 = 24;
const GAP: i32 = 8;
const PAD: i32 = 8;
const COLUMN_GAP: i32 = 24;

/// A legend under the plot: its entries' labels (cut to fit the canvas), in as many
/// columns as the widest fits, filled column by column.
struct Legend<'e> {
    entries: &'e [Entry],
    labels: Vec<String>,
    columns: usize,
    column_width: i32,
}

impl<'e> Legend<'e> {
    fn of(entries: &'e [Entry]) -> Legend<'e> {
        let inside = f64::from(WIDTH as i32 - 2 * MARGIN - 2 * PAD);
        let room = inside - f64::from(SWATCH + GAP);
        let labels: Vec<String> = entries
            .iter()
            .map(|e| layout::fit(&e.label, layout::svg_px(LEGEND_SIZE), room))
            .collect();
        let widest = labels
            .iter()
            .map(|l| layout::text_width(l, layout::svg_px(LEGEND_SIZE)))
            .fold(0.0, f64::max);
        let column_width = (widest.ceil() as i32) + SWATCH + GAP + COLUMN_GAP;
        let columns =
            ((inside as i32 + COLUMN_GAP) / column_width).clamp(1, entries.len().max(1) as i32);
        Legend {
            entries,
            labels,
            columns: columns as usize,
            column_width,
        }
    }

    fn rows(&self) -> usize {
        self.entries.len().div_ceil(self.columns)
    }

    /// Its height on the canvas, the margin under it included (none without entries).
    fn height(&self) -> i32 {
        match self.rows() {
            0 => 0,
            rows => rows as i32 * ROW + 2 * PAD + MARGIN,
        }
    }

    /// Draws it on `root` from `top` down: a frame, then each entry's swatch and label.
    fn draw(&self, root: &Area, top: i32) -> Result<(), DrawError> {
        if self.entries.is_empty() {
            return Ok(());
        }
        let rows = self.rows();
        let width = (self.columns as i32 * self.column_width - COLUMN_GAP + 2 * PAD)
            .min(WIDTH as i32 - 2 * MARGIN);
        let frame = [
            (MARGIN, top),
            (MARGIN + width, top + rows as i32 * ROW + 2 * PAD),
        ];
        root.draw(&Rectangle::new(frame, WHITE.filled()))
            .map_err(DrawError::of)?;
        root.draw(&Rectangle::new(frame, BLACK))
            .map_err(DrawError::of)?;
        let font = TextStyle::from(("sans-serif", LEGEND_SIZE).into_font())
            .pos(Pos::new(HPos::Left, VPos::Center));
        for (i, (e, label)) in self.entries.iter().zip(&self.labels).enumerate() {
            let x = MARGIN + PAD + (i / rows) as i32 * self.column_width;
            let y = top + PAD + (i % rows) as i32 * ROW + ROW / 2;
            let style = e.colour.stroke_width(e.look.width);
            // A solid swatch is a dash as long as the swatch.
            let (d, g) = e.look.dash.unwrap_or((SWATCH as u32, 0));
            root.draw(&DashedPathElement::new(
                vec![(x, y), (x + SWATCH, y)],
                d,
                g,
                style,
            ))
            .map_err(DrawError::of)?;
            draw_markers(root, &[(x + SWATCH / 2, y)], e.colour, e.look)?;
            root.draw(&Text::new(
                label.clone(),
                (x + SWATCH + GAP, y),
                font.clone(),
            ))
            .map_err(DrawError::of)?;
        }
        Ok(())
    }
}
