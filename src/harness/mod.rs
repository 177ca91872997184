//! The generated test suite (`tests/probe.rs`): turns profiles into libtest-mimic trials,
//! measures lazily on the GPU, and writes the table, the results file and the JUnit file.
//!
//! Contract:
//! - `--list`, name filters, `--exact`, `--skip`, `--ignored`, `--include-ignored` and
//!   `--test-threads` are libtest's, through libtest-mimic. `--list` measures nothing.
//! - Each variant is measured at most once per process, and only when a case that runs
//!   needs it. The GPU is used by one case at a time.
//! - Without a GPU every GPU case is ignored with the reason; replay cases still run.
//! - A profile that fails to load becomes a failing case naming file, line and column; the
//!   other profiles' cases still run.
//! - The JUnit file is written atomically after the run, also when a case panicked.

mod compile_only;
mod env;
mod recorder;

pub use env::{Paths, RunOptions};

use crate::catalog;
use crate::error::{Error, GpuError, GpuErrorKind};
use crate::expectations::profile::Profile;
use crate::measure::device;
use crate::measure::session::GpuSession;
use crate::measure::target::{CudaTarget, Target};
use crate::model::results::RunResults;
use crate::model::variant::Variant;
use crate::report::junit::{self, CaseRecord, Status, SuiteInfo};
use crate::report::{self, write_atomic};
use crate::verdict::{self, cases::cases};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use recorder::{install_interrupt_handler, Recorder, CURRENT};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

/// A trial whose body returns (status, message); panics become failures, and every end is
/// recorded for JUnit.
fn trial(
    recorder: &Arc<Recorder>,
    suite: String,
    name: String,
    body: impl FnOnce() -> (Status, String) + Send + 'static,
) -> Trial {
    let recorder = recorder.clone();
    Trial::ignorable_test(name.clone(), move || {
        let start = Instant::now();
        let (status, message) = catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|p| {
            let text = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "non-string panic payload".into());
            (Status::Failed, format!("panicked: {text}"))
        });
        recorder.push(CaseRecord {
            suite,
            name,
            status: status.clone(),
            message: message.clone(),
            duration: start.elapsed(),
        });
        match status {
            Status::Passed => Ok(Completion::Completed),
            Status::Ignored => Ok(Completion::ignored_with(message)),
            Status::Failed => Err(Failed::from(message)),
        }
    })
}

/// Replay cases: a profile's cases evaluated on its recorded results.
fn replay_trials(recorder: &Arc<Recorder>, profile: &Profile, results: &RunResults) -> Vec<Trial> {
    let suite = replay_suite_name(profile);
    let results = Arc::new(results.clone());
    let profile = Arc::new(profile.clone());
    cases(&profile)
        .into_iter()
        .map(|case| {
            let (p, r) = (profile.clone(), results.clone());
            trial(
                recorder,
                suite.clone(),
                format!("replay::{}::{}", profile.name, case.name),
                move || junit::status(verdict::evaluate(&case, &p, &r)),
            )
        })
        .collect()
}

fn replay_suite_name(profile: &Profile) -> String {
    format!("replay {}", profile.name)
}

fn gpu_trials(recorder: &Arc<Recorder>, session: &Arc<GpuSession>) -> Vec<Trial> {
    let suite = gpu_suite_name(session);
    cases(&session.profile)
        .into_iter()
        .map(|case| {
            let s = session.clone();
            trial(
                recorder,
                suite.clone(),
                session.case_name(&case.name),
                move || match s.results_for(&case.needs) {
                    Err(e) if e.kind() == GpuErrorKind::Unavailable => {
                        (Status::Ignored, e.to_string())
                    }
                    Err(e) => (Status::Failed, e.to_string()),
                    Ok(results) => junit::status(verdict::evaluate(&case, &s.profile, &results)),
                },
            )
        })
        .collect()
}

fn gpu_suite_name(s: &GpuSession) -> String {
    format!("{} / profile {}", s.device_label(), s.profile.name)
}

/// When the process started, for the timing lines on stderr.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Prints how long the process has run, at a named point (stderr; not with --list).
fn mark(args: &Arguments, what: &str) {
    if !args.list {
        if let Some(t) = STARTED.get() {
            eprintln!("accprobe: {what} at {:.3} s", t.elapsed().as_secs_f64());
        }
    }
}

/// The entry point of `tests/probe.rs`.
pub fn main() -> ExitCode {
    if let Some(code) = crate::compile::toolchain::worker_main() {
        return code;
    }
    if let Err(e) = crate::compile::toolchain::select_for_process() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let _ = STARTED.set(Instant::now());
    let args = Arguments::from_args();
    device::prepare_process_environment();
    install_interrupt_handler();
    let options = match RunOptions::from_env() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let paths = Paths::from_env();
    let start = Instant::now();
    let targets: Result<Vec<Arc<dyn Target>>, GpuError> = device::detect_all().map(|devices| {
        devices
            .into_iter()
            .map(|d| Arc::new(CudaTarget::new(d, paths.cache.clone())) as Arc<dyn Target>)
            .collect()
    });
    if let Err(e) = &targets {
        if e.kind() == GpuErrorKind::Config {
            eprintln!("error: {e}");
            return ExitCode::from(2);
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
    let code = run(&args, &paths, targets, &options);
    mark(&args, "devices released");
    code
}

/// The JUnit suite of a finished session; prints its table and writes its results, ptxas
/// log and CUBIN (with `-gpuN` in the file names when the run has several devices).
fn finish_session(s: &GpuSession, paths: &Paths, several: bool) -> SuiteInfo {
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
    if let Some(r) = s.measured_results() {
        info.properties.extend(
            r.environment
                .as_ref()
                .map(|e| e.properties())
                .unwrap_or_default(),
        );
        let table = report::table(&r, &s.profile.probe.chains, &s.profile.probe.accumulators);
        println!("\n{}: {}\n{table}", s.device_label(), s.selection_note);
        info.system_out = format!("{}\n{table}", s.selection_note);
        match write_atomic(&results_path, &r.to_json()) {
            Ok(()) => println!("results: {}", results_path.display()),
            Err(e) => eprintln!("{}", Error::io(&results_path, "write results", e)),
        }
    }
    if let Some(c) = s.compiled() {
        let log_path = results_path.with_extension("ptxas.log");
        if let Err(e) = write_atomic(&log_path, &c.log) {
            eprintln!("{}", Error::io(&log_path, "write the ptxas log", e));
        }
        let cubin_path = results_path.with_extension("cubin");
        if let Err(e) = std::fs::write(&cubin_path, &c.cubin) {
            eprintln!("{}", Error::io(&cubin_path, "write the CUBIN", e));
        }
    }
    info
}

/// Runs the suite with `args` (libtest's flags) on `device` (or the reason there is none),
/// with what `options` override.
pub fn run(
    args: &Arguments,
    paths: &Paths,
    targets: Result<Vec<Arc<dyn Target>>, GpuError>,
    options: &RunOptions,
) -> ExitCode {
    let forced = options.profile.as_deref();
    let recorder = Arc::new(Recorder::new((!args.list).then(|| paths.junit.clone())));
    *CURRENT.lock().unwrap_or_else(|e| e.into_inner()) = Some(recorder.clone());
    let mut trials = Vec::new();
    let mut suites = Vec::new();

    let (profiles, load_errors) = catalog::load_dir(&paths.expectations);
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
        trials.push(trial(&recorder, "expectations".into(), name, move || {
            (Status::Failed, message)
        }));
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
    let compile_wanted = compile_trials.iter().any(|t| !args.is_filtered_out(t));
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
                trials.push(trial(
                    &recorder,
                    "profile selection".into(),
                    name,
                    move || (Status::Failed, message),
                ));
            }
        }
    }
    for s in &sessions {
        let gpu = gpu_trials(&recorder, s);
        let mut planned: Vec<Variant> = cases(&s.profile)
            .iter()
            .zip(&gpu)
            .filter(|(_, t)| !args.is_filtered_out(t))
            .flat_map(|(c, _)| c.needs.iter().copied())
            .collect();
        planned.sort();
        planned.dedup();
        *s.planned.lock().unwrap_or_else(|e| e.into_inner()) = planned;
        trials.extend(gpu);
        if !args.list {
            eprintln!("accprobe: {}: {}", s.device_label(), s.selection_note);
            if let Err(reason) = s.target() {
                eprintln!("accprobe: GPU cases are ignored: {reason}");
            }
        }
    }
    if args.list {
        let _ = libtest_mimic::run(args, trials);
        return ExitCode::SUCCESS;
    }

    let mut known = suites.clone();
    for s in &sessions {
        known.push(SuiteInfo {
            name: gpu_suite_name(s),
            ..Default::default()
        });
    }
    recorder.set_suites(known);
    // One thread per device measures what its cases will need, so that devices work in
    // parallel whatever order libtest runs the cases in; the cases wait on their device's
    // lock and find their variants measured.
    let measuring: Vec<_> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| {
            let s = s.clone();
            std::thread::spawn(move || {
                let planned = s.planned.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if !planned.is_empty() {
                    let _ = s.results_for(&planned);
                }
            })
        })
        .collect();
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
    let conclusion = libtest_mimic::run(args, trials);
    for t in compiling_threads {
        let _ = t.join();
    }
    for m in measuring {
        let _ = m.join();
    }
    mark(args, "cases finished");

    for s in &compiling {
        let info = compile_only::suite_info(s);
        if let Some(slot) = suites.iter_mut().find(|x| x.name == info.name) {
            *slot = info;
        }
    }
    for s in &sessions {
        suites.push(finish_session(s, paths, several));
    }
    recorder.set_suites(suites);
    let written = recorder.write();
    mark(args, "results and JUnit written");
    match written {
        Ok(()) => println!("junit: {}", paths.junit.display()),
        Err(e) => {
            eprintln!("{}", Error::io(&paths.junit, "write the JUnit report", e));
            return ExitCode::FAILURE;
        }
    }
    conclusion.exit_code()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_case_is_recorded_as_failed_and_the_next_case_still_runs() {
        let recorder = Arc::new(Recorder::new(None));
        let trials = vec![
            trial(&recorder, "s".into(), "boom".into(), || {
                panic!("kernel exploded")
            }),
            trial(&recorder, "s".into(), "after".into(), || {
                (Status::Passed, "fine".into())
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
        let cases = recorder.cases.lock().unwrap();
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
    }
}
