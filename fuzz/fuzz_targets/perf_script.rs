//! `perf script`'s samples with their call chains (the CPU sampled by part).
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let samples = isobench::sys::sampling::parse_script(&String::from_utf8_lossy(data));
    let roles = samples.iter().map(|s| (s.pid, isobench::sys::cpu_parts::Role::Sentry)).collect();
    let parts = isobench::sys::cpu_parts::attribute(&samples, &roles);
    assert!(parts.sampled >= parts.unresolved);
});
