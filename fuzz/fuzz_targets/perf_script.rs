//! `perf script`'s samples with their call chains (the CPU sampled by part and by function), and
//! a JIT's perf map read from the same bytes.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let samples = isobench::sys::sampling::parse_script(&text);
    let roles = samples.iter().map(|s| (s.pid, isobench::sys::cpu_parts::Role::Sentry)).collect();
    let jit = [isobench::sys::jit_map::JitMap::parse(&text)];
    let parts = isobench::sys::cpu_parts::attribute(&samples, &roles, &jit);
    assert!(parts.sampled >= parts.unresolved);
    for symbol in text.split_whitespace() {
        let _ = isobench::sys::cpu_parts::readable(symbol);
    }
});
