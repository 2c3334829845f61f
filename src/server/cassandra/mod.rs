//! Apache Cassandra from Maven Central: `cassandra-all` and its runtime dependencies fetched with
//! `mvn dependency:copy-dependencies` into a cache, a minimal single-node configuration under the
//! data directory, the JVM flags Cassandra 5.0 needs on Java 17, readiness proven by the log line
//! and a real CQL query, and a clean stop (SIGTERM, SIGKILL after a timeout).

use std::fs;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use nix::sys::signal::Signal;

use crate::sys;

mod client;
mod config;
mod fetch;
pub mod gc;
mod jvm;

pub use client::{DEFAULT_LOGIN, cql_probe, create_role};
pub use config::{JOINING_RING, NodeConfig, QUICK_RING, RingSlot};
pub use fetch::{DEFAULT_VERSION, Distribution, cache_root, default_version, java_feature_version};
use jvm::{Cds, java_command};

/// The line Cassandra logs once it accepts CQL clients.
pub(super) const READY_LINE: &str = "Starting listening for CQL clients on";

/// What ends each phase of a start in the node's log, and the sample that gives its time from
/// spawning java: the JVM up (its first line), the system tables loaded (the version known),
/// the native transport listening. Each is when isobench first saw the line, polling every
/// 100 ms; `server_startup` ends at the first answered CQL query.
const START_PHASES: &[(&str, &str)] =
    &[("server_start_jvm", ""), ("server_start_storage", "Cassandra version:"), ("server_start_cql", READY_LINE)];

/// A running node.
#[derive(Debug, Serialize, Deserialize)]
pub struct Node {
    pub pid: i32,
    pub config: NodeConfig,
    pub distribution: Distribution,
    pub cds: Cds,
    /// From spawning java to the first successful CQL query.
    pub ready_after: Duration,
    /// Each of `START_PHASES` seen, with its time from spawning java.
    #[serde(default)]
    pub start_phases: Vec<(String, Duration)>,
    pub release_version: String,
    /// Which process `pid` was (the boot and its start time): a state file read after a reboot,
    /// or after the node died and its pid was given to another process, names no process.
    #[serde(default)]
    pub identity: Option<Identity>,
    #[serde(skip)]
    child: Option<Child>,
}

/// A process as the kernel knows it for as long as it lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub boot_id: String,
    /// Clock ticks from boot to the process's start (/proc/PID/stat, field 22).
    pub start_ticks: u64,
}

impl Identity {
    pub fn of(pid: i32) -> Option<Identity> {
        let start_ticks = sys::ProcStat::read(pid)?.start_ticks()?;
        let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?.trim().to_string();
        Some(Identity { boot_id, start_ticks })
    }
}

/// How to start: attached nodes die with isobench; detached ones (`isobench server start`)
/// outlive it until `isobench server stop`.
pub struct Start<'a> {
    pub token: Option<&'a str>,
    pub detached: bool,
    pub timeout: Duration,
    /// Make the class-data-sharing archive at a clean stop, when there is none (not where it
    /// would go with the container that made it).
    pub make_archive: bool,
}

impl Node {
    /// Starts a node and waits until it answers CQL; on failure nothing is left running and the
    /// error holds the end of the server's log.
    pub fn start(dist: &Distribution, config: &NodeConfig, how: Start) -> Result<Node> {
        let conf = config.write()?;
        let cds = Cds::for_distribution(dist, how.make_archive);
        let mut cmd = java_command(dist, config, &conf, &cds)?;
        let stdout = fs::File::create(config.stdout_log())
            .with_context(|| format!("creating {}", config.stdout_log().display()))?;
        cmd.stdin(Stdio::null()).stdout(stdout.try_clone()?).stderr(stdout);
        if how.detached {
            if let Some(token) = how.token {
                cmd.env(sys::TOKEN_VAR, token);
            }
            // A session of its own: Ctrl-C in the starting shell must not reach the server.
            // SAFETY: setsid is async-signal-safe and affects only the child.
            unsafe {
                cmd.pre_exec(|| {
                    libc::setsid();
                    Ok(())
                });
            }
        } else {
            sys::prepare(&mut cmd, how.token);
        }
        let started = Instant::now();
        let child =
            cmd.spawn().context("cannot start java: install Java 17 (`apt-get install openjdk-17-jre-headless`)")?;
        let pid = child.id() as i32;
        let mut node = Node {
            pid,
            config: config.clone(),
            distribution: dist.clone(),
            cds,
            ready_after: Duration::ZERO,
            start_phases: Vec::new(),
            release_version: String::new(),
            identity: Identity::of(pid),
            child: Some(child),
        };
        match node.wait_ready(started, how.timeout) {
            Ok(()) => {
                jvm::keep_row_overhead(dist, config, &read_text(&config.stdout_log()));
                Ok(node)
            }
            Err(e) => {
                let _ = node.stop(Duration::from_secs(10));
                // A JVM asked for its JIT map writes it at any exit (`sys::jit_map::JVM_FLAGS`).
                let _ = fs::remove_file(sys::jit_map::path_of(pid));
                Err(e)
            }
        }
    }

    fn wait_ready(&mut self, started: Instant, timeout: Duration) -> Result<()> {
        let address = format!("{}:{}", self.config.local_address(), self.config.native_port);
        let what = format!("Cassandra to accept CQL clients on {address}");
        // Polled often: the start's time is what a cell reports, and a start takes 3-6 s here.
        let waited = sys::Wait::new(what, timeout.saturating_sub(started.elapsed()))
            .every(Duration::from_millis(20))
            .until(|| {
                if let Some(child) = &mut self.child
                    && let Some(status) = child.try_wait()?
                {
                    bail!("Cassandra exited ({status}) before it accepted CQL clients. {}", self.failure_excerpt());
                }
                let log = read_text(&self.config.stdout_log());
                for (metric, line) in START_PHASES {
                    let seen = if line.is_empty() { !log.is_empty() } else { log.contains(line) };
                    if seen && !self.start_phases.iter().any(|(m, _)| m == metric) {
                        self.start_phases.push((metric.to_string(), started.elapsed()));
                    }
                }
                if log.contains(READY_LINE)
                    && let Ok(version) = cql_probe(
                        &address,
                        self.config.auth.then_some(DEFAULT_LOGIN),
                        self.config.tls.then(|| self.config.certificate()).as_deref(),
                    )
                {
                    return Ok(sys::Check::Done(version));
                }
                let phase = self.start_phases.last().map_or("no line of its log yet", |(m, _)| m.as_str());
                Ok(sys::Check::NotYet(format!("its start at {phase}")))
            });
        match waited {
            Ok(version) => {
                self.ready_after = started.elapsed();
                self.release_version = version;
                Ok(())
            }
            // Named with the whole start's limit (the suite's `start_timeout`), not what was left
            // of it when the wait began.
            Err(e) => match e.downcast::<sys::TimedOut>() {
                Ok(timed_out) => Err(anyhow::anyhow!(
                    "Cassandra did not accept CQL clients on {address} within {} s ({}). {}",
                    timeout.as_secs(),
                    timed_out.seen,
                    self.failure_excerpt()
                )),
                Err(e) => Err(e),
            },
        }
    }

    /// What a failed start says: the errors the server logged (a shutdown's last lines rarely
    /// name the cause), then the end of its log (stdout and stderr of the JVM included).
    pub fn failure_excerpt(&self) -> String {
        let log = read_text(&self.config.stdout_log());
        let errors: Vec<&str> = log
            .lines()
            .filter(|l| {
                ["ERROR", "Caused by", "Exception ", "Error"].iter().any(|p| l.starts_with(p))
                    // The exception under an ERROR line carries the cause ("Fatal configuration
                    // error" alone does not): "org.apache.….ConfigurationException: Unable to bind …".
                    || (!l.starts_with(char::is_whitespace) && l.contains("Exception: "))
                    // A JVM crash: its signal and where.
                    || l.starts_with("#  SIG")
                    || l.starts_with("# Problematic frame")
                    || l.starts_with("# J ")
                    || l.starts_with("# C ")
                    || l.starts_with("# V ")
            })
            .take(8)
            .collect();
        let mut out = String::new();
        if !errors.is_empty() {
            out += &format!("Its errors:\n{}\n", errors.join("\n"));
        }
        out + &format!("The end of its log ({}):\n{}", self.config.stdout_log().display(), sys::tail_lines(&log, 12))
    }

    pub fn alive(&self) -> bool {
        self.is_ours()
    }

    /// Whether `pid` is still this node: alive, the same process it was when it started (a
    /// state file from an earlier boot names a stranger), and a Cassandra (a state file from
    /// before identities were recorded).
    fn is_ours(&self) -> bool {
        crate::sys::pid_alive(self.pid)
            && self.identity.as_ref().is_none_or(|id| Identity::of(self.pid).as_ref() == Some(id))
            && fs::read(format!("/proc/{}/cmdline", self.pid))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("org.apache.cassandra.service.CassandraDaemon"))
    }

    /// SIGKILL at once, as a node fails; waits until it is gone.
    pub fn kill(&mut self) {
        if self.running() {
            signal(self.pid, Signal::SIGKILL);
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then SIGKILL after `timeout`; returns how long the stop took.
    pub fn stop(&mut self, timeout: Duration) -> Result<Duration> {
        let started = Instant::now();
        // Not a node that is gone already: its pid may be someone else's by now.
        if self.running() {
            signal(self.pid, Signal::SIGTERM);
        }
        let deadline = started + timeout;
        while self.running() {
            if Instant::now() > deadline {
                signal(self.pid, Signal::SIGKILL);
                // A process group of one: the JVM starts no children of its own.
                std::thread::sleep(Duration::from_millis(200));
                let _ = self.running();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if !self.running() {
            self.cds.settle(&self.distribution);
            // A detached node is init's child: give init a moment to reap it, so that "stopped"
            // also means "gone from the process table".
            let reaped_by = Instant::now() + Duration::from_secs(2);
            while Path::new(&format!("/proc/{}", self.pid)).exists() && Instant::now() < reaped_by {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(started.elapsed())
    }

    /// Reaps the child when it is ours; otherwise asks the kernel.
    fn running(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => self.is_ours(),
        }
    }
}

fn signal(pid: i32, signal: Signal) {
    if pid > 0 {
        // A race with the node's exit only yields ESRCH.
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
    }
}

pub(super) fn read_text(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state file naming a live process that is not the node (a pid reused after a reboot):
    /// `stop` must leave it alone.
    fn stale_node(pid: u32, identity: Option<Identity>) -> Node {
        let config = NodeConfig::local(Path::new("/nonexistent"), 9042).unwrap();
        let dist = Distribution { version: DEFAULT_VERSION.into(), home: "/nonexistent".into() };
        let mut node: Node = serde_json::from_value(serde_json::json!({
            "pid": pid, "config": config, "distribution": dist, "cds": "None",
            "ready_after": {"secs": 1, "nanos": 0}, "release_version": "5.0.9",
        }))
        .unwrap();
        node.identity = identity;
        node
    }

    #[test]
    fn a_stale_state_file_never_signals_the_process_that_has_its_pid_now() {
        let mut sleeper = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let pid = sleeper.id();
        let mut other_boot = Identity::of(pid as i32).unwrap();
        other_boot.boot_id = "an-earlier-boot".into();
        for node in [stale_node(pid, None), stale_node(pid, Some(other_boot))] {
            let mut node = node;
            assert!(!node.alive(), "sleep is not the node");
            node.stop(Duration::from_secs(1)).unwrap();
            node.kill();
            assert!(sleeper.try_wait().unwrap().is_none(), "the stranger was signalled");
        }
        sleeper.kill().unwrap();
        let _ = sleeper.wait();
    }
}
