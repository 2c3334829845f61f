//! The load generator as its own program: `cql-stress` prints its syntax under its own name and
//! starts its loaders as processes of itself.

use std::process::Command;

fn cql_stress(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_cql-stress")).args(args).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

#[test]
fn help_names_the_program_as_it_is_called() {
    let (ok, text) = cql_stress(&["help"]);
    assert!(ok, "{text}");
    assert!(text.contains("Usage: cql-stress <command> [options]"), "{text}");
    assert!(!text.contains("isobench"), "{text}");
}

#[test]
fn loaders_are_processes_of_this_program_and_say_why_they_failed() {
    let dir = tempfile::tempdir().unwrap();
    let logs = format!("dir={}", dir.path().display());
    // Port 1 on loopback: nothing listens, so each loader fails at its connection.
    let (ok, text) = cql_stress(&["write", "n=10", "-node", "127.0.0.1", "-port", "native=1", "-loaders", "2", &logs]);
    assert!(!ok, "no server, no success: {text}");
    assert!(text.contains("loader 1: cql-stress write") && text.contains("loader 2: cql-stress write"), "{text}");
    for i in 1..=2 {
        let log = std::fs::read_to_string(dir.path().join(format!("loader-{i}.log"))).unwrap();
        assert!(log.contains("127.0.0.1"), "loader {i} ran as cql-stress and said where it failed to connect: {log}");
    }
}
