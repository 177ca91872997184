//! Records a store could not take, kept until a later run writes them: one JSON file per
//! record, `<spool>/<store key>/<run id>.json`, written atomically (never half a file), so
//! that runs spooling at once never write one file and a record is in the store, in the
//! spool, or (written twice by two runs draining at once) in the store once: a run's id
//! is its key there. The store key is a digest of the store (its file's real path, or
//! its URL), so that a record waits for the store it was meant for and no password is
//! written into a file name.

use super::record::RunRecord;
use crate::config::HistoryStore;
use crate::text::Shown;
use std::path::{Path, PathBuf};

/// The largest spool file read back (a record of a few thousand variants and cases).
pub(crate) const SPOOL_LIMIT: u64 = 64 << 20;
/// The most spooled records one run writes; the rest wait for the next.
pub(crate) const MAX_DRAINED: usize = 1000;

/// The spool of one store.
#[derive(Debug, Clone)]
pub struct Spool {
    dir: PathBuf,
}

/// Why a spooled record could not be kept or read.
#[derive(Debug, thiserror::Error)]
pub enum SpoolError {
    #[error("cannot write {}: {source}", path.shown())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(#[from] crate::error::Error),
    #[error("{}: not a spooled record ({source}); renamed {}", path.shown(), renamed.shown())]
    Unreadable {
        path: PathBuf,
        renamed: PathBuf,
        source: serde_json::Error,
    },
}

/// What names `store` in its spool's folder name.
pub(crate) fn store_key(store: &HistoryStore) -> String {
    let id = match store {
        HistoryStore::Off => String::new(),
        HistoryStore::Sqlite(p) => {
            format!("sqlite:{}", crate::input::real_path(p).display())
        }
        HistoryStore::Postgres(url) => format!("postgres:{url}"),
    };
    crate::digest::sha256_hex(id.as_bytes())[..16].to_string()
}

impl Spool {
    /// The spool of `store` under `root` (`target/accprobe/history-spool`).
    pub fn of(root: &Path, store: &HistoryStore) -> Spool {
        Spool {
            dir: root.join(store_key(store)),
        }
    }

    /// Keeps `record`; the file it is in.
    pub fn keep(&self, record: &RunRecord) -> Result<PathBuf, SpoolError> {
        let path = self.dir.join(format!(
            "{}.json",
            crate::output::file_safe(&record.run.id, '_')
        ));
        let write = |source| SpoolError::Write {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(&self.dir).map_err(write)?;
        // A record is plain data: serialising it cannot fail.
        let text = serde_json::to_string(record).unwrap_or_default();
        crate::output::write_atomic(&path, &text).map_err(write)?;
        Ok(path)
    }

    /// The spooled records' files, oldest name first, at most `MAX_DRAINED`.
    pub fn pending(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
            .collect();
        files.sort();
        files.truncate(MAX_DRAINED);
        files
    }

    /// The record in `file`; one that does not read as a record is renamed
    /// `.unreadable`, so that it is reported once, and kept for a person to look at.
    pub(crate) fn read(&self, file: &Path) -> Result<RunRecord, SpoolError> {
        let text = crate::input::read_text(file, "a spooled history record", SPOOL_LIMIT)?;
        serde_json::from_str(&text).map_err(|source| {
            let renamed = file.with_extension("unreadable");
            let _ = std::fs::rename(file, &renamed);
            SpoolError::Unreadable {
                path: file.to_path_buf(),
                renamed,
                source,
            }
        })
    }

    /// `file` is in the store now: gone from the spool (another run may have removed it
    /// first).
    pub(crate) fn written(&self, file: &Path) {
        let _ = std::fs::remove_file(file);
        let _ = std::fs::remove_dir(&self.dir);
    }
}
