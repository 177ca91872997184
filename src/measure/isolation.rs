//! A variant the GPU refuses fails alone: the answers of each mode to a set that failed,
//! so that the other variants are still measured.

use crate::error::GpuError;
use crate::model::results::VariantResult;
use crate::model::variant::Variant;
use std::collections::BTreeMap;

/// The outcome of each of `vs` in serial mode, from `run`, which measures a set of them
/// and fails (`Err`) when the set fails as a whole. A set that fails is measured again
/// one variant at a time, so that a variant the GPU refuses (too many registers for the
/// block size, say) fails alone and the others are measured, in the harness, in
/// `cargo xtask probe` and in a nextest run's shared measurement alike. When the context
/// is no longer `healthy` (a sticky error), nothing can run again: every variant gets the
/// set's error.
pub(super) fn each_its_own(
    vs: &[Variant],
    mut run: impl FnMut(&[Variant]) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError>,
    healthy: impl FnOnce() -> bool,
) -> Vec<Result<VariantResult, GpuError>> {
    let whole = match run(vs) {
        Ok(rs) => return rs,
        Err(e) => e,
    };
    if vs.len() <= 1 || !healthy() {
        return vs.iter().map(|_| Err(whole.clone())).collect();
    }
    vs.iter()
        .map(|v| match run(std::slice::from_ref(v)) {
            Ok(rs) => rs.into_iter().next().unwrap_or_else(|| {
                Err(GpuError::Variant(format!(
                    "measuring {v} alone gave no result"
                )))
            }),
            Err(e) => Err(e),
        })
        .collect()
}

/// Wave mode's answer to a wave that failed: when the failure names a variant (one the GPU
/// refused to load or launch) and the context is still usable, that variant gets the error
/// and the wave is run again without it, so the others are still measured together. A
/// failure that names none, or leaves the context unusable, is every variant's error.
pub(super) fn without_refused(
    vs: &[Variant],
    mut run: impl FnMut(&[Variant]) -> Result<Vec<VariantResult>, (Option<Variant>, GpuError)>,
    mut healthy: impl FnMut() -> bool,
) -> Vec<Result<VariantResult, GpuError>> {
    let mut refused: BTreeMap<Variant, GpuError> = BTreeMap::new();
    let mut left: Vec<Variant> = vs.to_vec();
    let measured = loop {
        if left.is_empty() {
            break Ok(Vec::new());
        }
        match run(&left) {
            Ok(rs) => break Ok(rs),
            Err((Some(v), e)) if left.contains(&v) && left.len() > 1 && healthy() => {
                refused.insert(v, e);
                left.retain(|&x| x != v);
            }
            Err((_, e)) => break Err(e),
        }
    };
    let mut measured = measured.map(Vec::into_iter);
    vs.iter()
        .map(|v| {
            if let Some(e) = refused.get(v) {
                return Err(e.clone());
            }
            match &mut measured {
                Ok(rs) => rs
                    .next()
                    .ok_or_else(|| GpuError::Variant(format!("the wave gave no result for {v}"))),
                Err(e) => Err(GpuError::Variant(format!("the wave failed: {e}"))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake serial run: measures a set unless it holds `bad`, which the GPU refuses to
    /// launch (the set then fails as a whole, as `LoadedMatrix::run` does).
    fn refusing(
        bad: Variant,
        sets: &std::cell::RefCell<Vec<Vec<Variant>>>,
    ) -> impl FnMut(&[Variant]) -> Result<Vec<Result<VariantResult, GpuError>>, GpuError> + '_ {
        move |set| {
            sets.borrow_mut().push(set.to_vec());
            if set.contains(&bad) {
                return Err(GpuError::cuda(
                    format!("launching {bad}"),
                    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                ));
            }
            Ok(set
                .iter()
                .map(|&v| Ok(VariantResult::measured(v, vec![vec![7]])))
                .collect())
        }
    }

    #[test]
    fn in_serial_mode_a_variant_the_gpu_refuses_fails_alone() {
        // tests/data/faulty: acc128 cannot launch with 1024-thread blocks, acc1 can.
        let (good, bad, other) = (
            Variant::new(128, 1),
            Variant::new(128, 128),
            Variant::new(7, 2),
        );
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, bad, other], refusing(bad, &sets), || true);
        assert_eq!(rs.len(), 3);
        assert_eq!(
            rs[0].as_ref().map(|r| r.name.clone()).ok(),
            Some(good.name())
        );
        assert_eq!(
            rs[2].as_ref().map(|r| r.name.clone()).ok(),
            Some(other.name())
        );
        match &rs[1] {
            Err(e) => assert!(e.to_string().contains(&format!("launching {bad}")), "{e}"),
            Ok(r) => panic!("{bad} was measured: {r:?}"),
        }
        // The set once, then each variant alone.
        assert_eq!(
            *sets.borrow(),
            vec![vec![good, bad, other], vec![good], vec![bad], vec![other]]
        );

        // A set that runs is measured once, as one set.
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, other], refusing(bad, &sets), || true);
        assert!(rs.iter().all(Result::is_ok));
        assert_eq!(sets.borrow().len(), 1);

        // A context left unusable runs nothing more: every variant has the set's error.
        let sets = std::cell::RefCell::new(Vec::new());
        let rs = each_its_own(&[good, bad], refusing(bad, &sets), || false);
        assert!(rs
            .iter()
            .all(|r| matches!(r, Err(e) if e.to_string().contains("launching"))));
        assert_eq!(sets.borrow().len(), 1);
        assert!(each_its_own(&[], refusing(bad, &sets), || true).is_empty());
    }

    #[test]
    fn in_wave_mode_a_variant_the_gpu_refuses_is_left_out_and_the_others_run_together() {
        let (good, bad, other) = (
            Variant::new(128, 1),
            Variant::new(128, 128),
            Variant::new(7, 2),
        );
        let sets = std::cell::RefCell::new(Vec::new());
        let wave = |named: bool| {
            let sets = &sets;
            move |set: &[Variant]| {
                sets.borrow_mut().push(set.to_vec());
                if set.contains(&bad) {
                    let e = GpuError::cuda(
                        format!("launching {bad}"),
                        "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
                    );
                    return Err((named.then_some(bad), e));
                }
                Ok(set
                    .iter()
                    .map(|&v| VariantResult::measured(v, vec![vec![7]]))
                    .collect())
            }
        };
        let rs = without_refused(&[good, bad, other], wave(true), || true);
        let names: Vec<Option<String>> = rs
            .iter()
            .map(|r| r.as_ref().ok().map(|r| r.name.clone()))
            .collect();
        assert_eq!(names, vec![Some(good.name()), None, Some(other.name())]);
        assert!(rs[1]
            .as_ref()
            .is_err_and(|e| e.to_string().contains(&format!("launching {bad}"))));
        // The whole wave once, then the others together (never one at a time).
        assert_eq!(
            *sets.borrow(),
            vec![vec![good, bad, other], vec![good, other]]
        );

        // A failure that names no variant, or leaves the context unusable, is everyone's.
        for (named, healthy) in [(false, true), (true, false)] {
            sets.borrow_mut().clear();
            let rs = without_refused(&[good, bad], wave(named), || healthy);
            assert!(
                rs.iter().all(|r| r
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("the wave failed"))),
                "{rs:?}"
            );
            assert_eq!(sets.borrow().len(), 1);
        }
        // The refused variant alone: its own error, nothing run again.
        sets.borrow_mut().clear();
        let rs = without_refused(&[bad], wave(true), || true);
        assert!(rs[0].is_err());
        assert_eq!(sets.borrow().len(), 1);
        assert!(without_refused(&[], wave(true), || true).is_empty());
    }
}
