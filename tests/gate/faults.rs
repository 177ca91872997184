//! The fault table: each row injects one kind of fault into data recorded on the H200
//! (results, ptxas log, SASS) or into the study's table, and names the case that must fail
//! and words its message must contain; a new fault is one row. What is not a fault is in
//! `tests/gate/verdicts.rs`.

use crate::common::*;
use accprobe::compile::ptxas;
use accprobe::model::results::RunResults;
use accprobe::verdict::cases::cases;
use accprobe::verdict::evaluate;
use std::path::Path;

struct Fault {
    kind: &'static str,
    /// Injects the fault and returns the message of the case that must catch it.
    caught_by: fn() -> String,
    /// Words the message must contain.
    says: &'static [&'static str],
}

const FAULTS: &[Fault] = &[
    Fault {
        kind: "one variant 3% slower",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            scale(&mut r, "chain13_acc4_effective4", 0.97);
            failure(&p, &r, "probe::chain13_acc4_effective4")
        },
        says: &["-3.00%", "slower than its baseline", "re-bless"],
    },
    Fault {
        kind: "one variant 3% faster (the gate is two-sided)",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            scale(&mut r, "chain29_acc2_effective2_sinkD", 1.03);
            failure(&p, &r, "probe::chain29_acc2_effective2_sinkD")
        },
        says: &["+3.00%", "faster than its baseline"],
    },
    Fault {
        kind: "acc3 above acc2 where acc2 must peak",
        caught_by: || {
            let p = load("documented");
            let mut r = p.recorded.clone().unwrap();
            variant(&mut r, "chain29_acc3_effective3").mean_progress = 36_500.0;
            failure(&p, &r, "invariant::acc2_is_peak::chain29")
        },
        says: &["acc2 is not the peak", "acc3 36500.0", "acc2 36146.7"],
    },
    Fault {
        kind: "a flat acc2/acc1 trend",
        caught_by: || {
            let p = load("documented");
            let mut r = p.recorded.clone().unwrap();
            let n7 = 52_404.9 / 49_078.0;
            variant(&mut r, "chain13_acc2_effective2").mean_progress = 38_814.2 * n7;
            variant(&mut r, "chain29_acc2_effective2").mean_progress = 28_719.5 * n7;
            failure(&p, &r, "invariant::acc2_gain_grows")
        },
        says: &["does not grow", "N=7 -> N=13", "N=13 -> N=29"],
    },
    Fault {
        kind: "a spill in the ptxas log",
        caught_by: || {
            // ptxas reporting spills for chain29_acc16 (after a register cap, say), read
            // through the parser from the log recorded on the H200.
            let log = std::fs::read_to_string(root().join("tests/data/h200/ptxas.log")).unwrap();
            let spilled = log.replacen(
                "Function properties for chain29_acc16_effective16\nptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads",
                "Function properties for chain29_acc16_effective16\nptxas         .     24 bytes stack frame, 24 bytes spill stores, 24 bytes spill loads",
                1,
            );
            assert_ne!(spilled, log, "the recorded log has the expected shape");
            let reports = ptxas::parse(&spilled).unwrap();
            let (p, mut r) = h200_with(&h200_sass());
            for v in r.variants.iter_mut() {
                let rep = reports[&v.name];
                let res = v.resources.as_mut().unwrap();
                res.stack_frame_bytes = rep.stack_frame_bytes;
                res.spill_store_bytes = rep.spill_store_bytes;
                res.spill_load_bytes = rep.spill_load_bytes;
            }
            let variant_case = failure(&p, &r, "probe::chain29_acc16_effective16");
            assert!(variant_case.contains("spills"), "{variant_case}");
            failure(&p, &r, "invariant::no_spills::ptxas_report")
        },
        says: &[
            "chain29_acc16_effective16",
            "ptxas reports 24 bytes spill stores, 24 bytes spill loads",
        ],
    },
    Fault {
        kind: "local memory > 0",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            variant(&mut r, "chain7_acc8_effective7_sinkC")
                .resources
                .as_mut()
                .unwrap()
                .local_bytes = 16;
            failure(&p, &r, "invariant::no_spills::local_memory")
        },
        says: &["chain7_acc8_effective7_sinkC: 16 bytes local memory"],
    },
    Fault {
        kind: "an STL in the SASS",
        caught_by: || {
            let text = h200_sass();
            let at = function_range(&text, "chain13_acc2_effective2").start;
            let rel = text[at..].find("FFMA R").unwrap();
            let stl = format!(
                "{}STL [R1], R{}",
                &text[..at + rel],
                &text[at + rel + "FFMA R".len()..]
            );
            let (p, r) = h200_with(&stl);
            failure(&p, &r, "invariant::no_spills::sass")
        },
        says: &[
            "chain13_acc2_effective2: local memory instructions in the SASS",
            "STL [R1]",
        ],
    },
    Fault {
        kind: "a changed SASS digest (a reuse flag dropped before the loop)",
        caught_by: || {
            let text = h200_sass();
            let at = function_range(&text, "chain29_acc4_effective4").start;
            let rel = text[at..].find(".reuse").unwrap();
            let changed = format!(
                "{}{}",
                &text[..at + rel],
                &text[at + rel + ".reuse".len()..]
            );
            // Blessed from the unchanged SASS.
            let (p, r) = h200_blessed(&text, &changed);
            failure(&p, &r, "sass::chain29_acc4_effective4::unchanged")
        },
        // The first `.reuse` of that kernel is before the loop.
        says: &[
            "the SASS changed (digest",
            "the loop body is the same, the change is outside it",
            "re-bless",
        ],
    },
    Fault {
        kind: "a variant missing from the results",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            r.variants.retain(|v| v.name != "chain7_acc3_effective3");
            failure(&p, &r, "invariant::acc2_is_peak::chain7")
        },
        says: &["no result for chain7_acc3_effective3"],
    },
    Fault {
        kind: "progress NaN",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            variant(&mut r, "chain13_acc8_effective8").mean_progress = f64::NAN;
            failure(&p, &r, "probe::chain13_acc8_effective8")
        },
        says: &["has progress NaN", "did not run"],
    },
    Fault {
        kind: "progress zero",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            variant(&mut r, "chain13_acc8_effective8").mean_progress = 0.0;
            failure(&p, &r, "invariant::acc2_is_peak::chain13")
        },
        says: &["chain13_acc8_effective8 has progress 0", "did not run"],
    },
    Fault {
        kind: "an output element never written",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            variant(&mut r, "chain7_acc1_effective1")
                .output_problems
                .push("repeat 4: 1 of 256 output elements never written".into());
            failure(&p, &r, "probe::chain7_acc1_effective1")
        },
        says: &["invalid output: repeat 4: 1 of 256 output elements never written"],
    },
    Fault {
        kind: "results from another GPU than the baselines'",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            r.environment.as_mut().unwrap().gpu_name = "NVIDIA H100 80GB HBM3".into();
            failure(&p, &r, "baselines::environment")
        },
        says: &[
            "results from NVIDIA H100 80GB HBM3",
            "measured on NVIDIA H200",
            "re-bless",
        ],
    },
    Fault {
        kind: "results from another toolchain than the baselines'",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            r.environment.as_mut().unwrap().nvrtc_version = "13.1".into();
            failure(&p, &r, "baselines::environment")
        },
        says: &["NVRTC 13.1", "NVRTC 13.0", "another GPU or toolchain"],
    },
    Fault {
        kind: "a truncated results file",
        caught_by: || {
            let text =
                std::fs::read_to_string(root().join("expectations/recorded/h200-2026-11-30.json"))
                    .unwrap();
            let cut = &text[..text.len() / 2];
            RunResults::from_json(cut, Path::new("expectations/recorded/cut.json"))
                .unwrap_err()
                .to_string()
        },
        says: &[
            "expectations/recorded/cut.json:",
            "not a results file",
            "EOF",
        ],
    },
    Fault {
        kind: "progress above the physical ceiling (the chain optimised away)",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            let v = variant(&mut r, "chain29_acc1_effective1");
            v.summary.as_mut().unwrap().max = 1_000_000;
            failure(&p, &r, "validity::chain29_acc1_effective1::ceiling")
        },
        says: &["above the physical ceiling", "optimised away"],
    },
    Fault {
        kind: "launches far longer than budget / SM clock (a wrong clock or budget)",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            let v = variant(&mut r, "chain13_acc2_effective2");
            for ms in v.launch_ms.iter_mut().take(6) {
                *ms = 9.0;
            }
            failure(&p, &r, "validity::chain13_acc2_effective2::duration")
        },
        says: &[
            "median 9.0000 ms vs budget / SM clock = 5.0505 ms",
            "+78.20%",
        ],
    },
    Fault {
        kind: "the policy's pick falls clearly below the best K",
        caught_by: || {
            let (p, mut r) = h200_with(&h200_sass());
            scale(&mut r, "chain29_acc2_effective2", 0.9);
            failure(&p, &r, "policy::study::chain29")
        },
        says: &[
            "policy study picks acc2 at chain 29",
            "clearly below the best K",
        ],
    },
];

#[test]
fn every_fault_kind_is_caught_with_a_message_that_names_it() {
    // The issue asks for at least twelve kinds.
    assert!(FAULTS.len() >= 12, "{} fault kinds", FAULTS.len());
    let mut missed = Vec::new();
    for f in FAULTS {
        let message = (f.caught_by)();
        for words in f.says {
            if !message.contains(words) {
                missed.push(format!("{}: message lacks {words:?}:\n{message}", f.kind));
            }
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n\n"));
}

#[test]
fn without_faults_the_same_cases_hold() {
    let (p, r) = h200_with(&h200_sass());
    for c in cases(&p) {
        let o = evaluate(&c, &p, &r);
        assert!(!o.is_fail(), "{}: {o:?}", c.name);
    }
}
