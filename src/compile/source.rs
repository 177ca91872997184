//! The source a matrix is compiled from and the NVRTC options it is compiled with: plain
//! functions of the variants and the architecture, tested everywhere.

use crate::model::variant::{Sink, Variant};

/// The probe kernel, built into the binary so that it runs without the source tree.
pub const KERNEL_SOURCE: &str = include_str!("../../kernels/probe.cu");

/// The real accumulations (docs/study.md, "Real reductions"), compiled after the probe
/// kernel in the same program when a matrix holds one.
pub const REDUCTIONS_SOURCE: &str = include_str!("../../kernels/reductions.cu");

/// The ceilings microbenchmark (`measure::ceilings`), built in the same way.
pub const CEILINGS_SOURCE: &str = include_str!("../../kernels/ceilings.cu");

/// The kernel source (the probe's, then the real accumulations' where `variants` holds
/// one) plus one instantiation per variant.
pub fn source(variants: &[Variant]) -> String {
    let mut s = String::from(KERNEL_SOURCE);
    if variants.iter().any(|v| !v.workload.is_probe()) {
        s.push('\n');
        s.push_str(REDUCTIONS_SOURCE);
    }
    s.push_str("\n// Instantiations appended by accprobe's compile stage.\n");
    for v in variants {
        if !v.workload.is_probe() {
            let warps = v.context.warps;
            s.push_str(&format!(
                "ACCPROBE_REDUCTION_VARIANT({v}, {}, {}, {}, {})\n",
                v.workload.kernel_macro(),
                v.effective(),
                warps.unwrap_or(0),
                bounds(warps)
            ));
            continue;
        }
        if !v.is_base() {
            let c = v.context;
            s.push_str(&format!(
                "ACCPROBE_CONTEXT_VARIANT({v}, {}, {}, {}, {}, {}, {}, {})\n",
                v.chain,
                v.effective(),
                v.sink.letter(),
                c.side_chains,
                c.live_values,
                c.warps.unwrap_or(0),
                bounds(c.warps)
            ));
            continue;
        }
        match v.sink {
            Sink::A => s.push_str(&format!(
                "ACCPROBE_VARIANT({}, {}, {})\n",
                v.chain,
                v.accumulators,
                v.effective()
            )),
            m => s.push_str(&format!(
                "ACCPROBE_SINK_VARIANT({}, {}, {}, {})\n",
                v.chain,
                v.accumulators,
                v.effective(),
                m.letter()
            )),
        }
    }
    s
}

/// A context's launch bounds: its block's threads, where it sets its own warps.
fn bounds(warps: Option<u32>) -> String {
    warps.map_or(String::new(), |w| format!("__launch_bounds__({})", w * 32))
}

/// NVRTC options for compute capability `major.minor`: real architecture (so NVRTC
/// produces a CUBIN and runs ptxas), verbose ptxas report. Nothing that changes how the
/// compiler lowers the kernels, since that is what the gate checks: `--split-compile`
/// (parallel optimisation) would save NVRTC time, but with NVRTC 13.0 it changes the loop
/// SASS of every kernel of the H200 profile for sm_100 and sm_120.
pub fn options(major: i32, minor: i32) -> Vec<String> {
    vec![
        format!("--gpu-architecture=sm_{major}{minor}"),
        "--ptxas-options=--verbose".to_string(),
        "--std=c++17".to_string(),
    ]
}

/// Environment variable with extra NVRTC options, whitespace-separated (e.g.
/// `--maxrregcount=16`): for experiments; they are recorded with the results. With one
/// that reads a file (`--pre-include=FILE`, `-I`), the compile cache is not used.
pub use crate::config::EXTRA_OPTIONS_ENV;

/// The extra NVRTC options from [`EXTRA_OPTIONS_ENV`]. A value that is not UTF-8 gives
/// none here: the front ends refuse it at start (`config::check`, exit 2).
pub fn extra_options() -> Vec<String> {
    crate::config::extra_options().unwrap_or_default()
}

/// NVRTC options that read files (a header included before the source, the folders
/// includes search, a precompiled header): what NVRTC compiles then depends on files the
/// cache key does not hold.
const FILE_OPTIONS: [&str; 10] = [
    "--pre-include",
    "-include",
    "--include-path",
    "-I",
    "--use-pch",
    "-use-pch",
    "--pch-dir",
    "-pch-dir",
    "--pch",
    "-pch",
];

/// Whether `option` makes NVRTC read a file ([`FILE_OPTIONS`], as `--opt`, `--opt=VALUE` or,
/// for `-I`, `-IFOLDER`).
pub(super) fn reads_a_file(option: &str) -> bool {
    option.starts_with("-I")
        || FILE_OPTIONS
            .iter()
            .any(|f| option == *f || option.strip_prefix(f).is_some_and(|r| r.starts_with('=')))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::variant::{Context, Workload};

    #[test]
    fn source_instantiates_each_variant_once_with_its_effective_count() {
        let s = source(&[
            Variant::new(7, 8),
            Variant::new(29, 2),
            Variant::new(13, 4).with_sink(Sink::D),
        ]);
        assert!(s.contains("ACCPROBE_SINK_VARIANT(13, 4, 4, D)\n"));
        assert!(s.contains("ACCPROBE_VARIANT(7, 8, 7)\n"));
        assert!(s.contains("ACCPROBE_VARIANT(29, 2, 2)\n"));
        let w16 = Context {
            warps: Some(16),
            side_chains: 4,
            live_values: 0,
        };
        let v48 = Context {
            live_values: 48,
            ..Context::BASE
        };
        let c = source(&[
            Variant::new(13, 2).with_context(w16),
            Variant::new(7, 8).with_sink(Sink::D).with_context(v48),
        ]);
        assert!(c.contains(
            "ACCPROBE_CONTEXT_VARIANT(chain13_acc2_effective2_w16_s4, 13, 2, A, 4, 0, 16, __launch_bounds__(512))\n"
        ));
        assert!(c.contains(
            "ACCPROBE_CONTEXT_VARIANT(chain7_acc8_effective7_sinkD_v48, 7, 7, D, 0, 48, 0, )\n"
        ));
        let in_kernel = KERNEL_SOURCE.matches("ACCPROBE_VARIANT(").count();
        assert_eq!(s.matches("ACCPROBE_VARIANT(").count(), in_kernel + 2);
        // The real accumulations' kernels come in only with a variant of theirs.
        assert!(!s.contains(REDUCTIONS_SOURCE) && !c.contains(REDUCTIONS_SOURCE));
    }

    #[test]
    fn a_real_accumulation_is_instantiated_after_its_kernels() {
        let w32 = Context {
            warps: Some(32),
            ..Context::BASE
        };
        let s = source(&[
            Variant::new(7, 2),
            Variant::reduction(Workload::Softmax, 4),
            Variant::reduction(Workload::Gemv, 16).with_context(w32),
        ]);
        let kernels = s.find(REDUCTIONS_SOURCE).expect("the reductions' source");
        let line = s
            .find("ACCPROBE_REDUCTION_VARIANT(softmax_acc4, SOFTMAX, 4, 0, )\n")
            .expect("softmax_acc4");
        assert!(kernels < line);
        assert!(s.contains(
            "ACCPROBE_REDUCTION_VARIANT(gemv_acc16_w32, GEMV, 16, 32, __launch_bounds__(1024))\n"
        ));
        assert!(s.contains("ACCPROBE_VARIANT(7, 2, 2)\n"));
    }

    #[test]
    fn options_target_the_real_architecture_with_verbose_ptxas() {
        let o = options(9, 0);
        assert!(o.contains(&"--gpu-architecture=sm_90".to_string()));
        assert!(o.contains(&"--ptxas-options=--verbose".to_string()));
        // None of them reads a file: the cache serves them.
        assert!(!o.iter().any(|o| reads_a_file(o)));
        for file in [
            "--pre-include=a.h",
            "-include=a.h",
            "-include",
            "-I/x",
            "--include-path=/x",
        ] {
            assert!(reads_a_file(file), "{file}");
        }
        for not in ["--maxrregcount=16", "-DX=1", "--pre-includes", "-lineinfo"] {
            assert!(!reads_a_file(not), "{not}");
        }
    }
}
