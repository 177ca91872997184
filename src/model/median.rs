//! The one median of the crate: every summary, verdict and report that takes a median
//! takes it here, so that they agree.
//!
//! For an even count it is the mean of the two middle values. That is the rule every
//! results file already records (`Summary::median`, which the results check recomputes
//! from the samples), so no other rule could be used without making recorded files
//! disagree with themselves; it also favours neither middle value, where the upper
//! middle one would lean towards the faster of two launches.

/// The median of `values` (NaN sorts last, as `f64::total_cmp` orders it); `None` for no
/// values.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(v[n / 2]),
        _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn an_even_count_takes_the_mean_of_the_middle_pair() {
        assert_eq!(median([4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median([1000.0, 2000.0]), Some(1500.0));
    }

    #[test]
    fn an_odd_count_takes_the_middle_value_and_none_takes_none() {
        assert_eq!(median([5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median([7.0]), Some(7.0));
        assert_eq!(median(std::iter::empty()), None);
    }
}
