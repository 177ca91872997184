//! Part of stage 3 (compile): the SASS of the CUBIN that ran, parsed per kernel, and what
//! the study's conclusions rest on read off it: local-memory instructions, the measured
//! loop, its FFMAs and their destination registers, and a digest of the normalised code.
//!
//! Reads `cuobjdump -sass` output (`Function : NAME` headers, `/*ADDR*/ INSTR ;` lines) and
//! `nvdisasm` output (`.text.NAME:` headers, `.L_x_N:` labels, `` `(.L_x_N) `` targets).
//! Both print each instruction's 128-bit encoding as two `/* 0x... */` words (nvdisasm
//! with `-hex`); the second word holds the control fields ([`super::control`]), which the
//! summary keeps as the loop's schedule.
//! Pure text in, plain data out: tested on SASS recorded on the H200.

use super::control;
use crate::model::results::{self, SassSummary};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

/// Opcodes whose operand is a place in the function's code: a label in nvdisasm's listing
/// (`` `(.L_x_81) ``, numbered across the whole CUBIN), an address in cuobjdump's. Both are
/// written relative to the instruction, so that a digest depends neither on the tool nor on
/// which other kernels share the CUBIN (the phased loops' `BSSY` once did).
const TARGETED: [&str; 2] = ["BRA", "BSSY"];

/// One instruction, normalised: no address, no encoding, branch targets relative.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub address: u64,
    /// `@P0 BRA` keeps its predicate; `.reuse` flags are kept (they are ptxas decisions).
    pub text: String,
    /// For branches: the target address.
    pub target: Option<u64>,
    /// The second (high) 64-bit word of the encoding, where the listing prints it: the
    /// control fields are in its top 23 bits.
    pub high_word: Option<u64>,
}

impl Instruction {
    /// The opcode without predicate or modifiers: `FFMA`, `BRA`, `LDL`
    /// ([`crate::model::results::sass_opcode`]).
    pub fn opcode(&self) -> &str {
        results::sass_opcode(&self.text)
    }

    /// Operands, `.reuse` flags removed: `FFMA R10, R10, R9.reuse, UR8` -> [R10, R10, R9, UR8]
    /// ([`crate::model::results::sass_operands`]).
    pub fn operands(&self) -> Vec<String> {
        results::sass_operands(&self.text)
    }

    /// The text with the branch target written relative to this instruction, in instructions.
    fn normalised(&self) -> String {
        match self.target {
            Some(t) => {
                let rel = (t as i64 - self.address as i64) / 16;
                let head = self
                    .text
                    .split_whitespace()
                    .take_while(|w| !w.starts_with("0x") && !w.starts_with('`'))
                    .collect::<Vec<_>>()
                    .join(" ");
                format!("{head} {rel:+}")
            }
            None => self.text.split_whitespace().collect::<Vec<_>>().join(" "),
        }
    }
}

/// A line that could not be read.
pub type ParseError = crate::error::LineError;

/// Parses disassembly into each function's instructions.
pub fn parse(text: &str) -> Result<BTreeMap<String, Vec<Instruction>>, ParseError> {
    let mut out: BTreeMap<String, Vec<Instruction>> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut labels: BTreeMap<String, u64> = BTreeMap::new();
    let mut pending_labels: Vec<String> = Vec::new();
    let mut unresolved: Vec<(String, usize, usize, String)> = Vec::new(); // fn, index, line, label
                                                                          // Set after an instruction line that printed its first encoding word: the next
                                                                          // encoding-only line is its second.
    let mut awaiting_high: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let err = |message: String| ParseError {
            what: "SASS",
            line: n,
            message,
        };
        let line = raw.trim();
        if let Some(name) = line.strip_prefix("Function : ") {
            current = Some(name.trim().to_string());
            out.entry(name.trim().to_string()).or_default();
            continue;
        }
        if let Some(name) = line
            .strip_prefix(".text.")
            .and_then(|l| l.strip_suffix(':'))
        {
            current = Some(name.to_string());
            out.entry(name.to_string()).or_default();
            continue;
        }
        if let Some(section) = line.strip_prefix(".section") {
            // nvdisasm: data sections (.debug_frame, .nv.info...) hold no instructions.
            if !section.trim_start().starts_with(".text.") {
                current = None;
            }
            continue;
        }
        if line.starts_with(".L_") && line.ends_with(':') {
            pending_labels.push(line.trim_end_matches(':').to_string());
            continue;
        }
        let Some(rest) = line.strip_prefix("/*") else {
            continue;
        };
        let Some((addr, body)) = rest.split_once("*/") else {
            return Err(err(format!("unterminated address comment in {line:?}")));
        };
        if !addr.bytes().all(|b| b.is_ascii_hexdigit()) || addr.is_empty() {
            // An encoding line: /* 0x000fe2... */, the second word of the instruction above.
            if let Some(f) = awaiting_high.take() {
                let word = encoding_word(addr)
                    .ok_or_else(|| err(format!("bad encoding word {:?}", addr.trim())))?;
                if let Some(i) = out.get_mut(&f).and_then(|v| v.last_mut()) {
                    i.high_word = Some(word);
                }
            }
            continue;
        }
        let address =
            u64::from_str_radix(addr, 16).map_err(|e| err(format!("bad address {addr:?}: {e}")))?;
        if body.trim_start().starts_with('.') {
            continue; // a data directive (.byte, .dword...) in nvdisasm output
        }
        let Some(instr) = body
            .split(';')
            .next()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        else {
            return Err(err(format!(
                "no instruction after address {addr} (truncated?)"
            )));
        };
        let name = current
            .clone()
            .ok_or_else(|| err("instruction before any function header".into()))?;
        awaiting_high = body
            .split_once(';')
            .and_then(|(_, w)| w.trim().strip_prefix("/*"))
            .and_then(|w| w.strip_suffix("*/"))
            .and_then(encoding_word)
            .map(|_| name.clone());
        for l in pending_labels.drain(..) {
            labels.insert(format!("{name}/{l}"), address);
        }
        let instr = instr.to_string();
        let mut target = None;
        if instr.split_whitespace().any(|w| {
            TARGETED
                .iter()
                .any(|t| w == *t || w.strip_prefix(t).is_some_and(|r| r.starts_with('.')))
        }) {
            if let Some(hex) = instr.split_whitespace().find_map(|w| w.strip_prefix("0x")) {
                target = Some(
                    u64::from_str_radix(hex.trim_end_matches(';'), 16)
                        .map_err(|e| err(format!("bad branch target in {instr:?}: {e}")))?,
                );
            } else if let Some(l) = instr.split("`(").nth(1).and_then(|s| s.split(')').next()) {
                let f = out.get(&name).map_or(0, |v| v.len());
                unresolved.push((name.clone(), f, n, l.to_string()));
            } else {
                return Err(err(format!("branch without a target: {instr:?}")));
            }
        }
        if let Some(prev) = out.get(&name).and_then(|v| v.last()) {
            if address <= prev.address {
                return Err(err(format!(
                    "address {address:#06x} does not follow {:#06x} in {name} (garbled or spliced?)",
                    prev.address
                )));
            }
        }
        out.entry(name).or_default().push(Instruction {
            address,
            text: instr,
            target,
            high_word: None,
        });
    }
    for (f, idx, line, label) in unresolved {
        let addr = labels
            .get(&format!("{f}/{label}"))
            .copied()
            .ok_or(ParseError {
                what: "SASS",
                line,
                message: format!("branch to unknown label {label}"),
            })?;
        if let Some(i) = out.get_mut(&f).and_then(|v| v.get_mut(idx)) {
            i.target = Some(addr);
        }
    }
    if let Some((name, _)) = out.iter().find(|(_, v)| v.is_empty()) {
        return Err(ParseError {
            what: "SASS",
            line: text.lines().count(),
            message: format!("function {name} has no instructions (truncated?)"),
        });
    }
    Ok(out)
}

/// One encoding word as a listing prints it between `/*` and `*/`: ` 0x000fe20008000007 `.
fn encoding_word(text: &str) -> Option<u64> {
    let hex = text.trim().strip_prefix("0x")?;
    (hex.len() == 16)
        .then(|| u64::from_str_radix(hex, 16).ok())
        .flatten()
}

/// The architecture a listing is for: nvdisasm's `.target sm_90`, or cuobjdump's
/// `.headerflags @"EF_CUDA_SM90 ..."` (the first one, for a listing of one CUBIN).
pub fn architecture(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let l = l.trim();
        if let Some(t) = l.strip_prefix(".target") {
            return t.split_whitespace().next().map(str::to_string);
        }
        let flags = l.strip_prefix(".headerflags")?;
        let sm = flags.split("EF_CUDA_SM").nth(1)?;
        let digits: String = sm.chars().take_while(char::is_ascii_digit).collect();
        (!digits.is_empty()).then(|| format!("sm_{digits}"))
    })
}

/// For each instruction of a loop body, the FFMA chain (partial accumulator) it extends,
/// numbered in order of first appearance; `None` for anything but an FFMA
/// ([`crate::model::results::chain_of_each`]).
pub fn chain_of_each(body: &[Instruction]) -> Vec<Option<usize>> {
    let texts: Vec<&str> = body.iter().map(|i| i.text.as_str()).collect();
    results::chain_of_each(&texts)
}

/// Reads normalised loop-body lines (as stored in results) back as instructions.
pub fn from_lines(lines: &[String]) -> Vec<Instruction> {
    lines
        .iter()
        .enumerate()
        .map(|(i, l)| Instruction {
            address: 16 * i as u64,
            text: l.clone(),
            target: None,
            high_word: None,
        })
        .collect()
}

/// Why a function's SASS has no summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummaryError {
    #[error("no backward branch around a clock read: the measured loop is not in the SASS")]
    NoMeasuredLoop,
}

/// Reads the summary of one function, its schedule undecoded ([`summarise_on`] with no
/// architecture).
pub fn summarise(instructions: &[Instruction]) -> Result<SassSummary, SummaryError> {
    summarise_on(instructions, None)
}

/// Reads the summary of one function compiled for `arch` (the listing's
/// [`architecture`]); an error when no loop with a clock read is found.
pub fn summarise_on(
    instructions: &[Instruction],
    arch: Option<&str>,
) -> Result<SassSummary, SummaryError> {
    let normalised: Vec<String> = instructions.iter().map(Instruction::normalised).collect();
    let mut h = Sha256::new();
    for l in &normalised {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    let digest = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    let local_memory_instructions = instructions
        .iter()
        .filter(|i| matches!(i.opcode(), "LDL" | "STL"))
        .map(|i| format!("/*{:04x}*/ {}", i.address, i.text))
        .collect();
    // The measured loop: the first backward branch whose body reads the clock and holds an
    // FFMA (a phased start's wait loop reads the clock too, but does no arithmetic).
    let back = instructions.iter().enumerate().find_map(|(end, i)| {
        let t = i.target.filter(|&t| t <= i.address)?;
        let start = instructions[..=end].iter().rposition(|x| x.address == t)?;
        let body = &instructions[start..=end];
        (body.iter().any(|x| x.text.contains("SR_CLOCKLO"))
            && body.iter().any(|x| x.opcode() == "FFMA"))
        .then_some((start, end))
    });
    let (start, end) = back.ok_or(SummaryError::NoMeasuredLoop)?;
    // The loop's figures come from the normalised body as it is stored, through the
    // function the results check recomputes them with: the two never disagree.
    let loop_body = normalised[start..=end].to_vec();
    let shape = results::loop_shape(&loop_body);
    let (loop_control, schedule_digest, schedule_unknown) =
        match control::loop_schedule(&instructions[start..=end], arch) {
            Ok(c) => {
                let d = results::schedule_digest(&loop_body, &c);
                (c, Some(d), None)
            }
            Err(why) => (Vec::new(), None, Some(why)),
        };
    Ok(SassSummary {
        digest,
        local_memory_instructions,
        loop_body,
        loop_ffma: shape.loop_ffma,
        loop_ffma_destinations: shape.loop_ffma_destinations,
        ffma_accumulates_in_place: shape.ffma_accumulates_in_place,
        loop_partials: shape.loop_partials,
        loop_control,
        schedule_digest,
        schedule_unknown,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CUOBJDUMP: &str = "
\t\tFunction : k
        /*0000*/                   CS2R R4, SR_CLOCKLO ;                        /* 0x0000000000047805 */
                                                                                 /* 0x000fe40000015000 */
        /*0010*/                   FFMA R10, R10, R9.reuse, UR8 ;                /* 0x000000080a0a7e23 */
                                                                                 /* 0x000fe20008000009 */
        /*0020*/                   FFMA R11, R11, R9, UR8 ;                     /* 0x000000080b0b7e23 */
        /*0030*/                   CS2R R6, SR_CLOCKLO ;                        /* 0x0000000000067805 */
        /*0040*/              @!P0 BRA 0x10 ;                                   /* 0xfffffffc00f08947 */
        /*0050*/                   EXIT ;                                       /* 0x000000000000794d */
        /*0060*/                   BRA 0x60;                                    /* 0xfffffffc00fc7947 */
";

    const NVDISASM: &str = "
.text.k:
        /*0000*/                   CS2R R4, SR_CLOCKLO ;
.L_x_0:
        /*0010*/                   FFMA R10, R10, R9.reuse, UR8 ;
        /*0020*/                   FFMA R11, R11, R9, UR8 ;
        /*0030*/                   CS2R R6, SR_CLOCKLO ;
        /*0040*/              @!P0 BRA `(.L_x_0) ;
        /*0050*/                   EXIT ;
.L_x_1:
        /*0060*/                   BRA `(.L_x_1);
";

    #[test]
    fn both_disassemblers_give_the_same_loop_and_digest() {
        let a = summarise(&parse(CUOBJDUMP).unwrap()["k"]).unwrap();
        let b = summarise(&parse(NVDISASM).unwrap()["k"]).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.loop_body,
            vec![
                "FFMA R10, R10, R9.reuse, UR8",
                "FFMA R11, R11, R9, UR8",
                "CS2R R6, SR_CLOCKLO",
                "@!P0 BRA -3"
            ]
        );
        assert_eq!(a.loop_ffma, 2);
        assert_eq!(a.loop_ffma_destinations, vec!["R10", "R11"]);
        assert!(a.ffma_accumulates_in_place);
        assert_eq!(a.loop_partials, vec![1, 1]);
        assert!(a.local_memory_instructions.is_empty());
    }

    #[test]
    fn a_bssy_target_is_relative_whatever_the_label_is_numbered() {
        let cuobjdump = "
\t\tFunction : k
        /*0000*/                   BSSY B0, 0x20 ;
        /*0010*/                   NOP ;
        /*0020*/                   BSYNC B0 ;
";
        // nvdisasm numbers labels across the CUBIN: the same kernel beside others.
        let nvdisasm = "
.text.k:
        /*0000*/                   BSSY B0, `(.L_x_81) ;
        /*0010*/                   NOP ;
.L_x_81:
        /*0020*/                   BSYNC B0 ;
";
        let (a, b) = (parse(cuobjdump).unwrap(), parse(nvdisasm).unwrap());
        assert_eq!(a["k"][0].normalised(), "BSSY B0, +2");
        assert_eq!(b["k"][0].normalised(), "BSSY B0, +2");
    }

    #[test]
    fn opcodes_and_operands_drop_predicates_modifiers_and_reuse() {
        let i = Instruction {
            address: 0,
            text: "@P1 FFMA.FTZ R1, R2.reuse, R3, R1".into(),
            target: None,
            high_word: None,
        };
        assert_eq!(i.opcode(), "FFMA");
        assert_eq!(i.operands(), vec!["R1", "R2", "R3", "R1"]);
        // Found by the sass fuzz target: with more than one space (or a tab) after the
        // predicate, the opcode and operands differed from those of the normalised loop
        // body, so `cargo xtask sass` showed other chains than the summary recorded.
        for text in ["@P1   FFMA R1, R2, R3, R1", "@P1\tFFMA R1, R2, R3, R1"] {
            let i = Instruction {
                address: 0,
                text: text.into(),
                target: None,
                high_word: None,
            };
            assert_eq!(
                (i.opcode(), i.operands()),
                (
                    "FFMA",
                    vec!["R1".to_string(), "R2".into(), "R3".into(), "R1".into()]
                ),
                "{text:?}"
            );
        }
    }

    #[test]
    fn malformed_and_truncated_sass_are_errors() {
        assert!(parse("        /*0010*/ FFMA R1, R1, R2, R3 ;")
            .unwrap_err()
            .message
            .contains("before any function"));
        assert!(parse("Function : k\n        /*0010*/   ")
            .unwrap_err()
            .message
            .contains("no instruction"));
        assert!(parse("Function : k\n")
            .unwrap_err()
            .message
            .contains("no instructions"));
        assert!(parse("Function : k\n /*0010*/ @P0 BRA `(.L_x_9) ;")
            .unwrap_err()
            .message
            .contains("unknown label"));
        assert!(parse("Function : k\n /*0010*/ BRA ;")
            .unwrap_err()
            .message
            .contains("without a target"));
        // Found by fuzzing: a spliced listing whose addresses repeat made the loop search
        // slice backwards and panic.
        let spliced = "Function : k\n /*0000*/ CS2R R4, SR_CLOCKLO ;\n /*0010*/ FFMA R1, R1, R2, R3 ;\n /*0000*/ @P0 BRA 0x10 ;";
        assert!(parse(spliced)
            .unwrap_err()
            .message
            .contains("does not follow"));
        // A phased start waits on the clock in a loop of its own before the measured one:
        // the measured loop is the first clock loop that does arithmetic.
        let phased = parse(
            "Function : k\n /*0000*/ CS2R R4, SR_CLOCKLO ;\n /*0010*/ CS2R R6, SR_CLOCKLO ;\n \
             /*0020*/ @P0 BRA 0x10 ;\n /*0030*/ CS2R R8, SR_CLOCKLO ;\n \
             /*0040*/ FFMA R1, R1, R2, R3 ;\n /*0050*/ @P1 BRA 0x30 ;\n /*0060*/ EXIT ;",
        )
        .unwrap();
        let s = summarise(&phased["k"]).unwrap();
        assert_eq!(
            (s.loop_ffma, s.loop_body.len()),
            (1, 3),
            "{:?}",
            s.loop_body
        );
        let no_loop =
            parse("Function : k\n /*0000*/ FFMA R1, R1, R2, R3 ;\n /*0010*/ EXIT ;").unwrap();
        assert!(summarise(&no_loop["k"])
            .unwrap_err()
            .to_string()
            .contains("no backward branch"));
    }
}

#[cfg(test)]
mod recorded {
    use super::*;
    use crate::model::variant::{matrix, Sink};

    /// `cuobjdump -sass` of the CUBINs the H200 profile's recorded run measured (sm_90,
    /// tests/data/h200/): its 129 variants, its contexts included.
    const H200: &str = include_str!("../../tests/data/h200/sass.txt");
    /// `nvdisasm -ndf` (CUDA 13.0.85, on the H200) of the same CUBINs, with their data
    /// sections and without the encoding words.
    const H200_NVDISASM: &str = include_str!("../../tests/data/h200/nvdisasm.txt");

    #[test]
    fn nvdisasm_and_cuobjdump_agree_on_every_loop() {
        let a = parse(H200).unwrap();
        let b = parse(H200_NVDISASM).unwrap();
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        let mut same_digest = 0;
        for (name, f) in &a {
            let (x, y) = (summarise(f).unwrap(), summarise(&b[name]).unwrap());
            assert_eq!(
                (x.loop_ffma, &x.loop_partials),
                (y.loop_ffma, &y.loop_partials),
                "{name}"
            );
            assert_eq!(
                x.local_memory_instructions.len(),
                y.local_memory_instructions.len(),
                "{name}"
            );
            same_digest += usize::from(x.digest == y.digest);
        }
        // The normalisation (no addresses, no encodings, relative branch targets) makes the
        // digest independent of the tool: a runner with either one checks the same baselines.
        assert_eq!(same_digest, a.len());
    }

    #[test]
    fn the_h200_words_fit_the_published_layout_and_every_loop_has_a_schedule() {
        assert_eq!(architecture(H200).as_deref(), Some("sm_90"));
        let functions = parse(H200).unwrap();
        let (mut words, mut marked) = (0, 0);
        for (name, f) in &functions {
            for i in f {
                // cuobjdump prints both words of every instruction.
                let w = i.high_word.unwrap_or_else(|| panic!("{name}: {}", i.text));
                let d = control::decode(w);
                assert_eq!(d.unused, 0, "{name}: bits 126-127 of {}", i.text);
                assert_eq!(d.reuse, control::reuse_marks(&i.text), "{name}: {}", i.text);
                words += 1;
                marked += usize::from(d.reuse != 0);
            }
            let s = summarise_on(f, Some("sm_90")).unwrap();
            assert_eq!(s.schedule_unknown, None, "{name}");
            assert_eq!(s.loop_control.len(), s.loop_body.len(), "{name}");
            assert_eq!(
                s.schedule_digest.as_deref(),
                Some(results::schedule_digest(&s.loop_body, &s.loop_control).as_str())
            );
        }
        assert!(
            words > 6_000 && marked > 900,
            "{words} words, {marked} with reuse"
        );
        // The listing without its words (nvdisasm without -hex) and an architecture whose
        // layout is unknown are said, not guessed.
        let plain = parse(H200_NVDISASM).unwrap();
        let s = summarise_on(&plain["chain7_acc1_effective1"], Some("sm_90")).unwrap();
        assert!(s.schedule_unknown.unwrap().contains("no encoding words"));
        let f = &functions["chain7_acc1_effective1"];
        let s = summarise_on(f, Some("sm_100")).unwrap();
        assert_eq!(
            s.schedule_unknown.as_deref(),
            Some("control fields not decoded: layout of sm_100 unknown")
        );
        assert_eq!((s.loop_control.len(), s.schedule_digest), (0, None));
    }

    #[test]
    fn a_word_that_does_not_fit_the_layout_is_said() {
        let functions = parse(H200).unwrap();
        let mut f = functions["chain7_acc1_effective1"].clone();
        let last = f.len() - 2; // inside or after the loop: set the bits on every one
        for i in f.iter_mut().take(last) {
            i.high_word = i.high_word.map(|w| w | (1 << 62));
        }
        let s = summarise_on(&f, Some("sm_90")).unwrap();
        assert!(s.schedule_unknown.unwrap().contains("bits 126-127"));
    }

    #[test]
    fn every_h200_variant_has_n_ffmas_over_e_registers_and_no_local_memory() {
        let functions = parse(H200).unwrap();
        assert_eq!(
            functions.len(),
            129,
            "24 documented variants, 45 sink-isolation ones and 60 in contexts"
        );
        let sink = [Sink::B, Sink::C, Sink::D];
        let all = matrix(&[7, 13, 29], &[1, 2, 3, 4, 5, 7, 8, 16])
            .into_iter()
            .chain(sink.iter().flat_map(|&m| {
                matrix(&[7, 13, 29], &[1, 2, 3, 4, 8])
                    .into_iter()
                    .map(move |v| v.with_sink(m))
            }));
        for v in all {
            let s = summarise(&functions[&v.name()]).unwrap();
            assert_eq!(s.loop_ffma, v.chain, "{v}: {:#?}", s.loop_body);
            assert_eq!(
                s.loop_partials.len() as u32,
                v.effective(),
                "{v}: {:?}",
                s.loop_partials
            );
            let (lo, hi) = (
                s.loop_partials.iter().min().unwrap(),
                s.loop_partials.iter().max().unwrap(),
            );
            assert!(
                hi - lo <= 1,
                "{v}: round-robin chains {:?}",
                s.loop_partials
            );
            if v.effective() == 1 {
                assert!(s.ffma_accumulates_in_place, "{v}");
            }
            assert!(s.local_memory_instructions.is_empty(), "{v}");
            assert_eq!(s.digest.len(), 64);
        }
        let acc1 = summarise(&functions["chain29_acc1_effective1"]).unwrap();
        assert_eq!(acc1.loop_ffma_destinations, vec!["R11"]);
    }
}
