//! `cargo xtask` as a user runs it: the binary, from a working directory, with its exit
//! code and output. No GPU needed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn committed() -> PathBuf {
    checkout().join("expectations/recorded/h200-2026-11-30.json")
}

fn xtask(cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .current_dir(cwd)
        .env_remove("ACCPROBE_EXPECTATIONS")
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A copy of the checkout's expectations/ in `dir`.
fn copy_expectations(dir: &Path) {
    let from = checkout().join("expectations");
    for sub in ["", "baselines", "policies", "recorded"] {
        std::fs::create_dir_all(dir.join("expectations").join(sub)).unwrap();
        for e in std::fs::read_dir(from.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(
                    e.path(),
                    dir.join("expectations").join(sub).join(e.file_name()),
                )
                .unwrap();
            }
        }
    }
}

#[test]
fn a_copy_of_the_checkout_is_read_from_where_xtask_runs_not_where_it_was_built() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_expectations(dir);
    let results = committed();
    let results = results.to_str().unwrap();
    // The copy as it is passes, from its root and from a folder inside it.
    std::fs::create_dir_all(dir.join("sub/deeper")).unwrap();
    for cwd in [dir.to_path_buf(), dir.join("sub/deeper")] {
        let o = xtask(&cwd, &["gate", "--results", results]);
        assert!(o.status.success(), "{}", text(&o));
    }
    // Broken in the copy: the copy's profile is the one read.
    let profile = dir.join("expectations/h200.yaml");
    let broken = std::fs::read_to_string(&profile)
        .unwrap()
        .replacen("repeats:", "repeats: [", 1);
    std::fs::write(&profile, broken).unwrap();
    let o = xtask(dir, &["gate", "--results", results]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("could not load") && err.contains("h200.yaml"),
        "{}",
        text(&o)
    );
}

/// Whether a folder above the temp folder is a workspace: then no temp folder is outside
/// one, and the tests that need that cannot run.
fn temp_is_in_a_workspace() -> bool {
    std::env::temp_dir()
        .ancestors()
        .any(|a| a.join("expectations").is_dir() || a.join("Cargo.toml").is_file())
}

#[test]
fn outside_any_workspace_xtask_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    if temp_is_in_a_workspace() {
        return;
    }
    let o = xtask(dir, &["gate", "--results", "r.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no accprobe workspace here"),
        "{}",
        text(&o)
    );
}

#[test]
fn outside_any_workspace_a_report_with_every_path_given_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    if temp_is_in_a_workspace() {
        return;
    }
    let exp = checkout().join("expectations");
    let results = committed();
    for (out, history) in [("plain", None), ("off", Some("off"))] {
        let mut args = vec![
            "--expectations",
            exp.to_str().unwrap(),
            "report",
            results.to_str().unwrap(),
            "--out",
            out,
        ];
        if let Some(h) = history {
            args.extend(["--history", h]);
        }
        let o = xtask(dir, &args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o));
        assert!(dir.join(out).join("report.md").is_file(), "{}", text(&o));
    }
    // A history named but absent is that store's error, not the workspace's.
    let o = xtask(
        dir,
        &[
            "--expectations",
            exp.to_str().unwrap(),
            "report",
            results.to_str().unwrap(),
            "--out",
            "named",
            "--history",
            "none.sqlite",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr.contains("none.sqlite") && !stderr.contains("no accprobe workspace"),
        "{}",
        text(&o)
    );
}

#[test]
fn a_malformed_setting_is_a_configuration_error() {
    let results = committed();
    let results = results.to_str().unwrap();
    for (var, value) in [
        ("ACCPROBE_TRACE", "sometimes"),
        ("ACCPROBE_TRACE", "on"),
        ("ACCPROBE_COMPILE_PARTS", "0"),
        ("ACCPROBE_COMPILE_PARTS", "-1"),
        ("ACCPROBE_CONTENTION_RETRIES", "abc"),
        ("ACCPROBE_CONTENTION_WAIT", "abc"),
        ("ACCPROBE_LOCK_TIMEOUT", "abc"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["gate", "--results", results])
            .current_dir(checkout())
            .env(var, value)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{var}={value:?}: {}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("error: {var}=")),
            "{}",
            text(&o)
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(["gate", "--results", results])
            .current_dir(checkout())
            .env("ACCPROBE_TRACE", std::ffi::OsStr::from_bytes(b"1\xff"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains("not valid UTF-8"),
            "{}",
            text(&o)
        );
    }
    // Set well, the marks go to stderr and the command does its work.
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["gate", "--results", results])
        .current_dir(checkout())
        .env("ACCPROBE_TRACE", "yes")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
}

#[test]
fn gate_on_dev_zero_is_refused_at_once() {
    let o = xtask(&checkout(), &["gate", "--results", "/dev/zero"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("/dev/zero: cannot read results: /dev/zero is a character device"),
        "{}",
        text(&o)
    );
}

#[test]
fn sass_without_results_where_no_gpu_run_wrote_any_names_the_file_and_the_flag() {
    // It said only "cannot read results: No such file or directory".
    let tmp = tempfile::tempdir().unwrap();
    copy_expectations(tmp.path());
    let o = xtask(tmp.path(), &["sass", "chain29", "acc4"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("target/accprobe/results.json")
            && err.contains("--results")
            && err.contains("expectations/recorded/"),
        "{}",
        text(&o)
    );
    // A file given with --results that is not there is named as it was given.
    let o = xtask(
        tmp.path(),
        &["sass", "chain29", "acc4", "--results", "nowhere.json"],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("nowhere.json"), "{}", text(&o));
}

#[test]
fn sass_into_a_closed_pipe_ends_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader); // every write to stdout now fails with EPIPE
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["sass", "chain29", "acc4", "--results"])
        .arg(committed())
        .current_dir(checkout())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

#[test]
fn toolchains_compare_into_a_closed_pipe_ends_quietly() {
    let runs = checkout().join("docs/results/toolchains-2026-11-30");
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["toolchains", "--compare"])
        .arg(runs.join("results-nvrtc12.4.json"))
        .arg(runs.join("results-nvrtc12.8.json"))
        .current_dir(checkout())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
}

/// The committed run with `bad` in its GPU name and in every variant's SASS loop body,
/// written to `dir`.
fn with_bytes(dir: &Path, bad: &str) -> PathBuf {
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed()).unwrap()).unwrap();
    let name = r["environment"]["gpu_name"].as_str().unwrap().to_string();
    r["environment"]["gpu_name"] = format!("{name}{bad}").into();
    r["source"] = format!("measured{bad}").into();
    for v in r["variants"].as_array_mut().unwrap() {
        for l in v["sass"]["loop_body"].as_array_mut().unwrap() {
            *l = format!("{}{bad}", l.as_str().unwrap()).into();
        }
    }
    let file = dir.join("bytes.json");
    std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
    file
}

#[test]
fn control_characters_in_a_results_file_never_reach_the_terminal_raw() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let file = with_bytes(
        dir,
        "\u{1b}]0;owned\u{7}\u{1b}[2J\u{9b}\u{fffe}\nFORGED line",
    );
    let file = file.to_str().unwrap();
    // The gate fails baselines::environment (another GPU name than the blessed one) and
    // prints the name in its failure; sass prints it in its first line.
    for (args, code) in [
        (vec!["gate", "--results", file], 1),
        (vec!["sass", "chain29", "acc4", "--results", file], 0),
    ] {
        let o = xtask(&checkout(), &args);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", text(&o));
        assert!(
            !out.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{fffe}']),
            "{args:?}: {out:?}"
        );
        assert!(
            out.contains("\\u{1b}]0;owned"),
            "shown escaped: {args:?}: {out}"
        );
        // A newline in the name is escaped too: no line of the output is the forged one.
        assert!(
            !out.lines().any(|l| l.trim_start().starts_with("FORGED")),
            "a forged line: {args:?}: {out}"
        );
    }
}

#[test]
fn sass_and_gate_refuse_a_summary_its_loop_body_contradicts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed()).unwrap()).unwrap();
    for v in r["variants"].as_array_mut().unwrap() {
        v["sass"]["loop_body"]
            .as_array_mut()
            .unwrap()
            .retain(|l| !l.as_str().unwrap().starts_with("FFMA"));
    }
    let file = dir.join("no-ffma.json");
    std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
    let file = file.to_str().unwrap();
    for args in [
        vec!["sass", "chain7", "acc1", "--results", file],
        vec!["gate", "--results", file],
    ] {
        let o = xtask(&checkout(), &args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(file) && err.contains("but its loop_body has 0 FFMAs"),
            "{args:?}: {}",
            text(&o)
        );
        assert!(
            !String::from_utf8_lossy(&o.stdout).contains("FFMAs"),
            "{args:?}: {}",
            text(&o)
        );
    }
}

#[test]
fn toolchains_says_require_toolchains_is_set_only_when_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path();
    let run = |require: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
        c.args(["toolchains", "--profile", "h200"])
            .current_dir(checkout())
            .env("ACCPROBE_TOOLCHAINS", empty)
            .env_remove("ACCPROBE_NVRTC")
            .env_remove("ACCPROBE_REQUIRE_TOOLCHAINS");
        if let Some(v) = require {
            c.env("ACCPROBE_REQUIRE_TOOLCHAINS", v);
        }
        let o = c.output().unwrap();
        // No toolchain is installed: the command, which compiles every one, fails.
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        text(&o)
    };
    let unset = run(None);
    assert!(
        unset.contains("NVRTC 12.4, 12.8 and 13.0 not installed in"),
        "{unset}"
    );
    assert!(
        !unset.contains("ACCPROBE_REQUIRE_TOOLCHAINS is set"),
        "{unset}"
    );
    let set = run(Some("1"));
    assert!(set.contains("ACCPROBE_REQUIRE_TOOLCHAINS is set"), "{set}");
}

#[test]
fn toolchains_with_none_installed_says_once_what_to_install_and_counts_no_failures() {
    // It printed a FAILED row, and the same advice, for each architecture and toolchain,
    // and counted every case failing (4,680, sm_100 and sm_120 under 12.4 among them,
    // which NVRTC 12.4 does not support and the profile ignores).
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["toolchains", "--profile", "h200"])
        .current_dir(checkout())
        .env("ACCPROBE_TOOLCHAINS", tmp.path())
        .env_remove("ACCPROBE_NVRTC")
        .env_remove("ACCPROBE_REQUIRE_TOOLCHAINS")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let all = text(&o);
    assert_eq!(all.matches("ci/toolchains.sh").count(), 1, "{all}");
    assert!(
        all.contains("NVRTC 12.4, 12.8 and 13.0")
            && all.contains(&tmp.path().display().to_string()),
        "{all}"
    );
    assert!(
        !all.contains(" fail") && !all.contains("FAIL"),
        "nothing ran, so nothing failed: {all}"
    );
}

#[test]
fn sass_with_a_short_or_non_ascii_digest_prints_it_without_a_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(committed()).unwrap()).unwrap();
    for digest in ["ab", "éééé"] {
        for v in r["variants"].as_array_mut().unwrap() {
            v["sass"]["digest"] = digest.into();
        }
        let file = dir.join("short.json");
        std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
        let o = xtask(
            &checkout(),
            &[
                "sass",
                "chain29",
                "acc4",
                "--results",
                file.to_str().unwrap(),
            ],
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(&format!("digest {digest}\n")),
            "{}",
            text(&o)
        );
    }
}

#[test]
fn output_that_cannot_reach_stdout_fails_the_command_with_a_plain_message() {
    let wave = checkout().join("expectations/recorded/h200-2026-11-30-wave.json");
    let (wave, serial) = (wave.to_str().unwrap(), committed());
    for args in [
        vec!["bless", "--profile", "h200", "--from", wave, "--dry-run"],
        vec!["gate", "--results", wave],
        vec![
            "sass",
            "chain29",
            "acc4",
            "--results",
            serial.to_str().unwrap(),
        ],
    ] {
        // Each succeeds when its output is read: a full stdout is then the only failure.
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .current_dir(checkout())
            .env_remove("ACCPROBE_EXPECTATIONS")
            .env_remove("CI")
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
            .args(&args)
            .current_dir(checkout())
            .env_remove("ACCPROBE_EXPECTATIONS")
            .env_remove("CI")
            .stdout(std::fs::File::create("/dev/full").unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(
            err.matches("error: cannot write the output to stdout: No space left on device")
                .count(),
            1,
            "{args:?}: {err}"
        );
    }
}

/// `cargo xtask` with none of the variables that announce CI.
fn xtask_outside_ci(cwd: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(args)
        .current_dir(cwd)
        .env_remove("ACCPROBE_EXPECTATIONS");
    for v in accprobe::config::CI_VARIABLES {
        cmd.env_remove(v);
    }
    cmd.output().unwrap()
}

#[test]
fn onboard_refuses_under_ci_and_over_an_existing_profile_before_measuring() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_expectations(dir);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_xtask"));
    cmd.args(["onboard"])
        .current_dir(dir)
        .env_remove("ACCPROBE_EXPECTATIONS");
    for v in accprobe::config::CI_VARIABLES {
        cmd.env_remove(v);
    }
    let o = cmd.env("GITHUB_ACTIONS", "true").output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("GITHUB_ACTIONS=\"true\" is set"),
        "{}",
        text(&o)
    );
    let before = std::fs::read(dir.join("expectations/h200.yaml")).unwrap();
    let o = xtask_outside_ci(dir, &["onboard", "--name", "h200"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("expectations/h200.yaml: exists: onboarding never overwrites"),
        "{t}"
    );
    assert_eq!(
        std::fs::read(dir.join("expectations/h200.yaml")).unwrap(),
        before
    );
}

#[test]
fn onboard_compare_prints_a_verdict() {
    let dir = checkout();
    let o = xtask_outside_ci(
        &dir,
        &[
            "onboard",
            "--compare",
            "expectations/h200.yaml",
            "--against",
            "expectations/h200.yaml",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(
        text(&o).contains("verdict: the draft AGREES"),
        "{}",
        text(&o)
    );
    // The documented profile has no known deviations and no baselines: it disagrees.
    let o = xtask_outside_ci(
        &dir,
        &[
            "onboard",
            "--compare",
            "expectations/documented.yaml",
            "--against",
            "expectations/h200.yaml",
        ],
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("verdict: the draft DISAGREES"),
        "{}",
        text(&o)
    );
}
