//! The SASS parser and the loop summary on arbitrary text.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(functions) = accprobe::sass::parse(text) {
        for f in functions.values() {
            let _ = accprobe::sass::summarise(f);
        }
    }
});
