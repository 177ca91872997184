//! Part of stage 3 (compile): one NVRTC for the whole process. The GPU path uses the NVRTC
//! the dynamic linker finds, unless [`NVRTC_ENV`] selects a toolchain: the process then
//! re-executes itself once with that folder first on `LD_LIBRARY_PATH`, which the dynamic
//! linker reads only at start.

use super::toolchain::{
    default_root, from_folder, library_path_first, resolve, Toolchain, ToolchainError,
};
use crate::compile;
use crate::text::Shown;
use std::process::Command;

/// A folder or an installed version (`12.8`, `12.8.93`): the NVRTC the process uses; and,
/// set after [`select_for_process`] re-executed the process with the selected folder first
/// on `LD_LIBRARY_PATH`, that folder.
pub use crate::config::{ACTIVE_ENV, NVRTC_ENV};

/// With `ACCPROBE_NVRTC` set (a folder or an installed version), makes this process use
/// that NVRTC: re-executes it once with the toolchain's folder first on `LD_LIBRARY_PATH`
/// (the dynamic linker reads it only at start), then returns the toolchain. Without it,
/// `Ok(None)`: the process keeps the NVRTC the dynamic linker finds. Call first in `main`,
/// before any thread starts and before NVRTC is loaded. `Err` is a configuration error.
pub fn select_for_process() -> Result<Option<Toolchain>, ToolchainError> {
    let spec = crate::config::nvrtc().map_err(|e| ToolchainError::Invalid(e.to_string()))?;
    let Some(spec) = spec else {
        return Ok(None);
    };
    let t = resolve(&spec, &default_root()).map_err(|e| match e {
        ToolchainError::NotInstalled(m) => ToolchainError::Invalid(format!("{NVRTC_ENV}: {m}")),
        ToolchainError::Invalid(m) => ToolchainError::Invalid(format!("{NVRTC_ENV}: {m}")),
    })?;
    let active = crate::config::nvrtc_active();
    if active.as_deref() == Some(t.lib_dir.as_path()) {
        return Ok(Some(t));
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe()
        .map_err(|e| ToolchainError::Invalid(format!("cannot find this executable: {e}")))?;
    let err = Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env("LD_LIBRARY_PATH", library_path_first(&t.lib_dir))
        .env(ACTIVE_ENV, &t.lib_dir)
        .exec();
    Err(ToolchainError::Invalid(format!(
        "cannot re-execute with {NVRTC_ENV}={spec}: {err}"
    )))
}

/// Where this process's NVRTC came from, for the results' environment: `None` without
/// `ACCPROBE_NVRTC`; else the release or folder, checked against what is mapped.
pub(crate) fn process_origin() -> Option<String> {
    let dir = crate::config::nvrtc_active()?;
    let t = from_folder(&dir, &dir.display().to_string()).ok();
    let what = t
        .and_then(|t| t.release)
        .unwrap_or_else(|| dir.display().to_string());
    let mapped = compile::loaded_nvrtc();
    Some(
        match mapped.iter().find(|p| p.parent() != Some(dir.as_path())) {
            Some(other) => format!(
                "{NVRTC_ENV} asked for {what}, but {} is loaded",
                other.shown()
            ),
            None => format!("{NVRTC_ENV}: {what}"),
        },
    )
}
