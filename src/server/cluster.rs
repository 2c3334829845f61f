//! Several managed nodes on one machine, forming one ring. Node k listens on 127.0.0.k: Linux
//! routes all of 127.0.0.0/8 to the loopback interface, so there is no alias to add or remove,
//! and every node uses the same native and storage ports, as the nodes of a real cluster do.
//! JMX is the exception: Cassandra binds it to 127.0.0.1 alone, so each node has its own port.
//! Node 1 is the seed. Nodes start one after another, as operators (and ccm) start them: fresh
//! nodes started together race for their tokens. The ring is formed when `nodetool status` on
//! every node shows every node Up and Normal.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::cassandra::{Distribution, NodeConfig, RingSlot};
use crate::sys;
use figures::units;

/// What one node needs beyond its heap, measured here: a 1 GiB-heap node's RSS after a write
/// load is ~1.6 GiB (metaspace, code cache, thread stacks, Netty's direct buffers, memtables
/// off-heap, mmapped indexes).
pub const OFF_HEAP: u64 = 640 << 20;

/// Node k's address (k from 0).
pub fn address(k: usize) -> String {
    format!("127.0.0.{}", k + 1)
}

/// Where the nodes of a cluster listen.
#[derive(Clone, Debug)]
pub struct Layout {
    pub addresses: Vec<String>,
    pub native_port: u16,
    pub storage_port: u16,
    pub jmx_ports: Vec<u16>,
}

impl Layout {
    /// `nodes` nodes serving CQL on `native_port` (a free one when not given); the storage port is
    /// Cassandra's 7000 beside the default native port, else a free one.
    pub fn new(nodes: usize, native_port: Option<u16>) -> Result<Layout> {
        let addresses: Vec<String> = (0..nodes).map(address).collect();
        // All in one search, so that no two of them are the same port.
        let mut ports = free_on_all(&addresses, nodes + 1 + usize::from(native_port.is_none()))?;
        let jmx_ports = ports.split_off(ports.len() - nodes);
        let native_port = native_port.unwrap_or_else(|| ports.remove(0));
        let storage_port = if native_port == 9042 && free_on_all_addresses(&addresses, 7000) { 7000 } else { ports[0] };
        Ok(Layout { addresses, native_port, storage_port, jmx_ports })
    }

    /// `n` free ports that are none of this layout's.
    pub fn other_free_ports(&self, n: usize) -> Result<Vec<u16>> {
        for _ in 0..20 {
            let ports = crate::sys::free_ports(n)?;
            if !ports.iter().any(|p| *p == self.native_port || *p == self.storage_port || self.jmx_ports.contains(p)) {
                return Ok(ports);
            }
        }
        bail!("found no free port beside the cluster's")
    }

    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    /// Node 1 seeds them all.
    pub fn seeds(&self) -> Vec<String> {
        vec![format!("{}:{}", self.addresses[0], self.storage_port)]
    }

    /// Node k's place in the ring.
    pub fn slot(&self, k: usize) -> RingSlot {
        RingSlot { index: k, nodes: self.len() }
    }

    /// Node k's configuration, beside `base` (heap, JIT, JVM options, logins).
    pub fn node(&self, k: usize, data: &Path, base: &NodeConfig) -> NodeConfig {
        NodeConfig {
            data: data.to_path_buf(),
            address: self.addresses[k].clone(),
            native_port: self.native_port,
            storage_port: self.storage_port,
            jmx_port: self.jmx_ports[k],
            seeds: self.seeds(),
            ring: self.slot(k),
            ..base.clone()
        }
    }
}

fn free_on_all_addresses(addresses: &[String], port: u16) -> bool {
    let held: Vec<_> = addresses.iter().map_while(|a| TcpListener::bind((a.as_str(), port)).ok()).collect();
    held.len() == addresses.len()
}

/// `n` distinct ports free on every address.
fn free_on_all(addresses: &[String], n: usize) -> Result<Vec<u16>> {
    for _ in 0..20 {
        let ports = crate::sys::free_ports(n)?;
        if ports.iter().all(|p| free_on_all_addresses(addresses, *p)) {
            return Ok(ports);
        }
    }
    bail!("found no port free on all of {}", addresses.join(", "))
}

/// Refuses, with the arithmetic, a cluster that does not fit in this machine's memory.
pub fn check_memory(nodes: usize, heap: &str, available: Option<u64>) -> Result<(), String> {
    let heap_bytes = units::parse_size(heap).map_err(|e| format!("heap \"{heap}\": {e}"))?;
    let needed = nodes as u64 * (heap_bytes + OFF_HEAP);
    match available {
        Some(available) if needed > available => Err(format!(
            "{nodes} Cassandra nodes × (heap {} + {} off-heap each) = {}, but this machine has {} available (MemAvailable); use fewer nodes or a smaller heap",
            units::human(heap_bytes as f64, "B"),
            units::human(OFF_HEAP as f64, "B"),
            units::human(needed as f64, "B"),
            units::human(available as f64, "B"),
        )),
        _ => Ok(()),
    }
}

/// What `nodetool status` says of one node: its two-letter state ("UN") and its address.
fn members(status: &str) -> Vec<(String, String)> {
    status
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let state = words.next()?;
            let address = words.next()?;
            (state.len() == 2 && "UD".contains(&state[..1]) && "NLJM".contains(&state[1..]))
                .then(|| (state.to_string(), address.split(':').next().unwrap_or(address).to_string()))
        })
        .collect()
}

/// The distribution's own NodeTool against the node whose JMX listens on `jmx_port` (on
/// 127.0.0.1): its output.
pub fn nodetool(dist: &Distribution, jmx_port: u16, args: &[String]) -> Result<String> {
    // Without a configuration of its own, the tool's logback prints its DEBUG lines with the
    // answer (Cassandra ships conf/logback-tools.xml for this; Maven's jars have no conf/). The
    // tool's home holds it and the tool's history (~/.cassandra): a directory of isobench's that
    // is writable wherever the tool runs (inside a sandbox the host's root is read-only).
    let home = std::env::temp_dir().join("isobench-nodetool");
    std::fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
    let logback = home.join("logback-tools.xml");
    if !logback.exists() {
        let quiet = "<configuration><appender name=\"STDERR\" class=\"ch.qos.logback.core.ConsoleAppender\"><target>System.err</target><encoder><pattern>%-5level %msg%n</pattern></encoder></appender><root level=\"WARN\"><appender-ref ref=\"STDERR\"/></root></configuration>\n";
        std::fs::write(&logback, quiet).with_context(|| format!("writing {}", logback.display()))?;
    }
    let finished = sys::run(
        Command::new("java")
            .args(["-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"])
            // What Cassandra's jvm17-clients.options opens to its tools.
            .args(["--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED"])
            .args(["--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED"])
            .args(["--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED"])
            .args(["--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED"])
            .args(["--add-exports", "java.rmi/sun.rmi.registry=ALL-UNNAMED"])
            // nodetool keeps its history in ~/.cassandra: in isobench's directory, not the user's home.
            .arg(format!("-Duser.home={}", home.display()))
            .arg(format!("-Dlogback.configurationFile={}", logback.display()))
            .arg("-cp")
            .arg(format!("{}/*", dist.lib().display()))
            .args(["org.apache.cassandra.tools.NodeTool", "-h", "127.0.0.1", "-p"])
            .arg(jmx_port.to_string())
            .args(args),
        sys::Options { timeout: Some(Duration::from_secs(60)), ..Default::default() },
    )?;
    if !finished.status.success() {
        bail!("nodetool {} on JMX port {jmx_port} failed: {}", args.join(" "), finished.tail(5));
    }
    Ok(finished.stdout)
}

pub fn nodetool_status(dist: &Distribution, jmx_port: u16) -> Result<String> {
    nodetool(dist, jmx_port, &["status".to_string()])
}

/// Whether `nodetool status` shows each of `addresses` Up and Normal.
pub fn all_up(status: &str, addresses: &[String]) -> bool {
    let seen = members(status);
    addresses.iter().all(|a| seen.iter().any(|(state, at)| state == "UN" && at == a))
}

/// What `nodetool status` shows, "address state, …", for an error message.
pub fn describe_members(status: &str) -> String {
    members(status).iter().map(|(s, at)| format!("{at} {s}")).collect::<Vec<_>>().join(", ")
}

/// Waits until every node (at `addresses`) sees every node Up and Normal, as `status(k)` (node
/// k's `nodetool status`) says; returns how long that took.
pub fn wait_ring(
    addresses: &[String],
    status: &(dyn Fn(usize) -> Result<String> + Sync),
    timeout: Duration,
) -> Result<Duration> {
    let started = Instant::now();
    let what = format!("the {} nodes to see one another Up and Normal", addresses.len());
    sys::Wait::new(what, timeout).every(Duration::from_secs(1)).until(|| {
        let views: Vec<Result<String>> = std::thread::scope(|scope| {
            let checks: Vec<_> = (0..addresses.len()).map(|k| scope.spawn(move || status(k))).collect();
            checks.into_iter().map(|c| c.join().unwrap_or_else(|_| bail!("nodetool panicked"))).collect()
        });
        if views.iter().all(|view| view.as_ref().is_ok_and(|text| all_up(text, addresses))) {
            return Ok(sys::Check::Done(started.elapsed()));
        }
        let last: Vec<String> = views
            .iter()
            .zip(addresses)
            .map(|(v, a)| match v {
                Ok(text) => format!("{a} sees {}", describe_members(text)),
                Err(e) => format!("{a}: {e:#}"),
            })
            .collect();
        Ok(sys::Check::NotYet(last.join("; ")))
    })
}

/// The data directory of node k under a cluster's root.
pub fn node_data(root: &Path, k: usize) -> std::path::PathBuf {
    root.join(format!("node{}", k + 1))
}

/// Whether the distribution carries nodetool (it does from Maven; a trimmed one may not).
pub fn has_nodetool(dist: &Distribution) -> Result<()> {
    let lib = dist.lib();
    let airline = std::fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("airline-"));
    if !airline {
        bail!("{} lacks airline, which nodetool needs to tell when the ring is formed; fetch again", lib.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodetool_status_lines_give_state_and_address() {
        let text = "Datacenter: datacenter1\n=======================\nStatus=Up/Down\n|/ State=Normal/Leaving/Joining/Moving\n--  Address    Load        Tokens  Owns (effective)  Host ID                               Rack\nUN  127.0.0.1  104.34 KiB  16      100.0%            1c5a-…  rack1\nDN  127.0.0.2  ?           16      100.0%            2d6b-…  rack1\nUJ  127.0.0.3  20 KiB      16      ?                 3e7c-…  rack1\n";
        assert_eq!(
            members(text),
            [("UN", "127.0.0.1"), ("DN", "127.0.0.2"), ("UJ", "127.0.0.3")]
                .map(|(s, a)| (s.to_string(), a.to_string()))
                .to_vec()
        );
    }

    #[test]
    fn a_cluster_too_big_for_memory_is_refused_with_the_arithmetic() {
        let e = check_memory(3, "1G", Some(2 << 30)).unwrap_err();
        assert!(e.contains("3 Cassandra nodes × (heap 1.00 GiB + 640 MiB off-heap each) = 4.88 GiB"), "{e}");
        assert!(e.contains("2.00 GiB available"), "{e}");
        assert!(check_memory(3, "1G", Some(24 << 30)).is_ok());
        assert!(check_memory(3, "lots", None).unwrap_err().contains("heap \"lots\""));
    }

    #[test]
    fn nodes_share_ports_on_their_own_addresses_and_seed_from_the_first() {
        let layout = Layout::new(3, None).unwrap();
        assert_eq!(layout.addresses, ["127.0.0.1", "127.0.0.2", "127.0.0.3"]);
        let base = NodeConfig::local(Path::new("/tmp/x"), 9042).unwrap();
        let third = layout.node(2, Path::new("/tmp/x/node3"), &base);
        assert_eq!(third.address, "127.0.0.3");
        assert_eq!(third.native_port, layout.native_port);
        assert_eq!(third.seeds, [format!("127.0.0.1:{}", layout.storage_port)]);
        assert_eq!(third.ring, RingSlot { index: 2, nodes: 3 });
        assert_ne!(layout.jmx_ports[0], layout.jmx_ports[2]);
    }
}
