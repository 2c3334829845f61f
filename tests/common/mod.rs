//! Helpers shared by the integration tests: a private work directory per test, the isobench
//! binary, and checks that nothing of a test's was left on the machine.
#![allow(dead_code)]

pub mod cassandra;
pub mod postgres;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Skips the test (returning early) when something it needs is missing: `skip_if!(unable())`
/// with an `Option<Missing>`, or `skip_if!(condition, "capability", "why {}", …)`. The skip is
/// seen and counted (see [`skip`]).
#[macro_export]
macro_rules! skip_if {
    ($missing:expr) => {
        if let Some(missing) = $missing {
            $crate::common::skip(&missing);
            return;
        }
    };
    ($cond:expr, $capability:expr, $($why:tt)+) => {
        if $cond {
            $crate::common::skip(&$crate::common::missing($capability, format!($($why)+)));
            return;
        }
    };
}

/// Something a test needs that this machine lacks: the capability, by the name
/// `tests/capabilities.txt` gives it, and how to get it.
#[derive(Clone, Debug)]
pub struct Missing {
    pub capability: &'static str,
    pub why: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

pub fn missing(capability: &'static str, why: impl Into<String>) -> Missing {
    Missing { capability, why: why.into() }
}

/// Root, for `what` (mounts, loop devices, containers …).
pub fn need_root(what: &str) -> Option<Missing> {
    (!is_root()).then(|| missing("root", format!("needs root ({what})")))
}

/// Mount points in this process's mount namespace whose path starts with `prefix`, in the
/// order they were mounted.
pub fn mounts_under(prefix: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(prefix))
        .map(str::to_string)
        .collect()
}

/// A program on PATH, from `package` (which scripts/setup.sh installs).
pub fn need_program(program: &'static str, package: &str) -> Option<Missing> {
    (!have(program))
        .then(|| missing(program, format!("{program} is not installed (scripts/setup.sh installs {package})")))
}

/// The test skips all it would check, for want of `missing`.
pub fn skip(missing: &Missing) {
    record(None, missing);
}

/// The test skips `part` of what it checks, for want of `missing`, and goes on with the rest.
pub fn skip_part(part: &str, missing: &Missing) {
    record(Some(part), missing);
}

/// A skip as the terminal and `make test`'s summary see it: a line written to the process's
/// standard error itself (the harness captures a passing test's `eprintln!`, not that), and a
/// line in $ISOBENCH_SKIP_LOG (`scripts/test.sh` sets it, sums the skips up and, with CI=true,
/// fails on those of a capability this machine kind must have).
fn record(part: Option<&str>, missing: &Missing) {
    use std::io::Write;
    let test = std::thread::current().name().unwrap_or("main").to_string();
    let name = format!("{}::{test}", env!("CARGO_CRATE_NAME"));
    let shown = match part {
        None => format!("SKIP {name}: {} [{}]\n", missing.why, missing.capability),
        Some(part) => format!("SKIP {name} ({part}): {} [{}]\n", missing.why, missing.capability),
    };
    let _ = std::io::stderr().write_all(shown.as_bytes());
    if let Some(log) = std::env::var_os("ISOBENCH_SKIP_LOG") {
        let kind = if part.is_some() { "part" } else { "test" };
        let line = format!("{kind}\t{name}\t{}\t{}\n", missing.capability, missing.why.replace(['\t', '\n'], " "));
        // One write of a short line to a file opened for appending: lines of tests running at
        // once do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(log) {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn have(program: &str) -> bool {
    isobench::sys::find_program(program).is_some()
}

/// A scratch area for one test: a work directory for isobench and a place for suites/results.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    /// Whether isobench's settle waits for the whole machine (idle CPUs, dirty pages written
    /// back): only where the test has it to itself (`alone()`); side by side, the other tests keep
    /// the CPUs busy and the pages dirty, and a sync would flush theirs.
    pub settle_machine: bool,
}

impl Scratch {
    pub fn new() -> Scratch {
        let base =
            std::env::var_os("ISOBENCH_TEST_TMP").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/var/tmp"));
        std::fs::create_dir_all(&base).unwrap();
        Scratch {
            dir: tempfile::Builder::new().prefix("isobench-test-").tempdir_in(base).unwrap(),
            settle_machine: false,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn workdir(&self) -> PathBuf {
        self.path().join("work")
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `isobench` with this sandbox's work directory.
    pub fn isobench(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_isobench"));
        c.env("ISOBENCH_WORKDIR", self.workdir());
        // Each test's runs go to a history of its own, never the user's.
        c.env(isobench::history::HISTORY_VAR, self.path().join("history.sqlite"));
        if !self.settle_machine {
            c.env(isobench::sys::SHARED_MACHINE_VAR, "1");
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.isobench().args(args).output().unwrap()
    }

    /// Writes `suite` to s.toml and runs it into a fresh `out/` (`out-2/` … when taken), with
    /// `extra` arguments.
    pub fn run_suite(&self, suite: &str, extra: &[&str]) -> (Output, PathBuf) {
        let (mut run, out) = self.suite_command(suite, extra);
        (run.output().unwrap(), out)
    }

    /// As `run_suite`, but returns at once with the run under way (its output discarded), to be
    /// caught in the act.
    pub fn start_suite(&self, suite: &str, extra: &[&str]) -> (std::process::Child, PathBuf) {
        let (mut run, out) = self.suite_command(suite, extra);
        (run.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap(), out)
    }

    fn suite_command(&self, suite: &str, extra: &[&str]) -> (Command, PathBuf) {
        let path = self.write("s.toml", suite);
        let out = (1..)
            .map(|i| self.path().join(if i == 1 { "out".to_string() } else { format!("out-{i}") }))
            .find(|p| !p.exists())
            .expect("a free name");
        let mut run = self.isobench();
        run.args(["run", path.to_str().unwrap(), "--out", out.to_str().unwrap()]).args(extra);
        (run, out)
    }

    /// A fio file in one of this sandbox's mounted volumes: fio at work where its process is out
    /// of sight (inside gVisor or a guest writing through 9p or virtio-fs).
    pub fn fio_at_work(&self) -> bool {
        self.mounts_left().iter().any(|m| {
            std::fs::read_dir(m)
                .is_ok_and(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("isobench.")))
        })
    }

    /// Mounts under this sandbox that are still there.
    pub fn mounts_left(&self) -> Vec<String> {
        mounts_under(&self.path().to_string_lossy())
    }

    /// Loop devices whose backing file is under this sandbox.
    pub fn loops_left(&self) -> Vec<String> {
        let out = Command::new("losetup").arg("-a").output().unwrap();
        let prefix = self.path().to_string_lossy().into_owned();
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(&prefix)).map(str::to_string).collect()
    }

    /// Every process's pid but this test's.
    fn pids() -> impl Iterator<Item = i32> {
        let me = std::process::id() as i32;
        std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(move |pid| *pid != me)
    }

    /// Processes whose command line points into this sandbox (runtimes and their sandboxes,
    /// QEMU, virtiofsd, fio, agents).
    pub fn processes(&self) -> Vec<String> {
        let prefix = self.path().to_string_lossy().into_owned();
        Self::pids()
            .filter_map(|pid| {
                let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
                let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
                cmd.contains(&prefix).then(|| format!("{pid}: {cmd}"))
            })
            .collect()
    }

    /// SIGKILLs a running `isobench run` (no teardown can run), says what it left, and runs
    /// `isobench cleanup`, which must succeed; its output.
    pub fn kill_then_cleanup(&self, mut run: std::process::Child) -> Output {
        let _left_by_design = killed_runs_lock(nix::fcntl::FlockArg::LockExclusive);
        run.kill().unwrap();
        run.wait().unwrap();
        eprintln!(
            "left by the killed run before cleanup: {} processes, {} mounts",
            self.processes().len(),
            self.mounts_left().len()
        );
        let o = self.run(&["cleanup"]);
        assert!(o.status.success(), "{}", text(&o));
        o
    }

    /// Nothing of this test's is left: no mount, loop device, process, run directory (with
    /// container state), or container that runc or runsc would list.
    pub fn assert_nothing_left(&self) {
        self.assert_clean();
        assert_eq!(self.processes(), Vec::<String>::new(), "processes left behind");
        let run = self.workdir().join("run");
        let left: Vec<_> =
            std::fs::read_dir(&run).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
        assert!(left.is_empty(), "run directories left: {left:?}");
        // The runtimes' roots are shared with the tests running at the same time: this test's
        // containers are those whose bundle is in its sandbox. A stopping one may take a moment
        // (podman's go when their runs end); a leftover stays.
        let prefix = self.path().to_string_lossy().into_owned();
        for (program, root) in [("runc", "/run/runc"), ("runsc", "/var/run/runsc")] {
            if let Some(path) = isobench::env::oci::Runtime::resolve(program).path {
                let listed = || {
                    let out = Command::new(&path).args(["--root", root, "list"]).output().unwrap();
                    let listing = String::from_utf8_lossy(&out.stdout).into_owned();
                    (listing.lines().filter(|l| l.contains(&prefix)).count(), listing)
                };
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
                let mut last = listed();
                while last.0 > 0 && std::time::Instant::now() < deadline {
                    std::thread::sleep(std::time::Duration::from_secs(1));
                    last = listed();
                }
                assert_eq!(last.0, 0, "{program} lists a container of this test's:\n{}", last.1);
            }
        }
    }

    /// Asserts nothing of this test's remains mounted or attached.
    pub fn assert_clean(&self) {
        assert_eq!(self.mounts_left(), Vec::<String>::new(), "mounts left behind");
        assert_eq!(self.loops_left(), Vec::<String>::new(), "loop devices left behind");
        let _no_run_killed_meanwhile = killed_runs_lock(nix::fcntl::FlockArg::LockShared);
        assert_eq!(network_left(), Vec::<String>::new(), "network namespaces or links left behind");
    }
}

/// A lock the test binaries share, as they run side by side: a killed run's network namespaces
/// and links are left behind by design until its cleanup, so a test holds it exclusively from
/// the kill to the end of the cleanup, and one that looks for network objects left behind (by
/// any run, since their names give only a pid) holds it shared. Without it a test once counted
/// another file's killed run's namespace as its own leftover.
fn killed_runs_lock(how: nix::fcntl::FlockArg) -> nix::fcntl::Flock<std::fs::File> {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("killed-runs.lock");
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).unwrap();
    nix::fcntl::Flock::lock(file, how).unwrap_or_else(|(_, e)| panic!("locking {}: {e}", path.display()))
}

/// Network namespaces and host links of the kinds isobench makes whose isobench has exited: a
/// live one's belong to a test running at the same time, a dead one's are left behind.
pub fn network_left() -> Vec<String> {
    network_objects(false)
}

/// Network namespaces and host links of the kinds isobench makes ("isobench-<pid>-…" namespaces,
/// "ib<pid>n<id>" veth ends and taps, in hex), those of live isobench processes only if `live`.
pub fn network_objects(live: bool) -> Vec<String> {
    let dead = |pid: Option<u32>| live || pid.is_none_or(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists());
    let netns = Command::new("ip").args(["netns", "list"]).output().map(|o| o.stdout).unwrap_or_default();
    let links = Command::new("ip").args(["-o", "link", "show"]).output().map(|o| o.stdout).unwrap_or_default();
    let is_ours = |name: &str| {
        name.strip_prefix("ib").and_then(|rest| rest.split_once('n')).is_some_and(|(pid, id)| {
            !pid.is_empty()
                && pid.chars().all(|c| c.is_ascii_hexdigit())
                && !id.is_empty()
                && id.chars().all(|c| c.is_ascii_hexdigit())
        })
    };
    let mut left: Vec<String> = String::from_utf8_lossy(&netns)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("isobench-"))
        .filter(|n| dead(n.split('-').nth(1).and_then(|pid| pid.parse().ok())))
        .map(|n| format!("netns {n}"))
        .collect();
    left.extend(
        String::from_utf8_lossy(&links)
            .lines()
            .filter_map(|l| l.split(": ").nth(1))
            .map(|n| n.split('@').next().unwrap_or(n))
            .filter(|n| is_ours(n))
            .filter(|n| dead(n[2..].split_once('n').and_then(|(pid, _)| u32::from_str_radix(pid, 16).ok())))
            .map(|n| format!("link {n}")),
    );
    if !live {
        // What runs killed before the tests began left (scripts/test.sh lists it).
        let before = std::env::var_os("ISOBENCH_TESTS_NETWORK_BEFORE")
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default();
        left.retain(|object| !before.lines().any(|b| b == object));
    }
    left
}

/// Held by tests of one file that run one at a time: those that make network namespaces or
/// start a cluster.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Held by a test that needs the machine to itself: it measures with the cores, or counts
/// everything of isobench's on it. `scripts/test.sh` runs such tests first, when no other test
/// runs (the rest run side by side); within their file this is [`serial`].
pub fn alone() -> std::sync::MutexGuard<'static, ()> {
    serial()
}

/// The command's output, after asserting that it succeeded.
/// `isobench run` that completed with failed runs: exit code 3, and each of `cells` named on
/// stderr with its reason; what it said.
pub fn runs_failed(out: &Output, cells: &[&str]) -> String {
    let all = text(out);
    assert_eq!(out.status.code(), Some(3), "a run that failed makes `isobench run` exit 3: {all}");
    let said = String::from_utf8_lossy(&out.stderr);
    for cell in cells {
        assert!(said.lines().any(|l| l.trim_start().starts_with(&format!("{cell} #"))), "{cell} not named: {said}");
    }
    all
}

pub fn ok(out: &Output) -> String {
    let all = text(out);
    assert!(out.status.success(), "{all}");
    all
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Repetition `rep` of `cell` in a result set, as stored.
pub fn run_record(out: &Path, cell: &str, rep: u32) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join(format!("runs/{cell}/{rep}.json"))).unwrap()).unwrap()
}

/// The rows of a result set's samples.csv, split on commas (no quoted fields in our tests).
pub fn samples(dir: &Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join("samples.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("cell,env,volume,workload,params,rep,metric,value,unit"));
    lines.map(|l| l.split(',').map(str::to_string).collect()).collect()
}

/// A copy of the page `html` (written as `name` in the scratch directory) that measures itself
/// when loaded: what [`fit`] reads from its DOM.
pub fn self_measuring(sb: &Scratch, html: &Path, name: &str) -> PathBuf {
    let page = std::fs::read_to_string(html).unwrap().replace(
        "</body>",
        "<script>document.body.dataset.fit = document.documentElement.scrollWidth + '/' + window.innerWidth;</script></body>",
    );
    sb.write(name, &page)
}

/// How wide a self-measuring page's content was against its window: (content, window) px.
pub fn fit(dom: &str) -> Option<(u32, u32)> {
    let c = regex::Regex::new(r#"data-fit="(\d+)/(\d+)""#).unwrap().captures(dom)?;
    Some((c[1].parse().ok()?, c[2].parse().ok()?))
}

/// A headless browser, if one is installed.
pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"].iter().find_map(|b| isobench::sys::find_program(b))
}

/// Loads `page` in headless Chromium, in a window `width` px wide; returns the DOM after load and
/// the console's error lines.
pub fn load_in_chromium(browser: &Path, page: &Path, width: u32) -> (String, Vec<String>) {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(browser)
        .args(isobench::report::html::headless_args(profile.path()))
        .arg(format!("--window-size={width},900"))
        .args(["--enable-logging=stderr", "--v=0", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors = stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught") || l.contains("Failed to load resource"))
        .map(str::to_string)
        .collect();
    (String::from_utf8_lossy(&out.stdout).into_owned(), errors)
}

/// The CPUs a process or thread of a running `isobench run` was allowed (`Cpus_allowed_list`, as
/// the kernel enforces it) when sampled: its sandboxes' processes (those carrying one of its
/// tokens, or naming the test's directory) by their program's name ("… (preflight)" for an
/// environment's first container), and its own threads by theirs.
#[derive(Clone, Debug)]
pub struct CpusSeen {
    /// When, as `isobench::store::utc_now` writes a run's start and end.
    pub at: String,
    pub name: String,
    pub cpus: String,
}

/// The CPUs each name was seen on, by name.
pub type CpusByName = std::collections::BTreeMap<String, std::collections::BTreeSet<String>>;

/// The CPUs each name was seen on during the run `record`.
pub fn cpus_during(seen: &[CpusSeen], record: &serde_json::Value) -> CpusByName {
    cpus_between(seen, record["started"].as_str().unwrap(), record["ended"].as_str().unwrap())
}

/// The same over the measured phase of a served cell's run (`load.measured`).
pub fn cpus_while_measured(seen: &[CpusSeen], record: &serde_json::Value) -> CpusByName {
    let window = record["setup"]["load.measured"].as_str().expect("the run recorded its measured phase");
    let (from, to) = window.split_once(" to ").expect("\"FROM to TO\"");
    cpus_between(seen, from, to)
}

fn cpus_between(seen: &[CpusSeen], from: &str, to: &str) -> CpusByName {
    let mut during = CpusByName::new();
    for s in seen.iter().filter(|s| from <= s.at.as_str() && s.at.as_str() <= to) {
        during.entry(s.name.clone()).or_default().insert(s.cpus.clone());
    }
    during
}

impl Scratch {
    /// As `run_suite`, while sampling the CPUs its processes were allowed every 100 ms.
    pub fn run_suite_watching_cpus(&self, suite: &str, extra: &[&str]) -> (Output, PathBuf, Vec<CpusSeen>) {
        use std::sync::atomic::{AtomicBool, Ordering};
        let (mut run, out) = self.suite_command(suite, extra);
        let child = run.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
        let (pid, done) = (child.id(), AtomicBool::new(false));
        let mut seen = Vec::new();
        let output = std::thread::scope(|scope| {
            let waiting = scope.spawn(|| {
                let output = child.wait_with_output().unwrap();
                done.store(true, Ordering::Relaxed);
                output
            });
            while !done.load(Ordering::Relaxed) {
                sample_cpus(pid, self.path(), &mut seen);
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            waiting.join().unwrap()
        });
        (output, out, seen)
    }
}

fn sample_cpus(isobench: u32, scratch: &Path, seen: &mut Vec<CpusSeen>) {
    let at = isobench::store::utc_now();
    let allowed = |status: &Path| {
        let text = std::fs::read_to_string(status).ok()?;
        Some(text.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim().to_string())
    };
    let mut record = |task_dirs: &Path, name: &dyn Fn(&Path) -> Option<String>| {
        for task in std::fs::read_dir(task_dirs).into_iter().flatten().flatten() {
            if let (Some(name), Some(cpus)) = (name(&task.path()), allowed(&task.path().join("status"))) {
                seen.push(CpusSeen { at: at.clone(), name, cpus });
            }
        }
    };
    // isobench's own threads, by the names they were given.
    let comm = |task: &Path| std::fs::read_to_string(task.join("comm")).ok().map(|c| c.trim().to_string());
    record(Path::new(&format!("/proc/{isobench}/task")), &comm);
    let token = format!("{}={isobench}-", isobench::sys::TOKEN_VAR);
    let mut pids = isobench::sys::pids_whose_env(|kv| kv.starts_with(token.as_bytes()));
    let scratch = scratch.to_string_lossy().into_owned();
    let cmdline = |pid: i32| {
        String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default()).into_owned()
    };
    // gVisor's sandbox keeps no environment of isobench's, but its command line names the run's state.
    pids.extend(Scratch::pids().filter(|pid| cmdline(*pid).contains(&scratch)));
    pids.sort_unstable();
    pids.dedup();
    for pid in pids {
        let cmdline = cmdline(pid);
        let program = cmdline.split('\0').next().unwrap_or_default().rsplit('/').next().unwrap_or_default().to_string();
        // An environment's first container (`preflight`), which runs nothing of a cell's.
        let name = if cmdline.contains("-preflight-") { format!("{program} (preflight)") } else { program };
        record(Path::new(&format!("/proc/{pid}/task")), &|_| Some(name.clone()));
    }
}
