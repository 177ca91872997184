//! The report's "does the probe predict real code?" table: per context a profile measures
//! its real accumulations in, the probe's best K beside each kernel's best K, and what the
//! kernel keeps of its best at the probe's K. Where it keeps less than (1 - tolerance) (the
//! policy gate's, else 2%), a policy tuned on the probe alone would lose on that kernel:
//! they disagree.

use super::Input;
use accprobe::model::context::Context;
use accprobe::model::place::Place;
use accprobe::model::results::RunResults;
use accprobe::model::variant::{Sink, Workload, REDUCTION_ITEMS};
use accprobe::report::markdown_grid;
use accprobe::text::markdown;
use accprobe::verdict::{at_place, best_at, progressed, standing, Standing, Unjudged};

/// The tolerance a profile without a policy gate is read with: the study's.
const DEFAULT_TOLERANCE: f64 = 0.02;

/// One kernel in one context, beside the probe there.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Row {
    pub(super) context: Context,
    /// The probe's chain compared and its best K there; `None` when the probe was not
    /// measured in this context.
    pub(super) probe: Option<(u32, u32)>,
    pub(super) kernel: Workload,
    /// The kernel at the probe's K: where it stands among its own K; `Err` when the kernel
    /// or the probe's K was not measured.
    pub(super) kernel_at_probe_k: Result<Standing, Unjudged>,
    /// The kernel's best K, when it was measured.
    pub(super) kernel_best: Option<u32>,
}

impl Row {
    /// Whether the probe's K loses more than `tolerance` on the kernel; `None` when one
    /// of the two was not measured.
    pub(super) fn disagrees(&self, tolerance: f64) -> Option<bool> {
        self.kernel_at_probe_k
            .as_ref()
            .ok()
            .map(|s| s.loss() > tolerance)
    }
}

/// The probe chain compared with the kernels in `context`: of those `results` measured
/// there (sink A), the one nearest the elements a kernel handles a thread (the shorter on
/// a tie); `None` when the probe was not measured there.
fn probe_chain(results: &RunResults, context: Context) -> Option<u32> {
    results
        .variants
        .iter()
        .filter(|r| r.workload.is_probe() && r.sink == Sink::A && r.context == context)
        .map(|r| r.chain)
        .min_by_key(|&n| (n.abs_diff(REDUCTION_ITEMS), n))
}

/// The best K among the variants at `place`; `None` when none was measured there or
/// none made progress (then no K is the best).
fn best_k(results: &RunResults, place: &Place) -> Option<u32> {
    best_at(results, place)
        .filter(|r| progressed(r))
        .map(|r| r.accumulators)
}

/// The table's rows for `input`: each kernel its profile measures in each of its
/// reductions contexts, in the profile's order.
pub(super) fn rows(input: &Input) -> Vec<Row> {
    let p = &input.profile.probe;
    let r = &input.results;
    let mut rows = Vec::new();
    for &context in &p.reduction_contexts {
        let probe = probe_chain(r, context)
            .and_then(|n| Some((n, best_k(r, &Place::probe(n, Sink::A, context))?)));
        for &kernel in &p.reductions {
            let place = Place::kernel(kernel, context);
            let kernel_at_probe_k = match probe {
                Some((_, k)) => standing(k, &at_place(r, &place)),
                None => Err(Unjudged::NoResults),
            };
            rows.push(Row {
                context,
                probe,
                kernel,
                kernel_at_probe_k,
                kernel_best: best_k(r, &place),
            });
        }
    }
    rows
}

/// The section for `input`: nothing when its profile measures no real accumulation.
pub(super) fn section(input: &Input) -> String {
    let rows = rows(input);
    if rows.is_empty() {
        return String::new();
    }
    let tolerance = input
        .profile
        .policy_gate
        .as_ref()
        .map_or(DEFAULT_TOLERANCE, |g| g.tolerance);
    let header: Vec<String> = [
        "context",
        "probe's best K",
        "kernel",
        "kernel's best K",
        "kernel at the probe's K",
        "",
    ]
    .map(String::from)
    .to_vec();
    let mut disagree = 0;
    let mut judged = 0;
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let verdict = match row.disagrees(tolerance) {
                Some(true) => {
                    judged += 1;
                    disagree += 1;
                    "**disagree**"
                }
                Some(false) => {
                    judged += 1;
                    "agree"
                }
                None if matches!(row.kernel_at_probe_k, Err(Unjudged::NoProgress)) => "no progress",
                None => "not measured",
            };
            vec![
                markdown(&row.context.to_string()),
                row.probe
                    .map_or("not measured".into(), |(n, k)| format!("acc{k} (N={n})")),
                markdown(row.kernel.name()),
                match (row.kernel_best, &row.kernel_at_probe_k) {
                    (Some(k), _) => format!("acc{k}"),
                    (None, Err(Unjudged::NoProgress)) => "no progress".into(),
                    (None, _) => "not measured".into(),
                },
                match &row.kernel_at_probe_k {
                    Ok(s) => format!("{:.2}% of its best", (1.0 - s.loss()) * 100.0),
                    Err(Unjudged::NoProgress) => "no progress".into(),
                    Err(_) => "not measured".into(),
                },
                verdict.into(),
            ]
        })
        .collect();
    format!(
        "### Does the probe predict real code? {}\n\nIn each context, the probe's best K at its chain nearest the {REDUCTION_ITEMS} elements a kernel handles a thread, beside each real accumulation's best K and the kernel's progress at the probe's K as a share of its own best. Below {:.2}% of its best (the policy gate's tolerance) they disagree: a policy tuned on the probe alone loses there. They disagree in {disagree} of {judged} measured pairs.\n\n{}\n",
        markdown(&input.label),
        (1.0 - tolerance) * 100.0,
        markdown_grid(&header, &cells)
    )
}
