//! The compile stage for real, wherever libnvrtc can be loaded (no GPU needed): the whole
//! default matrix for sm_90, with its ptxas report parsed per kernel; the matrix split into
//! several NVRTC programs gives each kernel the code of one program. This binary compiles
//! every matrix as two programs (`ACCPROBE_COMPILE_PARTS=2`), so that the cache and the
//! workers see entries of several parts. Its modules: `stage` (the matrix, its reports and
//! errors), `cache`, `toolchain` (installed toolchains and their workers) and `ceilings`
//! (the ceilings microbenchmark for every architecture of the compile-only gate).
//! Ignored with the reason where libnvrtc is absent. `.ci/run` installs NVRTC from PyPI so
//! that CI runs it.

mod cache;
mod ceilings;
mod stage;
mod toolchain;

use accprobe::catalog;
use accprobe::compile;
use libtest_mimic::{Arguments, Trial};
use std::path::Path;

/// How many NVRTC programs this binary compiles a matrix as.
pub(crate) const PARTS: &str = "2";

pub(crate) fn nvrtc_reason() -> Option<String> {
    (!unsafe { cudarc::nvrtc::sys::is_culib_present() }).then(|| {
        "no NVRTC: libnvrtc.so not found (set LD_LIBRARY_PATH to a CUDA 13 NVRTC)".to_string()
    })
}

pub(crate) fn documented_variants() -> Vec<accprobe::model::variant::Variant> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/documented.yaml");
    catalog::load(&file)
        .expect("documented profile loads")
        .probe
        .variants()
}

fn main() -> std::process::ExitCode {
    if let Some(code) = compile::worker::worker_main() {
        return code;
    }
    if let Ok(version) = std::env::var(toolchain::PARENT_MODE) {
        // The whole matrix, uncached: a worker that takes a while.
        let root = compile::toolchain::default_root();
        let t = compile::toolchain::resolve(&version, &root).unwrap();
        // A disassembler that never answers (after it says its process id): the worker
        // waits on it for as long as it lives.
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("nvdisasm");
        let pid_file =
            std::env::var(toolchain::DISASSEMBLER_PID).unwrap_or_else(|_| "/dev/null".into());
        std::fs::write(
            &tool,
            format!(
                "#!/bin/sh\ncase \"$1\" in --version) echo V1.0; exit 0;; esac\n\
                 echo $$ > '{pid_file}.part' && mv '{pid_file}.part' '{pid_file}'\n\
                 exec sleep 30\n"
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let variants = &documented_variants()[..1];
        let _ = compile::worker::spawn_worker(&t, &["sm_90".into()], variants, None, Some(&tool));
        return std::process::ExitCode::SUCCESS;
    }
    if let Some(cache) = std::env::var_os(cache::BUILTINS_CHILD) {
        return cache::builtins_child(&cache.to_string_lossy());
    }
    let args = Arguments::from_args();
    // Before any thread: every matrix of this binary is compiled as PARTS programs, and the
    // disassembler ci/toolchains.sh installed is used where none other is named.
    std::env::set_var(compile::PARTS_ENV, PARTS);
    if std::env::var_os(compile::DISASSEMBLER_ENV).is_none() {
        let root = compile::toolchain::default_root();
        if let Some(tool) = compile::toolchain::disassembler(&root) {
            std::env::set_var(compile::DISASSEMBLER_ENV, tool);
        }
    }
    let mut trials = vec![
        Trial::ignorable_test(
            "compile::parts_give_each_kernel_the_code_of_one_program",
            stage::parts_give_each_kernel_the_code_of_one_program,
        ),
        Trial::ignorable_test("compile::default_matrix_sm_90", stage::compile_matrix),
        Trial::ignorable_test(
            "compile::loop_schedules_decode_where_the_layout_is_known",
            stage::loop_schedules_decode_where_the_layout_is_known,
        ),
        Trial::ignorable_test(
            "compile::bad_option_is_reported",
            stage::compile_error_is_reported,
        ),
        Trial::ignorable_test(
            "compile::a_compile_error_quotes_the_log_in_plain_words",
            stage::a_compile_error_quotes_the_log_in_plain_words,
        ),
        Trial::ignorable_test(
            "compile::ahead_compile_is_taken_only_for_its_own_matrix",
            cache::ahead_compile_is_taken_only_for_its_own_matrix,
        ),
        Trial::ignorable_test(
            "compile::a_store_removes_entries_unused_for_a_month",
            cache::a_store_removes_entries_unused_for_a_month,
        ),
        Trial::ignorable_test(
            "compile::cache_hits_rebuilds_and_keys",
            cache::cache_hits_rebuilds_and_keys,
        ),
        Trial::ignorable_test(
            "compile::the_key_names_the_builtins_nvrtc_loads",
            cache::the_key_names_the_builtins_nvrtc_loads,
        ),
        Trial::ignorable_test(
            "compile::options_that_read_files_are_not_served_from_the_cache",
            cache::options_that_read_files_are_not_served_from_the_cache,
        ),
        Trial::ignorable_test(
            "toolchain::a_worker_folder_is_never_one_that_was_there",
            toolchain::a_worker_folder_is_never_one_that_was_there,
        ),
        Trial::ignorable_test(
            "toolchain::not_an_nvrtc_is_refused_by_the_worker",
            toolchain::not_an_nvrtc_is_refused_by_the_worker,
        ),
        Trial::ignorable_test(
            "toolchain::installed_toolchains_compile_in_their_own_workers",
            toolchain::installed_toolchains_compile_in_their_own_workers,
        ),
        Trial::ignorable_test(
            "toolchain::a_toolchain_in_a_folder_with_spaces_is_named_whole",
            toolchain::a_toolchain_in_a_folder_with_spaces_is_named_whole,
        ),
        Trial::ignorable_test(
            "toolchain::a_worker_does_not_outlive_its_parent",
            toolchain::a_worker_does_not_outlive_its_parent,
        ),
    ];
    trials.push(ceilings::trial());
    libtest_mimic::run(&args, trials).exit_code()
}
