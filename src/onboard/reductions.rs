//! The real accumulations a drafted profile measures beside the probe (docs/study.md,
//! "Real reductions beside the probe"): every kernel at K = 1 to 16 in the base context and
//! at 16 and 32 warps on the SM, unless the study's profile names its own.
//!
//! Onboarding measures them ([`with_defaults`]); the draft names the kernels and contexts
//! the measurement holds ([`measured`]) and asserts each kernel's peak at the K that is
//! best in its base context, within [`PEAK_TOLERANCE`] ([`section`]). Where another
//! context has another best K, that case fails and the draft records it as a known
//! deviation with its figures, as it does for the probe's invariants.

use crate::model::context::{other_warps, Context};
use crate::model::place::Place;
use crate::model::results::RunResults;
use crate::model::settings::ProbeSettings;
use crate::model::variant::Variant;
use crate::model::workload::Workload;
use crate::verdict::best_at;

/// The accumulator counts the real accumulations are measured at.
pub(crate) const ACCUMULATORS: [u32; 5] = [1, 2, 4, 8, 16];
/// The warps on the SM they are measured at besides the base block's.
pub(crate) const WARPS: [u32; 2] = [16, 32];
/// How far another K may beat a kernel's drafted peak (2%, the policy gate's "clearly
/// below" line).
pub(crate) const PEAK_TOLERANCE: f64 = 0.02;

/// `probe` with the default real accumulations, unless it names some already.
pub(crate) fn with_defaults(probe: &mut ProbeSettings) {
    if !probe.reductions.is_empty() {
        return;
    }
    probe.reductions = Workload::REDUCTIONS.to_vec();
    probe.reduction_accumulators = ACCUMULATORS.to_vec();
    probe.reduction_contexts = std::iter::once(Context::BASE)
        .chain(
            other_warps(&WARPS, probe.block_threads / 32).map(|w| Context {
                warps: Some(w),
                ..Context::BASE
            }),
        )
        .collect();
}

/// `probe` keeping the kernels and the contexts `r` holds a result for (a run written
/// before the real accumulations existed holds none, and a profile naming a kernel its
/// baselines lack would fail every run). A kernel or context measured in part is kept, and
/// refused with the variants missing when the draft is blessed (`bless::check`).
pub(crate) fn measured(probe: &mut ProbeSettings, r: &RunResults) {
    let ks = probe.reduction_accumulators.clone();
    let held = |w: Workload, c: Context| {
        ks.iter()
            .any(|&k| r.get(Variant::reduction(w, k).with_context(c)).is_some())
    };
    let contexts = probe.reduction_contexts.clone();
    probe
        .reductions
        .retain(|&w| contexts.iter().any(|&c| held(w, c)));
    let kernels = probe.reductions.clone();
    probe
        .reduction_contexts
        .retain(|&c| c == Context::BASE || kernels.iter().any(|&w| held(w, c)));
    if probe.reductions.is_empty() {
        probe.reduction_accumulators.clear();
        probe.reduction_contexts.clear();
    }
}

/// Each kernel of `probe` with its best K in the base context of `r`.
pub(crate) fn peaks(probe: &ProbeSettings, r: &RunResults) -> Vec<(Workload, u32)> {
    probe
        .reductions
        .iter()
        .filter_map(|&w| {
            best_at(r, &Place::kernel(w, Context::BASE)).map(|best| (w, best.accumulators))
        })
        .collect()
}

/// The `reductions:` section of `probe` as YAML with its comment, its peaks measured in
/// `r`; `""` when it measures none.
pub(super) fn section(probe: &ProbeSettings, r: &RunResults) -> String {
    if probe.reductions.is_empty() {
        return String::new();
    }
    let list = |xs: Vec<String>| format!("[{}]", xs.join(", "));
    let warps: Vec<String> = probe
        .reduction_contexts
        .iter()
        .filter_map(|c| c.warps.map(|w| w.to_string()))
        .collect();
    let n = probe.reduction_accumulators.len() * probe.reduction_contexts.len();
    let mut s = super::comments::comment(&[
        format!(
            "The real accumulations (docs/study.md, \"Real reductions beside the probe\"): loops people write, each with its accumulator split K ways, {n} variants each (the base context and each of `warps`); the policy gate asks the policy about each (policy::<kernel>[_<context>]). A kernel's peak is its best K in the base context as measured here, within {}%: a context where another K is clearly better is a known deviation below.",
            PEAK_TOLERANCE * 100.0
        ),
    ]);
    s.push_str("reductions:\n");
    s.push_str(&format!(
        "  kernels: {}\n",
        list(
            probe
                .reductions
                .iter()
                .map(|w| w.name().to_string())
                .collect()
        )
    ));
    s.push_str(&format!(
        "  accumulators: {}\n",
        list(
            probe
                .reduction_accumulators
                .iter()
                .map(u32::to_string)
                .collect()
        )
    ));
    if !warps.is_empty() {
        s.push_str(&format!("  warps: {}\n", list(warps)));
    }
    let peaks = peaks(probe, r);
    if !peaks.is_empty() {
        s.push_str("  invariants:\n");
        for (w, k) in peaks {
            s.push_str(&format!(
                "    - peak: {{kernel: {}, accumulators: {k}, tolerance: {PEAK_TOLERANCE}}}\n",
                w.name()
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expectations::profile::ReductionInvariant;
    use crate::model::results::VariantResult;
    use std::path::Path;

    fn study() -> (String, ProbeSettings) {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/documented.yaml");
        let text = std::fs::read_to_string(&file).unwrap();
        (text, crate::catalog::load(&file).unwrap().probe)
    }

    fn copy(from: &Path, to: &Path) {
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let target = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                std::fs::create_dir_all(&target).unwrap();
                copy(&e.path(), &target);
            } else {
                std::fs::copy(e.path(), target).unwrap();
            }
        }
    }

    fn w(warps: u32) -> Context {
        Context {
            warps: Some(warps),
            ..Context::BASE
        }
    }

    /// Results holding `rates` (kernel, context, K, progress), one sample a warp.
    fn results(rates: &[(Workload, Context, u32, u64)]) -> RunResults {
        let mut r = RunResults {
            schema: crate::model::results::SCHEMA,
            profile: "study".into(),
            source: "synthetic".into(),
            environment: None,
            variants: Vec::new(),
            mode: Default::default(),
            settings: None,
            timings: None,
            sass_unavailable: None,
            sass_unreadable: None,
            contention: None,
        };
        for &(kernel, c, k, progress) in rates {
            let warps = c.warps.unwrap_or(8) as usize;
            r.variants.push(VariantResult::measured(
                Variant::reduction(kernel, k).with_context(c),
                vec![vec![progress; warps]; 10],
            ));
        }
        r
    }

    #[test]
    fn the_defaults_are_every_kernel_at_k_1_to_16_in_the_base_and_at_16_and_32_warps() {
        let (_, mut p) = study();
        assert!(
            p.reductions.is_empty(),
            "the study names no real accumulation"
        );
        with_defaults(&mut p);
        assert_eq!(p.reductions, Workload::REDUCTIONS);
        assert_eq!(p.reduction_accumulators, ACCUMULATORS);
        assert_eq!(p.reduction_contexts, [Context::BASE, w(16), w(32)]);
        // A study with its own section keeps it.
        let mut own = p.clone();
        own.reductions = vec![Workload::Dot];
        own.reduction_accumulators = vec![1, 2];
        own.reduction_contexts = vec![Context::BASE];
        let kept = own.clone();
        with_defaults(&mut own);
        assert_eq!(own, kept);
    }

    #[test]
    fn the_draft_names_only_the_kernels_and_contexts_measured() {
        let (_, mut p) = study();
        with_defaults(&mut p);
        let r = results(&[
            (Workload::Dot, Context::BASE, 1, 100),
            (Workload::Dot, w(16), 2, 100),
            (Workload::Gemv, Context::BASE, 4, 100),
        ]);
        let mut q = p.clone();
        measured(&mut q, &r);
        assert_eq!(q.reductions, [Workload::Dot, Workload::Gemv]);
        assert_eq!(q.reduction_contexts, [Context::BASE, w(16)]);
        assert_eq!(q.reduction_accumulators, ACCUMULATORS);
        // A run from before the real accumulations holds none: the draft names none, and
        // writes no section.
        let mut none = p.clone();
        measured(&mut none, &results(&[]));
        assert!(none.reductions.is_empty() && none.reduction_contexts.is_empty());
        assert!(none.reduction_accumulators.is_empty());
        assert_eq!(section(&none, &results(&[])), "");
    }

    #[test]
    fn the_section_reads_back_with_each_kernels_peak_at_its_best_base_k() {
        let (text, mut p) = study();
        with_defaults(&mut p);
        // dot best at K=8 in the base context and at K=4 at 16 warps; gemv best at K=2.
        let mut rates = Vec::new();
        for (k, dot, dot16, gemv) in [
            (1, 400, 400, 700),
            (2, 800, 800, 1000),
            (4, 900, 1000, 990),
            (8, 1000, 990, 980),
            (16, 950, 900, 900),
        ] {
            rates.push((Workload::Dot, Context::BASE, k, dot));
            rates.push((Workload::Dot, w(16), k, dot16));
            rates.push((Workload::Gemv, Context::BASE, k, gemv));
        }
        let r = results(&rates);
        measured(&mut p, &r);
        assert_eq!(
            peaks(&p, &r),
            [(Workload::Dot, 8), (Workload::Gemv, 2)],
            "the base context decides"
        );
        let s = section(&p, &r);
        assert!(s.starts_with("# "), "a reviewer reads why first:\n{s}");
        assert!(
            s.contains("    - peak: {kernel: dot, accumulators: 8, tolerance: 0.02}\n"),
            "{s}"
        );
        // Beside the study's profile, in a copy of its folder: the files it names resolve.
        let tmp = tempfile::tempdir().unwrap();
        copy(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations"),
            tmp.path(),
        );
        let file = tmp.path().join("draft.yaml");
        std::fs::write(&file, format!("{}\n{s}", text.trim_end())).unwrap();
        let back = crate::catalog::load(&file).unwrap();
        assert_eq!(back.probe.reductions, [Workload::Dot, Workload::Gemv]);
        assert_eq!(back.probe.reduction_accumulators, ACCUMULATORS);
        assert_eq!(back.probe.reduction_contexts, [Context::BASE, w(16)]);
        assert_eq!(
            back.reduction_invariants,
            [
                ReductionInvariant::Peak {
                    kernel: Workload::Dot,
                    accumulators: 8,
                    tolerance: PEAK_TOLERANCE
                },
                ReductionInvariant::Peak {
                    kernel: Workload::Gemv,
                    accumulators: 2,
                    tolerance: PEAK_TOLERANCE
                }
            ]
        );
    }
}
