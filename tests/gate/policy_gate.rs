//! The policy gate's program source (docs/policies.md): the shipped example
//! `examples/policies/study.py` gives the study policy file's picks and verdicts, and a
//! program that goes wrong in any way fails every policy case with a message naming what,
//! where, and its stderr. Never a pass.

use crate::common::{load, root};
use accprobe::expectations::policy::Accumulation;
use accprobe::expectations::policy_error::{PolicyError, ProgramFault};
use accprobe::expectations::policy_source::{
    Picks, PolicyCommand, PolicyContext, PolicySource, Program,
};
use accprobe::expectations::profile::Profile;
use accprobe::model::place::Place;
use accprobe::model::variant::{Context, Sink, Workload};
use accprobe::policy_gate::{ask, ask_source, Measured, STDERR_LIMIT};
use accprobe::verdict::cases::{cases, policy_contexts, Check};
use accprobe::verdict::{judge_with, Outcome};
use std::path::Path;
use std::time::Duration;

/// python3, or `None` with the reason printed (CI has it, so there the tests run).
fn python3() -> Option<()> {
    let found = std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        println!("skipped: python3 is not on PATH, so examples/policies/study.py cannot run");
    }
    found.then_some(())
}

/// `profile` with its policy file replaced by the program `program args...`, named `name`.
fn with_command(
    profile: &Profile,
    name: &str,
    program: Program,
    args: &[&str],
    dir: &Path,
) -> Profile {
    let mut p = profile.clone();
    let gate = p.policy_gate.as_mut().unwrap();
    gate.source = PolicySource::Command(PolicyCommand {
        name: name.into(),
        program,
        args: args.iter().map(|a| a.to_string()).collect(),
        dir: dir.to_path_buf(),
        time_limit: Duration::from_secs(10),
        probe_context: gate.source.probe_context(),
    });
    p
}

fn study_py(profile: &Profile) -> Profile {
    let script = root().join("examples/policies/study.py");
    with_command(
        profile,
        "study",
        Program::OnPath("python3".into()),
        &[script.to_str().unwrap()],
        &root(),
    )
}

/// Every policy case's outcome, by name, with the picks asked once.
fn policy_outcomes(p: &Profile) -> Vec<(String, Outcome)> {
    let r = p.recorded.clone().unwrap();
    let picks = ask(p, Some(&r));
    cases(p)
        .into_iter()
        .filter(|c| matches!(c.check, Check::Policy { .. }))
        .map(|c| {
            let o = judge_with(&c, p, &r, picks.as_ref()).outcome;
            (c.name, o)
        })
        .collect()
}

#[test]
fn study_py_gives_the_policy_files_picks_and_verdicts_on_the_h200_run() {
    if python3().is_none() {
        return;
    }
    let yaml = load("h200");
    let program = study_py(&yaml);
    let r = yaml.recorded.as_ref();
    assert_eq!(
        ask(&program, r).unwrap().answers,
        ask(&yaml, r).unwrap().answers
    );
    let (a, b) = (policy_outcomes(&yaml), policy_outcomes(&program));
    // Every policy case: the contexts the recorded run predates are skipped.
    assert_eq!(a.len(), policy_contexts(&yaml, None).len());
    assert_eq!(a, b);
    // The H200 profile's known deviation applies to the program's case as to the file's.
    assert!(
        b.iter()
            .any(|(n, o)| n == "policy::study::chain13"
                && matches!(o, Outcome::KnownDeviation { .. }))
    );
}

#[test]
fn study_py_gives_the_policy_files_picks_over_a_grid_of_contexts() {
    if python3().is_none() {
        return;
    }
    let yaml = load("h200");
    let PolicySource::File(policy) = &yaml.policy_gate.as_ref().unwrap().source else {
        panic!("the H200 profile gates a policy file");
    };
    let mut contexts = Vec::new();
    for chain in 0..=40 {
        for register_headroom in [0, 1, 2, 3, 200, 255] {
            for bits in 0..8u32 {
                let kernel = Workload::REDUCTIONS[bits as usize % 5];
                contexts.push(PolicyContext {
                    name: format!("c{}", contexts.len()),
                    place: Place::probe(chain, Sink::A, Context::BASE),
                    accumulation: Accumulation {
                        chain,
                        register_headroom,
                        sink_isolated: bits & 1 != 0,
                        surrounding_ilp: bits & 2 != 0,
                        occupancy_safe: bits & 4 != 0,
                        side_chains: bits,
                        warps_per_sm: 8,
                        register_limit: 255,
                        kernel,
                        accumulations: kernel.accumulations(),
                        loads: kernel.loads(),
                    },
                });
            }
        }
    }
    let program = study_py(&yaml).policy_gate.unwrap().source;
    let measured: Vec<u32> = (1..=256).collect();
    let measured = Measured {
        probe: &measured,
        reductions: &measured,
    };
    let picks = ask_source(&program, &contexts, measured).answers.unwrap();
    let mut wide = 0;
    for c in &contexts {
        let want = policy.choose(&c.accumulation);
        wide += usize::from(want == 4);
        assert_eq!(picks[&c.name], want, "{c:?}");
    }
    assert!(wide > 0, "the grid reaches the wide split");
}

/// A program that is the shell script `body`, in a folder of its own, gating the H200
/// profile, asked with a `limit`. The profile keeps its base contexts only (no sink modes,
/// no `contexts:`), so that its policy is asked about three: chain 7, 13 and 29.
fn faulty(body: &str, limit: Duration) -> (tempfile::TempDir, Profile) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("policy.sh");
    std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut p = with_command(
        &load("h200"),
        "mine",
        Program::InFolder(script),
        &[],
        dir.path(),
    );
    if let accprobe::expectations::policy_source::PolicySource::Command(c) =
        &mut p.policy_gate.as_mut().unwrap().source
    {
        c.time_limit = limit;
    }
    p.probe.sink_modes.clear();
    p.probe.contexts.clear();
    (dir, p)
}

/// Every policy case of the H200 profile fails under `body`, each message holding every
/// one of `expect`; the message.
fn every_policy_case_fails(body: &str, expect: &[&str]) -> String {
    let (_dir, p) = faulty(body, Duration::from_secs(10));
    fails_with(&p, expect)
}

fn fails_with(p: &Profile, expect: &[&str]) -> String {
    let outcomes = policy_outcomes(p);
    assert_eq!(outcomes.len(), policy_contexts(p, None).len());
    let mut last = String::new();
    for (name, o) in outcomes {
        let Outcome::Fail(f) = o else {
            panic!("{name} did not fail: {o:?}");
        };
        let m = f.text();
        for e in expect {
            assert!(m.contains(e), "{name}: {e:?} not in {m}");
        }
        last = m;
    }
    last
}

/// A program answering the H200 profile's three contexts (chain 7, 13, 29) with `lines`.
fn answering(lines: &str) -> String {
    format!("cat > /dev/null\nprintf '{lines}'")
}

#[test]
fn a_program_that_answers_well_is_judged() {
    let (_dir, p) = faulty(&answering("2\\n2\\n2\\n"), Duration::from_secs(10));
    let outcomes = policy_outcomes(&p);
    assert!(
        outcomes
            .iter()
            .any(|(n, o)| n == "policy::mine::chain7" && matches!(o, Outcome::Pass(_))),
        "{outcomes:?}"
    );
}

#[test]
fn a_program_that_hangs_is_killed_at_its_time_limit() {
    let (_dir, p) = faulty("exec sleep 1000", Duration::from_millis(300));
    fails_with(
        &p,
        &["policy program mine", "within its time limit", "was killed"],
    );
}

#[test]
fn what_a_program_leaves_running_goes_with_it() {
    // The program answers and exits, leaving a child that holds its stdout open: the gate
    // ends that child rather than wait for the pipe to close.
    let (_dir, p) = faulty(
        "cat > /dev/null\nsleep 1000 &\nprintf '2\\n2\\n2\\n'",
        Duration::from_secs(600),
    );
    let picks = ask(&p, None).unwrap();
    assert_eq!(picks.of("chain13"), Ok(2), "{picks:?}");
}

#[test]
fn a_program_that_crashes_fails_with_its_signal() {
    every_policy_case_fails(
        "echo dying >&2\nkill -KILL $$",
        &["was ended by signal 9", "dying"],
    );
}

#[test]
fn an_answer_outside_the_grammar_fails_naming_its_line_column_and_context() {
    for (lines, says) in [
        ("2\\nbanana\\n2\\n", "line 2, column 1 (context chain13): found \"b\": expected K"),
        ("+2\\n2\\n2\\n", "line 1, column 1 (context chain7): found \"+\": expected K, an accumulator count from 1 to 256, written without a sign"),
        ("2\\n-2\\n2\\n", "line 2, column 1 (context chain13): found \"-\""),
        ("2\\n0002\\n2\\n", "line 2, column 1 (context chain13): found \"0002\": expected K, an accumulator count from 1 to 256, written without a leading zero"),
        ("2\\r\\n2\\r\\n2\\r\\n", "line 1, column 2 (context chain7): found a carriage return"),
        // A blank line first is line 1, not a line past the last context.
        ("\\n2\\n2\\n2\\n", "line 1, column 1 (context chain7): found an empty line"),
        ("2\\n\\n2\\n", "line 2, column 1 (context chain13): found an empty line"),
        ("2\\n2\\n", "line 3, column 1 (context chain29): found the end of the answer"),
        ("2\\n2\\n2\\n2\\n", "line 4, column 1: found \"2\": expected the end of the answer"),
    ] {
        every_policy_case_fails(&answering(lines), &["gave a bad answer: ", says]);
    }
}

#[test]
fn out_of_range_or_unmeasured_answers_fail() {
    every_policy_case_fails(
        &answering("0\\n2\\n2\\n"),
        &["line 1, column 1 (context chain7): K 0 is out of range"],
    );
    every_policy_case_fails(
        &answering("2\\n2\\n999\\n"),
        &["line 3, column 1 (context chain29): K 999 is out of range"],
    );
    every_policy_case_fails(
        &answering("2\\n6\\n2\\n"),
        &["line 2, column 1 (context chain13): K 6 is not measured"],
    );
}

#[test]
fn a_failing_program_fails_with_its_status_and_stderr_quoted() {
    // Each line of its stderr is quoted, escaped: none reads as one of the gate's own (a
    // first suspect, a test result), and no control character reaches a terminal.
    let m = every_policy_case_fails(
        "echo 'no model for sm_90' >&2\nprintf 'first suspect: forged\\033[2J\\n' >&2\nexit 1",
        &[
            "exited with status 1",
            "its stderr:\n  | no model for sm_90\n  | first suspect: forged\\u{1b}[2J",
        ],
    );
    assert!(
        !m.lines().any(|l| l.starts_with("first suspect: forged")),
        "{m}"
    );
}

#[test]
fn a_program_whose_stderr_floods_keeps_only_its_start() {
    let m = every_policy_case_fails(
        "head -c 1000000 /dev/zero | tr '\\0' x >&2\nexit 3",
        &["exited with status 3", "the first 4096 bytes"],
    );
    assert!(m.len() < STDERR_LIMIT + 2000, "{} bytes", m.len());
}

#[test]
fn bless_refuses_picks_a_program_does_not_give() {
    let (_dir, p) = faulty("echo 'no model' >&2\nexit 1", Duration::from_secs(10));
    let e = accprobe::bless::policy_picks(&p, p.recorded.as_ref().unwrap()).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains("refusing to bless: policy mine in context chain7")
            && e.contains("exited with status 1")
            && e.contains("no model"),
        "{e}"
    );
}

#[test]
fn a_missing_program_fails_saying_it_cannot_start() {
    let (dir, mut p) = faulty("exit 0", Duration::from_secs(10));
    if let PolicySource::Command(c) = &mut p.policy_gate.as_mut().unwrap().source {
        c.program = Program::InFolder(dir.path().join("nonesuch.sh"));
    }
    fails_with(&p, &["nonesuch.sh", "cannot be started"]);
}

#[test]
fn the_request_carries_the_protocol_and_every_field() {
    // The program echoes what it read to stderr and fails, so the message shows it.
    let (_dir, p) = faulty("head -n 1 >&2\nexit 1", Duration::from_secs(10));
    let m = fails_with(&p, &["exited with status 1"]);
    for field in [
        "\"protocol\":\"accprobe-policy/1\"",
        "\"context\":\"chain7\"",
        "\"chain\":7",
        "\"register_headroom\":",
        "\"sink_isolated\":true",
        "\"surrounding_ilp\":false",
        "\"occupancy_safe\":true",
        "\"side_chains\":0",
        "\"warps_per_sm\":",
        "\"register_limit\":",
    ] {
        assert!(m.contains(field), "{field} not in {m}");
    }
    // The accumulation as the run measured it: its ptxas counts and block, not the
    // probe_context's figures.
    let asked = policy_contexts(&p, p.recorded.as_ref());
    assert!(asked[0].accumulation.register_limit > 0, "{asked:?}");
    assert!(
        m.contains(&accprobe::policy_gate::request_line(&asked[0])),
        "{m}"
    );
}

#[test]
fn a_profile_names_its_program_and_it_runs_in_the_profiles_folder() {
    // Loaded from YAML: a relative program resolves under the profile's folder, whether
    // the profile is named absolutely or relatively to the working directory (the package
    // root, where the folder is made).
    let under = root().join("target/tmp");
    std::fs::create_dir_all(&under).unwrap();
    let dir = tempfile::tempdir_in(&under).unwrap();
    let h200 = std::fs::read_to_string(root().join("expectations/h200.yaml")).unwrap();
    let gate = "policy_gate:\n  file: policies/study.yaml\n  tolerance: 0.02\n";
    assert!(h200.contains(gate));
    let text = h200
        .replace(
            gate,
            "policy_gate:\n  command: [./bin/policy.sh, an argument]\n  name: mine\n  time_limit_s: 5\n  probe_context: {register_headroom: 200, sink_isolated: true, surrounding_ilp: false, occupancy_safe: true}\n  tolerance: 0.02\n",
        )
        // Its known deviations are the study policy's, at the base chains and contexts.
        .replace("case: policy::study::", "case: policy::mine::");
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    std::fs::create_dir_all(dir.path().join("recorded")).unwrap();
    std::fs::create_dir_all(dir.path().join("baselines")).unwrap();
    // The recorded runs (the profile's own, whichever it names) and its baselines.
    let recorded = std::fs::read_dir(root().join("expectations/recorded")).unwrap();
    let mut files: Vec<String> = recorded
        .map(|f| format!("recorded/{}", f.unwrap().file_name().to_string_lossy()))
        .collect();
    files.push("baselines/h200.yaml".into());
    for f in files {
        std::fs::copy(root().join("expectations").join(&f), dir.path().join(&f)).unwrap();
    }
    let script = dir.path().join("bin/policy.sh");
    // It answers from its working directory's file, with its argument: both must be right.
    std::fs::write(
        &script,
        "#!/bin/sh\ncat > /dev/null\n[ \"$1\" = \"an argument\" ] || exit 7\ncat answers\n",
    )
    .unwrap();
    // One line per context the policy is asked about: the base chains, the sink modes and
    // the profile's contexts at their chains.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = dir.path().join("h200.yaml");
    std::fs::write(&file, text).unwrap();
    let p = accprobe::catalog::load(&file).unwrap();
    let asked = policy_contexts(&p, None).len();
    std::fs::write(dir.path().join("answers"), "2\n".repeat(asked)).unwrap();
    let picks = ask(&p, None).unwrap();
    assert_eq!(picks.of("chain29"), Ok(2), "{picks:?}");
    let cwd = std::env::current_dir().unwrap();
    let relative = file.strip_prefix(&cwd).unwrap();
    assert!(relative.is_relative(), "{}", relative.display());
    let p = accprobe::catalog::load(relative).unwrap();
    let picks = ask(&p, None).unwrap();
    assert_eq!(picks.of("chain29"), Ok(2), "{picks:?}");
}

/// A copy of `sleep` in `dir`, so that the processes a test's program starts carry a
/// marker no other process has: the copy's path, in their command line.
fn sleeper(dir: &Path) -> String {
    let sleep = ["/bin/sleep", "/usr/bin/sleep"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("sleep is installed");
    let copy = dir.join("sleeper");
    std::fs::copy(sleep, &copy).unwrap();
    copy.display().to_string()
}

/// The processes whose command line holds `marker`.
fn running(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(marker) {
            found.push(format!("{}: {text}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// The program `body` (which may start "$S", a marked copy of sleep), asked with `limit`:
/// the picks, how long asking took, and the marked processes left afterwards.
fn asked_with_sleeper(body: &str, limit: Duration) -> (Picks, Duration, Vec<String>) {
    let (dir, p) = faulty(body, limit);
    let marker = sleeper(dir.path());
    let script = dir.path().join("policy.sh");
    let text = std::fs::read_to_string(&script).unwrap();
    let text = text.replacen("#!/bin/sh\n", &format!("#!/bin/sh\nS='{marker}'\n"), 1);
    std::fs::write(&script, text).unwrap();
    let start = std::time::Instant::now();
    let picks = ask(&p, None).unwrap();
    let took = start.elapsed();
    (picks, took, running(&marker))
}

#[test]
fn a_grandchild_in_a_new_session_holding_stdout_is_ended_at_the_limit() {
    let (picks, took, left) = asked_with_sleeper(
        "cat > /dev/null\nsetsid \"$S\" 20 &\nwait",
        Duration::from_millis(500),
    );
    let e = picks.of("chain7").unwrap_err();
    assert!(
        e.to_string()
            .contains("gave no answer within its time limit"),
        "{e}"
    );
    assert!(
        matches!(&e, PolicyError::Program(f) if f.fault == ProgramFault::TimedOut { limit: Duration::from_millis(500) }),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_grandchild_in_a_new_session_holding_stdout_ends_with_the_program() {
    let (picks, took, left) = asked_with_sleeper(
        "cat > /dev/null\nsetsid \"$S\" 20 &\nprintf '2\\n2\\n2\\n'",
        Duration::from_secs(10),
    );
    assert_eq!(picks.of("chain13"), Ok(2), "{picks:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_daemon_a_program_starts_does_not_outlive_the_gate() {
    // A daemon: a new session, every descriptor closed, its parent gone.
    let (picks, took, left) = asked_with_sleeper(
        "cat > /dev/null\n(setsid \"$S\" 20 < /dev/null > /dev/null 2>&1 &)\nsleep 20",
        Duration::from_millis(500),
    );
    let e = picks.of("chain7").unwrap_err().to_string();
    assert!(e.contains("within its time limit"), "{e}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_program_that_crashes_or_hangs_fails_the_known_deviations_too() {
    // Named study, so that the H200 profile's known deviation of policy::study::chain13
    // applies: a program that could not be asked fails it like every other policy case.
    for (body, limit, cause) in [
        (
            "kill -SEGV $$",
            Duration::from_secs(10),
            "was ended by signal 11",
        ),
        (
            "exec sleep 20",
            Duration::from_millis(300),
            "within its time limit",
        ),
    ] {
        let (_dir, mut p) = faulty(body, limit);
        if let PolicySource::Command(c) = &mut p.policy_gate.as_mut().unwrap().source {
            c.name = "study".into();
        }
        let outcomes = policy_outcomes(&p);
        let (_, o) = outcomes
            .iter()
            .find(|(n, _)| n == "policy::study::chain13")
            .expect("policy::study::chain13");
        let Outcome::Fail(f) = o else {
            panic!("{body}: {o:?}");
        };
        let m = f.text();
        assert!(
            m.starts_with("policy study gave no pick for chain13: policy program study")
                && f.verdict.contains(cause)
                && m.contains("not the known deviation")
                && m.contains("the study's policy picks acc2 at N=13"),
            "{m}"
        );
    }
}
