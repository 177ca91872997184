//! What is wrong with one launch's outputs, read back from its poisoned buffers.

use super::memory::{POISON_F32, POISON_U64};

/// What is wrong with one launch's outputs: elements never written (still poisoned) or not
/// finite, warps that wrote no progress.
pub(crate) fn check_outputs(
    tag: &str,
    out: &[f32],
    progress: &[u64],
    elapsed: &[u64],
) -> Vec<String> {
    let mut problems = Vec::new();
    let unwritten = out.iter().filter(|x| x.to_bits() == POISON_F32).count();
    let non_finite = out
        .iter()
        .filter(|x| x.to_bits() != POISON_F32 && !x.is_finite())
        .count();
    if unwritten > 0 {
        problems.push(format!(
            "{tag}: {unwritten} of {} output elements never written",
            out.len()
        ));
    }
    if non_finite > 0 {
        problems.push(format!(
            "{tag}: {non_finite} of {} output elements not finite",
            out.len()
        ));
    }
    let silent = progress
        .iter()
        .zip(elapsed)
        .filter(|(&p, &e)| p == POISON_U64 || e == POISON_U64)
        .count();
    if silent > 0 {
        problems.push(format!(
            "{tag}: {silent} of {} warps wrote no progress",
            progress.len()
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisoned_and_non_finite_outputs_are_reported() {
        let good = [1.0f32, 2.0];
        assert!(check_outputs("r", &good, &[5], &[9]).is_empty());
        let unwritten = [1.0f32, f32::from_bits(POISON_F32)];
        assert_eq!(
            check_outputs("r", &unwritten, &[5], &[9]),
            vec!["r: 1 of 2 output elements never written"]
        );
        let inf = [f32::INFINITY, f32::NAN];
        assert_eq!(
            check_outputs("r", &inf, &[5], &[9]),
            vec!["r: 2 of 2 output elements not finite"]
        );
        assert_eq!(
            check_outputs("r", &good, &[5, POISON_U64], &[9, 9]),
            vec!["r: 1 of 2 warps wrote no progress"]
        );
    }
}
