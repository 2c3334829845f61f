//! fio's json+ output, as the agent reads it after a run.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = isobench::workload::fio::samples_from_json(&String::from_utf8_lossy(data));
});
