//! A policy program's answer on stdout, read by its grammar (docs/policies.md, "The
//! answer"):
//!
//! ```text
//! answer  = *(line LF) line [LF]   ; exactly n lines: one per context asked, in order
//! line    = *blank k *blank
//! k       = nonzero *digit         ; 1 to 256, and one of probe.accumulators
//! blank   = %x20 / %x09            ; space, tab
//! nonzero = %x31-39
//! digit   = %x30-39
//! ```
//!
//! So no sign (`+2`, `-2`), no leading zero (`02`), no carriage return (a CRLF line end),
//! no empty line, nothing after the last context's line. A refusal names the line and the
//! column (1-based, in characters), the context that line answers, what was found there and
//! what was expected.

use crate::expectations::policy::MAX_POLICY_ACCUMULATORS;
use crate::expectations::policy_source::PolicyContext;
use crate::text::Shown;
use std::collections::BTreeMap;

/// What a K must be, for the messages.
fn k_is() -> String {
    format!("K, an accumulator count from 1 to {MAX_POLICY_ACCUMULATORS}")
}

/// The K of each context from the program's `stdout`, each among `measured` (the
/// accumulator counts the profile measures); why not, when the answer breaks the grammar.
pub(super) fn answers(
    contexts: &[PolicyContext],
    stdout: &[u8],
    measured: &[u32],
) -> Result<BTreeMap<String, u32>, String> {
    let body = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    let lines: Vec<&[u8]> = if stdout.is_empty() {
        Vec::new()
    } else {
        body.split(|&b| b == b'\n').collect()
    };
    let mut out = BTreeMap::new();
    for (i, ctx) in contexts.iter().enumerate() {
        let Some(line) = lines.get(i) else {
            return Err(format!(
                "line {}, column 1 (context {}): found the end of the answer: expected {}; {} contexts were asked, {} lines answered",
                i + 1,
                ctx.name.shown(),
                k_is(),
                contexts.len(),
                lines.len()
            ));
        };
        let at = |column: usize| {
            format!(
                "line {}, column {column} (context {})",
                i + 1,
                ctx.name.shown()
            )
        };
        let k = read_k(line).map_err(|(column, what)| format!("{}: {what}", at(column)))?;
        if !measured.contains(&k) {
            return Err(format!(
                "{}: K {k} is not measured: expected one of probe.accumulators {measured:?}",
                at(1 + leading_blanks(line))
            ));
        }
        out.insert(ctx.name.clone(), k);
    }
    if let Some(extra) = lines.get(contexts.len()) {
        return Err(format!(
            "line {}, column 1: found {}: expected the end of the answer, after one line for each of the {} contexts asked",
            contexts.len() + 1,
            found(extra, 0),
            contexts.len()
        ));
    }
    Ok(out)
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn leading_blanks(line: &[u8]) -> usize {
    line.iter().take_while(|&&b| is_blank(b)).count()
}

/// The K `line` holds, or the column (1-based) where it breaks the grammar and why.
fn read_k(line: &[u8]) -> Result<u32, (usize, String)> {
    let start = leading_blanks(line);
    let digits = line[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = start + digits;
    let column = |at: usize| at + 1;
    if digits == 0 {
        let why = match line.get(start) {
            Some(b'+' | b'-') => format!(
                "found {}: expected {}, written without a sign",
                found(line, start),
                k_is()
            ),
            _ => format!("found {}: expected {}", found(line, start), k_is()),
        };
        return Err((column(start), why));
    }
    let word = std::str::from_utf8(&line[start..end]).expect("ASCII digits");
    if word.starts_with('0') && digits > 1 {
        return Err((
            column(start),
            format!(
                "found {word:?}: expected {}, written without a leading zero",
                k_is()
            ),
        ));
    }
    let after = end + leading_blanks(&line[end..]);
    if after < line.len() {
        return Err((
            column(after),
            format!(
                "found {} after K {}: expected the end of the line",
                found(line, after),
                crate::text::excerpt(word, 20)
            ),
        ));
    }
    match word.parse::<u32>() {
        Ok(k) if (1..=MAX_POLICY_ACCUMULATORS).contains(&k) => Ok(k),
        _ => Err((
            column(start),
            format!(
                "K {} is out of range: expected {}",
                crate::text::excerpt(word, 20),
                k_is()
            ),
        )),
    }
}

/// What the answer holds at byte `at` of `line`, for a message: the character there, a
/// carriage return by name, or the end of the line.
fn found(line: &[u8], at: usize) -> String {
    match line.get(at) {
        None if at == 0 => "an empty line".into(),
        None => "the end of the line".into(),
        Some(b'\r') => "a carriage return (a CRLF line end; lines end in LF alone)".into(),
        Some(_) => {
            let rest = String::from_utf8_lossy(&line[at..]);
            let c = rest.chars().next().unwrap_or('\u{fffd}');
            format!("\"{}\"", c.to_string().shown())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expectations::policy::Accumulation;
    use crate::model::variant::{Context, Sink};

    fn contexts(n: usize) -> Vec<PolicyContext> {
        (0..n)
            .map(|i| PolicyContext {
                name: format!("c{}", i + 1),
                sink: Sink::A,
                context: Context::BASE,
                accumulation: Accumulation {
                    chain: 7,
                    register_headroom: 200,
                    sink_isolated: true,
                    surrounding_ilp: false,
                    occupancy_safe: true,
                    side_chains: 0,
                    warps_per_sm: 0,
                    register_limit: 0,
                },
            })
            .collect()
    }

    const MEASURED: [u32; 4] = [1, 2, 3, 16];

    fn read(stdout: &str) -> Result<Vec<u32>, String> {
        let asked = contexts(3);
        answers(&asked, stdout.as_bytes(), &MEASURED)
            .map(|m| asked.iter().map(|c| m[&c.name]).collect())
    }

    #[test]
    fn an_answer_in_the_grammar_is_read() {
        for ok in ["2\n3\n16\n", "2\n3\n16", " 2\t\n\t3 \n 16  \n"] {
            assert_eq!(read(ok), Ok(vec![2, 3, 16]), "{ok:?}");
        }
    }

    #[test]
    fn every_break_of_the_grammar_names_its_line_column_and_what_was_expected() {
        for (stdout, says) in [
            ("+2\n2\n2\n", "line 1, column 1 (context c1): found \"+\": expected K, an accumulator count from 1 to 256, written without a sign"),
            ("2\n-2\n2\n", "line 2, column 1 (context c2): found \"-\": expected K, an accumulator count from 1 to 256, written without a sign"),
            ("2\n0002\n2\n", "line 2, column 1 (context c2): found \"0002\": expected K, an accumulator count from 1 to 256, written without a leading zero"),
            ("2\r\n2\r\n2\r\n", "line 1, column 2 (context c1): found a carriage return (a CRLF line end; lines end in LF alone) after K 2: expected the end of the line"),
            ("\n2\n2\n2\n", "line 1, column 1 (context c1): found an empty line: expected K, an accumulator count from 1 to 256"),
            ("2\n  \n2\n", "line 2, column 3 (context c2): found the end of the line: expected K"),
            ("2\n2 x\n2\n", "line 2, column 3 (context c2): found \"x\" after K 2: expected the end of the line"),
            ("2\nbanana\n2\n", "line 2, column 1 (context c2): found \"b\": expected K"),
            ("2\n2\n\u{1b}[2J\n", "line 3, column 1 (context c3): found \"\\u{1b}\": expected K"),
            ("2\n2.5\n2\n", "line 2, column 2 (context c2): found \".\" after K 2: expected the end of the line"),
            ("0\n2\n2\n", "line 1, column 1 (context c1): K 0 is out of range: expected K, an accumulator count from 1 to 256"),
            ("2\n2\n99999999999\n", "line 3, column 1 (context c3): K 99999999999 is out of range"),
            ("2\n 4\n2\n", "line 2, column 2 (context c2): K 4 is not measured: expected one of probe.accumulators [1, 2, 3, 16]"),
            ("2\n2\n", "line 3, column 1 (context c3): found the end of the answer: expected K, an accumulator count from 1 to 256; 3 contexts were asked, 2 lines answered"),
            ("", "line 1, column 1 (context c1): found the end of the answer"),
            ("2\n2\n2\n2\n", "line 4, column 1: found \"2\": expected the end of the answer, after one line for each of the 3 contexts asked"),
            ("2\n2\n2\n\n", "line 4, column 1: found an empty line: expected the end of the answer"),
        ] {
            let e = read(stdout).unwrap_err();
            assert!(e.starts_with(says), "{stdout:?}:\n  got  {e}\n  want {says}");
        }
    }

    #[test]
    fn bytes_that_are_not_text_are_shown_escaped() {
        let e = answers(&contexts(1), b"2\xff\n", &MEASURED).unwrap_err();
        assert!(
            e.starts_with("line 1, column 2 (context c1): found \"\u{fffd}\""),
            "{e}"
        );
    }
}
