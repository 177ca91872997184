//! The GPU suite's harness (`src/harness/`) from outside, with no GPU: in process, and at
//! its real entry point as child processes of this binary, which re-executes itself
//! through its ignored `child` test. One module per concern; their shared sandbox,
//! recorded devices, fakes and child processes are `tests/common/harness.rs`.

#[path = "../common/harness.rs"]
mod support;

mod child;
mod compile_only;
mod driver;
mod history_record;
mod in_process;
mod in_process_devices;
mod junit;
mod nextest;
mod onboarding;
mod signals;
mod text;

/// The entry point of the child processes this binary's tests start
/// ([`support::child_main`]); `support::child_command` runs it as `--exact child`.
#[test]
#[ignore = "entry point of the child processes that the tests start"]
fn child() {
    support::child_main();
}
