//! The termination signals of the whole process, whatever handler a library installs.
//!
//! NVRTC installs a SIGINT and SIGTERM handler of its own while it compiles (its front
//! end's) that calls `exit(4)`: a signal in that window ended the run with 4 and no JUnit
//! file, or crashed or deadlocked it in exit-time destructors while another thread was
//! inside NVRTC. So [`install`] blocks every termination signal it handles in the thread
//! that calls it, and so in every thread started after, and one thread takes them with
//! `sigtimedwait`: no handler is involved, NVRTC's or ours. Called first thing in `main`,
//! that is every thread of the process. A child process inherits the mask of the thread
//! that starts it (`std::process::Command` does not reset it), so every command the
//! process starts goes through [`crate::child`], which starts it with no signal blocked
//! (a disassembler or compile worker that ignored the signals would outlive a cancelled
//! run) and kills its whole tree when this process ends, so a run that ends at once (a
//! second signal, `_exit`, SIGKILL) leaves none running either.
//!
//! The signals handled are SIGINT and SIGTERM always, and each other signal whose default
//! action ends the process ([`TERMINATING`]) when that is still its action when [`install`]
//! runs: `nohup` (SIGHUP ignored) and Rust's runtime (SIGPIPE ignored, so a closed stdout
//! is a write error, not a signal) keep what they chose. Left alone: the signals a fault
//! raises in the faulting thread (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS), which
//! cannot be blocked meaningfully, SIGABRT (`abort` unblocks it), and the real-time
//! signals, which libraries use for their own ends.
//!
//! The process ends through `_exit`, whether a signal ends it (128 + the signal, once
//! `act` has run) or the program does ([`exit`]), so that no library's exit-time
//! destructors run under another thread. The program's own end is decided by the signal
//! thread too: [`exit`] hands it the code, and the thread looks once more for a pending
//! signal before it ends the process with that code. So a signal that arrived before the
//! program asked to end always wins, however late it came.
//!
//! Threads that existed before and do not block the signals (libtest's own, when the
//! suite runs inside a test) are covered by a handler instead (signal-hook), which NVRTC
//! can replace while it compiles.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Once;
use std::time::{Duration, Instant};

/// How long the process waits for what it does on a signal (writing the JUnit file) before
/// it exits anyway: a path that blocks (a FIFO nobody reads, a hung network file system)
/// must not keep a cancelled CI job alive until it is killed.
pub(crate) const ACT_LIMIT: Duration = Duration::from_secs(5);

/// The catchable signals whose default action ends the process, with their names. SIGINT
/// and SIGTERM are handled always, the others when their action is still the default one.
pub const TERMINATING: [(libc::c_int, &str); 15] = [
    (libc::SIGHUP, "SIGHUP"),
    (libc::SIGINT, "SIGINT"),
    (libc::SIGQUIT, "SIGQUIT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGUSR1, "SIGUSR1"),
    (libc::SIGUSR2, "SIGUSR2"),
    (libc::SIGPIPE, "SIGPIPE"),
    (libc::SIGALRM, "SIGALRM"),
    (libc::SIGVTALRM, "SIGVTALRM"),
    (libc::SIGPROF, "SIGPROF"),
    (libc::SIGXCPU, "SIGXCPU"),
    (libc::SIGXFSZ, "SIGXFSZ"),
    (libc::SIGIO, "SIGIO"),
    (libc::SIGPWR, "SIGPWR"),
    (libc::SIGSTKFLT, "SIGSTKFLT"),
];

/// How often the signal thread looks whether [`exit`] asked it to end the process.
const POLL: Duration = Duration::from_millis(10);

/// Whether a thread takes the signals with `sigtimedwait` (the mask could be set).
static WAITING: AtomicBool = AtomicBool::new(false);
/// Whether a signal was taken: from then on the process ends with 128 + that signal.
static TAKEN: AtomicBool = AtomicBool::new(false);
/// The code [`exit`] asked for, or -1.
static EXIT_CODE: AtomicI32 = AtomicI32::new(-1);
/// Whether [`install`] ran.
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// `eprintln!` that never panics: a write error on stderr (`2>/dev/full`, a closed pipe)
/// drops the line, and the run goes on to its JUnit file and its exit code. Every line the
/// crate prints on stderr goes through it (here, because this module is below every other).
#[macro_export]
macro_rules! say_err {
    ($($arg:tt)*) => {
        $crate::interrupt::to_stderr(&format!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes `text` to stderr through the sanitiser ([`crate::text::clean`]: no control
/// character reaches the terminal raw); a write error drops it.
pub(crate) fn to_stderr(text: &str) {
    use std::io::Write;
    let text = crate::text::clean(text);
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// The name of `signal` ("SIGTERM"), or "signal N".
pub fn name(signal: libc::c_int) -> String {
    TERMINATING
        .iter()
        .find(|(s, _)| *s == signal)
        .map_or_else(|| format!("signal {signal}"), |(_, n)| n.to_string())
}

/// Whether a signal was taken: the process is ending with 128 + it. Anything that writes
/// a report checks it, so that nothing overwrites the interrupted one.
pub(crate) fn taken() -> bool {
    TAKEN.load(Ordering::SeqCst)
}

/// On the first handled signal, runs `act` with the signal's name ("SIGINT", "SIGHUP") on
/// a thread of its own, then ends the process with 128 + the signal (130, 129, ...)
/// through `_exit`. It ends without waiting further for `act` after `ACT_LIMIT` or at a
/// second signal. `who` names the program in what it says then. Installed once per
/// process; later calls do nothing.
pub fn install(who: &'static str, act: impl Fn(&'static str) + Send + Sync + 'static) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let handled = handled_now();
        let set = set_of(&handled);
        let (signalled, signals_in) = channel::<i32>();
        // SAFETY: `set` is an initialised signal set; this changes this thread's mask only.
        let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if blocked == 0 {
            WAITING.store(true, Ordering::SeqCst);
            let signalled = signalled.clone();
            std::thread::spawn(move || take_signals(set, signalled));
        }
        INSTALLED.store(true, Ordering::SeqCst);
        match signal_hook::iterator::Signals::new(&handled) {
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    for signal in signals.forever() {
                        if signalled.send(signal).is_err() {
                            return;
                        }
                    }
                });
            }
            Err(e) if blocked != 0 => crate::say_err!(
                "{who}: cannot handle termination signals ({e}); an interrupted run ends without its report"
            ),
            Err(_) => {}
        }
        std::thread::spawn(move || {
            let Ok(signal) = signals_in.recv() else {
                return;
            };
            TAKEN.store(true, Ordering::SeqCst);
            let name: &'static str = TERMINATING
                .iter()
                .find(|(s, _)| *s == signal)
                .map_or("a signal", |(_, n)| n);
            let (done, acted) = channel();
            std::thread::spawn(move || {
                act(name);
                let _ = done.send(());
            });
            let deadline = Instant::now() + ACT_LIMIT;
            loop {
                match acted.recv_timeout(Duration::from_millis(50)) {
                    Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    Err(RecvTimeoutError::Timeout) => {}
                }
                if signals_in.try_recv().is_ok() {
                    crate::say_err!("{who}: interrupted again; ending at once");
                    break;
                }
                if Instant::now() >= deadline {
                    crate::say_err!(
                        "{who}: interrupted by {name}; what it does then did not end within {} s; ending without it",
                        ACT_LIMIT.as_secs()
                    );
                    break;
                }
            }
            end(128 + signal)
        });
    });
}

/// The signal thread: passes every signal taken on, and ends the process with the code
/// [`exit`] asked for once no signal is pending.
fn take_signals(set: libc::sigset_t, signalled: Sender<i32>) {
    loop {
        if let Some(signal) = wait(&set, POLL) {
            TAKEN.store(true, Ordering::SeqCst);
            if signalled.send(signal).is_err() {
                return;
            }
            continue;
        }
        let code = EXIT_CODE.load(Ordering::SeqCst);
        if code < 0 || taken() {
            continue;
        }
        // The last look: a signal that came before the program asked to end wins.
        if let Some(signal) = wait(&set, Duration::ZERO) {
            TAKEN.store(true, Ordering::SeqCst);
            if signalled.send(signal).is_err() {
                return;
            }
            continue;
        }
        end(code)
    }
}

/// A signal of `set` pending for this thread or the process, waiting at most `limit`.
fn wait(set: &libc::sigset_t, limit: Duration) -> Option<i32> {
    let timeout = libc::timespec {
        tv_sec: limit.as_secs() as libc::time_t,
        tv_nsec: limit.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` and `timeout` are live, initialised values; no siginfo is asked for.
    let signal = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &timeout) };
    (signal > 0).then_some(signal)
}

/// The temporary files being written now ([`in_flight`]), removed when the process ends
/// through [`end`] while they are.
static IN_FLIGHT: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());

/// How long [`end`] waits for a temporary file being created to be registered.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(1);

/// A registered temporary file ([`in_flight`]); dropping it ends the registration.
pub(crate) struct InFlight(std::path::PathBuf);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut paths = crate::sync::lock_ignoring_poison(&IN_FLIGHT);
        if let Some(i) = paths.iter().position(|p| *p == self.0) {
            paths.swap_remove(i);
        }
    }
}

/// Runs `create`, which makes a temporary file and gives its path, and registers that
/// path until the returned guard is dropped (once the file is renamed or removed). A
/// process that ends through `_exit` meanwhile (a signal in the middle of an atomic
/// write) removes it first: no `.x.XXXX.tmp` is left in a user's folder. The file is
/// created and registered under one lock, which the end takes, so none escapes.
pub(crate) fn in_flight<T>(
    create: impl FnOnce() -> std::io::Result<(T, std::path::PathBuf)>,
) -> std::io::Result<(T, InFlight)> {
    let mut paths = crate::sync::lock_ignoring_poison(&IN_FLIGHT);
    let (made, path) = create()?;
    paths.push(path.clone());
    Ok((made, InFlight(path)))
}

/// Removes the registered temporary files ([`in_flight`]), waiting at most
/// [`IN_FLIGHT_WAIT`] for one being created, and keeps the registry locked from then on,
/// so that no write starts another before the process ends.
fn remove_in_flight() {
    let deadline = Instant::now() + IN_FLIGHT_WAIT;
    let mut paths = loop {
        match IN_FLIGHT.try_lock() {
            Ok(p) => break p,
            Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::sync::TryLockError::WouldBlock) => return,
        }
    };
    for p in paths.drain(..) {
        let _ = std::fs::remove_file(p);
    }
    std::mem::forget(paths);
}

/// Removes the temporary files being written, flushes stdout and stderr and ends the
/// process with `code` through `_exit`.
fn end(code: i32) -> ! {
    use std::io::Write;
    remove_in_flight();
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    signal_hook::low_level::exit(code)
}

/// Ends the process with `code`, unless a signal was taken or is pending: then it ends
/// with 128 + that signal, once its report is written. After [`install`] the signal
/// thread ends the process (through `_exit`, after a last look for a pending signal) and
/// this never returns; without it, the process exits as usual.
pub fn exit(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if WAITING.load(Ordering::SeqCst) {
        EXIT_CODE.store(i32::from(code), Ordering::SeqCst);
        loop {
            std::thread::park();
        }
    }
    if INSTALLED.load(Ordering::SeqCst) {
        // Only the handler of signal-hook: a signal it passed on ends the process.
        if taken() {
            loop {
                std::thread::park();
            }
        }
        end(i32::from(code))
    }
    std::process::exit(i32::from(code))
}

/// Blocks every signal of [`TERMINATING`] in the calling thread only (and so in the
/// threads it starts after): what a test's child does before it runs, as the suite's
/// `main` does first. Async-signal-safe, so it may run between fork and exec. 0, else the
/// error number.
#[doc(hidden)]
pub fn block_in_this_thread() -> i32 {
    let set = set_of(&all());
    // SAFETY: `set` is an initialised signal set; this changes this thread's mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) }
}

/// Every signal of [`TERMINATING`].
fn all() -> Vec<libc::c_int> {
    TERMINATING.iter().map(|(s, _)| *s).collect()
}

/// The signals [`install`] handles now: SIGINT, SIGTERM, and those of [`TERMINATING`]
/// whose action is the default one.
fn handled_now() -> Vec<libc::c_int> {
    TERMINATING
        .iter()
        .map(|(s, _)| *s)
        .filter(|&s| s == libc::SIGINT || s == libc::SIGTERM || is_default(s))
        .collect()
}

/// Whether `signal`'s action is the default one.
fn is_default(signal: libc::c_int) -> bool {
    // SAFETY: a null new action only reads the current one into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_DFL
    }
}

/// The signal set of `signals`.
fn set_of(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_signals_stay_ignored_and_sigint_sigterm_are_always_handled() {
        // SIGPIPE: Rust's runtime ignores it before `main`, so a closed stdout is an error.
        let handled = handled_now();
        assert!(!handled.contains(&libc::SIGPIPE), "{handled:?}");
        assert!(handled.contains(&libc::SIGINT) && handled.contains(&libc::SIGTERM));
        assert_eq!(name(libc::SIGHUP), "SIGHUP");
        assert_eq!(name(64), "signal 64");
    }

    #[test]
    fn a_temporary_file_is_registered_while_it_is_in_flight_only() {
        let tmp = tempfile::tempdir().unwrap();
        let make = |name: &str| {
            let path = tmp.path().join(name);
            std::fs::write(&path, "half a file").unwrap();
            in_flight(|| Ok(((), path.clone()))).unwrap().1
        };
        let done = make(".a.xml.1.tmp");
        let writing = make(".b.xml.2.tmp");
        drop(done);
        // Checked, not emptied: the end's removal is tested in a child process.
        let registered = IN_FLIGHT.lock().unwrap().clone();
        assert!(registered.contains(&tmp.path().join(".b.xml.2.tmp")));
        assert!(!registered.contains(&tmp.path().join(".a.xml.1.tmp")));
        let failed = in_flight::<()>(|| Err(std::io::Error::other("no space")));
        assert!(failed.is_err());
        drop(writing);
        assert!(!IN_FLIGHT
            .lock()
            .unwrap()
            .iter()
            .any(|p| p.starts_with(tmp.path())));
    }

    /// Set for [`signalled_mid_write`]: the temporary file it registers.
    const MID_WRITE: &str = "ACCPROBE_TEST_MID_WRITE";

    /// The child of [`a_signal_in_the_middle_of_a_write_leaves_no_temporary_file`]: a
    /// temporary file registered, then a SIGTERM before it is renamed.
    #[test]
    #[ignore = "entry point of a child process"]
    fn signalled_mid_write() {
        let Some(path) = std::env::var_os(MID_WRITE) else {
            return;
        };
        install("test", |_| {});
        let path = std::path::PathBuf::from(path);
        let (_, _writing) = in_flight(|| {
            std::fs::write(&path, "half a file")?;
            Ok(((), path.clone()))
        })
        .unwrap();
        // SAFETY: signals this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
        loop {
            std::thread::park();
        }
    }

    #[test]
    fn a_signal_in_the_middle_of_a_write_leaves_no_temporary_file() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join(".h200.yaml.abcd.tmp");
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "interrupt::tests::signalled_mid_write",
                "--ignored",
            ])
            .args(["--nocapture", "--test-threads", "1"])
            .env(MID_WRITE, &path)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert_eq!(status.code(), Some(128 + libc::SIGTERM));
        assert!(!path.exists(), "{} was left", path.display());
    }
}
