//! How much room text takes on the report's charts, and lines that fit. An SVG says which
//! font family to use (`sans-serif`), never which font the viewer has, so a width here is
//! an upper bound: each character at the advance of the widest of its class in DejaVu Sans
//! (the sans-serif of most Linux systems, and wider than Helvetica, Arial or Liberation
//! Sans), so that a line measured to fit fits in each of them.

/// plotters' SVG backend writes a font of size `s` as `font-size` `s / 1.24`: the size a
/// viewer draws is this much smaller than the one asked for.
const SVG_FONT_SCALE: f64 = 1.24;

/// The font size (pixels, as the SVG writes it) of text drawn at plotters size `size`.
pub(super) fn svg_px(size: f64) -> f64 {
    size / SVG_FONT_SCALE
}

/// The advance of `c`, in ems, at most: DejaVu Sans's widest of its class (`i` .28, `(`
/// .39, `r` .41; digits and lowercase up to .64; capitals and `+`, `=`, `~` up to .84; `m`
/// .97, `W` .99, `@` 1.0). Any other character (accents, CJK) counts a whole em.
fn em(c: char) -> f64 {
    match c {
        ' ' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'i' | 'j' | 'l' | 'I' | 'J' | '('
        | ')' | '[' | ']' | 'f' | 't' | 'r' | '-' | '/' | '\\' | '`' => 0.42,
        'm' | 'w' | 'M' | 'W' | '%' | '@' => 1.0,
        c if c.is_ascii_lowercase() || c.is_ascii_digit() => 0.64,
        c if c.is_ascii_graphic() => 0.84,
        _ => 1.0,
    }
}

/// The most room `s` takes at `px` (pixels, as the SVG writes the size).
pub(super) fn text_width(s: &str, px: f64) -> f64 {
    s.chars().map(em).sum::<f64>() * px
}

/// `s` cut to fit `width` at `px`: whole when it fits, else as much of it as fits with
/// `...` after it.
pub(super) fn fit(s: &str, px: f64, width: f64) -> String {
    if text_width(s, px) <= width {
        return s.to_string();
    }
    let room = width - text_width("...", px);
    let kept = s.chars().scan(0.0, |used, c| {
        *used += em(c) * px;
        (*used <= room).then_some(c)
    });
    format!("{}...", kept.collect::<String>().trim_end())
}

/// `s` on at most `lines` lines of at most `width` at `px`: broken after a ` / ` where
/// the parts between fit (a label reads `NVIDIA H200 / driver 580.159.04 / NVRTC 13.0`),
/// else at spaces, a word longer than a line where it reaches the end; what does not fit
/// on the last line is cut with `...`.
pub(super) fn wrap(s: &str, px: f64, width: f64, lines: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    let parts: Vec<&str> = s.split(" / ").collect();
    for (i, part) in parts.iter().enumerate() {
        let part = if i + 1 < parts.len() {
            format!("{part} /")
        } else {
            part.to_string()
        };
        if !line.is_empty() && text_width(&format!("{line} {part}"), px) > width {
            out.push(std::mem::take(&mut line));
        }
        for word in part.split(' ').filter(|w| !w.is_empty()) {
            add_word(&mut out, &mut line, word, px, width);
        }
    }
    if !line.is_empty() {
        out.push(line);
    }
    if out.len() > lines.max(1) {
        let rest = out.split_off(lines.max(1) - 1).join(" ");
        out.push(fit(&rest, px, width));
    }
    out
}

/// Puts `word` on `line`, or `line` into `out` and `word` on the next: as much of it on
/// each line as fits, when it is wider than one.
fn add_word(out: &mut Vec<String>, line: &mut String, word: &str, px: f64, width: f64) {
    let joined = if line.is_empty() {
        word.to_string()
    } else {
        format!("{line} {word}")
    };
    if text_width(&joined, px) <= width {
        *line = joined;
        return;
    }
    if !line.is_empty() {
        out.push(std::mem::take(line));
    }
    let mut rest = word;
    while text_width(rest, px) > width {
        let at = fitting(rest, px, width);
        out.push(rest[..at].to_string());
        rest = &rest[at..];
    }
    *line = rest.to_string();
}

/// How many bytes of `s` fit in `width` at `px`; at least its first character.
fn fitting(s: &str, px: f64, width: f64) -> usize {
    let mut used = 0.0;
    let mut at = 0;
    for (i, c) in s.char_indices() {
        used += em(c) * px;
        if used > width && i > 0 {
            break;
        }
        at = i + c.len_utf8();
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_fit_their_width_however_long_the_words() {
        let long = format!(
            "Policy map: study, NVIDIA H200 {} / wave mode",
            "X".repeat(300)
        );
        for width in [40.0, 300.0, 870.0] {
            let lines = wrap(&long, 16.0, width, 3);
            assert!(lines.len() <= 3, "{lines:?}");
            for l in &lines {
                assert!(text_width(l, 16.0) <= width, "{l:?} is wider than {width}");
            }
            assert!(lines.last().unwrap().ends_with("..."), "{lines:?}");
        }
        assert_eq!(wrap("a b", 16.0, 870.0, 3), ["a b"]);
        // At a ` / ` where it can: a line holds "NVIDIA H200 / driver" at this width.
        assert_eq!(
            wrap("NVIDIA H200 / driver 580 / wave", 10.0, 125.0, 3),
            ["NVIDIA H200 /", "driver 580 / wave"]
        );
        assert_eq!(wrap("", 16.0, 870.0, 3), Vec::<String>::new());
        assert_eq!(fit("short", 10.0, 500.0), "short");
        let cut = fit(&"w".repeat(100), 10.0, 100.0);
        assert!(
            cut.ends_with("...") && text_width(&cut, 10.0) <= 100.0,
            "{cut}"
        );
    }
}
