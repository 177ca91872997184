//! Change points in one variant's series of medians, run after run: the **Mann-Whitney
//! window test**. At each run t, the `window` runs before it are compared with the
//! `window` runs from it on by the two-sided Mann-Whitney U test (ranks, so one odd run
//! moves nothing and no distribution is assumed; the normal approximation with the tie
//! and continuity corrections). t is a change when the test's p-value is at most `alpha`
//! and the medians of the two windows differ by at least `min_shift` (relative): a shift
//! that holds for `window` runs, however much smaller than the gate's tolerance. Of
//! changes closer than `window` runs, the one with the smallest p (then the largest
//! shift) is kept. docs/history.md gives the defaults and why.

/// The test's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Method {
    /// Runs on each side of a change: a shift must hold this long to be one.
    pub window: usize,
    /// The largest p-value that is a change.
    pub alpha: f64,
    /// The smallest relative shift of the windows' medians that is a change.
    pub min_shift: f64,
}

impl Default for Method {
    fn default() -> Method {
        Method {
            window: 8,
            alpha: 0.005,
            min_shift: 0.001,
        }
    }
}

/// A change: from run `at` of the series on, the level moved by `shift`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Change {
    /// The first run of the new level (an index into the series).
    pub at: usize,
    /// The medians of the windows before and from `at`.
    pub before: f64,
    pub after: f64,
    /// after / before - 1.
    pub shift: f64,
    pub p: f64,
}

/// The changes in `series`, in order.
pub fn changes(series: &[f64], m: &Method) -> Vec<Change> {
    let w = m.window.max(2);
    if series.len() < 2 * w || series.iter().any(|x| !x.is_finite()) {
        return Vec::new();
    }
    let mut found: Vec<Change> = (w..=series.len() - w)
        .filter_map(|t| {
            let (a, b) = (&series[t - w..t], &series[t..t + w]);
            let median = |x: &[f64]| crate::model::median::median(x.iter().copied()).unwrap_or(0.0);
            let (before, after) = (median(a), median(b));
            let shift = if before != 0.0 {
                after / before - 1.0
            } else {
                0.0
            };
            let p = mann_whitney_p(a, b);
            (p <= m.alpha && shift.abs() >= m.min_shift).then_some(Change {
                at: t,
                before,
                after,
                shift,
                p,
            })
        })
        .collect();
    found.sort_by(|x, y| {
        x.p.total_cmp(&y.p)
            .then(y.shift.abs().total_cmp(&x.shift.abs()))
            .then(x.at.cmp(&y.at))
    });
    let mut kept: Vec<Change> = Vec::new();
    for c in found {
        if kept.iter().all(|k| k.at.abs_diff(c.at) >= w) {
            kept.push(c);
        }
    }
    kept.sort_by_key(|c| c.at);
    kept
}

/// The two-sided p-value of the Mann-Whitney U test of `a` against `b`: the normal
/// approximation, with mid-ranks and the variance's tie correction, and a continuity
/// correction of 1/2. 1 when every value ties.
pub(crate) fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&x| (x, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let (mut rank_a, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < n {
        let j = (i..n).find(|&j| all[j].0 != all[i].0).unwrap_or(n);
        let mid = (i + 1 + j) as f64 / 2.0;
        rank_a += mid * all[i..j].iter().filter(|x| x.1).count() as f64;
        let t = (j - i) as f64;
        ties += t * t * t - t;
        i = j;
    }
    let u = rank_a - n1 * (n1 + 1.0) / 2.0;
    let nf = n as f64;
    let var = n1 * n2 / 12.0 * ((nf + 1.0) - ties / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - n1 * n2 / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

/// The complementary error function, within 1.2e-7 relative (Numerical Recipes' `erfcc`,
/// a Chebyshev fit): std has none.
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of `n` runs around 100,000 with normal noise of `sd` (relative), the
    /// level `step` (relative) higher from run `at` on; xorshift and Box-Muller, so that
    /// each seed gives one series on every machine.
    fn series(seed: u64, n: usize, sd: f64, step: f64, at: usize) -> Vec<f64> {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut uniform = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        (0..n)
            .map(|i| {
                let g =
                    (-2.0 * uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * uniform()).cos();
                let level = if i >= at { 1.0 + step } else { 1.0 };
                100_000.0 * level * (1.0 + sd * g)
            })
            .collect()
    }

    #[test]
    fn a_persistent_step_of_0_3_percent_is_found_where_it_is() {
        for seed in 1..=20 {
            for sd in [0.0002, 0.0005, 0.001] {
                let s = series(seed, 50, sd, 0.003, 25);
                let found = changes(&s, &Method::default());
                assert_eq!(found.len(), 1, "seed {seed}, noise {sd}: {found:?}");
                assert!(found[0].at.abs_diff(25) <= 1, "seed {seed}: {found:?}");
                assert!((found[0].shift - 0.003).abs() < 0.0015, "{found:?}");
                // And a drop as well as a rise.
                let down = changes(&series(seed, 50, sd, -0.003, 25), &Method::default());
                assert!(
                    down.len() == 1 && down[0].shift < 0.0,
                    "seed {seed}: {down:?}"
                );
            }
        }
    }

    #[test]
    fn a_steady_series_has_no_change() {
        for seed in 1..=20 {
            for sd in [0.0, 0.0002, 0.0005, 0.001] {
                let s = series(seed, 50, sd, 0.0, 0);
                let found = changes(&s, &Method::default());
                assert!(found.is_empty(), "seed {seed}, noise {sd}: {found:?}");
            }
        }
    }

    #[test]
    fn a_shift_that_does_not_persist_is_no_change() {
        // Three slow runs in a steady series: an incident, not a new level.
        let mut s = series(7, 50, 0.0002, 0.0, 0);
        for x in &mut s[20..23] {
            *x *= 0.99;
        }
        assert_eq!(changes(&s, &Method::default()), []);
        // Too few runs to tell.
        assert_eq!(changes(&s[..15], &Method::default()), []);
    }

    #[test]
    fn two_steps_are_two_changes() {
        let mut s = series(3, 60, 0.0002, 0.003, 20);
        for x in &mut s[40..] {
            *x *= 1.004;
        }
        let at: Vec<usize> = changes(&s, &Method::default())
            .iter()
            .map(|c| c.at)
            .collect();
        assert_eq!(at, [20, 40]);
    }

    #[test]
    fn the_u_test_agrees_with_its_textbook_values() {
        // Complete separation of 8 and 8: z = (32 - 0.5) / sqrt(8 * 8 * 17 / 12).
        let a: Vec<f64> = (0..8).map(f64::from).collect();
        let b: Vec<f64> = (10..18).map(f64::from).collect();
        let p = mann_whitney_p(&a, &b);
        assert!((p - 0.000_93).abs() < 0.000_02, "{p}");
        assert_eq!(mann_whitney_p(&[1.0; 8], &[1.0; 8]), 1.0);
        assert!(mann_whitney_p(&a, &a) > 0.9);
        assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.0) - 0.157_299_2).abs() < 1e-6);
    }
}
