//! The SASS diffs a compiler engineer reads: the loop's instructions side by side with
//! their control fields, blessed and measured, and what changed in each (`stall 7 → 1`,
//! `waits SB1 → SB0`); and for a changed loop text, whether only registers were renamed,
//! with the diff of the register-normalised loop beside the raw one. An instruction's text
//! and its control notation come from a results or baselines file: each is shown on one
//! line (`text::Shown`).

use crate::model::results::{total_stall, Control};
use crate::text::Shown;
use similar::{ChangeTag, TextDiff};

/// A loop body with its control notation, one per instruction (empty: not decoded).
#[derive(Debug, Clone, Copy)]
pub struct Scheduled<'a> {
    pub body: &'a [String],
    pub control: &'a [String],
}

impl Scheduled<'_> {
    fn control(&self, i: usize) -> String {
        self.control
            .get(i)
            .map_or("(not decoded)".into(), |c| c.shown())
    }
}

/// The two loops side by side: each instruction with its blessed and measured control
/// fields, a changed line marked `~` with what changed, an instruction only one loop has
/// marked `-` or `+`; then the total stall of each. Scoreboards are as the summaries hold
/// them, renumbered by first use in the loop, so a number in it is a renumbered one.
pub(crate) fn side_by_side(blessed: Scheduled<'_>, measured: Scheduled<'_>) -> String {
    let width = blessed
        .body
        .iter()
        .chain(measured.body)
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let old: Vec<&str> = blessed.body.iter().map(String::as_str).collect();
    let new: Vec<&str> = measured.body.iter().map(String::as_str).collect();
    let diff = TextDiff::from_slices(&old, &new);
    let ctl = 19; // B------:R-:W-:Y:S00
    let mut out = format!(
        "  {:width$}  {:ctl$}  {:ctl$}\n",
        "loop (scoreboards renumbered by first use)", "blessed", "measured"
    );
    for change in diff.iter_all_changes() {
        let text = change.value().shown();
        match (change.tag(), change.old_index(), change.new_index()) {
            (ChangeTag::Equal, Some(o), Some(n)) => {
                let (a, b) = (blessed.control(o), measured.control(n));
                let what = match (Control::parse(&a), Control::parse(&b)) {
                    (Some(x), Some(y)) => y.changes_from(&x).join(", "),
                    _ if a == b => String::new(),
                    _ => "control fields not compared".into(),
                };
                let mark = if what.is_empty() { ' ' } else { '~' };
                out.push_str(
                    format!("{mark} {text:width$}  {a:ctl$}  {b:ctl$}  {what}").trim_end(),
                );
                out.push('\n');
            }
            (ChangeTag::Delete, Some(o), _) => {
                let a = blessed.control(o);
                out.push_str(&format!("- {text:width$}  {a:ctl$}\n"));
            }
            (_, _, Some(n)) => {
                let b = measured.control(n);
                out.push_str(&format!("+ {text:width$}  {:ctl$}  {b}\n", ""));
            }
            _ => {}
        }
    }
    let stall =
        |s: Scheduled<'_>| total_stall(s.control).map_or("?".to_string(), |t| t.to_string());
    out.push_str(&format!(
        "total stall: {} → {} cycles per iteration",
        stall(blessed),
        stall(measured)
    ));
    out
}

/// The first instructions whose control fields changed, as `` `CS2R R6, SR_CLOCKLO` stall
/// 7 → 1 ``, for a loop whose instructions are the same (at most `n` of them, then how
/// many more); empty when the bodies differ or nothing is decoded.
pub fn schedule_changes(blessed: Scheduled<'_>, measured: Scheduled<'_>, n: usize) -> String {
    if blessed.body != measured.body {
        return String::new();
    }
    let changed: Vec<String> = blessed
        .body
        .iter()
        .enumerate()
        .filter_map(|(i, text)| {
            let (a, b) = (
                Control::parse(blessed.control.get(i)?)?,
                Control::parse(measured.control.get(i)?)?,
            );
            let what = b.changes_from(&a);
            (!what.is_empty()).then(|| format!("`{}` {}", text.shown(), what.join(", ")))
        })
        .collect();
    let mut out = changed
        .iter()
        .take(n)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if changed.len() > n {
        out.push_str(&format!(" (and {} more instructions)", changed.len() - n));
    }
    out
}

/// A loop body with its registers renamed by first appearance (`R10` → `R#0`, `UR8` →
/// `UR#0`, `P0` → `P#0`; `RZ`, `URZ`, `PT` kept): two bodies equal in it differ only in
/// register allocation.
pub(crate) fn registers_normalised(body: &[String]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    body.iter()
        .map(|line| {
            let mut out = String::new();
            let mut word = String::new();
            let flush = |word: &mut String, out: &mut String, names: &mut Vec<String>| {
                if let Some(kind) = register_kind(word) {
                    let at = names.iter().position(|n| n == word).unwrap_or_else(|| {
                        names.push(word.clone());
                        names.len() - 1
                    });
                    let same_kind = names[..=at]
                        .iter()
                        .filter(|n| register_kind(n) == Some(kind))
                        .count()
                        - 1;
                    out.push_str(&format!("{kind}#{same_kind}"));
                } else {
                    out.push_str(word);
                }
                word.clear();
            };
            for c in line.chars() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    word.push(c);
                } else {
                    flush(&mut word, &mut out, &mut names);
                    out.push(c);
                }
            }
            flush(&mut word, &mut out, &mut names);
            out
        })
        .collect()
}

/// `R`, `UR` or `P` for a register name (`R12`, `UR8`, `P0`, `UP1` as `UP`), else `None`.
fn register_kind(word: &str) -> Option<&'static str> {
    for kind in ["UR", "UP", "R", "P"] {
        if let Some(n) = word.strip_prefix(kind) {
            if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) {
                return Some(kind);
            }
        }
    }
    None
}

/// The unified diff of two loop bodies, with the headers given: one line per instruction,
/// whatever its text holds.
pub(crate) fn unified(old: &[String], new: &[String], from: &str, to: &str) -> String {
    let lines = |body: &[String]| body.iter().map(|l| l.shown() + "\n").collect::<String>();
    let (a, b) = (lines(old), lines(new));
    TextDiff::from_lines(&a, &b)
        .unified_diff()
        .header(from, to)
        .to_string()
}

/// What a changed loop text is, for the digest case: `opcodes unchanged; registers
/// renamed` with the raw diff where the register-normalised loops are equal, else the raw
/// diff and the register-normalised one beside it.
pub(crate) fn text_change(blessed: &[String], measured: &[String]) -> TextChange {
    let raw = unified(blessed, measured, "blessed loop", "measured loop");
    let (a, b) = (
        registers_normalised(blessed),
        registers_normalised(measured),
    );
    if a == b {
        TextChange {
            what: "the loop body changed: opcodes unchanged; registers renamed".into(),
            diff: raw,
        }
    } else {
        TextChange {
            what: "the loop body changed".into(),
            diff: format!(
                "{raw}with registers normalised (R#n: the n-th register the loop names):\n{}",
                unified(&a, &b, "blessed loop", "measured loop")
            ),
        }
    }
}

/// How a loop body's text changed: in a few words, and the diff.
pub(crate) struct TextChange {
    pub(crate) what: String,
    pub(crate) diff: String,
}

impl std::fmt::Display for TextChange {
    /// The words, then the diff on the lines after them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{}", self.what, self.diff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(x: &[&str]) -> Vec<String> {
        x.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn registers_are_renamed_by_first_appearance_per_kind() {
        let a = lines(&[
            "FFMA R10, R10, R9.reuse, UR8",
            "@!P0 BRA -2",
            "IADD3 R2, R2, 0x1, RZ",
        ]);
        let b = lines(&[
            "FFMA R12, R12, R7.reuse, UR4",
            "@!P1 BRA -2",
            "IADD3 R3, R3, 0x1, RZ",
        ]);
        assert_eq!(
            registers_normalised(&a),
            lines(&[
                "FFMA R#0, R#0, R#1.reuse, UR#0",
                "@!P#0 BRA -2",
                "IADD3 R#2, R#2, 0x1, RZ"
            ])
        );
        assert_eq!(registers_normalised(&a), registers_normalised(&b));
        assert!(text_change(&a, &b)
            .to_string()
            .contains("opcodes unchanged; registers renamed"));
        // A changed opcode is not a renaming: both diffs are shown.
        let c = lines(&[
            "FMUL R12, R12, R7.reuse, UR4",
            "@!P1 BRA -2",
            "IADD3 R3, R3, 0x1, RZ",
        ]);
        let m = text_change(&a, &c).to_string();
        assert!(!m.contains("registers renamed"), "{m}");
        assert!(m.contains("+FMUL R#0, R#0, R#1.reuse, UR#0"), "{m}");
        assert!(m.contains("-FFMA R10, R10, R9.reuse, UR8"), "{m}");
    }

    #[test]
    fn an_instruction_from_a_file_stays_on_its_line_in_every_diff() {
        let a = lines(&["FFMA R10, R10, R9, UR8", "@!P0 BRA -2"]);
        let b = lines(&[
            "FFMA R10, R10, R9, UR8\nfirst suspect: forged",
            "@!P0 BRA -2",
        ]);
        let control = lines(&["B------:R-:W-:-:S01\nforged", "B0-----:R-:W-:-:S05"]);
        let side = side_by_side(
            Scheduled {
                body: &a,
                control: &control,
            },
            Scheduled {
                body: &b,
                control: &control,
            },
        );
        let same = Scheduled {
            body: &b,
            control: &control,
        };
        for m in [
            side,
            text_change(&a, &b).to_string(),
            schedule_changes(same, same, 4),
        ] {
            assert!(
                !m.lines()
                    .any(|l| l.starts_with("first suspect") || l.starts_with("forged")),
                "{m}"
            );
        }
        assert!(text_change(&a, &b)
            .to_string()
            .contains("UR8\\nfirst suspect: forged"));
    }

    #[test]
    fn the_side_by_side_diff_says_what_changed_in_each_instruction() {
        let body = lines(&[
            "FFMA R10, R10, R9, UR8",
            "CS2R R6, SR_CLOCKLO",
            "@!P0 BRA -2",
        ]);
        let old = lines(&[
            "B------:R-:W-:-:S01",
            "B------:R-:W-:Y:S07",
            "B0-----:R-:W-:-:S05",
        ]);
        let new = lines(&[
            "B------:R-:W-:-:S01",
            "B------:R-:W-:-:S06",
            "B0-----:R-:W-:-:S05",
        ]);
        let (a, b) = (
            Scheduled {
                body: &body,
                control: &old,
            },
            Scheduled {
                body: &body,
                control: &new,
            },
        );
        let m = side_by_side(a, b);
        assert!(
            m.lines().any(|l| l.starts_with("~ CS2R R6, SR_CLOCKLO")
                && l.ends_with("stall 7 → 6, yield → no yield")),
            "{m}"
        );
        assert!(
            m.contains("  FFMA R10, R10, R9, UR8  B------:R-:W-:-:S01"),
            "{m}"
        );
        assert!(
            m.ends_with("total stall: 13 → 12 cycles per iteration"),
            "{m}"
        );
        assert_eq!(
            schedule_changes(a, b, 3),
            "`CS2R R6, SR_CLOCKLO` stall 7 → 6, yield → no yield"
        );
        // A loop whose text changed too shows the instructions one side lacks.
        let more = lines(&[
            "FFMA R10, R10, R9, UR8",
            "NOP",
            "CS2R R6, SR_CLOCKLO",
            "@!P0 BRA -3",
        ]);
        let ctl = lines(&[
            "B------:R-:W-:-:S01",
            "B------:R-:W-:-:S01",
            "B------:R-:W-:-:S06",
            "B0-----:R-:W-:-:S05",
        ]);
        let m = side_by_side(
            a,
            Scheduled {
                body: &more,
                control: &ctl,
            },
        );
        assert!(m.lines().any(|l| l.starts_with("+ NOP")), "{m}");
        assert!(m.lines().any(|l| l.starts_with("- @!P0 BRA -2")), "{m}");
        assert_eq!(
            schedule_changes(
                a,
                Scheduled {
                    body: &more,
                    control: &ctl
                },
                3
            ),
            ""
        );
    }
}
