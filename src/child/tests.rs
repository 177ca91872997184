//! The runner on its own; tests/gate/policy_gate.rs runs it through every way a policy program
//! goes wrong (a hang, an escaped grandchild, a flood of output, a closed stdin).

use super::*;
use std::time::Instant;

/// A limit no job of these tests comes near (a limit, not a timing).
const LIMIT: Duration = Duration::from_secs(60);

fn sh(script: &str) -> Job {
    Job::new("sh", LIMIT).arg("-c").arg(script)
}

fn stdout(ran: &Ran) -> String {
    String::from_utf8_lossy(&ran.stdout.bytes).into_owned()
}

#[test]
fn a_job_gets_its_arguments_folder_environment_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let ran = sh(r#"echo "$0 $A ${HOME-none} $(pwd)"; cat"#)
        .arg("first")
        .env("A", "set")
        .env_remove("HOME")
        .dir(dir.path())
        .input(b"from stdin\n".to_vec())
        .run()
        .unwrap();
    assert!(ran.status.is_some_and(|s| s.success()), "{ran:?}");
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        stdout(&ran),
        format!("first set none {}\nfrom stdin\n", cwd.display())
    );
}

#[test]
fn its_output_is_kept_up_to_each_bound_and_says_it_was_cut() {
    let ran = sh("head -c 100000 /dev/zero; head -c 5000 /dev/zero >&2")
        .stdout_limit(1000)
        .stderr_limit(10)
        .run()
        .unwrap();
    assert!(ran.status.is_some_and(|s| s.success()));
    assert_eq!((ran.stdout.bytes.len(), ran.stdout.cut), (1000, true));
    assert_eq!((ran.stderr.bytes.len(), ran.stderr.cut), (10, true));
    let ran = sh("printf abc").stdout_limit(3).run().unwrap();
    assert_eq!((stdout(&ran).as_str(), ran.stdout.cut), ("abc", false));
}

#[test]
fn its_end_is_said_in_words() {
    let status = |script| sh(script).run().unwrap().status.unwrap();
    assert_eq!(ended_how(status("exit 3")), "exited with status 3");
    assert_eq!(ended_how(status("kill -USR1 $$")), "was ended by SIGUSR1");
}

#[test]
fn a_program_that_is_not_there_cannot_be_started() {
    let e = Job::new("accprobe-no-such-program", LIMIT)
        .run()
        .unwrap_err();
    assert!(matches!(e, RunError::Start(_)), "{e}");
}

/// Set for [`runs_a_job_until_it_is_killed`]: where its job writes its process id.
const JOB_PID: &str = "ACCPROBE_TEST_CHILD_JOB_PID";

/// The child of [`a_job_ends_with_the_process_that_runs_it`]: runs a job that never ends.
#[test]
#[ignore = "entry point of a child process"]
fn runs_a_job_until_it_is_killed() {
    let Some(pid_file) = std::env::var_os(JOB_PID) else {
        return;
    };
    let _ = sh(r#"echo $$ > "$0.part" && mv "$0.part" "$0"; exec sleep 300"#)
        .arg(pid_file)
        .run();
}

/// Whether process `pid` still runs (a zombie has ended).
pub(crate) fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn a_job_ends_with_the_process_that_runs_it() {
    // A run killed at once (SIGKILL, or `_exit` on a signal) leaves no disassembler or
    // compile worker running on, unwatched.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut runner = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child::tests::runs_a_job_until_it_is_killed"])
        .args(["--ignored", "--test-threads", "1"])
        .env(JOB_PID, &pid_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(&pid_file) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    runner.kill().unwrap();
    runner.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(&pid) {
        assert!(
            Instant::now() < deadline,
            "the job {pid} still runs after the process that ran it was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
