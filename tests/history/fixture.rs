//! What the history checks share: a fresh store of each backend, records that differ by
//! a seed, raw SQL to look under the store, and child processes (this test binary again)
//! that write records the way a run does.

use accprobe::config::HistoryStore;
use accprobe::history::{self, About, Origin, RunRecord, Store};
use accprobe::model::results::RunResults;
use accprobe::report::junit::{CaseRecord, Status};
use accprobe::verdict::suspect::{Suspect, Who};
use accprobe::verdict::Failure;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// A check of one store: it asserts.
pub type Check = fn(&TestStore);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    /// SQLite on a 1 MiB tmpfs (mounting needs root).
    SqliteOnTinyDisk,
}

pub const BACKENDS: [Backend; 2] = [Backend::Sqlite, Backend::Postgres];

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite | Backend::SqliteOnTinyDisk => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// The server the PostgreSQL checks use: a URL whose user may create databases.
pub const POSTGRES_ENV: &str = "ACCPROBE_TEST_POSTGRES";

/// Why a backend is not here: the reason its checks are ignored with.
pub struct Unavailable(pub String);

/// A fresh store, removed with everything in it when dropped.
pub struct TestStore {
    pub dir: tempfile::TempDir,
    /// What `ACCPROBE_HISTORY` would say.
    pub store: HistoryStore,
    pub spool_root: PathBuf,
    database: Option<(String, String)>,
    mounted: Option<PathBuf>,
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> String {
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let after_scheme = base.find("://").map_or(0, |at| at + 3);
    let host_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |at| after_scheme + at);
    let q = query.map_or(String::new(), |q| format!("?{q}"));
    format!("{}/{db}{q}", &base[..host_end])
}

impl TestStore {
    pub fn new(backend: Backend) -> Result<TestStore, Unavailable> {
        let dir = tempfile::Builder::new()
            .prefix("accprobe-history-")
            .tempdir()
            .expect("a temporary folder");
        let spool_root = dir.path().join("spool");
        let mut database = None;
        let mut mounted = None;
        let store = match backend {
            Backend::Sqlite => HistoryStore::Sqlite(dir.path().join("history.sqlite")),
            Backend::SqliteOnTinyDisk => {
                let disk = dir.path().join("disk");
                std::fs::create_dir_all(&disk).unwrap();
                mount_tiny(&disk)?;
                mounted = Some(disk.clone());
                HistoryStore::Sqlite(disk.join("history.sqlite"))
            }
            Backend::Postgres => {
                let admin = accprobe::config::var_os(POSTGRES_ENV)
                    .and_then(|v| v.into_string().ok())
                    .ok_or_else(|| {
                        Unavailable(format!(
                            "{POSTGRES_ENV} names no PostgreSQL server (.ci/run starts one)"
                        ))
                    })?;
                let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let db = format!("accprobe_test_{}_{n}", std::process::id());
                admin_sql(&admin, &format!("CREATE DATABASE {db}"));
                let url = with_database(&admin, &db);
                database = Some((admin, db));
                HistoryStore::Postgres(url)
            }
        };
        Ok(TestStore {
            dir,
            store,
            spool_root,
            database,
            mounted,
        })
    }

    /// The store, opened (and created) as a run opens it.
    pub fn open(&self) -> Box<dyn Store> {
        history::open(&self.store, true)
            .expect("a store, not off")
            .unwrap_or_else(|e| panic!("{}: {e}", history::name_of(&self.store)))
    }

    /// The text of `ACCPROBE_HISTORY` that names this store.
    pub fn value(&self) -> String {
        match &self.store {
            HistoryStore::Sqlite(p) => p.display().to_string(),
            HistoryStore::Postgres(url) => url.clone(),
            HistoryStore::Off => "off".into(),
        }
    }

    /// Runs `sql` on the store directly (no accprobe code): rows of text.
    pub fn sql(&self, sql: &str) -> Vec<Vec<Option<String>>> {
        match &self.store {
            HistoryStore::Sqlite(p) => {
                let c = rusqlite::Connection::open(p).unwrap();
                c.busy_timeout(Duration::from_secs(30)).unwrap();
                let mut st = c.prepare(sql).unwrap();
                let n = st.column_count();
                let rows = st
                    .query_map([], |r| {
                        (0..n)
                            .map(|i| {
                                r.get_ref(i).map(|v| match v {
                                    rusqlite::types::ValueRef::Null => None,
                                    rusqlite::types::ValueRef::Integer(i) => Some(i.to_string()),
                                    rusqlite::types::ValueRef::Real(f) => Some(f.to_string()),
                                    rusqlite::types::ValueRef::Text(t)
                                    | rusqlite::types::ValueRef::Blob(t) => {
                                        Some(String::from_utf8_lossy(t).into_owned())
                                    }
                                })
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .unwrap();
                rows.map(Result::unwrap).collect()
            }
            HistoryStore::Postgres(url) => {
                let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
                c.simple_query(sql)
                    .unwrap()
                    .into_iter()
                    .filter_map(|m| match m {
                        postgres::SimpleQueryMessage::Row(r) => {
                            Some((0..r.len()).map(|i| r.get(i).map(String::from)).collect())
                        }
                        _ => None,
                    })
                    .collect()
            }
            HistoryStore::Off => Vec::new(),
        }
    }

    /// One number `sql` gives.
    pub fn number(&self, sql: &str) -> i64 {
        self.sql(sql)[0][0].as_deref().unwrap().parse().unwrap()
    }

    /// Every run has all of its variants and cases: no half record anywhere (counted in
    /// one statement, one snapshot, while writers may be writing); the runs.
    pub fn assert_whole(&self) -> i64 {
        let row = &self.sql(
            "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM variants), \
             (SELECT COUNT(*) FROM cases), \
             (SELECT COUNT(*) FROM variants WHERE run_id NOT IN (SELECT id FROM runs))",
        )[0];
        let n = |i: usize| -> i64 { row[i].as_deref().unwrap().parse().unwrap() };
        let (runs, variants, cases, orphans) = (n(0), n(1), n(2), n(3));
        let (v, c) = (
            record(0).variants.len() as i64,
            record(0).cases.len() as i64,
        );
        assert_eq!(
            variants,
            runs * v,
            "{runs} runs, {variants} variants: a half record"
        );
        assert_eq!(cases, runs * c, "{runs} runs, {cases} cases: a half record");
        assert_eq!(orphans, 0);
        runs
    }

    /// The records waiting in the spool.
    pub fn spooled(&self) -> Vec<PathBuf> {
        history::Spool::of(&self.spool_root, &self.store).pending()
    }
}

impl Drop for TestStore {
    fn drop(&mut self) {
        if let Some((admin, db)) = &self.database {
            admin_sql(admin, &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
        }
        if let Some(disk) = &self.mounted {
            let _ = Command::new("umount").arg(disk).status();
        }
    }
}

fn admin_sql(admin: &str, sql: &str) {
    let mut c = postgres::Client::connect(admin, postgres::NoTls)
        .unwrap_or_else(|e| panic!("{POSTGRES_ENV}: {e}"));
    c.batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A 1 MiB tmpfs on `dir`: a disk that fills.
fn mount_tiny(dir: &Path) -> Result<(), Unavailable> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err(Unavailable("mounting a small tmpfs needs root".into()));
    }
    let out = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "accprobe-test"])
        .arg(dir)
        .output()
        .map_err(|e| Unavailable(format!("mount: {e}")))?;
    if !out.status.success() {
        return Err(Unavailable(format!(
            "cannot mount a small tmpfs here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// The committed H200 wave run, read once.
fn results() -> &'static RunResults {
    static R: OnceLock<RunResults> = OnceLock::new();
    R.get_or_init(|| {
        RunResults::load(
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("expectations/recorded/h200-2026-11-30-wave.json"),
        )
        .unwrap()
    })
}

/// The cases a record holds.
pub const CASES: usize = 150;

/// A record that differs from every other seed's: the committed H200 run measured
/// `seed` minutes after a fixed time on one of three hosts, with [`CASES`] cases (every
/// tenth failed, with a suspect).
pub fn record(seed: u64) -> RunRecord {
    let mut r = results().clone();
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + seed * 60);
    if let Some(e) = r.environment.as_mut() {
        e.date = humantime::format_rfc3339_seconds(at).to_string();
    }
    let cases: Vec<CaseRecord> = (0..CASES)
        .map(|i| CaseRecord {
            suite: "GPU 0: NVIDIA H200 / profile h200".into(),
            name: format!("probe::case{i}"),
            status: if i % 10 == 9 {
                Status::Failed
            } else {
                Status::Passed
            },
            message: if i % 10 == 9 {
                String::new()
            } else {
                format!("measured {i}")
            },
            failure: (i % 10 == 9).then(|| {
                let mut f = Failure::new("progress -1.2% (tolerance ±0.50%)");
                f.suspect = Some(Suspect {
                    who: Who::Compiler,
                    what: "SASS changed".into(),
                    detail: "digest a..b".into(),
                });
                Box::new(f)
            }),
            duration: Duration::from_millis(3),
            kind: (i % 10 == 9).then(|| "regression".to_string()),
            started: at,
        })
        .collect();
    let about = About {
        host: Some(format!("runner-{}", seed % 3)),
        gpu_uuid: Some(format!("GPU-{seed:08x}")),
        pci_bus_id: None,
        checkout_commit: None,
        profile_digest: Some("d".repeat(64)),
        run_s: Some(1.25),
    };
    history::build(&r, Some(&cases), Origin::Suite, about)
}

const CHILD_ENV: &str = "ACCPROBE_TEST_HISTORY_CHILD";
const STORE_ENV: &str = "ACCPROBE_TEST_HISTORY_STORE";
const SPOOL_ENV: &str = "ACCPROBE_TEST_HISTORY_SPOOL";
const SEEDS_ENV: &str = "ACCPROBE_TEST_HISTORY_SEEDS";

/// This binary as a writer of the records of seeds `from..to` (`to` 0: without end) to
/// `store`, each as a run writes its record (`history::write`).
pub fn writer(store: &TestStore, from: u64, to: u64) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.env(CHILD_ENV, "write")
        .env(STORE_ENV, store.value())
        .env(SPOOL_ENV, &store.spool_root)
        .env(SEEDS_ENV, format!("{from}..{to}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// In a writer: writes and exits 0 (each write's lines on stderr); `None` elsewhere.
pub fn child_main() -> Option<i32> {
    std::env::var_os(CHILD_ENV)?;
    let var = |k| std::env::var(k).unwrap();
    let store = accprobe::config::history_store(&var(STORE_ENV)).unwrap();
    let spool = PathBuf::from(var(SPOOL_ENV));
    let seeds = var(SEEDS_ENV);
    let (from, to) = seeds.split_once("..").unwrap();
    let (from, to): (u64, u64) = (from.parse().unwrap(), to.parse().unwrap());
    let mut seed = from;
    while to == 0 || seed < to {
        let w = history::write(&store, &spool, &[record(seed)]).unwrap();
        for line in w.lines() {
            eprintln!("{line}");
        }
        seed += 1;
    }
    Some(0)
}
