//! redis-benchmark's CSV, and the samples made of its rows.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(rows) = isobench::workload::redis_bench::parse_csv(&String::from_utf8_lossy(data)) {
        let _ = isobench::workload::redis_bench::samples(&rows, 100_000.0);
    }
});
