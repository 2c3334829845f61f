//! Density: N sandboxes of a cell started together, each reported; a sandbox that fails is
//! counted and named; a density the machine cannot hold is refused with the arithmetic; and
//! nothing is left behind, also after a SIGKILL in the middle of N network namespaces.

mod common;

use std::time::{Duration, Instant};

use common::{Missing, Scratch, missing, need_program, need_root, run_record, serial, text};

fn unable() -> Option<Missing> {
    need_root("containers, mounts").or_else(|| {
        isobench::env::oci::Runtime::resolve("runc")
            .path
            .is_none()
            .then(|| missing("runc", "runc is not installed (scripts/setup.sh installs it)"))
    })
}

fn suite(env_extra: &str, workload: &str) -> String {
    format!(
        r#"
name = "dense"
repeat = 1
baseline = {{ env = "runc" }}

[[env]]
name = "runc"
kind = "oci"
runtime = "runc"
{env_extra}

[[volume]]
name = "tmp"
kind = "tmpfs"
size = "16M"

[[workload]]
{workload}
"#
    )
}

const CPU_TIMES_TEN: &str = "name = \"cpu\"\nkind = \"cpu\"\ntime = \"1s\"\ndensity = 10\n";

fn sample(run: &serde_json::Value, metric: &str) -> f64 {
    run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == metric).unwrap()["value"].as_f64().unwrap()
}

#[test]
fn ten_sandboxes_report_each_then_one_made_to_fail_is_named() {
    skip_if!(unable());
    skip_if!(need_program("sysbench", "sysbench"));
    let _serial = serial();
    let sb = Scratch::new();
    let (o, out) = sb.run_suite(&suite("", CPU_TIMES_TEN), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "runc.tmp.cpu", 1);
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    let sandboxes = run["sandboxes"].as_array().unwrap();
    assert_eq!(sandboxes.len(), 10);
    for (i, s) in sandboxes.iter().enumerate() {
        assert_eq!(s["index"], i + 1);
        assert_eq!(s["status"], "ok", "{s}");
        assert!(s["start_latency_s"].as_f64().unwrap() > 0.0, "every sandbox has its start latency");
        assert!(s["memory_pss"].as_f64().unwrap() > 0.0, "and its host memory");
        assert!(s["samples"].as_array().unwrap().iter().any(|x| x["metric"] == "events_per_s"));
    }
    // The aggregate is the sum of the sandboxes' rates.
    let sum: f64 = sandboxes
        .iter()
        .map(|s| {
            s["samples"].as_array().unwrap().iter().find(|x| x["metric"] == "events_per_s").unwrap()["value"]
                .as_f64()
                .unwrap()
        })
        .sum();
    assert!((sample(&run, "events_per_s") - sum).abs() < 1e-6);
    assert_eq!(sample(&run, "sandboxes_ok"), 10.0);
    assert!(sample(&run, "start_latency_p50") <= sample(&run, "start_latency_max"));
    assert!(sample(&run, "events_per_s_sandbox_min") <= sample(&run, "events_per_s_sandbox_max"));
    sb.assert_nothing_left();

    // Scratch 4 gets a memory limit runc cannot start a container in.
    let path = sb.write("s.toml", &suite("", CPU_TIMES_TEN));
    let out = sb.path().join("out-fault");
    let o = sb
        .isobench()
        .env(isobench::runner::density::FAULT_VAR, "4")
        .args(["run", path.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "runc.tmp.cpu", 1);
    assert_eq!(run["status"], "ok", "nine sandboxes ran: {}", run["error"]);
    let sandboxes = run["sandboxes"].as_array().unwrap();
    let failed: Vec<&serde_json::Value> = sandboxes.iter().filter(|s| s["status"] == "failed").collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["index"], 4);
    assert!(failed[0]["error"].as_str().unwrap().contains("memory"), "{}", failed[0]["error"]);
    assert_eq!(sandboxes.iter().filter(|s| s["status"] == "ok").count(), 9);
    assert_eq!((sample(&run, "sandboxes_ok"), sample(&run, "sandboxes_failed")), (9.0, 1.0));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("9 ok, 1 failed"), "the report counts the failure");
    assert!(report.contains("runc.tmp.cpu #1: sandbox 4: did not start"), "and names it");
    assert!(text(&o).contains("FAILED runc.tmp.cpu #1: sandbox 4"), "so does the terminal");
    sb.assert_nothing_left();
}

#[test]
fn a_density_this_machine_cannot_hold_is_refused_with_the_arithmetic() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    // A quarter of what this machine has available each: one fits, ten do not.
    let available_mib = isobench::facts::meminfo_kib("MemAvailable").unwrap() / 1024;
    let each = format!("memory = \"{}M\"", available_mib / 4);
    let (o, out) =
        sb.run_suite(&suite(&each, "name = \"cpu\"\nkind = \"cpu\"\ntime = \"1s\"\ndensity = [1, 10]\n"), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains("cell runc.tmp.cpu.density=10 starts 10 sandboxes × ("), "{said}");
    assert!(said.contains("for env \"runc\" + 16.0 MiB for volume \"tmp\") = "), "{said}");
    assert!(said.contains("available (MemAvailable); lower density"), "{said}");
    assert!(!out.exists(), "nothing ran");

    let sliced = suite("", "name = \"cpu\"\nkind = \"cpu\"\ntime = \"1s\"\ndensity = 4\n").replace(
        "kind = \"tmpfs\"\nsize = \"16M\"",
        "kind = \"block\"\nbacking = \"file\"\nsize = \"64M\"\npartitions = 2\nfs = \"ext4\"",
    );
    let (o, _) = sb.run_suite(&sliced, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("gives at most 2 their own slice; set partitions = 4"), "{}", text(&o));
    sb.assert_nothing_left();
}

#[test]
fn sigkill_among_sandboxes_with_their_own_networks_then_cleanup_leaves_nothing() {
    skip_if!(unable());
    skip_if!(need_program("iperf3", "iperf3"));
    let _serial = serial();
    let sb = Scratch::new();
    // First three sandboxes each with its namespace and iperf3 server, to completion.
    let (o, out) = sb.run_suite(&suite("", "name = \"net\"\nkind = \"network\"\ntime = \"2s\"\ndensity = 3\n"), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "runc.tmp.net", 1);
    assert_eq!(sample(&run, "sandboxes_ok"), 3.0, "{}", run["notes"]);
    assert!(sample(&run, "bitrate_sandbox_min") > 0.0, "every sandbox sent traffic");
    sb.assert_nothing_left();

    // Then killed while they run.
    let (child, _) =
        sb.start_suite(&suite("", "name = \"net\"\nkind = \"network\"\ntime = \"60s\"\ndensity = 3\n"), &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let all_up = loop {
        let servers = sb.processes().iter().filter(|p| p.contains("iperf3 -s")).count();
        if servers == 3 {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if all_up {
        std::thread::sleep(Duration::from_secs(2));
    }
    let o = sb.kill_then_cleanup(child);
    assert!(all_up, "three iperf3 servers never ran");
    assert_eq!(text(&o).matches("removed network namespace").count(), 3, "{}", text(&o));
    sb.assert_nothing_left();
}
