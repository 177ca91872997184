//! NVRTC itself: the CUDA compute cache switch, the library's version, and one program
//! compiled to a CUBIN with its log and ptxas report. Every call into NVRTC that compiles is
//! here.

use super::ptxas::{self, PtxasReport};
use super::source::source;
use super::CompileError;
use crate::model::variant::Variant;
use cudarc::nvrtc::{result as nvrtc, sys};
use std::collections::BTreeMap;
use std::ffi::{CStr, CString};

type Result<T, E = CompileError> = std::result::Result<T, E>;

/// A failed NVRTC call that is not a compile.
fn call(call: &'static str) -> impl Fn(nvrtc::NvrtcError) -> CompileError {
    move |error| CompileError::Call {
        call,
        error,
        hint: "",
    }
}

/// NVRTC (12.x and later) serves repeated compilations from the CUDA compute cache and
/// then runs no ptxas, so the verbose report is empty; this variable turns the cache off.
pub const COMPUTE_CACHE_ENV: &str = "CUDA_CACHE_DISABLE";

/// Turns the compute cache off for this process unless the user set the variable. Call
/// before any thread starts (it edits the environment).
pub fn disable_compute_cache() {
    if std::env::var_os(COMPUTE_CACHE_ENV).is_none() {
        std::env::set_var(COMPUTE_CACHE_ENV, "1");
    }
}

/// The NVRTC functions this crate calls. cudarc resolves each at its first call and panics
/// where the library lacks it; [`nvrtc_version`], the first call into a library, checks
/// them all (as does [`compile_source`]), so a library that is not an NVRTC (or an older one) is an error, not a panic.
const SYMBOLS: [&str; 11] = [
    "nvrtcVersion",
    "nvrtcGetErrorString",
    "nvrtcCreateProgram",
    "nvrtcCompileProgram",
    "nvrtcGetProgramLogSize",
    "nvrtcGetProgramLog",
    "nvrtcGetCUBINSize",
    "nvrtcGetCUBIN",
    "nvrtcDestroyProgram",
    "nvrtcGetNumSupportedArchs",
    "nvrtcGetSupportedArchs",
];

/// Fails when the loaded libnvrtc lacks one of [`SYMBOLS`]. Checked once per process.
fn usable() -> Result<()> {
    static CHECKED: std::sync::OnceLock<Option<(&'static str, String)>> =
        std::sync::OnceLock::new();
    let missing = CHECKED.get_or_init(|| {
        // SAFETY: callers checked that a libnvrtc loads; `get` only looks the names up.
        let lib = unsafe { sys::culib() };
        SYMBOLS.iter().find_map(|name| {
            unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }
                .err()
                .map(|e| (*name, e.to_string()))
        })
    });
    match missing {
        Some((symbol, why)) => Err(CompileError::NotNvrtc {
            symbol,
            why: why.clone(),
        }),
        None => Ok(()),
    }
}

/// NVRTC's version as `major.minor`. Call only after checking that libnvrtc is present.
pub fn nvrtc_version() -> Result<String> {
    usable()?;
    let (mut major, mut minor) = (0, 0);
    unsafe { sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .map_err(call("nvrtcVersion"))?;
    Ok(format!("{major}.{minor}"))
}

fn log_of(prog: sys::nvrtcProgram) -> String {
    match unsafe { nvrtc::get_program_log(prog) } {
        Ok(raw) => {
            let bytes: Vec<u8> = raw
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        }
        Err(e) => format!("(no program log: {})", words(e)),
    }
}

/// One NVRTC program of `variants`: its CUBIN, its log and its ptxas report, which must
/// cover every variant.
pub(super) fn compile_program(
    variants: &[Variant],
    options: &[String],
) -> Result<(Vec<u8>, String, Reports)> {
    let (cubin, log) = compile_source(
        &source(variants),
        c"accprobe_probe.cu",
        "the probe",
        options,
    )?;
    let reports = match ptxas::parse(&log) {
        Ok(r) => r,
        Err(source) => return Err(CompileError::PtxasLog { source, log }),
    };
    if let Some(&variant) = variants.iter().find(|v| !reports.contains_key(&v.name())) {
        return Err(CompileError::NoReport {
            variant,
            entries: reports.len(),
            lines: log.lines().count(),
        });
    }
    Ok((cubin, log, reports))
}

/// One NVRTC program of `text` (named `name`; `what` in errors): its CUBIN and its log.
pub fn compile_source(
    text: &str,
    name: &CStr,
    what: &str,
    options: &[String],
) -> Result<(Vec<u8>, String)> {
    let src = CString::new(text).map_err(|_| CompileError::NulInSource {
        what: what.to_string(),
    })?;
    usable()?;
    let prog = nvrtc::create_program(&src, Some(name)).map_err(call("nvrtcCreateProgram"))?;
    let compiled = unsafe { nvrtc::compile_program(prog, options) };
    let log = log_of(prog);
    let out = compiled
        .map_err(|error| CompileError::Refused {
            what: what.to_string(),
            error,
            options: options.to_vec(),
            log: log.clone(),
        })
        .and_then(|()| {
            let mut size = 0usize;
            unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
                .result()
                .map_err(|error| CompileError::Call {
                    call: "nvrtcGetCUBINSize",
                    error,
                    hint: " (is the architecture a real sm_XY?)",
                })?;
            let mut cubin = vec![0u8; size];
            unsafe { sys::nvrtcGetCUBIN(prog, cubin.as_mut_ptr().cast()) }
                .result()
                .map_err(call("nvrtcGetCUBIN"))?;
            Ok((cubin, log))
        });
    let _ = unsafe { nvrtc::destroy_program(prog) };
    out
}

/// An NVRTC result in the project's words, with NVRTC's own name for it (what its
/// documentation and a search find): `the source did not compile (NVRTC_ERROR_COMPILATION)`.
/// cudarc's text for it is its `Debug`, `NvrtcError(NVRTC_ERROR_COMPILATION)`.
pub(super) fn words(e: nvrtc::NvrtcError) -> String {
    use sys::nvrtcResult as R;
    let said = match e.0 {
        R::NVRTC_ERROR_OUT_OF_MEMORY => "NVRTC ran out of memory",
        R::NVRTC_ERROR_PROGRAM_CREATION_FAILURE => "NVRTC could not create the program",
        R::NVRTC_ERROR_INVALID_INPUT => "NVRTC was given an invalid argument",
        R::NVRTC_ERROR_INVALID_PROGRAM => "the program handle is not valid",
        R::NVRTC_ERROR_INVALID_OPTION => "an option is not one NVRTC knows",
        R::NVRTC_ERROR_COMPILATION => "the source did not compile",
        R::NVRTC_ERROR_INTERNAL_ERROR => "NVRTC failed inside (an internal error)",
        _ => "NVRTC failed",
    };
    format!("{said} ({:?})", e.0)
}

pub(super) type Reports = BTreeMap<String, PtxasReport>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvrtc_results_are_said_in_words_with_their_nvrtc_name() {
        use sys::nvrtcResult as R;
        let said = words(nvrtc::NvrtcError(R::NVRTC_ERROR_COMPILATION));
        assert_eq!(said, "the source did not compile (NVRTC_ERROR_COMPILATION)");
        let said = words(nvrtc::NvrtcError(R::NVRTC_ERROR_INVALID_OPTION));
        assert!(
            said.starts_with("an option is not one NVRTC knows"),
            "{said}"
        );
        for r in [R::NVRTC_ERROR_OUT_OF_MEMORY, R::NVRTC_ERROR_INTERNAL_ERROR] {
            assert!(!words(nvrtc::NvrtcError(r)).contains("NvrtcError("));
        }
    }
}
