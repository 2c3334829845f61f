//! A managed server inside a cell's environment, loaded from the host. The agent listens on a
//! control port in the sandbox; the host connects there over the environment's network and says
//! "start" (a cluster's nodes start in turn; "off" calls a node off), and the agent starts
//! Cassandra, or one of the databases of `database`, with its data on the volume under test. The host learns when the node answers CQL
//! (or why it never will), runs the load, may say "kill" (a fault: SIGKILL), and says "stop".
//! The agent then stops the node, measures what it left on the volume, and reports the usual way.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::STOP_TIMEOUT;
use super::cassandra::{Distribution, Node, NodeConfig, RingSlot, Start};
use super::database::{DbServe, Running};
use crate::store::Sample;
use crate::sys::Check;
use crate::workload::Output;

/// What the agent needs to run a node: the distribution (its jars are on the host's root, which
/// every sandbox here sees read-only), the JVM's heap, and the ports, the same inside and out.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Serve {
    pub distribution: Distribution,
    pub heap: String,
    pub quick_jit: bool,
    pub jvm_args: Vec<String>,
    /// The CPUs the node will be moved to before the measured phase (`NodeConfig::processors`).
    #[serde(default)]
    pub processors: Option<usize>,
    /// The address the node and the control port listen on inside the environment.
    pub listen: String,
    pub native_port: u16,
    pub storage_port: u16,
    pub jmx_port: u16,
    pub control_port: u16,
    /// How long the node may take to answer CQL.
    pub start_timeout: Duration,
    /// The load's keyspace and table, whose SSTables are counted after the run.
    pub keyspace: String,
    pub table: String,
    /// Clients log in (PasswordAuthenticator).
    #[serde(default)]
    pub auth: bool,
    /// A cluster's seeds; empty for a node alone.
    #[serde(default)]
    pub seeds: Vec<String>,
    #[serde(default)]
    pub ring: RingSlot,
    /// How long the host may take to connect: a cluster's nodes start one after another, so a
    /// later node waits for the earlier ones.
    pub connect_window: Duration,
    /// The node's directory under the volume ("cassandra", or "cassandra/node2" in a cluster).
    pub directory: String,
    /// Record the JVM's own samples of its Java threads once it is up (`sys::jfr`).
    #[serde(default)]
    pub java_samples: bool,
}

/// What the agent says to the host: whether its node is up, and what its `nodetool status`
/// says when asked.
#[derive(Serialize, Deserialize, Debug)]
enum Message {
    Ready { pid: i32, ready_after_s: f64, release_version: String },
    Failed(String),
    Status(Result<String, String>),
}

/// What the host learns when the node is up.
#[derive(Debug)]
pub struct Ready {
    pub ready_after: Duration,
    pub release_version: String,
}

/// The agent's first line on a control connection: through a forwarded port (QEMU's user
/// network) a connect succeeds before anything listens inside, and only this line tells a
/// connection that reached the agent from one that will be closed.
const HELLO: &[u8] = b"isobench-serve\n";

/// How long the host may take to connect to the control port after the agent started.
pub const CONNECT_WINDOW: Duration = Duration::from_secs(120);

/// What an agent serves: a Cassandra node, or one of the databases of Debian's packages.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub enum Served {
    Cassandra(Box<Serve>),
    Database(DbServe),
}

/// A server the agent started, as the control loop drives it.
trait Started {
    fn pid(&self) -> i32;
    /// Its ring's view from here (`nodetool status`), where it has one.
    fn status(&self) -> Result<String>;
    fn kill(&mut self);
    fn stop(&mut self) -> Result<Duration>;
}

impl Started for Node {
    fn pid(&self) -> i32 {
        self.pid
    }
    fn status(&self) -> Result<String> {
        super::cluster::nodetool_status(&self.distribution, self.config.jmx_port)
    }
    fn kill(&mut self) {
        Node::kill(self)
    }
    fn stop(&mut self) -> Result<Duration> {
        Node::stop(self, STOP_TIMEOUT)
    }
}

impl Started for Running {
    fn pid(&self) -> i32 {
        self.pid
    }
    fn status(&self) -> Result<String> {
        bail!("a server alone has no ring")
    }
    fn kill(&mut self) {
        Running::kill(self)
    }
    fn stop(&mut self) -> Result<Duration> {
        Running::stop(self, STOP_TIMEOUT)
    }
}

/// What the control loop learned: the server's memory when it stopped or was killed, whether it
/// was killed, and its mappings then.
struct Ended {
    rss: Option<u64>,
    mappings: Option<crate::store::RawFile>,
    killed: bool,
    stop_took: Duration,
}

/// Inside the environment: runs the server until the host says stop (or goes away), then
/// stops it and records what it cost. The server's own failure is the run's error, with the
/// end of its log.
pub fn serve(served: &Served, data_dir: &Path, scratch: &Path, out: &mut Output) -> Result<()> {
    let (listen, control_port, window) = match served {
        Served::Cassandra(s) => (&s.listen, s.control_port, s.connect_window),
        Served::Database(s) => (&s.listen, s.control_port, CONNECT_WINDOW),
    };
    let listener = TcpListener::bind((listen.as_str(), control_port))
        .with_context(|| format!("listening on the control port {listen}:{control_port}"))?;
    let mut control = accept_within(&listener, window)?;
    let _ = control.write_all(HELLO);
    let mut go = String::new();
    let _ = BufReader::new(&control).read_line(&mut go);
    if go.trim() != "start" {
        bail!("the host called this node off: an earlier node of the cluster did not start");
    }
    match served {
        Served::Cassandra(s) => {
            let config = node_config(s, data_dir);
            let start = Start { token: None, detached: false, timeout: s.start_timeout, make_archive: true };
            let node = Node::start(&s.distribution, &config, start);
            // Up and not yet loaded: the recorder's start is neither the server's start nor its load.
            if let Ok(node) = &node
                && s.java_samples
                && let Err(e) = crate::sys::jfr::start(node.pid, &config.tmp())
            {
                out.notes.push(format!("the JVM's own samples were not recorded: {e:#}"));
            }
            let mut node = started(&control, node, |n| (n.ready_after, n.release_version.clone()))?;
            let ended = control_loop(&control, &mut node);
            out.code_maps.extend(crate::workload::take_jit_map(node.pid));
            let recording = crate::sys::jfr::recording_in(&config.tmp());
            out.code_maps.extend(crate::workload::take_java_samples(node.pid, &recording));
            let mut ended = ended?;
            out.code_maps.extend(ended.mappings.take());
            record_node(s, &node, &config, &ended, out);
        }
        Served::Database(s) => {
            let mut db =
                started(&control, Running::start(s, data_dir, scratch), |r| (r.ready_after, r.version.clone()))?;
            let mut ended = control_loop(&control, &mut db)?;
            out.code_maps.extend(ended.mappings.take());
            record_database(s, &db, &ended, out);
        }
    }
    Ok(())
}

/// Tells the host whether the server started.
fn started<S: Started>(control: &TcpStream, start: Result<S>, said: impl Fn(&S) -> (Duration, String)) -> Result<S> {
    match start {
        Ok(server) => {
            let (ready_after, release_version) = said(&server);
            let ready = Message::Ready { pid: server.pid(), ready_after_s: ready_after.as_secs_f64(), release_version };
            send(control, &ready);
            Ok(server)
        }
        Err(e) => {
            send(control, &Message::Failed(format!("{e:#}")));
            Err(e)
        }
    }
}

/// "status" (the ring's view from here: a node's JMX listens on the sandbox's own loopback),
/// "kill" (a fault the suite asked for), then "stop", or the end of the stream when the host is
/// gone: either way the server stops.
fn control_loop(control: &TcpStream, server: &mut dyn Started) -> Result<Ended> {
    let mut reader = BufReader::new(control);
    let (mut rss, mut killed, mut mappings) = (None, false, None);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        match line.trim() {
            "status" => send(control, &Message::Status(server.status().map_err(|e| format!("{e:#}")))),
            "kill" => {
                rss = rss_bytes(server.pid());
                mappings = crate::workload::mappings_of(server.pid());
                server.kill();
                killed = true;
            }
            _ => break,
        }
    }
    if !killed {
        rss = rss_bytes(server.pid());
        mappings = crate::workload::mappings_of(server.pid());
    }
    let stop_took = server.stop()?;
    Ok(Ended { rss, mappings, killed, stop_took })
}

/// What every server records: its start and its phases, its stop, its memory.
fn record_server(ready_after: Duration, phases: &[(String, Duration)], ended: &Ended, out: &mut Output) {
    out.samples.push(Sample::new("server_startup", ready_after.as_secs_f64(), "s"));
    for (metric, after) in phases {
        out.samples.push(Sample::new(metric.clone(), after.as_secs_f64(), "s"));
    }
    if !ended.killed {
        out.samples.push(Sample::new("server_stop", ended.stop_took.as_secs_f64(), "s"));
    }
    if let Some(rss) = ended.rss {
        out.samples.push(Sample::new("server_rss", rss as f64, "B"));
    }
}

fn record_node(s: &Serve, node: &Node, config: &NodeConfig, ended: &Ended, out: &mut Output) {
    record_server(node.ready_after, &node.start_phases, ended, out);
    let (files, bytes) = tree_size(&config.data.join("data"));
    out.samples.push(Sample::new("server_data_size", bytes as f64, "B"));
    out.samples.push(Sample::new(
        "server_sstables",
        sstables(&config.data.join("data"), &s.keyspace, &s.table) as f64,
        "files",
    ));
    out.samples.push(Sample::new("server_commitlog_size", tree_size(&config.data.join("commitlog")).1 as f64, "B"));
    out.notes.push(format!(
        "server: Cassandra {} ran inside this environment as pid {} with its data in {} ({files} files, {bytes} bytes after the run)",
        node.release_version,
        node.pid,
        config.data.display()
    ));
}

fn record_database(s: &DbServe, db: &Running, ended: &Ended, out: &mut Output) {
    record_server(db.ready_after, &db.start_phases, ended, out);
    let (files, bytes) = tree_size(&db.data);
    out.samples.push(Sample::new("server_data_size", bytes as f64, "B"));
    out.notes.push(format!(
        "server: {} {} ran inside this environment as pid {} with its data in {} ({files} files, {bytes} bytes after the run)",
        s.kind.engine().name(),
        db.version,
        db.pid,
        db.data.display()
    ));
}

/// The node `s` asks for, its data in its directory under `data_dir`: made for this one run.
fn node_config(s: &Serve, data_dir: &Path) -> NodeConfig {
    NodeConfig {
        data: data_dir.join(&s.directory),
        heap: s.heap.clone(),
        address: s.listen.clone(),
        native_port: s.native_port,
        storage_port: s.storage_port,
        jmx_port: s.jmx_port,
        quick_jit: s.quick_jit,
        jvm_args: s.jvm_args.clone(),
        processors: s.processors,
        auth: s.auth,
        seeds: s.seeds.clone(),
        ring: s.ring,
        tls: false,
        ring_delay: if s.seeds.is_empty() { super::cassandra::QUICK_RING } else { super::cassandra::JOINING_RING },
        one_run: true,
    }
}

fn accept_within(listener: &TcpListener, window: Duration) -> Result<TcpStream> {
    listener.set_nonblocking(true)?;
    crate::sys::Wait::new("the host to connect to the control port", window).until(|| match listener.accept() {
        Ok((stream, _)) => {
            stream.set_nonblocking(false)?;
            Ok(Check::Done(stream))
        }
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(Check::NotYet(String::new())),
        Err(e) => Err(e).context("accepting the host's control connection"),
    })
}

fn send(mut stream: &TcpStream, message: &Message) {
    // A host that went away hears nothing; the node is stopped all the same.
    let _ = writeln!(stream, "{}", serde_json::to_string(message).expect("serialisable"));
}

fn rss_bytes(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kb * 1024)
}

/// The table's SSTables: its directories are `<keyspace>/<table>-<id>/`, one `*-Data.db` each.
fn sstables(data: &Path, keyspace: &str, table: &str) -> usize {
    let prefix = format!("{table}-");
    let Ok(dirs) = std::fs::read_dir(data.join(keyspace)) else { return 0 };
    dirs.flatten()
        .filter(|d| d.file_name().to_string_lossy().starts_with(&prefix))
        .filter_map(|d| std::fs::read_dir(d.path()).ok())
        .flat_map(|files| files.flatten())
        .filter(|f| f.file_name().to_string_lossy().ends_with("-Data.db"))
        .count()
}

/// Files and bytes under `dir` (allocated blocks are what the volume holds; sizes are what
/// the database wrote: sizes, as `du --apparent-size`).
pub(crate) fn tree_size(dir: &Path) -> (u64, u64) {
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    let (mut files, mut bytes) = (0, 0);
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => stack.push(entry.path()),
                Ok(m) => {
                    files += 1;
                    bytes += m.len();
                }
                Err(_) => {}
            }
        }
    }
    (files, bytes)
}

/// Whether the agent said hello on `stream` (an end of stream means nothing was listening).
fn greeted(stream: &TcpStream) -> bool {
    let mut hello = [0u8; HELLO.len()];
    let _ = stream.set_read_timeout(Some(CONNECT_WINDOW));
    std::io::Read::read_exact(&mut &*stream, &mut hello).is_ok() && hello == HELLO
}

/// The host's end of the control connection.
pub struct Control {
    stream: TcpStream,
}

impl Control {
    /// Connects to the agent's control port; gives up when the agent has finished (it failed
    /// before listening) or the window has passed.
    pub fn connect(address: &str, agent_done: &AtomicBool) -> Result<Control> {
        crate::sys::Wait::new(format!("the agent's control port {address}"), CONNECT_WINDOW)
            .every(Duration::from_millis(100))
            .until(|| {
                if let Ok(stream) = TcpStream::connect(address)
                    && greeted(&stream)
                {
                    return Ok(Check::Done(Control { stream }));
                }
                if agent_done.load(Ordering::Relaxed) {
                    bail!("the agent ended before it listened on {address}");
                }
                Ok(Check::NotYet(String::new()))
            })
    }

    /// Has the agent start its node, and waits for it to answer CQL inside the environment.
    pub fn ready(&mut self, start_timeout: Duration) -> Result<Ready> {
        self.stream.write_all(b"start\n").context("asking the agent to start its node")?;
        self.stream.set_read_timeout(Some(start_timeout + Duration::from_secs(30)))?;
        let mut line = String::new();
        BufReader::new(&self.stream).read_line(&mut line).context("waiting for the server to start")?;
        match serde_json::from_str::<Message>(line.trim()) {
            Ok(Message::Ready { ready_after_s, release_version, .. }) => {
                Ok(Ready { ready_after: figures::units::seconds(ready_after_s), release_version })
            }
            // The agent's report carries the same error with the node's log.
            Ok(Message::Failed(e)) => bail!("{e}"),
            _ => bail!("the agent ended before the server was ready"),
        }
    }

    /// The node's `nodetool status`, run by the agent inside the sandbox.
    pub fn status(&self) -> Result<String> {
        (&self.stream).write_all(b"status\n").context("asking the agent for its node's view of the ring")?;
        let mut line = String::new();
        BufReader::new(&self.stream).read_line(&mut line).context("waiting for the node's nodetool status")?;
        match serde_json::from_str::<Message>(line.trim()) {
            Ok(Message::Status(Ok(text))) => Ok(text),
            Ok(Message::Status(Err(e))) => bail!("{e}"),
            _ => bail!("the agent ended before it said its node's view of the ring"),
        }
    }

    /// Tells the agent not to start its node.
    pub fn call_off(mut self) {
        let _ = self.stream.write_all(b"off\n");
    }

    /// Asks the agent to stop the node (dropping the connection would too).
    pub fn stop(mut self) {
        let _ = self.stream.write_all(b"stop\n");
    }

    /// Asks the agent to kill the node at once (SIGKILL): a node failing mid-run.
    pub fn kill(&self) -> Result<()> {
        (&self.stream).write_all(b"kill\n").context("asking the agent to kill its node")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip() {
        let m = Message::Ready { pid: 7, ready_after_s: 6.5, release_version: "5.0.9".into() };
        let text = serde_json::to_string(&m).unwrap();
        assert!(matches!(serde_json::from_str::<Message>(&text).unwrap(), Message::Ready { pid: 7, .. }));
    }
}
