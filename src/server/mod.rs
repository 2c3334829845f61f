//! Databases under test. `isobench server start|stop|status cassandra` runs a node that outlives
//! the command (its state in `<workdir>/servers/`); suites start theirs inside the cell's
//! environment: Cassandra, or PostgreSQL, MariaDB and Redis (`database`).

pub mod cassandra;
pub mod cluster;
pub mod database;
pub mod in_pod;
pub mod serve;
pub mod stats;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use serde::{Deserialize, Serialize};

use self::cassandra::{Distribution, Node, NodeConfig, Start};
use self::cluster::Layout;
use crate::ledger::{Ledger, Resource};
use crate::syntax::{Fields, SuiteError};
use crate::sys::write_atomic;
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
    pub nodes: usize,
    pub tls: bool,
}

fn state_file(workdir: &Path, port: u16) -> PathBuf {
    workdir.join("servers").join(format!("cassandra-{port}.json"))
}

fn check_kind(kind: &str) -> Result<()> {
    if kind != "cassandra" {
        bail!(
            "server kind \"{kind}\": `isobench server` starts \"cassandra\"; a suite's [[server]] starts postgres, mariadb and redis inside its cells' environments"
        );
    }
    Ok(())
}

/// What `isobench server start` leaves for `stop` and `status`: the nodes it started (one node
/// is a cluster of one) and how long they took to form a ring.
#[derive(Debug, Serialize, Deserialize)]
pub struct Cluster {
    pub nodes: Vec<Node>,
    #[serde(default)]
    pub ring_after: Option<Duration>,
}

/// `isobench server start cassandra`: fetch if needed, start the nodes detached one after
/// another, wait for CQL (and for a ring of them all). While it starts, the nodes are in a
/// ledger, so a start that is killed leaves nothing after `isobench cleanup`.
pub fn start(workdir: &Path, kind: &str, opts: &StartOptions) -> Result<Cluster> {
    check_kind(kind)?;
    if opts.nodes == 0 || opts.nodes > 254 {
        bail!("--nodes {}: a cluster has 1 to 254 nodes (one per address 127.0.0.k)", opts.nodes);
    }
    let state = state_file(workdir, opts.port);
    if let Some(cluster) = load(&state)?
        && cluster.nodes.iter().any(Node::alive)
    {
        bail!(
            "a Cassandra isobench started is already running on port {} (pid {}); `isobench server stop cassandra --port {}` first",
            opts.port,
            cluster.nodes[0].pid,
            opts.port
        );
    }
    if opts.tls && opts.nodes > 1 {
        bail!(
            "--tls with --nodes {}: client TLS is for a single node today (each node would have its own certificate)",
            opts.nodes
        );
    }
    let available = crate::facts::meminfo_kib("MemAvailable").map(|k| k * 1024);
    cluster::check_memory(opts.nodes, &opts.heap, available).map_err(|e| anyhow::anyhow!("{e}"))?;
    let dist = Distribution::fetch(&opts.version, &mut |m| eprintln!("isobench: {m}"))?;
    let data = opts.data.clone().unwrap_or_else(|| workdir.join(format!("cassandra-{}", opts.port)));
    let mut base = NodeConfig::local(&data, opts.port)?;
    base.heap = opts.heap.clone();
    base.quick_jit = opts.quick_jit;
    base.tls = opts.tls;
    let layout = if opts.nodes > 1 {
        cluster::has_nodetool(&dist)?;
        Some(Layout::new(opts.nodes, Some(opts.port))?)
    } else {
        None
    };
    let configs = match &layout {
        Some(layout) => (0..opts.nodes).map(|k| layout.node(k, &cluster::node_data(&data, k), &base)).collect(),
        None => vec![base],
    };
    let ledger = Ledger::open(workdir)?;
    let token = ledger.new_process_token();
    ledger.record(Resource::Processes { token: token.clone() })?;
    let started = started_cluster(&dist, &configs, layout.as_ref(), &token);
    let cluster = match started {
        Ok(cluster) => cluster,
        Err(e) => {
            ledger.close()?;
            return Err(e);
        }
    };
    std::fs::create_dir_all(state.parent().expect("servers dir"))?;
    write_atomic(&state, serde_json::to_string_pretty(&cluster)?.as_bytes())?;
    // From here on the nodes are the server state's to stop, not the ledger's.
    ledger.forget()?;
    Ok(cluster)
}

fn started_cluster(
    dist: &Distribution,
    configs: &[NodeConfig],
    layout: Option<&Layout>,
    token: &str,
) -> Result<Cluster> {
    let began = std::time::Instant::now();
    let mut nodes = Vec::new();
    for config in configs {
        if configs.len() > 1 {
            eprintln!("isobench: starting node {} of {} on {}", nodes.len() + 1, configs.len(), config.address);
        }
        nodes.push(Node::start(
            dist,
            config,
            Start { token: Some(token), detached: true, timeout: START_TIMEOUT, make_archive: true },
        )?);
    }
    let ring_after = match layout {
        Some(layout) => {
            let status = |k: usize| cluster::nodetool_status(dist, layout.jmx_ports[k]);
            cluster::wait_ring(&layout.addresses, &status, START_TIMEOUT)?;
            Some(began.elapsed())
        }
        None => None,
    };
    Ok(Cluster { nodes, ring_after })
}

/// `isobench server fetch cassandra`: the distribution, downloaded if it is not cached.
pub fn fetch(kind: &str, version: &str) -> Result<Distribution> {
    check_kind(kind)?;
    Distribution::fetch(version, &mut |m| eprintln!("isobench: {m}"))
}

fn load(state: &Path) -> Result<Option<Cluster>> {
    /// A state file from before clusters held one node.
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Recorded {
        Cluster(Cluster),
        Node(Box<Node>),
    }
    match std::fs::read_to_string(state) {
        Ok(text) => {
            let recorded = serde_json::from_str(&text)
                .with_context(|| format!("{} does not parse; remove it", state.display()))?;
            Ok(Some(match recorded {
                Recorded::Cluster(c) => c,
                Recorded::Node(node) => Cluster { nodes: vec![*node], ring_after: None },
            }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", state.display())),
    }
}

/// `isobench server stop cassandra`: the nodes on `port`, or all of them; a cluster's nodes stop
/// together.
pub fn stop(workdir: &Path, kind: &str, port: Option<u16>) -> Result<Vec<(Node, Duration)>> {
    check_kind(kind)?;
    let mut stopped = Vec::new();
    for state in states(workdir, port)? {
        let Some(cluster) = load(&state)? else { continue };
        let results: Vec<Result<(Node, Duration)>> = std::thread::scope(|scope| {
            let stops: Vec<_> = cluster
                .nodes
                .into_iter()
                .map(|mut node| {
                    scope.spawn(move || {
                        let took = node.stop(STOP_TIMEOUT)?;
                        if node.alive() {
                            bail!("Cassandra (pid {}) is still running after SIGKILL", node.pid);
                        }
                        Ok((node, took))
                    })
                })
                .collect();
            stops.into_iter().map(|s| s.join().unwrap_or_else(|_| bail!("stopping a node panicked"))).collect()
        });
        for result in results {
            stopped.push(result?);
        }
        std::fs::remove_file(&state)?;
    }
    Ok(stopped)
}

/// `isobench server status`: each recorded node, alive or not, and whether it answers CQL.
pub fn status(workdir: &Path) -> Result<Vec<(Node, Result<String>)>> {
    let mut out = Vec::new();
    for state in states(workdir, None)? {
        for node in load(&state)?.map(|c| c.nodes).unwrap_or_default() {
            let answer = if node.alive() {
                let login = node.config.auth.then_some(cassandra::DEFAULT_LOGIN);
                let trust = node.config.tls.then(|| node.config.certificate());
                cassandra::cql_probe(
                    &format!("{}:{}", node.config.address, node.config.native_port),
                    login,
                    trust.as_deref(),
                )
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

/// A suite's `[[server]]`: Cassandra that isobench runs inside each CQL cell's environment, nodes
/// someone else runs, or one of the databases of Debian's packages.
#[derive(Clone, Debug)]
pub enum ServerSpec {
    Managed(Managed),
    External(External),
    /// PostgreSQL, MariaDB or Redis, started inside each served cell's environment.
    Database(database::Database),
}

/// Nodes someone else runs: addresses, or, in a k8s environment, the pods of a database an
/// operator made (its Service and a label selector).
#[derive(Clone, Debug)]
pub struct External {
    pub target: Target,
    pub pods: Option<Pods>,
    /// A fault: one of `pods` deleted mid-run.
    pub kill: Option<Kill>,
}

/// A database's pods in the k8s environment's namespace.
#[derive(Clone, Debug)]
pub struct Pods {
    /// The Service the load goes through (its name in the cluster's DNS); the pods' own
    /// addresses when none is named.
    pub service: Option<String>,
    /// The pods, as `kubectl get pods -l` selects them (`app=cassandra,dc=dc1`).
    pub selector: String,
}

/// A managed server: one node, or a ring of `nodes`, each in a sandbox of the cell's
/// environment with its data on the cell's volume.
#[derive(Clone, Debug)]
pub struct Managed {
    pub version: String,
    pub heap: String,
    pub quick_jit: bool,
    pub start_timeout: Duration,
    pub jvm_args: Vec<String>,
    /// Clients log in as this role, which isobench makes (the password is never shown).
    pub login: Option<(String, String)>,
    pub nodes: usize,
    /// What an hour of one node costs; the cell's cost adds `nodes` of them to its environment's.
    pub cost_per_hour: Option<f64>,
    pub kill: Option<Kill>,
    /// Clients speak TLS (`client_encryption_options`, a key made by each node).
    pub tls: bool,
    /// The nodes' image in a k8s environment (default `isobench-cassandra:VERSION`).
    pub image: Option<String>,
    /// Where the CPU is sampled by part, the JVM records its own samples of its Java threads
    /// (`sys::jfr`), which name the methods its interpreter ran. Off by default: the recorder
    /// slowed the demo's read by a fifth (docs/statistics.md).
    pub java_samples: bool,
}

/// A fault: node `node` (from 1) is killed `after` the measured phase began.
#[derive(Clone, Debug)]
pub struct Kill {
    pub node: usize,
    pub after: Duration,
    pub what: Lost,
}

impl Kill {
    /// Whether the fault takes away a whole machine (`kill = "machine"`), not a pod.
    pub fn stops_machine(&self) -> bool {
        matches!(self.what, Lost::Machine { .. })
    }
}

/// What a fault takes away: the database's process or pod (`kill = "pod"`), or in a k8s
/// environment the whole machine that runs it (`kill = "machine"`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lost {
    Pod,
    /// The Kubernetes node, through the env's `machine_stop`; started again `down` after the
    /// stop, or once the API server marks it NotReady when `down` is None.
    Machine {
        down: Option<Duration>,
    },
}

pub const KINDS: &[&str] = &["cassandra", "postgres", "mariadb", "redis", "external"];

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

/// `kill_node` and `kill_after`: both or neither; the node one of `nodes`; `kill` and
/// `machine_down` only with them, `machine_down` only for `kill = "machine"`.
fn fault(f: &mut Fields, nodes: usize) -> Result<Option<Kill>, SuiteError> {
    let kill = f.choice("kill", &["pod", "machine"])?;
    let what = match (kill.as_deref(), f.duration("machine_down")?) {
        (Some("machine"), down) => Lost::Machine { down },
        (_, None) => Lost::Pod,
        (_, Some(_)) => {
            return Err(f.error_at("machine_down", "how long a lost machine stays down: only with kill = \"machine\""));
        }
    };
    match (f.uint("kill_node")?, f.duration("kill_after")?) {
        (Some(node), Some(after)) if node >= 1 && node as usize <= nodes => {
            Ok(Some(Kill { node: node as usize, after, what }))
        }
        (Some(node), Some(_)) => {
            Err(f.error_at("kill_node", format!("node {node} does not exist: nodes are 1 to {nodes}")))
        }
        (None, None) => match kill {
            None => Ok(None),
            Some(kill) => Err(f.error_at(
                "kill",
                format!("kill = \"{kill}\" says what a fault takes away: give the fault too, kill_node = 2, kill_after = \"20s\""),
            )),
        },
        (node, _) => Err(f.error_at(
            if node.is_some() { "kill_node" } else { "kill_after" },
            "a fault needs both: kill_node = 3, kill_after = \"20s\" (from the start of the measured phase)",
        )),
    }
}

impl Managed {
    /// This server with the node count a workload asks for (its `nodes`), or why it cannot be.
    pub fn with_nodes(&self, nodes: Option<usize>) -> Result<Managed, String> {
        let Some(nodes) = nodes else { return Ok(self.clone()) };
        if let Some(kill) = self.kill.as_ref().filter(|k| k.node > nodes) {
            return Err(format!("the server's kill_node = {} does not exist in a cluster of {nodes}", kill.node));
        }
        Ok(Managed { nodes, ..self.clone() })
    }

    fn parse(f: &mut Fields) -> Result<Managed, SuiteError> {
        let nodes = f.count("nodes")?.unwrap_or(1) as usize;
        if nodes > 254 {
            return Err(f.error_at("nodes", "a managed cluster has 1 to 254 nodes (one per address 127.0.0.k)"));
        }
        let cost_per_hour = f.float("cost_per_hour")?;
        if cost_per_hour.is_some_and(|c| c < 0.0) {
            return Err(f.error_at("cost_per_hour", "must not be negative"));
        }
        let kill = fault(f, nodes)?;
        let heap = f.str("heap")?.unwrap_or_else(|| "1G".into());
        figures::units::parse_size(&heap).map_err(|e| f.error_at("heap", e))?;
        Ok(Managed {
            version: f.str("version")?.unwrap_or_else(cassandra::default_version),
            heap,
            quick_jit: f.bool("quick_jit")?.unwrap_or(false),
            start_timeout: f.timeout("start_timeout")?.unwrap_or(START_TIMEOUT),
            jvm_args: f.str_list("jvm_args")?.unwrap_or_default(),
            login: login(f)?,
            nodes,
            cost_per_hour,
            kill,
            tls: f.bool("tls")?.unwrap_or(false),
            image: f.str("image")?,
            java_samples: f.bool("java_samples")?.unwrap_or(false),
        })
    }
}

impl ServerSpec {
    /// Its kind, as the suite names it.
    pub fn kind(&self) -> &'static str {
        match self {
            ServerSpec::Managed(_) => "cassandra",
            ServerSpec::External(_) => "external",
            ServerSpec::Database(db) => db.kind.key(),
        }
    }

    pub fn parse(f: &mut Fields) -> Result<ServerSpec, SuiteError> {
        let kind = f.required_str("kind")?;
        let spec = match kind.as_str() {
            "cassandra" => ServerSpec::Managed(Managed::parse(f)?),
            name if database::Kind::named(name).is_some() => {
                ServerSpec::Database(database::Database::parse(database::Kind::named(name).expect("named"), f)?)
            }
            "external" => {
                let nodes = f.str_list("nodes")?.unwrap_or_default();
                let service = f.str("service")?;
                let selector = f.str("selector")?;
                let pods = match (service, selector) {
                    (service, Some(selector)) => Some(Pods { service, selector }),
                    (Some(_), None) => {
                        return Err(f.error_at(
                            "service",
                            "name the database's pods too: selector = \"app=cassandra\" (their labels)",
                        ));
                    }
                    (None, None) => None,
                };
                if nodes.is_empty() && pods.is_none() {
                    return Err(f.error_at(
                        "nodes",
                        "an external server needs its nodes, e.g. nodes = [\"10.0.1.25\", \"10.0.1.26\"], or in a k8s environment its pods: selector = \"app=cassandra\" (and service = \"…\")",
                    ));
                }
                let port = f.port("port")?.unwrap_or(9042);
                let (user, password) = login(f)?.unzip();
                let kill = fault(f, usize::MAX)?;
                if kill.is_some() && pods.is_none() {
                    return Err(f.error_at(
                        "kill_node",
                        "isobench kills nodes it can reach: the pods of a k8s database (selector = \"…\"), or a managed server",
                    ));
                }
                let target = Target { nodes, port, user, password, truststore: None };
                ServerSpec::External(External { target, pods, kill })
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
