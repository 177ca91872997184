//! Results files on arbitrary text: an error naming the position, or results.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ =
        accprobe::model::results::RunResults::from_json(text, std::path::Path::new("fuzz.json"));
});
