//! Pruning the compile cache: a store removes the entries no run has used for
//! [`CACHE_UNUSED_DAYS`] and the temporary folders of stores that never finished, and
//! nothing else a user may keep in the folder.

use super::key::is_sha256_hex;
use super::names::is_part_file;
use crate::input;
use std::path::Path;

/// How long a cache entry may go unused before a store in its folder removes it: the key
/// changes with every kernel, option and toolchain change (and with how the key is made),
/// and an entry no run asks for again would otherwise stay for good. A hit marks its entry
/// used.
pub const CACHE_UNUSED_DAYS: u64 = 30;

/// How old a temporary folder of a store must be before a later store removes it: one left
/// by a process killed while storing (a store takes well under a second).
const STALE_STORE: std::time::Duration = std::time::Duration::from_secs(3600);

/// Whether the folder `dir` holds nothing but what a store writes: regular files named as an
/// entry's ([`is_part_file`], `manifest`), the manifest, when `manifest` asks for one, naming
/// only such files with their SHA-256 digests. A folder of someone else's that only looks
/// like an entry (64 hexadecimal digits with a file `manifest`, as containers/storage keeps
/// its images) is never removed, nor anything a user put into an entry.
fn only_entry_files(dir: &Path, manifest: bool) -> bool {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return false;
    };
    for e in rd {
        let Ok(e) = e else { return false };
        let ours = e
            .file_name()
            .to_str()
            .is_some_and(|n| n == "manifest" || is_part_file(n));
        if !ours || !e.file_type().is_ok_and(|t| t.is_file()) {
            return false;
        }
    }
    if !manifest {
        return true;
    }
    // A regular file, not a link (checked above); read as every manifest is, bounded.
    input::read_text(&dir.join("manifest"), "manifest", input::YAML_LIMIT).is_ok_and(|text| {
        !text.is_empty()
            && text.lines().all(|l| {
                l.split_once(' ')
                    .is_some_and(|(name, d)| is_part_file(name) && is_sha256_hex(d))
            })
    })
}

/// Removes from the cache folder `root` the entries unused for [`CACHE_UNUSED_DAYS`] (by
/// their manifest's time) and the temporary folders of stores older than an hour, as of
/// `now`. Only folders that are entries (64 hexadecimal digits, with a manifest) or a
/// store's temporary folder (`.tmp-PID-KEY`), holding nothing but an entry's files, are
/// ever removed, never through a link: nothing else a user may keep there. The old
/// layout's `nvrtc-*` folders are pruned by the same rules (and removed once empty). A
/// process reading an entry removed meanwhile finds it does not match its manifest and
/// compiles it again. Returns the names removed.
pub fn prune_cache(root: &Path, now: std::time::SystemTime) -> Vec<String> {
    let unused = std::time::Duration::from_secs(CACHE_UNUSED_DAYS * 24 * 3600);
    let mut removed = Vec::new();
    let Ok(rd) = std::fs::read_dir(root) else {
        return removed;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        // Never through a link: only real folders of the cache.
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        // A cache an older accprobe wrote holds its compile-only entries one folder down,
        // per toolchain (`nvrtc-VERSION-HASH/KEY`): pruned by the same rules, and the folder removed once
        // nothing is left in it.
        if name.starts_with("nvrtc-") {
            let inner = prune_cache(&e.path(), now);
            removed.extend(inner.into_iter().map(|n| format!("{name}/{n}")));
            if std::fs::remove_dir(e.path()).is_ok() {
                removed.push(name);
            }
            continue;
        }
        // An entry has its manifest; a store's temporary folder is `.tmp-PID-KEY`.
        let manifest = std::fs::symlink_metadata(e.path().join("manifest"))
            .ok()
            .filter(|m| m.is_file());
        let store = name
            .strip_prefix(".tmp-")
            .and_then(|r| r.split_once('-'))
            .is_some_and(|(pid, key)| {
                pid.bytes().all(|b| b.is_ascii_digit()) && is_sha256_hex(key)
            });
        let (limit, used, entry) = match manifest {
            Some(m) if is_sha256_hex(&name) => (unused, m.modified(), true),
            _ if store => (STALE_STORE, meta.modified(), false),
            _ => continue,
        };
        let old = used
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .is_some_and(|age| age > limit);
        if old && only_entry_files(&e.path(), entry) && std::fs::remove_dir_all(e.path()).is_ok() {
            removed.push(name);
        }
    }
    removed.sort();
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::cache::entry::mark_used;

    #[test]
    fn pruning_removes_only_entries_unused_for_long_and_stale_stores() {
        use std::time::{Duration, SystemTime};
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let key = |c: char| c.to_string().repeat(64);
        let day = Duration::from_secs(24 * 3600);
        let entry = |dir: &Path, used: SystemTime| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("manifest"), format!("cubin {}\n", "0".repeat(64))).unwrap();
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("manifest"))
                .unwrap();
            f.set_modified(used).unwrap();
        };
        let now = SystemTime::now();
        let r = root.path();
        entry(&r.join(key('a')), now - 40 * day);
        entry(&r.join(key('b')), now - 2 * day);
        // Not entries, whatever their age: never removed.
        entry(&r.join("compile-only"), now - 400 * day);
        entry(&r.join(key('c')).join("nested"), now - 400 * day);
        std::fs::write(r.join(key('d')), "a file named as a key").unwrap();
        entry(&outside.path().join(key('e')), now - 400 * day);
        std::os::unix::fs::symlink(outside.path().join(key('e')), r.join(key('e'))).unwrap();
        std::fs::create_dir_all(r.join(format!(".tmp-123-{}", key('f')))).unwrap();
        std::fs::create_dir_all(r.join(".tmp-mine")).unwrap();

        assert_eq!(prune_cache(r, now), vec![key('a')]);
        // Two hours on, the store's temporary folder is stale; the entry used two days
        // before is still kept.
        assert_eq!(
            prune_cache(r, now + Duration::from_secs(7200)),
            vec![format!(".tmp-123-{}", key('f'))]
        );
        for kept in [
            key('b'),
            "compile-only".into(),
            key('c'),
            key('d'),
            key('e'),
            ".tmp-mine".into(),
        ] {
            assert!(std::fs::symlink_metadata(r.join(&kept)).is_ok(), "{kept}");
        }
        assert!(outside.path().join(key('e')).join("manifest").is_file());
        // 31 days on, the entry used two days before goes too.
        assert_eq!(prune_cache(r, now + 29 * day), vec![key('b')]);
        // A hit marks its entry used.
        entry(&r.join(key('9')), now - 40 * day);
        mark_used(&r.join(key('9')));
        assert!(prune_cache(r, SystemTime::now()).is_empty());
    }

    #[test]
    fn pruning_leaves_folders_that_only_look_like_entries() {
        use std::time::{Duration, SystemTime};
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let key = |c: char| c.to_string().repeat(64);
        let old = SystemTime::now() - Duration::from_secs(400 * 24 * 3600);
        let age = |file: &Path| {
            std::fs::File::open(file)
                .unwrap()
                .set_modified(old)
                .unwrap()
        };
        let digest = "0".repeat(64);
        let folder = |name: &str, files: &[(&str, String)]| {
            let d = r.join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (f, text) in files {
                std::fs::write(d.join(f), text).unwrap();
            }
            age(&d.join("manifest"));
        };
        // An image's metadata in containers/storage's overlay-images: a folder named by a
        // 64-hex id with a file `manifest`, and more beside it.
        folder(
            &key('a'),
            &[
                ("manifest", "{\"schemaVersion\": 2}\n".into()),
                ("=c2hhMjU2", "signatures".into()),
            ],
        );
        // A manifest as the cache writes it, with a file of the user's beside it.
        folder(
            &key('b'),
            &[
                ("manifest", format!("cubin {digest}\n")),
                ("notes.txt", "mine".into()),
            ],
        );
        // ... or a folder of the user's in it.
        folder(&key('c'), &[("manifest", format!("cubin {digest}\n"))]);
        std::fs::create_dir(r.join(key('c')).join("photos")).unwrap();
        // Keys are lower-case.
        folder(&key('D'), &[("manifest", format!("cubin {digest}\n"))]);
        // A store's temporary folder holds an entry's files only.
        let tmp = format!(".tmp-1-{}", key('e'));
        folder(&tmp, &[("manifest", "".into()), ("thesis.tex", "x".into())]);
        age(&r.join(&tmp));
        // An entry as the cache writes it goes.
        folder(
            &key('f'),
            &[
                ("manifest", format!("cubin {digest}\nlog {digest}\n")),
                ("cubin", "".into()),
                ("log", "".into()),
            ],
        );
        assert_eq!(prune_cache(r, SystemTime::now()), vec![key('f')]);
        // The old layout's per-toolchain folders: their old entries go, and the folder when
        // it is left empty; anything else in them stays.
        let entry_in = |dir: &Path| {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::write(dir.join("manifest"), format!("cubin {digest}\n")).unwrap();
            std::fs::write(dir.join("cubin"), "").unwrap();
            age(&dir.join("manifest"));
        };
        entry_in(&r.join("nvrtc-12.4.127-0123").join(key('1')));
        entry_in(&r.join("nvrtc-mine").join(key('2')));
        std::fs::write(r.join("nvrtc-mine").join("notes.txt"), "mine").unwrap();
        assert_eq!(
            prune_cache(r, SystemTime::now()),
            vec![
                "nvrtc-12.4.127-0123".to_string(),
                format!("nvrtc-12.4.127-0123/{}", key('1')),
                format!("nvrtc-mine/{}", key('2')),
            ]
        );
        assert!(r.join("nvrtc-mine").join("notes.txt").is_file());
    }
}
