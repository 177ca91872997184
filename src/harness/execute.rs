//! Running the plan: one measuring thread per device, the nextest run's measurement
//! published, every toolchain compiling in its own worker process, and libtest running
//! the cases; a failure of libtest's output ends the run with the code that says it.

use super::plan::Plan;
use super::recorder::Recorder;
use super::shared::{DeviceRecord, Published, RunShare};
use super::stdout::{self, quiet_printer_failures};
use super::trial::Planned;
use crate::error::GpuError;
use crate::measure::session::GpuSession;
use crate::model::results::RunResults;
use crate::text::Shown;
use libtest_mimic::{Arguments, Conclusion, Trial};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread::JoinHandle;

/// How measuring one device's planned variants ended (`None`: nothing planned).
type Measuring = JoinHandle<Option<Result<RunResults, GpuError>>>;

/// The threads a run started beside libtest, joined once the cases finished.
pub(crate) struct Background {
    measuring: Vec<Measuring>,
    compiling: Vec<JoinHandle<()>>,
}

impl Background {
    pub(crate) fn join(self) {
        for t in self.compiling {
            let _ = t.join();
        }
        for m in self.measuring {
            let _ = m.join();
        }
    }
}

/// `--list`: libtest lists the trials; nothing is measured or written.
pub(crate) fn list(args: &Arguments, trials: Vec<Planned>) -> u8 {
    quiet_printer_failures();
    let trials: Vec<Trial> = trials.into_iter().map(|p| p.trial).collect();
    match catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(args, trials))) {
        Ok(_) => 0,
        Err(payload) => printer_failed(args, payload, None),
    }
}

/// Starts what runs beside the cases. One thread per device measures what its cases will
/// need, so that devices work in parallel whatever order libtest runs the cases in; the
/// cases wait on their device's lock and find their variants measured. Under nextest the
/// first process that needs the GPU measures every device's whole matrix before its case
/// runs, and publishes it for the run's other processes. Each toolchain compiles in its
/// own worker process, all at once, while the cases run.
pub(crate) fn start(plan: &Plan, share: Option<&RunShare>) -> Background {
    let sessions = &plan.sessions;
    let needs_gpu = sessions
        .iter()
        .any(|s| s.target().is_ok() && !s.planned().is_empty());
    let publishing = share.filter(|s| s.measures() && needs_gpu);
    if publishing.is_some() {
        for s in sessions {
            s.plan(s.profile.probe.variants());
        }
    }
    let mut measuring: Vec<Measuring> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| {
            let s = s.clone();
            std::thread::spawn(move || {
                let planned = s.planned();
                (!planned.is_empty()).then(|| s.results_for(&planned))
            })
        })
        .collect();
    if let Some(share) = publishing {
        let ended: Vec<_> = std::mem::take(&mut measuring)
            .into_iter()
            .map(|m| m.join().ok().flatten())
            .collect();
        publish(share, sessions, &ended);
    }
    if let Some(s) = share {
        // Nothing to publish (no GPU, only replay cases): the next process tries.
        s.release();
    }
    let compiling = plan
        .compiling
        .iter()
        .filter(|_| plan.compile_wanted)
        .flat_map(|s| s.toolchains().into_iter().map(move |tc| (s.clone(), tc)))
        .map(|(s, tc)| {
            std::thread::spawn(move || {
                let _ = s.run(&tc);
            })
        })
        .collect();
    Background {
        measuring,
        compiling,
    }
}

/// Publishes what each device measured (`ended`: how measuring its whole matrix ended)
/// for the nextest run's later processes.
fn publish(
    share: &RunShare,
    sessions: &[Arc<GpuSession>],
    ended: &[Option<Result<RunResults, GpuError>>],
) {
    let devices = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .zip(ended)
        .filter_map(|(s, whole)| device_record(s, whole.as_ref()))
        .collect();
    match share.publish(&Published { devices }) {
        Ok(()) => crate::say_err!(
            "accprobe: measured for this nextest run: {}",
            share.dir.shown()
        ),
        Err(e) => crate::say_err!(
            "accprobe: cannot publish the measurement under {}: {e}; the run's next process measures again",
            share.dir.shown()
        ),
    }
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

/// libtest runs the cases; `Err` is the exit code when its output failed.
pub(crate) fn run_cases(
    args: &Arguments,
    trials: Vec<Planned>,
    recorder: &Arc<Recorder>,
) -> Result<Conclusion, u8> {
    let trials: Vec<Trial> = trials.into_iter().map(|p| p.into_trial(args)).collect();
    quiet_printer_failures();
    // libtest-mimic panics when it cannot print (stdout closed: `probe | head -1`, or
    // full, or a --logfile that fails): the JUnit file then marks what did not finish,
    // as on a signal.
    catch_unwind(AssertUnwindSafe(|| libtest_mimic::run(args, trials)))
        .map_err(|payload| printer_failed(args, payload, Some(recorder)))
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
            crate::say_err!("error: {into} cannot be written: {e}");
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
            Ok(()) => crate::say_err!(
                "accprobe: the run stopped on {why}; the JUnit file marks the cases that did not finish"
            ),
            Err(e) => crate::say_err!("accprobe: the run stopped on {why}; cannot write the JUnit file: {e}"),
        }
    }
    code
}
