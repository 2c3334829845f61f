//! sysbench 1.0's text report (cpu and memory tests).
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = isobench::workload::sysbench::parse(&String::from_utf8_lossy(data)) {
        let _ = report.common_samples();
    }
});
