//! The compile stage on the documented matrix: every kernel compiled for sm_90 with a
//! ptxas report, as the programs the matrix is split into, errors quoted in plain words,
//! and the loop schedules decoded where the layout is known.

use crate::*;
use accprobe::compile;
use libtest_mimic::{Completion, Failed};

pub(crate) fn compile_matrix() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let variants = documented_variants();
    let c = compile::compile(&variants, &compile::options(9, 0)).map_err(|e| e.to_string())?;
    if c.parts.len() != 2 {
        return Err(format!("{} parts, {PARTS} asked for", c.parts.len()).into());
    }
    for p in &c.parts {
        if p.cubin.len() < 1024 || &p.cubin[..4] != b"\x7fELF" {
            return Err(format!("CUBIN of {} bytes is not an ELF image", p.cubin.len()).into());
        }
    }
    for v in &variants {
        let r = c
            .reports
            .get(&v.name())
            .ok_or_else(|| format!("no ptxas report for {v}"))?;
        if r.registers == 0 || r.spill_store_bytes + r.spill_load_bytes > 0 {
            return Err(format!("{v}: implausible ptxas report {r:?}").into());
        }
    }
    // A second compilation in the same process must report again (compute cache off).
    let again =
        compile::compile(&variants[..1], &compile::options(9, 0)).map_err(|e| e.to_string())?;
    if again.reports.len() != 1 {
        return Err(format!(
            "second compilation reported {} kernels",
            again.reports.len()
        )
        .into());
    }
    Ok(Completion::Completed)
}

pub(crate) fn compile_error_is_reported() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    let bad = compile::compile(
        &documented_variants()[..1],
        &["--gpu-architecture=sm_1".to_string()],
    );
    match bad {
        Err(e) if e.to_string().contains("sm_1") => Ok(Completion::Completed),
        Err(e) => Err(format!("error does not name the options: {e}").into()),
        Ok(_) => Err("compiling for sm_1 succeeded".into()),
    }
}

/// A source that does not compile is said in the project's words, its options listed, and
/// NVRTC's log quoted line by line (`  | `), a control character in it escaped.
pub(crate) fn a_compile_error_quotes_the_log_in_plain_words() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    let text = "extern \"C\" __global__ void k() { undeclared_name_\u{1b}[2J = 1; }\n";
    let e = match compile::compile_source(
        text,
        c"bad.cu",
        "a test kernel",
        &["--gpu-architecture=sm_90".to_string()],
    ) {
        Err(e @ compile::CompileError::Refused { .. }) => {
            let compile::CompileError::Refused { what, options, .. } = &e else {
                unreachable!()
            };
            if what != "a test kernel" || options != &["--gpu-architecture=sm_90".to_string()] {
                return Err(format!("the refusal names another source or options: {e:?}").into());
            }
            e.to_string()
        }
        Err(e) => return Err(format!("expected NVRTC's refusal, got {e:?}").into()),
        Ok(_) => return Err("a source with an undeclared name compiled".into()),
    };
    let (first, rest) = e.split_once('\n').unwrap_or((&e, ""));
    if !first.contains("the source did not compile (NVRTC_ERROR_COMPILATION)")
        || !first.contains("--gpu-architecture=sm_90")
        || e.contains("NvrtcError(")
    {
        return Err(format!("not in plain words, options named: {e}").into());
    }
    if rest.is_empty() || rest.lines().any(|l| !l.starts_with("  | ")) {
        return Err(format!("the log is not quoted line by line: {e}").into());
    }
    if !rest.contains("undeclared_name_") || e.contains('\u{1b}') {
        return Err(format!("the log is missing or holds a raw escape: {e:?}").into());
    }
    Ok(Completion::Completed)
}

/// The documented matrix as one program and as three: every kernel has the same ptxas
/// report and, where a disassembler is found, the same SASS (digest, loop, partials).
pub(crate) fn parts_give_each_kernel_the_code_of_one_program() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let variants = documented_variants();
    let options = compile::options(9, 0);
    let one = compile::compile_as(&variants, &options, 1).map_err(|e| e.to_string())?;
    let three = compile::compile_as(&variants, &options, 3).map_err(|e| e.to_string())?;
    if one.parts.len() != 1 || three.parts.len() != 3 {
        return Err(format!("{} and {} parts", one.parts.len(), three.parts.len()).into());
    }
    let names: Vec<String> = variants.iter().map(|v| v.name()).collect();
    for n in &names {
        if !one.reports.contains_key(n) || one.reports.get(n) != three.reports.get(n) {
            return Err(format!(
                "{n}: ptxas {:?} vs {:?}",
                one.reports.get(n),
                three.reports.get(n)
            )
            .into());
        }
    }
    match (&one.sass, &three.sass) {
        (compile::Sass::Read { .. }, compile::Sass::Read { .. }) => {
            for n in &names {
                if one.sass.summary(n) != three.sass.summary(n) {
                    return Err(
                        format!("{n}: the SASS differs between one program and three").into(),
                    );
                }
            }
            Ok(Completion::Completed)
        }
        (compile::Sass::Unavailable(why), compile::Sass::Unavailable(_)) => Ok(
            Completion::ignored_with(format!("ptxas reports agree; SASS not compared: {why}")),
        ),
        (a, b) => Err(format!("SASS of one program {a:?}, of three {b:?}").into()),
    }
}

/// Every installed toolchain's output, decoded: on each architecture whose control-field
/// layout is known, every loop instruction's word has bits 126-127 zero and reuse bits
/// equal to its `.reuse` marks (`compile::sass` refuses to decode it otherwise), so each
/// loop has a schedule; on sm_100 and sm_120 the summary says the layout is unknown.
pub(crate) fn loop_schedules_decode_where_the_layout_is_known() -> Result<Completion, Failed> {
    use accprobe::compile::sass::control::KNOWN_LAYOUT;
    use accprobe::compile::toolchain::{default_root, installed, resolve};
    use accprobe::compile::worker::spawn_worker;
    use accprobe::model::compiled::ArchOutcome;
    let root = default_root();
    let all = installed(&root);
    if all.is_empty() {
        return Ok(Completion::ignored_with(format!(
            "no toolchain installed in {} (ci/toolchains.sh installs them)",
            root.display()
        )));
    }
    let variants = &documented_variants()[..4];
    let archs: Vec<String> = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120"]
        .map(String::from)
        .to_vec();
    let mut decoded = 0;
    for (version, _) in &all {
        let t = resolve(version, &root).map_err(|e| e.to_string())?;
        let r = spawn_worker(&t, &archs, variants, None, None)?;
        for (arch, outcome) in &r.architectures {
            let m = match outcome {
                ArchOutcome::Compiled(m) => m,
                ArchOutcome::Unsupported(_) => continue,
                ArchOutcome::Failed(why) => return Err(format!("{version} {arch}: {why}").into()),
            };
            if let Some(why) = &m.sass_unavailable {
                return Ok(Completion::ignored_with(format!("no SASS: {why}")));
            }
            for (v, c) in &m.variants {
                let s = c
                    .sass
                    .as_ref()
                    .ok_or(format!("{version} {arch} {v}: no SASS"))?;
                if KNOWN_LAYOUT.contains(&arch.as_str()) {
                    if s.schedule_digest.is_none() || s.loop_control.len() != s.loop_body.len() {
                        return Err(
                            format!("{version} {arch} {v}: {:?}", s.schedule_unknown).into()
                        );
                    }
                    decoded += 1;
                } else if s.schedule_unknown.as_deref()
                    != Some(&format!(
                        "control fields not decoded: layout of {arch} unknown"
                    ))
                {
                    return Err(format!("{version} {arch} {v}: {:?}", s.schedule_unknown).into());
                }
            }
        }
    }
    if decoded == 0 {
        return Err("no loop decoded".into());
    }
    Ok(Completion::Completed)
}
