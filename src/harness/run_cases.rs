//! The run-level cases of each device, made once its cases have run, from what they
//! recorded: `gpu::measure`, the compile and measurement the cases share (its time is
//! that work, so that the case times add up to the suite's while each case's own time
//! is its own work), and `gpu::busy`, when the GPU was not ours while it was measured:
//! one failing case that names the cause (PID and process, throttle reason, or the
//! process holding the device), beside the cases it kept from being judged, skipped
//! "not judged: see gpu::busy". A busy GPU makes the run red without one failure per
//! case, and it is never read as a regression. They are records, not libtest trials,
//! like `run::interrupted`: a name filter never leaves a busy run without its cause.

use super::gpu;
use super::recorder::{Record, Skip};
use crate::measure::session::GpuSession;
use crate::model::results::Contention;
use crate::report::junit::{CaseRecord, Status};
use crate::text::Shown;
use crate::verdict::cases::on_device;
use std::collections::BTreeSet;

/// The run-level case that says the GPU was not ours.
pub(crate) const BUSY_CASE: &str = "gpu::busy";
/// The run-level case that holds the time of the shared compile and measurement.
pub(crate) const MEASURE_CASE: &str = "gpu::measure";
/// The JUnit `type` of a failing `gpu::busy`.
pub(crate) const BUSY_KIND: &str = "gpu-busy";

/// Whether `name` is one of the run-level cases (on any device), which judge no case.
pub(crate) fn is_run_level(name: &str) -> bool {
    [BUSY_CASE, MEASURE_CASE]
        .iter()
        .any(|c| name == *c || name.ends_with(&format!("::{c}")))
}

/// The run-level cases of `session`, from the run's `records` so far.
pub(crate) fn records(session: &GpuSession, records: &[Record]) -> Vec<Record> {
    let suite = gpu::suite_name(session);
    let name = |case: &str| on_device(case, session.named_ordinal());
    let mut out = Vec::new();
    if let Some((started, duration)) = session.shared_work() {
        out.push(measure_case(
            suite.clone(),
            name(MEASURE_CASE),
            started,
            duration,
        ));
    }
    let busy: Vec<&Record> = records
        .iter()
        .filter(|r| r.case.suite == suite && matches!(r.skip, Some(Skip::Busy(_))))
        .collect();
    if let Some(first) = busy.first() {
        out.push(Record {
            case: CaseRecord {
                suite,
                name: name(BUSY_CASE),
                status: Status::Failed,
                message: busy_message(session, &busy),
                failure: None,
                duration: std::time::Duration::ZERO,
                kind: Some(BUSY_KIND.into()),
                started: first.case.started,
            },
            skip: None,
        });
    }
    out
}

/// `gpu::measure` (named `name` in `suite`): the shared compile and measurement, which
/// started at `started` and took `duration`.
fn measure_case(
    suite: String,
    name: String,
    started: std::time::SystemTime,
    duration: std::time::Duration,
) -> Record {
    Record {
        case: CaseRecord {
            suite,
            name,
            status: Status::Passed,
            message: format!(
                "compiled and measured what this suite's cases need in {:.3} s, once for \
                 all of them; each case's time is its own work, without its wait for this",
                duration.as_secs_f64()
            ),
            failure: None,
            duration,
            kind: None,
            started,
        },
        skip: None,
    }
}

/// What `gpu::busy` says: the first cause, how many cases it kept from being judged
/// (`busy`), every cause, and what the contention checks saw.
fn busy_message(session: &GpuSession, busy: &[&Record]) -> String {
    let contention = session.contention();
    let causes = busy_causes(contention.as_ref(), busy);
    let lead = causes.iter().next().cloned().unwrap_or_default();
    let others = match causes.len() {
        0 | 1 => String::new(),
        n => format!(" (and {} other causes)", n - 1),
    };
    let mut message = format!(
        "{lead}{others}; {} cases not judged, skipped\n\
         a busy GPU is not a regression: run again on an idle GPU\n",
        busy.len()
    );
    for cause in &causes {
        message.push_str(&format!("cause: {cause}\n"));
    }
    if let Some(c) = contention {
        message.push_str(&contention_line(&c));
    }
    message.trim_end().to_string()
}

/// The causes as the contention checks recorded them, one per disturbance (a case adds
/// how many of its variants it hit); else as the `busy` cases got them (the lock).
fn busy_causes(contention: Option<&Contention>, busy: &[&Record]) -> BTreeSet<String> {
    let causes: BTreeSet<String> = contention
        .iter()
        .flat_map(|c| c.contaminated.values().map(|cause| cause.shown()))
        .collect();
    if !causes.is_empty() {
        return causes;
    }
    busy.iter()
        .filter_map(|r| match &r.skip {
            Some(Skip::Busy(cause)) => Some(cause.clone()),
            _ => None,
        })
        .collect()
}

/// What the contention checks made and saw, on one line.
fn contention_line(c: &Contention) -> String {
    format!(
        "contention checks: {} made, {} measurements retried; other processes seen: \
         {}; throttle reasons seen: {}\n",
        c.checks,
        c.retries,
        match c.foreign_pids.is_empty() {
            true => "none".to_string(),
            false => c
                .foreign_pids
                .iter()
                .map(|p| format!("PID {p}"))
                .collect::<Vec<_>>()
                .join(", "),
        },
        match c.throttle_reasons.is_empty() {
            true => "none".to_string(),
            false => c.throttle_reasons.join(", ").shown(),
        }
    )
}
