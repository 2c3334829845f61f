//! `isobench server` and `[[server]]` suites with a real Cassandra 5.0 from Maven Central: start
//! from the cache, stop leaving no java, a killed node started again on its data, failures that
//! carry the server's log and leave nothing, and a managed node inside the host and inside
//! gVisor, loaded from the host.

mod common;

use common::cassandra::{javas, unable_to_manage};
use common::{Scratch, ok, run_record, text};
use isobench::sys::free_port;

#[test]
fn start_from_the_cache_then_stop_leaves_no_java_and_a_killed_node_keeps_its_tables() {
    skip_if!(unable_to_manage());
    let sb = Scratch::new();
    let port = free_port().unwrap().to_string();
    let data = sb.path().join("node");
    let start = ["server", "start", "cassandra", "--port", &port, "--data", data.to_str().unwrap(), "--heap", "768M"];
    // The first start may download (once per machine) and writes the CDS archive on its stop.
    let first = ok(&sb.run(&start));
    assert!(first.contains(&format!("answers CQL on 127.0.0.1:{port}")), "{first}");
    let status = ok(&sb.run(&["server", "status"]));
    assert!(status.contains(": up (pid"), "{status}");
    ok(&sb.run(&["server", "stop", "cassandra", "--port", &port]));
    assert_eq!(javas(&sb), Vec::<String>::new(), "stop leaves no java");
    let second = ok(&sb.run(&start));
    let seconds: f64 = second.split(" after ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    eprintln!("second start, from the cache: CQL-ready after {seconds:.1} s");
    assert!(data.join("data/system").is_dir(), "the data directory is the one asked for");
    // The memtable row overhead a start measures is kept: the second start does not measure it.
    let log = std::fs::read_to_string(data.join("logs/system.log")).unwrap();
    let (_, second_log) = log.split_once("Startup complete").expect("the first start's end is in the log");
    assert!(second_log.contains("Startup complete"), "both starts are in one log");
    assert!(!second_log.contains("Estimated SkipListMemtable row overhead"), "{second_log}");
    // A node of `server start` may be killed and started again on its data: it still knows the
    // table made before the kill (the rows written since the commit log's last periodic sync,
    // every 10 s, may be gone, as from any Cassandra killed).
    ok(&sb.run(&[
        "cql",
        "write",
        "n=500",
        "no-warmup",
        "-schema",
        "keyspace=killed",
        "-port",
        &format!("native={port}"),
    ]));
    let pid: i32 =
        second.split("(pid ").nth(1).unwrap().split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGKILL).unwrap();
    while std::path::Path::new(&format!("/proc/{pid}")).exists() {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // What the killed JVM unpacked (lz4-java's native library) stays in the node's directory,
    // which goes with its volume, not in the machine's /tmp for good.
    let unpacked: Vec<_> = std::fs::read_dir(data.join("tmp")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(unpacked.iter().any(|n| n.to_string_lossy().starts_with("liblz4-java")), "{unpacked:?}");
    ok(&sb.run(&start));
    let rows = common::cassandra::count_at_quorum("127.0.0.1", port.parse().unwrap(), "killed.standard1");
    eprintln!("{rows} of 500 rows after a kill and a start on the same data");
    assert!(rows <= 500, "{rows} rows");
    let stopped = ok(&sb.run(&["server", "stop", "cassandra"]));
    assert!(stopped.contains(&format!("stopped Cassandra on 127.0.0.1:{port}")), "{stopped}");
    assert_eq!(javas(&sb), Vec::<String>::new(), "stop leaves no java");
    assert!(text(&sb.run(&["server", "status"])).contains("no servers started by isobench"));
}

#[test]
fn a_taken_port_fails_with_the_servers_log_and_a_bad_heap_before_java_starts() {
    skip_if!(unable_to_manage());
    let sb = Scratch::new();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let data = sb.path().join("node");
    let out = sb.run(&["server", "start", "cassandra", "--port", &port, "--data", data.to_str().unwrap()]);
    let err = text(&out);
    assert!(!out.status.success());
    assert!(err.contains("The end of its log"), "the error carries the log: {err}");
    assert!(err.to_lowercase().contains("address already in use"), "{err}");
    assert_eq!(javas(&sb), Vec::<String>::new());

    let port = free_port().unwrap().to_string();
    let out =
        sb.run(&["server", "start", "cassandra", "--port", &port, "--data", data.to_str().unwrap(), "--heap", "1Q"]);
    let err = text(&out);
    assert!(!out.status.success());
    assert!(err.contains("heap \"1Q\": \"1Q\" has an unknown unit"), "refused before java starts: {err}");
    assert_eq!(javas(&sb), Vec::<String>::new());
    assert!(text(&sb.run(&["server", "status"])).contains("no servers started by isobench"));
}

fn db_suite(envs: &str, volume: &str, heap: &str) -> String {
    format!(
        r#"
name = "db"
repeat = 1
baseline = {{ env = "host", volume = "data" }}

[[server]]
kind = "cassandra"
heap = "{heap}"
quick_jit = true

[[env]]
name = "host"
kind = "host"
{envs}

{volume}

[[workload]]
name = "cassandra"
kind = "cql"
load = "write n=5000 -rate threads=16"
args = "read n=5000 -rate threads=16 -pop dist=uniform(1..5000)"
"#
    )
}

const TMPFS: &str = "[[volume]]\nname = \"data\"\nkind = \"tmpfs\"\nsize = \"1G\"";

fn sample(record: &serde_json::Value, metric: &str) -> f64 {
    record["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == metric)
        .unwrap_or_else(|| panic!("no {metric} in {record:#}"))["value"]
        .as_f64()
        .unwrap()
}

/// The database and the load generator on CPUs of their own (`split_cpus`): while the load is
/// measured, the database's processes in every cell (a JVM on the host and under runc, gVisor's
/// sandbox) and the load's thread run only on the CPUs each was given, read from the kernel, and
/// every run records them. The database starts on every CPU and is moved to its own when the
/// measured phase begins.
#[test]
fn a_managed_server_runs_in_each_cell_with_its_data_on_the_volume_on_cpus_of_its_own() {
    skip_if!(unable_to_manage());
    let runsc = isobench::env::oci::Runtime::resolve("runsc").path.is_some();
    if !runsc {
        common::skip_part(
            "runsc",
            &common::missing("runsc", "runsc is not installed (scripts/setup.sh builds it): only the host cell runs"),
        );
    }
    // gVisor as its users run it (its own network namespace and netstack, reached over a veth
    // pair), and the same with the host's network and directfs off, as a suite may ask.
    let envs = if runsc {
        "[[env]]\nname = \"runc\"\nkind = \"oci\"\nruntime = \"runc\"\n\n[[env]]\nname = \"runsc\"\nkind = \"oci\"\nruntime = \"runsc\"\n\n[[env]]\nname = \"runsc-hostnet\"\nkind = \"oci\"\nruntime = \"runsc\"\nnetwork = \"host\"\ndirectfs = false"
    } else {
        ""
    };
    let sb = Scratch::new();
    // The syscall probes in each environment price what the baseline's counts say an operation does.
    let probes = "\n[[workload]]\nname = \"syscall\"\nkind = \"syscall\"\nprobes = [\"getpid\", \"mmap\", \"tcp\"]\ntime = \"100ms\"\nmmap_size = \"64M\"\n";
    // Fewer rows than the other tests: on one CPU gVisor serves a quarter of what it does on two.
    let suite = db_suite(envs, TMPFS, "768M")
        .replace("repeat = 1\n", "repeat = 1\nsplit_cpus = true\n")
        .replace("n=5000", "n=1000")
        .replace("1..5000", "1..1000")
        + probes;
    let (out, dir, cpus) = sb.run_suite_watching_cpus(&suite, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let (loader, database) = isobench::sys::CpuSet::available().halves().expect("a machine of two CPUs or more");
    let cells: &[&str] = if runsc {
        &["host.data.cassandra", "runc.data.cassandra", "runsc.data.cassandra", "runsc-hostnet.data.cassandra"]
    } else {
        &["host.data.cassandra"]
    };
    for cell in cells {
        let r = run_record(&dir, cell, 1);
        assert_eq!(r["status"], "ok", "{r:#}");
        let measured = common::cpus_while_measured(&cpus, &r);
        eprintln!("{cell}: the CPUs each part was allowed while the load was measured: {measured:?}");
        let server = if cell.starts_with("runsc") { "runsc-sandbox" } else { "java" };
        let only = |name: &str, set: &isobench::sys::CpuSet| {
            let seen = measured.get(name).unwrap_or_else(|| panic!("{cell}: no {name} was seen running: {measured:?}"));
            assert_eq!(seen, &[set.to_string()].into(), "{cell}: {name}'s threads ran on these CPUs");
        };
        only(isobench::runner::server_cell::LOADER_THREAD, &loader);
        only(server, &database);
        let whole = common::cpus_during(&cpus, &r);
        assert!(
            whole[server].contains(&isobench::sys::CpuSet::available().to_string()),
            "{cell}: the database started on every CPU: {whole:?}"
        );
        let setup = &r["setup"];
        assert_eq!(
            (&setup["limit.cpuset"], &setup["loader.cpuset"]),
            (&database.to_string().into(), &loader.to_string().into())
        );
        let from = setup["limit.cpuset_from"].as_str().unwrap_or_default();
        assert!(
            from.starts_with("the measured phase") && from.contains("threads of the sandbox's processes moved"),
            "{from}"
        );
        // gVisor's kernel keeps the CPUs it booted with; a JVM on the host's kernel sees the move.
        let seen = if cell.starts_with("runsc") { isobench::sys::CpuSet::available().len() } else { database.len() };
        assert_eq!(setup["limit.cpus_seen"], seen.to_string(), "{cell}: the CPUs the database saw at its end");
        assert!(sample(&r, "op_rate") > 0.0);
        assert_eq!(sample(&r, "errors"), 0.0);
        // The start's phases, in the order the node logs them, within its start.
        let phases =
            ["server_start_jvm", "server_start_storage", "server_start_cql", "server_startup"].map(|m| sample(&r, m));
        assert!(phases[0] > 0.0 && phases.windows(2).all(|w| w[0] <= w[1]), "{cell}: {phases:?}");
        assert!(sample(&r, "server_rss") > 100e6, "a JVM with a heap");
        assert!(sample(&r, "server_commitlog_size") > 0.0, "the writes reached the volume");
        assert_eq!(r["setup"]["server.version"], "5.0.9");
        let notes = r["notes"].to_string();
        assert!(notes.contains("ran inside this environment") && notes.contains("/cassandra"), "{notes}");
        // The server's CPU while the load ran, counted in the sandbox's cgroup, per operation.
        if r["setup"]["sys.cpu_counted_by"].as_str().is_some_and(|by| by.starts_with("a cgroup")) {
            assert!(sample(&r, "sys.cpu_measured") > 0.0, "{cell}: the server's CPU under load");
            let per_op = sample(&r, "sys.cpu_per_op");
            eprintln!("{cell}: {per_op:.0} µs of CPU per operation");
            assert!(per_op > 0.0 && per_op < 1e6, "{cell}: {per_op} µs of CPU per operation");
        }
    }
    // The host's kernel counted the baseline server's system calls and page faults under load
    // (a CQL request is read from and answered on a socket: at least one call per hundred).
    let host = run_record(&dir, "host.data.cassandra", 1);
    let counted = host["setup"]["sys.calls_counted_by"].as_str().is_some_and(|by| by.starts_with("perf stat --pid"));
    if counted {
        let calls = sample(&host, "sys.host_syscalls_per_op");
        eprintln!(
            "host: {calls:.1} system calls and {:.2} page faults per operation",
            sample(&host, "sys.host_page_faults_per_op")
        );
        assert!(calls > 0.01 && calls < 1e4, "{calls} system calls per operation");
    } else {
        let why =
            host["setup"]["sys.calls_counted_by"].as_str().unwrap_or("no cgroup of the sandbox's own").to_string();
        common::skip_part("system calls per operation", &common::missing("perf", why));
    }
    if runsc {
        let own = run_record(&dir, "runsc.data.cassandra", 1);
        let path = own["setup"]["net.path"].as_str().unwrap_or_default();
        assert!(path.starts_with("network namespace") && path.contains("veth"), "{path}");
        assert!(own["setup"]["runtime.args"].as_str().unwrap_or_default().contains("--network=sandbox"));
        let hostnet = run_record(&dir, "runsc-hostnet.data.cassandra", 1);
        assert_eq!(hostnet["setup"]["net.path"], "loopback (the host's network)");
        let args = hostnet["setup"]["runtime.args"].as_str().unwrap_or_default();
        assert!(args.contains("--network=host") && args.contains("--directfs=false"), "{args}");
        let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(
            report.contains("platform systrap, directfs false, network host)"),
            "the verdict names the knobs: {report}"
        );
        // The extra CPU per operation, split by part from the counts and the probes: the parts
        // and the rest add up to it, whatever the noise of one run.
        let set = isobench::store::ResultSet::open(&dir).unwrap();
        let analysis = isobench::report::Report::load(&set).unwrap().analysis;
        let cell = analysis.cells.iter().find(|c| c.record.cell == "runsc.data.cassandra").unwrap();
        let base = &analysis.cells[cell.baseline.unwrap()];
        match isobench::report::attribute::attribute(&analysis, cell, base) {
            _ if !counted => {}
            Some(a) => {
                let line = a.line();
                eprintln!("runsc: {line}");
                let parts: f64 = a.parts.iter().map(|p| p.us).sum();
                assert!((parts + a.rest() - a.increase()).abs() < 1e-6 * a.increase().abs().max(1.0), "{line}");
                assert!(a.parts.iter().any(|p| p.name == "system calls" && p.us > 0.0), "{line}");
                assert!(line.contains("unexplained"), "{line}");
            }
            // Only where gVisor used no more CPU per operation than the host, in this one run.
            None => assert!(
                sample(&run_record(&dir, "runsc.data.cassandra", 1), "sys.cpu_per_op")
                    <= sample(&host, "sys.cpu_per_op")
            ),
        }
        // The agent's facts prove where it ran: gVisor reports its own kernel.
        let r = own;
        assert_ne!(
            r["facts"]["kernel.release"],
            run_record(&dir, "host.data.cassandra", 1)["facts"]["kernel.release"],
            "{r:#}"
        );
    }
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
    database_in_a_guest_on_cpus_of_its_own(&suite);
}

/// The same split with the database in a QEMU guest: every thread of QEMU on the database's
/// CPUs. Where KVM runs guests only: under TCG, Cassandra took 140 s to start in a guest here
/// and its cell 11 minutes (the guest's pinning is checked with fio in tests/vm.rs).
fn database_in_a_guest_on_cpus_of_its_own(suite: &str) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let kvm = std::path::Path::new("/dev/kvm").exists()
        && cpuinfo.split_whitespace().any(|flag| flag == "vmx" || flag == "svm");
    if !kvm {
        let why = "no KVM that boots a guest here (no vmx or svm among the CPU's flags): under TCG, Cassandra takes minutes to start in a guest";
        common::skip_part("the database in a VM, on CPUs of its own", &common::missing("kvm", why));
        return;
    }
    let sb = Scratch::new();
    let suite = suite.replace("[[volume]]", "[[env]]\nname = \"vm\"\nkind = \"vm\"\nmemory = \"2G\"\n\n[[volume]]");
    let (out, dir, cpus) = sb.run_suite_watching_cpus(&suite, &["--filter", "env=vm,workload=cassandra"]);
    assert!(out.status.success(), "{}", text(&out));
    let (loader, database) = isobench::sys::CpuSet::available().halves().expect("a machine of two CPUs or more");
    let during = common::cpus_during(&cpus, &run_record(&dir, "vm.data.cassandra", 1));
    assert_eq!(during.get("qemu-system-x86_64"), Some(&[database.to_string()].into()), "{during:?}");
    assert_eq!(
        during.get(isobench::runner::server_cell::LOADER_THREAD),
        Some(&[loader.to_string()].into()),
        "{during:?}"
    );
    sb.assert_nothing_left();
}

#[test]
fn loaders_split_a_cells_key_space_and_log_in_without_showing_the_password() {
    skip_if!(unable_to_manage());
    let sb = Scratch::new();
    let suite = db_suite("", TMPFS, "768M")
        .replace("quick_jit = true", "quick_jit = true\nuser = \"bench\"\npassword = \"not-for-logs\"")
        .replace("-pop dist=uniform(1..5000)\"", "-pop seq=1..5000\"\nloaders = 2")
        // Two load phases, run in turn: the second writes the rows the first did not.
        .replace(
            "load = \"write n=5000 -rate threads=16\"",
            "load = [\"write n=2500 -rate threads=16\", \"write n=2500 -rate threads=16 -pop seq=2501..5000\"]",
        );
    let (out, dir) = sb.run_suite(&suite, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let r = run_record(&dir, "host.data.cassandra", 1);
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(sample(&r, "loaders"), 2.0);
    assert_eq!(sample(&r, "errors"), 0.0, "every row the two load phases wrote, each loader its half, was read back");
    let raw = r["raw"].to_string();
    for log in ["load-loader-2.log", "load-2-loader-1.log", "load-2-loader-2.log", "run-loader-2.log"] {
        assert!(raw.contains(log), "{log}: {raw}");
    }
    assert!(sample(&r, "loader_1_op_rate") > 0.0 && sample(&r, "loader_2_op_rate") > 0.0);
    assert!(sample(&r, "latency_p99") >= sample(&r, "latency_p50"));
    let notes = r["notes"].to_string();
    for slice in ["-pop seq=1..2500", "-pop seq=2501..5000", "n=2500"] {
        assert!(notes.contains(slice), "{slice}: {notes}");
    }
    let leaked = std::process::Command::new("grep").args(["-rl", "not-for-logs"]).arg(&dir).output().unwrap();
    assert!(leaked.stdout.is_empty(), "the password reached {}", String::from_utf8_lossy(&leaked.stdout));
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}

#[test]
fn a_server_not_ready_within_its_start_timeout_fails_its_cell_naming_both() {
    skip_if!(unable_to_manage());
    let sb = Scratch::new();
    // Cassandra takes seconds to accept clients (under 3 s here, C1 only, on tmpfs): 1 s is
    // never enough.
    let suite = db_suite("", TMPFS, "768M").replace("quick_jit = true", "quick_jit = true\nstart_timeout = \"1s\"");
    let started = std::time::Instant::now();
    let (out, dir) = sb.run_suite(&suite, &[]);
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(!out.status.success() || text(&out).contains("FAILED"), "{}", text(&out));
    let r = run_record(&dir, "host.data.cassandra", 1);
    assert_eq!(r["status"], "failed");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("did not accept CQL clients") && error.contains("within 1 s"), "{error}");
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}

#[test]
fn a_server_that_cannot_start_fails_its_cell_with_its_log() {
    skip_if!(unable_to_manage());
    let sb = Scratch::new();
    let suite = db_suite("", TMPFS, "768M")
        .replace("quick_jit = true", "quick_jit = true\njvm_args = [\"-XX:+IsobenchNoSuchOption\"]");
    let (out, dir) = sb.run_suite(&suite, &[]);
    assert!(!out.status.success() || text(&out).contains("FAILED"));
    let r = run_record(&dir, "host.data.cassandra", 1);
    assert_eq!(r["status"], "failed");
    let error = r["error"].as_str().unwrap();
    assert!(error.contains("The end of its log") && error.contains("Unrecognized VM option"), "{error}");
    sb.assert_nothing_left();
    assert_eq!(javas(&sb), Vec::<String>::new());
}
