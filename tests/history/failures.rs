//! The ways a store fails, each a warning naming the store and the reason, the record
//! kept in the spool and written by the next run that can: nothing lost.

use crate::fixture::{record, Backend, Check, TestStore};
use accprobe::config::HistoryStore;
use accprobe::history::{self, sqlite::SqliteStore, Spool, Store, StoreError};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const CHECKS: &[(&str, Backend, Check)] = &[
    (
        "a_locked_file_is_a_warning_and_the_record_waits",
        Backend::Sqlite,
        a_locked_file,
    ),
    (
        "a_full_disk_is_a_warning_and_the_record_waits",
        Backend::SqliteOnTinyDisk,
        a_full_disk,
    ),
    (
        "a_server_gone_mid_write_is_a_warning_and_the_record_waits",
        Backend::Postgres,
        a_server_gone,
    ),
    (
        "a_server_not_there_is_a_warning_naming_it",
        Backend::Postgres,
        no_server,
    ),
];

/// `w`'s lines hold a warning naming `store` and `reason`, and where the record waits.
fn assert_warned(w: &history::Written, store: &str, reason: &str) {
    let lines = w.lines().join("\n");
    let warned = lines.lines().any(|l| {
        l.starts_with("warning: history: cannot write to ")
            && l.contains(store)
            && l.contains(reason)
    });
    assert!(
        warned,
        "expected a warning naming {store} and {reason:?}: {lines}"
    );
    assert!(lines.contains("waits in"), "{lines}");
}

fn a_locked_file(t: &TestStore) {
    let HistoryStore::Sqlite(path) = &t.store else {
        unreachable!()
    };
    t.open().insert(&record(1).rows()).unwrap();
    // Another process holds the write lock (an exclusive transaction) for longer than
    // the writer waits.
    let holder = rusqlite::Connection::open(path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let spool = Spool::of(&t.spool_root, &t.store);
    let opened = SqliteStore::open(path, true, Duration::from_millis(200))
        .map(|s| Box::new(s) as Box<dyn Store>);
    let w = history::write_to(opened, history::name_of(&t.store), &spool, &[record(2)]);
    assert_warned(&w, &history::name_of(&t.store), "database is locked");
    assert_eq!(t.spooled().len(), 1);
    holder.execute_batch("ROLLBACK").unwrap();
    drop(holder);
    // The next run writes it.
    let w = history::write(&t.store, &t.spool_root, &[record(3)]).unwrap();
    assert!(w.failure.is_none(), "{:?}", w.lines());
    assert_eq!(w.from_spool, 1);
    assert_eq!(t.assert_whole(), 3);
    assert!(t.spooled().is_empty());
}

fn a_full_disk(t: &TestStore) {
    // The spool lies on another disk than the store (as it does when a fleet's store is
    // elsewhere); 1 MiB holds a few records, not forty.
    let mut warned = None;
    for seed in 0..40 {
        let w = history::write(&t.store, &t.spool_root, &[record(seed)]).unwrap();
        if w.failure.is_some() {
            warned = Some(w);
            break;
        }
    }
    let w = warned.expect("1 MiB never filled");
    assert_warned(&w, &history::name_of(&t.store), "full");
    let written = t.assert_whole();
    assert!(written >= 1, "nothing fitted at all");
    assert_eq!(t.spooled().len(), 1);
    if let HistoryStore::Sqlite(_) = t.store {
        assert_eq!(t.sql("PRAGMA integrity_check")[0][0].as_deref(), Some("ok"));
    }
    // Room again: the next run writes the spooled record.
    let disk = t.dir.path().join("disk");
    let grown = std::process::Command::new("mount")
        .args(["-o", "remount,size=64m"])
        .arg(&disk)
        .status()
        .unwrap();
    assert!(grown.success());
    let w = history::write(&t.store, &t.spool_root, &[record(99)]).unwrap();
    assert!(w.failure.is_none(), "{:?}", w.lines());
    assert_eq!(w.from_spool, 1);
    assert_eq!(t.assert_whole(), written + 2);
}

/// A TCP proxy to the server: `cut` closes every connection through it at once, as a
/// server that goes away does.
struct Proxy {
    port: u16,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn to(server: (String, u16)) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let open = Arc::new(Mutex::new(Vec::new()));
        let streams = open.clone();
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let Ok(upstream) = TcpStream::connect((server.0.as_str(), server.1)) else {
                    continue;
                };
                let mut s = streams.lock().unwrap();
                s.push(client.try_clone().unwrap());
                s.push(upstream.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), upstream.try_clone().unwrap()),
                    (upstream, client),
                ] {
                    std::thread::spawn(move || {
                        let mut buf = [0u8; 8192];
                        while let Ok(n) = from.read(&mut buf) {
                            if n == 0 || to.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, open }
    }

    fn cut(&self) {
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

/// The host and port of a PostgreSQL URL (TCP only).
fn host_port(url: &str) -> (String, u16) {
    let c: postgres::Config = url.parse().unwrap();
    let host = match c.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => panic!(
            "{} names no TCP host: the proxy needs one",
            crate::fixture::POSTGRES_ENV
        ),
    };
    (host, c.get_ports().first().copied().unwrap_or(5432))
}

/// `url` through `port` on the loopback instead of its own host and port.
fn through(url: &str, port: u16) -> String {
    let (host, p) = host_port(url);
    url.replacen(&format!("{host}:{p}"), &format!("127.0.0.1:{port}"), 1)
}

fn a_server_gone(t: &TestStore) {
    let HistoryStore::Postgres(url) = &t.store else {
        unreachable!()
    };
    t.open().insert(&record(1).rows()).unwrap();
    let proxy = Proxy::to(host_port(url));
    let via = through(url, proxy.port);
    assert_ne!(&via, url, "the URL must name its host and port");
    // Connected (and migrated) at the start; the server goes away before the insert.
    let opened =
        history::postgres::PostgresStore::open(&via).map(|s| Box::new(s) as Box<dyn Store>);
    assert!(opened.is_ok());
    proxy.cut();
    let spool = Spool::of(&t.spool_root, &t.store);
    let w = history::write_to(opened, history::name_of(&t.store), &spool, &[record(2)]);
    let reason = match &w.failure {
        Some(f) => matches!(f.reason, StoreError::Postgres(_)),
        None => false,
    };
    assert!(reason, "{:?}", w.lines());
    assert_warned(&w, "PostgreSQL", "");
    assert_eq!(t.spooled().len(), 1);
    // Nothing of the cut transaction reached the server; the next run writes it.
    assert_eq!(t.assert_whole(), 1);
    let w = history::write(&t.store, &t.spool_root, &[record(3)]).unwrap();
    assert!(w.failure.is_none(), "{:?}", w.lines());
    assert_eq!(w.from_spool, 1);
    assert_eq!(t.assert_whole(), 3);
}

fn no_server(t: &TestStore) {
    let HistoryStore::Postgres(url) = &t.store else {
        unreachable!()
    };
    // A port nothing listens on: one just bound and released.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = HistoryStore::Postgres(through(url, port));
    let w = history::write(&gone, &t.spool_root, &[record(1)]).unwrap();
    assert_warned(&w, &format!("127.0.0.1:{port}"), "onnection refused");
    assert_eq!(Spool::of(&t.spool_root, &gone).pending().len(), 1);
}
