//! The end of a run: the JUnit file written with every suite's final properties, the
//! closing summary after libtest's line (the cases by status, the ignored ones by reason,
//! whether the GPU was tested, and a `test result:` line counting a failing `gpu::busy`,
//! which libtest's own line cannot), and the exit code.

use super::env::{Paths, RunOptions, REQUIRE_GPU_ENV};
use super::outputs::Finishing;
use super::plan::Plan;
use super::recorder::{self, Recorder, Skip};
use super::{compile_only, gpu, progress_note, run_cases};
use crate::error::Error;
use crate::measure::session::GpuSession;
use crate::report::junit::Status;
use crate::text::Shown;
use libtest_mimic::{Arguments, Conclusion};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Finishes a run whose cases ended with `conclusion`: the sessions' tables and files,
/// the run-level cases of each device (`gpu::measure`, and `gpu::busy` when the GPU was
/// not ours), the JUnit file, the summary; the exit code (0; 101 when a case failed, the
/// GPU was busy or a GPU runner judged no GPU case; 2 when measuring met a configuration error, a named
/// `ACCPROBE_LOCK_DIR` that cannot be used; 1 when the JUnit file cannot be written).
pub(crate) fn close(
    args: &Arguments,
    options: &RunOptions,
    finishing: Finishing,
    plan: Plan,
    recorder: &Recorder,
    conclusion: &Conclusion,
) -> u8 {
    let Plan {
        mut suites,
        sessions,
        compiling,
        required,
        ..
    } = plan;
    for s in &compiling {
        let info = compile_only::suite_info(s);
        if let Some(slot) = suites.iter_mut().find(|x| x.name == info.name) {
            *slot = info;
        }
    }
    let mut measured = Vec::new();
    for s in &sessions {
        let (info, results) = finishing.session(s);
        suites.push(info);
        measured.extend(results.map(|r| (s.as_ref(), r)));
    }
    let busy_cases = push_run_level(&sessions, recorder);
    let busy = busy_cases > 0;
    recorder.set_suites(suites);
    let written = recorder.write();
    progress_note(
        args,
        match written {
            Ok(()) => "results and JUnit written",
            Err(_) => "results written, the JUnit file not",
        },
    );
    // Under nextest no process sees every case: the measuring one records the run unjudged.
    let whole = (!recorder.merges()).then(|| recorder.records());
    finishing.history(&measured, whole.as_deref());
    let (mut text, tested) = summary(&recorder.records(), &sessions, required.as_deref());
    if busy {
        // Last, where libtest's own line went (a JSON log stays JSON: then on stderr).
        text.push_str(&counting_busy(conclusion, busy_cases));
    }
    finishing.lines.say(&text);
    // A GPU runner that judged no GPU case (a filter that selects none, say) tested nothing.
    let untested = options.require_gpu && tested == 0 && !busy;
    if untested {
        crate::say_err!("error: {REQUIRE_GPU_ENV} is set but no GPU case was judged (does a filter select none?)");
    }
    let paths: &Paths = finishing.paths;
    match written {
        Ok(()) => crate::say_err!("junit: {}", paths.junit.shown()),
        Err(e) => {
            crate::say_err!("{}", Error::io(&paths.junit, "write the JUnit report", e));
            return 1;
        }
    }
    let records = recorder.records();
    if let Some(r) = records
        .iter()
        .find(|r| r.case.kind.as_deref() == Some(gpu::CONFIG_KIND))
    {
        crate::say_err!("error: {}", r.case.text());
        return 2;
    }
    if busy {
        crate::say_err!(
            "error: the GPU was not ours while it was measured: see {}",
            run_cases::BUSY_CASE
        );
    }
    if conclusion.has_failed() || untested || busy {
        101
    } else {
        0
    }
}

/// Records the run-level cases of every session ([`run_cases::records`]); how many
/// failing `gpu::busy` cases they hold.
fn push_run_level(sessions: &[Arc<GpuSession>], recorder: &Recorder) -> usize {
    let so_far = recorder.records();
    let mut busy_cases = 0;
    for s in sessions {
        for r in run_cases::records(s, &so_far) {
            busy_cases += usize::from(r.case.status == Status::Failed);
            recorder.push(r.case, r.skip);
        }
    }
    busy_cases
}

/// libtest's `test result:` line for a run whose cases ended with `conclusion`, counting
/// the `busy` failing `gpu::busy` cases, which are made after libtest's own line: the line
/// a log shows last counts what failed.
fn counting_busy(conclusion: &Conclusion, busy: usize) -> String {
    format!(
        "\ntest result: FAILED. {} passed; {} failed; {} ignored; {} measured; {} filtered out; \
         with {} (the GPU was not ours while it was measured)\n",
        conclusion.num_passed,
        conclusion.num_failed + busy as u64,
        conclusion.num_ignored,
        conclusion.num_measured,
        conclusion.num_filtered_out,
        run_cases::BUSY_CASE
    )
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
    for (what, n) in ignored_by_reason(records) {
        out.push_str(&format!("accprobe summary:   ignored: {what}: {n}\n"));
    }
    for hint in sessions.iter().filter_map(|s| s.onboarding.as_deref()) {
        out.push_str(&format!("accprobe summary: {hint}\n"));
    }
    let tested = gpu_cases_judged(records, sessions);
    out.push_str(&gpu_tested_line(records, sessions, tested, required));
    (out, tested)
}

/// The ignored cases counted by reason, in the order the summary gives them (no GPU, no
/// disassembler, no toolchain, ..., other); the pinned toolchains not installed one reason
/// for all, however many profiles name them.
fn ignored_by_reason(records: &[recorder::Record]) -> Vec<(String, usize)> {
    let mut by: BTreeMap<(u8, String), usize> = BTreeMap::new();
    let mut absent: BTreeSet<&str> = BTreeSet::new();
    let (mut absent_cases, mut standing) = (0, 0);
    for r in records.iter().filter(|r| r.case.status == Status::Ignored) {
        if let Some(Skip::ToolchainNotInstalled {
            toolchain, cases, ..
        }) = &r.skip
        {
            absent.insert(toolchain);
            absent_cases += cases;
            standing += 1;
            continue;
        }
        *by.entry(ignored_reason(r)).or_default() += 1;
    }
    if standing > 0 {
        let list: Vec<&str> = absent.into_iter().collect();
        let key = format!(
            "pinned NVRTC toolchains of the compile-only gate not installed: {} (one case per profile and toolchain, for \
             {absent_cases} compile-only cases; ci/toolchains.sh installs them)",
            list.join(", ")
        );
        by.insert((2, key), standing);
    }
    by.into_iter().map(|((_, what), n)| (what, n)).collect()
}

/// Why an ignored case was ignored, with its place in the summary's order.
fn ignored_reason(r: &recorder::Record) -> (u8, String) {
    match &r.skip {
        Some(Skip::NoGpu(why)) => (0, format!("no GPU ({why})")),
        Some(Skip::NoDisassembler(why)) => (1, format!("no SASS disassembler ({why})")),
        Some(Skip::NoToolchain(why)) => (2, format!("no NVRTC toolchain ({why})")),
        Some(Skip::KnownDeviation) => (2, "known deviation".to_string()),
        Some(Skip::NotJudged(why)) => (3, format!("the results cannot judge it ({why})")),
        Some(Skip::Interrupted(sig)) => (4, format!("not finished: interrupted by {sig}")),
        Some(Skip::Busy(_)) => (
            3,
            format!(
                "not judged, the GPU was not ours (see {})",
                run_cases::BUSY_CASE
            ),
        ),
        // ignored_by_reason counts these apart, as one reason for all.
        Some(Skip::ToolchainNotInstalled { reason, .. }) => (2, reason.clone()),
        None => (5, format!("other ({})", r.case.text())),
    }
}

/// How many cases of the suites of a usable GPU were judged on it: neither skipped for
/// want of a GPU, a disassembler or time, nor kept from a verdict by a busy GPU, and not
/// run-level.
fn gpu_cases_judged(records: &[recorder::Record], sessions: &[Arc<GpuSession>]) -> usize {
    let gpu_suites: Vec<String> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| gpu::suite_name(s))
        .collect();
    records
        .iter()
        .filter(|r| gpu_suites.contains(&r.case.suite))
        .filter(|r| {
            !matches!(
                r.skip,
                Some(
                    Skip::NoGpu(_) | Skip::NoDisassembler(_) | Skip::Interrupted(_) | Skip::Busy(_)
                )
            )
        })
        .filter(|r| !run_cases::is_run_level(&r.case.name))
        .count()
}

/// The summary's last line: whether the GPU was tested (`tested` cases judged on it),
/// and if not, why.
fn gpu_tested_line(
    records: &[recorder::Record],
    sessions: &[Arc<GpuSession>],
    tested: usize,
    required: Option<&str>,
) -> String {
    let devices: Vec<String> = sessions
        .iter()
        .filter(|s| s.target().is_ok())
        .map(|s| s.device_label())
        .collect();
    let reason = sessions
        .iter()
        .find_map(|s| s.target().err().map(|e| e.to_string()));
    let busy = records
        .iter()
        .any(|r| matches!(r.skip, Some(Skip::Busy(_))));
    match (tested, required, reason) {
        (0, None, _) if busy => format!(
            "accprobe summary: GPU NOT TESTED: the GPU was not ours while it was measured (see {})\n",
            run_cases::BUSY_CASE
        ),
        (_, Some(why), _) => {
            format!("accprobe summary: GPU NOT TESTED, and {REQUIRE_GPU_ENV} is set: {why}\n")
        }
        (0, None, Some(why)) => format!("accprobe summary: GPU NOT TESTED: {why}\n"),
        (0, None, None) => "accprobe summary: GPU NOT TESTED: no GPU case ran\n".to_string(),
        (n, None, _) => format!(
            "accprobe summary: GPU tested: {n} cases judged on {}\n",
            devices.join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::junit::CaseRecord;

    #[test]
    fn a_run_whose_gpu_was_busy_says_so_not_that_no_case_ran() {
        let record = recorder::Record {
            case: CaseRecord {
                suite: "gpu0".into(),
                name: "probe::chain7_acc2_effective2".into(),
                status: Status::Ignored,
                message: "not judged: see gpu::busy".into(),
                failure: None,
                duration: std::time::Duration::ZERO,
                kind: Some("gpu-busy".into()),
                started: std::time::SystemTime::now(),
            },
            skip: Some(Skip::Busy(
                "GPU busy: PID 4242 (python3) had a context".into(),
            )),
        };
        let (text, tested) = summary(&[record], &[], None);
        assert_eq!(tested, 0);
        assert!(
            text.contains("ignored: not judged, the GPU was not ours (see gpu::busy): 1\n")
                && text.ends_with(
                    "GPU NOT TESTED: the GPU was not ours while it was measured (see gpu::busy)\n"
                ),
            "{text}"
        );
    }
}
