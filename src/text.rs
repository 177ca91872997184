//! Text on its way out: the one sanitiser every output uses, whatever the destination
//! (JUnit XML, Markdown, SVG, a terminal), and the one way text a file or a device supplies
//! is put into a message. It sits below every stage and imports nothing.
//!
//! A results file, a profile, a baseline, a GPU's name or a file name may hold any Unicode.
//! What no destination can hold as is, and what this module therefore escapes, visibly, as
//! `\u{..}`:
//! - C0 control characters (ESC, BEL, ...) other than newline and tab, DEL and the C1
//!   controls (U+0080 to U+009F; U+009B is a terminal's CSI): they move a terminal's cursor,
//!   change its colours or its title, and XML 1.0 forbids C0 outright;
//! - carriage return: it overwrites a terminal line and XML readers fold it;
//! - Unicode noncharacters (U+FFFE, U+FFFF, U+FDD0 to U+FDEF and the last two of every
//!   plane): U+FFFE and U+FFFF are not XML characters, and a well-formedness error takes the
//!   whole JUnit file with it;
//! - the bidirectional overrides and isolates (U+202A to U+202E, U+2066 to U+2069), which
//!   reorder what a terminal or a page shows.
//!
//! Lone surrogates cannot occur in a Rust string. [`clean`] keeps newlines and tabs (a
//! multi-line body: a JUnit failure text, a terminal line); [`line()`] escapes them too (a
//! name, a heading, an attribute, a chart label); [`markdown`] and [`markdown_code`] also
//! keep a Markdown line from becoming a heading, a link or a table column.
//!
//! A message's own lines are the tool's: its first is the verdict (the JUnit `message`,
//! the line libtest prints), the next ones its detail. So text from outside (a GPU name, a
//! driver version, a profile's reason, a results file's source, a file name, a program's
//! answer) goes into a message [`Shown`], on one line: a newline in it is escaped like
//! every other control character, and can neither end the verdict early nor start a line
//! that reads as the tool's. The outputs ([`clean`] at every sink) then escape what is
//! left.

use std::borrow::Cow;
use std::fmt::Write;

/// Whether `c` is escaped wherever it goes (see the module's list); newline and tab are
/// the callers' choice.
fn never_raw(c: char) -> bool {
    let u = c as u32;
    (c.is_control() && c != '\n' && c != '\t')
        || (u & 0xFFFE) == 0xFFFE
        || (0xFDD0..=0xFDEF).contains(&u)
        || (0x202A..=0x202E).contains(&u)
        || (0x2066..=0x2069).contains(&u)
}

fn escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
}

fn escaped(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let bad = |c: char| never_raw(c) || (!keep_lines && (c == '\n' || c == '\t'));
    if !text.chars().any(bad) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if bad(c) {
            escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with newlines and tabs kept and everything else no destination can hold
/// escaped: for a JUnit body, a terminal, a multi-line message.
pub fn clean(text: &str) -> Cow<'_, str> {
    escaped(text, true)
}

/// `text` as one line: [`clean`], with newlines and tabs escaped too: for a name, an XML
/// attribute, an SVG label, a Markdown heading or cell.
pub fn line(text: &str) -> Cow<'_, str> {
    escaped(text, false)
}

/// Text from outside, as a message shows it: on one line ([`line()`]).
pub trait Shown {
    fn shown(&self) -> String;
}

impl Shown for str {
    fn shown(&self) -> String {
        line(self).into_owned()
    }
}

impl Shown for std::path::Path {
    fn shown(&self) -> String {
        line(&self.to_string_lossy()).into_owned()
    }
}

/// Each of `items` [`Shown`], joined by `sep`: outside texts listed in a message (a loop's
/// instructions, one per line).
pub(crate) fn joined<S: AsRef<str>>(items: &[S], sep: &str) -> String {
    items
        .iter()
        .map(|i| i.as_ref().shown())
        .collect::<Vec<_>>()
        .join(sep)
}

/// Text from outside that is lines of its own (a compiler's log), quoted under a message:
/// each of its lines on a line of the message, indented and marked `| ` so that none reads
/// as the tool's, and each [`line()`]-escaped (a carriage return or an escape sequence in a
/// log line stays visible). Blank lines at either end are dropped; an empty text quotes as
/// `  | (empty)`.
pub(crate) fn quoted(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let first = lines.iter().position(|l| !l.trim().is_empty());
    let last = lines.iter().rposition(|l| !l.trim().is_empty());
    match (first, last) {
        (Some(a), Some(b)) => lines[a..=b]
            .iter()
            .map(|l| format!("  | {}", line(l)))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => "  | (empty)".to_string(),
    }
}

/// At most `max_chars` characters of `text`, shown on one line ([`line()`]: an escape is
/// never cut in half), with `…` where it was cut: for a bit of a file or a program's output quoted in a message.
pub(crate) fn excerpt(text: &str, max_chars: usize) -> String {
    let kept: String = text.chars().take(max_chars).collect();
    let mut out = line(&kept).into_owned();
    if kept.len() < text.len() {
        out.push('…');
    }
    out
}

/// `text` with what XML must escape as an entity written as a character no viewer shows
/// as one: some JUnit viewers (Allure) print `&gt;` and `&apos;` literally. Arrows and
/// comparisons become their own characters (`->` `→`, `<-` `←`, `>=` `≥`, `<=` `≤`),
/// apostrophes `’`, double quotes `“` and `”` in turn, and a lone `<`, `>` or `&` its
/// full-width form (`＜`, `＞`, `＆`). For the texts of a JUnit file; names are left as
/// they are (a case name is what `--exact` takes).
pub fn for_viewers(text: &str) -> Cow<'_, str> {
    if !text.contains(['<', '>', '&', '\'', '"']) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut open = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let pair = match (c, next) {
            ('-', Some('>')) => Some('→'),
            ('<', Some('-')) => Some('←'),
            ('>', Some('=')) => Some('≥'),
            ('<', Some('=')) => Some('≤'),
            _ => None,
        };
        if let Some(p) = pair {
            out.push(p);
            chars.next();
            continue;
        }
        match c {
            '<' => out.push('＜'),
            '>' => out.push('＞'),
            '&' => out.push('＆'),
            '\'' => out.push('’'),
            '"' => {
                out.push(if open { '“' } else { '”' });
                open = !open;
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `text` as Markdown inline text on one line: [`line()`], with every character Markdown
/// could read as markup backslash-escaped, so that it shows as written and a `|` never
/// starts a table column, a `#` never a heading, a `[` never a link, a `&` never an
/// entity (`&#x202e;` would render as the bidi override that [`line()`] escapes).
pub fn markdown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in line(text).chars() {
        if matches!(
            c,
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '#' | '!' | '~' | '&'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` as a Markdown code span on one line, for a table cell: fenced by more backticks
/// than any run in it, `|` escaped (GitHub's tables split on it even inside code).
pub fn markdown_code(text: &str) -> String {
    let body = line(text).replace('|', "\\|");
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest + 1);
    let pad = if body.starts_with('`') || body.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{body}{pad}{fence}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every character XML 1.0 does not allow (`Char` in the XML 1.0 grammar), for the
    /// code points a Rust string can hold.
    fn xml_invalid(c: char) -> bool {
        let u = c as u32;
        !(u == 0x9
            || u == 0xA
            || u == 0xD
            || (0x20..=0xD7FF).contains(&u)
            || (0xE000..=0xFFFD).contains(&u)
            || (0x10000..=0x10FFFF).contains(&u))
    }

    #[test]
    fn nothing_a_destination_cannot_hold_survives() {
        let every: String = (0..=0x10FFFFu32).filter_map(char::from_u32).collect();
        let out = clean(&every);
        assert!(
            !out.chars().any(xml_invalid),
            "an XML-invalid character left"
        );
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "a control character left"
        );
        assert!(!line(&every).contains(['\n', '\t']));
        for c in [
            '\u{1b}', '\u{7}', '\u{9b}', '\u{fffe}', '\u{ffff}', '\u{202e}', '\r',
        ] {
            assert!(!clean(&format!("a{c}b")).contains(c), "{c:?}");
        }
    }

    #[test]
    fn escapes_are_visible_and_plain_text_is_untouched() {
        assert_eq!(clean("H200\u{1b}[31m\u{7}"), "H200\\u{1b}[31m\\u{7}");
        assert_eq!(clean("a\u{fffe}b"), "a\\u{fffe}b");
        assert_eq!(clean("two\nlines\tok"), "two\nlines\tok");
        assert_eq!(line("two\nlines"), "two\\nlines");
        assert!(matches!(clean("NVIDIA H200 é"), Cow::Borrowed(_)));
    }

    #[test]
    fn text_from_outside_is_shown_on_one_line_and_an_excerpt_is_cut_visibly() {
        assert_eq!("H200\nforged\u{1}".shown(), "H200\\nforged\\u{1}");
        let p = std::path::Path::new("/tmp/a\nb");
        assert_eq!(p.shown(), "/tmp/a\\nb");
        assert_eq!(joined(&["a\nb", "c"], ", "), "a\\nb, c");
        assert_eq!(excerpt("abc", 3), "abc");
        assert_eq!(excerpt("abcd", 3), "abc…");
        // Cut before the escape: never half an escape, never a raw character.
        assert_eq!(excerpt("\u{1b}[2J", 3), "\\u{1b}[2…");
    }

    #[test]
    fn a_quoted_log_keeps_its_lines_marked_and_escapes_inside_them() {
        let log = "\n\nkernel.cu(3): error: x\r\x1b[2Jsaid\n  detail\n\n";
        assert_eq!(
            quoted(log),
            "  | kernel.cu(3): error: x\\r\\u{1b}[2Jsaid\n  |   detail"
        );
        assert_eq!(quoted(""), "  | (empty)");
        assert_eq!(quoted("\n \n"), "  | (empty)");
        for l in quoted("a\nb\u{2028}c\u{85}d").lines() {
            assert!(l.starts_with("  | "), "{l:?}");
        }
    }

    #[test]
    fn markdown_never_makes_a_heading_a_column_or_a_link() {
        // The escape's own backslash is escaped too, so the page shows `H200\n# owned`.
        assert_eq!(markdown("H200\n# owned"), "H200\\\\n\\# owned");
        assert_eq!(markdown("a | b"), "a \\| b");
        assert_eq!(markdown("[x](y)"), "\\[x\\](y)");
        // An entity stays text: neither `&amp;` nor a bidi override by number renders.
        assert_eq!(markdown("a&amp;b&#x202e;"), "a\\&amp;b\\&\\#x202e;");
        // A code span shows entities as written: nothing to escape there.
        assert_eq!(markdown_code("&#x202e;"), "`&#x202e;`");
        assert_eq!(markdown_code("a|b"), "`a\\|b`");
        assert_eq!(markdown_code("x`y"), "``x`y``");
        assert_eq!(markdown_code("`"), "`` ` ``");
    }

    #[test]
    fn texts_for_viewers_hold_nothing_xml_writes_as_an_entity() {
        assert_eq!(
            for_viewers("digest a -> b; K >= 3, x <= y, acc3 > acc2 < 4 & 5"),
            "digest a → b; K ≥ 3, x ≤ y, acc3 ＞ acc2 ＜ 4 ＆ 5"
        );
        assert_eq!(
            for_viewers("the study's \"peak\" and \"gain\" <-"),
            "the study’s “peak” and “gain” ←"
        );
        assert!(matches!(for_viewers("plain → text"), Cow::Borrowed(_)));
    }
}
