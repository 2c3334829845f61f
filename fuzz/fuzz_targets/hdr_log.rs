//! An HdrHistogram interval log, as `isobench cql merge` and the loaders' merge read them.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = cql_stress::hdrlog::histograms_of("fuzz.hdr", data);
});
