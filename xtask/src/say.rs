//! What xtask prints: every line goes through [`say_line`], by the [`say!`] (stdout) and
//! [`warn!`] (stderr) macros, never `println!`.

/// `println!` that never panics: when stdout is closed (`cargo xtask sass ... | head -1`)
/// the output stops quietly and the command still finishes its work (files it writes, its
/// exit code); `println!` would panic on the broken pipe. What it prints goes through
/// [`accprobe::report::text::clean`]: text from a results file or a profile (a GPU name,
/// a SASS line) never sends a terminal a control sequence.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::say::say_line(false, format_args!($($arg)*))
    };
}

/// [`say!`] for stderr: `eprintln!` that never panics and escapes what a terminal must
/// not get raw.
macro_rules! warn {
    ($($arg:tt)*) => {
        $crate::say::say_line(true, format_args!($($arg)*))
    };
}

/// Writes one line to stdout (or stderr), through the terminal sanitiser; a write error
/// (a closed pipe, a full disk behind a redirection) ends the output, not the command.
pub fn say_line(to_stderr: bool, args: std::fmt::Arguments) {
    use std::io::Write;
    let text = args.to_string();
    let mut line = accprobe::report::text::clean(&text).into_owned();
    line.push('\n');
    let _ = if to_stderr {
        std::io::stderr().lock().write_all(line.as_bytes())
    } else {
        std::io::stdout().lock().write_all(line.as_bytes())
    };
}
