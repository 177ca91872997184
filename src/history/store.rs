//! What a history store is: a SQL database that holds the tables of [`super::schema`],
//! behind one trait, so that SQLite and PostgreSQL share every statement, every row
//! conversion and one test suite (`tests/history.rs`). A store only moves rows: the
//! record's meaning is `super::record`'s, reading and deciding are the callers'.

use super::schema::{Table, Type};
use crate::text::Shown;

/// One cell, typed as its column is.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<String>),
}

/// The rows of one run, table by table, the `runs` row first.
pub(crate) type Rows = Vec<(&'static Table, Vec<Vec<Value>>)>;

/// Why a store could not be opened, written or read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Sqlite(#[from] rusqlite::Error),
    /// postgres' own text says little ("db error"); its source says the rest.
    #[error("{}", postgres_text(.0))]
    Postgres(#[from] postgres::Error),
    #[error("{what} {}: {source}", path.shown())]
    Io {
        what: &'static str,
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("the history has schema {found}; this accprobe knows schemas up to {known}: use a newer accprobe")]
    NewerSchema { found: i64, known: i64 },
    #[error("table {table}, column {column}: {problem}")]
    BadRow {
        table: &'static str,
        column: &'static str,
        problem: String,
    },
}

/// A PostgreSQL error with its causes, on one line (`error connecting to server:
/// Connection refused (os error 111)`).
fn postgres_text(e: &postgres::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = s.source();
    }
    text
}

/// A SQL database holding the history's tables (migrated when opened).
pub trait Store: Send {
    /// What the store is, for messages: `SQLite target/accprobe/history.sqlite`,
    /// `PostgreSQL ci@127.0.0.1:5433/accprobe` (never a password).
    fn name(&self) -> &str;

    /// Inserts one run's rows in one transaction, all or nothing; `Ok(false)` (nothing
    /// inserted) when the store holds a run of that id already.
    fn insert(&mut self, rows: &Rows) -> Result<bool, StoreError>;

    /// The rows of `table`, all of them or those whose `column` is `value`, in the order
    /// of its key.
    fn select(
        &mut self,
        table: &'static Table,
        filter: Option<(&'static str, &str)>,
    ) -> Result<Vec<Vec<Value>>, StoreError>;
}

/// The SQL one backend runs inside one of its transactions: what the operations below,
/// written once for both, need of it.
pub(crate) trait Transaction {
    /// Statements without parameters or results (a migration).
    fn batch(&mut self, sql: &str) -> Result<(), StoreError>;
    /// One statement with parameters; the rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError>;
    /// One query with parameters; each row's cells read as `types` say.
    fn query(
        &mut self,
        sql: &str,
        params: &[Value],
        types: &[Type],
    ) -> Result<Vec<Vec<Value>>, StoreError>;
}

/// One row of a query's result, as a backend reads its cells.
pub(crate) trait Cells {
    fn int(&self, i: usize) -> Result<Option<i64>, StoreError>;
    fn real(&self, i: usize) -> Result<Option<f64>, StoreError>;
    fn text(&self, i: usize) -> Result<Option<String>, StoreError>;
}

/// The cells of `row`, each read as `types` says.
pub(crate) fn cells(row: &dyn Cells, types: &[Type]) -> Result<Vec<Value>, StoreError> {
    types
        .iter()
        .enumerate()
        .map(|(i, ty)| {
            Ok(match ty {
                Type::Int => Value::Int(row.int(i)?),
                Type::Real => Value::Real(row.real(i)?),
                Type::Text => Value::Text(row.text(i)?),
            })
        })
        .collect()
}

/// Brings the store to [`schema::SCHEMA`](super::schema::SCHEMA): the migrations it has
/// not had, in order, each recorded. The caller holds the store's write lock (SQLite's
/// `BEGIN IMMEDIATE`, PostgreSQL's advisory lock), so that processes opening a new store
/// at once migrate it once. A store of a newer schema is refused, never written.
pub(crate) fn migrate(tx: &mut dyn Transaction, now: &str) -> Result<(), StoreError> {
    use super::schema::{CREATE_VERSIONS, MIGRATIONS, SCHEMA, VERSIONS_TABLE};
    tx.batch(CREATE_VERSIONS)?;
    let rows = tx.query(
        &format!("SELECT MAX(version) FROM {VERSIONS_TABLE}"),
        &[],
        &[Type::Int],
    )?;
    let found = match rows.first().and_then(|r| r.first()) {
        Some(Value::Int(v)) => v.unwrap_or(0),
        _ => 0,
    };
    if found > SCHEMA {
        return Err(StoreError::NewerSchema {
            found,
            known: SCHEMA,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch(sql)?;
        tx.execute(
            &format!("INSERT INTO {VERSIONS_TABLE} (version, applied_at) VALUES ($1, $2)"),
            &[
                Value::Int(Some(i as i64 + 1)),
                Value::Text(Some(now.into())),
            ],
        )?;
    }
    Ok(())
}

/// Inserts `rows` (the `runs` row first); `Ok(false)`, having inserted nothing, when the
/// run is there already. The caller commits.
pub(crate) fn insert(tx: &mut dyn Transaction, rows: &Rows) -> Result<bool, StoreError> {
    use super::schema::{insert_sql, MAX_PARAMS};
    for (i, (table, rows)) in rows.iter().enumerate() {
        // Many rows a statement: a few round trips to a server, not one per row.
        let per_statement = (MAX_PARAMS / table.columns.len()).max(1);
        for chunk in rows.chunks(per_statement) {
            let params: Vec<Value> = chunk.iter().flatten().cloned().collect();
            let changed = tx.execute(&insert_sql(table, chunk.len()), &params)?;
            if i == 0 && changed == 0 {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// The rows of `table` ([`Store::select`]).
pub(crate) fn select(
    tx: &mut dyn Transaction,
    table: &'static Table,
    filter: Option<(&'static str, &str)>,
) -> Result<Vec<Vec<Value>>, StoreError> {
    let sql = super::schema::select_sql(table, filter.map(|f| f.0));
    let params: Vec<Value> = filter
        .map(|(_, v)| Value::Text(Some(v.to_string())))
        .into_iter()
        .collect();
    let types: Vec<Type> = table.columns.iter().map(|c| c.ty).collect();
    tx.query(&sql, &params, &types)
}
