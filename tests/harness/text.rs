//! Text a device or a file supplies (a GPU name, a driver version, a results file's
//! source, a profile's reason, the folder a run reads from) reaches every output of a run
//! escaped, newlines included (`src/text.rs`): no line of stdout, stderr or the JUnit file
//! begins with what such text held after a newline, and no control character reaches any
//! of them raw. In child processes, on a recorded H200 run whose texts were rewritten.

use crate::support::*;
use quick_junit::{Report, TestCaseStatus};
use std::path::Path;

/// What every forged line begins with.
const FORGED: &str = "FORGED";

/// The committed H200 run (its contexts too), as JSON to rewrite.
fn committed_run() -> serde_json::Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(
        root.join("expectations/recorded/h200-2026-12-04-contexts-wave.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The committed H200 run with a newline and a control character in each text its
/// environment and source carry.
fn forged_run(into: &Path) {
    let mut r = committed_run();
    let e = &mut r["environment"];
    for (field, value) in [
        ("gpu_name", "NVIDIA H200\nFORGED-GPU\u{1}"),
        ("driver_version", "580.159.04\nFORGED-DRIVER"),
        ("nvrtc_version", "13.0\nFORGED-NVRTC"),
    ] {
        e[field] = value.into();
    }
    r["source"] = "measured\nFORGED-SOURCE\u{7}".into();
    std::fs::write(into, serde_json::to_string(&r).unwrap()).unwrap();
}

/// The committed H200 run measured while another process, whose name holds a newline, had
/// a context on the GPU: every variant disturbed, with that cause.
fn busy_run(into: &Path) {
    let mut r = committed_run();
    let cause = "GPU busy: PID 4242 (x\nFORGED-PROCESS\u{1b}[2J) had a context on the GPU";
    let contaminated: serde_json::Map<String, serde_json::Value> = r["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap().to_string(), cause.into()))
        .collect();
    r["contention"] = serde_json::json!({
        "checks": 4,
        "retries": 2,
        "foreign_pids": [4242],
        "throttle_reasons": ["HW\nFORGED-THROTTLE"],
        "contaminated": contaminated,
    });
    std::fs::write(into, serde_json::to_string(&r).unwrap()).unwrap();
}

/// The sandbox's h200.yaml with a newline in the reason of its first known deviation.
fn forged_reason(profile: &Path) {
    let text = std::fs::read_to_string(profile).unwrap();
    let case = "  - case: invariant::acc2_is_peak::chain7\n    reason: >-\n";
    let (head, tail) = text.split_once(case).expect("the chain7 deviation");
    let rest: String = tail
        .lines()
        .skip_while(|l| l.starts_with("      "))
        .map(|l| format!("{l}\n"))
        .collect();
    let forged = "  - case: invariant::acc2_is_peak::chain7\n    reason: \"acc3 and acc5 beat acc2\\nFORGED-REASON\\u0001\"\n";
    std::fs::write(profile, format!("{head}{forged}{rest}")).unwrap();
}

/// Every text of `r` a viewer shows: names, messages, bodies, outputs and properties.
fn junit_texts(r: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for s in &r.test_suites {
        out.push(s.name.to_string());
        out.extend(s.system_out.iter().map(|x| x.to_string()));
        for p in &s.properties {
            out.push(format!("{}={}", p.name.as_str(), p.value.as_str()));
        }
        for c in &s.test_cases {
            out.push(c.name.to_string());
            out.extend(c.system_out.iter().map(|x| x.to_string()));
            match &c.status {
                TestCaseStatus::NonSuccess {
                    message,
                    description,
                    ..
                }
                | TestCaseStatus::Skipped {
                    message,
                    description,
                    ..
                } => {
                    out.extend(message.iter().map(|x| x.to_string()));
                    out.extend(description.iter().map(|x| x.to_string()));
                }
                TestCaseStatus::Success { .. } => {}
            }
        }
    }
    out
}

/// Why `text` (one output, named `what`) shows forged text raw, if it does.
fn raw_forgery(what: &str, text: &str) -> Option<String> {
    if let Some(at) = text.find(&format!("\n{FORGED}")) {
        let line = text[at + 1..].lines().next().unwrap_or("");
        return Some(format!("{what}: a line begins with forged text: {line:?}"));
    }
    let control = text
        .chars()
        .find(|&c| c.is_control() && c != '\n' && c != '\t');
    control.map(|c| format!("{what}: a raw {c:?}"))
}

/// The JUnit file of the run `o` in `sb`, once no output of it shows forged text raw.
fn no_raw_forgery(sb: &Sandbox, o: &Output) -> Report {
    let xml = std::fs::read_to_string(sb.paths().junit).unwrap();
    let report = Report::deserialize_from_str(&xml).unwrap();
    let mut problems: Vec<String> = [("stdout", &o.stdout), ("stderr", &o.stderr)]
        .into_iter()
        .filter_map(|(what, text)| raw_forgery(what, text))
        .collect();
    problems.extend(
        junit_texts(&report)
            .iter()
            .filter_map(|t| raw_forgery("the JUnit file", t)),
    );
    let first: Vec<&String> = problems.iter().take(5).collect();
    assert!(
        problems.is_empty(),
        "{} texts show forged text raw, the first: {first:#?}",
        problems.len()
    );
    report
}

#[test]
fn forged_lines_and_control_characters_reach_no_output_raw() {
    let sb = Sandbox::new("text-\nFORGED-PATH", &["h200", "documented"]);
    forged_reason(&sb.dir.join("expectations/h200.yaml"));
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    forged_run(&sb.dir.join("out/recorded.json"));
    let o = run_child(&mut child_command(
        "recorded",
        &sb.dir,
        &["--skip", "compile::"],
    ));
    assert_eq!(
        o.code,
        Some(101),
        "baselines::environment fails: {}",
        o.stderr
    );
    let report = no_raw_forgery(&sb, &o);
    // Shown, escaped: the message of baselines::environment goes on past the GPU name's
    // newline to the driver and NVRTC.
    let m = message(case_status(&report, "baselines::environment"));
    assert!(
        m.contains("NVIDIA H200\\nFORGED-GPU\\u{1} / driver 580.159.04\\nFORGED-DRIVER / NVRTC 13.0\\nFORGED-NVRTC"),
        "{m}"
    );
    for (what, text, shown) in [
        ("stdout", &o.stdout, "acc2\\nFORGED-REASON\\u{1}"),
        ("stdout", &o.stdout, "NVIDIA H200\\nFORGED-GPU"),
        ("stderr", &o.stderr, "text-\\nFORGED-PATH"),
    ] {
        assert!(text.contains(shown), "{what} shows {shown}: {text}");
    }
}

#[test]
fn a_busy_gpus_cause_reaches_no_output_raw() {
    let sb = Sandbox::new("text-busy", &["h200"]);
    std::fs::create_dir_all(sb.dir.join("out")).unwrap();
    busy_run(&sb.dir.join("out/recorded.json"));
    let o = run_child(&mut child_command(
        "recorded",
        &sb.dir,
        &["--skip", "compile::", "--skip", "replay::"],
    ));
    assert_eq!(o.code, Some(101), "gpu::busy fails: {}", o.stderr);
    let report = no_raw_forgery(&sb, &o);
    let texts = junit_texts(&report).join("\n");
    assert!(texts.contains("(x\\nFORGED-PROCESS\\u{1b}[2J)"), "{texts}");
}
