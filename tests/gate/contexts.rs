//! Contexts (docs/study.md, "Contexts"): the SASS shape of side chains on real NVRTC
//! output, a spill in a pressure context, and the policy asked about each context.
//!
//! The SASS and ptxas report are real: `tests/data/contexts-sm90/`, compiled on a CPU by
//! NVRTC 13.0 for sm_90 (their headers say how). Every progress figure below is made up
//! (SYNTHETIC): these tests judge the verdicts' logic, not an H200.

use crate::common::{outcome, root};
use accprobe::catalog;
use accprobe::compile::{ptxas, sass};
use accprobe::expectations::profile::Profile;
use accprobe::model::results::{Resources, RunResults, SassSummary, VariantResult, SCHEMA};
use accprobe::model::variant::Variant;
use accprobe::verdict::cases::cases;
use accprobe::verdict::Outcome;
use std::collections::BTreeMap;

/// A profile with the shipped study policy and these contexts (its path puts it beside
/// `expectations/policies/`).
fn profile(contexts: &str) -> Profile {
    let text = format!(
        "\
name: ctx
description: contexts under test
probe:
  blocks: 1
  block_threads: 256
  warmup_launches: 0
  repeats: 2
  budget_cycles: 1000
  chains: [7, 13, 29]
  accumulators: [1, 2, 4, 8]
invariants:
  - no_spills: {{}}
sink_isolation:
  modes: [D]
  accumulators: [1, 2, 4]
policy_gate:
  file: policies/study.yaml
  tolerance: 0.02
contexts:
  chains: [7, 13, 29]
  accumulators: [1, 2, 4, 8]
{contexts}"
    );
    catalog::parse(&text, &root().join("expectations/ctx.yaml")).unwrap()
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(root().join("tests/data/contexts-sm90").join(name)).unwrap()
}

fn fixture_sass() -> BTreeMap<String, SassSummary> {
    sass::parse(&fixture("nvdisasm.txt"))
        .unwrap()
        .into_iter()
        .map(|(k, body)| (k, sass::summarise(&body).unwrap()))
        .collect()
}

/// SYNTHETIC results for every variant of `p`: `progress(v)` in every warp of every
/// repeat, 24 registers and no spill unless the fixture's ptxas report names the kernel.
fn results(p: &Profile, progress: impl Fn(&Variant) -> u64) -> RunResults {
    let reports = ptxas::parse(&fixture("ptxas.log")).unwrap();
    let variants = p
        .probe
        .variants()
        .iter()
        .map(|v| {
            let warps = p.probe.warps_of(v) as usize;
            let mut r = VariantResult::measured(*v, vec![vec![progress(v); warps]; 2]);
            let rep = reports.get(&v.name());
            r.resources = Some(Resources {
                registers: rep.map_or(24, |x| x.registers),
                stack_frame_bytes: rep.map_or(0, |x| x.stack_frame_bytes),
                spill_store_bytes: rep.map_or(0, |x| x.spill_store_bytes),
                spill_load_bytes: rep.map_or(0, |x| x.spill_load_bytes),
                local_bytes: rep.map_or(0, |x| x.stack_frame_bytes),
            });
            r
        })
        .collect();
    RunResults {
        schema: SCHEMA,
        profile: p.name.clone(),
        source: "synthetic".into(),
        environment: None,
        variants,
        mode: Default::default(),
        settings: Some(p.probe.run_settings()),
        timings: None,
        sass_unavailable: None,
        sass_unreadable: None,
        contention: None,
    }
}

fn pass_text(o: Outcome) -> String {
    match o {
        Outcome::Pass(m) => m,
        other => panic!("expected a pass, got {other:?}"),
    }
}

fn fail_text(o: Outcome) -> String {
    match o {
        Outcome::Fail(f) => f.text(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn side_chains_read_in_the_sass_shape_of_real_nvrtc_output() {
    let p = profile("  side_chains: [4]\n");
    let sass = fixture_sass();
    let mut r = results(&p, |_| 1000);
    for v in &mut r.variants {
        v.sass = sass.get(&v.name).cloned();
    }
    for name in [
        "chain13_acc1_effective1_s4",
        "chain13_acc2_effective2_s4",
        "chain29_acc4_effective4_s4",
        "chain7_acc8_effective7_s4",
    ] {
        let m = pass_text(outcome(&p, &r, &format!("sass::{name}::shape")));
        assert!(m.contains("of which 4 side chains"), "{name}: {m}");
    }
    // The same loop judged as if it had no side chains: four FFMAs and chains too many.
    let s4 = sass["chain13_acc2_effective2_s4"].clone();
    crate::common::variant(&mut r, "chain13_acc2_effective2").sass = Some(s4.clone());
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc2_effective2::shape"));
    assert!(m.contains("expected N = 13 per iteration"), "{m}");
    // A side chain the compiler dropped: one FFMA and one chain short.
    let mut dropped = s4;
    let last = dropped.loop_partials.len() - 1;
    dropped.loop_partials.remove(last);
    dropped.loop_ffma -= 1;
    crate::common::variant(&mut r, "chain13_acc2_effective2_s4").sass = Some(dropped);
    let m = fail_text(outcome(&p, &r, "sass::chain13_acc2_effective2_s4::shape"));
    assert!(m.contains("expected N + S = 13 + 4"), "{m}");
    assert!(m.contains("expected E + S = 2 + 4"), "{m}");
}

#[test]
fn a_spill_under_register_pressure_is_data_not_a_no_spills_failure() {
    let p = profile("  corners:\n    - {warps: 32, live_values: 48}\n");
    let r = results(&p, |_| 1000);
    // The fixture's real ptxas report: acc8 at 32 warps with 48 live values spills.
    let spilled = "chain13_acc8_effective8_w32_v48";
    let res = r.variants.iter().find(|v| v.name == spilled).unwrap();
    assert!(res.resources.unwrap().spill_store_bytes > 0);
    let m = pass_text(outcome(&p, &r, "invariant::no_spills::ptxas_report"));
    assert!(
        m.contains(&format!(
            "in {} variants",
            p.probe.main_variants().len() + 9
        )),
        "{m}"
    );
    let m = pass_text(outcome(&p, &r, &format!("probe::{spilled}")));
    assert!(
        m.contains("spill stores") && m.contains("data for the policy, not a failure"),
        "{m}"
    );
    // The same spill in the base context still fails both.
    let mut base = r.clone();
    crate::common::variant(&mut base, "chain13_acc8_effective8").resources = res.resources;
    assert!(
        fail_text(outcome(&p, &base, "invariant::no_spills::ptxas_report"))
            .contains("chain13_acc8_effective8: ptxas reports 16 bytes spill stores")
    );
    assert!(fail_text(outcome(&p, &base, "probe::chain13_acc8_effective8")).contains("spills"));
}

#[test]
fn the_policy_is_asked_about_each_context_as_measured() {
    let p = profile("  side_chains: [4]\n  corners:\n    - {warps: 32, live_values: 48}\n");
    let names: Vec<String> = cases(&p)
        .into_iter()
        .map(|c| c.name)
        .filter(|n| n.starts_with("policy::"))
        .collect();
    for n in [
        "policy::study::chain13",
        "policy::study::chain13_sinkD",
        "policy::study::chain29_s4",
        "policy::study::chain13_w32_v48",
    ] {
        assert!(names.contains(&n.to_string()), "{n} not in {names:?}");
    }
    assert_eq!(names.len(), 3 + 3 + 3 + 3);
    // SYNTHETIC: every context's best K is 4, acc2 at 90% of it.
    let r = results(&p, |v| match v.accumulators {
        4 => 1000,
        2 => 900,
        _ => 500,
    });
    // Base: no side chains, so the study's policy keeps K = 2 and loses.
    let m = fail_text(outcome(&p, &r, "policy::study::chain13"));
    assert!(
        m.contains("picks acc2 at chain 13: 900.0, 90.00% of the best, acc4 1000.0")
            && m.contains("8 warps on the SM, 224 of 248 registers free, sink isolated, 0 side chains, occupancy safe"),
        "{m}"
    );
    // Four side chains: surrounding ILP, so the wide K = 4, and it is the best.
    let m = pass_text(outcome(&p, &r, "policy::study::chain29_s4"));
    assert!(
        m.contains("picks acc4 at chain 29 in context s4")
            && m.contains("4 side chains, occupancy safe"),
        "{m}"
    );
    // Sink D sums inside the loop: not isolated.
    let m = fail_text(outcome(&p, &r, "policy::study::chain13_sinkD"));
    assert!(
        m.contains("chain 13, sink D") && m.contains("sink in the loop"),
        "{m}"
    );
    // 32 warps: 64 registers a thread; the real ptxas counts of the lowest K (64) leave none.
    let m = fail_text(outcome(&p, &r, "policy::study::chain13_w32_v48"));
    assert!(
        m.contains("in context w32_v48")
            && m.contains("32 warps on the SM, 0 of 64 registers free"),
        "{m}"
    );
}

#[test]
fn a_wide_k_that_spills_is_not_occupancy_safe() {
    let p = profile("  corners:\n    - {warps: 32, side_chains: 4}\n");
    let mut r = results(&p, |v| if v.accumulators == 4 { 1000 } else { 990 });
    // SYNTHETIC: the wide K's kernel at 32 warps spills.
    let wide = crate::common::variant(&mut r, "chain29_acc4_effective4_w32_s4");
    let res = wide.resources.as_mut().unwrap();
    res.spill_store_bytes = 8;
    res.spill_load_bytes = 8;
    let m = pass_text(outcome(&p, &r, "policy::study::chain29_w32_s4"));
    assert!(
        m.contains("picks acc2") && m.contains("occupancy not safe"),
        "{m}"
    );
    // Without the spill it fits, and the policy goes wide.
    let clean = results(&p, |v| if v.accumulators == 4 { 1000 } else { 990 });
    let m = pass_text(outcome(&p, &clean, "policy::study::chain29_w32_s4"));
    assert!(
        m.contains("picks acc4") && m.contains("occupancy safe"),
        "{m}"
    );
}

#[test]
fn only_a_file_older_than_contexts_skips_a_context_it_lacks() {
    let p = profile("  warps: [16]\n");
    let mut r = results(&p, |_| 1000);
    r.variants.retain(|v| v.context.is_base());
    let case = "probe::chain13_acc2_effective2_w16";
    // Schema 4 can hold contexts: a missing one fails, as any missing measurement does.
    assert!(fail_text(outcome(&p, &r, case)).contains("no result for chain13_acc2_effective2_w16"));
    // A file written before contexts existed is not judged on them.
    r.schema = accprobe::model::results::CONTEXTS_SCHEMA - 1;
    match outcome(&p, &r, case) {
        Outcome::Skipped(why) => assert!(why.contains("predate context w16"), "{why}"),
        other => panic!("expected a skip, got {other:?}"),
    }
    assert!(matches!(
        outcome(&p, &r, "probe::chain13_acc2_effective2"),
        Outcome::Pass(_)
    ));
}

#[test]
fn the_compile_only_gate_takes_a_context_spill_as_data_too() {
    use accprobe::model::compiled::{
        ArchOutcome, CompiledMatrix, CompiledVariant, PtxasFigures, ToolchainIdentity,
    };
    use accprobe::verdict::compile_only::{cases, evaluate};
    let mut p = profile("  corners:\n    - {warps: 32, live_values: 48}\n");
    p.compile_only = Some(accprobe::expectations::compile_only::CompileOnly {
        architectures: vec!["sm_90".into()],
        toolchains: vec!["13.0".into()],
        baselines: None,
    });
    let reports = ptxas::parse(&fixture("ptxas.log")).unwrap();
    let matrix = |spill_in_base: bool| {
        let variants = p
            .probe
            .variants()
            .iter()
            .map(|v| {
                // The fixture's real report where it has one; 24 clean registers else.
                let mut f = reports.get(&v.name()).map_or(
                    PtxasFigures {
                        registers: 24,
                        stack_frame_bytes: 0,
                        spill_store_bytes: 0,
                        spill_load_bytes: 0,
                    },
                    |r| PtxasFigures {
                        registers: r.registers,
                        stack_frame_bytes: r.stack_frame_bytes,
                        spill_store_bytes: r.spill_store_bytes,
                        spill_load_bytes: r.spill_load_bytes,
                    },
                );
                if spill_in_base && v.name() == "chain13_acc8_effective8" {
                    f.spill_store_bytes = 16;
                }
                (
                    v.name(),
                    CompiledVariant {
                        ptxas: f,
                        sass: None,
                    },
                )
            })
            .collect();
        ArchOutcome::Compiled(Box::new(CompiledMatrix {
            architecture: "sm_90".into(),
            toolchain: ToolchainIdentity {
                key: "13.0".into(),
                nvrtc_version: "13.0".into(),
                release: Some("nvidia-cuda-nvrtc==13.0.88".into()),
                library: "libnvrtc.so.13".into(),
                supported: vec!["sm_90".into()],
            },
            disassembler: "none".into(),
            variants,
            sass_unavailable: Some("no disassembler".into()),
            nvrtc_seconds: 0.0,
            sass_seconds: 0.0,
            cache: "off".into(),
        }))
    };
    let case = cases(&p)
        .into_iter()
        .find(|c| c.name.ends_with("::no_spills"))
        .unwrap();
    assert!(matches!(
        evaluate(&case, &p, &matrix(false)),
        Outcome::Pass(_)
    ));
    assert!(fail_text(evaluate(&case, &p, &matrix(true)))
        .contains("chain13_acc8_effective8: ptxas reports 16 bytes spill stores"));
}

#[test]
fn bless_takes_a_context_spill_as_that_contexts_baseline() {
    // The H200 profile and its recorded run, with every context variant added as a copy of
    // the base variant of its chain and K (SYNTHETIC: the same figures), in schema 4.
    let p = crate::common::load("h200");
    let mut r = p.recorded.clone().unwrap();
    r.schema = SCHEMA;
    for v in p
        .probe
        .variants()
        .into_iter()
        .filter(|v| !v.is_base() && v.workload.is_probe())
    {
        let base = r.get(Variant::new(v.chain, v.accumulators)).unwrap();
        let warps = p.probe.warps_of(&v) as usize;
        let samples = base.samples.iter().map(|s| vec![s[0]; warps]).collect();
        let mut copy = VariantResult::measured(v, samples);
        copy.resources = base.resources;
        copy.sm_clock_mhz = base.sm_clock_mhz;
        copy.launch_ms = base.launch_ms.clone();
        copy.sm_ids = base.sm_ids.clone();
        r.variants.push(copy);
    }
    accprobe::bless::check(&p, &r, false).unwrap();
    // The real spill of the fixture's 32-warp, 48-value acc8: blessed as that context's.
    let spilled = crate::common::variant(&mut r, "chain13_acc8_effective8_w32_v48");
    spilled.resources.as_mut().unwrap().spill_store_bytes = 16;
    accprobe::bless::check(&p, &r, false).unwrap();
    // In the base context it is refused.
    crate::common::variant(&mut r, "chain13_acc8_effective8")
        .resources
        .as_mut()
        .unwrap()
        .spill_store_bytes = 16;
    let e = accprobe::bless::check(&p, &r, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("chain13_acc8_effective8: spills"), "{e}");
}

#[test]
fn the_results_check_counts_a_contexts_own_warps() {
    let p = profile("  warps: [16]\n");
    let mut r = results(&p, |_| 1000);
    assert_eq!(r.check(), Ok(()));
    // A 16-warp context with the base block's 8 warps of samples is refused.
    let v = crate::common::variant(&mut r, "chain13_acc2_effective2_w16");
    let fewer: Vec<Vec<u64>> = v.samples.iter().map(|s| s[..8].to_vec()).collect();
    *v = VariantResult::measured(v.variant(), fewer);
    let e = r.check().unwrap_err();
    let entry = r
        .variants
        .iter()
        .position(|v| v.name == "chain13_acc2_effective2_w16")
        .unwrap();
    assert!(
        e.problems
            .iter()
            .all(|p| p.entry == entry && p.variant == "chain13_acc2_effective2_w16"),
        "{e:?}"
    );
    let e = e.to_string();
    assert!(
        e.contains("the settings launch 16 warps (1 blocks of 512 threads)"),
        "{e}"
    );
}
