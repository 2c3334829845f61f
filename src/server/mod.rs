//! Databases under test. `isobench server start|stop|status cassandra` runs a node that outlives
//! the command (its state in `<workdir>/servers/`); suites start theirs inside the cell's
//! environment.

pub mod cassandra;
pub mod serve;
pub mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use self::cassandra::{Distribution, Node, NodeConfig, Start};
use crate::store::write_atomic;
use crate::suite::tree::{Fields, SuiteError};
use crate::workload::cql::Target;

/// How long a node may take to answer CQL (a cold JIT on a slow machine takes ~15 s).
pub const START_TIMEOUT: Duration = Duration::from_secs(180);
/// How long SIGTERM gets before SIGKILL (Cassandra drains in 6–10 s here).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(45);

pub struct StartOptions {
    pub data: Option<PathBuf>,
    pub heap: String,
    pub port: u16,
    pub version: String,
    pub quick_jit: bool,
}

fn state_file(workdir: &Path, port: u16) -> PathBuf {
    workdir.join("servers").join(format!("cassandra-{port}.json"))
}

fn check_kind(kind: &str) -> Result<()> {
    if kind != "cassandra" {
        bail!(
            "server kind \"{kind}\": isobench starts \"cassandra\"; name other databases as kind = \"external\" in a suite"
        );
    }
    Ok(())
}

/// `isobench server start cassandra`: fetch if needed, start detached, wait for CQL.
pub fn start(workdir: &Path, kind: &str, opts: &StartOptions) -> Result<Node> {
    check_kind(kind)?;
    let state = state_file(workdir, opts.port);
    if let Some(node) = load(&state)?
        && node.alive()
    {
        bail!(
            "a Cassandra isobench started is already running on port {} (pid {}); `isobench server stop cassandra --port {}` first",
            opts.port,
            node.pid,
            opts.port
        );
    }
    let dist = Distribution::fetch(&opts.version, &mut |m| eprintln!("isobench: {m}"))?;
    let data = opts.data.clone().unwrap_or_else(|| workdir.join(format!("cassandra-{}", opts.port)));
    let mut config = NodeConfig::local(&data, opts.port)?;
    config.heap = opts.heap.clone();
    config.quick_jit = opts.quick_jit;
    let node = Node::start(&dist, &config, Start { token: None, detached: true, timeout: START_TIMEOUT })?;
    std::fs::create_dir_all(state.parent().expect("servers dir"))?;
    write_atomic(&state, serde_json::to_string_pretty(&node)?.as_bytes())?;
    Ok(node)
}

/// `isobench server fetch cassandra`: the distribution, downloaded if it is not cached.
pub fn fetch(kind: &str, version: &str) -> Result<Distribution> {
    check_kind(kind)?;
    Distribution::fetch(version, &mut |m| eprintln!("isobench: {m}"))
}

fn load(state: &Path) -> Result<Option<Node>> {
    match std::fs::read_to_string(state) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("{} does not parse; remove it", state.display()))?,
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", state.display())),
    }
}

/// `isobench server stop cassandra`: the nodes on `port`, or all of them.
pub fn stop(workdir: &Path, kind: &str, port: Option<u16>) -> Result<Vec<(Node, Duration)>> {
    check_kind(kind)?;
    let mut stopped = Vec::new();
    for state in states(workdir, port)? {
        if let Some(mut node) = load(&state)? {
            let took = node.stop(STOP_TIMEOUT)?;
            if node.alive() {
                bail!("Cassandra (pid {}) is still running after SIGKILL", node.pid);
            }
            std::fs::remove_file(&state)?;
            stopped.push((node, took));
        }
    }
    Ok(stopped)
}

/// `isobench server status`: each recorded node, alive or not, and whether it answers CQL.
pub fn status(workdir: &Path) -> Result<Vec<(Node, Result<String>)>> {
    let mut out = Vec::new();
    for state in states(workdir, None)? {
        if let Some(node) = load(&state)? {
            let answer = if node.alive() {
                let login = node.config.auth.then_some(cassandra::DEFAULT_LOGIN);
                cassandra::cql_probe(&format!("{}:{}", node.config.address, node.config.native_port), login)
            } else {
                Err(anyhow::anyhow!("not running (pid {} is gone); `isobench server stop` forgets it", node.pid))
            };
            out.push((node, answer));
        }
    }
    Ok(out)
}

fn states(workdir: &Path, port: Option<u16>) -> Result<Vec<PathBuf>> {
    if let Some(p) = port {
        return Ok(vec![state_file(workdir, p)]);
    }
    let dir = workdir.join("servers");
    let mut out: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    Ok(out)
}

/// A suite's `[[server]]`: a Cassandra isobench runs inside each CQL cell's environment, or
/// nodes someone else runs.
#[derive(Clone, Debug)]
pub enum ServerSpec {
    Managed {
        version: String,
        heap: String,
        quick_jit: bool,
        start_timeout: Duration,
        jvm_args: Vec<String>,
        /// Clients log in as this role, which isobench makes (the password is never shown).
        login: Option<(String, String)>,
    },
    External(Target),
}

pub const KINDS: &[&str] = &["cassandra", "external"];

/// `user` and `password`: both or neither.
fn login(f: &mut Fields) -> Result<Option<(String, String)>, SuiteError> {
    match (f.str("user")?, f.str("password")?) {
        (Some(user), Some(password)) => Ok(Some((user, password))),
        (None, None) => Ok(None),
        (user, _) => {
            Err(f.error_at(if user.is_some() { "user" } else { "password" }, "give both user and password, or neither"))
        }
    }
}

impl ServerSpec {
    pub fn parse(f: &mut Fields) -> Result<ServerSpec, SuiteError> {
        let kind = f.required_str("kind")?;
        let spec = match kind.as_str() {
            "cassandra" => ServerSpec::Managed {
                version: f.str("version")?.unwrap_or_else(cassandra::default_version),
                heap: f.str("heap")?.unwrap_or_else(|| "1G".into()),
                quick_jit: f.bool("quick_jit")?.unwrap_or(false),
                start_timeout: f.duration("start_timeout")?.unwrap_or(START_TIMEOUT),
                jvm_args: f.str_list("jvm_args")?.unwrap_or_default(),
                login: login(f)?,
            },
            "external" => {
                let nodes = f.str_list("nodes")?.unwrap_or_default();
                if nodes.is_empty() {
                    return Err(f.error_at(
                        "nodes",
                        "an external server needs its nodes, e.g. nodes = [\"10.0.1.25\", \"10.0.1.26\"]",
                    ));
                }
                let port = f.uint("port")?.unwrap_or(9042);
                let port = u16::try_from(port).map_err(|_| f.error_at("port", "must be a TCP port (1-65535)"))?;
                let (user, password) = login(f)?.unzip();
                ServerSpec::External(Target { nodes, port, user, password })
            }
            other => {
                return Err(
                    f.error_at("kind", format!("unknown kind \"{other}\"; allowed kinds are: {}", KINDS.join(", ")))
                );
            }
        };
        f.finish()?;
        Ok(spec)
    }
}
