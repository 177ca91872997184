//! The supervisor of one child process run ([`super::run`]): a process forked from this
//! one that makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), starts the program,
//! and once the program has ended, or this process closes the control pipe (the time
//! limit, or this process ending), kills and reaps every process left in the program's
//! tree. A subreaper inherits every orphan of its tree, whatever session or group it moved
//! to, so a grandchild in a new session, or a daemon with its descriptors closed, is still
//! its child when it looks; a process group would not reach either. The subreaper is a
//! process of its own, not this one, so that this process's other children and their
//! orphans are left alone. It reports on the report pipe, then exits: its end closes that
//! pipe, after the last process of the tree is gone.
//!
//! Everything between `fork` and `_exit` or `execve` is async-signal-safe (this process
//! has other threads): system calls on stack buffers only, nothing allocated, nothing
//! locked.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The program exited or was ended by a signal; the value is its wait status.
pub(super) const EXITED: i32 = 0;
/// The gate closed the control pipe before the program ended; the program was killed.
pub(super) const KILLED: i32 = 1;
/// The program could not be started; the value is the error number.
pub(super) const NOT_STARTED: i32 = 2;
/// The bytes of one report: its kind and its value, each an `i32` in native order.
pub(super) const REPORT: usize = 8;

/// What the program is started as, prepared before the fork.
pub(super) struct Exec {
    path: CString,
    dir: Option<CString>,
    _argv: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    _envp: Vec<CString>,
    envp: Vec<*const libc::c_char>,
}

fn c_string(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

impl Exec {
    /// `program` (a path, or a name looked up on `PATH` now) with `args`, run in `dir`
    /// (this process's folder when `None`) with this process's environment changed by
    /// `env` (a name set to a value, or removed for `None`).
    pub(super) fn new(
        program: &Path,
        args: &[OsString],
        dir: Option<&Path>,
        env: &[(OsString, Option<OsString>)],
    ) -> io::Result<Exec> {
        let path = resolve(program)?;
        let mut argv_strings = vec![c_string(program.as_os_str())?];
        for a in args {
            argv_strings.push(c_string(a)?);
        }
        let mut vars: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        for (name, value) in env {
            vars.retain(|(k, _)| k != name);
            if let Some(v) = value {
                vars.push((name.clone(), v.clone()));
            }
        }
        let mut envp_strings = Vec::new();
        for (k, v) in vars {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            envp_strings.push(c_string(OsStr::from_bytes(&kv))?);
        }
        let pointers = |v: &[CString]| {
            v.iter()
                .map(|s| s.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        Ok(Exec {
            path: c_string(path.as_os_str())?,
            dir: dir.map(|d| c_string(d.as_os_str())).transpose()?,
            argv: pointers(&argv_strings),
            _argv: argv_strings,
            envp: pointers(&envp_strings),
            _envp: envp_strings,
        })
    }
}

/// `program` as it is executed: a path as it is, a bare name found on `PATH` (the first
/// executable file of that name), as a shell finds it.
fn resolve(program: &Path) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.as_os_str().as_bytes().contains(&b'/') {
        return Ok(program.to_path_buf());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
}

/// A pipe, both ends closed on exec: (read end, write end).
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which this then owns.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

/// The supervisor's ends of its pipes.
pub(super) struct Ends<'a> {
    pub(super) stdin: &'a OwnedFd,
    pub(super) stdout: &'a OwnedFd,
    pub(super) stderr: &'a OwnedFd,
    pub(super) control: &'a OwnedFd,
    pub(super) report: &'a OwnedFd,
}

/// Forks the supervisor of `exec`, with `ends` as its pipes; its process id.
pub(super) fn spawn(exec: &Exec, ends: &Ends<'_>) -> io::Result<libc::pid_t> {
    let fds = [
        ends.stdin.as_raw_fd(),
        ends.stdout.as_raw_fd(),
        ends.stderr.as_raw_fd(),
        ends.control.as_raw_fd(),
        ends.report.as_raw_fd(),
    ];
    // SAFETY: the child runs only async-signal-safe code on data prepared before the fork,
    // and ends in `_exit` or `execve`.
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => unsafe { supervise(exec, fds) },
        pid => Ok(pid),
    }
}

/// The supervisor: the program's pipes on 0, 1 and 2, nothing else open but the control
/// and report pipes, the program started, waited for, its tree killed, the report written.
unsafe fn supervise(exec: &Exec, fds: [RawFd; 5]) -> ! {
    let mut high = [0; 5];
    for (h, fd) in high.iter_mut().zip(fds) {
        *h = libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3);
        if *h < 0 {
            libc::_exit(1);
        }
    }
    for (target, fd) in high.iter().take(3).enumerate() {
        if libc::dup2(*fd, target as RawFd) < 0 {
            libc::_exit(1);
        }
    }
    let (control, report) = (high[3], high[4]);
    close_all_but(control, report);
    if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) != 0 {
        tell(report, NOT_STARTED, errno());
        libc::_exit(1);
    }
    let me = libc::getpid();
    let program = libc::fork();
    if program < 0 {
        tell(report, NOT_STARTED, errno());
        libc::_exit(1);
    }
    if program == 0 {
        start(exec, me, report);
    }
    let (kind, value) = wait_for(program, control);
    kill_the_tree();
    tell(report, kind, value);
    libc::_exit(0)
}

/// The program itself: a process group of its own, signals as a new process has them
/// (none blocked, SIGPIPE's default action), killed if the supervisor dies, in its folder; an error number on the report pipe when
/// it cannot be started.
unsafe fn start(exec: &Exec, supervisor: libc::pid_t, report: RawFd) -> ! {
    libc::setpgid(0, 0);
    libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() != supervisor {
        libc::_exit(127);
    }
    if exec
        .dir
        .as_ref()
        .is_none_or(|d| libc::chdir(d.as_ptr()) == 0)
    {
        libc::execve(exec.path.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr());
    }
    tell(report, NOT_STARTED, errno());
    libc::_exit(127)
}

/// Waits until `program` ends (its wait status, [`EXITED`]) or the control pipe closes
/// ([`KILLED`]), reaping the orphans of its tree meanwhile.
unsafe fn wait_for(program: libc::pid_t, control: RawFd) -> (i32, i32) {
    loop {
        let mut status = 0;
        let r = libc::waitpid(-1, &mut status, libc::WNOHANG);
        if r == program {
            return (EXITED, status);
        }
        if r > 0 || (r < 0 && errno() == libc::EINTR) {
            continue;
        }
        if r < 0 {
            return (KILLED, 0);
        }
        let mut p = libc::pollfd {
            fd: control,
            events: libc::POLLIN,
            revents: 0,
        };
        if libc::poll(&mut p, 1, 5) > 0 {
            return (KILLED, 0);
        }
    }
}

/// Kills every child, over and over, until none is left: each killed parent's own
/// children come to the subreaper and are the next round's.
unsafe fn kill_the_tree() {
    loop {
        each_child(|pid| {
            libc::kill(pid, libc::SIGKILL);
        });
        let mut status = 0;
        let mut r = libc::waitpid(-1, &mut status, libc::WNOHANG);
        while r > 0 || (r < 0 && errno() == libc::EINTR) {
            r = libc::waitpid(-1, &mut status, libc::WNOHANG);
        }
        if r < 0 && errno() == libc::ECHILD {
            return;
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 1_000_000,
        };
        libc::nanosleep(&pause, std::ptr::null_mut());
    }
}

/// Calls `f` with each child of this (single-threaded) process, from
/// `/proc/thread-self/children`, else from every process's `stat` in `/proc`.
unsafe fn each_child(mut f: impl FnMut(libc::pid_t)) {
    let fd = libc::open(
        c"/proc/thread-self/children".as_ptr(),
        libc::O_RDONLY | libc::O_CLOEXEC,
    );
    if fd < 0 {
        return scan_proc(f);
    }
    let mut buf = [0u8; 512];
    let mut pid: libc::pid_t = 0;
    loop {
        let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n <= 0 {
            break;
        }
        for &b in buf.iter().take(n as usize) {
            if b.is_ascii_digit() {
                pid = pid.saturating_mul(10).saturating_add(i32::from(b - b'0'));
            } else if pid > 0 {
                f(pid);
                pid = 0;
            }
        }
    }
    if pid > 0 {
        f(pid);
    }
    libc::close(fd);
}

/// [`each_child`] where the kernel has no `children` file: every `/proc/<pid>/stat`
/// whose parent is this process.
unsafe fn scan_proc(mut f: impl FnMut(libc::pid_t)) {
    let dir = libc::open(
        c"/proc".as_ptr(),
        libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
    );
    if dir < 0 {
        return;
    }
    let me = libc::getpid();
    let mut buf = [0u8; 4096];
    loop {
        let n = libc::syscall(libc::SYS_getdents64, dir, buf.as_mut_ptr(), buf.len());
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
            let reclen = usize::from(u16::from_ne_bytes([buf[at + 16], buf[at + 17]]));
            if reclen < 20 {
                break;
            }
            let name = &buf[at + 19..(at + reclen).min(n as usize)];
            let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            let name = &name[..len];
            if !name.is_empty() && name.iter().all(u8::is_ascii_digit) && parent_of(name) == me {
                f(number(name));
            }
            at += reclen;
        }
    }
    libc::close(dir);
}

/// The decimal number `digits`.
fn number(digits: &[u8]) -> libc::pid_t {
    digits.iter().fold(0, |n: libc::pid_t, &b| {
        n.saturating_mul(10).saturating_add(i32::from(b - b'0'))
    })
}

/// The parent of process `pid` (its decimal digits), from `/proc/<pid>/stat`; 0 when it
/// cannot be read.
unsafe fn parent_of(pid: &[u8]) -> libc::pid_t {
    let mut path = [0u8; 40];
    let parts: [&[u8]; 3] = [b"/proc/", pid, b"/stat"];
    let mut len = 0;
    for part in parts {
        for &b in part {
            if len + 1 >= path.len() {
                return 0;
            }
            path[len] = b;
            len += 1;
        }
    }
    let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return 0;
    }
    let mut buf = [0u8; 1024];
    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
    libc::close(fd);
    if n <= 0 {
        return 0;
    }
    // `pid (comm) state ppid ...`: the name may hold spaces and parentheses.
    let text = &buf[..n as usize];
    let Some(close) = text.iter().rposition(|&b| b == b')') else {
        return 0;
    };
    let fields = &text[close + 1..];
    let mut words = fields.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let _state = words.next();
    match words.next() {
        Some(w) if w.iter().all(u8::is_ascii_digit) => number(w),
        _ => 0,
    }
}

/// Closes every descriptor above 2 but `a` and `b`.
unsafe fn close_all_but(a: RawFd, b: RawFd) {
    let (low, high) = (a.min(b) as libc::c_uint, a.max(b) as libc::c_uint);
    let ranges = [
        (3, low.wrapping_sub(1)),
        (low + 1, high - 1),
        (high + 1, !0),
    ];
    for (first, last) in ranges {
        if first > last {
            continue;
        }
        if libc::syscall(libc::SYS_close_range, first, last, 0) != 0 {
            // A kernel before 5.9: one by one, up to the descriptor limit.
            let mut limit: libc::rlimit = std::mem::zeroed();
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
            let end = (limit.rlim_cur.min(1 << 20) as libc::c_uint).min(last.saturating_add(1));
            for fd in first..end {
                libc::close(fd as RawFd);
            }
        }
    }
}

/// Writes one report.
unsafe fn tell(report: RawFd, kind: i32, value: i32) {
    let mut bytes = [0u8; REPORT];
    bytes[..4].copy_from_slice(&kind.to_ne_bytes());
    bytes[4..].copy_from_slice(&value.to_ne_bytes());
    while libc::write(report, bytes.as_ptr().cast(), REPORT) < 0 && errno() == libc::EINTR {}
}

fn errno() -> i32 {
    // SAFETY: the calling thread's errno, a thread-local the C library keeps.
    unsafe { *libc::__errno_location() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_ways_of_listing_children_find_a_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let (mut listed, mut scanned) = (Vec::new(), Vec::new());
        // SAFETY: both only read /proc.
        unsafe {
            each_child(|p| listed.push(p));
            scan_proc(|p| scanned.push(p));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(listed.contains(&pid), "{listed:?}");
        assert!(scanned.contains(&pid), "{scanned:?}");
    }

    #[test]
    fn a_bare_name_is_found_on_path_and_a_missing_one_is_not_found() {
        assert!(resolve(Path::new("sh")).unwrap().is_absolute());
        assert_eq!(
            resolve(Path::new("accprobe-no-such-program"))
                .unwrap_err()
                .kind(),
            io::ErrorKind::NotFound
        );
        assert_eq!(resolve(Path::new("./x")).unwrap(), Path::new("./x"));
    }
}
