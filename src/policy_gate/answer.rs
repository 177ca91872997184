//! A policy program's answer on stdout, read by its grammar (docs/policies.md, "The
//! answer"):
//!
//! ```text
//! answer  = *(line LF) line [LF]   ; exactly n lines: one per context asked, in order
//! line    = *blank k *blank
//! k       = nonzero *digit         ; 1 to 256, and one the profile measures there
//! blank   = %x20 / %x09            ; space, tab
//! nonzero = %x31-39
//! digit   = %x30-39
//! ```
//!
//! So no sign (`+2`, `-2`), no leading zero (`02`), no carriage return (a CRLF line end),
//! no empty line, nothing after the last context's line. A refusal names the line and the
//! column (1-based, in characters), the context that line answers, what was found there and
//! what was expected.

use super::Measured;
use crate::expectations::policy::MAX_POLICY_ACCUMULATORS;
use crate::expectations::policy_error::{AnswerFault, BadAnswer, Found};
use crate::expectations::policy_source::PolicyContext;
use std::collections::BTreeMap;

/// The K of each context from the program's `stdout`, each among the accumulator counts
/// `measured` holds for its place; where and how the answer breaks the grammar, when it
/// does.
pub(super) fn answers(
    contexts: &[PolicyContext],
    stdout: &[u8],
    measured: Measured,
) -> Result<BTreeMap<String, u32>, BadAnswer> {
    let body = stdout.strip_suffix(b"\n").unwrap_or(stdout);
    let lines: Vec<&[u8]> = if stdout.is_empty() {
        Vec::new()
    } else {
        body.split(|&b| b == b'\n').collect()
    };
    let mut out = BTreeMap::new();
    for (i, ctx) in contexts.iter().enumerate() {
        let bad = |column: usize, fault: AnswerFault| BadAnswer {
            line: i + 1,
            column,
            context: Some(ctx.name.clone()),
            fault,
        };
        let Some(line) = lines.get(i) else {
            return Err(bad(
                1,
                AnswerFault::Ended {
                    asked: contexts.len(),
                    answered: lines.len(),
                },
            ));
        };
        let k = read_k(line).map_err(|(column, fault)| bad(column, fault))?;
        let (key, counts) = measured.at(&ctx.place);
        if !counts.contains(&k) {
            let fault = AnswerFault::NotMeasured {
                k,
                key,
                measured: counts.to_vec(),
            };
            return Err(bad(1 + leading_blanks(line), fault));
        }
        out.insert(ctx.name.clone(), k);
    }
    if let Some(extra) = lines.get(contexts.len()) {
        return Err(BadAnswer {
            line: contexts.len() + 1,
            column: 1,
            context: None,
            fault: AnswerFault::Extra {
                found: found(extra, 0),
                asked: contexts.len(),
            },
        });
    }
    Ok(out)
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn leading_blanks(line: &[u8]) -> usize {
    line.iter().take_while(|&&b| is_blank(b)).count()
}

/// The K `line` holds, or the column (1-based) where it breaks the grammar and how.
fn read_k(line: &[u8]) -> Result<u32, (usize, AnswerFault)> {
    let start = leading_blanks(line);
    let digits = line[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let end = start + digits;
    let column = |at: usize| at + 1;
    if digits == 0 {
        let found = found(line, start);
        let fault = match line.get(start) {
            Some(b'+' | b'-') => AnswerFault::Signed { found },
            _ => AnswerFault::NotK { found },
        };
        return Err((column(start), fault));
    }
    let word = std::str::from_utf8(&line[start..end]).expect("ASCII digits");
    if word.starts_with('0') && digits > 1 {
        let fault = AnswerFault::LeadingZero {
            word: word.to_string(),
        };
        return Err((column(start), fault));
    }
    let after = end + leading_blanks(&line[end..]);
    if after < line.len() {
        let fault = AnswerFault::AfterK {
            found: found(line, after),
            k: word.to_string(),
        };
        return Err((column(after), fault));
    }
    match word.parse::<u32>() {
        Ok(k) if (1..=MAX_POLICY_ACCUMULATORS).contains(&k) => Ok(k),
        _ => Err((
            column(start),
            AnswerFault::OutOfRange {
                word: word.to_string(),
            },
        )),
    }
}

/// What the answer holds at byte `at` of `line`: the character there, a carriage return,
/// or the end of the line.
fn found(line: &[u8], at: usize) -> Found {
    match line.get(at) {
        None if at == 0 => Found::EmptyLine,
        None => Found::EndOfLine,
        Some(b'\r') => Found::CarriageReturn,
        Some(_) => {
            let rest = String::from_utf8_lossy(&line[at..]);
            Found::Char(rest.chars().next().unwrap_or('\u{fffd}'))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expectations::policy::Accumulation;
    use crate::model::place::Place;
    use crate::model::variant::{Context, Sink};
    use crate::model::workload::Workload;

    fn context(name: String, place: Place) -> PolicyContext {
        let probe = Accumulation {
            chain: 7,
            register_headroom: 200,
            sink_isolated: true,
            surrounding_ilp: false,
            occupancy_safe: true,
            side_chains: 0,
            warps_per_sm: 0,
            register_limit: 0,
            kernel: Workload::Probe,
            accumulations: 1,
            loads: Default::default(),
        };
        PolicyContext {
            name,
            place,
            accumulation: probe.at(&place),
        }
    }

    fn contexts(n: usize) -> Vec<PolicyContext> {
        (0..n)
            .map(|i| {
                context(
                    format!("c{}", i + 1),
                    Place::probe(7, Sink::A, Context::BASE),
                )
            })
            .collect()
    }

    const MEASURED: [u32; 4] = [1, 2, 3, 16];
    const REDUCTIONS: [u32; 2] = [1, 8];

    fn measured() -> Measured<'static> {
        Measured {
            probe: &MEASURED,
            reductions: &REDUCTIONS,
        }
    }

    fn read(stdout: &str) -> Result<Vec<u32>, String> {
        typed(stdout).map_err(|e| e.to_string())
    }

    fn typed(stdout: &str) -> Result<Vec<u32>, BadAnswer> {
        let asked = contexts(3);
        answers(&asked, stdout.as_bytes(), measured())
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
        let e = answers(&contexts(1), b"2\xff\n", measured())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 1, column 2 (context c1): found \"\u{fffd}\""),
            "{e}"
        );
    }

    #[test]
    fn a_bad_answer_carries_its_place_and_fault_as_data() {
        assert_eq!(
            typed("2\n 4\n2\n"),
            Err(BadAnswer {
                line: 2,
                column: 2,
                context: Some("c2".into()),
                fault: AnswerFault::NotMeasured {
                    k: 4,
                    key: "probe.accumulators",
                    measured: MEASURED.to_vec()
                },
            })
        );
        let e = typed("2\r\n2\n2\n").unwrap_err();
        assert_eq!(
            e.fault,
            AnswerFault::AfterK {
                found: Found::CarriageReturn,
                k: "2".into()
            }
        );
        let e = typed("2\n2\n2\n2\n").unwrap_err();
        assert_eq!((e.line, e.context), (4, None), "no context answers line 4");
    }

    #[test]
    fn a_kernel_context_is_answered_among_the_counts_its_kernel_is_measured_at() {
        let asked = vec![
            context("chain7".into(), Place::probe(7, Sink::A, Context::BASE)),
            context("dot".into(), Place::kernel(Workload::Dot, Context::BASE)),
        ];
        let got = answers(&asked, b"16\n8\n", measured()).unwrap();
        assert_eq!((got["chain7"], got["dot"]), (16, 8));
        let e = answers(&asked, b"2\n2\n", measured()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2, column 1 (context dot): K 2 is not measured: expected one of reductions.accumulators [1, 8]"
        );
    }
}
