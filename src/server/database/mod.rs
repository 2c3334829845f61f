//! The databases isobench starts from Debian's packages inside a cell's environment: PostgreSQL,
//! MariaDB and Redis, each a file of its own behind `Engine`. The server runs with its data on the
//! volume under test, configured for the memory the suite gives it and durable as its users run
//! it; the agent starts it when the host says so, waits until it answers, and stops it cleanly.

pub mod in_pod;
mod mariadb;
mod postgres;
mod redis;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::syntax::{Fields, SuiteError};

/// How long a server may take to answer (PostgreSQL's start after a crash replays its WAL).
pub const START_TIMEOUT: Duration = Duration::from_secs(120);

/// A database server's program, as one of Debian's packages installs it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Postgres,
    Mariadb,
    Redis,
}

impl Kind {
    pub fn named(name: &str) -> Option<Kind> {
        match name {
            "postgres" => Some(Kind::Postgres),
            "mariadb" => Some(Kind::Mariadb),
            "redis" => Some(Kind::Redis),
            _ => None,
        }
    }

    /// The suite's name of the kind.
    pub fn key(self) -> &'static str {
        match self {
            Kind::Postgres => "postgres",
            Kind::Mariadb => "mariadb",
            Kind::Redis => "redis",
        }
    }

    pub fn engine(self) -> &'static dyn Engine {
        match self {
            Kind::Postgres => &postgres::Postgres,
            Kind::Mariadb => &mariadb::Mariadb,
            Kind::Redis => &redis::Redis,
        }
    }
}

/// What one database needs to run, be reached and be stopped; the rest is the same for all.
pub trait Engine: Sync {
    /// The name its users know it by ("PostgreSQL").
    fn name(&self) -> &'static str;
    /// The port it listens on by default (a sandbox with a network of its own uses it).
    fn default_port(&self) -> u16;
    /// The server program, or why it is not installed.
    fn program(&self) -> Result<PathBuf>;
    /// The names of its settings, as the server itself lists them (an unknown one is refused
    /// before any run).
    fn settings(&self) -> Result<Vec<String>>;
    /// Makes an empty data directory ready to start on (PostgreSQL's initdb).
    fn prepare(&self, s: &DbServe, data: &Path, scratch: &Path) -> Result<()>;
    /// The server's command line.
    fn command(&self, s: &DbServe, data: &Path, scratch: &Path) -> Result<Command>;
    /// Whether it answers a client's query now.
    fn answers(&self, s: &DbServe, scratch: &Path) -> bool;
    /// What its clients need made once it answers (a database, a user).
    fn for_clients(&self, _s: &DbServe, _scratch: &Path) -> Result<()> {
        Ok(())
    }
    /// The signal that stops it cleanly without waiting for clients (PostgreSQL's fast shutdown).
    fn stop_signal(&self) -> nix::sys::signal::Signal {
        nix::sys::signal::Signal::SIGTERM
    }
    /// Its version, as it says it.
    fn version(&self) -> String;
    /// Lines of its log that end a phase of its start, with the sample each phase gives.
    fn start_phases(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }
    /// What the suite's `durability` means for it, and the settings that make it so.
    fn durable(&self, durability: &str) -> Vec<(String, String)>;
    /// The durabilities it knows, the first its users' default.
    fn durabilities(&self) -> &'static [&'static str];
}

/// A `[[server]]` of kind postgres, mariadb or redis.
#[derive(Clone, Debug)]
pub struct Database {
    pub kind: Kind,
    /// The memory the server is configured for (its caches and buffers).
    pub memory: u64,
    /// How it makes writes durable (`durability`): PostgreSQL and MariaDB commit to disk at each
    /// transaction unless told otherwise, Redis appends each write and fsyncs as `appendfsync`.
    pub durability: String,
    /// The server's own settings, passed as its users would write them in its configuration.
    pub settings: Vec<(String, String)>,
    pub start_timeout: Duration,
    pub cost_per_hour: Option<f64>,
    /// The pod's image in a k8s environment (default `isobench-<kind>:<isobench's version>`).
    pub image: Option<String>,
}

impl Database {
    pub fn parse(kind: Kind, f: &mut Fields) -> Result<Database, SuiteError> {
        let engine = kind.engine();
        let memory = f.size("memory")?.unwrap_or(1 << 30);
        if memory < 64 << 20 {
            return Err(f.error_at("memory", "a database needs at least 64M to start; give e.g. memory = \"1G\""));
        }
        let durability = f.choice("durability", engine.durabilities())?.unwrap_or(engine.durabilities()[0].into());
        let settings = f.str_map("settings")?.unwrap_or_default();
        if !settings.is_empty() {
            let known = engine.settings().map_err(|e| f.error_at("settings", format!("{e:#}")))?;
            if let Some((name, _)) = settings.iter().find(|(name, _)| !known.iter().any(|k| k == name)) {
                let near = nearest(name, &known).map(|n| format!(" (did you mean {n}?)")).unwrap_or_default();
                return Err(f.error_at(
                    "settings",
                    format!(
                        "{} has no setting \"{name}\"{near}: name settings as its configuration file does, e.g. {}",
                        engine.name(),
                        example_setting(kind)
                    ),
                ));
            }
        }
        let cost_per_hour = f.float("cost_per_hour")?;
        if cost_per_hour.is_some_and(|c| c < 0.0) {
            return Err(f.error_at("cost_per_hour", "must not be negative"));
        }
        Ok(Database {
            kind,
            memory,
            durability,
            settings,
            start_timeout: f.timeout("start_timeout")?.unwrap_or(START_TIMEOUT),
            cost_per_hour,
            image: f.str("image")?,
        })
    }

    /// Its pod's image in a k8s environment: scripts/k8s-image.sh --database KIND makes the default.
    pub fn image(&self) -> String {
        self.image.clone().unwrap_or_else(|| format!("isobench-{}:{}", self.kind.key(), env!("CARGO_PKG_VERSION")))
    }

    /// The server as a run's setup names it.
    pub fn describe(&self, setup: &mut std::collections::BTreeMap<String, String>) {
        setup.insert("server.kind".into(), self.kind.key().into());
        setup.insert("server.memory".into(), figures::units::fio_size(self.memory));
        setup.insert("server.durability".into(), self.durability.clone());
        if !self.settings.is_empty() {
            let settings: Vec<String> = self.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            setup.insert("server.settings".into(), settings.join(", "));
        }
    }

    /// What the agent serves: this database listening on `listen:port`.
    pub fn serve(&self, listen: &str, port: u16, control_port: u16) -> DbServe {
        let mut settings = self.kind.engine().durable(&self.durability);
        settings.extend(self.settings.iter().cloned());
        DbServe {
            kind: self.kind,
            memory: self.memory,
            settings,
            listen: listen.into(),
            port,
            control_port,
            start_timeout: self.start_timeout,
        }
    }
}

fn example_setting(kind: Kind) -> &'static str {
    match kind {
        Kind::Postgres => "settings = { max_connections = 200, wal_buffers = \"16MB\" }",
        Kind::Mariadb => "settings = { innodb_log_file_size = \"256M\" }",
        Kind::Redis => "settings = { hz = 50 }",
    }
}

/// The known name closest to `name` by edits, if it is close.
fn nearest<'a>(name: &str, known: &'a [String]) -> Option<&'a str> {
    let distance = |a: &str, b: &str| {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut previous = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let here = row[j + 1];
                row[j + 1] = (row[j + 1] + 1).min(row[j] + 1).min(previous + usize::from(ca != *cb));
                previous = here;
            }
        }
        row[b.len()]
    };
    known
        .iter()
        .map(|k| (distance(name, k), k))
        .filter(|(d, _)| *d <= 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.as_str())
}

/// What the agent needs to run one database server inside the environment.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct DbServe {
    pub kind: Kind,
    pub memory: u64,
    /// Durability's settings, then the suite's own.
    pub settings: Vec<(String, String)>,
    /// The address the server and the control port listen on inside the environment.
    pub listen: String,
    pub port: u16,
    pub control_port: u16,
    pub start_timeout: Duration,
}

impl DbServe {
    /// The server's directory on the volume.
    pub fn directory(&self) -> &'static str {
        self.kind.key()
    }
}

/// A database server the agent started.
pub struct Running {
    pub pid: i32,
    pub ready_after: Duration,
    pub start_phases: Vec<(String, Duration)>,
    pub version: String,
    pub data: PathBuf,
    child: Child,
    log: PathBuf,
    kind: Kind,
}

impl Running {
    /// Prepares the data directory, starts the server and waits until it answers.
    pub fn start(s: &DbServe, data_dir: &Path, scratch: &Path) -> Result<Running> {
        let engine = s.kind.engine();
        let data = data_dir.join(s.directory());
        std::fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
        engine.prepare(s, &data, scratch)?;
        let log = scratch.join(format!("{}.log", s.directory()));
        let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = engine.command(s, &data, scratch)?;
        cmd.stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out).process_group(0);
        let started = Instant::now();
        let child = cmd.spawn().with_context(|| format!("cannot start {}", engine.name()))?;
        let mut running = Running {
            pid: child.id() as i32,
            ready_after: Duration::ZERO,
            start_phases: Vec::new(),
            version: engine.version(),
            data,
            child,
            log,
            kind: s.kind,
        };
        if let Err(e) = running.wait_ready(s, scratch, started) {
            let _ = running.stop(Duration::from_secs(10));
            return Err(e);
        }
        Ok(running)
    }

    fn wait_ready(&mut self, s: &DbServe, scratch: &Path, started: Instant) -> Result<()> {
        let engine = s.kind.engine();
        let what = format!("{} to answer on {}:{}", engine.name(), s.listen, s.port);
        let mut phases: Vec<(String, Duration)> = Vec::new();
        let waited = crate::sys::Wait::new(what, s.start_timeout).every(Duration::from_millis(20)).until(|| {
            if let Some(status) = self.child.try_wait()? {
                bail!("{} exited ({status}) before it answered", engine.name());
            }
            note_phases(engine, &self.log, &mut phases, started.elapsed());
            Ok(match engine.answers(s, scratch) {
                true => crate::sys::Check::Done(()),
                false => crate::sys::Check::NotYet(String::new()),
            })
        });
        if let Err(e) = waited {
            bail!("{e:#}. Its log ends:\n{}", self.log_tail());
        }
        self.ready_after = started.elapsed();
        // A line written between the last poll's read of the log and the answer (seen in a busy
        // fresh clone: PostgreSQL up in 96 ms, no phase recorded) was there when it answered.
        note_phases(engine, &self.log, &mut phases, self.ready_after);
        self.start_phases = phases;
        engine.for_clients(s, scratch)
    }

    /// The end of the server's log, for an error.
    pub fn log_tail(&self) -> String {
        crate::sys::tail_lines(&std::fs::read_to_string(&self.log).unwrap_or_default(), 15)
    }

    /// Whether the server still runs.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGKILL: the server failing mid-run.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Stops the server with the signal its users stop it with; SIGKILL after `timeout`.
    pub fn stop(&mut self, timeout: Duration) -> Result<Duration> {
        let began = Instant::now();
        let group = nix::unistd::Pid::from_raw(-self.pid);
        let _ = nix::sys::signal::kill(group, self.kind.engine().stop_signal());
        loop {
            if self.child.try_wait()?.is_some() {
                break;
            }
            if began.elapsed() > timeout {
                let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
                self.child.wait()?;
                bail!("{} did not stop within {timeout:?}; it was killed", self.kind.engine().name());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // What it started in its group (PostgreSQL's backends) goes with it.
        let _ = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGKILL);
        Ok(began.elapsed())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(-self.pid), nix::sys::signal::Signal::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// A program of a Debian package, found on PATH or where the package puts it.
fn installed(name: &str, also: &[&str], package: &str) -> Result<PathBuf> {
    if let Some(path) = crate::sys::find_program(name) {
        return Ok(path);
    }
    for dir in also {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return Ok(path);
        }
    }
    bail!("{name} is not installed: `apt-get install {package}` (scripts/setup.sh test installs it)")
}

/// Runs a short command of a server's tools to its end; its output, or an error with its words.
fn tool(cmd: &mut Command, what: &str) -> Result<String> {
    let options = crate::sys::Options { timeout: Some(Duration::from_secs(120)), ..Default::default() };
    let done = crate::sys::run(cmd, options).with_context(|| what.to_string())?;
    if !done.status.success() {
        bail!("{what} failed ({}): {}", done.status, done.summary());
    }
    Ok(done.stdout)
}

/// Each start phase whose line `log` now shows and `phases` lacks, as reached `at`.
fn note_phases(engine: &dyn Engine, log: &Path, phases: &mut Vec<(String, Duration)>, at: Duration) {
    let log = std::fs::read_to_string(log).unwrap_or_default();
    for (metric, line) in engine.start_phases() {
        if !phases.iter().any(|(m, _)| m == metric) && log.contains(line) {
            phases.push((metric.to_string(), at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_setting_is_named_with_the_nearest() {
        let known = vec!["shared_buffers".to_string(), "work_mem".into(), "max_connections".into()];
        assert_eq!(nearest("shared_bufers", &known), Some("shared_buffers"));
        assert_eq!(nearest("completely_else", &known), None);
    }

    #[test]
    fn durability_and_the_suites_settings_reach_the_server_in_that_order() {
        let db = Database {
            kind: Kind::Redis,
            memory: 1 << 30,
            durability: "always".into(),
            settings: vec![("appendfsync".into(), "no".into())],
            start_timeout: START_TIMEOUT,
            cost_per_hour: None,
            image: None,
        };
        let serve = db.serve("127.0.0.1", 6400, 6401);
        let fsync: Vec<&str> =
            serve.settings.iter().filter(|(k, _)| k == "appendfsync").map(|(_, v)| v.as_str()).collect();
        assert_eq!(fsync, ["always", "no"], "the suite's own setting comes last, so it wins");
    }

    #[test]
    fn a_phase_the_log_shows_is_noted_once_at_the_first_time_it_is_seen() {
        let log = tempfile::NamedTempFile::new().unwrap();
        let engine = Kind::Postgres.engine();
        let mut phases = Vec::new();
        note_phases(engine, log.path(), &mut phases, Duration::from_millis(10));
        assert!(phases.is_empty());
        std::fs::write(log.path(), "LOG:  listening on IPv4 address \"127.0.0.1\", port 5432\n").unwrap();
        note_phases(engine, log.path(), &mut phases, Duration::from_millis(96));
        note_phases(engine, log.path(), &mut phases, Duration::from_millis(200));
        assert_eq!(phases, [("server_start_listening".to_string(), Duration::from_millis(96))]);
    }
}
