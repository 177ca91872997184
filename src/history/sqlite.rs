//! The SQLite store: one database file (bundled SQLite, through rusqlite), in WAL mode so
//! that readers never block the writer, every commit synced (`synchronous = FULL`), and a
//! busy timeout, so that eight suites writing at once wait their turn instead of failing.
//! Every write is one `BEGIN IMMEDIATE` transaction: a process killed mid-write leaves the
//! database as it was before (SQLite's atomic commit), never half a record.

use super::schema::{Table, Type};
use super::store::{self, Rows, Store, StoreError, Transaction, Value};
use rusqlite::types::ToSqlOutput;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::Path;
use std::time::Duration;

/// How long a write waits for another process's write to end before it fails (and its
/// record is spooled): longer than any one record takes, with room for many writers.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct SqliteStore {
    conn: Connection,
    name: String,
}

impl SqliteStore {
    /// The store in `path`, migrated; created (with its folder) when `create`, else a
    /// missing file is an error. Waits at most `busy` for another process's write.
    pub fn open(path: &Path, create: bool, busy: Duration) -> Result<SqliteStore, StoreError> {
        let io = |what, source| StoreError::Io {
            what,
            path: path.to_path_buf(),
            source,
        };
        if create {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| io("cannot create the folder of", e))?;
            }
        } else if !path.is_file() {
            let e = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
            return Err(io("no history in", e));
        }
        let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        if create {
            flags |= OpenFlags::SQLITE_OPEN_CREATE;
        }
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(busy)?;
        // Persistent: set once by whoever creates the file; reading it back is cheap.
        conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let mut s = SqliteStore {
            conn,
            name: super::name_of(&crate::config::HistoryStore::Sqlite(path.to_path_buf())),
        };
        s.migrate()?;
        Ok(s)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        store::migrate(&mut Tx(&tx), &super::now())?;
        tx.commit()?;
        Ok(())
    }
}

impl Store for SqliteStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn insert(&mut self, rows: &Rows) -> Result<bool, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let new = store::insert(&mut Tx(&tx), rows)?;
        if new {
            tx.commit()?;
        }
        Ok(new)
    }

    fn select(
        &mut self,
        table: &'static Table,
        filter: Option<(&'static str, &str)>,
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        // One read transaction: one snapshot of the table.
        let tx = self.conn.transaction()?;
        store::select(&mut Tx(&tx), table, filter)
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        match self {
            Value::Int(v) => v.to_sql(),
            Value::Real(v) => v.to_sql(),
            Value::Text(v) => v.to_sql(),
        }
    }
}

impl store::Cells for rusqlite::Row<'_> {
    fn int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.get(i)?)
    }
    fn real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.get(i)?)
    }
    fn text(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.get(i)?)
    }
}

/// `sql` with its parameters `$1, $2, ...` written `?`, when they appear once each and in
/// that order (as every statement of [`super::schema`] and [`store`] writes them); else
/// `sql` as it is. SQLite looks a named or numbered parameter up in a list, one by one,
/// as it prepares a statement, so a statement of n of them takes n² steps to prepare (a
/// suite's record binds thousands); an anonymous one is only counted.
fn anonymous(sql: &str) -> std::borrow::Cow<'_, str> {
    let mut out = String::with_capacity(sql.len());
    let mut next = 1u64;
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 1..];
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if tail[..digits] != next.to_string() {
            return std::borrow::Cow::Borrowed(sql);
        }
        out.push('?');
        next += 1;
        rest = &tail[digits..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

struct Tx<'a>(&'a rusqlite::Transaction<'a>);

impl Transaction for Tx<'_> {
    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.0.execute_batch(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        let mut st = self.0.prepare_cached(&anonymous(sql))?;
        Ok(st.execute(rusqlite::params_from_iter(params))? as u64)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[Value],
        types: &[Type],
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        let mut st = self.0.prepare_cached(&anonymous(sql))?;
        let mut rows = st.query(rusqlite::params_from_iter(params))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            out.push(store::cells(r, types)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::anonymous;
    use crate::history::schema;

    #[test]
    fn parameters_in_order_become_anonymous_and_others_are_left_as_they_are() {
        assert_eq!(
            anonymous("SELECT a FROM t WHERE b = $1 AND c = $2"),
            "SELECT a FROM t WHERE b = ? AND c = ?"
        );
        assert_eq!(anonymous("SELECT 1"), "SELECT 1");
        for kept in [
            "VALUES ($2, $1)",
            "VALUES ($1, $1)",
            "VALUES ($1, $3)",
            "VALUES ($)",
            "x $01",
        ] {
            assert_eq!(anonymous(kept), kept);
        }
        // Every statement the store writes for a record goes anonymous, however many rows.
        for table in schema::TABLES {
            let sql = schema::insert_sql(table, schema::MAX_PARAMS / table.columns.len());
            let a = anonymous(&sql);
            assert!(!a.contains('$'), "{}", table.name);
            assert_eq!(a.matches('?').count(), sql.matches('$').count());
        }
    }
}
