//! The names of the files in a cache entry: one `cubin`, `log` and `sass` per part, the
//! later parts' with their number, beside the `manifest`. What the entry writer writes and
//! the pruner recognises.

/// The file names of part `k` of a cache entry: `cubin`, `log`, `sass` for the first (all
/// an entry of one part holds), `cubin.1`, `log.1`, `sass.1` for the second, and on.
pub(super) fn part_file(name: &str, k: usize) -> String {
    if k == 0 {
        name.to_string()
    } else {
        format!("{name}.{k}")
    }
}

/// The name of one of the files of a cache entry's parts: `cubin`, `log`, `sass`, with
/// `.K` for later parts ([`part_file`]).
pub(super) fn is_part_file(name: &str) -> bool {
    let (base, k) = name.split_once('.').unwrap_or((name, "0"));
    matches!(base, "cubin" | "log" | "sass")
        && !k.is_empty()
        && k.bytes().all(|b| b.is_ascii_digit())
}
