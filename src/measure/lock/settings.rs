//! Where the lock files lie and how long to wait for a held GPU, from the environment.

use std::path::PathBuf;
use std::time::Duration;

/// The directory of the lock files (default [`DEFAULT_DIR`]).
pub const LOCK_DIR_ENV: &str = "ACCPROBE_LOCK_DIR";
/// How long, in seconds, to wait for a GPU another process measures on (default
/// [`DEFAULT_TIMEOUT`]); `0` gives up at once.
pub const LOCK_TIMEOUT_ENV: &str = "ACCPROBE_LOCK_TIMEOUT";
/// Shared by every user and process of the host, unlike `$XDG_RUNTIME_DIR` or `$TMPDIR`.
pub const DEFAULT_DIR: &str = "/tmp/accprobe-locks";
/// Long enough for another suite's whole run on the GPU (a default run takes minutes).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(900);

/// The lock directory and time limit, from the environment.
#[derive(Debug, Clone, PartialEq)]
pub struct LockSettings {
    pub dir: PathBuf,
    pub timeout: Duration,
    /// Whether the user named `dir` (`ACCPROBE_LOCK_DIR`): one that cannot be used is then
    /// a configuration error, as any other bad variable is. The default one that cannot be
    /// used (another user's, say) only means measuring without the lock, said once.
    pub named: bool,
}

impl LockSettings {
    /// `ACCPROBE_LOCK_DIR` and `ACCPROBE_LOCK_TIMEOUT` (empty, or only spaces, means
    /// unset, as for every variable); a timeout that is not a number of seconds is a
    /// configuration error.
    pub fn from_env() -> Result<LockSettings, String> {
        Self::from_values(
            std::env::var_os(LOCK_DIR_ENV).map(PathBuf::from),
            crate::input::env_text(LOCK_TIMEOUT_ENV)?.filter(|t| !t.trim().is_empty()),
        )
    }

    pub fn from_values(
        dir: Option<PathBuf>,
        timeout: Option<String>,
    ) -> Result<LockSettings, String> {
        let timeout = match timeout {
            None => DEFAULT_TIMEOUT,
            Some(t) => {
                let secs: f64 = t
                    .trim()
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0)
                    .ok_or_else(|| {
                        format!("{LOCK_TIMEOUT_ENV}={t:?} is not a number of seconds (0 or more)")
                    })?;
                Duration::from_secs_f64(secs.min(1e9))
            }
        };
        let dir = dir.filter(|d| !d.as_os_str().is_empty());
        Ok(LockSettings {
            named: dir.is_some(),
            dir: dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
            timeout,
        })
    }

    /// The configuration error for a lock directory the user named that cannot be used
    /// (`why`); `None` for the default one, which is measured without instead.
    pub fn refusal(&self, why: &str) -> Option<String> {
        self.named.then(|| {
            format!(
                "{LOCK_DIR_ENV}={:?} cannot be used: {why} (name a shared, writable \
                 directory, or unset it for {DEFAULT_DIR})",
                self.dir.display().to_string()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_environment_values_and_refuse_bad_timeouts() {
        let d = LockSettings::from_values(None, None).unwrap();
        assert_eq!(d.dir, PathBuf::from(DEFAULT_DIR));
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        assert!(!d.named && d.refusal("why").is_none());
        let empty = LockSettings::from_values(Some("".into()), None).unwrap();
        assert_eq!(empty, d, "empty is unset");
        let s = LockSettings::from_values(Some("/x".into()), Some("2.5".into())).unwrap();
        let refusal = s.refusal("it is a file").unwrap();
        assert!(
            refusal.starts_with("ACCPROBE_LOCK_DIR=\"/x\" cannot be used: it is a file"),
            "{refusal}"
        );
        assert_eq!(
            (s.dir, s.timeout, s.named),
            ("/x".into(), Duration::from_millis(2500), true)
        );
        for bad in ["-1", "abc", "", "NaN", "inf"] {
            let e = LockSettings::from_values(None, Some(bad.into())).unwrap_err();
            assert!(e.contains(LOCK_TIMEOUT_ENV), "{e}");
        }
    }
}
