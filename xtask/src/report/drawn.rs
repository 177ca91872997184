//! The report's charts as a viewer draws them, on the committed runs: every text within the
//! canvas (by the widths of `layout`, and, where `rsvg-convert` is installed, as librsvg
//! draws it with the fonts this machine has), and the legends clear of the lines.

use super::layout::text_width;
use crate::report;
use crate::testing::{expectations, root};
use std::path::{Path, PathBuf};

/// A report of runs whose labels are long: two share their label, so both get their file
/// name in it (the charts' titles and legends then hold a path), and one names a GPU by a
/// word far longer than any line.
fn long_labels(dir: &Path) -> Vec<PathBuf> {
    let recorded = root().join("expectations/recorded");
    let mut r =
        accprobe::model::results::RunResults::load(&recorded.join("h200-2026-11-30.json")).unwrap();
    r.environment.as_mut().unwrap().gpu_name = format!("NVIDIA H200 {}", "W".repeat(200));
    let long = dir.join("long-name.json");
    accprobe::output::write_atomic(&long, &r.to_json()).unwrap();
    let out = dir.join("report");
    report::run(
        &expectations(),
        &[
            recorded.join("h200-2026-12-04-contexts-wave.json"),
            recorded.join("h200-2026-12-04-contexts-serial.json"),
            recorded.join("h200-2026-11-30.json"),
            long,
        ],
        &out,
        None,
    )
    .unwrap();
    let mut svgs: Vec<PathBuf> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    svgs.sort();
    assert!(svgs.len() >= 9, "{svgs:?}");
    svgs
}

/// The value of attribute `name` in the attributes of one element.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let key = format!("{name}=\"");
    let at = match tag.strip_prefix(&key) {
        Some(_) => key.len(),
        None => tag.find(&format!(" {key}"))? + key.len() + 1,
    };
    tag[at..].split('"').next()
}

fn number(tag: &str, name: &str) -> f64 {
    attr(tag, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no number {name} in {tag}"))
}

/// The canvas size of an SVG.
fn canvas(svg: &str) -> (f64, f64) {
    let tag = svg
        .split_once("<svg ")
        .unwrap()
        .1
        .split_once('>')
        .unwrap()
        .0;
    (number(tag, "width"), number(tag, "height"))
}

/// Each element named `name`: its attributes, and for a text its content (entities
/// decoded), in document order.
fn elements<'a>(svg: &'a str, name: &str) -> Vec<(&'a str, String)> {
    svg.split(&format!("<{name} "))
        .skip(1)
        .map(|rest| {
            let (tag, after) = rest.split_once('>').unwrap();
            let content = after.split_once('<').map_or("", |(c, _)| c).trim();
            let decoded = content
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&");
            (tag, decoded)
        })
        .collect()
}

/// The box a text element takes, (left, top, right, bottom), at the widths `layout` allows.
fn text_box(tag: &str, content: &str) -> (f64, f64, f64, f64) {
    let (x, y, px) = (number(tag, "x"), number(tag, "y"), number(tag, "font-size"));
    let w = text_width(content, px);
    let along = match attr(tag, "text-anchor") {
        Some("middle") => (-w / 2.0, w / 2.0),
        Some("end") => (-w, 0.0),
        _ => (0.0, w),
    };
    let across = match attr(tag, "dy") {
        Some("0.76em") => (0.0, px),
        Some("-0.5ex") => (-px, 0.0),
        _ => (-px / 2.0, px / 2.0),
    };
    match attr(tag, "transform") {
        // Turned a quarter counter-clockwise about (x, y): along the text is up the page.
        Some(t) if t.starts_with("rotate(270") => {
            (x + across.0, y - along.1, x + across.1, y - along.0)
        }
        Some(t) => panic!("a transform this test does not read: {t}"),
        None => (x + along.0, y + across.0, x + along.1, y + across.1),
    }
}

#[test]
fn every_text_of_every_chart_lies_within_its_canvas() {
    // The progress charts' titles ran off both sides, the policy maps' off the right.
    let tmp = tempfile::tempdir().unwrap();
    for f in long_labels(tmp.path()) {
        let svg = std::fs::read_to_string(&f).unwrap();
        let (w, h) = canvas(&svg);
        let texts = elements(&svg, "text");
        assert!(!texts.is_empty(), "{}", f.display());
        for (tag, content) in texts {
            let (l, t, r, b) = text_box(tag, &content);
            assert!(
                l >= 0.0 && t >= 0.0 && r <= w && b <= h,
                "{}: {content:?} takes ({l:.0}, {t:.0})-({r:.0}, {b:.0}) of a {w} x {h} canvas",
                f.display()
            );
        }
    }
}

/// The points of a polyline.
fn points(tag: &str) -> Vec<(f64, f64)> {
    attr(tag, "points")
        .unwrap()
        .split_whitespace()
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

#[test]
fn no_line_runs_under_the_legend() {
    // The gain chart's legend, as wide as its longest label, covered the lines near
    // N = 25-29.
    let tmp = tempfile::tempdir().unwrap();
    for f in long_labels(tmp.path()).into_iter().filter(|f| {
        !f.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("policy-map-")
    }) {
        let svg = std::fs::read_to_string(&f).unwrap();
        // The legend's frame: the one rect with a black border and no fill; what is drawn
        // before it are the lines and axes (its swatches come after it).
        let frames: Vec<usize> = svg
            .match_indices("<rect ")
            .map(|(i, _)| i)
            .filter(|&i| {
                let tag = svg[i..].split_once('>').unwrap().0;
                attr(tag, "fill") == Some("none") && attr(tag, "stroke") == Some("#000000")
            })
            .collect();
        let [frame] = frames[..] else {
            panic!("{}: {} legend frames", f.display(), frames.len());
        };
        let tag = svg[frame..].split_once('>').unwrap().0;
        let (x, y) = (number(tag, "x"), number(tag, "y"));
        let (r, b) = (x + number(tag, "width"), y + number(tag, "height"));
        let under = |(px, py): (f64, f64)| px > x && px < r && py > y && py < b;
        for (line, _) in elements(&svg[..frame], "polyline") {
            let pts = points(line);
            for pair in pts.windows(2) {
                let ((x0, y0), (x1, y1)) = (pair[0], pair[1]);
                let steps = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
                for s in 0..=steps {
                    let t = s as f64 / steps as f64;
                    let p = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
                    assert!(
                        !under(p),
                        "{}: a line runs under the legend ({x}, {y})-({r}, {b}) at {p:?}",
                        f.display()
                    );
                }
            }
        }
    }
}

/// `rsvg-convert`: `$RSVG_CONVERT` (then it must work: `.ci/run` sets it), else the one on
/// PATH; `None` where there is none.
fn rsvg_convert() -> Option<PathBuf> {
    if let Some(given) = std::env::var_os("RSVG_CONVERT").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(given));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("rsvg-convert"))
        .find(|p| p.is_file())
}

#[test]
fn drawn_by_librsvg_with_real_fonts_nothing_leaves_the_canvas() {
    // rsvg-convert -f svg writes what librsvg drew, each glyph as its outline in page
    // coordinates (cairo's SVG surface, librsvg 2.54): an outline off the canvas is text
    // that a viewer cuts off.
    let Some(tool) = rsvg_convert() else {
        eprintln!("skipped: no rsvg-convert (Debian: librsvg2-bin; .ci/run installs it)");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    for f in long_labels(tmp.path()) {
        let svg = std::fs::read_to_string(&f).unwrap();
        let (w, h) = canvas(&svg);
        let o = std::process::Command::new(&tool)
            .args(["-f", "svg"])
            .arg(&f)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", tool.display()));
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let drawn = String::from_utf8(o.stdout).unwrap();
        let paths = elements(&drawn, "path");
        assert!(
            paths.len() > elements(&svg, "text").len(),
            "{}: librsvg drew no glyph outlines (no font?)",
            f.display()
        );
        for (tag, _) in paths {
            let d = attr(tag, "d").unwrap();
            let mut numbers = Vec::new();
            for token in d.split_whitespace() {
                match token {
                    "M" | "L" | "C" | "Z" => {}
                    t => numbers.push(t.parse::<f64>().unwrap_or_else(|_| {
                        panic!("a path this test does not read: {t:?} in {d}")
                    })),
                }
            }
            for p in numbers.chunks(2) {
                let &[x, y] = p else { panic!("odd path {d}") };
                assert!(
                    (-0.5..=w + 0.5).contains(&x) && (-0.5..=h + 0.5).contains(&y),
                    "{}: drawn at ({x}, {y}), off the {w} x {h} canvas",
                    f.display()
                );
            }
        }
    }
}
