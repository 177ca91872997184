//! When libtest's output cannot be written. libtest-mimic's printer unwraps every write,
//! so a closed stdout (`probe | head -1`), a full one (`> /dev/full`) or a failing
//! `--logfile` panics inside `libtest_mimic::run`. The suite catches that panic; the hook
//! installed here keeps it quiet (no "panicked at" on stderr) and keeps what failed, so
//! that the run ends with the code that says it: 141 for a closed stdout, as SIGPIPE would
//! give, and 2 for any other failure of stdout or `--logfile`. A closed stdout is not a
//! failed case. The suite's own lines go through [`say`], which never panics.

use crate::sync::lock_ignoring_poison;
use std::panic::PanicHookInfo;
use std::sync::{Mutex, Once};

/// The last failure of libtest-mimic's printer: the panic's text.
static FAILED: Mutex<Option<String>> = Mutex::new(None);

/// Installs (once) the panic hook that keeps a failure of libtest-mimic's printer quiet;
/// every other panic reaches the hook installed before, as it did.
pub(crate) fn quiet_printer_failures() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if from_printer(info) {
                *lock_ignoring_poison(&FAILED) = Some(crate::error::panic_text(info.payload()));
                return;
            }
            before(info)
        }));
    });
}

/// Whether the panic comes from libtest-mimic's printer (its `unwrap` of a write).
fn from_printer(info: &PanicHookInfo) -> bool {
    info.location().is_some_and(|l| {
        let file = l.file().replace('\\', "/");
        file.contains("libtest-mimic") && file.ends_with("/printer.rs")
    })
}

/// How libtest's output failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The reader went away (EPIPE).
    Closed,
    /// Anything else: the I/O error, as a user reads it ("No space left on device").
    Other(String),
}

/// The failure of libtest-mimic's printer that unwound `libtest_mimic::run`, if it was one
/// (and forgets it).
pub(crate) fn printer_failure() -> Option<Failure> {
    let text = lock_ignoring_poison(&FAILED).take()?;
    Some(classify(&text))
}

/// A failure from the text of the printer's panic (the `Debug` of an `io::Error`).
fn classify(text: &str) -> Failure {
    if text.contains("BrokenPipe") {
        Failure::Closed
    } else {
        Failure::Other(plain(text))
    }
}

/// The I/O error in the text of an `unwrap` panic (`called \`Result::unwrap()\` on an
/// \`Err\` value: Os { code: 28, kind: StorageFull, message: "No space left on device" }`):
/// its message, else its error text, else the text without the `unwrap` preamble.
fn plain(text: &str) -> String {
    for field in ["message: \"", "error: \""] {
        if let Some((_, rest)) = text.split_once(field) {
            if let Some((said, _)) = rest.split_once('"') {
                return said.to_string();
            }
        }
    }
    let text = text.trim();
    text.split_once("value: ")
        .map_or(text, |(_, e)| e)
        .to_string()
}

/// Prints `text` on stdout through the sanitiser ([`crate::text::clean`]); a write error
/// (a closed pipe, a full disk) drops it.
pub(crate) fn say(text: &str) {
    use std::io::Write;
    let text = crate::text::clean(text);
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_a_closed_stdout_and_anything_else_another_failure() {
        let pipe = format!(
            "called `Result::unwrap()` on an `Err` value: {:?}",
            std::io::Error::from(std::io::ErrorKind::BrokenPipe)
        );
        assert_eq!(classify(&pipe), Failure::Closed);
        let full = format!(
            "called `Result::unwrap()` on an `Err` value: {:?}",
            std::io::Error::from_raw_os_error(libc::ENOSPC)
        );
        assert_eq!(
            classify(&full),
            Failure::Other("No space left on device".into())
        );
    }
}
