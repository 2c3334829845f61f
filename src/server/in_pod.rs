//! A Cassandra node as the main process of a Kubernetes pod (`isobench k8s db run`), one pod of
//! the StatefulSet a k8s cell makes (see `runner::k8s_server_cell`). The node is configured as the local
//! server is (`NodeConfig`: the same cassandra.yaml, heap and JVM flags), from the spec in the
//! run's Secret and from the pod itself: its IP, and its name, which says whether it is the
//! seed. The node's data is on the claim at `/data`. It runs until the pod is deleted (SIGTERM:
//! a clean stop) or dies on its own (the pod then fails with the end of Cassandra's log).
//!
//! The orchestrator reaches a pod only through the API server, so the rest is done by `kubectl
//! exec`-style calls of the same binary: `facts` (the kernel the pod sees, the node's start),
//! `nodetool …` (the ring, the table statistics) and `create-role` (the load's login, whose
//! password the pod has from the Secret, never from a command line).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::STOP_TIMEOUT;
use super::cassandra::{self, Distribution, Node, NodeConfig, RingSlot, Start};
use crate::facts::Facts;

/// Where the pod finds its spec (the run's Secret, mounted).
pub const SPEC_PATH: &str = "/run/isobench/db.json";
/// Where the claim is mounted in the pod; the node's files are under `cassandra/`.
pub const DATA_DIR: &str = "/data";
/// The pod's IP, from the downward API.
pub const POD_IP_VAR: &str = "POD_IP";
/// The load's password, from the Secret (`secretKeyRef`).
pub const PASSWORD_VAR: &str = "ISOBENCH_DB_PASSWORD";
pub const NATIVE_PORT: u16 = 9042;
pub const STORAGE_PORT: u16 = 7000;
/// JMX, on the pod's loopback only: `nodetool` runs inside the pod.
pub const JMX_PORT: u16 = 7199;
/// What the pod's running server tells later `ready` and `facts` calls (the container's own,
/// lost with it).
const STATUS_FILE: &str = "/tmp/isobench-db.json";

/// What every pod of the StatefulSet runs: the same for all of them (a pod template), so what
/// differs between nodes comes from the pod (its name, its IP).
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct DbPod {
    /// The isobench that wrote the spec; the image's must be the same release, as both speak it.
    pub isobench: String,
    pub version: String,
    pub heap: String,
    pub quick_jit: bool,
    pub jvm_args: Vec<String>,
    /// Clients log in (PasswordAuthenticator).
    pub auth: bool,
    /// Clients speak TLS (`client_encryption_options`).
    pub tls: bool,
    pub nodes: u32,
    /// The first pod's name (`<set>-0`) and its stable name in the headless Service
    /// (`<set>-0.<service>`): the first pod seeds itself, every other one seeds from it.
    pub seed_pod: String,
    pub seed: String,
    pub start_timeout: Duration,
}

/// What `facts` prints: where the pod runs and how its node started.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct PodFacts {
    pub facts: Facts,
    pub ready_after_s: f64,
    /// The start's phases (`server_start_jvm`, …), seconds from spawning java.
    #[serde(default)]
    pub start_phases: Vec<(String, f64)>,
    pub release_version: String,
    /// The node's certificate (PEM) when clients speak TLS: what the loaders trust.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
}

/// What a database pod runs, as the run's Secret says: a Cassandra node, or a database of
/// Debian's packages (`database::in_pod`).
#[derive(Deserialize)]
#[serde(untagged)]
pub enum PodSpec {
    Served(super::database::in_pod::ServedPod),
    Cassandra(DbPod),
}

/// What the pod is asked (`isobench k8s db ACTION`): by its container to run the node, by its
/// probe, and by the orchestrator through exec.
#[derive(clap::Subcommand)]
pub enum DbAction {
    /// Start the node and keep it until the pod is deleted.
    Run,
    /// Whether this pod's node has answered CQL (its readiness probe).
    Ready,
    /// Where this pod runs and how its node started, as JSON.
    Facts,
    /// The distribution's nodetool against this pod's node.
    Nodetool {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// The node's log lines of garbage collections of 200 ms or more.
    GcLog,
    /// Create the load's role; its password comes from the pod's environment.
    CreateRole { user: String },
}

/// Answers `action` for the pod whose spec is at `spec`: a Cassandra node's or a database's of
/// Debian's packages, which answers `run`, `ready` and `facts` only.
pub fn answer(spec: &Path, action: DbAction) -> Result<()> {
    use super::database::in_pod as served;
    match (PodSpec::read(spec)?, action) {
        (PodSpec::Cassandra(spec), DbAction::Run) => run(&spec)?,
        (PodSpec::Cassandra(_), DbAction::Ready) => ready()?,
        (PodSpec::Cassandra(spec), DbAction::Facts) => println!("{}", facts(&spec)?),
        (PodSpec::Cassandra(spec), DbAction::Nodetool { args }) => print!("{}", nodetool(&spec, &args)?),
        (PodSpec::Cassandra(spec), DbAction::GcLog) => print!("{}", gc_log(&spec)?),
        (PodSpec::Cassandra(spec), DbAction::CreateRole { user }) => create_role(&spec, &user)?,
        (PodSpec::Served(spec), DbAction::Run) => served::run(&spec)?,
        (PodSpec::Served(_), DbAction::Ready) => served::ready()?,
        (PodSpec::Served(spec), DbAction::Facts) => println!("{}", served::facts(&spec)?),
        (PodSpec::Served(_), _) => bail!("this pod runs a database of Debian's packages, not Cassandra"),
    }
    Ok(())
}

impl PodSpec {
    pub fn read(path: &Path) -> Result<PodSpec> {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let spec: PodSpec = serde_json::from_str(&text).with_context(|| format!("{} is not a spec", path.display()))?;
        let written_by = match &spec {
            PodSpec::Served(s) => &s.isobench,
            PodSpec::Cassandra(c) => &c.isobench,
        };
        if written_by != env!("CARGO_PKG_VERSION") {
            bail!(
                "this image has isobench {}, the run is isobench {written_by}: build the image of the same release (scripts/k8s-image.sh)",
                env!("CARGO_PKG_VERSION"),
            );
        }
        Ok(spec)
    }
}

impl DbPod {
    fn distribution(&self) -> Result<Distribution> {
        Distribution::cached(&self.version).ok_or_else(|| {
            anyhow!(
                "this image has no Cassandra {} under {}: build one with scripts/k8s-image.sh --cassandra {0}, or set the server's version to the image's",
                self.version,
                cassandra::cache_root().display()
            )
        })
    }

    /// The node's place in the ring: its pod's ordinal in the StatefulSet (`<set>-N`).
    fn ring_slot(&self, pod: &str) -> Result<RingSlot> {
        let set = self.seed_pod.strip_suffix("-0").unwrap_or(&self.seed_pod);
        let nodes = self.nodes.max(1) as usize;
        pod.strip_prefix(set)
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse().ok())
            .filter(|&index| index < nodes)
            .map(|index| RingSlot { index, nodes })
            .ok_or_else(|| {
                anyhow!(
                    "this pod's name {pod:?} is not {set}-N with N below {}: run it in the StatefulSet isobench made",
                    self.nodes
                )
            })
    }

    /// The node's configuration in this pod, but for its place in the ring.
    fn config(&self, pod_ip: &str) -> NodeConfig {
        NodeConfig {
            data: node_dir(),
            heap: self.heap.clone(),
            address: pod_ip.to_string(),
            native_port: NATIVE_PORT,
            storage_port: STORAGE_PORT,
            jmx_port: JMX_PORT,
            quick_jit: self.quick_jit,
            jvm_args: self.jvm_args.clone(),
            processors: None,
            auth: self.auth,
            seeds: Vec::new(),
            ring: RingSlot::default(),
            tls: self.tls,
            // Pods reach one another over a network, gVisor's through its own stack, on a
            // loaded machine: 100 ms to hear from the seed is not enough there.
            ring_delay: crate::server::cassandra::JOINING_RING,
            // The StatefulSet starts a deleted or crashed pod again on the same claim.
            one_run: false,
        }
    }
}

fn node_dir() -> PathBuf {
    Path::new(DATA_DIR).join("cassandra")
}

pub(crate) fn pod_ip() -> Result<String> {
    std::env::var(POD_IP_VAR).map_err(|_| anyhow!("{POD_IP_VAR} is not set: the pod spec passes status.podIP"))
}

/// The pod's own name (the kubelet makes it the hostname).
fn pod_name() -> String {
    nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned()).unwrap_or_default()
}

/// `isobench k8s db run`: starts the node, says when it answers CQL, and keeps it until the pod
/// is told to stop.
pub fn run(spec: &DbPod) -> Result<()> {
    crate::sys::install_interrupt_handler()?;
    let ip = pod_ip()?;
    let dist = spec.distribution()?;
    // The first pod seeds itself (its own name may not resolve yet); the others wait until the
    // seed's name resolves and give Cassandra its address, not the name: Cassandra resolves a
    // seed once, at start, and gives up with "no seeds" if the cluster's DNS misses that one
    // answer (seen here: a lookup that timed out after 20 s while a ring of three started, just
    // after the same name had resolved in this pod).
    let ring = spec.ring_slot(&pod_name())?;
    let (seed_name, seed) = if ring.index == 0 {
        ("itself", ip.clone())
    } else {
        let seed = resolve(&spec.seed, spec.start_timeout)?;
        // The pods start together, and a node that is not a seed gives up on a seed that does
        // not answer within twice its ring delay: it starts once the seed listens to its peers.
        listening(&spec.seed, seed, spec.start_timeout)?;
        (spec.seed.as_str(), seed.ip().to_string())
    };
    let config = NodeConfig { seeds: vec![format!("{seed}:{STORAGE_PORT}")], ring, ..spec.config(&ip) };
    println!(
        "isobench: starting Cassandra {} on {ip} (seed {seed_name} at {seed}), data in {}",
        spec.version,
        config.data.display()
    );
    // The image carries its archive (scripts/k8s-image.sh makes it); one made here would go
    // with the container.
    let how = Start { token: None, detached: false, timeout: spec.start_timeout, make_archive: false };
    let mut node = Node::start(&dist, &config, how)?;
    let status = PodFacts {
        ready_after_s: node.ready_after.as_secs_f64(),
        start_phases: node.start_phases.iter().map(|(m, d)| (m.clone(), d.as_secs_f64())).collect(),
        release_version: node.release_version.clone(),
        ..Default::default()
    };
    save_status(&status)?;
    println!(
        "isobench: Cassandra {} answers CQL on {ip}:{NATIVE_PORT} after {:.1} s",
        node.release_version,
        node.ready_after.as_secs_f64()
    );
    while !crate::sys::interrupted() {
        if !node.alive() {
            bail!("Cassandra exited on its own. {}", node.failure_excerpt());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let took = node.stop(STOP_TIMEOUT)?;
    println!("isobench: Cassandra stopped in {:.1} s", took.as_secs_f64());
    Ok(())
}

/// The seed's storage address, `name` resolved, waiting for the cluster's DNS to have it.
fn resolve(name: &str, timeout: Duration) -> Result<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let what =
        format!("the seed's name {name} to resolve (the cluster's DNS must serve the StatefulSet's headless Service)");
    crate::sys::Wait::new(what, timeout).every(Duration::from_millis(500)).until(|| {
        Ok(match (name, STORAGE_PORT).to_socket_addrs().ok().and_then(|mut a| a.next()) {
            Some(address) => crate::sys::Check::Done(address),
            None => crate::sys::Check::NotYet(String::new()),
        })
    })
}

/// Waits until the seed accepts connections on its storage address `to`.
fn listening(name: &str, to: std::net::SocketAddr, timeout: Duration) -> Result<()> {
    let what = format!("the seed {name} ({to}) to listen to its peers");
    crate::sys::Wait::new(what, timeout).every(Duration::from_millis(500)).until(|| {
        Ok(match std::net::TcpStream::connect_timeout(&to, Duration::from_secs(1)) {
            Ok(_) => crate::sys::Check::Done(()),
            Err(e) => crate::sys::Check::NotYet(e.to_string()),
        })
    })
}

/// What the pod's server says once it answers, for the later calls of `ready` and `facts`
/// (the container's own file, lost with it).
pub(crate) fn save_status(status: &PodFacts) -> Result<()> {
    Ok(std::fs::write(STATUS_FILE, serde_json::to_string(status)?)?)
}

/// The pod's server's status with where the pod runs, or `not_yet` before it answered.
pub(crate) fn status(not_yet: &str) -> Result<PodFacts> {
    let mut out: PodFacts = std::fs::read_to_string(STATUS_FILE)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .ok_or_else(|| anyhow!("{not_yet}"))?;
    out.facts = crate::facts::sandbox_facts(Some(Path::new(DATA_DIR)));
    Ok(out)
}

/// The pod's readiness: its server has answered, or `not_yet`.
pub(crate) fn answered(not_yet: &str) -> Result<()> {
    if !Path::new(STATUS_FILE).exists() {
        bail!("{not_yet}");
    }
    Ok(())
}

const NODE_NOT_YET: &str = "the node in this pod has not answered CQL yet";

/// `isobench k8s db ready`: whether the node in this pod answered CQL (the pod's readiness:
/// its port opens before the node answers a query).
pub fn ready() -> Result<()> {
    answered(NODE_NOT_YET)
}

/// `isobench k8s db facts`: JSON of where this pod runs and how its node started.
pub fn facts(spec: &DbPod) -> Result<String> {
    let mut out = status(NODE_NOT_YET)?;
    if spec.tls {
        let config = spec.config(&pod_ip()?);
        out.certificate = Some(
            std::fs::read_to_string(config.certificate())
                .with_context(|| format!("reading {}", config.certificate().display()))?,
        );
    }
    Ok(serde_json::to_string(&out)?)
}

/// `isobench k8s db nodetool ARGS`: the distribution's own NodeTool against this pod's node.
pub fn nodetool(spec: &DbPod, args: &[String]) -> Result<String> {
    super::cluster::nodetool(&spec.distribution()?, JMX_PORT, args)
}

/// `isobench k8s db gc-log`: the lines of the node's log in which it says a garbage collection
/// took 200 ms or more (`server::cassandra::gc`); the log is on the claim, so a node restarted
/// in the pod (its machine lost) still has its earlier lines.
pub fn gc_log(spec: &DbPod) -> Result<String> {
    let path = spec.config(&pod_ip()?).log();
    let log = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(cassandra::gc::inspector_lines(&log).map(|l| format!("{l}\n")).collect())
}

/// `isobench k8s db create-role USER`: the load's role, its password from the pod's
/// environment (the Secret). With several nodes the roles are first replicated to as many of
/// them as the keyspaces of the study are (3), so a login survives a node's loss.
pub fn create_role(spec: &DbPod, user: &str) -> Result<()> {
    let password = std::env::var(PASSWORD_VAR).map_err(|_| anyhow!("{PASSWORD_VAR} is not set in this pod"))?;
    let config = spec.config(&pod_ip()?);
    let trust = spec.tls.then(|| config.certificate());
    cassandra::create_role(
        &format!("{}:{NATIVE_PORT}", config.address),
        user,
        &password,
        spec.nodes.clamp(1, 3),
        trust.as_deref(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_takes_its_place_in_the_ring_from_its_ordinal() {
        let spec = DbPod {
            isobench: env!("CARGO_PKG_VERSION").into(),
            version: "5.0.9".into(),
            heap: "1G".into(),
            quick_jit: false,
            jvm_args: Vec::new(),
            auth: false,
            tls: false,
            nodes: 3,
            seed_pod: "isobench-db-ab12-0".into(),
            seed: "isobench-db-ab12-0.isobench-db-ab12".into(),
            start_timeout: Duration::from_secs(60),
        };
        assert_eq!(spec.ring_slot("isobench-db-ab12-0").unwrap(), RingSlot { index: 0, nodes: 3 });
        assert_eq!(spec.ring_slot("isobench-db-ab12-2").unwrap(), RingSlot { index: 2, nodes: 3 });
        for stranger in ["isobench-db-ab12-3", "isobench-db-ab1-2", "isobench-db-ab12", "other-1"] {
            let e = spec.ring_slot(stranger).unwrap_err().to_string();
            assert!(e.contains("is not isobench-db-ab12-N with N below 3"), "{stranger}: {e}");
        }
    }
}
