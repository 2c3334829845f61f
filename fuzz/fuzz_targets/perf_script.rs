//! `perf script`'s samples with their call chains (the CPU sampled by part and by function), and
//! a JIT's perf map and a process's mappings read from the same bytes.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let samples = isobench::sys::sampling::parse_script(&text);
    let roles = samples.iter().map(|s| (s.pid, isobench::sys::cpu_parts::Role::Sentry)).collect();
    let jit = isobench::sys::jit_map::JitMap::parse(&text);
    // Mappings parsed only: their files would be read from this machine's disk.
    let _ = isobench::sys::code_names::MappedFiles::parse(&text);
    let names = isobench::sys::code_names::CodeNames::new(vec![jit], Vec::new());
    let parts = isobench::sys::cpu_parts::attribute(&samples, &roles, &names);
    assert!(parts.sampled >= parts.unresolved);
    for symbol in text.split_whitespace() {
        let _ = isobench::sys::cpu_parts::readable(symbol);
    }
});
