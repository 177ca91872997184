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
//! - Under `ACCPROBE_REQUIRE_GPU` nothing is ignored for want of a GPU: a failing
//!   `gpu::required` case gives the reason, and those cases fail.
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
mod recorder;
mod shared;
mod stdout;

pub use env::{Paths, RunOptions, REQUIRE_GPU_ENV};
pub use recorder::{install_interrupt_handler, INTERRUPTED_CASE, INTERRUPTED_SUITE};
pub use stdout::quiet_printer_failures;

use crate::catalog;
use crate::error::{Error, GpuError, GpuErrorKind};
use crate::expectations::profile::Profile;
use crate::measure::device;
use crate::measure::session::GpuSession;
use crate::measure::target::{Ahead, CudaTarget, Target};
use crate::model::results::RunResults;
use crate::model::variant::Variant;
use crate::report::junit::{self, CaseRecord, Ended, Status, SuiteInfo};
use crate::report::{self, write_atomic, write_atomic_bytes};
use crate::verdict::cases::{cases, Case, Check, SpillSource};
use crate::verdict::{self, Outcome};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use recorder::{Recorder, Skip, CURRENT};
use shared::{DeviceRecord, Published, RunShare};
use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// The name and JUnit suite of the case that fails a run that requires a GPU and has none.
pub const REQUIRED_CASE: &str = "gpu::required";
pub const REQUIRED_SUITE: &str = "gpu required";

/// How a case body ended: JUnit's view of it (status, message, kind of failure or skip)
/// and, for the closing summary, why it was ignored.
struct Ending {
    ended: Ended,
    skip: Option<Skip>,
}

impl From<Ended> for Ending {
    fn from(ended: Ended) -> Ending {
        Ending { ended, skip: None }
    }
}

impl From<(Status, String)> for Ending {
    fn from(e: (Status, String)) -> Ending {
        Ended::from(e).into()
    }
}

impl Ending {
    fn skipped(message: String, kind: &'static str, skip: Skip) -> Ending {
        Ending {
            ended: Ended::new(Status::Ignored, message, kind),
            skip: Some(skip),
        }
    }
}

/// A trial whose body returns how it ended; panics become failures, and every end is
/// recorded for JUnit.
fn trial<R: Into<Ending>>(
    recorder: &Arc<Recorder>,
    suite: String,
    name: String,
    body: impl FnOnce() -> R + Send + 'static,
) -> Trial {
    let recorder = recorder.clone();
    Trial::ignorable_test(name.clone(), move || {
        let started = SystemTime::now();
        let start = Instant::now();
        let ending = catch_unwind(AssertUnwindSafe(|| body().into())).unwrap_or_else(|p| {
            let text = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic payload".into());
            Ended::new(Status::Failed, format!("panicked: {text}"), "panic").into()
        });
        let Ending {
            ended:
                Ended {
                    status,
                    message,
                    kind,
                },
            skip,
        } = ending;
        recorder.push(
            CaseRecord {
                suite,
                name,
                status: status.clone(),
                message: message.clone(),
                duration: start.elapsed(),
                kind: kind.map(str::to_string),
                started,
            },
            skip,
        );
        match status {
            Status::Passed => Ok(Completion::Completed),
            Status::Ignored => Ok(Completion::ignored_with(message)),
            // libtest knows no error: it fails, with the cause first ("GPU busy: ...");
            // the JUnit file has it as an <error>.
            Status::Failed | Status::Error => Err(Failed::from(message)),
        }
    })
}

/// A verdict in JUnit's terms, with why it was ignored.
fn ending(verdict: verdict::Verdict) -> Ending {
    let skip = match &verdict.outcome {
        Outcome::KnownDeviation { .. } => Some(Skip::KnownDeviation),
        Outcome::Skipped(reason) => Some(Skip::NotJudged(reason.clone())),
        _ => None,
    };
    Ending {
        ended: junit::ended(verdict),
        skip,
    }
}

/// A planned trial: the trial, its suite, and why it is ignored at list time.
struct Planned {
    trial: Trial,
    suite: String,
    ignored: Option<(String, Skip)>,
}

impl Planned {
    fn runs(trial: Trial, suite: &str) -> Planned {
        Planned {
            trial,
            suite: suite.to_string(),
            ignored: None,
        }
    }
}

/// Replay cases: a profile's cases evaluated on its recorded results.
fn replay_trials(
    recorder: &Arc<Recorder>,
    profile: &Profile,
    results: &RunResults,
) -> Vec<Planned> {
    let suite = replay_suite_name(profile);
    let results = Arc::new(results.clone());
    let profile = Arc::new(profile.clone());
    cases(&profile)
        .into_iter()
        .map(|case| {
            let (p, r) = (profile.clone(), results.clone());
            Planned::runs(
                trial(
                    recorder,
                    suite.clone(),
                    format!("replay::{}::{}", profile.name, case.name),
                    move || ending(verdict::judge(&case, &p, &r)),
                ),
                &suite,
            )
        })
        .collect()
}

fn replay_suite_name(profile: &Profile) -> String {
    format!("replay {}", profile.name)
}

/// Whether a case's verdict needs the SASS (and is skipped without it).
fn needs_sass(case: &Case) -> bool {
    matches!(
        case.check,
        Check::SassShape(_) | Check::SassUnchanged(_) | Check::NoSpills(SpillSource::Sass)
    )
}

/// Why `case` cannot run on this session's device, decided before anything runs: no
/// usable GPU, or no disassembler for a case that needs SASS.
fn unrunnable(session: &GpuSession, case: &Case) -> Option<Skip> {
    match session.target() {
        Err(e) if e.kind() == GpuErrorKind::Unavailable => Some(Skip::NoGpu(e.to_string())),
        Err(_) => None,
        Ok(t) => needs_sass(case)
            .then(|| t.sass_unavailable())
            .flatten()
            .map(Skip::NoDisassembler),
    }
}

fn skip_reason(skip: &Skip) -> String {
    match skip {
        Skip::NoGpu(r) | Skip::NoDisassembler(r) | Skip::NoToolchain(r) | Skip::NotJudged(r) => {
            r.clone()
        }
        Skip::KnownDeviation => "known deviation".into(),
        Skip::Interrupted(s) => format!("interrupted by {s}"),
    }
}

fn gpu_trials(recorder: &Arc<Recorder>, session: &Arc<GpuSession>, require: bool) -> Vec<Planned> {
    let suite = gpu_suite_name(session);
    cases(&session.profile)
        .into_iter()
        .map(|case| {
            let unrunnable = unrunnable(session, &case);
            let s = session.clone();
            let required = require.then(|| unrunnable.clone()).flatten();
            let ignored_for = unrunnable.clone();
            let t = trial(
                recorder,
                suite.clone(),
                session.case_name(&case.name),
                move || {
                    if let Some(skip) = required {
                        return Ending::from(Ended::new(
                            Status::Failed,
                            format!(
                                "not run: {REQUIRE_GPU_ENV} is set but {} (see {REQUIRED_CASE})",
                                skip_reason(&skip)
                            ),
                            "no-gpu-required",
                        ));
                    }
                    match s.results_for(&case.needs) {
                        Err(e) if e.kind() == GpuErrorKind::Unavailable => {
                            Ending::skipped(e.to_string(), "no-gpu", Skip::NoGpu(e.to_string()))
                        }
                        Err(e) if e.kind() == GpuErrorKind::Busy => {
                            Ended::new(Status::Error, e.to_string(), "gpu-busy").into()
                        }
                        Err(e) => Ended::new(Status::Failed, e.to_string(), "gpu-error").into(),
                        Ok(results) => {
                            let v = verdict::judge(&case, &s.profile, &results);
                            match (&v.outcome, ignored_for) {
                                // Run with --ignored: still the reason it was ignored for.
                                (Outcome::Skipped(r), Some(skip)) => {
                                    Ending::skipped(r.clone(), "cannot-judge", skip)
                                }
                                _ => ending(v),
                            }
                        }
                    }
                },
            );
            match unrunnable {
                Some(skip) if !require => Planned {
                    trial: t.with_ignored_flag(true),
                    suite: suite.clone(),
                    ignored: Some((skip_reason(&skip), skip)),
                },
                _ => Planned::runs(t, &suite),
            }
        })
        .collect()
}

fn gpu_suite_name(s: &GpuSession) -> String {
    format!("{} / profile {}", s.device_label(), s.profile.name)
}

/// Why a run that requires a GPU cannot test it, or `None`.
fn required_reason(sessions: &[Arc<GpuSession>]) -> Option<String> {
    let several = sessions.len() > 1;
    let reasons: Vec<String> = sessions
        .iter()
        .filter_map(|s| {
            let skip = cases(&s.profile).iter().find_map(|c| unrunnable(s, c))?;
            Some(if several {
                format!("{}: {}", s.device_label(), skip_reason(&skip))
            } else {
                skip_reason(&skip)
            })
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Prints how long the process has run, at a named point (stderr; not with --list; only
/// from [`main_with`], which starts the clock).
fn mark(args: &Arguments, what: &str) {
    if !args.list && crate::trace::started() {
        eprintln!("accprobe: {what} at {:.3} s", crate::trace::elapsed());
    }
}

/// The entry point of `tests/probe.rs`. The termination signals are taken from its first
/// instruction on, and the process ends through [`crate::interrupt::exit`]: a signal that
/// came before the end, however late, ends it with 128 + the signal and a red JUnit file.
pub fn main() -> ExitCode {
    install_interrupt_handler();
    if let Some(code) = crate::compile::toolchain::worker_main() {
        crate::interrupt::exit(if code == ExitCode::SUCCESS { 0 } else { 2 });
    }
    if let Err(e) = crate::compile::toolchain::select_for_process() {
        eprintln!("error: {e}");
        crate::interrupt::exit(2);
    }
    crate::interrupt::exit(main_with(Arguments::from_args()))
}

/// [`main`] with the given arguments; the process's exit code. Configuration errors
/// (arguments libtest cannot run, `ACCPROBE_MODE`, `ACCPROBE_REQUIRE_GPU`, the syntax of
/// `ACCPROBE_DEVICES` or `ACCPROBE_DEVICE`) exit 2 before the CUDA driver is loaded; a device ordinal out of
/// range exits 2 as soon as the device count is known.
pub fn main_with(args: Arguments) -> u8 {
    install_interrupt_handler();
    quiet_printer_failures();
    if let Err(e) = crate::trace::start() {
        eprintln!("error: {e}");
        return 2;
    }
    if args.list {
        recorder::nothing_to_report();
    }
    device::prepare_process_environment();
    // Before CUDA: a refused run must not wait for the compile started before the context.
    if let Err(e) = check_arguments(&args) {
        eprintln!("error: {e}");
        return 2;
    }
    let options = match RunOptions::from_env() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    if let Err(e) = device::selection_from_env() {
        eprintln!("error: {e}");
        return 2;
    }
    let paths = Paths::from_env();
    if let Err(e) = paths.check_distinct() {
        eprintln!("error: {e}");
        return 2;
    }
    let share = open_share(&args, &paths, &options);
    let start = Instant::now();
    // The profiles load while the driver starts, so that each device's matrix compiles from
    // the moment the driver names the device, while its context is made.
    let mut loading = Some(std::thread::spawn({
        let dir = paths.expectations.clone();
        move || catalog::load_dir(&dir)
    }));
    let mut loaded: Option<Loaded> = None;
    let mut ahead: BTreeMap<usize, Ahead> = BTreeMap::new();
    let targets: Result<Vec<Arc<dyn Target>>, GpuError> =
        match share.as_ref().and_then(|s| s.published.as_ref()) {
            // An earlier process of this nextest run measured: no CUDA here at all.
            Some(p) => Ok(p.targets()),
            None => device::detect_all_with(|found| {
                if args.list {
                    return;
                }
                let (profiles, _) =
                    loaded.get_or_insert_with(|| joined(loading.take().expect("joined once")));
                if let Ok(sel) =
                    catalog::select(profiles, Some(&found.identity), options.profile.as_deref())
                {
                    let a = Ahead::start(
                        found.ordinal,
                        found.capability,
                        sel.profile.probe.variants(),
                        paths.cache.clone(),
                    );
                    ahead.insert(found.ordinal, a);
                }
            })
            .map(|devices| {
                devices
                    .into_iter()
                    .map(|d| {
                        let a = ahead.remove(&d.ordinal);
                        Arc::new(CudaTarget::with_ahead(d, paths.cache.clone(), a))
                            as Arc<dyn Target>
                    })
                    .collect()
            }),
        };
    let loaded = loaded.or_else(|| loading.map(joined));
    if let Err(e) = &targets {
        if e.kind() == GpuErrorKind::Config {
            eprintln!("error: {e}");
            return 2;
        }
    }
    if !args.list {
        if let Ok(t) = &targets {
            eprintln!(
                "accprobe: CUDA and NVRTC ready in {:.3} s ({} device(s))",
                start.elapsed().as_secs_f64(),
                t.len()
            );
        }
    }
    let code = run_with(&args, &paths, targets, &options, share, loaded);
    mark(&args, "devices released");
    code
}

/// The profiles of the expectations folder, and what could not be loaded.
type Loaded = (Vec<Profile>, Vec<Error>);

/// What the thread loading the profiles gave (its panic as a load error).
fn joined(loading: std::thread::JoinHandle<Loaded>) -> Loaded {
    loading.join().unwrap_or_else(|payload| {
        let why = crate::error::panic_text(payload.as_ref());
        (
            Vec::new(),
            vec![Error::msg(format!(
                "the thread loading the profiles panicked: {why}"
            ))],
        )
    })
}

/// Under nextest (and not listing): the run's shared folder, its measuring lock taken
/// unless an earlier process published its measurement.
fn open_share(args: &Arguments, paths: &Paths, options: &RunOptions) -> Option<RunShare> {
    let id = options.run_id.as_deref().filter(|_| !args.list)?;
    match RunShare::open(&paths.runs, id) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!(
                "accprobe: cannot share the measurement of nextest run {id} under {}: {e}; measuring in this process",
                paths.runs.display()
            );
            None
        }
    }
}

/// Whether libtest prints JSON on stdout (`--format json`): then everything else the suite
/// prints goes to stderr, so that stdout stays JSON.
fn json_stdout(args: &Arguments) -> bool {
    args.format == Some(libtest_mimic::FormatSetting::Json)
}

/// What libtest would accept but cannot run: `--test-threads 0` makes libtest-mimic wait
/// forever for a worker that never starts, and a `--logfile` it cannot create makes it
/// panic once the cases are planned.
pub fn check_arguments(args: &Arguments) -> Result<(), String> {
    if args.test_threads == Some(0) {
        return Err("--test-threads 0: expected at least 1 thread".into());
    }
    if let Some(log) = &args.logfile {
        // Opened as libtest-mimic will (it creates the file), without truncating it yet.
        let log = std::path::Path::new(log);
        if log.is_dir() {
            return Err(format!(
                "--logfile {}: is a folder, expected a file",
                log.display()
            ));
        }
        std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(log)
            .map_err(|e| format!("--logfile {}: cannot be written: {e}", log.display()))?;
    }
    Ok(())
}

/// The JUnit suite of a finished session; prints its table (stdout, or stderr when stdout
/// is JSON) and, when `write` (it measured here), writes its results, ptxas log and CUBIN
/// (with `-gpuN` in the file names when the run has several devices). The paths written are
/// said on stderr.
fn finish_session(
    s: &GpuSession,
    paths: &Paths,
    several: bool,
    write: bool,
    json: bool,
) -> SuiteInfo {
    let mut info = SuiteInfo {
        name: gpu_suite_name(s),
        properties: vec![
            ("profile".into(), s.profile.name.clone()),
            ("profile_file".into(), s.profile.file.display().to_string()),
            ("profile_selection".into(), s.selection_note.clone()),
        ],
        system_out: String::new(),
    };
    let results_path = match (s.target(), several) {
        (Ok(t), true) => {
            let stem = paths
                .results
                .file_stem()
                .map_or("results".into(), |x| x.to_string_lossy().into_owned());
            paths
                .results
                .with_file_name(format!("{stem}-gpu{}.json", t.ordinal()))
        }
        _ => paths.results.clone(),
    };
    if let Err(reason) = s.target() {
        info.properties
            .push(("no_gpu_reason".into(), reason.to_string()));
    }
    if !write {
        return info;
    }
    if let Some(r) = s.measured_results() {
        info.properties.extend(
            r.environment
                .as_ref()
                .map(|e| e.properties())
                .unwrap_or_default(),
        );
        let table = report::table(&r, &s.profile.probe.chains, &s.profile.probe.accumulators);
        let text = format!("\n{}: {}\n{table}", s.device_label(), s.selection_note);
        if json {
            eprintln!("{text}");
        } else {
            stdout::say(&format!("{text}\n"));
        }
        info.system_out = format!("{}\n{table}", s.selection_note);
        match write_atomic(&results_path, &r.to_json()) {
            Ok(()) => eprintln!("results: {}", results_path.display()),
            Err(e) => eprintln!("{}", Error::io(&results_path, "write results", e)),
        }
    }
    if let Some(c) = s.compiled() {
        let [log_path, _] = Paths::beside_results(&results_path);
        if let Err(e) = write_atomic(&log_path, &c.log) {
            eprintln!("{}", Error::io(&log_path, "write the ptxas log", e));
        }
        write_cubins(&results_path, &c.parts);
    }
    info
}

/// One CUBIN per NVRTC program: `results.cubin`, then `results.1.cubin`, ...; those of an
/// earlier run with more programs (`results.K.cubin`, K at least the count) are removed, so
/// that the folder never mixes the CUBINs of two runs.
fn write_cubins(results_path: &std::path::Path, parts: &[crate::compile::Program]) {
    for (k, part) in parts.iter().enumerate() {
        let cubin_path = match k {
            0 => Paths::beside_results(results_path)[1].clone(),
            _ => results_path.with_extension(format!("{k}.cubin")),
        };
        if let Err(e) = write_atomic_bytes(&cubin_path, &part.cubin) {
            eprintln!("{}", Error::io(&cubin_path, "write the CUBIN", e));
        }
    }
    // Those this function wrote before are consecutive: stop at the first that is absent.
    for k in parts.len().max(1).. {
        let stale = results_path.with_extension(format!("{k}.cubin"));
        if std::fs::remove_file(&stale).is_err() {
            break;
        }
    }
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

/// [`run`], with the process exit code as a number (0, 101 when a case failed, 1 when the
/// JUnit file cannot be written).
pub fn run_code(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
) -> u8 {
    // As in `main_with`: before anything is shared, locked or measured.
    if let Err(e) = check_arguments(args) {
        eprintln!("error: {e}");
        return 2;
    }
    let share = open_share(args, paths, options);
    run_with(args, paths, targets, options, share, None)
}

/// What one device measured, for the run's later processes; `whole` is how measuring its
/// whole matrix ended (a variant it did not measure gets that error, or its own).
fn device_record(
    s: &GpuSession,
    whole: Option<&Result<RunResults, GpuError>>,
) -> Option<DeviceRecord> {
    let t = s.target().ok()?;
    let results = s.measured_results();
    let errors = s
        .profile
        .probe
        .variants()
        .into_iter()
        .filter(|v| results.as_ref().and_then(|r| r.get(*v)).is_none())
        .filter_map(|v| {
            let e = match whole {
                // Each variant's own error, as recorded (no second attempt).
                Some(Err(GpuError::Variant(_))) => s.results_for(&[v]).err()?,
                Some(Err(e)) => e.clone(),
                _ => GpuError::Variant(format!("{v} was not measured")),
            };
            Some((v.name(), e))
        })
        .collect();
    Some(DeviceRecord {
        ordinal: t.ordinal(),
        gpu_name: t.identity().name.clone(),
        compute_capability: t.identity().compute_capability.clone(),
        profile: s.profile.name.clone(),
        environment: t.environment(None),
        results,
        errors,
        sass_unavailable: t.sass_unavailable(),
    })
}

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
    let targets = match replayed {
        Some(p) => Ok(p.targets()),
        None => targets,
    };
    let forced = options.profile.as_deref();
    let recorder = Arc::new(
        Recorder::new((!args.list).then(|| paths.junit.clone()))
            .merging(share.as_ref().map(|s| s.dir.clone())),
    );
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder.clone());
    let mut trials: Vec<Planned> = Vec::new();
    let mut suites = Vec::new();

    let (profiles, load_errors) = loaded.unwrap_or_else(|| catalog::load_dir(&paths.expectations));
    crate::trace::mark(format!("{} profile(s) loaded", profiles.len()));
    if !load_errors.is_empty() {
        suites.push(SuiteInfo {
            name: "expectations".into(),
            ..Default::default()
        });
    }
    for e in load_errors {
        let name = match &e.file {
            Some(f) => format!(
                "expectations::{}",
                f.file_name()
                    .map(|n| n.to_string_lossy())
                    .unwrap_or_default()
            ),
            None => "expectations::load".to_string(),
        };
        let message = e.to_string();
        trials.push(Planned::runs(
            trial(&recorder, "expectations".into(), name, move || {
                Ended::new(Status::Failed, message, "invalid-profile")
            }),
            "expectations",
        ));
    }
    for p in &profiles {
        if let Some(r) = &p.recorded {
            let suite = replay_suite_name(p);
            let mut system_out = report::table(r, &p.probe.chains, &p.probe.accumulators);
            system_out.insert_str(
                0,
                &format!("replay of {} ({})\n", p.file.display(), r.source),
            );
            suites.push(SuiteInfo {
                name: suite,
                properties: r
                    .environment
                    .as_ref()
                    .map(|e| e.properties())
                    .unwrap_or_default(),
                system_out,
            });
            trials.extend(replay_trials(&recorder, p, r));
        }
    }

    let (compiling, compile_trials) =
        compile_only::trials(&recorder, &profiles, paths.cache.as_deref());
    let compile_wanted = compile_trials
        .iter()
        .any(|t| !args.is_filtered_out(&t.trial));
    for s in &compiling {
        suites.push(compile_only::suite_info_placeholder(s));
    }
    trials.extend(compile_trials);

    // One session per device (one "no GPU" session when there is none), each with the
    // profile chosen for its GPU.
    let targets: Vec<Result<Arc<dyn Target>, GpuError>> = match targets {
        Ok(t) if !t.is_empty() => t.into_iter().map(Ok).collect(),
        Ok(_) => vec![Err(GpuError::NoDevice)],
        Err(reason) => vec![Err(reason)],
    };
    let several = targets.len() > 1;
    let mut sessions: Vec<Arc<GpuSession>> = Vec::new();
    for target in targets {
        let identity = target.as_ref().ok().map(|t| t.identity().clone());
        match catalog::select(&profiles, identity.as_ref(), forced) {
            Ok(mut sel) => {
                if let Some(m) = options.mode {
                    sel.profile.probe.mode = m;
                }
                let mut session = GpuSession::new(sel.profile, sel.why, target);
                session.prefix = several;
                sessions.push(Arc::new(session));
            }
            Err(e) => {
                let message = e.to_string();
                let name = match &target {
                    Ok(t) if several => format!("gpu{}::profile::select", t.ordinal()),
                    _ => "profile::select".to_string(),
                };
                if !suites
                    .iter()
                    .any(|s: &SuiteInfo| s.name == "profile selection")
                {
                    suites.push(SuiteInfo {
                        name: "profile selection".into(),
                        ..Default::default()
                    });
                }
                trials.push(Planned::runs(
                    trial(&recorder, "profile selection".into(), name, move || {
                        Ended::new(Status::Failed, message, "no-profile")
                    }),
                    "profile selection",
                ));
            }
        }
    }
    // A GPU runner that cannot test its GPU fails, with one case that says why.
    let required = options
        .require_gpu
        .then(|| required_reason(&sessions))
        .flatten();
    if let Some(reason) = &required {
        suites.insert(
            0,
            SuiteInfo {
                name: REQUIRED_SUITE.into(),
                properties: vec![(REQUIRE_GPU_ENV.into(), "set".into())],
                ..Default::default()
            },
        );
        let message = format!("{REQUIRE_GPU_ENV} is set but the GPU cannot be tested: {reason}");
        trials.insert(
            0,
            Planned::runs(
                trial(
                    &recorder,
                    REQUIRED_SUITE.into(),
                    REQUIRED_CASE.into(),
                    move || Ended::new(Status::Failed, message, "no-gpu-required"),
                ),
                REQUIRED_SUITE,
            ),
        );
    }
    for s in &sessions {
        let gpu = gpu_trials(&recorder, s, options.require_gpu);
        let mut planned: Vec<Variant> = cases(&s.profile)
            .iter()
            .zip(&gpu)
            .filter(|(_, t)| !args.is_filtered_out(&t.trial) && !args.is_ignored(&t.trial))
            .flat_map(|(c, _)| c.needs.iter().copied())
            .collect();
        planned.sort();
        planned.dedup();
        *s.planned.lock().unwrap_or_else(|e| e.into_inner()) = planned;
        trials.extend(gpu);
        if !args.list {
            match s.target() {
                Ok(_) => eprintln!("accprobe: {}: {}", s.device_label(), s.selection_note),
                // The note already says there is no GPU.
                Err(_) => eprintln!("accprobe: {}", s.selection_note),
            }
            if let Err(reason) = s.target() {
                match &required {
                    Some(_) => {
                        eprintln!("accprobe: no GPU, and {REQUIRE_GPU_ENV} is set: {reason}")
                    }
                    None => eprintln!("accprobe: GPU cases are ignored: {reason}"),
                }
            }
        }
    }
    if args.list {
        quiet_printer_failures();
        let trials = trials.into_iter().map(|p| p.trial).collect();
        return match catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(args, trials))) {
            Ok(_) => 0,
            Err(payload) => printer_failed(args, payload, None),
        };
    }

    let mut known = suites.clone();
    for s in &sessions {
        known.push(SuiteInfo {
            name: gpu_suite_name(s),
            ..Default::default()
        });
    }
    // The plan, in one step (for the interrupt report): what will run, and what is
    // ignored at list time (into the JUnit file with its reason, as libtest counts it).
    let mut expected = Vec::new();
    let mut ignored = Vec::new();
    for p in &trials {
        if args.is_filtered_out(&p.trial) {
            continue;
        }
        match (&p.ignored, args.is_ignored(&p.trial)) {
            (Some((reason, skip)), true) => ignored.push(recorder::Record {
                case: CaseRecord {
                    suite: p.suite.clone(),
                    name: p.trial.name().to_string(),
                    status: Status::Ignored,
                    message: reason.clone(),
                    duration: std::time::Duration::ZERO,
                    kind: Some(skip.kind().into()),
                    started: SystemTime::now(),
                },
                skip: Some(skip.clone()),
            }),
            (_, true) => {}
            (_, false) => expected.push((p.suite.clone(), p.trial.name().to_string())),
        }
    }
    recorder.plan(known, ignored, expected);
    let _ = recorder.write();

    // One thread per device measures what its cases will need, so that devices work in
    // parallel whatever order libtest runs the cases in; the cases wait on their device's
    // lock and find their variants measured. Under nextest the first process that needs
    // the GPU measures every device's whole matrix before its case runs, and publishes it
    // for the run's other processes.
    let needs_gpu = sessions.iter().any(|s| {
        s.target().is_ok()
            && !s
                .planned
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_empty()
    });
    let publishing = share.as_ref().filter(|s| s.measures() && needs_gpu);
    if publishing.is_some() {
        for s in &sessions {
            *s.planned.lock().unwrap_or_else(|e| e.into_inner()) = s.profile.probe.variants();
        }
    }
    let measuring: Vec<_> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| {
            let s = s.clone();
            std::thread::spawn(move || {
                let planned = s.planned.lock().unwrap_or_else(|e| e.into_inner()).clone();
                (!planned.is_empty()).then(|| s.results_for(&planned))
            })
        })
        .collect();
    let mut measuring = Some(measuring);
    if let Some(share) = publishing {
        let ended: Vec<_> = measuring
            .take()
            .into_iter()
            .flatten()
            .map(|m| m.join().ok().flatten())
            .collect();
        let devices = sessions
            .iter()
            .filter(|s| s.target().is_ok())
            .zip(&ended)
            .filter_map(|(s, whole)| device_record(s, whole.as_ref()))
            .collect();
        match share.publish(&Published { devices }) {
            Ok(()) => eprintln!(
                "accprobe: measured for this nextest run: {}",
                share.dir.display()
            ),
            Err(e) => eprintln!(
                "accprobe: cannot publish the measurement under {}: {e}; the run's next process measures again",
                share.dir.display()
            ),
        }
    }
    if let Some(s) = &share {
        // Nothing to publish (no GPU, only replay cases): the next process tries.
        s.release();
    }
    // Each toolchain compiles in its own worker process, all at once, while the cases run.
    let compiling_threads: Vec<_> = compiling
        .iter()
        .filter(|_| compile_wanted)
        .flat_map(|s| s.toolchains().into_iter().map(move |tc| (s.clone(), tc)))
        .map(|(s, tc)| {
            std::thread::spawn(move || {
                let _ = s.run(&tc);
            })
        })
        .collect();
    let trials: Vec<Trial> = trials.into_iter().map(|p| p.trial).collect();
    quiet_printer_failures();
    let conclusion = match catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(args, trials))) {
        Ok(c) => c,
        // libtest-mimic panics when it cannot print (stdout closed: `probe | head -1`, or
        // full, or a --logfile that fails): the JUnit file then marks what did not finish,
        // as on a signal.
        Err(payload) => return printer_failed(args, payload, Some(&recorder)),
    };
    for t in compiling_threads {
        let _ = t.join();
    }
    for m in measuring.into_iter().flatten() {
        let _ = m.join();
    }
    mark(args, "cases finished");

    // Under nextest only the process that measured writes the results, log and CUBIN.
    let measured_here = replayed.is_none();
    for s in &compiling {
        let info = compile_only::suite_info(s);
        if let Some(slot) = suites.iter_mut().find(|x| x.name == info.name) {
            *slot = info;
        }
    }
    for s in &sessions {
        suites.push(finish_session(
            s,
            paths,
            several,
            measured_here,
            json_stdout(args),
        ));
    }
    recorder.set_suites(suites);
    let written = recorder.write();
    mark(
        args,
        match written {
            Ok(()) => "results and JUnit written",
            Err(_) => "results written, the JUnit file not",
        },
    );
    let (text, tested) = summary(&recorder.records(), &sessions, required.as_deref());
    if json_stdout(args) {
        eprint!("{text}");
    } else {
        stdout::say(&text);
    }
    // A GPU runner that judged no GPU case (a filter that selects none, say) tested nothing.
    let untested = options.require_gpu && tested == 0;
    if untested {
        eprintln!("error: {REQUIRE_GPU_ENV} is set but no GPU case was judged (does a filter select none?)");
    }
    match written {
        Ok(()) => eprintln!("junit: {}", paths.junit.display()),
        Err(e) => {
            eprintln!("{}", Error::io(&paths.junit, "write the JUnit report", e));
            return 1;
        }
    }
    if conclusion.has_failed() || untested {
        101
    } else {
        0
    }
}

/// The exit code of a run whose libtest output failed (`payload` is the panic that
/// unwound `libtest_mimic::run`): 141 for a closed stdout, 2 for any other failure of
/// stdout or `--logfile`. A run marks its unfinished cases in the JUnit file, beside a
/// failing `run::interrupted` case that says why; `--list` writes nothing.
fn printer_failed(
    args: &Arguments,
    payload: Box<dyn std::any::Any + Send>,
    recorder: Option<&Arc<Recorder>>,
) -> u8 {
    let into = match &args.logfile {
        Some(log) => format!("--logfile {log}"),
        None => "stdout".to_string(),
    };
    let (why, code) = match stdout::printer_failure() {
        Some(stdout::Failure::Closed) => (format!("a closed {into}"), 141),
        Some(stdout::Failure::Other(e)) => {
            eprintln!("error: {into}: cannot be written: {e}");
            (format!("a failing {into}"), 2)
        }
        // Not the printer's: a panic of libtest-mimic itself, said by the hook as usual.
        None => {
            let text = crate::error::panic_text(payload.as_ref());
            (format!("a panic in libtest-mimic ({text})"), 101)
        }
    };
    if let Some(r) = recorder {
        match r.interrupt(&why) {
            Ok(()) => eprintln!(
                "accprobe: the run stopped on {why}; the JUnit file marks the cases that did not finish"
            ),
            Err(e) => eprintln!("accprobe: the run stopped on {why}; cannot write the JUnit file: {e}"),
        }
    }
    code
}

/// The closing summary: how many cases passed, failed and were ignored, the ignored ones
/// by reason, and whether the GPU was tested.
/// Also the number of GPU cases judged.
fn summary(
    records: &[recorder::Record],
    sessions: &[Arc<GpuSession>],
    required: Option<&str>,
) -> (String, usize) {
    let count = |st: Status| records.iter().filter(|r| r.case.status == st).count();
    let mut out = format!(
        "accprobe summary: passed {}, failed {}, errors (GPU busy) {}, ignored {}\n",
        count(Status::Passed),
        count(Status::Failed),
        count(Status::Error),
        count(Status::Ignored)
    );
    let mut by: BTreeMap<(u8, String), usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r.case.status == Status::Ignored) {
        let key = match &r.skip {
            Some(Skip::NoGpu(why)) => (0, format!("no GPU ({why})")),
            Some(Skip::NoDisassembler(why)) => (1, format!("no SASS disassembler ({why})")),
            Some(Skip::NoToolchain(why)) => (2, format!("no NVRTC toolchain ({why})")),
            Some(Skip::KnownDeviation) => (2, "known deviation".to_string()),
            Some(Skip::NotJudged(why)) => (3, format!("the results cannot judge it ({why})")),
            Some(Skip::Interrupted(sig)) => (4, format!("not finished: interrupted by {sig}")),
            None => (5, format!("other ({})", r.case.message)),
        };
        *by.entry(key).or_default() += 1;
    }
    for ((_, what), n) in by {
        out.push_str(&format!("accprobe summary:   ignored: {what}: {n}\n"));
    }
    let gpu_suites: Vec<String> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| gpu_suite_name(s))
        .collect();
    let tested = records
        .iter()
        .filter(|r| gpu_suites.contains(&r.case.suite))
        .filter(|r| {
            !matches!(
                r.skip,
                Some(Skip::NoGpu(_) | Skip::NoDisassembler(_) | Skip::Interrupted(_))
            )
        })
        .count();
    let devices: Vec<String> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| s.device_label())
        .collect();
    let reason = sessions
        .iter()
        .find_map(|s| s.target().err().map(|e| e.to_string()));
    out.push_str(&match (tested, required, reason) {
        (_, Some(why), _) => {
            format!("accprobe summary: GPU NOT TESTED, and {REQUIRE_GPU_ENV} is set: {why}\n")
        }
        (0, None, Some(why)) => format!("accprobe summary: GPU NOT TESTED: {why}\n"),
        (0, None, None) => "accprobe summary: GPU NOT TESTED: no GPU case ran\n".to_string(),
        (n, None, _) => format!(
            "accprobe summary: GPU tested: {n} cases judged on {}\n",
            devices.join(", ")
        ),
    });
    (out, tested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubins_of_an_earlier_run_with_more_programs_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.json");
        let part = |b: u8| crate::compile::Program {
            cubin: vec![b; 4],
            log: String::new(),
            sass: None,
        };
        write_cubins(&results, &[part(0), part(1), part(2), part(3)]);
        let other = dir.path().join("results-gpu1.1.cubin");
        std::fs::write(&other, b"another device's").unwrap();
        write_cubins(&results, &[part(9)]);
        assert_eq!(
            std::fs::read(dir.path().join("results.cubin")).unwrap(),
            [9; 4]
        );
        for k in 1..4 {
            let stale = dir.path().join(format!("results.{k}.cubin"));
            assert!(
                !stale.exists(),
                "{} left from the run before",
                stale.display()
            );
        }
        assert!(other.exists());
    }

    #[test]
    fn with_json_on_stdout_everything_else_goes_to_stderr() {
        assert!(json_stdout(&Arguments::from_iter([
            "t", "--format", "json"
        ])));
        assert!(!json_stdout(&Arguments::from_iter(["t"])));
        assert!(!json_stdout(&Arguments::from_iter([
            "t", "--format", "terse"
        ])));
    }

    #[test]
    fn a_panicking_case_is_recorded_as_failed_and_the_next_case_still_runs() {
        let recorder = Arc::new(Recorder::new(None));
        let trials = vec![
            trial(
                &recorder,
                "s".into(),
                "boom".into(),
                || -> (Status, String) { panic!("kernel exploded") },
            ),
            trial(&recorder, "s".into(), "after".into(), || {
                (Status::Passed, "fine".to_string())
            }),
        ];
        let log = std::env::temp_dir().join(format!("accprobe-panic-{}.log", std::process::id()));
        let args = Arguments::from_iter([
            "t",
            "--test-threads",
            "1",
            "--logfile",
            log.to_str().unwrap(),
        ]);
        let conclusion = libtest_mimic::run(&args, trials);
        let _ = std::fs::remove_file(log);
        assert_eq!((conclusion.num_failed, conclusion.num_passed), (1, 1));
        let cases = recorder.cases();
        assert_eq!(cases[0].status, Status::Failed);
        assert_eq!(cases[0].message, "panicked: kernel exploded");
        assert_eq!(cases[1].status, Status::Passed);
        let xml = junit::junit(
            &[SuiteInfo {
                name: "s".into(),
                ..Default::default()
            }],
            &cases,
        );
        assert!(xml.contains("panicked: kernel exploded"), "{xml}");
        assert!(xml.contains("type=\"panic\""), "{xml}");
    }
}
