//! The one way the crate and `cargo xtask` run a child process (a disassembler and its
//! version query, a compile worker, a policy program, xtask's runs of itself): [`Job`].
//!
//! A job runs under a supervisor of its own (`supervisor`), a forked subreaper that starts
//! the program in a process group of its own, with signals as a new process has them, and
//! kills the program's whole tree once it ends, at the time limit, or when this process
//! ends (which closes the control pipe), so nothing of it outlives the run, however the run
//! ends. Its stdin is written and closed, its stdout and stderr read with a bound each,
//! all of it in one `poll` loop with a deadline, so that no pipe a process holds open can
//! keep the run waiting and no output can fill its memory.

mod supervisor;

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::{Duration, Instant};
use supervisor::{Ends, Exec, EXITED, KILLED, NOT_STARTED, REPORT};

/// What the program left: its end, and at most the bound of each stream.
#[derive(Debug)]
pub struct Ran {
    /// `None` when it was killed at the time limit.
    pub status: Option<ExitStatus>,
    pub(crate) stdout: Bounded,
    pub stderr: Bounded,
}

/// The first bytes of a stream, and whether it held more.
#[derive(Debug, Default)]
pub struct Bounded {
    pub bytes: Vec<u8>,
    pub(crate) cut: bool,
}

/// Why a run gave no [`Ran`].
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot be started: {0}")]
    Start(#[source] io::Error),
    #[error("cannot be supervised: {0}")]
    Supervise(#[source] io::Error),
    #[error("cannot be supervised: its supervisor ended without saying how the program ended")]
    Unreported,
    #[error("left its stdout or stderr open in a process outside its own tree, {} s after its end", GRACE.as_secs())]
    StillOpen,
}

/// How long a run waits, after the time limit or the end of the program's tree, for
/// the last bytes of its pipes and its supervisor's end.
const GRACE: Duration = Duration::from_secs(2);

/// A child process to run: the program, its arguments, folder, environment and stdin, its
/// time limit and how much of its stdout and stderr is kept.
#[derive(Debug, Clone)]
pub struct Job {
    program: PathBuf,
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    env: Vec<(OsString, Option<OsString>)>,
    input: Vec<u8>,
    limit: Duration,
    stdout_limit: usize,
    stderr_limit: usize,
}

/// How much of a job's stdout is kept unless it says otherwise.
pub(crate) const STDOUT_LIMIT: usize = 1 << 20;
/// How much of a job's stderr is kept unless it says otherwise.
pub(crate) const STDERR_LIMIT: usize = 64 << 10;

impl Job {
    /// `program` (a path, or a name looked up on `PATH`), killed with its whole tree once
    /// `limit` has passed; no arguments, this process's folder and environment, an empty
    /// stdin, `STDOUT_LIMIT` and `STDERR_LIMIT`.
    pub fn new(program: impl Into<PathBuf>, limit: Duration) -> Job {
        Job {
            program: program.into(),
            args: Vec::new(),
            dir: None,
            env: Vec::new(),
            input: Vec::new(),
            limit,
            stdout_limit: STDOUT_LIMIT,
            stderr_limit: STDERR_LIMIT,
        }
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Job {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub(crate) fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Job {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Runs it in `dir`.
    pub(crate) fn dir(mut self, dir: impl Into<PathBuf>) -> Job {
        self.dir = Some(dir.into());
        self
    }

    /// Sets `name` to `value` in its environment.
    pub fn env(mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Job {
        let value = Some(value.as_ref().to_os_string());
        self.env.push((name.as_ref().to_os_string(), value));
        self
    }

    /// Leaves `name` out of its environment.
    pub(crate) fn env_remove(mut self, name: impl AsRef<OsStr>) -> Job {
        self.env.push((name.as_ref().to_os_string(), None));
        self
    }

    /// Writes `input` on its stdin, then closes it.
    pub(crate) fn input(mut self, input: Vec<u8>) -> Job {
        self.input = input;
        self
    }

    /// Keeps at most `bytes` of its stdout (the rest is read and dropped).
    pub(crate) fn stdout_limit(mut self, bytes: usize) -> Job {
        self.stdout_limit = bytes;
        self
    }

    /// Keeps at most `bytes` of its stderr (the rest is read and dropped).
    pub fn stderr_limit(mut self, bytes: usize) -> Job {
        self.stderr_limit = bytes;
        self
    }

    /// Runs it to its end, or to its time limit: what it left, or why it gave nothing.
    pub fn run(&self) -> Result<Ran, RunError> {
        run(self)
    }
}

/// How `status` ended a program, for a message: "exited with status 1", "was ended by
/// SIGSEGV".
pub(crate) fn ended_how(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(sig)) => format!("was ended by {}", crate::interrupt::name(sig)),
        _ => format!("ended with {status}"),
    }
}

fn run(job: &Job) -> Result<Ran, RunError> {
    let exec = Exec::new(&job.program, &job.args, job.dir.as_deref(), &job.env)
        .map_err(RunError::Start)?;
    let pipes = || -> io::Result<_> {
        Ok([
            supervisor::pipe()?,
            supervisor::pipe()?,
            supervisor::pipe()?,
            supervisor::pipe()?,
            supervisor::pipe()?,
        ])
    };
    let [stdin, stdout, stderr, control, report] = pipes().map_err(RunError::Supervise)?;
    let pid = supervisor::spawn(
        &exec,
        &Ends {
            stdin: &stdin.0,
            stdout: &stdout.1,
            stderr: &stderr.1,
            control: &control.0,
            report: &report.1,
        },
    )
    .map_err(RunError::Supervise)?;
    let mut io = Streams {
        stdin: Some(stdin.1),
        input: &job.input,
        written: 0,
        out: Stream::new(stdout.0, job.stdout_limit),
        err: Stream::new(stderr.0, job.stderr_limit),
        report: Stream::new(report.0, 4 * REPORT),
        control: Some(control.1),
    };
    drop((stdin.0, stdout.1, stderr.1, control.0, report.1));
    let pumped = io.pump(job.limit, pid);
    let mut status = 0;
    // SAFETY: the supervisor is this run's own child; waiting for it by its id reaps it.
    while unsafe { libc::waitpid(pid, &mut status, 0) } < 0
        && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
    {}
    pumped?;
    let status = ended(&io.report.kept.bytes)?;
    Ok(Ran {
        status,
        stdout: io.out.kept,
        stderr: io.err.kept,
    })
}

/// How the program ended from the supervisor's reports: `None` when it was killed at the
/// time limit.
fn ended(reports: &[u8]) -> Result<Option<ExitStatus>, RunError> {
    let reports: Vec<(i32, i32)> = reports
        .chunks_exact(REPORT)
        .map(|r| {
            let word = |at: usize| i32::from_ne_bytes([r[at], r[at + 1], r[at + 2], r[at + 3]]);
            (word(0), word(4))
        })
        .collect();
    if let Some((_, errno)) = reports.iter().find(|(kind, _)| *kind == NOT_STARTED) {
        return Err(RunError::Start(io::Error::from_raw_os_error(*errno)));
    }
    match reports.last() {
        Some((EXITED, status)) => Ok(Some(ExitStatus::from_raw(*status))),
        Some((KILLED, _)) => Ok(None),
        _ => Err(RunError::Unreported),
    }
}

/// One pipe this process reads, and what it kept of it.
struct Stream {
    fd: Option<OwnedFd>,
    kept: Bounded,
    limit: usize,
}

impl Stream {
    fn new(fd: OwnedFd, limit: usize) -> Stream {
        nonblocking(&fd);
        Stream {
            fd: Some(fd),
            kept: Bounded::default(),
            limit,
        }
    }

    /// Reads what the pipe holds now; closes it at its end or on an error.
    fn drain(&mut self) {
        let Some(fd) = &self.fd else { return };
        let mut buf = [0u8; 8192];
        loop {
            // SAFETY: reads into `buf`, at most its length.
            let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                let n = n as usize;
                let room = self.limit.saturating_sub(self.kept.bytes.len());
                self.kept.bytes.extend_from_slice(&buf[..n.min(room)]);
                self.kept.cut |= n > room;
                continue;
            }
            let e = io::Error::last_os_error().kind();
            if n < 0 && e == io::ErrorKind::Interrupted {
                continue;
            }
            if n < 0 && e == io::ErrorKind::WouldBlock {
                return;
            }
            self.fd = None;
            return;
        }
    }
}

fn nonblocking(fd: &OwnedFd) {
    // SAFETY: fcntl on a descriptor this run owns.
    unsafe {
        let flags = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// This process's ends of one run's pipes.
struct Streams<'a> {
    stdin: Option<OwnedFd>,
    input: &'a [u8],
    written: usize,
    out: Stream,
    err: Stream,
    report: Stream,
    /// Held open until the time limit: closing it tells the supervisor to kill the tree.
    control: Option<OwnedFd>,
}

impl Streams<'_> {
    /// Moves bytes until the supervisor and every holder of the program's pipes are gone,
    /// closing the control pipe at `limit`; past the grace after that, kills the
    /// supervisor (`pid`) and stops reading.
    fn pump(&mut self, limit: Duration, pid: libc::pid_t) -> Result<(), RunError> {
        if let Some(fd) = &self.stdin {
            nonblocking(fd);
        }
        let deadline = Instant::now() + limit;
        let mut last = deadline + GRACE;
        loop {
            let now = Instant::now();
            if self.out.fd.is_none() && self.err.fd.is_none() && self.report.fd.is_none() {
                return Ok(());
            }
            if now >= deadline {
                self.control = None;
            }
            if now >= last {
                // SAFETY: the supervisor is not reaped yet, so its id is still its own.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                return match self.report.fd {
                    Some(_) => Ok(()),
                    None => Err(RunError::StillOpen),
                };
            }
            let wake = if self.control.is_some() {
                deadline
            } else {
                last
            };
            self.poll_once(wake - now);
            if self.report.fd.is_none() {
                // The tree is gone: what its pipes still hold is there to read now.
                last = last.min(Instant::now() + GRACE);
            }
        }
    }

    /// One `poll` of every open pipe for at most `wait`, then what is ready moved.
    fn poll_once(&mut self, wait: Duration) {
        let mut fds = Vec::with_capacity(4);
        if let Some(fd) = &self.stdin {
            fds.push(pollfd(fd, libc::POLLOUT));
        }
        for s in [&self.out, &self.err, &self.report] {
            if let Some(fd) = &s.fd {
                fds.push(pollfd(fd, libc::POLLIN));
            }
        }
        let ms = wait.as_millis().clamp(1, 1000) as libc::c_int;
        // SAFETY: `fds` holds `fds.len()` initialised entries.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            return;
        }
        if self.stdin.is_some() {
            self.feed();
        }
        self.out.drain();
        self.err.drain();
        self.report.drain();
    }

    /// Writes what the program's stdin takes now; closes it once all is written, or when
    /// the program no longer reads it (a broken pipe, not a hang).
    fn feed(&mut self) {
        let Some(fd) = &self.stdin else { return };
        while self.written < self.input.len() {
            let rest = &self.input[self.written..];
            // SAFETY: writes from `rest`, at most its length.
            let n = unsafe { libc::write(fd.as_raw_fd(), rest.as_ptr().cast(), rest.len()) };
            if n > 0 {
                self.written += n as usize;
                continue;
            }
            match io::Error::last_os_error().kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return,
                _ => break,
            }
        }
        self.stdin = None;
    }
}

fn pollfd(fd: &OwnedFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd: fd.as_raw_fd(),
        events,
        revents: 0,
    }
}

#[cfg(test)]
pub(crate) mod tests;
