//! Where the lock files lie and how long to wait for a held GPU, from the environment.

use std::path::PathBuf;
use std::time::Duration;

/// A lock directory the user named that cannot be used; a [`crate::config::ConfigError`].
pub use crate::config::LockDirRefused;
/// Shared by every user and process of the host, unlike `$XDG_RUNTIME_DIR` or `$TMPDIR`.
pub const DEFAULT_DIR: &str = "/tmp/accprobe-locks";
/// The directory of the lock files (default [`DEFAULT_DIR`]) and how long, in seconds, to
/// wait for a GPU another process measures on (default [`DEFAULT_TIMEOUT`]; `0` gives up
/// at once).
pub use crate::config::{LOCK_DIR_ENV, LOCK_TIMEOUT_ENV};
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
    /// `ACCPROBE_LOCK_DIR` and `ACCPROBE_LOCK_TIMEOUT`, through `config` (empty, or only
    /// whitespace, is unset); a timeout that is not a number of seconds is a configuration
    /// error.
    pub fn from_env() -> Result<LockSettings, crate::config::ConfigError> {
        Ok(Self::from_values(
            crate::config::lock_dir(),
            crate::config::lock_timeout()?,
        ))
    }

    /// The settings for a lock directory and a timeout as given (`None`: the defaults).
    pub(crate) fn from_values(dir: Option<PathBuf>, timeout: Option<Duration>) -> LockSettings {
        let dir = dir.filter(|d| !d.as_os_str().is_empty());
        LockSettings {
            named: dir.is_some(),
            dir: dir.unwrap_or_else(|| PathBuf::from(DEFAULT_DIR)),
            timeout: timeout.unwrap_or(DEFAULT_TIMEOUT),
        }
    }

    /// The configuration error for a lock directory the user named that cannot be used
    /// (`why`); `None` for the default one, which is measured without instead.
    pub(crate) fn refusal(&self, why: &str) -> Option<LockDirRefused> {
        self.named.then(|| LockDirRefused {
            variable: LOCK_DIR_ENV.into(),
            dir: self.dir.clone(),
            why: why.to_string(),
            default: DEFAULT_DIR.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_from_the_environment_values() {
        let d = LockSettings::from_values(None, None);
        assert_eq!(d.dir, PathBuf::from(DEFAULT_DIR));
        assert_eq!(d.timeout, DEFAULT_TIMEOUT);
        assert!(!d.named && d.refusal("why").is_none());
        let empty = LockSettings::from_values(Some("".into()), None);
        assert_eq!(empty, d, "empty is unset");
        let s = LockSettings::from_values(Some("/x".into()), Some(Duration::from_millis(2500)));
        let refusal = s.refusal("it is a file").unwrap().to_string();
        assert!(
            refusal.starts_with("ACCPROBE_LOCK_DIR=\"/x\" cannot be used: it is a file"),
            "{refusal}"
        );
        assert_eq!(
            (s.dir, s.timeout, s.named),
            ("/x".into(), Duration::from_millis(2500), true)
        );
    }

    #[test]
    fn the_defaults_are_the_ones_the_variables_table_gives() {
        let default = |name| crate::config::variable(name).unwrap().default;
        assert_eq!(
            default(LOCK_TIMEOUT_ENV),
            DEFAULT_TIMEOUT.as_secs().to_string()
        );
        assert_eq!(default(LOCK_DIR_ENV), format!("`{DEFAULT_DIR}`"));
    }
}
