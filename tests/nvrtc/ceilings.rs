//! The ceilings microbenchmark (`kernels/ceilings.cu`) compiled for real, wherever
//! libnvrtc can be loaded (no GPU needed): both kernels for every architecture of the
//! compile-only gate and the H200's, with a ptxas report that shows them and no spill (a
//! spill would time local memory, not FFMAs). Ignored with the reason where libnvrtc is
//! absent.

use accprobe::compile;
use libtest_mimic::{Completion, Failed, Trial};

fn compile_for_every_architecture() -> Result<Completion, Failed> {
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(Completion::ignored_with(
            "no NVRTC: libnvrtc.so not found (set LD_LIBRARY_PATH to a CUDA 13 NVRTC)",
        ));
    }
    compile::disable_compute_cache();
    for arch in accprobe::onboard::COMPILE_ARCHITECTURES {
        let digits = arch.trim_start_matches("sm_");
        let (major, minor) = digits.split_at(digits.len() - 1);
        let options = compile::options(major.parse()?, minor.parse()?);
        let (cubin, log) = compile::compile_source(
            compile::CEILINGS_SOURCE,
            c"accprobe_ceilings.cu",
            "the ceilings microbenchmark",
            &options,
        )
        .map_err(|e| format!("{arch}: {e}"))?;
        if cubin.len() < 512 || &cubin[..4] != b"\x7fELF" {
            return Err(format!(
                "{arch}: a CUBIN of {} bytes is not an ELF image",
                cubin.len()
            )
            .into());
        }
        let reports = compile::ptxas::parse(&log).map_err(|e| format!("{arch}: {e}\n{log}"))?;
        for kernel in ["ffma_latency", "ffma_issue"] {
            let r = reports
                .get(kernel)
                .ok_or_else(|| format!("{arch}: no ptxas report for {kernel}:\n{log}"))?;
            if r.registers == 0 || r.spill_store_bytes + r.spill_load_bytes > 0 {
                return Err(format!("{arch}: {kernel}: {r:?}").into());
            }
            // 1024 threads per block: at most 64 registers per thread.
            if kernel == "ffma_issue" && r.registers > 64 {
                return Err(format!("{arch}: ffma_issue needs {} registers per thread, more than a 1024-thread block may have", r.registers).into());
            }
        }
    }
    Ok(Completion::Completed)
}

/// The ceilings' one case.
pub(crate) fn trial() -> Trial {
    Trial::ignorable_test(
        "ceilings_kernels_compile_for_every_architecture",
        compile_for_every_architecture,
    )
}
