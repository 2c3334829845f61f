//! A truststore or keystore given to `-transport`: PEM, JKS (its format read by isobench itself)
//! or PKCS12, with the password the seeds were made with, or none.
#![no_main]
use isobench_fuzz as _;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.store");
    for password in [Some("changeit"), None] {
        let _ = cql_stress::tls::certificates_in(data, password, path);
        let _ = cql_stress::tls::identity_in(data, password, path);
    }
});
