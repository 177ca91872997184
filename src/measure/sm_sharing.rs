//! Wave mode's premise, one block per SM, checked: the variants whose blocks shared an SM
//! are measured again apart, or fail their validity with the sharing.

use crate::error::GpuError;
use crate::model::results::VariantResult;
use crate::model::variant::Variant;
use std::collections::BTreeMap;

/// The variants of one wave (indices into `rs`) that had a block on an SM another block of
/// the wave also ran on, in some counted launch, each with what it shared. The block
/// scheduler usually gives each block of a wave an SM of its own, but nothing promises it.
pub(crate) fn shared_sms(rs: &[Result<VariantResult, GpuError>]) -> BTreeMap<usize, String> {
    let mut shared = BTreeMap::new();
    let launches = rs
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| r.sm_ids.len())
        .max()
        .unwrap_or(0);
    for k in 0..launches {
        let mut on: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, r) in rs.iter().enumerate() {
            if let Ok(r) = r {
                for &sm in r.sm_ids.get(k).into_iter().flatten() {
                    on.entry(sm).or_default().push(i);
                }
            }
        }
        for (sm, users) in on.iter().filter(|(_, u)| u.len() > 1) {
            for &i in users {
                shared.entry(i).or_insert_with(|| {
                    let others: Vec<String> = users
                        .iter()
                        .filter(|&&j| j != i)
                        .filter_map(|&j| rs[j].as_ref().ok().map(|r| r.name.clone()))
                        .collect();
                    let with = if others.is_empty() {
                        "another of its own blocks".to_string()
                    } else {
                        others.join(", ")
                    };
                    format!("repeat {k}: a block ran on SM {sm} with {with}")
                });
            }
        }
    }
    shared
}

/// Wave mode's guard on its own premise, one block per SM: the variants of a wave whose
/// blocks shared an SM are measured again as a smaller wave of their own, and a variant
/// that shares one there too (or when every variant of the wave shared) keeps its result
/// with the sharing as an output problem, which fails its validity case.
pub(crate) fn own_sms(
    vs: &[Variant],
    mut rs: Vec<Result<VariantResult, GpuError>>,
    rerun: impl FnOnce(&[Variant]) -> Vec<Result<VariantResult, GpuError>>,
) -> Vec<Result<VariantResult, GpuError>> {
    let shared = shared_sms(&rs);
    if shared.is_empty() {
        return rs;
    }
    let again: Vec<usize> = shared.keys().copied().collect();
    let measured = rs.iter().filter(|r| r.is_ok()).count();
    let mut left = shared;
    if again.len() < measured {
        let subset: Vec<Variant> = again.iter().map(|&i| vs[i]).collect();
        let redo = rerun(&subset);
        let still = shared_sms(&redo);
        for (n, (&i, r)) in again.iter().zip(redo).enumerate() {
            if r.is_ok() && !still.contains_key(&n) {
                rs[i] = r;
                left.remove(&i);
            }
        }
    }
    for (i, why) in left {
        if let Ok(r) = &mut rs[i] {
            r.output_problems.push(format!(
                "{why}: the wave's blocks did not each get an SM of their own, so it measured \
                 them against each other (measure serially, or with fewer variants or blocks)"
            ));
        }
    }
    rs
}

/// [`own_sms`] for each wave set a run measured: `rs` are the run's results for `vs`, and
/// `sets(measured)` the wave sets of its measured variants, in order (a variant the GPU
/// refused has an error and took no place in them, so the sets are those of the others).
pub(crate) fn own_sms_in_sets(
    vs: &[Variant],
    rs: Vec<Result<VariantResult, GpuError>>,
    sets: impl FnOnce(&[Variant]) -> Vec<std::ops::Range<usize>>,
    mut rerun: impl FnMut(&[Variant]) -> Vec<Result<VariantResult, GpuError>>,
) -> Vec<Result<VariantResult, GpuError>> {
    let measured: Vec<usize> = (0..rs.len()).filter(|&i| rs[i].is_ok()).collect();
    let mut out: Vec<Option<Result<VariantResult, GpuError>>> = rs.into_iter().map(Some).collect();
    let of_measured: Vec<Variant> = measured.iter().map(|&i| vs[i]).collect();
    for set in sets(&of_measured) {
        let at = &measured[set];
        let of_set: Vec<Variant> = at.iter().map(|&i| vs[i]).collect();
        let results = at.iter().filter_map(|&i| out[i].take()).collect();
        for (&i, r) in at.iter().zip(own_sms(&of_set, results, &mut rerun)) {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .zip(vs)
        .map(|(r, v)| r.unwrap_or_else(|| Err(GpuError::Variant(format!("{v} was not measured")))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_sms(v: Variant, sms: &[&[u32]]) -> Result<VariantResult, GpuError> {
        let mut r = VariantResult::measured(v, vec![vec![7]; sms.len()]);
        r.sm_ids = sms.iter().map(|s| s.to_vec()).collect();
        Ok(r)
    }

    #[test]
    fn the_sets_checked_are_those_the_run_measured_a_refused_variant_left_out() {
        let vs = [
            Variant::new(7, 1),
            Variant::new(7, 2),
            Variant::new(13, 4),
            Variant::new(29, 1),
        ];
        // vs[0] was refused; the others ran as waves of two and one: vs[1] and vs[2]
        // together, vs[3] alone, on an SM vs[2] had used in the wave before.
        let rs = vec![
            Err(GpuError::cuda(
                "launching",
                "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
            )),
            on_sms(vs[1], &[&[0]]),
            on_sms(vs[2], &[&[1]]),
            on_sms(vs[3], &[&[1]]),
        ];
        let halves = |m: &[Variant]| -> Vec<std::ops::Range<usize>> {
            let n = m.len();
            let h = n.div_ceil(2);
            vec![0..h, h..n]
        };
        let asked = std::cell::RefCell::new(0);
        let out = own_sms_in_sets(&vs, rs.clone(), halves, |_| {
            *asked.borrow_mut() += 1;
            Vec::new()
        });
        // Judged by the sets of all four (vs[2] with vs[3]), the two would have shared.
        assert_eq!(*asked.borrow(), 0);
        assert_eq!(out, rs);
        // Sharing within a set measured is still found (both of the set shared: kept,
        // each with the sharing as its problem).
        let rs2 = vec![
            rs[0].clone(),
            on_sms(vs[1], &[&[5]]),
            on_sms(vs[2], &[&[5]]),
            rs[3].clone(),
        ];
        let out = own_sms_in_sets(&vs, rs2, halves, |_| unreachable!());
        for r in &out[1..3] {
            let p = &r.as_ref().unwrap().output_problems;
            assert!(
                p.len() == 1 && p[0].contains("did not each get an SM"),
                "{p:?}"
            );
        }
        assert!(out[3].as_ref().unwrap().output_problems.is_empty());
        assert!(out[0].is_err());
    }

    #[test]
    fn blocks_that_shared_an_sm_are_measured_again_or_fail_their_validity() {
        let (a, b, c) = (Variant::new(7, 1), Variant::new(7, 2), Variant::new(13, 4));
        // b's second block landed on a's SM in repeat 1.
        let wave = vec![
            on_sms(a, &[&[0, 2], &[0, 2]]),
            on_sms(b, &[&[4, 6], &[4, 2]]),
            on_sms(c, &[&[8, 10], &[8, 10]]),
        ];
        let shared = shared_sms(&wave);
        assert_eq!(shared.keys().copied().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(
            shared[&0],
            format!("repeat 1: a block ran on SM 2 with {}", b.name())
        );

        // Measured again apart: clean there, so the new results replace the old.
        let asked = std::cell::RefCell::new(Vec::new());
        let rs = own_sms(&[a, b, c], wave.clone(), |vs| {
            asked.borrow_mut().push(vs.to_vec());
            vec![on_sms(a, &[&[20], &[20]]), on_sms(b, &[&[22], &[22]])]
        });
        assert_eq!(*asked.borrow(), vec![vec![a, b]]);
        assert!(rs
            .iter()
            .all(|r| r.as_ref().unwrap().output_problems.is_empty()));
        assert_eq!(rs[0].as_ref().unwrap().sm_ids, vec![vec![20], vec![20]]);
        assert_eq!(rs[2], wave[2]);

        // Sharing again: the results stay, each with the sharing as an output problem.
        let rs = own_sms(&[a, b, c], wave.clone(), |_| {
            vec![on_sms(a, &[&[5], &[5]]), on_sms(b, &[&[5], &[5]])]
        });
        for r in &rs[..2] {
            let p = &r.as_ref().unwrap().output_problems;
            assert!(
                p.len() == 1 && p[0].contains("did not each get an SM"),
                "{p:?}"
            );
        }
        assert!(rs[2].as_ref().unwrap().output_problems.is_empty());

        // A clean wave is left alone and nothing is measured again.
        let clean = vec![on_sms(a, &[&[0]]), on_sms(c, &[&[1]])];
        assert_eq!(own_sms(&[a, c], clean.clone(), |_| unreachable!()), clean);
        // One variant whose own two blocks shared an SM: nothing smaller to try.
        let alone = vec![on_sms(a, &[&[3, 3]])];
        let rs = own_sms(&[a], alone, |_| unreachable!());
        assert!(
            rs[0].as_ref().unwrap().output_problems[0].contains("with another of its own blocks")
        );
    }
}
