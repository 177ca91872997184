//! `ACCPROBE_HISTORY`: where a GPU run's record goes (docs/history.md). A file is an
//! SQLite database, a `postgres://` (or `postgresql://`) URL a PostgreSQL server, and
//! `off` no history. The URL's syntax is checked here, so that a typo exits 2 before
//! anything runs; whether the store can be written is only known at the end of the run,
//! and a store that cannot be is a warning, never a failure (see `crate::history`).

use super::{text, ConfigError, HISTORY_ENV};
use std::path::PathBuf;

/// Where the records go.
#[derive(Clone, PartialEq, Eq)]
pub enum HistoryStore {
    Off,
    /// An SQLite database file, created with its folder when missing.
    Sqlite(PathBuf),
    /// A PostgreSQL server: the URL as given (it may hold a password: print it only
    /// through [`redacted`]).
    Postgres(String),
}

impl std::fmt::Debug for HistoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HistoryStore::Off => f.write_str("Off"),
            HistoryStore::Sqlite(p) => f.debug_tuple("Sqlite").field(p).finish(),
            HistoryStore::Postgres(url) => f.debug_tuple("Postgres").field(&redacted(url)).finish(),
        }
    }
}

const SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// What `text` (trimmed, not empty) names: `None` when it is a URL of another scheme
/// (`sqlite://`, `postgress://`), a PostgreSQL URL that does not parse, or one that
/// requires TLS (`sslmode=require`).
pub fn history_store(text: &str) -> Option<HistoryStore> {
    if text == "off" {
        return Some(HistoryStore::Off);
    }
    if SCHEMES.iter().any(|s| text.starts_with(s)) {
        // The client speaks without TLS: a URL that requires it could never connect, so it
        // is refused here, before the run, not as a warning every run.
        return text
            .parse::<postgres::Config>()
            .is_ok_and(|c| c.get_ssl_mode() != postgres::config::SslMode::Require)
            .then(|| HistoryStore::Postgres(text.to_string()));
    }
    (!text.contains("://")).then(|| HistoryStore::Sqlite(PathBuf::from(text)))
}

/// [`HISTORY_ENV`]; `None` when unset (the caller's default file). A bad value's error
/// shows the value with any password replaced by `***`.
pub fn history() -> Result<Option<HistoryStore>, ConfigError> {
    text(HISTORY_ENV)?.map(|t| parse(&t)).transpose()
}

/// The value `t` of [`HISTORY_ENV`], or the error naming it.
fn parse(t: &str) -> Result<HistoryStore, ConfigError> {
    history_store(t.trim()).ok_or_else(|| ConfigError::Malformed {
        variable: HISTORY_ENV.into(),
        value: redacted(t),
        expected: super::takes(HISTORY_ENV).into(),
    })
}

/// `url` with the password of its user info (`postgres://user:secret@host`) and any
/// `password=` parameter replaced by `***`: what a message may show of a URL.
pub fn redacted(url: &str) -> String {
    let mut out = url.to_string();
    if let Some(scheme_end) = out.find("://").map(|at| at + 3) {
        let authority_end = out[scheme_end..]
            .find(['/', '?'])
            .map_or(out.len(), |at| scheme_end + at);
        if let Some(at) = out[scheme_end..authority_end].rfind('@') {
            let user_info = scheme_end..scheme_end + at;
            if let Some(colon) = out[user_info.clone()].find(':') {
                out.replace_range(scheme_end + colon + 1..user_info.end, "***");
            }
        }
    }
    let mut from = 0;
    while let Some(at) = out[from..]
        .find("password=")
        .map(|at| from + at + "password=".len())
    {
        let end = out[at..].find('&').map_or(out.len(), |e| at + e);
        out.replace_range(at..end, "***");
        from = at + 3;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_a_postgres_url_or_off() {
        assert_eq!(history_store("off"), Some(HistoryStore::Off));
        assert_eq!(
            history_store("runs/h.sqlite"),
            Some(HistoryStore::Sqlite("runs/h.sqlite".into()))
        );
        for url in [
            "postgres://ci@127.0.0.1:5433/accprobe",
            "postgresql://ci:pw@db.example/accprobe?connect_timeout=5",
            "postgres:///accprobe?host=/run/postgresql",
            "postgres://ci@db.lab/accprobe?sslmode=disable",
        ] {
            assert_eq!(
                history_store(url),
                Some(HistoryStore::Postgres(url.into())),
                "{url}"
            );
        }
        for bad in [
            "sqlite://x.db",
            "postgress://host/db",
            "postgres://host:notaport/db",
            "postgres://host/db?sslmode=sometimes",
            "postgres://host/db?sslmode=require",
        ] {
            assert_eq!(history_store(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_password_never_shows() {
        assert_eq!(
            redacted("postgres://ci:s3cret@host:5432/db"),
            "postgres://ci:***@host:5432/db"
        );
        assert_eq!(redacted("postgres://ci@host/db"), "postgres://ci@host/db");
        assert_eq!(
            redacted("postgres://host/db?user=ci&password=s3cret&sslmode=disable"),
            "postgres://host/db?user=ci&password=***&sslmode=disable"
        );
        assert_eq!(
            format!("{:?}", HistoryStore::Postgres("postgres://a:b@h/d".into())),
            "Postgres(\"postgres://a:***@h/d\")"
        );
        let e = parse("postgres://ci:s3cret@host:x/db")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("s3cret") && e.contains(HISTORY_ENV), "{e}");
    }
}
