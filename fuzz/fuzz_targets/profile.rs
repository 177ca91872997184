//! Profile loading on arbitrary text: an error or a profile, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(p) = accprobe::catalog::parse(text, std::path::Path::new("fuzz.yaml")) {
        let _ = accprobe::verdict::cases::cases(&p);
    }
});
