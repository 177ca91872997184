//! What the study's conclusions rest on, read off one function's instructions: the digest
//! of the normalised code, local-memory instructions, and the measured loop with its shape
//! and schedule.

use super::control;
use super::listing::Instruction;
use crate::model::results::{self, SassSummary};
use sha2::{Digest, Sha256};

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
/// [`architecture`](super::architecture)); an error when no loop with a clock read is found.
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
    let digest = crate::digest::hex(&h.finalize());
    let local_memory_instructions = instructions
        .iter()
        .filter(|i| matches!(i.opcode(), "LDL" | "STL"))
        .map(|i| format!("/*{:04x}*/ {}", i.address, i.text))
        .collect();
    // The measured loop: the first backward branch whose body reads the clock and holds an
    // FFMA or an FADD (a phased start's wait loop reads the clock too, but does no
    // floating-point arithmetic; a softmax or block reduction accumulates with FADD).
    let back = instructions.iter().enumerate().find_map(|(end, i)| {
        let t = i.target.filter(|&t| t <= i.address)?;
        let start = instructions[..=end].iter().rposition(|x| x.address == t)?;
        let body = &instructions[start..=end];
        (body.iter().any(|x| x.text.contains("SR_CLOCKLO"))
            && body.iter().any(|x| matches!(x.opcode(), "FFMA" | "FADD")))
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
