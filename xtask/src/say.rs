//! What xtask prints: every line goes through [`say_line`], by the `say!` (stdout) and
//! `warn!` (stderr) macros, never `println!`.
//!
//! Stdout is a command's result (a diff, a verdict, a SASS listing), so a failure to write
//! it fails the command: when stdout is closed (`cargo xtask sass ... | head -1`, EPIPE)
//! the reader wanted no more and the output stops quietly; any other write error (a full
//! disk behind a redirection, `>/dev/full`) stops the output too, and the command, once
//! its work is done, exits 1 saying so ([`stdout_failure`], read by `main`). A failure to
//! write stderr has nowhere to be told and is ignored.

use std::sync::Mutex;

/// `println!` that never panics: see the module for what a write error does. What it
/// prints goes through [`accprobe::text::clean`]: text from a results file or a
/// profile (a GPU name, a SASS line) never sends a terminal a control sequence.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::say_line(false, format_args!($($arg)*))
    };
}

/// `say!` for stderr: `eprintln!` that never panics and escapes what a terminal must
/// not get raw.
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::say::say_line(true, format_args!($($arg)*))
    };
}

/// How stdout has failed, once it has: `None` while it writes.
enum Stopped {
    /// Closed by its reader (EPIPE): not a failure.
    Closed,
    /// Any other write error, as the OS said it.
    Failed(String),
}

static STDOUT: Mutex<Option<Stopped>> = Mutex::new(None);

/// Writes one line to stdout (or stderr), through the terminal sanitiser. After a write
/// error on stdout nothing more is written there (see the module).
pub fn say_line(to_stderr: bool, args: std::fmt::Arguments) {
    use std::io::Write;
    let text = args.to_string();
    let mut line = accprobe::text::clean(&text).into_owned();
    line.push('\n');
    if to_stderr {
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
        return;
    }
    let mut state = accprobe::sync::lock_ignoring_poison(&STDOUT);
    if state.is_some() {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(line.as_bytes()).and_then(|()| out.flush()) {
        *state = Some(stopped(e));
    }
}

fn stopped(e: std::io::Error) -> Stopped {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Stopped::Closed
    } else {
        Stopped::Failed(e.to_string())
    }
}

/// Why the command's output did not all reach stdout, when a write failed for another
/// reason than a closed pipe: the command must not end as a success.
pub fn stdout_failure() -> Option<String> {
    use std::io::Write;
    let mut state = accprobe::sync::lock_ignoring_poison(&STDOUT);
    if state.is_none() {
        if let Err(e) = std::io::stdout().lock().flush() {
            *state = Some(stopped(e));
        }
    }
    match &*state {
        Some(Stopped::Failed(e)) => Some(format!("cannot write the output to stdout: {e}")),
        _ => None,
    }
}
