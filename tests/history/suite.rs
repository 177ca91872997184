//! What every store does, SQLite and PostgreSQL alike.

use crate::fixture::{record, writer, Check, TestStore};
use accprobe::history::{self, read, schema, Spool, StoreError};

pub const CHECKS: &[(&str, Check)] = &[
    ("a_record_reads_back_whole", a_record_reads_back_whole),
    (
        "a_record_written_twice_is_one_run",
        a_record_written_twice_is_one_run,
    ),
    (
        "reopening_keeps_the_runs_and_migrates_once",
        reopening_keeps_the_runs_and_migrates_once,
    ),
    (
        "a_store_of_a_newer_schema_is_refused",
        a_store_of_a_newer_schema_is_refused,
    ),
    (
        "the_spool_is_written_before_the_run",
        the_spool_is_written_before_the_run,
    ),
    (
        "eight_writers_at_once_lose_nothing",
        eight_writers_at_once_lose_nothing,
    ),
    (
        "a_writer_killed_mid_write_leaves_no_half_record",
        a_writer_killed_mid_write_leaves_no_half_record,
    ),
];

fn a_record_reads_back_whole(t: &TestStore) {
    let mut s = t.open();
    let (a, b) = (record(2), record(1));
    assert!(s.insert(&a.rows()).unwrap());
    assert!(s.insert(&b.rows()).unwrap());
    let runs = read::runs(s.as_mut()).unwrap();
    // In the order they measured, not the order written.
    assert_eq!(runs, [b.run.clone(), a.run.clone()]);
    assert_eq!(read::record(s.as_mut(), &a.run).unwrap(), a);
    let name = &a.variants[3].name;
    let one = read::variants(s.as_mut(), Some(name)).unwrap();
    assert_eq!(one.len(), 2);
    assert!(one.iter().all(|v| &v.name == name));
    assert_eq!(
        a.cases[9].suspect.as_deref(),
        Some("first suspect: the compiler (SASS changed)")
    );
    assert_eq!(a.run.verdict, "failed");
}

fn a_record_written_twice_is_one_run(t: &TestStore) {
    let mut s = t.open();
    let r = record(5);
    assert!(s.insert(&r.rows()).unwrap());
    assert!(
        !s.insert(&r.rows()).unwrap(),
        "the second insert adds nothing"
    );
    assert_eq!(t.assert_whole(), 1);
}

fn reopening_keeps_the_runs_and_migrates_once(t: &TestStore) {
    t.open().insert(&record(1).rows()).unwrap();
    let mut s = t.open();
    assert_eq!(read::runs(s.as_mut()).unwrap().len(), 1);
    let versions = t.number(&format!("SELECT COUNT(*) FROM {}", schema::VERSIONS_TABLE));
    assert_eq!(versions, schema::SCHEMA);
}

fn a_store_of_a_newer_schema_is_refused(t: &TestStore) {
    t.open().insert(&record(1).rows()).unwrap();
    t.sql(&format!(
        "INSERT INTO {} (version, applied_at) VALUES ({}, 'later')",
        schema::VERSIONS_TABLE,
        schema::SCHEMA + 1
    ));
    match history::open(&t.store, true).unwrap() {
        Err(StoreError::NewerSchema { found, known }) => {
            assert_eq!((found, known), (schema::SCHEMA + 1, schema::SCHEMA));
        }
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("a store of a newer schema was opened for writing"),
    }
    // Refused, and so the run's record waits in the spool.
    let w = history::write(&t.store, &t.spool_root, &[record(2)]).unwrap();
    assert!(
        w.failure.is_some() && t.spooled().len() == 1,
        "{:?}",
        w.lines()
    );
}

fn the_spool_is_written_before_the_run(t: &TestStore) {
    let spool = Spool::of(&t.spool_root, &t.store);
    let (old, new) = (record(1), record(2));
    spool.keep(&old).unwrap();
    let w = history::write(&t.store, &t.spool_root, std::slice::from_ref(&new)).unwrap();
    assert!(w.failure.is_none(), "{:?}", w.lines());
    assert_eq!(w.runs, [old.run.id.clone(), new.run.id.clone()]);
    assert_eq!(w.from_spool, 1);
    assert!(t.spooled().is_empty());
    assert_eq!(t.assert_whole(), 2);
    assert!(
        w.lines()[0].contains("2 run(s) recorded (1 from the spool)"),
        "{:?}",
        w.lines()
    );
}

fn eight_writers_at_once_lose_nothing(t: &TestStore) {
    // The store exists first only for PostgreSQL's database; SQLite's file is made by
    // whichever writer comes first.
    const WRITERS: u64 = 8;
    const EACH: u64 = 4;
    let children: Vec<_> = (0..WRITERS)
        .map(|w| {
            writer(t, 100 + w * EACH, 100 + (w + 1) * EACH)
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(
            !stderr.contains("warning"),
            "a writer could not write: {stderr}"
        );
    }
    assert_eq!(t.assert_whole(), (WRITERS * EACH) as i64);
    assert!(t.spooled().is_empty());
}

fn a_writer_killed_mid_write_leaves_no_half_record(t: &TestStore) {
    t.open();
    for round in 0..3u64 {
        let before = t.assert_whole();
        let mut child = writer(t, 1000 * (round + 1), 0).spawn().unwrap();
        // Killed once it has written a record or two: most of its time is spent inside a
        // transaction (each record is 200 rows), so the kill lands in one.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while t.assert_whole() < before + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the writer wrote nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        t.assert_whole();
    }
    if let accprobe::config::HistoryStore::Sqlite(_) = t.store {
        assert_eq!(t.sql("PRAGMA integrity_check")[0][0].as_deref(), Some("ok"));
    }
    // And the store takes records after.
    let w = history::write(&t.store, &t.spool_root, &[record(1)]).unwrap();
    assert!(w.failure.is_none(), "{:?}", w.lines());
}
