//! The ptxas verbose-report parser on arbitrary text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = accprobe::compile::ptxas::parse(text);
});
