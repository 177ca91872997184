//! SIGINT and SIGTERM for the whole process, whatever handler a library installs.
//!
//! NVRTC installs a SIGINT and SIGTERM handler of its own while it compiles (its front
//! end's) that calls `exit(4)`. Measured 2026-11-30 (H200 and a CPU machine, NVRTC
//! 13.0.88): a signal in that window ended the suite with 4 and no JUnit file, crashed it
//! (SIGSEGV, SIGABRT) in exit-time destructors while another thread was inside NVRTC, or
//! deadlocked it there (a cancelled CI job that never ends). So [`install`] blocks both
//! signals in the thread that calls it, and so in every thread started after, and one
//! thread takes them with `sigwait`: no handler is involved, NVRTC's or ours. Called first
//! thing in `main`, that is every thread of the process. A child process inherits the
//! mask of the thread that starts it (`std::process::Command` does not reset it: Rust
//! 1.95, 2026-11-30), so every command the process starts goes through
//! [`unblocked_in_child`]: a disassembler or compile worker that ignored SIGINT and SIGTERM
//! would outlive a cancelled run.
//!
//! Threads that existed before and do not block them (libtest's own, when the suite runs
//! inside a test) are covered by a handler instead (signal-hook), which NVRTC can replace
//! while it compiles.

use std::sync::mpsc::{channel, RecvTimeoutError};
use std::sync::Once;
use std::time::{Duration, Instant};

/// How long the process waits for what it does on a signal (writing the JUnit file) before
/// it exits anyway: a path that blocks (a FIFO nobody reads, a hung network file system)
/// must not keep a cancelled CI job alive until it is killed.
pub const ACT_LIMIT: Duration = Duration::from_secs(5);

/// On the first SIGINT or SIGTERM, runs `act` with the signal's name ("SIGINT",
/// "SIGTERM") on a thread of its own, then ends the process with 128 + the signal (130,
/// 143) through `_exit`, so that no exit-time handler runs under another thread's library.
/// It ends without waiting further for `act` after [`ACT_LIMIT`] or at a second signal.
/// `who` names the program in what it says then. Installed once per process; later calls
/// do nothing.
pub fn install(who: &'static str, act: impl Fn(&'static str) + Send + Sync + 'static) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let (signalled, signals_in) = channel::<i32>();
        let set = signals();
        let blocked = block_in_this_thread();
        if blocked == 0 {
            let signalled = signalled.clone();
            std::thread::spawn(move || loop {
                let mut signal = 0;
                // SAFETY: both pointers are to live values of the right types.
                if unsafe { libc::sigwait(&set, &mut signal) } == 0
                    && signalled.send(signal).is_err()
                {
                    return;
                }
            });
        }
        match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    for signal in signals.forever() {
                        if signalled.send(signal).is_err() {
                            return;
                        }
                    }
                });
            }
            Err(e) if blocked != 0 => eprintln!(
                "{who}: cannot handle SIGINT/SIGTERM ({e}); an interrupted run ends without its report"
            ),
            Err(_) => {}
        }
        std::thread::spawn(move || {
            let Ok(signal) = signals_in.recv() else {
                return;
            };
            let name = if signal == libc::SIGTERM {
                "SIGTERM"
            } else {
                "SIGINT"
            };
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
                    eprintln!("{who}: interrupted again; ending at once");
                    break;
                }
                if Instant::now() >= deadline {
                    eprintln!(
                        "{who}: interrupted by {name}; what it does then did not end within {} s; ending without it",
                        ACT_LIMIT.as_secs()
                    );
                    break;
                }
            }
            use std::io::Write;
            let _ = std::io::stdout().flush();
            let _ = std::io::stderr().flush();
            signal_hook::low_level::exit(128 + signal)
        });
    });
}

/// Makes the process `cmd` starts begin with SIGINT and SIGTERM unblocked, whatever the
/// mask of the thread that starts it (blocked by [`install`]).
pub fn unblocked_in_child(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    let set = signals();
    // SAFETY: pthread_sigmask is async-signal-safe, as pre_exec requires; `set` is an
    // initialised signal set, copied into the closure.
    unsafe {
        cmd.pre_exec(move || {
            match libc::pthread_sigmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) {
                0 => Ok(()),
                e => Err(std::io::Error::from_raw_os_error(e)),
            }
        })
    }
}

/// Blocks SIGINT and SIGTERM in the calling thread only (and so in the threads it starts
/// after): what [`install`] does first, and what a test's child does before it runs.
/// Async-signal-safe, so it may run between fork and exec. 0, else the error number.
#[doc(hidden)]
pub fn block_in_this_thread() -> i32 {
    let set = signals();
    // SAFETY: `set` is an initialised signal set; this changes this thread's mask only.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) }
}

/// SIGINT and SIGTERM.
fn signals() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before sigaddset reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        set
    }
}
