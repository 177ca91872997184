//! The compile cache: hits, rebuilds and what an entry's key names (the builtins NVRTC
//! loads, options that read files), the ahead compile taken only for its own matrix, and
//! entries unused for a month removed.

use crate::*;
use accprobe::compile;
use libtest_mimic::{Completion, Failed};
use std::path::Path;

pub(crate) fn cache_hits_rebuilds_and_keys() -> Result<Completion, Failed> {
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

/// Set for a child of this binary: compile one variant through the cache folder it names,
/// print how the cache served it and the builtins then mapped, and exit.
pub(crate) const BUILTINS_CHILD: &str = "ACCPROBE_TEST_BUILTINS_CHILD";

pub(crate) fn builtins_child(cache: &str) -> std::process::ExitCode {
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
pub(crate) fn the_key_names_the_builtins_nvrtc_loads() -> Result<Completion, Failed> {
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
pub(crate) fn options_that_read_files_are_not_served_from_the_cache() -> Result<Completion, Failed>
{
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
pub(crate) fn ahead_compile_is_taken_only_for_its_own_matrix() -> Result<Completion, Failed> {
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

/// The cache does not grow for good: a store removes the entries no run has used for
/// `CACHE_UNUSED_DAYS`, and a hit counts as a use.
pub(crate) fn a_store_removes_entries_unused_for_a_month() -> Result<Completion, Failed> {
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
