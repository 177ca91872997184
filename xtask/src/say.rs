//! What xtask prints: every line goes through [`say_line`], by the `say!` (stdout) and
//! `warn!` (stderr) macros, never `println!` (except under `cargo test`, where it goes
//! through libtest's capture with the test that said it).
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
    // Under `cargo test`, through libtest's capture: what a command says stays with the
    // test that ran it (shown when it fails, or under --nocapture), off the terminal.
    if cfg!(test) {
        if to_stderr {
            eprint!("{line}");
        } else {
            print!("{line}");
        }
        return;
    }
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

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Says a line on each stream, as a command does; run alone by the test below.
    #[test]
    fn says_a_line_on_each_stream() {
        say!("said by a test of xtask");
        warn!("warned by a test of xtask");
    }

    #[test]
    fn what_a_command_says_under_a_test_stays_with_that_test() {
        // Every command test's lines reached the terminal (1,900 of them in cargo test
        // --workspace), past libtest's capture.
        let run = |extra: &[&str]| {
            let o = Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "say::tests::says_a_line_on_each_stream"])
                .args(["--test-threads", "1"])
                .args(extra)
                .output()
                .unwrap();
            assert!(o.status.success(), "{o:?}");
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            )
        };
        let captured = run(&[]);
        assert!(
            !captured.contains("said by") && !captured.contains("warned by"),
            "{captured}"
        );
        let shown = run(&["--nocapture"]);
        assert!(
            shown.contains("said by a test of xtask")
                && shown.contains("warned by a test of xtask"),
            "{shown}"
        );
    }
}
