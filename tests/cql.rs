//! `isobench cql` against a real Cassandra 5.0: data that validates, errors that count, latency
//! measured from intended starts under a fixed rate, cassandra-stress's output formats, graphs
//! with revisions, and failures (unreachable node, node killed mid-run) that end cleanly.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::cassandra::{self, TestNode};
use regex::Regex;

fn node() -> Option<TestNode> {
    match cassandra::shared() {
        Ok(n) => Some(n),
        Err(missing) => {
            common::skip(&missing);
            None
        }
    }
}

fn signal(pid: i32, signal: i32) {
    // SAFETY: kill(2) on the test's own Cassandra.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
}

fn cql(node: &TestNode, args: &str) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_isobench"));
    c.arg("cql").args(args.split_whitespace()).args(node.target());
    c
}

fn run(node: &TestNode, args: &str) -> (Output, String) {
    let out = cql(node, args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    (out, stdout)
}

/// Reads a running loader's output up to its first interval row (the load is under way then).
fn until_first_interval(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> String {
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        seen += &line;
        seen.push('\n');
        if line.starts_with("total,") {
            break;
        }
    }
    seen
}

/// Runs a loader and calls `meanwhile` once its load is under way (its first interval row is
/// printed); returns how it exited, its stdout and its stderr.
fn run_meanwhile(node: &TestNode, args: &str, meanwhile: impl FnOnce()) -> (std::process::ExitStatus, String, String) {
    let mut child = cql(node, args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdout = until_first_interval(&mut lines);
    meanwhile();
    for line in lines {
        stdout += &line.unwrap();
        stdout.push('\n');
    }
    let status = child.wait().unwrap();
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    (status, stdout, stderr)
}

/// A count of a Results block (`Total errors`, `Total partitions`).
fn results_count(stdout: &str, label: &str) -> u64 {
    let line = stdout.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label}:\n{stdout}"));
    line.split(':').nth(1).unwrap().split_whitespace().next().unwrap().replace(',', "").parse().unwrap()
}

fn total_errors(stdout: &str) -> u64 {
    results_count(stdout, "Total errors")
}

#[test]
fn what_write_wrote_read_validates() {
    let Some(node) = node() else { return };
    let (out, stdout) = run(&node, "write n=20000 no-warmup -rate threads=32 -schema keyspace=t_roundtrip");
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0);
    let (out, stdout) =
        run(&node, "read n=20000 no-warmup -rate threads=32 -pop seq=1..20000 -schema keyspace=t_roundtrip");
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0, "{stdout}");
    assert!(stdout.contains("Total partitions          :     20,000"), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("END"));
}

#[test]
fn a_read_with_other_column_sizes_reports_validation_errors() {
    let Some(node) = node() else { return };
    let (out, _) = run(&node, "write n=2000 no-warmup -rate threads=16 -schema keyspace=t_columns");
    assert!(out.status.success());
    let mismatch =
        "read n=2000 no-warmup -rate threads=16 -pop seq=1..2000 -col size=fixed(50) -schema keyspace=t_columns";
    let (out, stdout) = run(&node, &format!("{mismatch} -errors ignore"));
    assert!(out.status.success(), "-errors ignore counts and goes on");
    assert_eq!(total_errors(&stdout), 2000, "{stdout}");
    assert_eq!(stdout.lines().last(), Some("END"));
    let (out, stdout) = run(&node, mismatch);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout.contains("FAILURE"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("Data returned was not validated"));
}

#[test]
fn a_stalled_server_delays_every_queued_operation_under_a_fixed_rate() {
    let Some(node) = node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let hdr = dir.path().join("fixed.hdr");
    let mut child = cql(&node, &format!("write duration=6s no-warmup -rate threads=100 fixed=1000/s -schema keyspace=t_fixed -log interval=1s hdrfile={}", hdr.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Once the first interval is printed the load is at its rate: stall the server for 1 s.
    let seen = until_first_interval(&mut lines);
    let stalled_at = Instant::now();
    signal(node.pid, libc::SIGSTOP);
    std::thread::sleep(Duration::from_secs(1));
    signal(node.pid, libc::SIGCONT);
    let stall = stalled_at.elapsed();
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert!(child.wait().unwrap().success(), "{seen}{}", rest.join("\n"));
    let histograms = cql_stress::hdrlog::histograms(&hdr).unwrap();
    let rt = &histograms["WRITE-rt"].histogram;
    let slow = rt.count_between(500_000_000, rt.max());
    assert!(slow >= 400, "{slow} operations at >= 500 ms after a {stall:?} stall (max {} ms)", rt.max() / 1_000_000);
}

#[test]
fn operations_on_a_stalled_server_time_out_after_the_request_timeout() {
    let Some(node) = node() else { return };
    let (out, _) = run(&node, "write n=2000 no-warmup -rate threads=8 -schema keyspace=t_timeout");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let args = "read duration=5s no-warmup -rate threads=8 -pop seq=1..2000 -schema keyspace=t_timeout -mode native cql3 requestTimeout=200 -errors ignore retries=0";
    let (status, stdout, stderr) = run_meanwhile(&node, args, || {
        signal(node.pid, libc::SIGSTOP);
        std::thread::sleep(Duration::from_secs(1));
        signal(node.pid, libc::SIGCONT);
    });
    assert!(status.success(), "{stdout}\n{stderr}");
    // Each of the 8 operations in flight when the server stopped timed out, and each worker's
    // next one too, until the server came back.
    assert!(total_errors(&stdout) >= 8, "{stdout}\n{stderr}");
    assert!(stderr.contains("Request execution exceeded a client timeout of 200ms"), "{stderr}");
    let ops = results_count(&stdout, "Total partitions");
    assert!(ops > 100, "the reads went on after the stall: {stdout}");
}

#[test]
fn interval_and_summary_lines_parse_as_cassandra_stress_output() {
    let Some(node) = node() else { return };
    let (out, stdout) = run(
        &node,
        "mixed ratio(write=1,read=1) n=6000 no-warmup -rate threads=8 -pop seq=1..3000 -schema keyspace=t_format -errors ignore",
    );
    assert!(out.status.success(), "{stdout}");
    let header = "type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors,  gc: #,  max ms,  sum ms,  sdv ms,      mb";
    assert!(stdout.lines().any(|l| l == header), "{stdout}");
    let num = r"\s*-?[0-9]+(\.[0-9]+)?";
    let interval = Regex::new(&format!(
        r"^(total|READ|WRITE),\s*[0-9]+,{n},{n},{n},{n},{n},{n},{n},{n},{n},{n},\s*(-?[0-9]+\.[0-9]{{5}}|NaN),\s*[0-9]+,\s*0,\s*0,\s*0,\s*0,\s*0$",
        n = num
    ))
    .unwrap();
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("total,") || l.starts_with("READ,") || l.starts_with("WRITE,"))
        .collect();
    assert!(rows.len() >= 3, "{stdout}");
    for row in &rows {
        assert!(interval.is_match(row), "not a cassandra-stress interval row: {row:?}");
        assert_eq!(row.len(), header.len(), "columns line up with the header: {row:?}");
    }
    let results = stdout.split("Results:\n").nth(1).unwrap();
    let rate = r"\s*[0-9,]+";
    let ms = r"\s*[0-9]+\.[0-9]";
    let labels = [
        format!(r"^Op rate                   :{rate} op/s  \[READ:{rate} op/s, WRITE:{rate} op/s\]$"),
        format!(r"^Partition rate            :{rate} pk/s  \[READ:{rate} pk/s, WRITE:{rate} pk/s\]$"),
        format!(r"^Row rate                  :{rate} row/s \[READ:{rate} row/s, WRITE:{rate} row/s\]$"),
        format!(r"^Latency mean              :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Latency median            :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Latency 95th percentile   :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Latency 99th percentile   :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Latency 99.9th percentile :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Latency max               :{ms} ms \[READ:{ms} ms, WRITE:{ms} ms\]$"),
        format!(r"^Total partitions          :{rate} \[READ:{rate}, WRITE:{rate}\]$"),
        format!(r"^Total errors              :{rate} \[READ:{rate}, WRITE:{rate}\]$"),
        r"^Total GC count            : 0$".into(),
        r"^Total GC memory           : 0\.000 KiB$".into(),
        r"^Total GC time             :    0\.0 seconds$".into(),
        r"^Avg GC time               :    NaN ms$".into(),
        r"^StdDev GC time            :    0\.0 ms$".into(),
        r"^Total operation time      : [0-9]{2}:[0-9]{2}:[0-9]{2}$".into(),
    ];
    let lines: Vec<&str> = results.lines().collect();
    for (line, pattern) in lines.iter().zip(&labels) {
        assert!(Regex::new(pattern).unwrap().is_match(line), "{line:?} does not match {pattern}");
    }
    assert_eq!(stdout.lines().last(), Some("END"));
}

#[test]
fn graphing_twice_into_one_file_keeps_both_revisions() {
    let Some(node) = node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let graph = dir.path().join("g.html");
    for revision in ["first", "second"] {
        let (out, stdout) = run(
            &node,
            &format!(
                "write n=3000 no-warmup -rate threads=8 -schema keyspace=t_graph -graph file={} revision={revision} title=twice",
                graph.display()
            ),
        );
        assert!(out.status.success(), "{stdout}");
    }
    let html = std::fs::read_to_string(&graph).unwrap();
    let data = html.split(r#"id="isobench-cql-graph">"#).nth(1).unwrap().split("</script>").next().unwrap();
    let parsed: serde_json::Value = serde_json::from_str(data).unwrap();
    let revisions: Vec<&str> =
        parsed["revisions"].as_array().unwrap().iter().map(|r| r["revision"].as_str().unwrap()).collect();
    assert_eq!(revisions, ["first", "second"]);
    assert!(!html.contains("src=") && !html.contains("href="), "self-contained: nothing to fetch");
}

/// `isobench cql write n=10` against 127.0.0.1:`port`: its output and how long it took.
fn write_to(port: u16) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_isobench"))
        .args(["cql", "write", "n=10", "-node", "127.0.0.1", "-port"])
        .arg(format!("native={port}"))
        .output()
        .unwrap();
    (out, started.elapsed())
}

#[test]
fn an_unreachable_node_fails_fast_and_clearly() {
    let port = isobench::sys::free_port().unwrap();
    let (out, took) = write_to(port);
    assert_eq!(out.status.code(), Some(1));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "the message names the node: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// A CQL "node" on loopback that does `behaviour` with each connection; its port.
fn fake_node(behaviour: fn(std::net::TcpStream)) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for connection in listener.incoming().flatten() {
            std::thread::spawn(move || behaviour(connection));
        }
    });
    port
}

fn closes(c: std::net::TcpStream) {
    drop(c);
}

/// Answers the driver's first frame with frames of a protocol version it does not speak, then
/// bytes that are no frame at all.
fn talks_garbage(mut c: std::net::TcpStream) {
    use std::io::{Read, Write};
    let _ = c.read(&mut [0; 4096]);
    let _ = c.write_all(b"\x85\x00\x00\x01\x00\x00\x00\x10garbage garbage!");
    let _ = c.write_all(&[0xff; 4096]);
}

fn says_nothing(c: std::net::TcpStream) {
    std::thread::sleep(Duration::from_secs(60));
    drop(c);
}

#[test]
fn a_node_that_closes_talks_garbage_or_says_nothing_fails_the_run_in_bounded_time() {
    for (what, behaviour) in
        [("closes", closes as fn(_)), ("talks garbage", talks_garbage), ("says nothing", says_nothing)]
    {
        let port = fake_node(behaviour);
        let (out, took) = write_to(port);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "a node that {what}: {stderr}");
        assert!(took < Duration::from_secs(12), "a node that {what}: took {took:?}");
        assert!(stderr.contains(&format!("cannot connect to 127.0.0.1:{port}")), "a node that {what}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        if what == "says nothing" {
            // The client's heartbeat (5 s) gives up on it before the 8-s connect limit does.
            let silent = stderr.contains("no answer within 8 s") || stderr.contains("response to keepalive request");
            assert!(silent, "{stderr}");
        }
    }
    // In a suite, the cell that needs the node fails and the others run.
    let sb = common::Scratch::new();
    let port = fake_node(talks_garbage);
    let (out, dir) = sb.run_suite(
        &format!(
            r#"
name = "fake"
repeat = 1
baseline = {{ env = "host" }}
[[server]]
kind = "external"
nodes = ["127.0.0.1"]
port = {port}
[[env]]
name = "host"
kind = "host"
[[volume]]
name = "t"
kind = "tmpfs"
size = "64M"
[[workload]]
name = "cql"
kind = "cql"
args = "write n=100"
[[workload]]
name = "cpu"
kind = "cpu"
events = 500
"#
        ),
        &[],
    );
    let said = common::runs_failed(&out, &["host.t.cql"]);
    let failed = common::run_record(&dir, "host.t.cql", 1);
    assert_eq!(failed["status"], "failed", "{said}");
    assert!(failed["error"].as_str().unwrap().contains(&format!("cannot connect to 127.0.0.1:{port}")), "{failed:#}");
    assert_eq!(common::run_record(&dir, "host.t.cpu", 1)["status"], "ok", "{said}");
    sb.assert_clean();
}

#[test]
fn a_node_killed_mid_run_ends_the_run_with_a_summary_and_a_failure() {
    let victim = match cassandra::start_node("victim") {
        Ok(n) => n,
        Err(missing) => return common::skip(&missing),
    };
    let mut killed_at = Instant::now();
    let (status, stdout, stderr) =
        run_meanwhile(&victim, "write duration=30s no-warmup -rate threads=16 -log interval=1s", || {
            signal(victim.pid, libc::SIGKILL);
            killed_at = Instant::now();
        });
    assert!(killed_at.elapsed() < Duration::from_secs(40), "the run ended");
    assert_eq!(status.code(), Some(1), "{stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stdout.contains("Results:"), "{stdout}");
    assert!(total_errors(&stdout) > 0, "{stdout}");
    assert!(stdout.ends_with("FAILURE\n"), "{stdout}");
}

#[test]
fn two_loaders_hdr_logs_merge_into_one_summary() {
    let Some(node) = node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let logs: Vec<_> = ["a", "b"].iter().map(|n| dir.path().join(format!("{n}.hdr"))).collect();
    let ranges = ["1..2000", "2001..4000"];
    let loaders: Vec<_> = logs
        .iter()
        .zip(ranges)
        .map(|(log, range)| {
            cql(
                &node,
                &format!(
                    "write n=2000 no-warmup -rate threads=8 -pop seq={range} -schema keyspace=t_merge -log hdrfile={}",
                    log.display()
                ),
            )
            .stdout(Stdio::null())
            .spawn()
            .unwrap()
        })
        .collect();
    for mut l in loaders {
        assert!(l.wait().unwrap().success());
    }
    let out = Command::new(env!("CARGO_BIN_EXE_isobench")).arg("cql").arg("merge").args(&logs).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Total operations          :      4,000 [WRITE: 4,000]"), "{text}");
}

/// `SELECT COUNT(*)` with a CQL client of the test's own, not the loaders'.
fn count_rows(node: &TestNode, table: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let session = scylla::client::session_builder::SessionBuilder::new()
            .known_node(format!("127.0.0.1:{}", node.port))
            .build()
            .await
            .unwrap();
        let rows = session.query_unpaged(format!("SELECT COUNT(*) FROM {table}"), ()).await.unwrap();
        let (n,): (i64,) = rows.into_rows_result().unwrap().first_row().unwrap();
        n
    })
}

/// A Results line's figure in ms: "Latency 99th percentile   :    1.2 ms [WRITE: 1.2 ms]" → 1.2.
fn results_ms(stdout: &str, label: &str) -> f64 {
    let line = stdout.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label}:\n{stdout}"));
    line.split(':').nth(1).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn loaders_split_the_key_space_and_their_logs_merge_into_one_histogram() {
    let Some(node) = node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (out, stdout) = run(
        &node,
        &format!(
            "write n=20000 no-warmup -rate threads=8 -schema keyspace=t_loaders -loaders 4 dir={}",
            dir.path().display()
        ),
    );
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    // Each loader's command line, with its contiguous slice: the union is 1..20000.
    for (i, slice) in ["1..5000", "5001..10000", "10001..15000", "15001..20000"].iter().enumerate() {
        let line = format!("loader {}: isobench cql write n=5000 no-warmup", i + 1);
        let shown = stdout.lines().find(|l| l.starts_with(&line)).unwrap_or_else(|| panic!("{line}?\n{stdout}"));
        assert!(shown.ends_with(&format!("-pop seq={slice}")), "{shown}");
    }
    assert_eq!(count_rows(&node, "t_loaders.standard1"), 20000, "every key written once, by exactly one loader");
    assert_eq!(total_errors(&stdout), 0);
    // The merged percentiles are those of one histogram holding every loader's values.
    let mut all = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let (mut per_loader_p99, mut starts) = (Vec::new(), Vec::new());
    for i in 1..=4 {
        let logged = cql_stress::hdrlog::histograms(&dir.path().join(format!("loader-{i}.hdr"))).unwrap();
        let h = &logged["WRITE-st"].histogram;
        assert!(h.len() >= 5000, "loader {i} logged {} operations", h.len());
        per_loader_p99.push(h.value_at_quantile(0.99) as f64 / 1e6);
        starts.push(logged["WRITE-st"].start);
        all.add(h).unwrap();
    }
    // The loaders begin their load together, once all are connected and prepared: no loader's
    // first interval opens before the last of them was prepared (each creates its HDR log then,
    // just before it says so). Without the start line each began as soon as it was prepared, and
    // four processes preparing side by side on 2 cores are 36–60 ms apart, so the first began
    // before the last was ready. (How far apart they began is the scheduler's, not the line's.)
    let prepared: Vec<f64> = (1..=4).filter_map(|i| created(&dir.path().join(format!("loader-{i}.hdr")))).collect();
    let spread = starts.iter().fold(f64::MIN, |a, &b| a.max(b)) - starts.iter().fold(f64::MAX, |a, &b| a.min(b));
    eprintln!("the loaders' loads began within {:.1} ms", spread * 1e3);
    if prepared.len() == 4 {
        let last_prepared = prepared.iter().fold(f64::MIN, |a, &b| a.max(b));
        // An interval's start is written in whole milliseconds, rounded down; a creation time is
        // the kernel's coarse clock, a tick behind at most, so it errs early, on the check's side.
        assert!(
            starts.iter().all(|&s| s >= last_prepared - 0.001),
            "a loader began before the last was prepared: prepared {prepared:?}, began {starts:?}"
        );
    } else {
        let why = "the temporary directory's file system does not keep a file's creation time";
        common::skip_part("the start line's check", &common::missing("file-birth-time", why));
    }
    // (printed to 0.1 ms)
    let ms = |q: f64| all.value_at_quantile(q) as f64 / 1e6;
    for (label, q) in [("Latency 99th percentile", 0.99), ("Latency median", 0.5), ("Latency max", 1.0)] {
        assert!((results_ms(&stdout, label) - ms(q)).abs() <= 0.05 + 1e-9, "{label} vs {} ms:\n{stdout}", ms(q));
    }
    assert_eq!(stdout.lines().filter(|l| l.starts_with("loader ") && l.contains("op/s")).count(), 4, "{stdout}");
    eprintln!("per-loader p99 {per_loader_p99:?} ms, merged {} ms", ms(0.99));
}

/// When `path` was created, in seconds since the epoch, where the file system keeps it.
fn created(path: &std::path::Path) -> Option<f64> {
    let at = std::fs::metadata(path).ok()?.created().ok()?;
    Some(at.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs_f64())
}

fn profile(name: &str) -> String {
    format!("{}/tests/fixtures/profiles/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Runs `script` with Debian's python3 and its cassandra-driver, an outside client; None (with
/// the reason printed) when that driver is not installed.
fn python_driver(node: &TestNode, script: &str) -> Option<String> {
    let program = format!(
        "from cassandra.cluster import Cluster\nsession = Cluster(['127.0.0.1'], port={}).connect()\n{script}",
        node.port
    );
    let out = Command::new("/usr/bin/python3").args(["-c", &program]).output();
    match out {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) if String::from_utf8_lossy(&o.stderr).contains("No module named 'cassandra'") => {
            let why = "python3-cassandra is not installed (scripts/setup.sh test installs it)";
            common::skip_part("the outside check", &common::missing("python3-cassandra", why));
            None
        }
        Ok(o) => panic!("python3: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            let why = format!("no /usr/bin/python3: {e}");
            common::skip_part("the outside check", &common::missing("python3-cassandra", why));
            None
        }
    }
}

#[test]
fn a_blog_post_profile_writes_rows_that_its_queries_read_back_valid() {
    let Some(node) = node() else { return };
    let blog = profile("blogposts.yaml");
    let (out, stdout) = run(&node, &format!("user profile={blog} ops(insert=1) n=150 no-warmup -rate threads=8"));
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("Total partitions          :        150 [insert: 150]"), "{stdout}");
    assert_eq!(total_errors(&stdout), 0);
    let reads =
        format!("user profile={blog} ops(singlepost=1,timeline=2) n=600 -pop seq=1..150 -rate threads=8 -validate");
    let (out, stdout) = run(&node, &reads);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0, "{stdout}");
    let per_op = Regex::new(r"Op rate +: +[\d,]+ op/s  \[singlepost: [\d,]+ op/s, timeline: [\d,]+ op/s\]").unwrap();
    assert!(per_op.is_match(&stdout), "one figure per named operation: {stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("singlepost,")) && stdout.lines().any(|l| l.starts_with("timeline,")));
    // 150 partitions of cluster fixed(20) rows; body sizes from gaussian(100..5000).
    let Some(seen) = python_driver(
        &node,
        "rows = list(session.execute('SELECT domain, url, body FROM stress_blog.blogposts'))\n\
         print(len(rows), len({r.domain for r in rows}), min(len(r.body) for r in rows), max(len(r.body) for r in rows),\n\
               min(len(r.url) for r in rows), max(len(r.url) for r in rows))",
    ) else {
        return;
    };
    let figures: Vec<usize> = seen.split_whitespace().map(|n| n.parse().unwrap()).collect();
    assert_eq!(figures[..2], [3000, 150], "rows and partitions as Python's driver counts them: {seen}");
    assert!(figures[2] >= 100 && figures[3] <= 5000, "body sizes within gaussian(100..5000): {seen}");
    assert!(figures[4] >= 30 && figures[5] <= 300, "url sizes within uniform(30..300): {seen}");
}

#[test]
fn a_profile_with_collections_tuples_and_a_udt_round_trips() {
    let Some(node) = node() else { return };
    let kinds = profile("collections.yaml");
    let (out, stdout) = run(&node, &format!("user profile={kinds} ops(insert=1) n=60 no-warmup -rate threads=4"));
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0);
    let (out, stdout) = run(
        &node,
        &format!(
            "user profile={kinds} ops(by_user=1,one_day=1) n=300 no-warmup -pop seq=1..60 -rate threads=4 -validate"
        ),
    );
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0, "{stdout}");
    let Some(seen) = python_driver(
        &node,
        "rows = list(session.execute('SELECT user_id, history, home, places, pair FROM stress_kinds.profiles'))\n\
         print(len({r.user_id for r in rows}), all(len(r.history) == 3 for r in rows),\n\
               all(isinstance(r.home.zip, int) and len(r.home.geo) == 2 for r in rows), all(len(r.pair) == 2 for r in rows))",
    ) else {
        return;
    };
    assert_eq!(seen.trim(), "60 True True True", "partitions, list sizes, UDT fields, tuples: {seen}");
}

#[test]
fn two_profiles_in_two_keyspaces_run_at_once() {
    let Some(node) = node() else { return };
    // Keyspaces of their own: the other profile tests count their rows.
    let dir = tempfile::tempdir().unwrap();
    let (blog, kinds) = (dir.path().join("blog.yaml"), dir.path().join("kinds.yaml"));
    let text = std::fs::read_to_string(profile("blogposts.yaml")).unwrap();
    std::fs::write(&blog, text.replace("stress_blog", "stress_two_blog")).unwrap();
    let text = std::fs::read_to_string(profile("collections.yaml")).unwrap();
    std::fs::write(&kinds, format!("specname: kinds\n{}", text.replace("stress_kinds", "stress_two_kinds"))).unwrap();
    let profiles = format!("profile={},{}", blog.display(), kinds.display());
    // Every partition of each table written (ops drawn at random would leave some out), then
    // both read in one run.
    for insert in ["stress_two_blog.blogposts.insert", "kinds.insert"] {
        let (out, stdout) =
            run(&node, &format!("user {profiles} ops({insert}=1) n=40 no-warmup -pop seq=1..40 -rate threads=4"));
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert!(stdout.contains(&format!("[{insert}: 0]")) && total_errors(&stdout) == 0, "{stdout}");
    }
    let reads = format!(
        "user {profiles} ops(stress_two_blog.blogposts.singlepost=1,kinds.by_user=1) n=200 no-warmup -pop seq=1..40 -rate threads=4 -validate"
    );
    let (out, stdout) = run(&node, &reads);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(total_errors(&stdout), 0, "{stdout}");
    for op in ["stress_two_blog.blogposts.singlepost,", "kinds.by_user,"] {
        assert!(stdout.lines().any(|l| l.starts_with(op)), "interval rows of {op}: {stdout}");
    }
    let Some(seen) = python_driver(
        &node,
        "print(len({r.domain for r in session.execute('SELECT domain FROM stress_two_blog.blogposts')}),\n\
               len({r.user_id for r in session.execute('SELECT user_id FROM stress_two_kinds.profiles')}))",
    ) else {
        return;
    };
    assert_eq!(seen.trim(), "40 40", "each profile's partitions in its own keyspace: {seen}");
}

#[test]
fn a_read_with_another_columnspec_reports_validation_errors() {
    let Some(node) = node() else { return };
    // A keyspace of its own: the other blog test counts its rows.
    let dir = tempfile::tempdir().unwrap();
    let (blog, other) = (dir.path().join("blog.yaml"), dir.path().join("blog-short-bodies.yaml"));
    let text = std::fs::read_to_string(profile("blogposts.yaml")).unwrap().replace("stress_blog", "stress_blog_sizes");
    std::fs::write(&blog, &text).unwrap();
    std::fs::write(&other, text.replace("gaussian(100..5000)", "gaussian(10..50)")).unwrap();
    let (out, _) = run(
        &node,
        &format!("user profile={} ops(insert=1) n=40 no-warmup -rate threads=4 -pop seq=1001..1040", blog.display()),
    );
    assert!(out.status.success());
    let reads = format!(
        "user profile={} ops(singlepost=1) n=40 no-warmup -pop seq=1001..1040 -rate threads=4 -validate",
        other.display()
    );
    let (out, stdout) = run(&node, &format!("{reads} -errors ignore"));
    assert!(out.status.success(), "-errors ignore counts and goes on: {stdout}");
    assert_eq!(total_errors(&stdout), 40, "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("column body: expected '") && stderr.contains("key(s) [domain='"), "{stderr}");
    let (out, stdout) = run(&node, &reads);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert_eq!(stdout.lines().last(), Some("FAILURE"));
}

#[test]
fn profile_mistakes_name_the_file_and_line() {
    let Some(node) = node() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        std::fs::read_to_string(profile("blogposts.yaml"))
            .unwrap()
            .replace("select url, title, published_date", "select url, headline"),
    )
    .unwrap();
    let (out, _) = run(&node, &format!("user profile={} ops(timeline=1) n=1 no-warmup", bad.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains(&format!("{}:41: query timeline:", bad.display())), "{stderr}");
    assert!(stderr.contains("headline") && stderr.contains("name only columns of blogposts"), "{stderr}");
    let (out, _) = run(&node, &format!("user profile={} ops(nosuch=1) n=1", bad.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("its operations are insert, singlepost, timeline"), "{stderr}");
}

#[test]
fn a_suite_carries_its_profile_relative_to_the_suite_to_the_loaders() {
    let Some(node) = node() else { return };
    let sb = common::Scratch::new();
    std::fs::create_dir_all(sb.path().join("profiles")).unwrap();
    let text = std::fs::read_to_string(profile("blogposts.yaml")).unwrap().replace("stress_blog", "stress_blog_suite");
    sb.write("profiles/blog.yaml", &text);
    // A second profile of the same file name, in another folder and keyspace.
    std::fs::create_dir_all(sb.path().join("other")).unwrap();
    sb.write(
        "other/blog.yaml",
        &format!("specname: other\n{}", text.replace("stress_blog_suite", "stress_blog_other")),
    );
    let (out, dir) = sb.run_suite(
        &format!(
            r#"
name = "profiles"
repeat = 1
# "two" reads and validates the rows "one"'s load phase wrote: one runs first.
order = "fixed"
baseline = {{ env = "host" }}
[[server]]
kind = "external"
nodes = ["127.0.0.1"]
port = {}
[[env]]
name = "host"
kind = "host"
[[volume]]
name = "t"
kind = "tmpfs"
size = "64M"
[[workload]]
name = "one"
kind = "cql"
load = "user profile=profiles/blog.yaml ops(insert=1) n=100 -rate threads=4"
args = "user profile=profiles/blog.yaml ops(singlepost=1,timeline=1) n=400 -pop seq=1..100 -rate threads=4 -validate"
[[workload]]
name = "two"
kind = "cql"
loaders = 2
load = "user profile=profiles/blog.yaml,other/blog.yaml ops(other.insert=1) n=100 -rate threads=4"
args = "user profile=profiles/blog.yaml,other/blog.yaml ops(timeline=1,other.timeline=1) n=400 -pop seq=1..100 -rate threads=4 -validate"
"#,
            node.port
        ),
        &[],
    );
    let said = common::text(&out);
    assert!(out.status.success(), "{said}");
    for cell in ["host.t.one", "host.t.two"] {
        let record = common::run_record(&dir, cell, 1);
        assert_eq!(record["status"], "ok", "{cell}: {record:#}");
    }
    let errors: Vec<f64> =
        common::samples(&dir).iter().filter(|r| r[6] == "errors").map(|r| r[7].parse().unwrap()).collect();
    assert_eq!(errors, [0.0, 0.0], "{said}");
    sb.assert_clean();
}

/// Every file under `dir` whose bytes contain `secret`.
fn files_holding(dir: &std::path::Path, secret: &str) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(files_holding(&path, secret));
        } else if std::fs::read(&path).unwrap().windows(secret.len()).any(|w| w == secret.as_bytes()) {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_node_with_client_encryption_refuses_plain_clients_and_accepts_a_truststore() {
    let node = match cassandra::start_node_with("tls", |c| c.tls = true) {
        Ok(n) => n,
        Err(missing) => return common::skip(&missing),
    };
    let (out, _) = run(&node, "write n=10 no-warmup -schema keyspace=t_tls");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && said.contains("-transport truststore="), "a plain client gets in: {said}");

    // The client's truststores are made as a user makes them: keytool, from the node's certificate.
    let dir = tempfile::tempdir().unwrap();
    let password = format!("trust-{}-me", std::process::id());
    let certificate = node.data.join("conf/node-cert.pem");
    let mut stores = vec![certificate.clone()];
    for (file, kind) in [("client.jks", "JKS"), ("client.p12", "PKCS12")] {
        let store = dir.path().join(file);
        let made = Command::new("keytool")
            .args(["-importcert", "-noprompt", "-alias", "node", "-storetype", kind, "-storepass", &password])
            .arg("-file")
            .arg(&certificate)
            .arg("-keystore")
            .arg(&store)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stdout));
        stores.push(store);
    }
    let loaders = dir.path().join("loaders");
    let mut said = String::new();
    for (k, store) in stores.iter().enumerate() {
        let transport = format!("-transport truststore={} truststore-password={password}", store.display());
        let (command, more) = match k {
            0 => ("write n=3000 no-warmup -rate threads=16", String::new()),
            1 => ("read n=3000 no-warmup -rate threads=16 -pop seq=1..3000", String::new()),
            _ => (
                "read n=3000 no-warmup -rate threads=16 -pop seq=1..3000",
                format!("-loaders 2 dir={}", loaders.display()),
            ),
        };
        let (out, stdout) = run(&node, &format!("{command} -schema keyspace=t_tls {transport} {more}"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{}: {stdout}{stderr}", store.display());
        assert_eq!(total_errors(&stdout), 0, "{stdout}");
        said += &stdout;
        said += &stderr;
    }
    assert!(said.contains("truststore-password=REDACTED"), "{said}");
    assert!(!said.contains(&password), "the truststore's password was shown");
    assert!(loaders.join("loader-2.log").exists(), "the loaders kept their logs in {}", loaders.display());
    assert_eq!(files_holding(&loaders, &password), Vec::<std::path::PathBuf>::new());
}
