//! The policy gate's service: asks a profile's policy for its picks, once, before any
//! verdict (docs/policies.md). A policy file is evaluated in process; a policy program is
//! started once with every context on its stdin, one JSON object per line, and answers
//! one K per line (`answer`: the grammar). Whatever goes wrong with it (it cannot start,
//! hangs past its time limit, crashes, exits non-zero, or answers outside the grammar)
//! becomes the error every policy case of the run fails with, naming the line, column and
//! context, with the start of its stderr, quoted. Used by the harness and
//! `cargo xtask`; the verdicts get the answers as data ([`Picks`]).

mod answer;

use crate::expectations::policy_error::{PolicyError, ProgramFailed, ProgramFault};
use crate::expectations::policy_source::{
    Picks, PolicyCommand, PolicyContext, PolicySource, Program, PROTOCOL,
};
use crate::expectations::profile::Profile;
use crate::model::place::Place;
use crate::model::results::RunResults;
use crate::verdict::cases::{policy_contexts, Case, Check};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The most of a program's stdout read: far more than a K per line needs.
const STDOUT_LIMIT: usize = 1 << 20;
/// The most of a program's stderr kept for the message.
pub const STDERR_LIMIT: usize = 4096;

/// The picks of `profile`'s policy for its contexts ([`policy_contexts`]) as `results`
/// measured them (without results, the policy's `probe_context` stands for each), or
/// `None` without a `policy_gate:`. A program is started once per call.
pub fn ask(profile: &Profile, results: Option<&RunResults>) -> Option<Picks> {
    let gate = profile.policy_gate.as_ref()?;
    let contexts = policy_contexts(profile, results);
    Some(ask_source(&gate.source, &contexts, Measured::of(profile)))
}

/// The accumulator counts a profile measures, by kind of place: a program's answer for a
/// context must be one of those its place is measured at.
#[derive(Debug, Clone, Copy)]
pub struct Measured<'a> {
    /// The probe's (`probe.accumulators`).
    pub probe: &'a [u32],
    /// The real accumulations' (`reductions.accumulators`).
    pub reductions: &'a [u32],
}

impl<'a> Measured<'a> {
    pub fn of(profile: &'a Profile) -> Measured<'a> {
        Measured {
            probe: &profile.probe.accumulators,
            reductions: &profile.probe.reduction_accumulators,
        }
    }

    /// The counts a pick at `place` must be among, and the profile key naming them.
    fn at(&self, place: &Place) -> (&'static str, &'a [u32]) {
        if place.workload.is_probe() {
            ("probe.accumulators", self.probe)
        } else {
            ("reductions.accumulators", self.reductions)
        }
    }
}

/// The picks of `source` for `contexts`; a program's answers must be among `measured`.
pub fn ask_source(source: &PolicySource, contexts: &[PolicyContext], measured: Measured) -> Picks {
    match source {
        PolicySource::File(_) => source
            .file_picks(contexts)
            .expect("a policy file answers in process"),
        PolicySource::Command(c) => Picks {
            policy: c.name.clone(),
            answers: ask_program(c, contexts, measured),
        },
    }
}

/// A profile's picks, asked at most once for the policy cases that need them.
#[derive(Debug, Default)]
pub(crate) struct Asked(OnceLock<Option<Picks>>);

impl Asked {
    /// The picks `case` is judged with: asked on the first policy case, with the run's
    /// `results`; `None` for other cases.
    pub(crate) fn for_case(
        &self,
        case: &Case,
        profile: &Profile,
        results: &RunResults,
    ) -> Option<&Picks> {
        match case.check {
            Check::Policy { .. } | Check::PolicyPick { .. } => {
                self.0.get_or_init(|| ask(profile, Some(results))).as_ref()
            }
            _ => None,
        }
    }
}

/// One request line: the protocol, the context's name and every field of its accumulation.
pub fn request_line(c: &PolicyContext) -> String {
    let a = &c.accumulation;
    serde_json::json!({
        "protocol": PROTOCOL,
        "context": c.name,
        "chain": a.chain,
        "register_headroom": a.register_headroom,
        "sink_isolated": a.sink_isolated,
        "surrounding_ilp": a.surrounding_ilp,
        "occupancy_safe": a.occupancy_safe,
        "side_chains": a.side_chains,
        "warps_per_sm": a.warps_per_sm,
        "register_limit": a.register_limit,
        "kernel": a.kernel.name(),
        "accumulations": a.accumulations,
        "loads": a.loads,
    })
    .to_string()
}

fn ask_program(
    c: &PolicyCommand,
    contexts: &[PolicyContext],
    measured: Measured,
) -> Result<BTreeMap<String, u32>, PolicyError> {
    let mut input = String::new();
    for ctx in contexts {
        input.push_str(&request_line(ctx));
        input.push('\n');
    }
    // A program in the profile's folder is named from the working directory (the folder
    // may be given relatively, `--expectations exp`); the child runs in that folder, so the
    // path it starts is made absolute first, or it would be resolved a second time there.
    let in_folder;
    let program = match &c.program {
        Program::InFolder(p) => {
            in_folder = std::path::absolute(p).unwrap_or_else(|_| p.clone());
            in_folder.as_path()
        }
        Program::OnPath(n) => std::path::Path::new(n),
    };
    let ran = crate::child::Job::new(program, c.time_limit)
        .args(&c.args)
        .dir(&c.dir)
        .input(input.into_bytes())
        .stdout_limit(STDOUT_LIMIT)
        .stderr_limit(STDERR_LIMIT)
        .run();
    let failed = |fault: ProgramFault, stderr: Option<&crate::child::Bounded>| ProgramFailed {
        program: c.name.clone(),
        command: c.display(),
        stderr: stderr.map_or_else(String::new, |e| {
            String::from_utf8_lossy(&e.bytes).into_owned()
        }),
        stderr_cut_at: stderr.filter(|e| e.cut).map(|_| STDERR_LIMIT),
        fault,
    };
    let ran = ran.map_err(|e| failed(ProgramFault::Run(Arc::new(e)), None))?;
    let fail = |fault: ProgramFault| failed(fault, Some(&ran.stderr));
    let status = match ran.status {
        None => {
            return Err(fail(ProgramFault::TimedOut {
                limit: c.time_limit,
            })
            .into())
        }
        Some(s) => s,
    };
    if !status.success() {
        let how = crate::child::ended_how(status);
        return Err(fail(ProgramFault::Ended { status, how }).into());
    }
    if ran.stdout.cut {
        return Err(fail(ProgramFault::TooMuchOutput {
            limit: STDOUT_LIMIT,
            lines: contexts.len(),
        })
        .into());
    }
    answer::answers(contexts, &ran.stdout.bytes, measured)
        .map_err(|e| fail(ProgramFault::BadAnswer(e)).into())
}
