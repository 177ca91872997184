//! The loop-carried accumulations of a SASS loop body: chains of one opcode (FADD, FFMA)
//! whose last result the first reads in the next iteration. What a real accumulation's
//! loop shape is judged by (a softmax's `x - max` FADDs and a block reduction's
//! per-iteration partials are FADDs too, but none carries a value into the next
//! iteration).

use super::loop_shape::{sass_opcode, sass_operands};
use std::collections::BTreeMap;

/// The registers a normalised SASS instruction writes, as far as the loop-carry test
/// needs them: its first operand when that is a general register (the second for SHFL,
/// whose first is a predicate), widened to 2 or 4 registers for a 64- or 128-bit load,
/// CS2R and a wide IMAD. Comparisons write predicates only; stores and branches nothing.
pub fn written_registers(text: &str) -> Vec<u32> {
    let op = sass_opcode(text);
    if op.ends_with("SETP") || op.starts_with("ST") || matches!(op, "BRA" | "BAR" | "RED" | "ATOM")
    {
        return Vec::new();
    }
    let ops = sass_operands(text);
    let dest = if op == "SHFL" {
        ops.get(1)
    } else {
        ops.first()
    };
    let Some(n) = dest
        .and_then(|d| d.strip_prefix('R'))
        .and_then(|n| n.parse::<u32>().ok())
    else {
        return Vec::new();
    };
    // The opcode with its modifiers (`LDG.E.128.STRONG.GPU`): the first word that is not a
    // predicate.
    let modifiers = text
        .split_whitespace()
        .find(|w| !w.starts_with('@'))
        .unwrap_or("");
    let width = if modifiers.contains(".128") {
        4
    } else if modifiers.contains(".64") || modifiers.contains(".WIDE") || op == "CS2R" {
        2
    } else {
        1
    };
    (n..n + width).collect()
}

/// The lengths of `body`'s loop-carried chains of `opcode`, in order of first appearance.
/// A chain starts at an `opcode` instruction none of whose sources an earlier one of the
/// chain wrote, and follows through `opcode` instructions that read its register; it is
/// carried when its first instruction reads the register its last one writes and nothing
/// else in the loop writes that register (before the first, after the last).
pub fn carried_chains<S: AsRef<str>>(body: &[S], opcode: &str) -> Vec<u32> {
    let texts: Vec<&str> = body.iter().map(AsRef::as_ref).collect();
    let writes: Vec<Vec<u32>> = texts.iter().map(|t| written_registers(t)).collect();
    let reg = |o: &String| o.strip_prefix('R').and_then(|n| n.parse::<u32>().ok());
    // Per chain: its instructions' indices, the sources of its first, its last destination.
    let mut chains: Vec<(Vec<usize>, Vec<u32>, u32)> = Vec::new();
    let mut holder: BTreeMap<u32, usize> = BTreeMap::new();
    for (i, t) in texts.iter().enumerate() {
        let is_op = sass_opcode(t) == opcode;
        let ops = sass_operands(t);
        let dest = if is_op {
            ops.first().and_then(reg)
        } else {
            None
        };
        let Some(dest) = dest else {
            for w in &writes[i] {
                holder.remove(w);
            }
            continue;
        };
        let sources: Vec<u32> = ops[1..].iter().filter_map(reg).collect();
        let chain = match sources.iter().find_map(|s| holder.get(s).copied()) {
            Some(c) => c,
            None => {
                chains.push((Vec::new(), sources.clone(), dest));
                chains.len() - 1
            }
        };
        chains[chain].0.push(i);
        chains[chain].2 = dest;
        for w in &writes[i] {
            holder.remove(w);
        }
        holder.insert(dest, chain);
    }
    chains
        .iter()
        .filter(|(at, first_sources, last)| {
            let (first, end) = (at[0], at[at.len() - 1]);
            first_sources.contains(last)
                && !writes[..first].iter().flatten().any(|w| w == last)
                && !writes[end + 1..].iter().flatten().any(|w| w == last)
        })
        .map(|(at, _, _)| at.len() as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_registers_follow_the_destination_and_its_width() {
        assert_eq!(written_registers("LDS.128 R16, [UR6]"), [16, 17, 18, 19]);
        assert_eq!(
            written_registers("@!P0 LDG.E.64 R4, desc[UR4][R2.64]"),
            [4, 5]
        );
        assert_eq!(written_registers("CS2R R8, SR_CLOCKLO"), [8, 9]);
        assert_eq!(written_registers("SHFL.BFLY PT, R5, R18, 0x10, 0x1f"), [5]);
        assert_eq!(written_registers("FFMA R10, R10, R9, UR8"), [10]);
        assert!(written_registers("FSETP.GEU.AND P0, PT, R12, -126, PT").is_empty());
        assert!(written_registers("STS.128 [R12], R8").is_empty());
        assert!(written_registers("@P0 BRA -5").is_empty());
    }

    #[test]
    fn only_chains_carried_into_the_next_iteration_count() {
        // A softmax at E = 2, cut down: two carried FADD chains (R23, R18), beside FADDs
        // that subtract the maximum from a freshly loaded value (R12, R13).
        let body = [
            "LDS.128 R12, [R24]",
            "FADD R12, R12, -UR5",
            "FADD R13, R13, -UR5",
            "MUFU.EX2 R12, R12",
            "MUFU.EX2 R21, R13",
            "FADD R23, R12, R23",
            "FADD R18, R21, R18",
            "FADD R23, R14, R23",
            "FADD R18, R15, R18",
            "CS2R R4, SR_CLOCKLO",
            "@!P0 BRA -10",
        ];
        assert_eq!(carried_chains(&body, "FADD"), [2, 2]);
        assert!(carried_chains(&body, "FFMA").is_empty());
        // A chain renamed within the iteration and back (R8 -> R42 -> R8) is carried.
        let renamed = [
            "FFMA R8, R5, R8, R42",
            "FFMA R8, R43, R10, R8",
            "FFMA R42, R25, R22, R8",
        ];
        assert_eq!(carried_chains(&renamed, "FFMA"), [3]);
        // One whose register a load overwrites before it is read again is not.
        let reloaded = ["LDS R9, [R1]", "FFMA R9, R9, R2, R3", "LDS R9, [R1+0x4]"];
        assert!(carried_chains(&reloaded, "FFMA").is_empty());
        // A block reduction's partials start from zero every iteration: none carried.
        let from_zero = [
            "FADD R27, RZ, R4",
            "FADD R27, R6, R27",
            "FADD R24, R27, R24",
        ];
        assert!(carried_chains(&from_zero, "FADD").is_empty());
    }
}
