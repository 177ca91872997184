//! Compile-only cases at list time, in child processes (this test binary re-executed, see
//! `child`): the cases of a toolchain that is not installed are listed as ignored.

use crate::support::*;
use quick_junit::{Report, TestCaseStatus};

#[test]
fn compile_only_cases_of_a_toolchain_not_installed_are_ignored_at_list_time() {
    // nextest only learns of an ignored case from `--list --ignored`: a case that is
    // ignored only when it runs shows PASS there, although nothing was compiled.
    let sb = Sandbox::new("toolchain-missing", &["h200"]);
    let none_installed = sb.dir.join("out/toolchains");
    std::fs::create_dir_all(&none_installed).unwrap();
    let listed = || -> Vec<String> {
        let o = run_child(
            child_command(
                "main",
                &sb.dir,
                &["--list", "--format", "terse", "--ignored", "compile::"],
            )
            .env("ACCPROBE_TOOLCHAINS", &none_installed),
        );
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        o.stdout
            .lines()
            .filter_map(|l| l.strip_suffix(": test"))
            .map(String::from)
            .collect()
    };
    // Not asked for (ACCPROBE_REQUIRE_TOOLCHAINS unset): one ignored case per toolchain,
    // not one per architecture and check.
    let ignored = listed();
    let profile = accprobe::catalog::load(&sb.dir.join("expectations/h200.yaml")).unwrap();
    let toolchains = profile.compile_only.as_ref().unwrap().toolchains.clone();
    let want: Vec<String> = toolchains
        .iter()
        .map(|tc| format!("compile::h200::nvrtc{tc}"))
        .collect();
    assert_eq!(ignored, want);

    // A run says why (what to install, why not the system NVRTC), in JUnit and in one
    // line of the closing summary.
    let run = run_child(
        child_command("main", &sb.dir, &["--include-ignored", "compile::"])
            .env("ACCPROBE_TOOLCHAINS", &none_installed),
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let compile_cases = accprobe::verdict::compile_only::cases(&profile).len();
    let line = format!(
        "accprobe summary:   ignored: pinned NVRTC toolchains of the compile-only gate not \
         installed: {} (one case per profile and \
         toolchain, for {compile_cases} compile-only cases; ci/toolchains.sh installs them): {}",
        toolchains.join(", "),
        toolchains.len()
    );
    assert!(run.stdout.contains(&line), "{line}\n{}", run.stdout);
    assert_eq!(
        run.stdout
            .lines()
            .filter(|l| l.starts_with("accprobe summary:   ignored:"))
            .count(),
        1,
        "{}",
        run.stdout
    );
    let r =
        Report::deserialize_from_str(&std::fs::read_to_string(sb.paths().junit).unwrap()).unwrap();
    let suite = r
        .test_suites
        .iter()
        .find(|s| s.name.as_str() == "compile-only h200")
        .unwrap();
    assert!(!suite.test_cases.is_empty());
    for c in &suite.test_cases {
        match &c.status {
            TestCaseStatus::Skipped {
                ty, description, ..
            } => {
                assert_eq!(ty.as_deref(), Some("no-toolchain"), "{}", c.name.as_str());
                let why = description
                    .as_ref()
                    .map(|d| d.to_string())
                    .unwrap_or_default();
                assert!(
                    why.contains("ci/toolchains.sh") && why.contains("system NVRTC"),
                    "{why}"
                );
                // Which NVRTC is meant: the gate's pinned build, not the one a GPU suite
                // beside it may be running.
                assert!(
                    why.starts_with("no pinned NVRTC ") && !why.contains("is not installed"),
                    "{why}"
                );
            }
            other => panic!("{}: {other:?}", c.name.as_str()),
        }
    }

    // Asked for: every case is listed, to run and fail.
    let required = run_child(
        child_command(
            "main",
            &sb.dir,
            &["--list", "--format", "terse", "compile::"],
        )
        .env("ACCPROBE_TOOLCHAINS", &none_installed)
        .env("ACCPROBE_REQUIRE_TOOLCHAINS", "1"),
    );
    assert_eq!(required.code, Some(0), "{}", required.stderr);
    assert_eq!(
        required
            .stdout
            .lines()
            .filter(|l| l.ends_with(": test"))
            .count(),
        compile_cases,
        "{}",
        required.stdout
    );
}
