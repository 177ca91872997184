//! The generated test suite (`tests/probe.rs`): turns profiles into libtest-mimic trials,
//! measures lazily on the GPU, and writes the table, the results file and the JUnit file.
//!
//! Contract (docs/harness.md says it for users):
//! - `--list`, name filters, `--exact`, `--skip`, `--ignored`, `--include-ignored`,
//!   `--format terse` and `--test-threads` are libtest's, through libtest-mimic. `--list`
//!   measures nothing and writes nothing.
//! - Cases that cannot run for want of a GPU (no driver, no NVRTC, no device, a device
//!   that cannot be opened; SASS cases without a disassembler) are ignored at list time,
//!   with the reason: `--list --ignored` lists them, nextest shows them skipped. Known
//!   deviations and cases the results cannot judge are only known after measuring: they
//!   are ignored at run time, with the reason.
//! - Under `ACCPROBE_REQUIRE_GPU` a run that cannot test its GPU fails once: a failing
//!   `gpu::required` case gives the reason, and the cases it kept from running are
//!   ignored at list time as "not run: see gpu::required".
//! - The compile-only cases of a toolchain that is not installed and not required
//!   (`ACCPROBE_REQUIRE_TOOLCHAINS`) are one ignored case per profile and toolchain.
//! - Each variant is measured at most once per process, and only when a case that runs
//!   needs it; under nextest at most once per run (`shared`). The GPU is used by one case
//!   at a time.
//! - A profile that fails to load becomes a failing case naming file, line and column; the
//!   other profiles' cases still run.
//! - The JUnit file is complete at every moment for what finished, also when a case
//!   panicked or the run was interrupted (a termination signal, at any moment from the
//!   first instruction of `main`: exit 128 + the signal, and a failing `run::interrupted`
//!   case; see `crate::interrupt`).
//! - A closed stdout (`probe | head -1`) ends the run quietly with 141, as SIGPIPE would,
//!   the JUnit file marking what did not finish; a stdout or `--logfile` that fails
//!   otherwise (a full disk) ends it with 2.
//! - After libtest's line, a closing summary counts the ignored cases by reason and says
//!   whether the GPU was tested.

mod compile_only;
mod env;
mod execute;
mod gpu;
mod outputs;
mod plan;
mod recorder;
mod run_cases;
mod shared;
mod startup;
mod stdout;
mod summary;
mod trial;

pub use env::{Paths, RunOptions, REQUIRE_GPU_ENV};
pub use recorder::{install_interrupt_handler, INTERRUPTED_CASE, INTERRUPTED_SUITE};
pub(crate) use startup::check_arguments;
pub(crate) use stdout::quiet_printer_failures;

use crate::error::GpuError;
use crate::measure::device;
use crate::measure::target::Target;
use crate::sync::lock_ignoring_poison;
use libtest_mimic::Arguments;
use outputs::{Finishing, Lines};
use recorder::{Recorder, CURRENT};
use shared::RunShare;
use startup::Loaded;
use std::process::ExitCode;
use std::sync::Arc;

/// The name and JUnit suite of the case that fails a run that requires a GPU and has none.
pub const REQUIRED_CASE: &str = "gpu::required";
pub const REQUIRED_SUITE: &str = "gpu required";

/// Says on stderr how long the process has run, at a named point: always (unlike
/// [`crate::trace::mark`], which only prints under `ACCPROBE_TRACE`), but not with
/// `--list`, and only once [`main_with`] started the clock.
fn progress_note(args: &Arguments, what: &str) {
    if !args.list && crate::trace::started() {
        crate::say_err!("accprobe: {what} at {:.3} s", crate::trace::elapsed());
    }
}

/// The entry point of `tests/probe.rs`. The termination signals are taken from its first
/// instruction on, and the process ends through [`crate::interrupt::exit`]: a signal that
/// came before the end, however late, ends it with 128 + the signal and a red JUnit file.
pub fn main() -> ExitCode {
    install_interrupt_handler();
    if let Some(code) = crate::compile::worker::worker_main() {
        crate::interrupt::exit(if code == ExitCode::SUCCESS { 0 } else { 2 });
    }
    if let Err(e) = crate::compile::process_nvrtc::select_for_process() {
        crate::interrupt::exit(configuration_error(e));
    }
    crate::interrupt::exit(main_with(Arguments::from_args()))
}

/// [`main`] with the given arguments; the process's exit code. Configuration errors
/// (arguments libtest cannot run, `ACCPROBE_MODE`, `ACCPROBE_REQUIRE_GPU`, the syntax of
/// `ACCPROBE_DEVICES` or `ACCPROBE_DEVICE`) exit 2 before the CUDA driver is loaded; a
/// device ordinal out of range exits 2 as soon as the device count is known.
pub fn main_with(args: Arguments) -> u8 {
    install_interrupt_handler();
    quiet_printer_failures();
    if let Err(e) = crate::trace::start() {
        return configuration_error(e);
    }
    if args.list {
        recorder::nothing_to_report();
    }
    device::prepare_process_environment();
    let (options, paths) = match startup::configure(&args) {
        Ok(c) => c,
        Err(e) => {
            return configuration_error(e);
        }
    };
    let share = startup::open_share(&args, &paths, &options);
    let started = match startup::start_devices(&args, &paths, &options, share.as_ref()) {
        Ok(started) => started,
        Err(e) => {
            return configuration_error(e);
        }
    };
    let code = run_with(
        &args,
        &paths,
        started.targets,
        &options,
        share,
        started.loaded,
    );
    progress_note(&args, "devices released");
    code
}

/// A configuration error, said on stderr: the run exits 2 before any case runs.
fn configuration_error(e: impl std::fmt::Display) -> u8 {
    crate::say_err!("error: {e}");
    2
}

/// Runs the suite with `args` (libtest's flags) on `targets` (or the reason there are
/// none), with what `options` override. Under nextest (`options.run_id`), the processes of
/// one run share one measurement and one JUnit file.
pub fn run(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
) -> ExitCode {
    ExitCode::from(run_code(args, paths, targets, options))
}

/// [`run`], with the process exit code as a number (0, 101 when a case failed, 2 for a
/// configuration error, also one found when measuring, 1 when the
/// JUnit file cannot be written).
pub fn run_code(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
) -> u8 {
    // As in `main_with`: before anything is shared, locked or measured.
    if let Err(e) = check_arguments(args) {
        return configuration_error(e);
    }
    let share = startup::open_share(args, paths, options);
    run_with(args, paths, targets, options, share, None)
}

/// A run: the plan, then (unless listing) the plan recorded, measuring and compiling
/// started beside the cases, libtest running them, and the closing.
fn run_with(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
    share: Option<RunShare>,
    loaded: Option<Loaded>,
) -> u8 {
    // Under nextest, a measurement an earlier process published stands for the devices.
    let replayed = share.as_ref().and_then(|s| s.published.as_ref());
    let measured_here = replayed.is_none();
    let targets = match replayed {
        Some(p) => Ok(p.targets()),
        None => targets,
    };
    let recorder = Arc::new(
        Recorder::new((!args.list).then(|| paths.junit.clone()))
            .merging(share.as_ref().map(|s| s.dir.clone())),
    );
    *lock_ignoring_poison(&CURRENT) = Some(recorder.clone());
    let mut plan = plan::plan(args, paths, targets, options, &recorder, loaded);
    if args.list {
        return execute::list(args, plan.trials);
    }
    plan.record(args, &recorder);
    let background = execute::start(&plan, share.as_ref());
    let trials = std::mem::take(&mut plan.trials);
    let conclusion = match execute::run_cases(args, trials, &recorder) {
        Ok(c) => c,
        Err(code) => return code,
    };
    background.join();
    progress_note(args, "cases finished");
    let finishing = Finishing {
        paths,
        several: plan.several,
        measured_here,
        lines: Lines::for_args(args),
    };
    summary::close(args, options, finishing, plan, &recorder, &conclusion)
}
