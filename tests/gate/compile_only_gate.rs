//! The compile-only gate on committed data, on any machine: the matrix the H200 ran
//! (NVRTC 13.0, sm_90) assembled from its recorded run and the SASS listing recorded from
//! its CUBIN, judged against the compile-only baselines (digests, loop schedules), with
//! another architecture, spills, merged partials and other toolchains' schedules injected.

use crate::common::*;
use accprobe::catalog;
use accprobe::model::compiled::{
    ArchOutcome, CompiledMatrix, CompiledVariant, PtxasFigures, ToolchainIdentity,
};
use accprobe::model::results::RunResults;
use accprobe::verdict::compile_only::{cases, evaluate, CompileCase};
use accprobe::verdict::Outcome;

/// The matrix the H200 ran (NVRTC 13.0, sm_90), as the compile-only gate sees it: the
/// recorded run's ptxas figures, and the SASS (with its schedule) of the listing
/// recorded from its CUBIN.
fn h200_matrix(arch: &str) -> (accprobe::expectations::profile::Profile, CompiledMatrix) {
    let p = load_as_recorded("h200");
    let mut r =
        RunResults::load(&root().join("expectations/recorded/h200-2026-12-04-contexts-wave.json"))
            .unwrap();
    let (_, listed) = crate::common::h200_with(&crate::common::h200_sass());
    for v in r.variants.iter_mut() {
        v.sass = listed.get(v.variant()).and_then(|x| x.sass.clone());
    }
    let variants = p
        .probe
        .variants()
        .iter()
        .map(|v| {
            let x = r.get(*v).unwrap();
            let res = x.resources.unwrap();
            let c = CompiledVariant {
                ptxas: PtxasFigures {
                    registers: res.registers,
                    stack_frame_bytes: res.stack_frame_bytes,
                    spill_store_bytes: res.spill_store_bytes,
                    spill_load_bytes: res.spill_load_bytes,
                },
                sass: x.sass.clone(),
            };
            (v.name(), c)
        })
        .collect();
    let m = CompiledMatrix {
        architecture: arch.into(),
        toolchain: ToolchainIdentity {
            key: "13.0".into(),
            nvrtc_version: "13.0".into(),
            release: Some("nvidia-cuda-nvrtc==13.0.88".into()),
            library: "libnvrtc.so.13".into(),
            supported: vec!["sm_90".into()],
        },
        disassembler: "nvdisasm 13.2.51".into(),
        variants,
        sass_unavailable: None,
        nvrtc_seconds: 0.0,
        sass_seconds: 0.0,
        cache: "off".into(),
    };
    (p, m)
}

fn find(p: &accprobe::expectations::profile::Profile, name: &str) -> CompileCase {
    cases(p)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name}"))
}

#[test]
fn the_h200_run_passes_every_compile_only_case_of_sm_90_with_nvrtc_13_0() {
    // The SASS the H200 ran is what NVRTC 13.0.88 compiles for sm_90 on a CPU-only
    // machine: the blessed compile-only digests equal the GPU run's.
    let (p, m) = h200_matrix("sm_90");
    let outcome = ArchOutcome::Compiled(Box::new(m));
    let mine: Vec<CompileCase> = cases(&p)
        .into_iter()
        .filter(|c| c.architecture == "sm_90" && c.toolchain == "13.0")
        .collect();
    assert_eq!(mine.len(), 2 + 2 * p.probe.variants().len());
    for c in &mine {
        match evaluate(c, &p, &outcome) {
            Outcome::Pass(_) => {}
            other => panic!("{}: {other:?}", c.name),
        }
    }
}

#[test]
fn another_architectures_digest_a_spill_and_a_merged_partial_fail() {
    let (p, m) = h200_matrix("sm_80");
    let case = find(
        &p,
        "compile::sm_80::nvrtc13.0::chain7_acc2_effective2::unchanged",
    );
    let msg = fail_text(evaluate(
        &case,
        &p,
        &ArchOutcome::Compiled(Box::new(m.clone())),
    ));
    assert!(
        msg.contains("the SASS changed (digest")
            && msg.contains("loop body now:")
            && msg.contains("--bless"),
        "{msg}"
    );

    let mut spilled = m.clone();
    spilled
        .variants
        .get_mut("chain29_acc16_effective16")
        .unwrap()
        .ptxas
        .spill_store_bytes = 8;
    let msg = fail_text(evaluate(
        &find(&p, "compile::sm_80::nvrtc13.0::no_spills"),
        &p,
        &ArchOutcome::Compiled(Box::new(spilled)),
    ));
    assert!(
        msg.contains("chain29_acc16_effective16: ptxas reports 8 bytes spill stores"),
        "{msg}"
    );

    let mut merged = m;
    let s = merged
        .variants
        .get_mut("chain13_acc4_effective4")
        .unwrap()
        .sass
        .as_mut()
        .unwrap();
    s.loop_partials = vec![7, 6];
    let msg = fail_text(evaluate(
        &find(
            &p,
            "compile::sm_80::nvrtc13.0::chain13_acc4_effective4::shape",
        ),
        &p,
        &ArchOutcome::Compiled(Box::new(merged)),
    ));
    assert!(msg.contains("expected E = 4"), "{msg}");
}

#[test]
fn an_unsupported_architecture_is_ignored_and_a_failed_one_fails() {
    let p = load("h200");
    let c = find(
        &p,
        "compile::sm_100::nvrtc12.4::chain7_acc1_effective1::shape",
    );
    let why = "NVRTC 12.4 does not support sm_100: its newest architecture is sm_90";
    assert_eq!(
        evaluate(&c, &p, &ArchOutcome::Unsupported(why.into())),
        Outcome::Skipped(why.into())
    );
    let m = fail_text(evaluate(
        &c,
        &p,
        &ArchOutcome::Failed("NVRTC could not compile".into()),
    ));
    assert!(m.contains("could not compile"), "{m}");
    // A compile that failed judged no measurement: the verdict, where, and the compiler's
    // log as the detail; no figures, no suspect, no environment.
    let f = crate::common::failed(evaluate(
        &c,
        &p,
        &ArchOutcome::Failed("sm_100: NVRTC could not compile\nline 1: error\nline 2".into()),
    ));
    assert_eq!(f.verdict, "sm_100: NVRTC could not compile");
    assert_eq!(f.detail, ["line 1: error\nline 2"]);
    assert_eq!(f.place.case, c.name);
    assert_eq!(f.place.subject.as_deref(), Some("sm_100"));
    assert!(f.measured.is_none() && f.expected.is_none() && f.suspect.is_none());
    assert!(f.measured_with.is_none());
    assert_eq!(
        f.text(),
        "sm_100: NVRTC could not compile\nline 1: error\nline 2"
    );
}

#[test]
fn compile_only_known_deviations_are_strict() {
    let file = root().join("expectations/h200.yaml");
    let text = std::fs::read_to_string(&file).unwrap().replacen(
        "known_deviations:\n",
        "known_deviations:\n  - case: compile::sm_90::nvrtc13.0::chain13_acc4_effective4::shape\n    reason: merged partials, measured\n",
        1,
    );
    let p = catalog::parse(&text, &file).unwrap();
    let (_, m) = h200_matrix("sm_90");
    let c = find(
        &p,
        "compile::sm_90::nvrtc13.0::chain13_acc4_effective4::shape",
    );
    let msg = fail_text(evaluate(
        &c,
        &p,
        &ArchOutcome::Compiled(Box::new(m.clone())),
    ));
    assert!(msg.contains("known deviation no longer present"), "{msg}");
    let mut merged = m;
    merged
        .variants
        .get_mut("chain13_acc4_effective4")
        .unwrap()
        .sass
        .as_mut()
        .unwrap()
        .loop_partials = vec![13];
    assert!(matches!(
        evaluate(&c, &p, &ArchOutcome::Compiled(Box::new(merged))),
        Outcome::KnownDeviation { .. }
    ));
}

/// [`h200_matrix`] for sm_90 as toolchain `tc` compiles it, from `listing`.
fn as_toolchain(tc: &str, listing: &str) -> ArchOutcome {
    let (_, mut m) = h200_matrix("sm_90");
    let (_, r) = crate::common::h200_with(listing);
    for (name, c) in m.variants.iter_mut() {
        c.sass = r
            .variants
            .iter()
            .find(|x| &x.name == name)
            .and_then(|x| x.sass.clone());
    }
    m.toolchain.key = tc.into();
    m.toolchain.nvrtc_version = tc.into();
    m.toolchain.release = None;
    ArchOutcome::Compiled(Box::new(m))
}

#[test]
fn a_toolchain_that_schedules_the_loop_otherwise_than_the_reference_is_red() {
    let p = load_as_recorded("h200");
    let sass = h200_sass();
    let stalled = crate::common::stall_7_before_the_clock_read(&sass);
    // 12.8 schedules sm_90 as 13.0, the reference, does: green; with another schedule
    // for one loop, red, naming it and showing its control fields.
    let case = find(&p, "compile::sm_90::nvrtc12.8::schedule");
    let o = evaluate(&case, &p, &as_toolchain("12.8", &sass));
    assert!(matches!(o, Outcome::Pass(_)), "{o:?}");
    let m = fail_text(evaluate(&case, &p, &as_toolchain("12.8", &stalled)));
    // One loop of every variant and context the profile measures.
    let loops = p.probe.variants().len();
    assert!(
        m.contains(&format!("1 of {loops} loops are scheduled otherwise than the blessed loop schedule of NVRTC 13.0 on sm_90"))
            && m.contains("chain7_acc1_effective1's loop now")
            && m.contains("B------:R-:W-:-:S07"),
        "{m}"
    );
    // 12.4 schedules most sm_90 loops otherwise (126 of the 129, h200.yaml): the profile
    // records it as a known deviation, which fails once 12.4 schedules as the reference
    // again.
    let case = find(&p, "compile::sm_90::nvrtc12.4::schedule");
    let o = evaluate(&case, &p, &as_toolchain("12.4", &stalled));
    assert!(matches!(o, Outcome::KnownDeviation { .. }), "{o:?}");
    let m = fail_text(evaluate(&case, &p, &as_toolchain("12.4", &sass)));
    assert!(m.contains("known deviation no longer present"), "{m}");
    // A compile-only baselines file without schedules still loads, and the case says
    // why it cannot judge instead of passing.
    let mut old = p.clone();
    let c = old.compile_only.as_mut().unwrap();
    c.baselines.as_mut().unwrap().schedules.clear();
    let case = find(&old, "compile::sm_90::nvrtc12.8::schedule");
    match evaluate(&case, &old, &as_toolchain("12.8", &sass)) {
        Outcome::Skipped(why) => assert!(why.contains("no schedule digest blessed"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_compile_bless_without_a_file_to_bless_into_is_refused_by_its_variant() {
    use accprobe::compile_only::{prepare_compile_bless, CompileBlessError, CompileOnlySession};
    let mut p = load_as_recorded("h200");
    p.compile_only.as_mut().unwrap().baselines = None;
    let (name, file) = (p.name.clone(), p.file.clone());
    let session = CompileOnlySession::new(p, root(), None, false).unwrap();
    let e = prepare_compile_bless(&session, "cargo xtask toolchains --bless").unwrap_err();
    assert!(
        e.to_string()
            .contains("names no compile_only.baselines file"),
        "{e}"
    );
    assert_eq!(
        e,
        CompileBlessError::NoBaselinesFile {
            profile: name,
            file
        }
    );
}
