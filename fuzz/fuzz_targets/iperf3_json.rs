//! iperf3's `--json` client report.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = isobench::workload::network::parse_report(&String::from_utf8_lossy(data));
});
