//! A managed 3-node Cassandra 5.0 cluster on this machine (node k on 127.0.0.k): `isobench server
//! start --nodes 3` forms one ring that 4 loaders fill at QUORUM, each with its slice, counted
//! afterwards by the test's own client; a suite's cluster, priced per node, loses a node mid-run
//! and completes; a run killed while its cluster runs leaves nothing after `isobench cleanup`;
//! a cluster that cannot fit in memory is refused before anything starts.
//!
//! The clusters take one test at a time: nine JVMs starting at once on two cores would measure
//! the machine's patience, not isobench.

mod common;

use std::time::{Duration, Instant};

use common::cassandra::{count_at_quorum, javas, unable_to_manage};
use common::{Scratch, ok, run_record, serial, text};
use isobench::sys::free_port;

#[test]
fn three_nodes_form_one_ring_that_four_loaders_fill_at_quorum_each_with_its_slice() {
    skip_if!(unable_to_manage());
    let _one_cluster = serial();
    let sb = Scratch::new();
    let port = free_port().unwrap();
    let data = sb.path().join("cluster");
    let start = ok(&sb.run(&[
        "server",
        "start",
        "cassandra",
        "--nodes",
        "3",
        "--port",
        &port.to_string(),
        "--data",
        data.to_str().unwrap(),
        "--heap",
        "512M",
        "--quick-jit",
    ]));
    for k in 1..=3 {
        assert!(start.contains(&format!("answers CQL on 127.0.0.{k}:{port}")), "{start}");
        assert!(data.join(format!("node{k}/data/system")).is_dir(), "node {k} keeps its data apart");
    }
    let ring = start.lines().find(|l| l.contains("form one ring")).unwrap_or_else(|| panic!("{start}"));
    eprintln!("{ring}");
    let status = ok(&sb.run(&["server", "status"]));
    assert_eq!(status.matches(": up (pid").count(), 3, "{status}");

    let logs = sb.path().join("loaders");
    let load = sb
        .isobench()
        .arg("cql")
        .args("write n=4000 no-warmup cl=QUORUM -pop seq=1..4000 -schema keyspace=t_cluster".split(' '))
        .arg("replication(factor=3)")
        .args(["-rate", "threads=8", "-node", "127.0.0.1,127.0.0.2,127.0.0.3", "-port"])
        .arg(format!("native={port}"))
        .args(["-loaders", "4"])
        .arg(format!("dir={}", logs.display()))
        .output()
        .unwrap();
    let loaded = ok(&load);
    for (i, slice) in ["1..1000", "1001..2000", "2001..3000", "3001..4000"].iter().enumerate() {
        let line = format!("loader {}: isobench cql write n=1000 no-warmup cl=QUORUM -pop seq={slice}", i + 1);
        assert!(loaded.contains(&line), "{line}?\n{loaded}");
    }
    assert!(loaded.contains("Total errors              :          0"), "{loaded}");
    // Asked of another node than the loaders' first: the union of the slices, each key once.
    assert_eq!(count_at_quorum("127.0.0.2", port, "t_cluster.standard1"), 4000);

    let stopped = ok(&sb.run(&["server", "stop", "cassandra"]));
    for k in 1..=3 {
        assert!(stopped.contains(&format!("stopped Cassandra on 127.0.0.{k}:{port}")), "{stopped}");
    }
    assert_eq!(javas(&sb), Vec::<String>::new(), "stop leaves no node");
    assert!(text(&sb.run(&["server", "status"])).contains("no servers started by isobench"));
}

/// A suite whose 3-node cluster is loaded by 2 loaders for `duration`, with `extra` lines in
/// its [[server]].
fn cluster_suite(duration: &str, extra: &str) -> String {
    format!(
        r#"
name = "cluster"
repeat = 1
baseline = {{ env = "host" }}

[[server]]
kind = "cassandra"
nodes = 3
heap = "512M"
quick_jit = true
cost_per_hour = 4.32
{extra}

[[env]]
name = "host"
kind = "host"
cost_per_hour = 1.00

[[volume]]
name = "data"
kind = "tmpfs"
size = "2G"

[[workload]]
name = "write"
kind = "cql"
args = "write duration={duration} no-warmup cl=QUORUM -schema replication(factor=3) -rate threads=8"
loaders = 2
"#
    )
}

fn sample(record: &serde_json::Value, metric: &str) -> Option<f64> {
    record["samples"].as_array().unwrap().iter().find(|s| s["metric"] == metric).and_then(|s| s["value"].as_f64())
}

#[test]
fn a_node_killed_mid_run_at_quorum_is_reported_and_the_run_completes_priced_per_node() {
    skip_if!(unable_to_manage());
    let _one_cluster = serial();
    let sb = Scratch::new();
    // Killed well after the loaders' set-up (connecting, creating the schema): a node lost while
    // the schema is made fails the loader, as it would fail cassandra-stress.
    let (out, dir) = sb.run_suite(&cluster_suite("24s", "kill_node = 3\nkill_after = \"12s\""), &[]);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    let r = run_record(&dir, "host.data.write", 1);
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["setup"]["server.nodes"], "3");
    assert_eq!(r["setup"]["server.addresses"], "127.0.0.1, 127.0.0.2, 127.0.0.3");
    let killed = r["setup"]["fault.killed"].as_str().unwrap_or_else(|| panic!("{r:#}"));
    let at: f64 = killed.strip_prefix("node 3 (127.0.0.3) at ").unwrap().trim_end_matches(" s").parse().unwrap();
    assert!((12.0..16.0).contains(&at), "killed {at} s into the measured phase");
    assert!(r["notes"].to_string().contains("node 3 (127.0.0.3) was killed (SIGKILL)"), "{r:#}");
    assert!(sample(&r, "server_ring").unwrap() > 0.0);
    assert!(sample(&r, "op_rate").unwrap() > 0.0);
    // Errors are counted per loader (QUORUM holds with 2 of 3: the driver retries elsewhere).
    for loader in 1..=2 {
        let errors = sample(&r, &format!("loader_{loader}_errors")).unwrap_or_else(|| panic!("{r:#}"));
        eprintln!("loader {loader}: {errors} errors after node 3 went");
    }
    // $1.00 for the environment + 3 nodes × $4.32.
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Cost") && md.contains("| host.data.write | op_rate |") && md.contains("$13.96"), "{md}");
    assert!(all.contains("cost:") && all.contains("$13.96"), "the terminal prices the cell too:\n{all}");
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}

#[test]
fn a_run_killed_while_its_cluster_runs_leaves_nothing_after_cleanup() {
    skip_if!(unable_to_manage());
    let _one_cluster = serial();
    let sb = Scratch::new();
    let (mut run, _) = sb.start_suite(&cluster_suite("60s", ""), &[]);
    // Caught with at least two nodes up (the second starts once the first answers CQL).
    let deadline = Instant::now() + Duration::from_secs(240);
    while javas(&sb).len() < 2 {
        assert!(run.try_wait().unwrap().is_none(), "the run ended before its cluster started");
        assert!(Instant::now() < deadline, "the cluster never started");
        std::thread::sleep(Duration::from_millis(500));
    }
    sb.kill_then_cleanup(run);
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}

#[test]
fn a_cluster_that_cannot_fit_in_memory_is_refused_with_the_arithmetic() {
    let sb = Scratch::new();
    let (out, _) = sb.run_suite(&cluster_suite("5s", "").replace("heap = \"512M\"", "heap = \"900G\""), &[]);
    let err = text(&out);
    assert!(!out.status.success());
    assert!(err.contains("[[server]]: 3 Cassandra nodes × (heap 900 GiB + 640 MiB off-heap each) = "), "{err}");
    assert!(err.contains("available (MemAvailable); use fewer nodes or a smaller heap"), "{err}");
}

#[test]
fn a_cluster_whose_sandboxes_cannot_reach_one_another_is_refused_before_any_run() {
    let sb = Scratch::new();
    let vm = cluster_suite("5s", "")
        .replace("[[volume]]", "[[env]]\nname = \"vm\"\nkind = \"vm\"\nmemory = \"2G\"\n\n[[volume]]");
    let (out, dir) = sb.run_suite(&vm, &[]);
    let err = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cells that cannot run as the suite says"), "{err}");
    assert!(
        err.contains("env \"vm\": a cluster's nodes gossip with one another") && err.contains("vm.data.write"),
        "{err}"
    );
    assert!(!dir.join("runs").exists(), "nothing ran");
}

/// A ring whose nodes each run in a gVisor sandbox with a network of its own, as gVisor runs:
/// the three namespaces on one bridge, each node on gVisor's netstack, the ring's view read
/// inside each sandbox (its JMX is on the sandbox's own loopback), the load from the host.
#[test]
fn a_ring_of_gvisor_sandboxes_shares_a_bridge_and_each_node_runs_on_its_own_netstack() {
    skip_if!(unable_to_manage());
    skip_if!(
        isobench::env::oci::Runtime::resolve("runsc").path.is_none(),
        "runsc",
        "runsc is not installed (scripts/setup.sh builds it)"
    );
    let _one_cluster = serial();
    let sb = Scratch::new();
    // The load only proves the ring serves: 5 s of it, the ring's forming is the test.
    let suite = cluster_suite("5s", "")
        .replace("baseline = { env = \"host\" }", "baseline = { env = \"runsc\" }")
        .replace("name = \"host\"\nkind = \"host\"", "name = \"runsc\"\nkind = \"oci\"\nruntime = \"runsc\"");
    let (out, dir) = sb.run_suite(&suite, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let r = run_record(&dir, "runsc.data.write", 1);
    assert_eq!(r["status"], "ok", "{r:#}");
    let path = r["setup"]["net.path"].as_str().unwrap_or_default();
    assert!(path.contains("on bridge") && path.contains("shared by 3 sandboxes"), "{path}");
    let addresses = r["setup"]["server.addresses"].as_str().unwrap_or_default();
    assert!(addresses.starts_with("10.211.") && addresses.split(", ").count() == 3, "{addresses}");
    assert!(r["setup"]["runtime.args"].as_str().unwrap_or_default().contains("--network=sandbox"), "{r:#}");
    eprintln!("a ring of 3 gVisor sandboxes formed in {:.1} s on {path}", sample(&r, "server_ring").unwrap());
    assert!(sample(&r, "op_rate").unwrap() > 0.0);
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}
