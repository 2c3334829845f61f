//! A whole suite file and `--set` values: the input is the TOML text, then, after a line
//! `---`, one override per line. Errors are values; nothing may panic.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (suite, overrides) = text.split_once("\n---\n").unwrap_or((&text, ""));
    let overrides: Vec<String> = overrides.lines().map(str::to_string).collect();
    let _ = isobench::suite::Suite::from_text("fuzz.toml", suite, std::path::Path::new("/nonexistent"), &overrides);
});
