//! The Prometheus text a runtime exports its counters in (`runsc export-metrics`).
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let counters = isobench::sys::prometheus_counters(&String::from_utf8_lossy(data));
    assert!(counters.keys().all(|name| !name.is_empty()));
});
