//! Policy loading on arbitrary text, and choosing K for what loaded.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    if let Ok(p) =
        accprobe::expectations::policy::Policy::parse(text, std::path::Path::new("fuzz.yaml"))
    {
        for n in [0, 1, 7, 13, 29, u32::MAX] {
            let _ = p.choose_for_probe(n);
        }
    }
});
