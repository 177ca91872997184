//! SIGINT and SIGTERM for the whole process, whatever handler a library installs.
//!
//! NVRTC installs a SIGINT and SIGTERM handler of its own while it compiles (its front
//! end's) that calls `exit(4)`. Measured 2026-11-30 (H200 and a CPU machine, NVRTC
//! 13.0.88): a signal in that window ended the suite with 4 and no JUnit file, crashed it
//! (SIGSEGV, SIGABRT) in exit-time destructors while another thread was inside NVRTC, or
//! deadlocked it there (a cancelled CI job that never ends). So [`install`] blocks both
//! signals in the thread that calls it, and so in every thread started after, and one
//! thread takes them with `sigwait`: no handler is involved, NVRTC's or ours. Called first
//! thing in `main`, that is every thread of the process (child processes start with the
//! signals unblocked again: `std::process::Command` resets the mask).
//!
//! Threads that existed before and do not block them (libtest's own, when the suite runs
//! inside a test) are covered by a handler instead (signal-hook), which NVRTC can replace
//! while it compiles.

use std::sync::{Mutex, Once};

/// Runs `act` with the signal's name ("SIGINT", "SIGTERM") on the first SIGINT or SIGTERM,
/// then ends the process at once with 128 + the signal (130, 143) through `_exit`: no
/// exit-time handler runs, so none of another thread's libraries can crash or hang it.
/// Installed once per process; a second call does nothing.
pub fn install(act: impl Fn(&'static str) + Send + Sync + 'static) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let act: &'static (dyn Fn(&'static str) + Send + Sync) = Box::leak(Box::new(act));
        let set = signals();
        // SAFETY: `set` is an initialised signal set; this changes this thread's mask only.
        let blocked = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
        if blocked == 0 {
            std::thread::spawn(move || loop {
                let mut signal = 0;
                // SAFETY: both pointers are to live values of the right types.
                if unsafe { libc::sigwait(&set, &mut signal) } == 0 {
                    finish(act, signal);
                }
            });
        }
        match signal_hook::iterator::Signals::new([libc::SIGINT, libc::SIGTERM]) {
            Ok(mut signals) => {
                std::thread::spawn(move || {
                    if let Some(signal) = signals.forever().next() {
                        finish(act, signal);
                    }
                });
            }
            Err(e) if blocked != 0 => eprintln!(
                "accprobe: cannot handle SIGINT/SIGTERM ({e}); an interrupted run ends without its report"
            ),
            Err(_) => {}
        }
    });
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

/// `act`, then `_exit(128 + signal)`; a second signal meanwhile waits here until the end.
fn finish(act: &(dyn Fn(&'static str) + Send + Sync), signal: i32) -> ! {
    static ONE: Mutex<()> = Mutex::new(());
    let _only = ONE.lock().unwrap_or_else(|e| e.into_inner());
    act(if signal == libc::SIGTERM {
        "SIGTERM"
    } else {
        "SIGINT"
    });
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    signal_hook::low_level::exit(128 + signal)
}
