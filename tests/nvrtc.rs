//! The compile stage for real, wherever libnvrtc can be loaded (no GPU needed): the whole
//! default matrix for sm_90, with its ptxas report parsed per kernel; the matrix split into
//! several NVRTC programs gives each kernel the code of one program. This binary compiles
//! every matrix as two programs (`ACCPROBE_COMPILE_PARTS=2`), so that the cache and the
//! workers see entries of several parts.
//! Ignored with the reason where libnvrtc is absent. `.ci/run` installs NVRTC from PyPI so
//! that CI runs it.

use accprobe::catalog;
use accprobe::compile;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::path::Path;

/// How many NVRTC programs this binary compiles a matrix as.
const PARTS: &str = "2";

fn nvrtc_reason() -> Option<String> {
    (!unsafe { cudarc::nvrtc::sys::is_culib_present() }).then(|| {
        "no NVRTC: libnvrtc.so not found (set LD_LIBRARY_PATH to a CUDA 13 NVRTC)".to_string()
    })
}

fn documented_variants() -> Vec<accprobe::model::variant::Variant> {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("expectations/documented.yaml");
    catalog::load(&file)
        .expect("documented profile loads")
        .probe
        .variants()
}

fn compile_matrix() -> Result<Completion, Failed> {
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

fn compile_error_is_reported() -> Result<Completion, Failed> {
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
fn a_compile_error_quotes_the_log_in_plain_words() -> Result<Completion, Failed> {
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
        Err(e) => e.to_string(),
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

fn cache_hits_rebuilds_and_keys() -> Result<Completion, Failed> {
    use accprobe::compile::{cache_key, compile_cached, CacheUse};
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let dir = std::env::temp_dir().join(format!("accprobe-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let variants = &documented_variants()[..3];
    let options = compile::options(9, 0);
    let check = |want: &str, got: &CacheUse| -> Result<(), Failed> {
        if got.to_string().starts_with(want) {
            Ok(())
        } else {
            Err(format!("expected cache {want}, got {got}").into())
        }
    };
    let (first, use1) =
        compile_cached(variants, &options, Some(&dir)).map_err(|e| e.to_string())?;
    check("miss", &use1)?;
    let (second, use2) =
        compile_cached(variants, &options, Some(&dir)).map_err(|e| e.to_string())?;
    check("hit", &use2)?;
    // A hit reads back exactly what was stored: CUBINs, logs and SASS.
    if first.parts != second.parts || first.reports != second.reports {
        return Err("the cached CUBIN or report differs from the compiled one".into());
    }
    // A corrupt entry is detected and rebuilt, never trusted.
    // The key names the NVRTC library this process loaded and the disassembler, not only
    // NVRTC's major.minor (13.0.48 and 13.0.88 must not share entries).
    let version = compile::fingerprint().map_err(|e| e.to_string())?;
    let loaded = compile::loaded_nvrtc();
    if cfg!(target_os = "linux")
        && (loaded.is_empty()
            || !loaded
                .iter()
                .all(|l| version.contains(&l.display().to_string())))
    {
        return Err(format!(
            "the fingerprint {version:?} does not name the NVRTC loaded: {loaded:?}"
        )
        .into());
    }
    if let Some(tool) = compile::find_disassembler() {
        if !version.contains(&tool.display().to_string()) {
            return Err(format!(
                "the fingerprint {version:?} does not name {}",
                tool.display()
            )
            .into());
        }
    }
    let key = cache_key(variants, &options, &version);
    if key
        == cache_key(
            variants,
            &options,
            &compile::nvrtc_version().map_err(|e| e.to_string())?,
        )
    {
        return Err("the key is NVRTC's major.minor only".into());
    }
    if !dir.join(&key).join("cubin.1").is_file()
        || !dir.join(&key).join("sass.1").is_file()
            && matches!(first.sass, compile::Sass::Read { .. })
    {
        return Err("the entry does not hold the second program's CUBIN and SASS".into());
    }
    let cubin = dir.join(&key).join("cubin");
    let mut bytes = std::fs::read(&cubin).map_err(|e| e.to_string())?;
    bytes[100] ^= 0xff;
    std::fs::write(&cubin, bytes).map_err(|e| e.to_string())?;
    let (third, use3) =
        compile_cached(variants, &options, Some(&dir)).map_err(|e| e.to_string())?;
    check("rebuilt (cubin does not match its digest)", &use3)?;
    // (The logs differ: ptxas reports its own compile time.)
    let cubins =
        |c: &compile::Compiled| c.parts.iter().map(|p| p.cubin.clone()).collect::<Vec<_>>();
    if cubins(&third) != cubins(&first) {
        return Err("the rebuilt CUBINs differ".into());
    }
    check(
        "hit",
        &compile_cached(variants, &options, Some(&dir))
            .map_err(|e| e.to_string())?
            .1,
    )?;
    std::fs::remove_file(dir.join(&key).join("manifest")).map_err(|e| e.to_string())?;
    check(
        "rebuilt (no manifest",
        &compile_cached(variants, &options, Some(&dir))
            .map_err(|e| e.to_string())?
            .1,
    )?;
    // A cache that cannot be written: compiled, said as a miss that was not stored (not as
    // a rebuilt entry, which would say the cache held something wrong).
    let blocked = dir.join("blocked");
    std::fs::write(&blocked, b"a file where the cache folder should be")
        .map_err(|e| e.to_string())?;
    check(
        "miss (could not store the entry",
        &compile_cached(variants, &options, Some(&blocked))
            .map_err(|e| e.to_string())?
            .1,
    )?;
    // Another option is another key.
    let mut other = options.clone();
    other.push("--maxrregcount=32".into());
    if cache_key(variants, &other, &version) == key
        || cache_key(&variants[..2], &options, &version) == key
    {
        return Err("options or source do not change the key".into());
    }
    // Two devices of one architecture compile at once: one compiles, the other reads
    // what it wrote.
    let _ = std::fs::remove_dir_all(&dir);
    let uses: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| compile_cached(variants, &options, Some(&dir))))
            .collect();
        handles
            .into_iter()
            .map(|h| match h.join() {
                Ok(Ok((_, u))) => u.to_string(),
                Ok(Err(e)) => format!("error: {e}"),
                Err(_) => "panicked".to_string(),
            })
            .collect()
    });
    let mut sorted = uses.clone();
    sorted.sort();
    if sorted != ["hit", "miss"] {
        return Err(
            format!("two compiles at once: {uses:?}, expected one miss and one hit").into(),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Completion::Completed)
}

/// The documented matrix as one program and as three: every kernel has the same ptxas
/// report and, where a disassembler is found, the same SASS (digest, loop, partials).
fn parts_give_each_kernel_the_code_of_one_program() -> Result<Completion, Failed> {
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

/// A folder holding a file named like libnvrtc that is no library: the worker says so.
fn not_an_nvrtc_is_refused_by_the_worker() -> Result<Completion, Failed> {
    use accprobe::compile::{toolchain::resolve, worker::spawn_worker};
    let dir = std::env::temp_dir().join(format!("accprobe-fake-nvrtc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("libnvrtc.so.12"), "not a library").map_err(|e| e.to_string())?;
    let t = resolve(dir.to_str().unwrap(), &dir).map_err(|e| e.to_string())?;
    let report = spawn_worker(
        &t,
        &["sm_90".into()],
        &documented_variants()[..1],
        None,
        None,
    )?;
    let _ = std::fs::remove_dir_all(&dir);
    match report.toolchain {
        Err(e) if e.contains("is not an NVRTC: it does not load") => Ok(Completion::Completed),
        other => Err(format!("expected a refusal, got {other:?}").into()),
    }
}

/// The folder a worker's request and report go through is the worker's own: a folder or a
/// link already at a name the parent could predict (its process id and the toolchain's
/// folder) is neither written into nor read from.
fn a_worker_folder_is_never_one_that_was_there() -> Result<Completion, Failed> {
    use accprobe::compile::{toolchain::resolve, worker::spawn_worker};
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join("fake nvrtc");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("libnvrtc.so.12"), "not a library").map_err(|e| e.to_string())?;
    let t = resolve(dir.to_str().unwrap(), &dir).map_err(|e| e.to_string())?;
    let elsewhere = tmp.path().join("somebody else's");
    std::fs::create_dir_all(&elsewhere).map_err(|e| e.to_string())?;
    let predicted = std::env::temp_dir().join(format!(
        "accprobe-worker-{}-{}",
        std::process::id(),
        &compile::sha256_hex_of(t.lib_dir.to_string_lossy().as_bytes())[..12]
    ));
    let _ = std::fs::remove_file(&predicted);
    std::os::unix::fs::symlink(&elsewhere, &predicted).map_err(|e| e.to_string())?;
    let report = spawn_worker(
        &t,
        &["sm_90".into()],
        &documented_variants()[..1],
        None,
        None,
    );
    let _ = std::fs::remove_file(&predicted);
    let written: Vec<String> = std::fs::read_dir(&elsewhere)
        .map_err(|e| e.to_string())?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    if !written.is_empty() {
        return Err(format!("the worker wrote {written:?} through a link it found").into());
    }
    match report {
        Ok(r) if r.toolchain.is_err() => Ok(Completion::Completed),
        other => Err(format!("expected the worker's refusal, got {other:?}").into()),
    }
}

/// Every toolchain installed by ci/toolchains.sh, each in its own worker process: sm_90
/// compiles with that NVRTC's own library, an architecture beyond it is unsupported, one
/// within its range that does not exist is refused.
fn installed_toolchains_compile_in_their_own_workers() -> Result<Completion, Failed> {
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
    let variants = &documented_variants()[..2];
    let archs: Vec<String> = ["sm_90", "sm_81", "sm_990"].map(String::from).to_vec();
    for (version, _) in &all {
        let t = resolve(version, &root).map_err(|e| e.to_string())?;
        let r = spawn_worker(&t, &archs, variants, None, None)?;
        let id = r.toolchain.map_err(|e| format!("{version}: {e}"))?;
        if !version.starts_with(&format!("{}.", id.nvrtc_version)) {
            return Err(format!("{version}: the worker loaded NVRTC {}", id.nvrtc_version).into());
        }
        if !id.library.contains(&format!("nvrtc-{version}")) {
            return Err(format!("{version}: the worker loaded {}", id.library).into());
        }
        match &r.architectures[..] {
            [(_, ArchOutcome::Compiled(m)), (_, ArchOutcome::Failed(unknown)), (_, ArchOutcome::Unsupported(newer))] => {
                if m.variants.len() != 2
                    || !unknown.contains("does not know architecture sm_81")
                    || !newer.contains("newest architecture")
                {
                    return Err(format!("{version}: {m:?} / {unknown} / {newer}").into());
                }
            }
            other => return Err(format!("{version}: {other:?}").into()),
        }
    }
    Ok(Completion::Completed)
}

/// Every installed toolchain's output, decoded: on each architecture whose control-field
/// layout is known, every loop instruction's word has bits 126-127 zero and reuse bits
/// equal to its `.reuse` marks (`compile::sass` refuses to decode it otherwise), so each
/// loop has a schedule; on sm_100 and sm_120 the summary says the layout is unknown.
fn loop_schedules_decode_where_the_layout_is_known() -> Result<Completion, Failed> {
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

/// The 13.0 toolchain installed, copied into two folders whose paths hold spaces: each
/// copy is a toolchain of its own for the cache (the key names the library by its whole
/// path), and the worker names the library it loaded. `/proc/self/maps` pads its fields
/// with spaces; a path read as its first word named no library, and both copies shared
/// the entries of a key that said only NVRTC 13.0.
fn a_toolchain_in_a_folder_with_spaces_is_named_whole() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::{default_root, installed, resolve};
    use accprobe::compile::worker::spawn_worker;
    use accprobe::model::compiled::ArchOutcome;
    let root = default_root();
    let Some((version, _)) = installed(&root)
        .into_iter()
        .find(|(v, _)| v.starts_with("13.0."))
    else {
        return Ok(Completion::ignored_with(format!(
            "NVRTC 13.0 is not installed in {} (ci/toolchains.sh installs it)",
            root.display()
        )));
    };
    let from = resolve(&version, &root).map_err(|e| e.to_string())?.lib_dir;
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let copy = |name: &str| -> Result<std::path::PathBuf, String> {
        let lib = tmp.path().join(name).join("lib");
        std::fs::create_dir_all(&lib).map_err(|e| e.to_string())?;
        for e in std::fs::read_dir(&from).map_err(|e| e.to_string())? {
            let e = e.map_err(|e| e.to_string())?;
            let to = lib.join(e.file_name());
            match std::fs::read_link(e.path()) {
                Ok(target) => std::os::unix::fs::symlink(target, &to),
                Err(_) => std::fs::hard_link(e.path(), &to)
                    .or_else(|_| std::fs::copy(e.path(), &to).map(|_| ())),
            }
            .map_err(|e| e.to_string())?;
        }
        Ok(lib)
    };
    let cache = tmp.path().join("cache");
    let variants = &documented_variants()[..1];
    let mut uses = Vec::new();
    for name in ["nvrtc copy one", "nvrtc copy one", "nvrtc copy two"] {
        let lib = match tmp.path().join(name).join("lib") {
            l if l.is_dir() => l,
            _ => copy(name)?,
        };
        let t = resolve(lib.to_str().unwrap(), &root).map_err(|e| e.to_string())?;
        let r = spawn_worker(&t, &["sm_90".into()], variants, Some(&cache), None)?;
        let id = r.toolchain.map_err(|e| format!("{name}: {e}"))?;
        if !id.library.contains(name) {
            return Err(format!("{name}: the worker names {}", id.library).into());
        }
        match &r.architectures[..] {
            [(_, ArchOutcome::Compiled(m))] => uses.push(m.cache.clone()),
            other => return Err(format!("{name}: {other:?}").into()),
        }
    }
    if uses != ["miss", "hit", "miss"] {
        return Err(format!("cache uses {uses:?}, expected miss, hit, miss").into());
    }
    Ok(Completion::Completed)
}

/// Set for a child of this binary: compile one variant through the cache folder it names,
/// print how the cache served it and the builtins then mapped, and exit.
const BUILTINS_CHILD: &str = "ACCPROBE_TEST_BUILTINS_CHILD";

fn builtins_child(cache: &str) -> std::process::ExitCode {
    compile::disable_compute_cache();
    let variants = &documented_variants()[..1];
    match compile::compile_cached(variants, &compile::options(9, 0), Some(Path::new(cache))) {
        Ok((_, u)) => {
            let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
            let mut builtins: Vec<&str> = maps
                .lines()
                .filter_map(|l| l.find('/').map(|i| &l[i..]))
                .filter(|p| p.contains("libnvrtc-builtins.so"))
                .collect();
            builtins.dedup();
            println!("{u}\n{}", builtins.join("\n"));
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// libnvrtc opens its builtins by soname, so the dynamic linker may find them in a folder of
/// `LD_LIBRARY_PATH` ahead of libnvrtc's own (a CUDA runtime install without the
/// `libnvrtc.so` link, ahead of the one cudarc loads): those builtins compile, and another
/// build of them must not meet the entries the first one made.
fn the_key_names_the_builtins_nvrtc_loads() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    let Some(lib) = compile::loaded_nvrtc().into_iter().next() else {
        return Ok(Completion::ignored_with("no /proc/self/maps"));
    };
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let ahead = tmp.path().join("runtime only");
    std::fs::create_dir_all(&ahead).map_err(|e| e.to_string())?;
    let mut copied = Vec::new();
    for e in std::fs::read_dir(lib.parent().unwrap()).map_err(|e| e.to_string())? {
        let e = e.map_err(|e| e.to_string())?;
        if e.file_name()
            .to_string_lossy()
            .starts_with("libnvrtc-builtins.so")
        {
            let to = ahead.join(e.file_name());
            std::fs::copy(e.path(), &to).map_err(|e| e.to_string())?;
            copied.push(to);
        }
    }
    if copied.is_empty() {
        return Ok(Completion::ignored_with(format!(
            "no libnvrtc-builtins.so* beside {}",
            lib.display()
        )));
    }
    let cache = tmp.path().join("cache");
    let mut path = ahead.clone().into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    } else {
        path.push(":");
        path.push(lib.parent().unwrap());
    }
    let child = || -> Result<Vec<String>, Failed> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let out = std::process::Command::new(exe)
            .env(BUILTINS_CHILD, &cache)
            .env("LD_LIBRARY_PATH", &path)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("child: {}", String::from_utf8_lossy(&out.stderr)).into());
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect())
    };
    let first = child()?;
    if first.first().map(String::as_str) != Some("miss")
        || !first[1..]
            .iter()
            .any(|b| b.starts_with(&*ahead.to_string_lossy()))
    {
        return Err(format!(
            "expected a miss compiled with the builtins of {}: {first:?}",
            ahead.display()
        )
        .into());
    }
    // Another build of the builtins there (same size, another time): not the entry's.
    for f in &copied {
        std::fs::File::options()
            .write(true)
            .open(f)
            .and_then(|h| {
                h.set_modified(
                    std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1 << 30),
                )
            })
            .map_err(|e| e.to_string())?;
    }
    let second = child()?;
    if second.first().map(String::as_str) != Some("miss") {
        return Err(
            format!("other builtins were served the entry of the first ones: {second:?}").into(),
        );
    }
    Ok(Completion::Completed)
}

/// Options that make NVRTC read a file (`--pre-include`, an include path) compile what the
/// file holds now; the key cannot see it, so such a compile is not served from the cache.
fn options_that_read_files_are_not_served_from_the_cache() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let header = tmp.path().join("experiment.h");
    std::fs::write(&header, "#define ACCPROBE_EXPERIMENT 1\n").map_err(|e| e.to_string())?;
    let cache = tmp.path().join("cache");
    let variants = &documented_variants()[..1];
    let mut options = compile::options(9, 0);
    options.push(format!("--pre-include={}", header.display()));
    compile::compile_cached(variants, &options, Some(&cache)).map_err(|e| e.to_string())?;
    std::fs::write(&header, "#error the experiment changed\n").map_err(|e| e.to_string())?;
    match compile::compile_cached(variants, &options, Some(&cache)) {
        Err(e) if e.to_string().contains("the experiment changed") => Ok(Completion::Completed),
        Err(e) => Err(format!("unexpected error: {e}").into()),
        Ok((_, u)) => Err(format!("the header's new text was not compiled (cache {u})").into()),
    }
}

/// A compile started before the device's context (`Ahead`) is taken by the device's first
/// use only when it is for the same variants and options; one not taken, or dropped, still
/// finishes storing its cache entry (the process must not end halfway through a store).
fn ahead_compile_is_taken_only_for_its_own_matrix() -> Result<Completion, Failed> {
    use accprobe::measure::target::{matrix_options, Ahead};
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let cache = tmp.path().join("cache");
    let all = documented_variants();
    let (one, two) = (&all[..1], &all[..2]);
    let options = matrix_options((9, 0));
    let taken = Ahead::start(0, (9, 0), two.to_vec(), Some(cache.clone()))
        .take_for(two, &options)
        .ok_or("the compile of the same matrix was not taken")?
        .map_err(|e| e.to_string())?;
    if taken.0.options != options || taken.0.reports.len() != 2 || taken.1.cache != "miss" {
        return Err(format!(
            "taken: options {:?}, {} reports, cache {}",
            taken.0.options,
            taken.0.reports.len(),
            taken.1.cache
        )
        .into());
    }
    let other = Ahead::start(0, (9, 0), one.to_vec(), Some(cache.clone()));
    if other.take_for(two, &options).is_some() {
        return Err("a compile of another variant set was taken".into());
    }
    let sm80 = Ahead::start(0, (8, 0), two.to_vec(), Some(cache.clone()));
    if sm80.take_for(two, &options).is_some() {
        return Err("a compile for sm_80 was taken for sm_90".into());
    }
    drop(Ahead::start(0, (8, 6), one.to_vec(), Some(cache.clone())));
    // Each compile not taken finished its entry before the `Ahead` was gone: four entries,
    // each with its manifest, and no temporary folder.
    let mut entries = Vec::new();
    for e in std::fs::read_dir(&cache).map_err(|e| e.to_string())? {
        let e = e.map_err(|e| e.to_string())?;
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || !e.path().join("manifest").is_file() {
            return Err(format!("{name} in the cache is not a finished entry").into());
        }
        entries.push(name);
    }
    if entries.len() != 4 {
        return Err(format!("{} cache entries, expected 4: {entries:?}", entries.len()).into());
    }
    // And they are the matrices compiled: compiling them now hits.
    for (variants, capability) in [(one, (9, 0)), (two, (8, 0)), (one, (8, 6))] {
        let (_, used) =
            compile::compile_cached(variants, &matrix_options(capability), Some(&cache))
                .map_err(|e| e.to_string())?;
        if used.to_string() != "hit" {
            return Err(format!(
                "{} variant(s) for {capability:?} after a compile not taken: cache {used}",
                variants.len()
            )
            .into());
        }
    }
    Ok(Completion::Completed)
}

/// Set in the child process of [`a_worker_does_not_outlive_its_parent`]: it starts a compile
/// worker that never finishes and waits for it.
const PARENT_MODE: &str = "ACCPROBE_TEST_WORKER_PARENT";

/// The processes whose parent is `pid`, from /proc.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|p| {
            std::fs::read_to_string(format!("/proc/{p}/status")).is_ok_and(|s| {
                s.lines()
                    .any(|l| l.split_whitespace().eq(["PPid:", &pid.to_string()]))
            })
        })
        .collect()
}

/// Whether process `pid` still runs (a zombie has ended).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Set with [`PARENT_MODE`]: the file the child's fake disassembler writes its process id
/// to once it disassembles.
const DISASSEMBLER_PID: &str = "ACCPROBE_TEST_DISASSEMBLER_PID";

/// A run that is signalled (a CI cancel, nextest's timeout) while a toolchain compiles and
/// disassembles must not leave its compile worker, nor the worker's disassembler, running
/// on, unwatched.
fn a_worker_does_not_outlive_its_parent() -> Result<Completion, Failed> {
    use accprobe::compile::toolchain::{default_root, installed};
    let root = default_root();
    let Some((version, _)) = installed(&root).into_iter().last() else {
        return Ok(Completion::ignored_with(format!(
            "no toolchain installed in {} (ci/toolchains.sh installs them)",
            root.display()
        )));
    };
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let pid_file = tmp.path().join("disassembler.pid");
    let mut parent = std::process::Command::new(std::env::current_exe().unwrap())
        .env(PARENT_MODE, &version)
        .env(DISASSEMBLER_PID, &pid_file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let end = |parent: &mut std::process::Child| {
        let _ = parent.kill();
        let _ = parent.wait();
    };
    // The worker compiles, then disassembles: the fake disassembler says when.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let disassembler = loop {
        let pid = std::fs::read_to_string(&pid_file).ok();
        if let Some(p) = pid.and_then(|t| t.trim().parse::<u32>().ok()) {
            break p;
        }
        if std::time::Instant::now() > deadline || parent.try_wait().ok().flatten().is_some() {
            end(&mut parent);
            return Err("the parent's worker never disassembled".into());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let worker = children_of(parent.id());
    // SAFETY: signals the child this test started and has not waited for yet.
    unsafe { libc::kill(parent.id() as i32, libc::SIGTERM) };
    let _ = parent.wait();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for pid in worker.into_iter().chain([disassembler]) {
        while running(pid) {
            if std::time::Instant::now() > deadline {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                return Err(format!("process {pid} still runs after its run was signalled").into());
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    Ok(Completion::Completed)
}

/// The cache does not grow for good: a store removes the entries no run has used for
/// `CACHE_UNUSED_DAYS`, and a hit counts as a use.
fn a_store_removes_entries_unused_for_a_month() -> Result<Completion, Failed> {
    if let Some(reason) = nvrtc_reason() {
        return Ok(Completion::ignored_with(reason));
    }
    compile::disable_compute_cache();
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let cache = tmp.path().join("cache");
    let all = documented_variants();
    let options = compile::options(9, 0);
    let age = |dir: &Path, days: u64| -> Result<(), String> {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("manifest"))
            .map_err(|e| e.to_string())?;
        f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(days * 86_400))
            .map_err(|e| e.to_string())
    };
    let entries = || -> Vec<std::path::PathBuf> {
        std::fs::read_dir(&cache)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    // Two entries, both last used 40 days ago; the first is then hit. Each is named as it
    // is stored (a folder's order says nothing of which is which).
    compile::compile_cached(&all[..1], &options, Some(&cache)).map_err(|e| e.to_string())?;
    let [first] = <[std::path::PathBuf; 1]>::try_from(entries())
        .map_err(|e| format!("{} entries, expected 1", e.len()))?;
    compile::compile_cached(&all[1..2], &options, Some(&cache)).map_err(|e| e.to_string())?;
    let second = entries()
        .into_iter()
        .find(|p| *p != first)
        .ok_or("no second entry")?;
    for dir in [&first, &second] {
        age(dir, 40)?;
    }
    let (_, used) =
        compile::compile_cached(&all[..1], &options, Some(&cache)).map_err(|e| e.to_string())?;
    if used.to_string() != "hit" {
        return Err(format!("the first entry again: {used}").into());
    }
    // A third entry is stored: the one unused for 40 days goes, the one just hit stays.
    compile::compile_cached(&all[2..3], &options, Some(&cache)).map_err(|e| e.to_string())?;
    let left = entries();
    let hit = left
        .iter()
        .filter(|p| p.file_name() == first.file_name())
        .count();
    let unused = left
        .iter()
        .filter(|p| p.file_name() == second.file_name())
        .count();
    if left.len() != 2 || hit != 1 || unused != 0 {
        return Err(format!("after the store: {left:?}").into());
    }
    Ok(Completion::Completed)
}

fn main() -> std::process::ExitCode {
    if let Some(code) = compile::worker::worker_main() {
        return code;
    }
    if let Ok(version) = std::env::var(PARENT_MODE) {
        // The whole matrix, uncached: a worker that takes a while.
        let root = compile::toolchain::default_root();
        let t = compile::toolchain::resolve(&version, &root).unwrap();
        // A disassembler that never answers (after it says its process id): the worker
        // waits on it for as long as it lives.
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("nvdisasm");
        let pid_file = std::env::var(DISASSEMBLER_PID).unwrap_or_else(|_| "/dev/null".into());
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
    if let Some(cache) = std::env::var_os(BUILTINS_CHILD) {
        return builtins_child(&cache.to_string_lossy());
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
    let trials = vec![
        Trial::ignorable_test(
            "compile::parts_give_each_kernel_the_code_of_one_program",
            parts_give_each_kernel_the_code_of_one_program,
        ),
        Trial::ignorable_test("compile::default_matrix_sm_90", compile_matrix),
        Trial::ignorable_test(
            "compile::loop_schedules_decode_where_the_layout_is_known",
            loop_schedules_decode_where_the_layout_is_known,
        ),
        Trial::ignorable_test("compile::bad_option_is_reported", compile_error_is_reported),
        Trial::ignorable_test(
            "compile::a_compile_error_quotes_the_log_in_plain_words",
            a_compile_error_quotes_the_log_in_plain_words,
        ),
        Trial::ignorable_test(
            "compile::ahead_compile_is_taken_only_for_its_own_matrix",
            ahead_compile_is_taken_only_for_its_own_matrix,
        ),
        Trial::ignorable_test(
            "compile::a_store_removes_entries_unused_for_a_month",
            a_store_removes_entries_unused_for_a_month,
        ),
        Trial::ignorable_test(
            "compile::cache_hits_rebuilds_and_keys",
            cache_hits_rebuilds_and_keys,
        ),
        Trial::ignorable_test(
            "compile::the_key_names_the_builtins_nvrtc_loads",
            the_key_names_the_builtins_nvrtc_loads,
        ),
        Trial::ignorable_test(
            "compile::options_that_read_files_are_not_served_from_the_cache",
            options_that_read_files_are_not_served_from_the_cache,
        ),
        Trial::ignorable_test(
            "toolchain::a_worker_folder_is_never_one_that_was_there",
            a_worker_folder_is_never_one_that_was_there,
        ),
        Trial::ignorable_test(
            "toolchain::not_an_nvrtc_is_refused_by_the_worker",
            not_an_nvrtc_is_refused_by_the_worker,
        ),
        Trial::ignorable_test(
            "toolchain::installed_toolchains_compile_in_their_own_workers",
            installed_toolchains_compile_in_their_own_workers,
        ),
        Trial::ignorable_test(
            "toolchain::a_toolchain_in_a_folder_with_spaces_is_named_whole",
            a_toolchain_in_a_folder_with_spaces_is_named_whole,
        ),
        Trial::ignorable_test(
            "toolchain::a_worker_does_not_outlive_its_parent",
            a_worker_does_not_outlive_its_parent,
        ),
    ];
    libtest_mimic::run(&args, trials).exit_code()
}
