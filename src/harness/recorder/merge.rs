//! Under cargo-nextest (one process per case): each process's records beside the run's
//! other processes' in `<run dir>/junit/<pid>.json`, and the JUnit file rebuilt from all of
//! them under `<run dir>/junit.lock`.

use super::*;
use crate::text::Shown;

/// This process's records, as merged under nextest.
#[derive(Serialize, Deserialize)]
pub(super) struct ProcessPart {
    pub(super) started: SystemTime,
    pub(super) pid: u32,
    pub(super) suites: Vec<SuiteInfo>,
    pub(super) records: Vec<Record>,
}

/// Writes `part` beside the run's other processes' parts and rebuilds the JUnit file from
/// all of them, under the run's JUnit lock. Every file it touches must resolve inside the
/// run folder ([`crate::harness::shared::in_run`]). A record that cannot be read is not silently
/// lost: the rebuilt file gets one failing [`RECORDS_CASE`] naming each such record and
/// why, so that a JUnit file missing cases never reads green.
pub(super) fn merge(dir: &Path, junit_path: &Path, part: &ProcessPart) -> std::io::Result<()> {
    use crate::harness::shared::in_run;
    let parts_dir = in_run(dir, &dir.join("junit"))?;
    std::fs::create_dir_all(&parts_dir)
        .map_err(|e| crate::harness::shared::naming(&parts_dir, "create", e))?;
    let json = serde_json::to_string(part).map_err(std::io::Error::other)?;
    write_atomic(
        &in_run(dir, &parts_dir.join(format!("{}.json", part.pid)))?,
        &json,
    )?;
    let lock_path = in_run(dir, &dir.join("junit.lock"))?;
    let lock = crate::harness::shared::lock_file(&lock_path)?;
    lock.lock()
        .map_err(|e| crate::harness::shared::naming(&lock_path, "lock", e))?;
    let mut parts: Vec<ProcessPart> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for entry in std::fs::read_dir(&parts_dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            // Inside the run folder and through the bounded reader: a link out of it, a
            // FIFO or a device there is refused, not read.
            let text = in_run(dir, &path).and_then(|p| {
                crate::input::read_text(&p, "JUnit record", crate::input::RESULTS_LIMIT)
                    .map_err(std::io::Error::other)
            });
            let why = match text {
                Ok(t) => match serde_json::from_str::<ProcessPart>(&t) {
                    Ok(p) => {
                        parts.push(p);
                        continue;
                    }
                    Err(e) => format!("{}: not a JUnit record of this suite ({e})", path.shown()),
                },
                Err(e) => e.to_string(),
            };
            crate::say_err!("accprobe: {why}; its cases are missing from the JUnit file");
            refused.push(why);
        }
    }
    parts.sort_by_key(|p| (p.started, p.pid));
    let (mut suites, mut cases) = merged(parts);
    if !refused.is_empty() {
        refused.sort();
        suites.push(SuiteInfo {
            name: RECORDS_SUITE.into(),
            ..Default::default()
        });
        cases.push(CaseRecord {
            suite: RECORDS_SUITE.into(),
            name: RECORDS_CASE.into(),
            status: Status::Failed,
            message: format!(
                "{} JUnit record(s) of this nextest run cannot be read, so their cases are \
                 missing from this file: {}",
                refused.len(),
                refused.join("; ")
            ),
            failure: None,
            duration: std::time::Duration::ZERO,
            kind: Some("records".into()),
            started: SystemTime::now(),
        });
    }
    let written = write_atomic(junit_path, &junit::junit(&suites, &cases));
    let _ = lock.unlock();
    written
}

/// The union of the parts: suites in first-seen order (the first with properties or
/// output wins), each case once (a later process's record of the same case, a retry,
/// wins), in first-seen order.
pub(super) fn merged(parts: Vec<ProcessPart>) -> (Vec<SuiteInfo>, Vec<CaseRecord>) {
    let mut suites: Vec<SuiteInfo> = Vec::new();
    let mut order: Vec<(String, String)> = Vec::new();
    let mut cases: BTreeMap<(String, String), CaseRecord> = BTreeMap::new();
    for p in parts {
        for s in p.suites {
            match suites.iter_mut().find(|x| x.name == s.name) {
                Some(known) => {
                    if known.properties.is_empty() && known.system_out.is_empty() {
                        *known = s;
                    }
                }
                None => suites.push(s),
            }
        }
        for r in p.records {
            let key = (r.case.suite.clone(), r.case.name.clone());
            if cases.insert(key.clone(), r.case).is_none() {
                order.push(key);
            }
        }
    }
    let cases = order.into_iter().filter_map(|k| cases.remove(&k)).collect();
    (suites, cases)
}
