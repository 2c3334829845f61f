//! pgbench's per-transaction log (`-l`), and the figures made of its transactions.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ops = isobench::workload::pgbench::parse_log(&String::from_utf8_lossy(data));
    let _ = isobench::workload::served::figures_of(&ops, false, &mut Default::default());
});
