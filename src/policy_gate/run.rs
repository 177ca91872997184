//! One run of a policy program: its stdin written and closed, its stdout and stderr read
//! with a bound each, and the program (with every process it started in its group) killed
//! at the time limit.

use crate::interrupt;
use std::io::{Read, Write};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What the program left: its end, and at most the bound of each stream.
#[derive(Debug)]
pub(super) struct Ran {
    /// `None` when it was killed at the time limit.
    pub(super) status: Option<ExitStatus>,
    pub(super) stdout: Bounded,
    pub(super) stderr: Bounded,
}

/// The first bytes of a stream, and whether it held more.
#[derive(Debug)]
pub(super) struct Bounded {
    pub(super) bytes: Vec<u8>,
    pub(super) cut: bool,
}

/// How often the program's end is looked for while it runs.
const POLL: Duration = Duration::from_millis(5);

/// Runs `cmd` with `input` on its stdin, keeping at most `out_limit` bytes of its stdout and
/// `err_limit` of its stderr (the rest is read and dropped, so that it never blocks on a
/// full pipe), and kills its process group once `limit` has passed.
pub(super) fn run(
    cmd: &mut Command,
    input: Vec<u8>,
    limit: Duration,
    out_limit: usize,
    err_limit: usize,
) -> std::io::Result<Ran> {
    use std::os::unix::process::CommandExt;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = interrupt::child(cmd).spawn()?;
    let group = child.id() as libc::pid_t;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    std::thread::scope(|scope| {
        // A program that does not read its stdin gets a broken pipe here, not a hang.
        scope.spawn(move || {
            if let Some(mut w) = stdin {
                let _ = w.write_all(&input);
            }
        });
        let out = scope.spawn(move || bounded(stdout, out_limit));
        let err = scope.spawn(move || bounded(stderr, err_limit));
        let deadline = Instant::now() + limit;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break Some(s),
                Ok(None) if Instant::now() >= deadline => {
                    kill_group(group);
                    let _ = child.wait();
                    break None;
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => {
                    kill_group(group);
                    let _ = child.wait();
                    return Err(e);
                }
            }
        };
        // What the program started and left behind, holding its pipes open, goes too. While
        // such a process lives the group does, so its id cannot name another group yet.
        if !(out.is_finished() && err.is_finished()) {
            std::thread::sleep(POLL);
            if !(out.is_finished() && err.is_finished()) {
                kill_group(group);
            }
        }
        let join = |h: std::thread::ScopedJoinHandle<'_, Bounded>| {
            h.join().unwrap_or(Bounded {
                bytes: Vec::new(),
                cut: false,
            })
        };
        Ok(Ran {
            status,
            stdout: join(out),
            stderr: join(err),
        })
    })
}

/// Kills the process group `group` this run started (its leader is the program): before
/// the program is reaped, or after while a process of the group still holds its pipes (a
/// group's id is not reused while a process of it lives), so it never reaches another.
fn kill_group(group: libc::pid_t) {
    // SAFETY: kill has no memory effects; a group that is gone gives ESRCH, ignored.
    unsafe {
        libc::kill(-group, libc::SIGKILL);
    }
}

fn bounded(from: Option<impl Read>, limit: usize) -> Bounded {
    let mut bytes = Vec::new();
    let mut cut = false;
    if let Some(mut r) = from {
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = limit.saturating_sub(bytes.len());
                    bytes.extend_from_slice(&buf[..n.min(room)]);
                    cut |= n > room;
                }
            }
        }
    }
    Bounded { bytes, cut }
}
