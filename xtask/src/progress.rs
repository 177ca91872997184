//! Progress of long GPU work (`probe`, `agree`, `bench`): a step bar on stderr when it is a
//! terminal, nothing in CI logs (indicatif draws nothing when stderr is not a terminal, and
//! nothing here when a CI system is named in the environment). indicatif is the
//! maintained, common crate for this.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;

/// Whether the environment (read through `get`) says this runs under CI, by the library's
/// one rule ([`accprobe::config::ci_variable`]).
pub fn in_ci(get: impl Fn(&str) -> Option<String>) -> bool {
    accprobe::config::ci_variable(get).is_some()
}

/// A bar of `steps` steps on stderr, hidden under CI and when stderr is not a terminal.
pub fn steps(steps: u64) -> ProgressBar {
    let target = if in_ci(|v| std::env::var(v).ok()) {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    };
    let bar = ProgressBar::with_draw_target(Some(steps), target);
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{bar:24}] {pos}/{len} {msg} ({elapsed})")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_ci_variable_set_to_something_true() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(!in_ci(env(&[])));
        assert!(in_ci(env(&[("CI", "true")])));
        assert!(in_ci(env(&[("GITLAB_CI", "true")])));
        assert!(in_ci(env(&[("JENKINS_URL", "http://ci")])));
        assert!(!in_ci(env(&[("CI", "false")])), "CI=false is not CI");
        assert!(!in_ci(env(&[("CI", "")])));
        assert!(!in_ci(env(&[("CI", "0")])));
        // Unlike an ACCPROBE_ variable, a CI variable of only spaces counts: bless must
        // refuse on the side of caution.
        assert!(in_ci(env(&[("CI", " ")])), "CI=\" \" is CI");
        assert!(in_ci(env(&[("CI", "\t")])));
    }
}
