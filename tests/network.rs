//! Real traffic between sandboxes and the host: iperf3 from a network namespace (runc, crun,
//! runsc with its own netstack) and from VMs (QEMU user-mode and tap), against a server on the
//! host side, and nothing left behind, even after a SIGKILL.

mod common;

use std::time::{Duration, Instant};

use common::{Missing, Scratch, missing, need_program, need_root, run_record, serial, text};

fn unable() -> Option<Missing> {
    need_root("network namespaces, containers").or_else(|| need_program("iperf3", "iperf3"))
}

fn suite(envs: &str, time: &str) -> String {
    format!(
        r#"
name = "net"
repeat = 1
baseline = {{ env = "host" }}

[[env]]
name = "host"
kind = "host"
{envs}

[[volume]]
name = "tmp"
kind = "tmpfs"
size = "16M"

[[workload]]
name = "net"
kind = "network"
time = "{time}"
"#
    )
}

fn present(runtime: &str) -> bool {
    isobench::env::oci::Runtime::resolve(runtime).path.is_some()
}

fn vms_unable() -> Option<Missing> {
    need_program("qemu-system-x86_64", "qemu-system-x86").or_else(|| {
        isobench::env::vm::guest::Kernel::installed()
            .is_none()
            .then(|| missing("guest-kernel", "no guest kernel (scripts/setup.sh unpacks Debian's generic kernel)"))
    })
}

#[test]
fn traffic_flows_between_each_sandbox_and_the_host() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    let mut envs = String::new();
    let mut names = vec!["host"];
    for runtime in ["runc", "runsc"] {
        if present(runtime) {
            envs.push_str(&format!("[[env]]\nname = \"{runtime}\"\nkind = \"oci\"\nruntime = \"{runtime}\"\n"));
            names.push(runtime);
        } else {
            let why = format!("{runtime} is not installed (scripts/setup.sh installs it)");
            common::skip_part(runtime, &missing(runtime, why));
        }
    }
    match vms_unable() {
        None => {
            envs.push_str("[[env]]\nname = \"vm-user\"\nkind = \"vm\"\nnet = \"user\"\n");
            envs.push_str("[[env]]\nname = \"vm-tap\"\nkind = \"vm\"\nnet = \"tap\"\n");
            names.extend(["vm-user", "vm-tap"]);
        }
        Some(why) => common::skip_part("VMs", &why),
    }
    let (o, out) = sb.run_suite(&suite(&envs, "2s"), &[]);
    assert!(o.status.success(), "{}", text(&o));
    for name in names {
        let run = run_record(&out, &format!("{name}.tmp.net"), 1);
        assert_eq!(run["status"], "ok", "{name}: {}", run["error"]);
        // The figure is iperf3's own: the receiver's rate in the client's JSON.
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(run["raw"][0].as_str().unwrap())).unwrap()).unwrap();
        let from_iperf = json["end"]["sum_received"]["bits_per_second"].as_f64().unwrap();
        let sample = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "bitrate").unwrap();
        assert_eq!(sample["value"].as_f64().unwrap(), from_iperf, "{name}");
        assert!(from_iperf > 1e6, "{name}: {from_iperf} bit/s");
        assert!(run["raw"].to_string().contains("iperf3-server.json"), "{name}: the host side's report is kept");
        let path = run["setup"]["net.path"].as_str().unwrap();
        match name {
            "host" => assert!(path.starts_with("loopback"), "{path}"),
            "runc" | "runsc" => {
                assert!(path.starts_with("network namespace isobench-"), "{path}");
                assert_ne!(run["facts"]["ns.net"], run_record(&out, "host.tmp.net", 1)["facts"]["ns.net"]);
            }
            "vm-user" => assert!(path.contains("user-mode"), "{path}"),
            _ => assert!(path.starts_with("tap ib"), "{path}"),
        }
        if name == "runsc" {
            let args = run["setup"]["runtime.args"].as_str().unwrap();
            assert!(args.contains("--network=sandbox"), "gVisor's own netstack: {args}");
        }
    }
    sb.assert_nothing_left();
}

#[test]
fn sigkill_during_traffic_then_cleanup_leaves_no_namespace_link_or_iperf3() {
    skip_if!(unable());
    skip_if!(!present("runc"), "runc", "runc is not installed (scripts/setup.sh installs it)");
    let _serial = serial();
    let sb = Scratch::new();
    // runc alone (as its own baseline), so that the killed run is inside its namespace.
    let runc_only = suite("", "60s")
        .replace("env = \"host\" }", "env = \"runc\" }")
        .replace("name = \"host\"\nkind = \"host\"", "name = \"runc\"\nkind = \"oci\"\nruntime = \"runc\"");
    let (run, _) = sb.start_suite(&runc_only, &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let started = loop {
        if sb.processes().iter().any(|p| p.contains("iperf3 -s")) && common::network_objects(true).len() >= 2 {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if started {
        std::thread::sleep(Duration::from_secs(1));
    }
    let o = sb.kill_then_cleanup(run);
    assert!(started, "the runc cell's iperf3 server never started");
    let said = text(&o);
    assert!(said.contains("removed network namespace isobench-"), "{said}");
    assert!(said.contains("removed network link ib"), "{said}");
    sb.assert_nothing_left();
}
