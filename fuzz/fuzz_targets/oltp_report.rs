//! sysbench's OLTP report with its histogram and interval reports.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = isobench::workload::oltp::parse_report(&String::from_utf8_lossy(data)) {
        let _ = [0.5, 0.95, 0.99].map(|q| report.percentile(q));
    }
});
