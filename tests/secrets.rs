//! A password planted in every place a user can put one (a server's login, a cassandra-stress
//! `-mode password=`, a `--set` value, an invalid suite, `isobench cql`'s own command line), and
//! a user name the suite marks `secret = true`, must appear nowhere: not in the result set, the
//! reports (md, html, json, csv, JUnit), the work directory, the stored suite copy, or anything
//! isobench printed.

mod common;

use std::path::Path;
use std::process::Output;

use common::{Scratch, text};

/// A password no file on this machine holds by chance.
fn unique_password() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("pw{:x}{:x}", nanos, std::process::id())
}

/// Every file under `dir` that holds `needle`.
fn files_holding(dir: &Path, needle: &str) -> Vec<String> {
    let o = std::process::Command::new("grep").args(["-rlaF", needle]).arg(dir).output().unwrap();
    String::from_utf8_lossy(&o.stdout).lines().map(str::to_string).collect()
}

fn assert_not_said(what: &str, o: &Output, secrets: &[&str]) {
    let said = text(o);
    for secret in secrets {
        assert!(!said.contains(secret), "{what} printed the secret {secret}:\n{said}");
    }
}

#[test]
fn a_planted_password_appears_in_no_file_and_no_output() {
    skip_if!(common::cassandra::unable_to_manage());
    let secret = unique_password();
    let user = unique_password().replace("pw", "user");
    let both = [secret.as_str(), user.as_str()];
    let sb = Scratch::new();
    let suite = format!(
        r#"
name = "secrets"
repeat = 1
baseline = {{ env = "host" }}

[[server]]
kind = "cassandra"
heap = "1G"
quick_jit = true
user = {{ value = "{user}", secret = true }}
password = "{secret}"

[[env]]
name = "host"
kind = "host"

[[volume]]
name = "data"
kind = "tmpfs"
size = "1G"

[[workload]]
name = "cql"
kind = "cql"
load = "write n=1000 -rate threads=4"
args = "read n=1000 -rate threads=4 -mode native cql3 user={user} password={secret}"
"#
    );
    let load = format!("write n=1000 -rate threads=4 -mode native cql3 user={user} password={secret}");
    let (run, out) = sb.run_suite(&suite, &["--set", &format!("workload.cql.load={load}")]);
    assert!(run.status.success(), "{}", text(&run));
    assert_not_said("isobench run", &run, &both);
    let record = common::run_record(&out, "host.data.cql", 1);
    assert_eq!(record["status"], "ok", "the login worked: {}", record["error"]);

    let report = sb.run(&[
        "report",
        out.to_str().unwrap(),
        "--format",
        "md",
        "--format",
        "html",
        "--format",
        "json",
        "--format",
        "csv",
    ]);
    assert!(report.status.success(), "{}", text(&report));
    assert_not_said("isobench report", &report, &both);
    let junit = sb.path().join("junit.xml");
    let check = sb.run(&["check", out.to_str().unwrap(), "--junit", junit.to_str().unwrap()]);
    assert_not_said("isobench check", &check, &both);
    assert!(junit.exists(), "{}", text(&check));

    // A suite that fails validation on the very token that carries the password.
    let bad = suite.replace(&format!("-mode native cql3 user={user} password="), "password=");
    let (refused, _) = sb.run_suite(&bad, &[]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert_not_said("a refused suite's error", &refused, &both);

    // The load generator on its own: settings dump, errors, graph page and HDR log.
    let graph = sb.path().join("graph.html");
    let hdr = sb.path().join("cql.hdr");
    let cql = sb.run(&[
        "cql",
        "write",
        "n=10",
        "-node",
        "127.0.0.1",
        "-port",
        "native=1",
        "-mode",
        "native",
        "cql3",
        "user=bench",
        &format!("password={secret}"),
        "-graph",
        &format!("file={}", graph.display()),
        "-log",
        &format!("hdrfile={}", hdr.display()),
    ]);
    assert!(!cql.status.success(), "nothing answers on port 1: {}", text(&cql));
    assert!(text(&cql).contains("Password: REDACTED"), "{}", text(&cql));
    assert_not_said("isobench cql", &cql, &both);

    // The user's own suite file (s.toml) is the one place the password belongs; the history the
    // run was kept in is searched with the rest.
    assert!(sb.path().join("history.sqlite").exists(), "the run was kept in its history");
    let suite_file = sb.path().join("s.toml").to_string_lossy().into_owned();
    for secret in both {
        let leaked: Vec<String> = files_holding(sb.path(), secret).into_iter().filter(|f| *f != suite_file).collect();
        assert!(leaked.is_empty(), "files holding the secret {secret}: {leaked:?}");
    }
    assert!(
        files_holding(&out, "REDACTED").iter().any(|f| f.ends_with("suite.toml")),
        "the stored suite shows where the password was"
    );
    sb.assert_nothing_left();
}
