//! A cassandra-stress user profile (YAML): the schema, the columns' distributions, the insert
//! and the named queries, as `isobench cql user profile=FILE` reads it.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(profile) = cql_stress::profile::Profile::parse(std::path::Path::new("fuzz.yaml"), &text) {
        let _ = profile.dump();
    }
});
