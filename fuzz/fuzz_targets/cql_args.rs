//! A cassandra-stress command line, as `isobench cql` and a suite's `args`/`load` take it.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let args: Vec<String> = text.split_whitespace().map(str::to_string).collect();
    let _ = cql_stress::redacted(&args);
    if let Ok(settings) = cql_stress::settings::parse(&args) {
        let _ = settings.dump();
    }
});
