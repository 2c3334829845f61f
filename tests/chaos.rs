//! Chaos: `isobench run` signalled at seeded moments in each phase of a run (provisioning, boot,
//! workload, teardown), over suites that together use every kind of resource this machine
//! supports. After a SIGKILL, `isobench cleanup` must leave nothing isobench made; after SIGINT
//! or SIGTERM the run must tear down by itself and exit non-zero. The short form runs in
//! `make test`; `bench/chaos.sh N` runs N kills (ISOBENCH_CHAOS_KILLS, ISOBENCH_CHAOS_SEED).
//!
//! The tests of this file take one lock, and cargo runs test binaries one after another, so the
//! machine-wide look for leftovers (containers, namespaces, processes) sees only this run's.

mod common;

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Missing, Scratch, alone, have, need_program, need_root, text};
use nix::sys::signal::Signal;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Start,
    /// The run ended before the signal came.
    Ended,
    Provisioning,
    Boot,
    Workload,
    Teardown,
}

impl Phase {
    const TARGETS: [Phase; 4] = [Phase::Provisioning, Phase::Boot, Phase::Workload, Phase::Teardown];

    fn name(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Ended => "(ended)",
            Phase::Provisioning => "provisioning",
            Phase::Boot => "boot",
            Phase::Workload => "workload",
            Phase::Teardown => "teardown",
        }
    }

    /// How long after the phase is first seen the signal may come (the seed picks within it).
    fn jitter_ms(self) -> u64 {
        match self {
            Phase::Workload => 1500,
            Phase::Boot => 100,
            _ => 40,
        }
    }
}

/// A suite that makes one group of resources, and why it cannot run here (if it cannot).
struct Scenario {
    name: &'static str,
    suite: String,
    unable: Option<Missing>,
    /// A run's first phase seen can take this long (a guest under TCG, a JVM).
    patience: Duration,
    /// The suite has one run, so each phase is seen once: a kill aims at its first sighting.
    one_run: bool,
}

fn fio(runtime: &str) -> String {
    format!(
        "[[workload]]\nname = \"fio\"\nkind = \"fio\"\nrw = \"randrw\"\nsize = \"16M\"\nruntime = \"{runtime}\"\ndirect = true\nioengine = \"libaio\"\niodepth = 4\n"
    )
}

/// The suite's head; with `host`, the host environment (else the scenario's own are its only).
fn head(baseline: &str, host: bool) -> String {
    let host = if host { "\n[[env]]\nname = \"host\"\nkind = \"host\"\n" } else { "" };
    format!("name = \"chaos\"\nrepeat = 1\nbaseline = {{ {baseline} }}\n{host}")
}

fn missing(programs: &[&'static str]) -> Option<Missing> {
    need_root("mounts, containers, guests").or_else(|| programs.iter().find_map(|p| need_program(p, p)))
}

fn runtime_present(name: &str) -> bool {
    isobench::env::oci::Runtime::resolve(name).path.is_some()
}

fn scenarios() -> Vec<Scenario> {
    let oci = |name: &str, runtime: &'static str, extra: &str| {
        if name == "podman" && have("podman") {
            return "\n[[env]]\nname = \"podman\"\nkind = \"podman\"\n".to_string();
        }
        if runtime_present(runtime) {
            format!("\n[[env]]\nname = \"{name}\"\nkind = \"oci\"\nruntime = \"{runtime}\"\n{extra}\n")
        } else {
            let why = format!("{runtime} is not installed (scripts/setup.sh installs it): its containers are left out");
            common::skip_part("containers", &common::missing(if runtime.is_empty() { "podman" } else { runtime }, why));
            String::new()
        }
    };
    let volumes = format!(
        "[[volume]]\nname = \"ext4\"\nkind = \"loop\"\nfs = \"ext4\"\nsize = \"256M\"\n\n{}[[volume]]\nname = \"tmpfs\"\nkind = \"tmpfs\"\nsize = \"128M\"\n\n[[volume]]\nname = \"dir\"\nkind = \"dir\"\npath = \"@DIR@\"\n\n",
        if have("mkfs.xfs") {
            "[[volume]]\nname = \"xfs\"\nkind = \"loop\"\nfs = \"xfs\"\nsize = \"320M\"\n\n"
        } else {
            ""
        }
    );
    let runtimes = [oci("runc", "runc", ""), oci("crun", "crun", ""), oci("runsc", "runsc", ""), oci("podman", "", "")];
    let vm = |name: &str, attach: &str| {
        format!("\n[[env]]\nname = \"{name}\"\nkind = \"vm\"\nmemory = \"512M\"\nattach = \"{attach}\"\n")
    };
    let guest_unable = missing(&["fio", "qemu-system-x86_64", "busybox"]).or_else(|| {
        isobench::env::vm::guest::Kernel::installed().is_none().then(|| {
            common::missing("guest-kernel", "no guest kernel (scripts/setup.sh unpacks Debian's generic kernel)")
        })
    });
    let network_env = if runtime_present("runc") { oci("runc", "runc", "") } else { String::new() };
    vec![
        Scenario {
            name: "host volumes",
            suite: format!("{}\n{volumes}{}", head("env = \"host\", volume = \"tmpfs\"", true), fio("1s")),
            unable: missing(&["fio"]),
            patience: Duration::from_secs(60),
            one_run: false,
        },
        Scenario {
            name: "containers",
            suite: format!(
                "{}{}\n[[volume]]\nname = \"tmpfs\"\nkind = \"tmpfs\"\nsize = \"128M\"\n\n{}",
                head(&format!("env = \"{}\"", first_env(&runtimes.concat())), false),
                runtimes.concat(),
                fio("1s")
            ),
            unable: missing(&["fio"]).or_else(|| {
                runtimes.iter().all(String::is_empty).then(|| {
                    common::missing("runc", "no container runtime is installed (scripts/setup.sh installs runc)")
                })
            }),
            patience: Duration::from_secs(60),
            one_run: false,
        },
        Scenario {
            name: "guests",
            suite: format!(
                "{}{}{}{}\n[[volume]]\nname = \"ext4\"\nkind = \"loop\"\nfs = \"ext4\"\nsize = \"256M\"\n\n{}",
                head("env = \"vm-9p\"", false),
                vm("vm-9p", "9p"),
                vm("vm-virtiofs", "virtiofs"),
                vm("vm-blk", "virtio-blk"),
                fio("2s")
            ),
            unable: guest_unable,
            patience: Duration::from_secs(120),
            one_run: false,
        },
        Scenario {
            name: "network and density",
            suite: format!(
                "{}{network_env}\n[[volume]]\nname = \"tmp\"\nkind = \"tmpfs\"\nsize = \"16M\"\n\n[[workload]]\nname = \"net\"\nkind = \"network\"\ntime = \"2s\"\ndensity = [1, 2]\n",
                head("env = \"runc\"", false)
            ),
            unable: missing(&["iperf3"])
                .or_else(|| (!runtime_present("runc")).then(|| common::missing("runc", "runc is not installed"))),
            patience: Duration::from_secs(60),
            one_run: false,
        },
        Scenario {
            name: "network volumes",
            suite: format!(
                "{}\n[[volume]]\nname = \"nbd\"\nkind = \"nbd\"\nwhere = \"netns\"\nfs = \"ext4\"\nsize = \"128M\"\n\n[[volume]]\nname = \"mirror\"\nkind = \"mirror\"\nreplicas = 2\nsize = \"128M\"\n\n{}",
                head("env = \"host\", volume = \"nbd\"", true),
                fio("1s")
            ),
            unable: missing(&["fio", "nbdkit", "qemu-storage-daemon"]),
            patience: Duration::from_secs(60),
            one_run: false,
        },
        Scenario {
            name: "managed cassandra",
            suite: format!(
                "{}\n[[server]]\nkind = \"cassandra\"\nheap = \"1G\"\nquick_jit = true\n\n[[volume]]\nname = \"data\"\nkind = \"tmpfs\"\nsize = \"1G\"\n\n[[workload]]\nname = \"cassandra\"\nkind = \"cql\"\nload = \"write n=3000 -rate threads=8\"\nargs = \"read n=3000 -rate threads=8\"\n",
                head("env = \"host\"", true)
            ),
            unable: common::cassandra::unable_to_manage(),
            patience: Duration::from_secs(180),
            one_run: true,
        },
    ]
}

/// The first `[[env]]`'s name in a piece of suite text.
fn first_env(envs: &str) -> String {
    envs.split("name = \"").nth(1).and_then(|r| r.split('"').next()).unwrap_or("host").to_string()
}

/// splitmix64: the kill schedule from one printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One process of the machine: pid, short name, command line and environment.
struct Proc {
    pid: i32,
    comm: String,
    cmdline: String,
    environ: String,
}

fn processes() -> Vec<Proc> {
    let me = std::process::id() as i32;
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let read = |what: &str| std::fs::read(format!("/proc/{pid}/{what}")).ok();
            Some(Proc {
                pid,
                comm: String::from_utf8_lossy(&read("comm")?).trim().to_string(),
                cmdline: String::from_utf8_lossy(&read("cmdline")?).replace('\0', " "),
                environ: String::from_utf8_lossy(&read("environ").unwrap_or_default()).into_owned(),
            })
        })
        .collect()
}

/// Whether a process belongs to the run under test: it names the sandbox, or carries the run's
/// token (`ISOBENCH_TOKEN=<pid>-…`).
fn ours(p: &Proc, sb: &Scratch, run_pid: u32) -> bool {
    p.cmdline.contains(&sb.path().to_string_lossy().into_owned())
        || p.environ.split('\0').any(|v| v.starts_with(&format!("{}={run_pid}-", isobench::sys::TOKEN_VAR)))
}

const WORKLOADS: [&str; 3] = ["fio", "iperf3", "sysbench"];
const SANDBOXES: [&str; 9] =
    ["qemu-system-x86", "runc", "crun", "runsc", "runsc-sandbox", "runsc-gofer", "conmon", "podman", "java"];

/// Whether something listens on TCP `port` (a database ready for its load).
fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} 00000000:0000 0A");
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.lines().any(|l| l.contains(&needle))))
}

/// The CQL port of a Cassandra isobench started, from the cassandra.yaml its command line names.
fn native_port(java: &Proc) -> Option<u16> {
    let (_, rest) = java.cmdline.split_once("-Dcassandra.config=file://")?;
    let yaml = std::fs::read_to_string(rest.split_whitespace().next()?).ok()?;
    yaml.lines().find_map(|l| l.strip_prefix("native_transport_port:")).and_then(|p| p.trim().parse().ok())
}

/// Entries of the run's ledger state file (none before it is written).
fn ledger_len(sb: &Scratch, run_pid: u32) -> usize {
    let Ok(dir) = std::fs::read_dir(sb.workdir().join("state")) else { return 0 };
    dir.filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{run_pid}-")))
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .map(|v| v["entries"].as_array().map_or(0, Vec::len))
        .sum()
}

/// What the run is doing now, seen from the outside: its ledger grows while it provisions and
/// boots, shrinks while it tears down; its processes show the sandbox and the workload.
#[derive(Default)]
struct Observer {
    entries: usize,
    sandbox_seen: bool,
    tearing_down: bool,
}

impl Observer {
    fn phase(&mut self, sb: &Scratch, run_pid: u32) -> Phase {
        let entries = ledger_len(sb, run_pid);
        let procs: Vec<Proc> = processes().into_iter().filter(|p| ours(p, sb, run_pid)).collect();
        let serving = procs.iter().filter(|p| p.comm == "java").filter_map(native_port).any(listening);
        let workload = procs.iter().any(|p| WORKLOADS.contains(&p.comm.as_str())) || sb.fio_at_work() || serving;
        let sandbox =
            procs.iter().any(|p| SANDBOXES.iter().any(|s| p.comm.starts_with(s)) || p.cmdline.contains(" agent"));
        if entries > self.entries && self.tearing_down {
            // The next run records its first resources.
            (self.tearing_down, self.sandbox_seen) = (false, false);
        }
        if entries < self.entries && self.sandbox_seen {
            self.tearing_down = true;
        }
        self.entries = entries;
        self.sandbox_seen |= sandbox || workload;
        if self.tearing_down {
            Phase::Teardown
        } else if workload {
            Phase::Workload
        } else if sandbox {
            Phase::Boot
        } else if entries > 0 {
            Phase::Provisioning
        } else {
            Phase::Start
        }
    }
}

/// Everything of isobench's still on the machine: mounts (also in other processes' mount
/// namespaces), loop devices, processes, containers, namespaces, links, run and state files.
fn leftovers(sb: &Scratch, run_pid: u32) -> Vec<String> {
    let prefix = sb.path().to_string_lossy().into_owned();
    let mut found = BTreeSet::new();
    for p in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        let Ok(info) = std::fs::read_to_string(p.path().join("mountinfo")) else { continue };
        for point in info.lines().filter_map(|l| l.split(' ').nth(4)).filter(|m| m.starts_with(&prefix)) {
            found.insert(format!("mount {point}"));
        }
    }
    found.extend(sb.loops_left().into_iter().map(|l| format!("loop {l}")));
    for p in processes().iter().filter(|p| ours(p, sb, run_pid)) {
        found.insert(format!("process {} {}", p.pid, p.cmdline.chars().take(120).collect::<String>()));
    }
    for (program, args) in [
        ("runc", vec!["--root", "/run/runc", "list", "-q"]),
        ("crun", vec!["list", "-q"]),
        ("runsc", vec!["--root", "/var/run/runsc", "list", "-quiet"]),
        ("podman", vec!["ps", "-a", "--format", "{{.Names}}"]),
    ] {
        let Some(path) = isobench::sys::find_program(program) else { continue };
        if let Ok(o) = Command::new(path).args(&args).stderr(Stdio::null()).output() {
            for id in String::from_utf8_lossy(&o.stdout).lines().filter(|l| l.contains("isobench-")) {
                found.insert(format!("{program} container {id}"));
            }
        }
    }
    found.extend(common::network_left());
    for dir in ["run", "state", "bin"] {
        if let Ok(d) = std::fs::read_dir(sb.workdir().join(dir)) {
            found.extend(d.filter_map(|e| e.ok()).map(|e| format!("{dir}/{}", e.file_name().to_string_lossy())));
        }
    }
    for (dir, start) in [("/run", "isobench-podman-"), ("/tmp", "isobench-cql-loaders-")] {
        if let Ok(d) = std::fs::read_dir(dir) {
            found.extend(
                d.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(start))
                    .map(|n| format!("{dir}/{n}")),
            );
        }
    }
    found.into_iter().collect()
}

struct Kill {
    scenario: &'static str,
    signal: Signal,
    target: Phase,
    at: Phase,
    after: Duration,
    before_cleanup: usize,
    after_cleanup: Vec<String>,
    exit: Option<i32>,
}

/// Starts the scenario, waits for the `occurrence`-th sighting of `target` (or the end of the
/// run), waits `jitter` more and sends `signal`; then checks what is left.
fn kill_once(sb: &Scratch, s: &Scenario, target: Phase, signal: Signal, occurrence: u64, jitter: Duration) -> Kill {
    let dir = sb.path().join("dir-volume");
    std::fs::create_dir_all(&dir).unwrap();
    let (mut child, _) = sb.start_suite(&s.suite.replace("@DIR@", &dir.to_string_lossy()), &[]);
    let pid = child.id();
    let started = Instant::now();
    let mut observer = Observer::default();
    let (mut seen, mut last) = (0, Phase::Start);
    let at = loop {
        if child.try_wait().unwrap().is_some() {
            break Phase::Ended;
        }
        let now = observer.phase(sb, pid);
        if started.elapsed() > s.patience {
            break now;
        }
        if now == target && last != target {
            seen += 1;
            if seen >= occurrence {
                std::thread::sleep(jitter);
                break observer.phase(sb, pid);
            }
        }
        last = now;
        std::thread::sleep(Duration::from_millis(5));
    };
    let after = started.elapsed();
    if at == Phase::Ended {
        eprintln!("chaos: the {} run ended before its {} could be caught", s.name, target.name());
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap_or(());
    let exit = wait_at_most(&mut child, Duration::from_secs(120));
    let before_cleanup = leftovers(sb, pid).len();
    if signal == Signal::SIGKILL {
        let o = sb.run(&["cleanup"]);
        assert!(o.status.success(), "cleanup after the {} run failed: {}", s.name, text(&o));
    }
    Kill { scenario: s.name, signal, target, at, after, before_cleanup, after_cleanup: leftovers(sb, pid), exit }
}

fn wait_at_most(child: &mut Child, limit: Duration) -> Option<i32> {
    let until = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if Instant::now() > until {
            let _ = child.kill();
            panic!("the signalled run did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn seed() -> u64 {
    std::env::var("ISOBENCH_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 % 1_000_000
    })
}

/// The table the long form prints, one row per kill.
fn table(kills: &[Kill]) -> String {
    let mut t = format!(
        "{:<4} {:<20} {:<8} {:<13} {:<13} {:>8} {:>6} {:>14} {:>13}\n",
        "#", "scenario", "signal", "aimed at", "killed in", "after", "exit", "left by run", "after cleanup"
    );
    for (i, k) in kills.iter().enumerate() {
        t += &format!(
            "{:<4} {:<20} {:<8} {:<13} {:<13} {:>7.2}s {:>6} {:>14} {:>13}\n",
            i + 1,
            k.scenario,
            k.signal.as_str(),
            k.target.name(),
            k.at.name(),
            k.after.as_secs_f64(),
            k.exit.map_or("signal".into(), |c| c.to_string()),
            k.before_cleanup,
            k.after_cleanup.len()
        );
    }
    let mut by_phase = std::collections::BTreeMap::new();
    for k in kills {
        *by_phase.entry(k.at.name()).or_insert(0) += 1;
    }
    t += &format!("kills by phase: {by_phase:?}\n");
    t
}

/// The checks every kill must pass: nothing left, and a run stopped by SIGINT or SIGTERM exits
/// non-zero on its own.
fn assert_clean_kills(kills: &[Kill]) {
    for (i, k) in kills.iter().enumerate() {
        assert!(
            k.after_cleanup.is_empty(),
            "kill {} ({}, {} in {}) left: {:#?}",
            i + 1,
            k.scenario,
            k.signal.as_str(),
            k.at.name(),
            k.after_cleanup
        );
        if k.signal != Signal::SIGKILL && k.at != Phase::Ended {
            assert!(k.exit.is_some_and(|c| c != 0), "kill {}: {} must end the run non-zero", i + 1, k.signal.as_str());
        }
    }
}

#[test]
fn runs_signalled_in_every_phase_leave_nothing_behind() {
    // It counts every container, mount and process of isobench's on the machine.
    let _alone = alone();
    let seed = seed();
    let kills_wanted: usize = std::env::var("ISOBENCH_CHAOS_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(0);
    eprintln!("chaos: seed {seed} (ISOBENCH_CHAOS_SEED={seed} repeats this schedule)");
    let mut rng = Rng(seed);
    let all = scenarios();
    for s in all.iter().filter(|s| s.unable.is_some()) {
        common::skip_part(s.name, s.unable.as_ref().unwrap());
    }
    let usable: Vec<&Scenario> = all.iter().filter(|s| s.unable.is_none()).collect();
    skip_if!(usable.is_empty(), "root", "no scenario can run here (see the parts skipped above)");
    // The short form: each scenario's phases in turn (two where a run is cheap, a slow one as
    // it boots), SIGINT and SIGTERM once each; the long form draws scenario, phase and signal
    // from the seed.
    let schedule: Vec<(&Scenario, Phase, Signal)> = if kills_wanted == 0 {
        let mut plan = Vec::new();
        for (i, s) in usable.iter().enumerate() {
            if s.patience > Duration::from_secs(60) {
                // A guest or a JVM, slow to reach its workload (the guests' second run: 20 s):
                // killed as it boots, here where the machine waits on it alone; tests/vm.rs
                // kills a guest in its workload beside other tests.
                plan.push((*s, Phase::Boot, Signal::SIGKILL));
                continue;
            }
            for j in 0..2 {
                plan.push((*s, Phase::TARGETS[(i + 2 * j) % 4], Signal::SIGKILL));
            }
        }
        plan.push((usable[0], Phase::Workload, Signal::SIGINT));
        plan.push((usable[usable.len().min(2) - 1], Phase::Boot, Signal::SIGTERM));
        plan
    } else {
        (0..kills_wanted)
            .map(|_| {
                let s = usable[rng.below(usable.len() as u64) as usize];
                let phase = Phase::TARGETS[rng.below(4) as usize];
                let signal = match rng.below(10) {
                    0 => Signal::SIGINT,
                    1 => Signal::SIGTERM,
                    _ => Signal::SIGKILL,
                };
                (s, phase, signal)
            })
            .collect()
    };
    let sb = Scratch::new();
    let mut kills = Vec::new();
    for (s, phase, signal) in schedule {
        let occurrence = if s.one_run { 1 } else { 1 + rng.below(2) };
        let jitter = Duration::from_millis(rng.below(phase.jitter_ms()));
        let k = kill_once(&sb, s, phase, signal, occurrence, jitter);
        eprintln!(
            "chaos: {} {} aimed at {} (#{occurrence}, +{:?}), caught in {} after {:.2} s; {} left before cleanup, {} after",
            k.scenario,
            signal.as_str(),
            phase.name(),
            jitter,
            k.at.name(),
            k.after.as_secs_f64(),
            k.before_cleanup,
            k.after_cleanup.len()
        );
        kills.push(k);
    }
    eprintln!("\n{}", table(&kills));
    assert_clean_kills(&kills);
    let caught: BTreeSet<Phase> = kills.iter().map(|k| k.at).collect();
    assert!(kills.len() >= 10 || kills_wanted > 0, "the short form kills at least 10 times");
    assert!(caught.len() >= 3, "kills landed in too few phases: {caught:?}\n{}", table(&kills));
}
