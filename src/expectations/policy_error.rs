//! Why a gated policy gave no pick: it was not asked about the context, or its program
//! failed (could not be run, hung, crashed, exited non-zero, wrote too much) or answered
//! outside the grammar of docs/policies.md ("The answer"). Plain data, so the verdicts can
//! say it and a caller can tell one failure from another; the `policy_gate` service, which
//! runs the program, builds them.

use crate::expectations::policy::MAX_POLICY_ACCUMULATORS;
use crate::text::{excerpt, Shown};
use std::fmt;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

/// Why [`super::policy_source::Picks`] hold no K for a context.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy {policy} was not asked about context {context}")]
    NotAsked { policy: String, context: String },
    /// Boxed: it is large, and every `Result` of a pick carries it.
    #[error(transparent)]
    Program(Box<ProgramFailed>),
}

impl From<ProgramFailed> for PolicyError {
    fn from(e: ProgramFailed) -> Self {
        PolicyError::Program(Box::new(e))
    }
}

/// A policy program that gave no answer the gate can use: what went wrong first, then the
/// command, then the start of its stderr (so that a message cut short keeps the cause).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("policy program {} {fault} (command: {command}){}", .program.shown(), stderr_text(.stderr, *.stderr_cut_at))]
pub struct ProgramFailed {
    /// The policy's name.
    pub(crate) program: String,
    /// The command line, as shown to a user.
    pub(crate) command: String,
    /// The start of what it wrote on stderr (none when it never ran).
    pub(crate) stderr: String,
    /// How many bytes of stderr were kept, when it wrote more than that.
    pub(crate) stderr_cut_at: Option<usize>,
    #[source]
    pub fault: ProgramFault,
}

/// What went wrong with a policy program.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProgramFault {
    /// It could not be started or supervised: the runner's error (`child::RunError`).
    #[error("{0}")]
    Run(#[source] Arc<dyn std::error::Error + Send + Sync>),
    #[error("gave no answer within its time limit of {} s and was killed, with every process it started", .limit.as_secs())]
    TimedOut { limit: Duration },
    /// It ended unsuccessfully: its status, and how it ended in words (`child::ended_how`).
    #[error("{how}")]
    Ended { status: ExitStatus, how: String },
    #[error("wrote more than {limit} bytes on stdout: expected one K per line, {lines} lines")]
    TooMuchOutput { limit: usize, lines: usize },
    #[error("gave a bad answer: {0}")]
    BadAnswer(#[source] BadAnswer),
}

/// Two faults are the same when they are of one kind with the same data; a run error (an
/// `io::Error` inside, which has no equality) by what it says.
impl PartialEq for ProgramFault {
    fn eq(&self, other: &Self) -> bool {
        use ProgramFault::*;
        match (self, other) {
            (Run(a), Run(b)) => a.to_string() == b.to_string(),
            (TimedOut { limit: a }, TimedOut { limit: b }) => a == b,
            (Ended { status: a, .. }, Ended { status: b, .. }) => a == b,
            (TooMuchOutput { limit, lines }, TooMuchOutput { limit: l, lines: n }) => {
                (limit, lines) == (l, n)
            }
            (BadAnswer(a), BadAnswer(b)) => a == b,
            _ => false,
        }
    }
}

/// The program's stderr for a message, each of its lines quoted (`  | `) and shown
/// escaped, so that none reads as one of the gate's own: empty when it wrote none.
fn stderr_text(text: &str, cut_at: Option<usize>) -> String {
    let text = text.trim_end();
    if text.is_empty() {
        return String::new();
    }
    let quoted: String = text
        .lines()
        .map(|l| format!("\n  | {}", l.shown()))
        .collect();
    match cut_at {
        Some(limit) => format!("\nits stderr (the first {limit} bytes):{quoted}"),
        None => format!("\nits stderr:{quoted}"),
    }
}

/// An answer that breaks the grammar: where (1-based line and column, in characters; the
/// context that line answers, where it answers one) and what was wrong there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct BadAnswer {
    pub(crate) line: usize,
    pub(crate) column: usize,
    pub(crate) context: Option<String>,
    pub(crate) fault: AnswerFault,
}

impl fmt::Display for BadAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}", self.line, self.column)?;
        if let Some(c) = &self.context {
            write!(f, " (context {})", c.shown())?;
        }
        write!(f, ": {}", self.fault)
    }
}

/// What a K must be, for the messages.
fn k_is() -> String {
    format!("K, an accumulator count from 1 to {MAX_POLICY_ACCUMULATORS}")
}

/// How an answer breaks the grammar at its place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AnswerFault {
    /// Fewer lines than contexts asked.
    #[error("found the end of the answer: expected {}; {asked} contexts were asked, {answered} lines answered", k_is())]
    Ended { asked: usize, answered: usize },
    /// A sign before the digits.
    #[error("found {found}: expected {}, written without a sign", k_is())]
    Signed { found: Found },
    #[error("found {found}: expected {}", k_is())]
    NotK { found: Found },
    /// Digits that start with a zero (`word`, the digits).
    #[error("found {word:?}: expected {}, written without a leading zero", k_is())]
    LeadingZero { word: String },
    /// Something after the digits (`k`, as written) on the line.
    #[error("found {found} after K {}: expected the end of the line", excerpt(.k, 20))]
    AfterK { found: Found, k: String },
    /// Digits (`word`) outside 1 to the most accumulators.
    #[error("K {} is out of range: expected {}", excerpt(.word, 20), k_is())]
    OutOfRange { word: String },
    /// A K the profile does not measure.
    #[error("K {k} is not measured: expected one of {key} {measured:?}")]
    NotMeasured {
        k: u32,
        /// The profile key the counts come from (`probe.accumulators`,
        /// `reductions.accumulators`).
        key: &'static str,
        measured: Vec<u32>,
    },
    /// More lines than contexts asked.
    #[error("found {found}: expected the end of the answer, after one line for each of the {asked} contexts asked")]
    Extra { found: Found, asked: usize },
}

/// What an answer holds at a place, for a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    EmptyLine,
    EndOfLine,
    /// A carriage return: a CRLF line end, where lines end in LF alone.
    CarriageReturn,
    /// Any other character (U+FFFD for bytes that are not UTF-8).
    Char(char),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::EmptyLine => f.write_str("an empty line"),
            Found::EndOfLine => f.write_str("the end of the line"),
            Found::CarriageReturn => {
                f.write_str("a carriage return (a CRLF line end; lines end in LF alone)")
            }
            Found::Char(c) => write!(f, "\"{}\"", c.to_string().shown()),
        }
    }
}
