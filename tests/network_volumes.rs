//! Network and replicated volumes for real: nbdkit storage nodes on loopback and in namespaces
//! of their own, qemu-storage-daemon's quorum mirror, every route a workload takes (fio's nbd
//! engine, FUSE + loop), synchronous replication proven on the copies, a storage node killed
//! mid-run, a database on a mirror, and nothing left behind.

mod common;

use std::time::{Duration, Instant};

use common::{Missing, Scratch, missing, need_program, need_root, run_record, serial, text};

fn unable() -> Option<Missing> {
    need_root("namespaces, FUSE, loop devices")
        .or_else(|| need_program("fio", "fio"))
        .or_else(|| need_program("nbdkit", "nbdkit"))
        .or_else(|| need_program("qemu-storage-daemon", "qemu-system-common"))
}

fn suite(envs: &str, volumes: &str, fio: &str) -> String {
    format!(
        r#"
name = "netvol"
repeat = 1
baseline = {{ env = "host", volume = "local" }}

[[env]]
name = "host"
kind = "host"
{envs}

[[volume]]
name = "local"
kind = "block"
backing = "file"
size = "128M"
{volumes}

[[workload]]
name = "fio"
kind = "fio"
bs = "4k"
iodepth = 8
direct = true
ioengine = "libaio"
size = "32M"
{fio}
"#
    )
}

fn volume(name: &str, keys: &str) -> String {
    format!("\n[[volume]]\nname = \"{name}\"\nsize = \"128M\"\n{keys}\n")
}

fn iops(run: &serde_json::Value) -> f64 {
    run["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "iops")
        .map_or(0.0, |s| s["value"].as_f64().unwrap())
}

/// The isobench storage processes of this sandbox still running.
fn storage_processes(sb: &Scratch) -> Vec<String> {
    sb.processes().into_iter().filter(|p| p.contains("nbdkit") || p.contains("qemu-storage-daemon")).collect()
}

fn sample(run: &serde_json::Value, metric: &str) -> f64 {
    let found = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == metric);
    found.unwrap_or_else(|| panic!("no {metric}: {run}"))["value"].as_f64().unwrap()
}

#[test]
fn a_storage_nodes_latency_is_measured_in_every_read_at_queue_depth_one() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    // The same node in its namespace, bare and 2 ms away: one 4k read at a time, so each read
    // waits for the delay once, whichever mechanism (netem, nbdkit's delay filter) adds it.
    let volumes = [
        volume("bare", "kind = \"nbd\"\nwhere = \"netns\""),
        volume("far", "kind = \"nbd\"\nwhere = \"netns\"\nlatency = \"2ms\""),
    ]
    .concat();
    let fio = "rw = \"randread\"\nruntime = \"3s\"";
    let filters = ["--filter", "volume=bare", "--filter", "volume=far", "--set", "workload.fio.iodepth=1"];
    let (o, out) = sb.run_suite(&suite("", &volumes, fio), &filters);
    assert!(o.status.success(), "{}", text(&o));
    let bare = run_record(&out, "host.bare.fio", 1);
    let far = run_record(&out, "host.far.fio", 1);
    assert_eq!((bare["status"].as_str(), far["status"].as_str()), (Some("ok"), Some("ok")), "{bare}\n{far}");
    let grew = sample(&far, "read_clat_p50") - sample(&bare, "read_clat_p50");
    let how = far["setup"]["volume.node.0.shaping"].as_str().unwrap_or_default().to_string();
    eprintln!(
        "2 ms on the storage node: QD1 4k read median {:.0} µs → {:.0} µs (+{grew:.0} µs) by {how}",
        sample(&bare, "read_clat_p50"),
        sample(&far, "read_clat_p50")
    );
    // Every read waits out the delay once, so no median can be below it; the bare median is
    // noise on a busy machine (602 µs beside make test's other lane, 98-104 µs alone), so the
    // growth is only checked to be most of the delay.
    assert!(sample(&far, "read_clat_p50") >= 2000.0, "a read took less than the 2 ms asked for ({how})");
    assert!(grew >= 1500.0, "the median read grew by {grew:.0} µs, less than the 2 ms asked for ({how})");
    assert!(how.contains("netem") || how.contains("nbdkit delay filter"), "the mechanism is recorded: {how}");
    sb.assert_nothing_left();
}

/// Filesystems of their own for a test: an ext4 on a loop device over a file each, unmounted
/// and detached when dropped.
struct Disks {
    dirs: Vec<std::path::PathBuf>,
    devices: Vec<String>,
}

impl Disks {
    fn make(sb: &Scratch, n: usize) -> Disks {
        let mut disks = Disks { dirs: Vec::new(), devices: Vec::new() };
        for i in 0..n {
            let image = sb.path().join(format!("disk{i}.img"));
            std::fs::File::create(&image).unwrap().set_len(256 << 20).unwrap();
            let out = std::process::Command::new("losetup").args(["-f", "--show"]).arg(&image).output().unwrap();
            assert!(out.status.success(), "{}", text(&out));
            let device = String::from_utf8_lossy(&out.stdout).trim().to_string();
            disks.devices.push(device.clone());
            let made = std::process::Command::new("mkfs.ext4").args(["-q", &device]).output().unwrap();
            assert!(made.status.success(), "{}", text(&made));
            let dir = sb.path().join(format!("disk{i}"));
            std::fs::create_dir(&dir).unwrap();
            let mounted = std::process::Command::new("mount").arg(&device).arg(&dir).output().unwrap();
            assert!(mounted.status.success(), "{}", text(&mounted));
            disks.dirs.push(dir);
        }
        disks
    }
}

impl Drop for Disks {
    fn drop(&mut self) {
        for dir in &self.dirs {
            let _ = std::process::Command::new("umount").arg(dir).status();
        }
        for device in &self.devices {
            let _ = std::process::Command::new("losetup").args(["-d", device]).status();
        }
    }
}

#[test]
fn three_copies_on_three_disks_read_back_by_vote_and_compared_byte_for_byte() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    let disks = Disks::make(&sb, 3);
    let on: Vec<String> = disks.dirs.iter().map(|d| format!("\"{}\"", d.display())).collect();
    let volumes = [
        volume(
            "apart",
            &format!("kind = \"mirror\"\nreplicas = 3\nreads = \"all\"\nreplicas_on = [{}]", on.join(", ")),
        ),
        volume("together", "kind = \"mirror\"\nreplicas = 3\nreads = \"all\""),
    ]
    .concat();
    let filters = ["--filter", "volume=apart", "--filter", "volume=together"];
    let (o, out) = sb.run_suite(&suite("", &volumes, "rw = \"randrw\"\nruntime = \"2s\""), &filters);
    assert!(o.status.success(), "{}", text(&o));
    let apart = run_record(&out, "host.apart.fio", 1);
    assert_eq!(apart["status"], "ok", "{}", apart["error"]);
    assert!(sample(&apart, "read_iops") > 0.0 && sample(&apart, "write_iops") > 0.0, "reads by vote and writes");
    let setup = &apart["setup"];
    assert_eq!(setup["volume.replicas_identical"], "yes (3 copies compared byte for byte)");
    assert!(setup["volume.nexus"].as_str().unwrap().contains("vote-threshold 3, read-pattern quorum"), "{setup}");
    let devices: std::collections::BTreeSet<&str> =
        setup["volume.replicas_devices"].as_str().unwrap().split(", ").collect();
    assert_eq!(devices.len(), 3, "three copies, three devices: {setup}");
    let notes = apart["notes"].to_string();
    assert!(!notes.contains("share a device"), "{notes}");
    eprintln!(
        "3 replicas on 3 loop ext4 disks, reads = all: {:.0} read + {:.0} write IOPS, devices {}",
        sample(&apart, "read_iops"),
        sample(&apart, "write_iops"),
        setup["volume.replicas_devices"]
    );
    let together = run_record(&out, "host.together.fio", 1);
    assert_eq!(together["status"], "ok", "{}", together["error"]);
    let notes = together["notes"].to_string();
    assert!(notes.contains("the mirror's 3 copies share a device") && notes.contains("replicas_on"), "{notes}");
    drop(disks);
    sb.assert_nothing_left();
}

#[test]
fn every_route_reaches_nbd_and_mirror_volumes() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    let runc = isobench::env::oci::Runtime::resolve("runc").path.is_some();
    let envs = if runc { "[[env]]\nname = \"runc\"\nkind = \"oci\"\nruntime = \"runc\"\n" } else { "" };
    let volumes = [
        volume("nbd-local", "kind = \"nbd\""),
        volume("nbd-netns", "kind = \"nbd\"\nwhere = \"netns\"\nlatency = \"1ms\""),
        volume("nbd-ext4", "kind = \"nbd\"\nwhere = \"netns\"\nfs = \"ext4\""),
        volume("mirror-1", "kind = \"mirror\"\nreplicas = 1"),
        volume("mirror-2-ext4", "kind = \"mirror\"\nreplicas = 2\nfs = \"ext4\""),
    ]
    .concat();
    let (o, out) = sb.run_suite(&suite(envs, &volumes, "rw = \"randwrite\"\nruntime = \"1s\""), &[]);
    assert!(o.status.success(), "{}", text(&o));
    for (cell, route) in [
        ("host.nbd-local.fio", "fio-nbd"),
        ("host.nbd-netns.fio", "fio-nbd"),
        ("host.nbd-ext4.fio", "fuse+loop"),
        ("host.mirror-1.fio", "fio-nbd"),
        ("host.mirror-2-ext4.fio", "fuse+loop"),
    ] {
        let run = run_record(&out, cell, 1);
        assert_eq!(run["status"], "ok", "{cell}: {}", run["error"]);
        assert!(iops(&run) > 0.0, "{cell}");
        let access = run["setup"]["volume.access"].as_str().unwrap();
        assert!(access.starts_with(route), "{cell} took {access}, not {route}");
        // Every write went through nbdkit (and qemu-storage-daemon): their CPU is the volume's.
        assert!(sample(&run, "sys.cpu_volume") > 0.0, "{cell}: the volume's daemons' CPU");
    }
    let netns = run_record(&out, "host.nbd-netns.fio", 1);
    assert!(netns["setup"]["volume.node.0"].as_str().unwrap().contains("in namespace isobench-"));
    assert!(
        netns["setup"]["volume.node.0.shaping"].as_str().unwrap().contains("delay-read")
            || netns["setup"]["volume.node.0.shaping"].as_str().unwrap().contains("1ms"),
        "{}",
        netns["setup"]["volume.node.0.shaping"]
    );
    let fs = run_record(&out, "host.nbd-ext4.fio", 1);
    assert_eq!(fs["facts"]["data.fstype"], "ext4", "the agent saw ext4 over the network volume");
    if runc {
        // A container gets the device or the mount from the host, whatever the volume.
        for cell in ["runc.nbd-local.fio", "runc.mirror-2-ext4.fio"] {
            let run = run_record(&out, cell, 1);
            assert_eq!(run["status"], "ok", "{cell}: {}", run["error"]);
            assert!(run["setup"]["volume.access"].as_str().unwrap().starts_with("fuse+loop"), "{cell}");
        }
    } else {
        common::skip_part("runc", &missing("runc", "runc is not installed (scripts/setup.sh installs it)"));
    }
    assert!(storage_processes(&sb).is_empty(), "{:?}", storage_processes(&sb));
    sb.assert_nothing_left();
}

#[test]
fn a_mirror_writes_every_copy_and_a_lost_child_fails_writes_or_is_reported() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    let mirror = |extra: &str| volume("mirror", &format!("kind = \"mirror\"\nreplicas = 2\n{extra}"));

    // Synchronous: after random writes through the nexus, both copies hold the same bytes.
    let (o, out) =
        sb.run_suite(&suite("", &mirror(""), "rw = \"randwrite\"\nruntime = \"2s\""), &["--filter", "volume=mirror"]);
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "host.mirror.fio", 1);
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    assert_eq!(run["setup"]["volume.replicas_identical"], "yes (2 copies compared byte for byte)");
    assert!(run["setup"]["volume.nexus"].as_str().unwrap().contains("vote-threshold 2"));

    // A storage node killed mid-run: the writes fail, never silently land in one copy.
    let run = kill_a_node_mid_run(&sb, &mirror(""));
    assert_eq!(run["status"], "failed", "{run}");
    assert!(run["error"].as_str().unwrap().contains("Input/output error"), "{}", run["error"]);
    assert!(run["notes"].to_string().contains("the mirror lost a child"), "{}", run["notes"]);

    // Allowed to run degraded: it runs on, and says so.
    let run = kill_a_node_mid_run(&sb, &mirror("allow_degraded = true"));
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    assert!(run["notes"].to_string().contains("the mirror ran degraded (allow_degraded = true)"), "{}", run["notes"]);
    assert!(run["setup"]["volume.quorum_events"].as_str().unwrap().contains("QUORUM_REPORT_BAD"));
    sb.assert_nothing_left();
}

/// Runs randwrite on `volumes` for long enough to SIGKILL the second storage node in the middle;
/// the run's record.
fn kill_a_node_mid_run(sb: &Scratch, volumes: &str) -> serde_json::Value {
    let suite = suite("", volumes, "rw = \"randwrite\"\nruntime = \"8s\"");
    let (mut run, dir) = sb.start_suite(&suite, &["--filter", "volume=mirror"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let node = loop {
        let fio_running = sb.processes().iter().any(|p| p.contains("fio ") && p.contains("--uri="))
            || std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
                std::fs::read(e.path().join("cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--uri=nbd://"))
            });
        let node = sb.processes().into_iter().find(|p| p.contains("nbdkit") && p.contains("node-1/disk.img"));
        if let (true, Some(node)) = (fio_running, node) {
            break Some(node);
        }
        if Instant::now() > deadline || run.try_wait().unwrap().is_some() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let Some(node) = node else {
        let _ = run.kill();
        let _ = run.wait();
        panic!("the mirror's second node and fio never ran together");
    };
    std::thread::sleep(Duration::from_secs(2));
    let pid: i32 = node.split(':').next().unwrap().parse().unwrap();
    // SAFETY: kill(2) on a pid we just found; a race with its exit only yields ESRCH.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    assert!(run.wait().unwrap().code().is_some(), "the run finished by itself");
    run_record(&dir, "host.mirror.fio", 1)
}

#[test]
fn sigkill_with_storage_nodes_up_then_cleanup_leaves_nothing() {
    skip_if!(unable());
    let _serial = serial();
    let sb = Scratch::new();
    let volumes = volume("mirror", "kind = \"mirror\"\nreplicas = 2\nfs = \"ext4\"");
    let (child, _) =
        sb.start_suite(&suite("", &volumes, "rw = \"randread\"\nruntime = \"60s\""), &["--filter", "volume=mirror"]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let up = loop {
        if storage_processes(&sb).len() >= 3 && sb.mounts_left().iter().any(|m| m.ends_with("/mnt")) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let o = sb.kill_then_cleanup(child);
    assert!(up, "the mirror never came up");
    let said = text(&o);
    for what in ["network namespace", "mount", "loop device", "processes"] {
        assert!(said.contains(&format!("removed {what}")), "cleanup removed no {what}: {said}");
    }
    assert!(storage_processes(&sb).is_empty(), "{:?}", storage_processes(&sb));
    sb.assert_nothing_left();
}

#[test]
fn cassandra_writes_and_reads_back_on_a_mirror_with_a_login() {
    skip_if!(unable());
    let Some(reason) = common::cassandra::unavailable() else {
        let _serial = serial();
        let sb = Scratch::new();
        let text_of_suite = r#"
name = "db"
repeat = 1
baseline = { env = "host" }

[[env]]
name = "host"
kind = "host"

[[volume]]
name = "mirror"
kind = "mirror"
replicas = 2
size = "1G"
fs = "ext4"

[[server]]
kind = "cassandra"
heap = "1G"
quick_jit = true
user = "bench"
password = "do-not-print-me"

[[workload]]
name = "cassandra"
kind = "cql"
load = "write n=5000 -rate threads=8"
args = "read n=5000 -rate threads=8"
"#;
        let (o, out) = sb.run_suite(text_of_suite, &[]);
        assert!(o.status.success(), "{}", text(&o));
        let run = run_record(&out, "host.mirror.cassandra", 1);
        assert_eq!(run["status"], "ok", "{}", run["error"]);
        let errors = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "errors").unwrap();
        assert_eq!(errors["value"], 0.0, "every row written was read back");
        assert_eq!(run["setup"]["server.login"], "PasswordAuthenticator, role bench");
        assert_eq!(run["facts"]["data.fstype"], "ext4");
        let note = run["notes"].to_string();
        assert!(
            note.contains("with its data in ") && note.contains("/mnt/cassandra"),
            "the data on the volume: {note}"
        );
        assert!(run["setup"]["volume.replicas_identical"].as_str().unwrap().starts_with("yes"));
        let leaked = std::process::Command::new("grep").args(["-rl", "do-not-print-me"]).arg(&out).output().unwrap();
        assert!(leaked.stdout.is_empty(), "the password reached {}", String::from_utf8_lossy(&leaked.stdout));
        assert!(!text(&o).contains("do-not-print-me"));
        sb.assert_nothing_left();
        return;
    };
    common::skip(&reason);
}
