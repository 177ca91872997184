//! The SASS parser and the loop summary on arbitrary text. Each summary must be
//! consistent with itself: the digest is a SHA-256 in hex, every chain counts at least one
//! FFMA and no more than the loop has, and the chains read back from the stored loop body
//! (as `cargo xtask sass` does) are the ones the summary recorded.
#![no_main]
use accprobe::compile::sass::{chain_of_each, from_lines, parse, summarise};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let Ok(functions) = parse(text) else { return };
    for f in functions.values() {
        let Ok(s) = summarise(f) else { continue };
        assert!(
            s.digest.len() == 64 && s.digest.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            s.digest
        );
        assert!(
            s.loop_partials.iter().all(|&c| c > 0),
            "{:?}",
            s.loop_partials
        );
        assert!(s.loop_partials.iter().sum::<u32>() <= s.loop_ffma, "{s:?}");
        assert!(
            s.loop_ffma_destinations.len() as u32 <= s.loop_ffma,
            "{s:?}"
        );
        let body = from_lines(&s.loop_body);
        let mut lengths: Vec<u32> = Vec::new();
        for c in chain_of_each(&body).into_iter().flatten() {
            if c >= lengths.len() {
                lengths.resize(c + 1, 0);
            }
            lengths[c] += 1;
        }
        assert_eq!(
            lengths, s.loop_partials,
            "chains read back from the stored loop body differ"
        );
    }
});
