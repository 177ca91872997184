//! The PostgreSQL store: a server many runners share (sfackler's synchronous `postgres`
//! client; no TLS, as for a server on the runners' own network or socket). Every write is
//! one transaction, so a runner killed or cut off mid-write leaves nothing of its record
//! (the server rolls an unfinished transaction back), and concurrent runners never see
//! each other's half records. Migrations run under an advisory lock, so runners opening a
//! new database at once migrate it once. Connecting gives up after `CONNECT_TIMEOUT`,
//! so a server that is gone costs a run seconds, not its time limit.

use super::schema::{Table, Type};
use super::store::{self, Rows, Store, StoreError, Transaction, Value};
use crate::text::Shown;
use postgres::config::Host;
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls, Statement};
use std::collections::HashMap;
use std::time::Duration;

/// How long connecting may take, unless the URL says (`connect_timeout=`).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long sent data may stay unacknowledged before the connection counts as lost (a
/// server whose host vanished without closing it), unless the URL says.
pub(crate) const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);
/// The key of the advisory lock migrations hold (any number no other tool uses).
const MIGRATION_LOCK: i64 = 0x6163_6370_726f_6265; // "accprobe"

pub struct PostgresStore {
    client: Client,
    name: String,
}

impl PostgresStore {
    /// Connects to the server of `url` and migrates its database.
    pub fn open(url: &str) -> Result<PostgresStore, StoreError> {
        let mut config: Config = url.parse()?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("accprobe");
        }
        let name = describe(&config);
        let client = config.connect(NoTls)?;
        let mut s = PostgresStore { client, name };
        let mut tx = s.client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
        store::migrate(&mut Tx::new(&mut tx), &super::now())?;
        tx.commit()?;
        Ok(s)
    }
}

/// `PostgreSQL user@host:port/dbname`, from what the URL gives (never its password).
pub(crate) fn describe(config: &Config) -> String {
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                Host::Unix(dir) => dir.shown(),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let user = config.get_user().map_or(String::new(), |u| format!("{u}@"));
    let db = config.get_dbname().unwrap_or("");
    format!("PostgreSQL {user}{}/{db}", hosts.join(","))
}

impl Store for PostgresStore {
    fn name(&self) -> &str {
        &self.name
    }

    fn insert(&mut self, rows: &Rows) -> Result<bool, StoreError> {
        let mut tx = self.client.transaction()?;
        let new = store::insert(&mut Tx::new(&mut tx), rows)?;
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
        let mut tx = self.client.build_transaction().read_only(true).start()?;
        store::select(&mut Tx::new(&mut tx), table, filter)
    }
}

/// A transaction with the statements it prepared, each prepared once.
struct Tx<'a, 'b> {
    tx: &'a mut postgres::Transaction<'b>,
    prepared: HashMap<String, Statement>,
}

impl<'a, 'b> Tx<'a, 'b> {
    fn new(tx: &'a mut postgres::Transaction<'b>) -> Self {
        Tx {
            tx,
            prepared: HashMap::new(),
        }
    }

    fn statement(&mut self, sql: &str) -> Result<Statement, StoreError> {
        if let Some(s) = self.prepared.get(sql) {
            return Ok(s.clone());
        }
        let s = self.tx.prepare(sql)?;
        self.prepared.insert(sql.to_string(), s.clone());
        Ok(s)
    }
}

impl store::Cells for postgres::Row {
    fn int(&self, i: usize) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn real(&self, i: usize) -> Result<Option<f64>, StoreError> {
        Ok(self.try_get(i)?)
    }
    fn text(&self, i: usize) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(i)?)
    }
}

fn boxed(v: &Value) -> Box<dyn ToSql + Sync> {
    match v {
        Value::Int(i) => Box::new(*i),
        Value::Real(r) => Box::new(*r),
        Value::Text(t) => Box::new(t.clone()),
    }
}

impl Transaction for Tx<'_, '_> {
    fn batch(&mut self, sql: &str) -> Result<(), StoreError> {
        Ok(self.tx.batch_execute(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StoreError> {
        let st = self.statement(sql)?;
        let boxed: Vec<Box<dyn ToSql + Sync>> = params.iter().map(boxed).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref()).collect();
        Ok(self.tx.execute(&st, &refs)?)
    }

    fn query(
        &mut self,
        sql: &str,
        params: &[Value],
        types: &[Type],
    ) -> Result<Vec<Vec<Value>>, StoreError> {
        let st = self.statement(sql)?;
        let boxed: Vec<Box<dyn ToSql + Sync>> = params.iter().map(boxed).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = boxed.iter().map(|b| b.as_ref()).collect();
        let rows = self.tx.query(&st, &refs)?;
        rows.iter().map(|r| store::cells(r, types)).collect()
    }
}
