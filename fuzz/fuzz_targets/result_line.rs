//! What comes back from a sandbox: any stream, in which the agent's framed result line is found.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = isobench::agent::parse_output(&String::from_utf8_lossy(data));
});
