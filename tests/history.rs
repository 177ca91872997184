//! The results history against real stores: one suite of checks that every store passes
//! (SQLite in a temporary folder; PostgreSQL on the server `ACCPROBE_TEST_POSTGRES` names,
//! a fresh database per check), then the ways a store fails (a locked file, a full disk,
//! a server gone mid-write or not there, a writer killed mid-write, eight writers at
//! once); the GPU suite writing its record is `tests/harness/history_record.rs`. A libtest-mimic harness, so that a check
//! that needs the server is reported ignored with the reason when no server is named,
//! never passed. `.ci/run` starts a throwaway PostgreSQL and names it.

#[path = "history/failures.rs"]
mod failures;
#[path = "history/fixture.rs"]
mod fixture;
#[path = "history/suite.rs"]
mod suite;

use libtest_mimic::{Arguments, Completion, Failed, Trial};

// Checks assert: libtest-mimic reports a panic as the check's failure.

fn main() {
    if let Some(code) = fixture::child_main() {
        std::process::exit(code);
    }
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for (name, check) in suite::CHECKS {
        for backend in fixture::BACKENDS {
            let check = *check;
            trials.push(Trial::ignorable_test(
                format!("{}::{name}", backend.name()),
                move || run(backend, check),
            ));
        }
    }
    for (name, backend, check) in failures::CHECKS {
        let (backend, check) = (*backend, *check);
        trials.push(Trial::ignorable_test(
            format!("{}::{name}", backend.name()),
            move || run(backend, check),
        ));
    }
    libtest_mimic::run(&args, trials).exit();
}

/// A check on a fresh store of `backend`; ignored with the reason when the backend is not
/// here (no server named, no tmpfs).
fn run(backend: fixture::Backend, check: fixture::Check) -> Result<Completion, Failed> {
    let store = match fixture::TestStore::new(backend) {
        Ok(s) => s,
        Err(fixture::Unavailable(why)) => return Ok(Completion::ignored_with(why)),
    };
    check(&store);
    Ok(Completion::Completed)
}
