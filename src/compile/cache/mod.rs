//! Stage 3's compile cache: a folder of entries, one per compilation, each named by its key
//! ([`cache_key`]: source, options, toolchain). A hit compiles nothing; an entry that does
//! not match its manifest is compiled again and replaced; a store prunes what no run uses.
//! One compile per entry at a time in a process: two devices of one architecture share it.

mod entry;
mod key;
mod names;
mod prune;

pub use key::{cache_key, fingerprint, sha256_hex_of, Unfingerprinted};
pub use prune::{prune_cache, CACHE_UNUSED_DAYS};

use crate::compile::disassemble::{disassemble, read_sass};
use crate::compile::source::reads_a_file;
use crate::compile::CompileError;
use crate::compile::{assemble, compile, ptxas, Built, Compiled, Program};
use crate::model::variant::Variant;
use entry::{mark_used, read_entry, write_entry, Untrusted};
use key::toolchain_fingerprint;
use std::collections::BTreeMap;
use std::path::Path;

/// How a compilation was served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheUse {
    /// No cache folder configured.
    Off,
    /// Served from the cache: nothing compiled.
    Hit,
    /// Not in the cache: compiled and stored.
    Miss,
    /// In the cache but corrupt or unreadable: compiled again and replaced.
    Rebuilt(String),
    /// Not looked up, and nothing stored: the toolchain could not be named for the key.
    Unused(String),
    /// Not in the cache: compiled, but could not be stored (a full disk, another process
    /// storing the same entry at that moment).
    Unstored(String),
}

impl std::fmt::Display for CacheUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheUse::Off => f.write_str("off"),
            CacheUse::Hit => f.write_str("hit"),
            CacheUse::Miss => f.write_str("miss"),
            CacheUse::Rebuilt(why) => write!(f, "rebuilt ({why})"),
            CacheUse::Unused(why) => write!(f, "not used ({why})"),
            CacheUse::Unstored(why) => write!(f, "miss ({why})"),
        }
    }
}

/// This process's lock for one cache entry.
fn entry_lock(key: &str) -> std::sync::Arc<std::sync::Mutex<()>> {
    static LOCKS: std::sync::Mutex<BTreeMap<String, std::sync::Arc<std::sync::Mutex<()>>>> =
        std::sync::Mutex::new(BTreeMap::new());
    crate::sync::lock_ignoring_poison(&LOCKS)
        .entry(key.to_string())
        .or_default()
        .clone()
}

/// The matrix from a cache entry's parts: each part's kernels are those its ptxas report
/// names, which together must be every variant; a part stored without SASS (no
/// disassembler when it was written) is disassembled now.
fn from_cache(
    parts: Vec<Program>,
    variants: &[Variant],
    options: &[String],
) -> std::result::Result<Compiled, Untrusted> {
    let reading = std::time::Instant::now();
    let mut built: Vec<Built> = Vec::new();
    for mut part in parts {
        let reports = ptxas::parse(&part.log).map_err(Untrusted::PtxasLog)?;
        if let Some(k) = reports
            .keys()
            .find(|k| built.iter().any(|b| b.reports.contains_key(*k)))
        {
            return Err(Untrusted::InTwoParts(k.clone()));
        }
        let mine: Vec<Variant> = variants
            .iter()
            .filter(|v| reports.contains_key(&v.name()))
            .copied()
            .collect();
        let sass = match &part.sass {
            Some(t) => read_sass(t, "cache".into(), &mine),
            None => {
                let (text, sass) = disassemble(&part.cubin, &mine);
                part.sass = text;
                sass
            }
        };
        built.push(Built {
            part,
            reports,
            sass,
        });
    }
    let covered = |v: &Variant| built.iter().any(|b| b.reports.contains_key(&v.name()));
    if !variants.iter().all(covered) {
        return Err(Untrusted::Uncovered);
    }
    Ok(assemble(
        built,
        options,
        0.0,
        reading.elapsed().as_secs_f64(),
    ))
}

/// [`compile`] through a cache folder: a hit compiles nothing; a corrupt or unreadable
/// entry is never trusted, but compiled again and replaced.
pub fn compile_cached(
    variants: &[Variant],
    options: &[String],
    cache: Option<&Path>,
) -> Result<(Compiled, CacheUse), CompileError> {
    let Some(root) = cache else {
        return Ok((compile(variants, options)?, CacheUse::Off));
    };
    if let Some(o) = options.iter().find(|o| reads_a_file(o)) {
        return Ok((
            compile(variants, options)?,
            CacheUse::Unused(format!(
                "{o} makes NVRTC read a file the key cannot name: compiled, not cached"
            )),
        ));
    }
    let fingerprint = match toolchain_fingerprint() {
        Ok(f) => f,
        Err(Unfingerprinted::Nvrtc(e)) => return Err(e),
        Err(why @ Unfingerprinted::Unnamed(_)) => {
            return Ok((
                compile(variants, options)?,
                CacheUse::Unused(format!("{why}: compiled, not cached")),
            ))
        }
    };
    let key = cache_key(variants, options, &fingerprint);
    // Two devices of one architecture ask for the same entry at once: the second waits
    // for the first and reads what it wrote, instead of compiling it a second time.
    let same_entry = entry_lock(&key);
    let _compiling = crate::sync::lock_ignoring_poison(&same_entry);
    let dir = root.join(&key);
    let status = if dir.exists() {
        match read_entry(&dir, variants.len()) {
            Ok(parts) => match from_cache(parts, variants, options) {
                Ok(c) => {
                    mark_used(&dir);
                    return Ok((c, CacheUse::Hit));
                }
                Err(why) => CacheUse::Rebuilt(why.to_string()),
            },
            Err(why) => CacheUse::Rebuilt(why.to_string()),
        }
    } else {
        CacheUse::Miss
    };
    let c = compile(variants, options)?;
    if let Err(e) = write_entry(&dir, &c) {
        let why = format!("could not store the entry: {e}");
        let status = match status {
            CacheUse::Rebuilt(found) => CacheUse::Rebuilt(format!("{found}; {why}")),
            _ => CacheUse::Unstored(why),
        };
        return Ok((c, status));
    }
    Ok((c, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_whose_programs_both_hold_a_kernel_is_refused() {
        // Which program's code the GPU runs would not be the entry's to say.
        let v = Variant::new(7, 2);
        let log = format!(
            "ptxas info    : Compiling entry function '{0}' for 'sm_90'\n\
             ptxas info    : Function properties for {0}\n\
             \x20   0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
             ptxas info    : Used 10 registers, used 0 barriers, 392 bytes cmem[0]\n",
            v.name()
        );
        let program = Program {
            cubin: vec![1, 2, 3],
            log,
            sass: Some(String::new()),
        };
        let e = from_cache(vec![program.clone(), program], &[v], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains(&v.name()) && e.contains("two"), "{e}");
    }
}
