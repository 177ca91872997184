//! The schedule of a SASS loop: what ptxas decided besides the instructions, as each
//! instruction's control fields (stall cycles, yield, the scoreboards it sets and waits
//! on), written in CuAssembler's notation `B0-----:R-:W1:Y:S07`, and the schedule digest
//! of a loop. The compile stage decodes the fields from the encoding
//! (`compile::sass::control`); the verdicts and `cargo xtask sass` read them back from here.
//! Operand reuse is not part of the notation: the instruction text keeps its `.reuse` marks.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;

/// One instruction's control fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control {
    /// Cycles the scheduler waits before issuing the next instruction of the warp (0-15).
    pub(crate) stall: u8,
    /// The yield hint: the scheduler may switch to another warp after this instruction.
    pub(crate) yield_hint: bool,
    /// The scoreboard (0-5) this instruction's result releases, if any.
    pub(crate) write: Option<u8>,
    /// The scoreboard (0-5) released once its sources are read, if any.
    pub(crate) read: Option<u8>,
    /// The scoreboards (bit i: scoreboard i) it waits on before issuing.
    pub(crate) wait: u8,
}

impl fmt::Display for Control {
    /// `B0-----:R-:W1:Y:S07`: waits on SB0, sets no read scoreboard, write scoreboard 1,
    /// yields, stalls 7 cycles.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let wait: String = (0..6)
            .map(|i| {
                if self.wait & (1 << i) != 0 {
                    char::from(b'0' + i)
                } else {
                    '-'
                }
            })
            .collect();
        let sb = |s: Option<u8>| s.map_or("-".to_string(), |s| s.to_string());
        write!(
            f,
            "B{wait}:R{}:W{}:{}:S{:02}",
            sb(self.read),
            sb(self.write),
            if self.yield_hint { 'Y' } else { '-' },
            self.stall
        )
    }
}

impl Control {
    /// Reads the notation [`Control`]'s `Display` writes; `None` for anything else.
    pub fn parse(text: &str) -> Option<Control> {
        let mut parts = text.split(':');
        let (b, r, w, y, s) = (
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
            parts.next()?,
        );
        if parts.next().is_some() {
            return None;
        }
        let b = b.strip_prefix('B').filter(|b| b.len() == 6)?;
        let mut wait = 0;
        for (i, c) in b.chars().enumerate() {
            match c {
                '-' => {}
                c if c.to_digit(10) == Some(i as u32) => wait |= 1 << i,
                _ => return None,
            }
        }
        let sb = |t: &str, p: char| -> Option<Option<u8>> {
            match t.strip_prefix(p)? {
                "-" => Some(None),
                d => d.parse::<u8>().ok().filter(|&d| d < 6).map(Some),
            }
        };
        Some(Control {
            stall: s.strip_prefix('S')?.parse().ok().filter(|&s| s < 16)?,
            yield_hint: match y {
                "Y" => true,
                "-" => false,
                _ => return None,
            },
            write: sb(w, 'W')?,
            read: sb(r, 'R')?,
            wait,
        })
    }

    /// What changed from `old` to `self`, in words: `stall 7 → 1`, `yield → no yield`,
    /// `waits SB1 → SB0`; empty when nothing did.
    pub(crate) fn changes_from(&self, old: &Control) -> Vec<String> {
        let mut out = Vec::new();
        if old.stall != self.stall {
            out.push(format!("stall {} → {}", old.stall, self.stall));
        }
        if old.yield_hint != self.yield_hint {
            let y = |b: bool| if b { "yield" } else { "no yield" };
            out.push(format!("{} → {}", y(old.yield_hint), y(self.yield_hint)));
        }
        let sb = |s: Option<u8>| s.map_or("none".to_string(), |s| format!("SB{s}"));
        if old.wait != self.wait {
            let mask = |m: u8| {
                let v: Vec<String> = (0..6)
                    .filter(|i| m & (1 << i) != 0)
                    .map(|i| format!("SB{i}"))
                    .collect();
                if v.is_empty() {
                    "none".to_string()
                } else {
                    v.join("+")
                }
            };
            out.push(format!("waits {} → {}", mask(old.wait), mask(self.wait)));
        }
        if old.write != self.write {
            out.push(format!("writes {} → {}", sb(old.write), sb(self.write)));
        }
        if old.read != self.read {
            out.push(format!("reads {} → {}", sb(old.read), sb(self.read)));
        }
        out
    }
}

/// The loop's controls with the scoreboards renumbered by first use inside the loop (an
/// instruction's waits in ascending order, then its read and write scoreboards), so that a
/// loop whose scoreboards are only numbered differently has the same schedule.
pub fn renumber(controls: &[Control]) -> Vec<Control> {
    let mut map: BTreeMap<u8, u8> = BTreeMap::new();
    let id = |sb: u8, map: &mut BTreeMap<u8, u8>| -> u8 {
        let next = map.len() as u8;
        *map.entry(sb).or_insert(next)
    };
    controls
        .iter()
        .map(|c| {
            let mut wait = 0;
            for i in 0..6 {
                if c.wait & (1 << i) != 0 {
                    wait |= 1 << id(i, &mut map);
                }
            }
            let read = c.read.map(|s| id(s, &mut map));
            let write = c.write.map(|s| id(s, &mut map));
            Control {
                wait,
                read,
                write,
                ..*c
            }
        })
        .collect()
}

/// The schedule digest of a loop: SHA-256 of each normalised instruction with its
/// (renumbered) control notation, line by line. It holds no address, raw word or offset:
/// the same instructions with the same schedule give the same digest wherever they sit.
pub fn schedule_digest<S: AsRef<str>, C: AsRef<str>>(body: &[S], controls: &[C]) -> String {
    let mut h = Sha256::new();
    for (i, c) in body.iter().zip(controls) {
        h.update(i.as_ref().as_bytes());
        h.update(b"\t");
        h.update(c.as_ref().as_bytes());
        h.update(b"\n");
    }
    crate::digest::hex(&h.finalize())
}

/// The loop's total stall: the cycles its instructions' stall counts add up to, a lower
/// bound on one iteration's issue time that ignores scoreboard waits. `None` when a line
/// is not in the notation.
pub fn total_stall<C: AsRef<str>>(controls: &[C]) -> Option<u32> {
    controls
        .iter()
        .map(|c| Control::parse(c.as_ref()).map(|c| u32::from(c.stall)))
        .sum()
}

/// Where a summary's schedule disagrees with itself: a control line per loop instruction,
/// each in the notation, and the digest they and the loop body give. The results check
/// runs it on every file it reads.
pub(super) fn schedule_problems(sass: &super::SassSummary) -> Vec<String> {
    let Some(digest) = &sass.schedule_digest else {
        return if sass.loop_control.is_empty() {
            Vec::new()
        } else {
            vec!["the SASS summary has loop_control but no schedule_digest".into()]
        };
    };
    if sass.loop_control.len() != sass.loop_body.len() {
        return vec![format!(
            "the SASS summary has {} loop_control lines for {} loop_body instructions",
            sass.loop_control.len(),
            sass.loop_body.len()
        )];
    }
    if let Some(bad) = sass
        .loop_control
        .iter()
        .find(|c| Control::parse(c).is_none())
    {
        return vec![format!(
            "loop_control {bad:?}: expected the notation B------:R-:W-:Y:S00"
        )];
    }
    if *digest != schedule_digest(&sass.loop_body, &sass.loop_control) {
        return vec![
            "the SASS summary's schedule_digest is not what its loop_body and loop_control give"
                .into(),
        ];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(stall: u8, yield_hint: bool, write: Option<u8>, read: Option<u8>, wait: u8) -> Control {
        Control {
            stall,
            yield_hint,
            write,
            read,
            wait,
        }
    }

    #[test]
    fn the_notation_reads_back_and_refuses_anything_else() {
        let x = c(7, true, Some(1), None, 0b100001);
        assert_eq!(x.to_string(), "B0----5:R-:W1:Y:S07");
        assert_eq!(Control::parse(&x.to_string()), Some(x));
        for bad in [
            "",
            "B------:R-:W-:Y",
            "B1-----:R-:W-:Y:S01",
            "B------:R6:W-:Y:S01",
            "B------:R-:W-:Y:S16",
            "B------:R-:W-:Q:S01",
            "B------:R-:W-:Y:S01:X",
        ] {
            assert_eq!(Control::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn renumbering_by_first_use_makes_a_pure_renumbering_no_change() {
        let a = [
            c(1, false, Some(3), None, 0),
            c(2, false, None, None, 1 << 3),
        ];
        let b = [
            c(1, false, Some(0), None, 0),
            c(2, false, None, None, 1 << 0),
        ];
        assert_ne!(a, b);
        assert_eq!(renumber(&a), renumber(&b));
        // A real change survives it: the second instruction waits on another scoreboard.
        let d = [
            c(1, false, Some(0), None, 0),
            c(2, false, None, None, 1 << 1),
        ];
        assert_ne!(renumber(&a), renumber(&d));
        let lines = |x: &[Control]| -> Vec<String> {
            renumber(x).iter().map(ToString::to_string).collect()
        };
        let body = ["FFMA R1, R1, R2, R3", "@!P0 BRA -2"];
        assert_eq!(
            schedule_digest(&body, &lines(&a)),
            schedule_digest(&body, &lines(&b))
        );
        assert_ne!(
            schedule_digest(&body, &lines(&a)),
            schedule_digest(&body, &lines(&d))
        );
    }

    #[test]
    fn changes_are_told_in_words_and_stalls_add_up() {
        let old = c(7, true, None, None, 0b10);
        let new = c(1, false, None, None, 0b01);
        assert_eq!(
            new.changes_from(&old),
            vec!["stall 7 → 1", "yield → no yield", "waits SB1 → SB0"]
        );
        assert!(old.changes_from(&old).is_empty());
        assert_eq!(total_stall(&[old.to_string(), new.to_string()]), Some(8));
        assert_eq!(total_stall(&["garbage"]), None);
    }
}

#[cfg(test)]
mod check {
    use super::*;

    #[test]
    fn a_summary_whose_schedule_disagrees_with_itself_is_refused() {
        let body = vec!["FFMA R1, R1, R2, R3".to_string(), "@!P0 BRA -1".to_string()];
        let control = vec![
            "B------:R-:W-:-:S01".to_string(),
            "B0-----:R-:W-:-:S05".to_string(),
        ];
        let mut s = crate::model::results::SassSummary {
            digest: "0".repeat(64),
            local_memory_instructions: Vec::new(),
            loop_body: body.clone(),
            loop_ffma: 1,
            loop_ffma_destinations: vec!["R1".into()],
            ffma_accumulates_in_place: true,
            loop_partials: vec![1],
            schedule_digest: Some(schedule_digest(&body, &control)),
            loop_control: control,
            schedule_unknown: None,
        };
        assert!(schedule_problems(&s).is_empty());
        s.loop_control[0] = "B------:R-:W-:-:S02".into();
        assert!(schedule_problems(&s)[0].contains("is not what its loop_body"));
        s.loop_control[0] = "stall 2".into();
        assert!(schedule_problems(&s)[0].contains("expected the notation"));
        s.loop_control.pop();
        assert!(schedule_problems(&s)[0].contains("1 loop_control lines for 2"));
        s.schedule_digest = None;
        assert!(schedule_problems(&s)[0].contains("no schedule_digest"));
    }
}
