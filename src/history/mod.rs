//! The results history: every GPU run's record (the run, its variants, its cases) appended
//! to a SQL database, so that drift across runs, runners and drivers can be seen
//! (docs/history.md). SQLite by default (`target/accprobe/history.sqlite`), or a
//! PostgreSQL server a fleet shares (`ACCPROBE_HISTORY=postgres://...`).
//!
//! The history decides nothing: a run's verdict and exit code never depend on it. A store
//! that cannot be written is a warning naming the store and the reason, and the record
//! waits in the spool (`target/accprobe/history-spool/`) for the next run that writes
//! there. A record is written in one transaction, all or nothing.
//!
//! One job per file: `schema` (the tables and migrations), `rows` (the rows as types),
//! `record` (a run's record from its results and cases), `store` (the trait both
//! backends implement, and the statements they share), `sqlite` and `postgres` (the
//! backends), `read` (a store read back as rows), `spool`, `checkout` (the commit of the checkout), `changes` (change points
//! in a series).

pub mod changes;
pub(crate) mod checkout;
pub mod postgres;
pub mod read;
pub mod record;
pub(crate) mod rows;
pub mod schema;
pub(crate) mod spool;
pub mod sqlite;
pub(crate) mod store;

pub(crate) use crate::config::HistoryStore;
pub use record::{build, About, Origin, RunRecord};
pub use rows::{CaseRow, Run, VariantRow};
pub use spool::Spool;
pub use store::{Store, StoreError, Value};

use crate::text::Shown;
use std::path::{Path, PathBuf};

/// The default store, under the folder a run writes into (`target/accprobe`).
pub(crate) const DEFAULT_FILE: &str = "history.sqlite";
/// The spool's folder, under the same.
pub const SPOOL_DIR: &str = "history-spool";

/// Now, as the history writes times: RFC 3339, UTC, whole seconds.
pub(crate) fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Where a run's record goes: `value`, the text of `ACCPROBE_HISTORY` (checked by
/// [`crate::config::check`] before the run), else `DEFAULT_FILE` in `out`
/// (`target/accprobe`); a relative file is under `cwd`.
pub fn resolve(value: Option<&str>, cwd: &Path, out: &Path) -> HistoryStore {
    let given = value
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .and_then(crate::config::history_store);
    match given {
        Some(HistoryStore::Sqlite(p)) if p.is_relative() => HistoryStore::Sqlite(cwd.join(p)),
        Some(s) => s,
        None => HistoryStore::Sqlite(out.join(DEFAULT_FILE)),
    }
}

/// What names `store` in messages (a URL without its password).
pub fn name_of(store: &HistoryStore) -> String {
    match store {
        HistoryStore::Off => "no history (ACCPROBE_HISTORY=off)".into(),
        HistoryStore::Sqlite(p) => format!("SQLite {}", p.shown()),
        HistoryStore::Postgres(url) => match url.parse() {
            Ok(c) => postgres::describe(&c),
            Err(_) => format!("PostgreSQL {}", crate::config::redacted(url)),
        },
    }
}

/// Opens `store` (migrated); `create`: a missing SQLite file is made, else refused (a
/// reader finds no history). `None` for `off`.
pub fn open(store: &HistoryStore, create: bool) -> Option<Result<Box<dyn Store>, StoreError>> {
    Some(match store {
        HistoryStore::Off => return None,
        HistoryStore::Sqlite(p) => sqlite::SqliteStore::open(p, create, sqlite::BUSY_TIMEOUT)
            .map(|s| Box::new(s) as Box<dyn Store>),
        HistoryStore::Postgres(url) => {
            postgres::PostgresStore::open(url).map(|s| Box::new(s) as Box<dyn Store>)
        }
    })
}

/// How writing a run's records went.
#[derive(Debug)]
pub struct Written {
    /// The store, as messages name it.
    pub(crate) store: String,
    /// The runs written now (not there before): the run's own and the spool's.
    pub runs: Vec<String>,
    /// Records the spool held that went into the store.
    pub from_spool: usize,
    /// Spool files that are no record (renamed, kept for a person to look at).
    pub(crate) unreadable: Vec<spool::SpoolError>,
    /// Why the store could not take the records, and where each went.
    pub failure: Option<Failure>,
}

/// Why the store could not take the records, and where they are.
#[derive(Debug)]
pub struct Failure {
    pub reason: StoreError,
    /// The records kept for the next run.
    pub(crate) spooled: Vec<PathBuf>,
    /// Records that could be kept nowhere (the spool cannot be written either).
    pub(crate) lost: Vec<(String, spool::SpoolError)>,
}

impl Written {
    /// The lines a front end prints on stderr: the store and what was written, or the
    /// warning that names the store, the reason and where the records wait.
    pub fn lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.runs.is_empty() || self.failure.is_none() {
            let spooled = match self.from_spool {
                0 => String::new(),
                n => format!(" ({n} from the spool)"),
            };
            out.push(format!(
                "history: {}: {} run(s) recorded{spooled}",
                self.store,
                self.runs.len()
            ));
        }
        for e in &self.unreadable {
            out.push(format!("warning: history: {e}"));
        }
        if let Some(f) = &self.failure {
            out.push(format!(
                "warning: history: cannot write to {}: {}",
                self.store, f.reason
            ));
            for p in &f.spooled {
                out.push(format!(
                    "warning: history: the record waits in {} for the next run",
                    p.shown()
                ));
            }
            for (id, e) in &f.lost {
                out.push(format!("warning: history: run {id} not recorded: {e}"));
            }
        }
        out
    }
}

/// Writes `records` to `store`, after the records its spool (under `spool_root`) holds;
/// never fails: a store that cannot be opened or written keeps the records in the spool.
/// `None` for `off`.
pub fn write(store: &HistoryStore, spool_root: &Path, records: &[RunRecord]) -> Option<Written> {
    let started = std::time::Instant::now();
    let opened = open(store, true)?;
    let written = write_to(
        opened,
        name_of(store),
        &Spool::of(spool_root, store),
        records,
    );
    crate::trace::mark(format_args!(
        "history written in {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    ));
    Some(written)
}

/// [`write()`] to the store `opened` (named `name` where it could not be opened), with the
/// spool `spool`.
pub fn write_to(
    opened: Result<Box<dyn Store>, StoreError>,
    name: String,
    spool: &Spool,
    records: &[RunRecord],
) -> Written {
    let mut written = Written {
        store: name,
        runs: Vec::new(),
        from_spool: 0,
        unreadable: Vec::new(),
        failure: None,
    };
    let result = opened.and_then(|mut s| {
        written.store = s.name().to_string();
        drain(s.as_mut(), spool, &mut written)?;
        for r in records {
            if s.insert(&r.rows())? {
                written.runs.push(r.run.id.clone());
            }
        }
        Ok(())
    });
    if let Err(reason) = result {
        let pending: Vec<&RunRecord> = records
            .iter()
            .filter(|r| !written.runs.contains(&r.run.id))
            .collect();
        written.failure = Some(spool_all(spool, reason, &pending));
    }
    written
}

/// The spool's records into `s`, each removed from the spool once written; the first
/// error stops (the store is in trouble: the rest wait).
fn drain(s: &mut dyn Store, spool: &Spool, written: &mut Written) -> Result<(), StoreError> {
    for file in spool.pending() {
        let record = match spool.read(&file) {
            Ok(r) => r,
            Err(e) => {
                written.unreadable.push(e);
                continue;
            }
        };
        if s.insert(&record.rows())? {
            written.runs.push(record.run.id.clone());
        }
        written.from_spool += 1;
        spool.written(&file);
    }
    Ok(())
}

fn spool_all(spool: &Spool, reason: StoreError, records: &[&RunRecord]) -> Failure {
    let mut f = Failure {
        reason,
        spooled: Vec::new(),
        lost: Vec::new(),
    };
    for r in records {
        match spool.keep(r) {
            Ok(p) => f.spooled.push(p),
            Err(e) => f.lost.push((r.run.id.clone(), e)),
        }
    }
    f
}
