//! The shape of a SASS loop body: opcodes and operands of normalised instruction text, the
//! FFMA chain (partial accumulator) each instruction extends, and the figures a loop body
//! alone determines. The one definition, which the compile stage's parser
//! (`compile::sass`) and the results check share.

use std::collections::BTreeMap;

/// A SASS instruction's text without its predicate: `@!P0 BRA 0x10` -> `BRA 0x10`. The
/// predicate ends at any run of whitespace (a run of spaces or a tab once made the opcode
/// read differently in the compile stage and in the normalised loop body; found by the
/// sass fuzz target).
fn unpredicated(text: &str) -> &str {
    let t = text.trim_start();
    if t.starts_with('@') {
        t.split_once(char::is_whitespace)
            .map_or("", |x| x.1.trim_start())
    } else {
        t
    }
}

/// The opcode of a SASS instruction's text, its predicate and modifiers dropped:
/// `@P0 STL.64 [R1], R2` -> `STL`. The one definition, which the compile stage's parser
/// (`compile::sass`) and the results check share.
pub(crate) fn sass_opcode(text: &str) -> &str {
    let op = unpredicated(text).split_whitespace().next().unwrap_or("");
    op.split('.').next().unwrap_or(op)
}

/// A SASS instruction's operands, `.reuse` flags removed:
/// `FFMA R10, R10, R9.reuse, UR8` -> [R10, R10, R9, UR8].
pub(crate) fn sass_operands(text: &str) -> Vec<String> {
    let rest = unpredicated(text)
        .split_once(char::is_whitespace)
        .map_or("", |x| x.1);
    rest.split(',')
        .map(|o| o.trim().replace(".reuse", ""))
        .filter(|o| !o.is_empty())
        .collect()
}

/// For each instruction of a loop body, the FFMA chain (partial accumulator) it extends,
/// numbered in order of first appearance; `None` for anything but an FFMA. A chain starts
/// at an FFMA whose sources no earlier FFMA of the chain wrote, and follows through FFMAs
/// and MOVs; any other instruction writing a register ends what it held.
pub fn chain_of_each<S: AsRef<str>>(body: &[S]) -> Vec<Option<usize>> {
    let mut holder: BTreeMap<String, usize> = BTreeMap::new();
    let mut next = 0;
    let mut out = Vec::new();
    for i in body {
        let ops = sass_operands(i.as_ref());
        let Some(dest) = ops
            .first()
            .filter(|d| d.starts_with('R') && *d != "RZ")
            .cloned()
        else {
            out.push(None);
            continue;
        };
        match sass_opcode(i.as_ref()) {
            "FFMA" => {
                let chain = ops[1..]
                    .iter()
                    .find_map(|s| holder.get(s).copied())
                    .unwrap_or_else(|| {
                        next += 1;
                        next - 1
                    });
                holder.insert(dest, chain);
                out.push(Some(chain));
                continue;
            }
            "MOV" => match ops.get(1).and_then(|s| holder.get(s).copied()) {
                Some(c) => {
                    holder.insert(dest, c);
                }
                None => {
                    holder.remove(&dest);
                }
            },
            _ => {
                holder.remove(&dest);
            }
        }
        out.push(None);
    }
    out
}

/// What a loop body alone determines of a [`SassSummary`](super::SassSummary): its FFMAs,
/// their destinations, whether they accumulate in place, and the partials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopShape {
    pub(crate) loop_ffma: u32,
    pub(crate) loop_ffma_destinations: Vec<String>,
    pub(crate) ffma_accumulates_in_place: bool,
    pub(crate) loop_partials: Vec<u32>,
}

/// The [`LoopShape`] of a normalised loop body: what the compile stage stores in a
/// summary, and what [`RunResults::check`](super::RunResults::check) recomputes from the
/// stored body.
pub(crate) fn loop_shape<S: AsRef<str>>(body: &[S]) -> LoopShape {
    let ffmas: Vec<&str> = body
        .iter()
        .map(AsRef::as_ref)
        .filter(|i| sass_opcode(i) == "FFMA")
        .collect();
    let mut dests: Vec<String> = Vec::new();
    let mut in_place = !ffmas.is_empty();
    for f in &ffmas {
        let ops = sass_operands(f);
        let Some(d) = ops.first() else { continue };
        if !dests.contains(d) {
            dests.push(d.clone());
        }
        in_place &= ops[1..].contains(d);
    }
    let mut partials: Vec<u32> = Vec::new();
    for c in chain_of_each(body).into_iter().flatten() {
        if c >= partials.len() {
            partials.resize(c + 1, 0);
        }
        partials[c] += 1;
    }
    LoopShape {
        loop_ffma: ffmas.len() as u32,
        loop_ffma_destinations: dests,
        ffma_accumulates_in_place: in_place,
        loop_partials: partials,
    }
}

/// Whether the longest FFMA chain of a loop body (the accumulation's, where side chains
/// hold one FFMA an iteration each) is strict: each of its FFMAs reads the destination of
/// the one before it, and the first the destination of the last (the chain carried into
/// the next iteration). In place (`FFMA R0, R0, ...`) or through registers ptxas renames
/// within the iteration (`R51 -> R34 -> ... -> R51`, as it does where registers are short),
/// it is the one chain acc1 asks for.
pub(crate) fn single_dependent_chain<S: AsRef<str>>(body: &[S]) -> bool {
    let chains = chain_of_each(body);
    let mut sizes: BTreeMap<usize, usize> = BTreeMap::new();
    for c in chains.iter().flatten() {
        *sizes.entry(*c).or_default() += 1;
    }
    let Some(longest) = sizes
        .iter()
        .max_by_key(|(c, n)| (**n, std::cmp::Reverse(**c)))
    else {
        return false;
    };
    let ffmas: Vec<Vec<String>> = body
        .iter()
        .zip(&chains)
        .filter(|(_, c)| **c == Some(*longest.0))
        .map(|(i, _)| sass_operands(i.as_ref()))
        .collect();
    let Some(last) = ffmas.last() else {
        return false;
    };
    let mut before = &last[0];
    for ops in &ffmas {
        if ops.len() < 2 || !ops[1..].contains(before) {
            return false;
        }
        before = &ops[0];
    }
    true
}

/// The accumulation's partials of a loop's `partials` (in order of first appearance) once
/// `side` side chains are taken out: the last `side` partials of exactly `unroll` FFMAs
/// each (a side chain takes one FFMA per iteration, and the loop may be unrolled). `None`
/// when fewer than `side` partials have that length.
pub(crate) fn without_side_chains(partials: &[u32], side: u32, unroll: u32) -> Option<Vec<u32>> {
    let mut out = partials.to_vec();
    for _ in 0..side {
        let i = out.iter().rposition(|&p| p == unroll)?;
        out.remove(i);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_renamed_within_the_iteration_is_one_dependent_chain() {
        let in_place = ["FFMA R0, R0, R5, UR6", "FFMA R0, R0, R5, UR6"];
        assert!(single_dependent_chain(&in_place));
        let renamed = [
            "FFMA R34, R28, R51, R29",
            "FFMA R34, R34, R28, R29",
            "CS2R R40, SR_CLOCKLO",
            "FFMA R51, R34.reuse, R28, R29",
        ];
        assert!(single_dependent_chain(&renamed));
        // The last FFMA's result is not read by the first: two chains, not one.
        let broken = ["FFMA R34, R28, R51, R29", "FFMA R12, R34, R28, R29"];
        assert!(!single_dependent_chain(&broken));
        // An FFMA that skips its predecessor's destination breaks the chain.
        let skipped = [
            "FFMA R10, R10, R9, UR8",
            "FFMA R12, R10, R9, UR8",
            "FFMA R10, R10, R9, UR8",
        ];
        assert!(!single_dependent_chain(&skipped));
        // Side chains (one FFMA each) beside the accumulation do not count.
        let with_side = [
            "FFMA R0, R0, R5, UR6",
            "FFMA R7, R7, R5, UR6",
            "FFMA R0, R0, R5, UR6",
        ];
        assert!(single_dependent_chain(&with_side));
        assert!(!single_dependent_chain::<&str>(&[]));
    }

    #[test]
    fn loop_shape_counts_ffmas_partials_and_in_place_accumulation() {
        let body = [
            // Normalised, as a results file stores them: no address, no `;`.
            "FFMA R10, R10, R9.reuse, UR8",
            "@P0 FFMA R11, R11, R9, UR8",
            "MOV R12, R10",
            "FFMA R12, R12, R9, UR8",
            "IADD3 R2, R2, 0x1, RZ",
            "@P1 BRA -5",
        ];
        assert_eq!(
            loop_shape(&body),
            LoopShape {
                loop_ffma: 3,
                loop_ffma_destinations: vec!["R10".into(), "R11".into(), "R12".into()],
                ffma_accumulates_in_place: true,
                loop_partials: vec![2, 1],
            }
        );
        let none: [&str; 0] = [];
        assert_eq!(loop_shape(&none).loop_ffma, 0);
        assert!(!loop_shape(&none).ffma_accumulates_in_place);
        assert_eq!(sass_opcode("@!P0\tSTL.64 [R1], R2"), "STL");
    }

    #[test]
    fn side_chains_are_taken_out_from_the_end() {
        assert_eq!(
            without_side_chains(&[7, 6, 1, 1, 1, 1], 4, 1),
            Some(vec![7, 6])
        );
        // chain 7 at K = 8: every partial has one FFMA, side chains or not.
        assert_eq!(without_side_chains(&[1; 11], 4, 1), Some(vec![1; 7]));
        assert_eq!(without_side_chains(&[7, 6, 1], 4, 1), None);
        assert_eq!(without_side_chains(&[7, 6, 2, 2], 2, 2), Some(vec![7, 6]));
        assert_eq!(without_side_chains(&[7, 6], 0, 1), Some(vec![7, 6]));
    }
}
