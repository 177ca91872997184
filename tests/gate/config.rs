//! One rule for every `ACCPROBE_*` variable (src/config.rs), seen from the suite's real
//! entry point in a child process (this test binary re-executed, see `child`): a value that
//! does not parse is a configuration error, exit 2 before anything runs, naming the variable
//! and the value; empty or only whitespace is unset. The rule's unit tests are beside it.

use accprobe::config;
use libtest_mimic::Arguments;
use std::path::Path;
use std::process::Command;

const CHILD: &str = "ACCPROBE_TEST_CONFIG_CHILD";

/// The child processes' entry point: the suite's `main_with`, as `tests/probe.rs` runs it,
/// on the libtest arguments after `--`.
#[test]
#[ignore = "entry point of the child processes that the tests below start"]
fn child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let args = std::env::args().skip_while(|a| a != "--").skip(1);
    let args = Arguments::from_iter(std::iter::once("probe".to_string()).chain(args));
    accprobe::interrupt::exit(accprobe::harness::main_with(args));
}

struct Run {
    code: Option<i32>,
    stderr: String,
}

/// The suite in a child process with `var=value`, every other `ACCPROBE_` variable of the
/// caller removed and every path in a folder of its own. Whether the JUnit file was written
/// comes back with it.
fn suite_with(tag: &str, var: &str, value: &str) -> (Run, bool) {
    let dir = std::env::temp_dir().join(format!("accprobe-config-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // The documented profile alone: without a GPU, its replayed cases run and pass.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::create_dir_all(dir.join("expectations/policies")).unwrap();
    for f in ["documented.yaml", "policies/study.yaml"] {
        std::fs::copy(
            root.join("expectations").join(f),
            dir.join("expectations").join(f),
        )
        .unwrap();
    }
    let junit = dir.join("junit.xml");
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "config::child", "--ignored", "--nocapture", "--"])
        .args(["--skip", "compile::"]);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("ACCPROBE_") || k.starts_with("NEXTEST_") {
            cmd.env_remove(k.as_ref());
        }
    }
    cmd.env(CHILD, "1")
        .env(config::EXPECTATIONS_ENV, dir.join("expectations"))
        .env(config::JUNIT_ENV, &junit)
        .env(config::RESULTS_ENV, dir.join("results.json"))
        .env(config::CACHE_ENV, "off")
        .env(config::LOCK_DIR_ENV, dir.join("locks"))
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env(var, value);
    let out = cmd.output().expect("the test binary starts");
    let written = Path::new(&junit).exists();
    let _ = std::fs::remove_dir_all(&dir);
    let run = Run {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    (run, written)
}

#[test]
fn a_contention_setting_that_does_not_parse_exits_2_before_anything_runs() {
    for (var, value) in [
        (config::RETRIES_ENV, "abc"),
        (config::RETRIES_ENV, "-1"),
        (config::RETRIES_ENV, "2.5"),
        (config::WAIT_ENV, "abc"),
        (config::WAIT_ENV, "-3"),
    ] {
        let (run, written) = suite_with("bad", var, value);
        assert_eq!(run.code, Some(2), "{var}={value}: {}", run.stderr);
        let says = format!("error: {var}={value:?}: expected ");
        assert!(run.stderr.contains(&says), "{var}={value}: {}", run.stderr);
        assert!(!written, "{var}={value}: nothing runs, no JUnit file");
    }
}

#[test]
fn an_empty_or_blank_contention_setting_is_unset() {
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        eprintln!("skipped: a real driver here (the run would measure the GPU)");
        return;
    }
    for value in ["", "  "] {
        let (run, written) = suite_with("blank", config::RETRIES_ENV, value);
        assert_eq!(run.code, Some(0), "{value:?}: {}", run.stderr);
        assert!(written, "{value:?}: the run ran");
    }
}

/// Every setting the table declares that can be malformed is refused by the front end, not
/// only those the harness's own tests try.
#[test]
fn every_setting_that_does_not_parse_exits_2() {
    let takes_text = [
        config::PROFILE_ENV,
        config::EXTRA_OPTIONS_ENV,
        config::NVRTC_ENV,
    ];
    for v in config::VARIABLES {
        if v.kind != config::Kind::Setting || takes_text.contains(&v.name) {
            continue;
        }
        // Paths take any bytes: nothing to refuse.
        if ["a folder", "a file", "a path"]
            .iter()
            .any(|p| v.takes.starts_with(p))
        {
            continue;
        }
        let (run, written) = suite_with("each", v.name, "not-a-value");
        assert_eq!(run.code, Some(2), "{}: {}", v.name, run.stderr);
        assert!(
            run.stderr.contains(&format!("error: {}=", v.name)),
            "{}: {}",
            v.name,
            run.stderr
        );
        assert!(!written, "{}", v.name);
    }
}

#[test]
fn a_history_store_that_does_not_parse_exits_2_and_shows_no_password() {
    for value in [
        "sqlite://runs.db",
        "postgress://host/db",
        "postgres://ci:s3cret@host:notaport/db",
    ] {
        let (run, written) = suite_with("history", config::HISTORY_ENV, value);
        assert_eq!(run.code, Some(2), "{value}: {}", run.stderr);
        assert!(
            run.stderr.contains("error: ACCPROBE_HISTORY=") && run.stderr.contains("postgres://"),
            "{value}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("s3cret"), "{}", run.stderr);
        assert!(!written, "{value}: nothing runs");
    }
}
