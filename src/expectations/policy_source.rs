//! Where a gated policy's picks come from: a policy file (`policy_gate: file:`, evaluated
//! here by [`Policy::choose`]) or a program (`policy_gate: command:`, the compiler's own
//! heuristic, asked through the protocol of docs/policies.md by the `policy_gate`
//! service). Either answers a batch of [`PolicyContext`]s with one K each; the answers are
//! [`Picks`], plain data the verdict stage judges. Nothing here starts a process.

use crate::expectations::policy::{Accumulation, Policy};
use crate::expectations::policy_error::PolicyError;
use crate::model::place::Place;
use crate::text::Shown;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The protocol a policy program speaks (docs/policies.md): each request line carries it.
pub(crate) const PROTOCOL: &str = "accprobe-policy/1";

/// How long a policy program may take when its profile sets no `time_limit_s`.
pub const DEFAULT_TIME_LIMIT: Duration = Duration::from_secs(10);

/// The longest `time_limit_s` a profile may set: a gate that waits longer is not a CI job.
pub(crate) const MAX_TIME_LIMIT_S: u64 = 600;

/// One accumulation the gate asks the policy about, by name (`chain13`, `chain13_sinkB`,
/// `chain13_w16`, `dot_w16`: [`Place::name`]): where it was measured and what the policy
/// is told about it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyContext {
    pub name: String,
    pub place: Place,
    pub accumulation: Accumulation,
}

/// The program of a `policy_gate: command:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Program {
    /// A name with a `/`, resolved under the profile's folder (and confined to it).
    InFolder(PathBuf),
    /// A bare name, looked up on `PATH` when the program starts.
    OnPath(String),
}

/// A policy program and how it is run.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCommand {
    /// The name the gate's cases carry (`policy::<name>::...`).
    pub name: String,
    pub program: Program,
    /// Passed as written.
    pub args: Vec<String>,
    /// The profile's folder: the program's working directory.
    pub dir: PathBuf,
    /// The program is killed when it has not answered within this.
    pub time_limit: Duration,
    /// The accumulation the probe kernel stands for (its `chain` is set per context).
    pub probe_context: Accumulation,
}

impl PolicyCommand {
    /// The command as a reader sees it: `python3 study.py`.
    pub(crate) fn display(&self) -> String {
        let program = match &self.program {
            Program::InFolder(p) => p.shown(),
            Program::OnPath(n) => n.shown(),
        };
        std::iter::once(program)
            .chain(self.args.iter().map(|a| a.shown()))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A gated policy: its rule as data, or a program that answers for it.
#[derive(Debug, Clone, PartialEq)]
pub enum PolicySource {
    File(Policy),
    Command(PolicyCommand),
}

impl PolicySource {
    pub fn name(&self) -> &str {
        match self {
            PolicySource::File(p) => &p.name,
            PolicySource::Command(c) => &c.name,
        }
    }

    /// The accumulation the probe kernel stands for.
    pub fn probe_context(&self) -> Accumulation {
        match self {
            PolicySource::File(p) => p.probe_context,
            PolicySource::Command(c) => c.probe_context,
        }
    }

    /// The picks of a policy file for `contexts`, or `None` for a program, which only the
    /// `policy_gate` service runs.
    pub(crate) fn file_picks(&self, contexts: &[PolicyContext]) -> Option<Picks> {
        match self {
            PolicySource::File(p) => Some(Picks {
                policy: p.name.clone(),
                answers: Ok(contexts
                    .iter()
                    .map(|c| (c.name.clone(), p.choose(&c.accumulation)))
                    .collect()),
            }),
            PolicySource::Command(_) => None,
        }
    }
}

/// A policy's answers for one batch of contexts: a K per context name, or why the policy
/// gave none (a program that failed, hung or answered wrongly), which every policy case
/// of the batch fails with.
#[derive(Debug, Clone, PartialEq)]
pub struct Picks {
    pub(crate) policy: String,
    pub answers: Result<BTreeMap<String, u32>, PolicyError>,
}

impl Picks {
    /// The K picked for `context`, or why there is none.
    pub fn of(&self, context: &str) -> Result<u32, PolicyError> {
        match &self.answers {
            Ok(k) => k
                .get(context)
                .copied()
                .ok_or_else(|| PolicyError::NotAsked {
                    policy: self.policy.clone(),
                    context: context.to_string(),
                }),
            Err(e) => Err(e.clone()),
        }
    }
}
