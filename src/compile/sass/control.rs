//! Part of stage 3 (compile): each instruction's control fields, decoded from its 128-bit
//! encoding, which architectures' layout is known, and the measured loop's schedule read
//! with them (or why it is not read).
//!
//! The layout (Volta and later, one 128-bit word per instruction; bit 0 the lowest bit of
//! the first 64-bit word the disassembler prints, bit 127 the highest of the second): the
//! control field is bits 105-127, the top 23 bits of the second word:
//!
//! | bits    | field |
//! | ------- | ----- |
//! | 105-108 | stall cycles (0-15) |
//! | 109     | yield bit: clear is read as yield (the `Y` of the notation), as CuAssembler reads it |
//! | 110-112 | write scoreboard (7: none) |
//! | 113-115 | read scoreboard (7: none) |
//! | 116-121 | wait mask (bit i: scoreboard i) |
//! | 122-125 | operand reuse (bit 0: the first source operand, bit 1 the second, ...) |
//! | 126-127 | unused (0) |
//!
//! Published for Volta by Jia, Maggioni, Smith and Scarpazza, "Dissecting the NVIDIA Volta
//! GPU Architecture via Microbenchmarking" (arXiv:1804.06826, 2018, section 2, "control
//! information") and for Turing in their "Dissecting the NVIDIA Turing T4 GPU via
//! Microbenchmarking" (arXiv:1903.07486, 2019); the same fields, with the notation
//! `B------:R-:W-:Y:S04`, are what CuAssembler's decoder reads for sm_70 to sm_86
//! (github.com/cloudcores/CuAssembler, `CuAsm/`), and turingas' grammar writes for sm_70
//! and sm_75. Ada (sm_89) and Hopper (sm_90) are not in those sources; their words read
//! consistently with the layout (bits 126-127 always 0, the reuse bits exactly the `.reuse`
//! marks: `tests/nvrtc/` and the tests below on NVRTC output), so they are decoded with
//! it. Nothing published describes Blackwell (sm_100, sm_120): its control fields are not
//! decoded, and the case says so rather than guess.

use super::listing::Instruction;
use crate::model::results::Control;

/// The architectures whose control-field layout is the one above.
pub const KNOWN_LAYOUT: &[&str] = &[
    "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a",
];

/// One instruction's control field, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) control: Control,
    /// Operand reuse flags (bit 0: the first source operand).
    pub(crate) reuse: u8,
    /// Bits 126-127, which the layout leaves unused.
    pub(crate) unused: u8,
}

/// Decodes the control field from the second (high) 64-bit word of an instruction.
pub(crate) fn decode(high: u64) -> Decoded {
    let c = high >> 41; // bits 105-127 of the instruction are bits 41-63 of this word
    let sb = |v: u64| (v != 7).then_some(v as u8);
    Decoded {
        control: Control {
            stall: (c & 0xf) as u8,
            yield_hint: (c >> 4) & 1 == 0,
            write: sb((c >> 5) & 7),
            read: sb((c >> 8) & 7),
            wait: ((c >> 11) & 0x3f) as u8,
        },
        reuse: ((c >> 17) & 0xf) as u8,
        unused: ((c >> 21) & 3) as u8,
    }
}

/// Why `arch`'s control fields are not decoded, or `None` when its layout is known.
pub(crate) fn unknown_layout(arch: Option<&str>) -> Option<String> {
    match arch {
        None => {
            Some("control fields not decoded: the disassembly names no architecture".to_string())
        }
        Some(a) if KNOWN_LAYOUT.contains(&a) => None,
        Some(a) => Some(format!("control fields not decoded: layout of {a} unknown")),
    }
}

/// The reuse flags an instruction's text marks: bit i for the operand port the i-th source
/// operand (the operands after the destination) written `R9.reuse` is read through. The
/// ports are the operands' order, except FADD's second source, which goes through the third
/// port (FADD is an FFMA's a x 1 + c): in the recorded H200 SASS every
/// `FADD Rd, Ra, Rb.reuse` sets reuse bit 2, and every other instruction the bit of its
/// operand's place (`recorded` tests in compile/sass.rs).
pub(crate) fn reuse_marks(text: &str) -> u8 {
    let ops = crate::model::results::sass_operands(&text.replace(".reuse", ".REUSEMARK"));
    let fadd = text
        .split_whitespace()
        .find(|w| !w.starts_with('@'))
        .is_some_and(|op| op == "FADD" || op.starts_with("FADD."));
    ops.iter()
        .skip(1)
        .enumerate()
        .filter(|(_, o)| o.contains(".REUSEMARK"))
        .map(|(i, _)| if fadd && i == 1 { 2 } else { i })
        .fold(0, |m, i| m | (1 << i))
}

/// The loop's control fields in [`Control`](crate::model::results::Control)'s notation,
/// scoreboards renumbered by first use, decoded from the encoding words on `arch`; or why
/// they are not decoded. An encoding that does not fit the layout (bits 126-127 set, reuse
/// bits other than the `.reuse` marks) is said, never read.
pub(super) fn loop_schedule(
    body: &[Instruction],
    arch: Option<&str>,
) -> Result<Vec<String>, String> {
    if let Some(why) = unknown_layout(arch) {
        return Err(why);
    }
    let arch = arch.unwrap_or_default();
    let mut controls = Vec::new();
    for i in body {
        let Some(word) = i.high_word else {
            return Err(
                "control fields not decoded: the disassembly carries no encoding words (nvdisasm without -hex)".into(),
            );
        };
        let d = decode(word);
        if d.unused != 0 {
            return Err(format!(
                "control fields not decoded: bits 126-127 of `{}` are {:#b} on {arch}, where the layout leaves them 0",
                i.text, d.unused
            ));
        }
        if d.reuse != reuse_marks(&i.text) {
            return Err(format!(
                "control fields not decoded: the reuse bits {:#06b} of `{}` on {arch} are not its .reuse marks",
                d.reuse, i.text
            ));
        }
        controls.push(d.control);
    }
    Ok(crate::model::results::renumber(&controls)
        .iter()
        .map(ToString::to_string)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The high word with the control field `c` (23 bits) in bits 41-63.
    fn word(c: u64) -> u64 {
        (c << 41) | 0x0000_0008_0000_0007
    }

    #[test]
    fn each_field_is_where_the_published_layout_puts_it() {
        // stall 7, yield bit set (no yield), write SB1, no read scoreboard, waits on SB0 and
        // SB5, reuses its second source.
        let c = 7 | (1 << 4) | (1 << 5) | (7 << 8) | (0b100001 << 11) | (0b0010 << 17);
        let d = decode(word(c));
        assert_eq!(
            d.control,
            Control {
                stall: 7,
                yield_hint: false,
                write: Some(1),
                read: None,
                wait: 0b100001
            }
        );
        assert_eq!((d.reuse, d.unused), (0b0010, 0));
        assert_eq!(decode(word(3 << 21)).unused, 3);
        // Recorded words of the H200's CUBIN (cuobjdump, NVRTC 13.0, sm_90): a loop FFMA
        // marked `R7.reuse` that waits on SB0, and the usual `stall 2` with no scoreboard.
        let ffma = decode(0x081fe20008000007);
        assert_eq!(ffma.control.to_string(), "B0-----:R-:W-:-:S01");
        assert_eq!(ffma.reuse, 0b0010);
        assert_eq!(
            decode(0x000fe40000015000).control.to_string(),
            "B------:R-:W-:-:S02"
        );
    }

    #[test]
    fn reuse_marks_number_the_source_operands() {
        assert_eq!(reuse_marks("FFMA R16, R16, R7.reuse, UR10"), 0b0010);
        assert_eq!(reuse_marks("@P0 IADD3 R6, R0.reuse, 0x4, RZ"), 0b0001);
        assert_eq!(reuse_marks("FFMA R1, R2, R3, R4"), 0);
        // FADD's second source is read through the third port.
        assert_eq!(reuse_marks("FADD R11, R8, R20.reuse"), 0b0100);
        assert_eq!(reuse_marks("@P1 FADD.FTZ R11, R8.reuse, R20"), 0b0001);
    }

    #[test]
    fn an_unknown_layout_is_said_never_guessed() {
        for a in ["sm_80", "sm_86", "sm_89", "sm_90"] {
            assert_eq!(unknown_layout(Some(a)), None, "{a}");
        }
        for a in ["sm_100", "sm_120"] {
            assert_eq!(
                unknown_layout(Some(a)).unwrap(),
                format!("control fields not decoded: layout of {a} unknown")
            );
        }
        assert!(unknown_layout(None)
            .unwrap()
            .contains("names no architecture"));
    }
}
