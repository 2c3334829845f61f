//! A node's configuration: a minimal cassandra.yaml, logback and TLS stores under its data
//! directory, with the addresses and ports of its place in a ring.

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// How one node runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeConfig {
    /// Data, commit log, hints, configuration and logs all live under here.
    pub data: PathBuf,
    pub heap: String,
    /// Where it listens. "0.0.0.0" serves CQL on every interface (a VM reached through
    /// forwarded ports) and advertises 127.0.0.1, where the host's forwarded ports are.
    pub address: String,
    pub native_port: u16,
    pub storage_port: u16,
    pub jmx_port: u16,
    /// C1 only (`-XX:TieredStopAtLevel=1`): starts in half the time, writes at half the speed.
    /// For tests, never for measurements.
    pub quick_jit: bool,
    /// More JVM options, after isobench's own (a later option wins).
    #[serde(default)]
    pub jvm_args: Vec<String>,
    /// The CPUs the node will run on once it is moved to its own (`-XX:ActiveProcessorCount`),
    /// where that is fewer than it starts on; None: those it sees.
    #[serde(default)]
    pub processors: Option<usize>,
    /// Clients log in (PasswordAuthenticator); the default superuser exists from the start.
    #[serde(default)]
    pub auth: bool,
    /// The cluster's seeds ("address:storage_port"); a node alone is its own seed.
    #[serde(default)]
    pub seeds: Vec<String>,
    /// Its place in the ring, from which its tokens are set.
    #[serde(default)]
    pub ring: RingSlot,
    /// Clients must speak TLS (`client_encryption_options`): the node's key is made with
    /// keytool on its first start; clients trust [`NodeConfig::certificate`].
    #[serde(default)]
    pub tls: bool,
    /// How long gossip waits on the ring (Cassandra's `ring_delay_ms`): a node that is not a
    /// seed gives up on hearing from one ("Unable to gossip with any peers") once it has slept
    /// more than twice this, a second at a time, so never before its first second.
    #[serde(default = "quick_ring")]
    pub ring_delay: Duration,
    /// Made for one run on a fresh directory and never started again (a cell's managed
    /// server, whose volume goes with the run): nothing will replay its commit log, so its
    /// system keyspaces need not be flushed as they are written (see `java_command`).
    #[serde(default)]
    pub one_run: bool,
}

/// A node's place in its ring: node `index` (from 0) of `nodes`. Its tokens are set from it
/// rather than allocated: Cassandra's allocator gives the same tokens to nodes that join
/// (with `auto_bootstrap: false`) before they see one another's, and the later node then takes
/// all of the earlier one's, which drops out of every `nodetool status` (CASSANDRA-16364; what
/// a k8s ring of three showed here once: a node missing from every status, its own included,
/// while its pod ran on).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct RingSlot {
    pub index: usize,
    pub nodes: usize,
}

impl Default for RingSlot {
    fn default() -> Self {
        RingSlot { index: 0, nodes: 1 }
    }
}

impl RingSlot {
    pub const VNODES: usize = 16;

    /// The node's vnode tokens (Murmur3's range), interleaved with every other node's at even
    /// spacing, so each node owns 1/nodes of the ring and each of its ranges' replicas lie on
    /// the nodes that follow it.
    pub fn tokens(self) -> Vec<i64> {
        let nodes = self.nodes.max(1);
        let step = (1i128 << 64) / (Self::VNODES * nodes) as i128;
        (0..Self::VNODES).map(|v| (i64::MIN as i128 + (v * nodes + self.index) as i128 * step) as i64).collect()
    }
}

/// Nodes on one machine's loopback answer one another at once.
pub const QUICK_RING: Duration = Duration::from_millis(100);

/// The ring delay of a node that joins a seed: with `QUICK_RING` it had one second for the
/// seed's first answer, which a busy 2-core machine missed now and then (a three-node ring on
/// the host, and one of gVisor sandboxes, beside make test's other lane). The joining node
/// goes on as soon as the seed answers, so the longer wait costs nothing when it does; with
/// `auto_bootstrap: false` nothing else here waits on it.
pub const JOINING_RING: Duration = Duration::from_secs(5);

pub(super) fn quick_ring() -> Duration {
    QUICK_RING
}

impl NodeConfig {
    /// A node on 127.0.0.1 with its data under `data`: 9042/7000/7199 for the default native
    /// port, free ports beside any other.
    pub fn local(data: &Path, native_port: u16) -> Result<NodeConfig> {
        let (storage_port, jmx_port) = if native_port == 9042 {
            (7000, 7199)
        } else {
            let ports = crate::sys::free_ports(2)?;
            (ports[0], ports[1])
        };
        Ok(NodeConfig {
            data: data.to_path_buf(),
            heap: "1G".into(),
            address: "127.0.0.1".into(),
            native_port,
            storage_port,
            jmx_port,
            quick_jit: false,
            jvm_args: Vec::new(),
            processors: None,
            auth: false,
            seeds: Vec::new(),
            ring: RingSlot::default(),
            tls: false,
            ring_delay: QUICK_RING,
            one_run: false,
        })
    }

    /// The node's own address: where it gossips, and where clients inside reach it.
    pub fn local_address(&self) -> &str {
        if self.address == "0.0.0.0" { "127.0.0.1" } else { &self.address }
    }

    /// Whether the node serves JMX on `jmx_port`: nodetool needs it, which isobench runs against
    /// a ring's nodes and a user may run against `isobench server start`'s. A cell's node alone
    /// is asked nothing over JMX, and its RMI server took 0.4-0.5 s of a 4-5 s start.
    pub fn serves_jmx(&self) -> bool {
        !self.one_run || self.ring.nodes > 1
    }

    /// The node's certificate (PEM), for clients' `-transport truststore=`.
    pub fn certificate(&self) -> PathBuf {
        self.data.join("conf/node-cert.pem")
    }

    fn keystore(&self) -> PathBuf {
        self.data.join("conf/node-keystore.p12")
    }

    /// The client TLS section of cassandra.yaml, with the keystore's password (the file is the
    /// server's own, readable by root only).
    fn client_encryption(&self) -> Result<String> {
        if !self.tls {
            return Ok(String::new());
        }
        let password = self.keystore_password()?;
        Ok(format!(
            "client_encryption_options:
  enabled: true
  optional: false
  keystore: {}
  keystore_password: {password}
  store_type: PKCS12
  require_client_auth: false
",
            self.keystore().display()
        ))
    }

    /// Makes the node's key pair and self-signed certificate (naming its address and
    /// 127.0.0.1) once; later starts keep them, so clients' truststores stay valid.
    fn keystore_password(&self) -> Result<String> {
        let password_file = self.data.join("conf/node-keystore.password");
        if self.keystore().exists()
            && let Ok(password) = fs::read_to_string(&password_file)
        {
            return Ok(password);
        }
        let mut random = [0u8; 16];
        fs::File::open("/dev/urandom")?.read_exact(&mut random)?;
        let password: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let _ = fs::remove_file(self.keystore());
        let keytool = |args: &[&str]| -> Result<()> {
            // The password goes in the environment: command lines are visible to every user.
            let out = Command::new("keytool")
                .args(args)
                .env("ISOBENCH_KEYSTORE_PASSWORD", &password)
                .output()
                .context("cannot run keytool: install Java 17 (`apt-get install openjdk-17-jre-headless`)")?;
            if !out.status.success() {
                bail!("keytool {} failed: {}", args[0], String::from_utf8_lossy(&out.stdout).trim());
            }
            Ok(())
        };
        let keystore = self.keystore().display().to_string();
        let san = format!("SAN=ip:127.0.0.1,ip:{},dns:localhost", self.local_address());
        let common = ["-keystore", &keystore, "-storetype", "PKCS12", "-storepass:env", "ISOBENCH_KEYSTORE_PASSWORD"];
        keytool(
            &[
                &["-genkeypair", "-alias", "node", "-keyalg", "EC", "-groupname", "secp256r1"][..],
                &["-dname", "CN=isobench-cassandra", "-ext", &san, "-validity", "3650"],
                &common,
            ]
            .concat(),
        )?;
        let certificate = self.certificate().display().to_string();
        keytool(&[&["-exportcert", "-rfc", "-alias", "node", "-file", &certificate][..], &common].concat())?;
        let mut file =
            fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&password_file)?;
        file.write_all(password.as_bytes())?;
        Ok(password)
    }

    pub fn log(&self) -> PathBuf {
        self.data.join("logs/system.log")
    }

    pub fn stdout_log(&self) -> PathBuf {
        self.data.join("logs/stdout.log")
    }

    fn yaml(&self) -> Result<String> {
        let d = self.data.display();
        Ok(format!(
            "cluster_name: isobench
num_tokens: {vnodes}
initial_token: {tokens}
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
authenticator: {authenticator}
authorizer: AllowAllAuthorizer
role_manager: CassandraRoleManager
data_file_directories: [{d}/data]
commitlog_directory: {d}/commitlog
saved_caches_directory: {d}/saved_caches
hints_directory: {d}/hints
cdc_raw_directory: {d}/cdc_raw
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_segment_size: 32MiB
seed_provider:
  - class_name: org.apache.cassandra.locator.SimpleSeedProvider
    parameters:
      - seeds: \"{seeds}\"
listen_address: {a}
rpc_address: {rpc}
broadcast_rpc_address: {a}
storage_port: {s}
native_transport_port: {n}
start_native_transport: true
endpoint_snitch: SimpleSnitch
auto_bootstrap: false
memtable_heap_space: 64MiB
memtable_offheap_space: 64MiB
key_cache_size: 8MiB
concurrent_reads: 8
concurrent_writes: 16
concurrent_counter_writes: 8
disk_access_mode: mmap_index_only
{client_encryption}",
            a = self.local_address(),
            rpc = self.address,
            s = self.storage_port,
            n = self.native_port,
            authenticator = if self.auth { "PasswordAuthenticator" } else { "AllowAllAuthenticator" },
            vnodes = RingSlot::VNODES,
            tokens = self.ring.tokens().iter().map(i64::to_string).collect::<Vec<_>>().join(","),
            client_encryption = self.client_encryption()?,
            seeds = if self.seeds.is_empty() {
                format!("{}:{}", self.local_address(), self.storage_port)
            } else {
                self.seeds.join(",")
            },
        ))
    }

    fn logback(&self) -> String {
        let pattern = "<encoder><pattern>%-5level [%thread] %date{ISO8601} %F:%L - %msg%n</pattern></encoder>";
        format!(
            r#"<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender"><file>{}</file>{pattern}</appender>
  <appender name="STDOUT" class="ch.qos.logback.core.ConsoleAppender">
    <filter class="ch.qos.logback.classic.filter.ThresholdFilter"><level>INFO</level></filter>{pattern}</appender>
  <logger name="org.apache.cassandra" level="INFO"/>
  <root level="INFO"><appender-ref ref="FILE"/><appender-ref ref="STDOUT"/></root>
</configuration>
"#,
            self.log().display()
        )
    }

    /// The JVM's temporary directory: its libraries' native code (lz4-java's) is unpacked there,
    /// and a node killed (a fault, a run stopped halfway) leaves it behind, in /tmp for good; its
    /// recorder's samples are written there (`sys::jfr`).
    pub(crate) fn tmp(&self) -> PathBuf {
        self.data.join("tmp")
    }

    /// Writes cassandra.yaml and logback.xml under `data/conf`.
    pub(super) fn write(&self) -> Result<PathBuf> {
        let conf = self.data.join("conf");
        for dir in [&conf, &self.data.join("logs"), &self.tmp()] {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        // Private: with client TLS on, it holds the keystore's password.
        let yaml = self.yaml()?;
        let _ = fs::remove_file(conf.join("cassandra.yaml"));
        fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(conf.join("cassandra.yaml"))?
            .write_all(yaml.as_bytes())?;
        fs::write(conf.join("logback.xml"), self.logback())?;
        Ok(conf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nodes_of_a_ring_take_turns_around_it_with_no_token_twice() {
        let ring: Vec<Vec<i64>> = (0..3).map(|index| RingSlot { index, nodes: 3 }.tokens()).collect();
        let mut all: Vec<(i64, usize)> =
            ring.iter().enumerate().flat_map(|(node, t)| t.iter().map(move |&t| (t, node))).collect();
        all.sort();
        assert_eq!(all.len(), 48);
        assert!(all.windows(2).all(|w| w[0].0 < w[1].0), "a token twice");
        assert!(all.iter().enumerate().all(|(k, &(_, node))| node == k % 3), "{all:?}");
        assert_eq!(all[0].0, i64::MIN);
        let step = all[1].0 as i128 - all[0].0 as i128;
        assert!(all.windows(2).all(|w| w[1].0 as i128 - w[0].0 as i128 == step), "uneven spacing");
        let last = i64::MAX as i128 + 1 - all[47].0 as i128;
        assert!((step..step + 48).contains(&last), "the range that wraps is {last}, the others {step}");
        assert_eq!(RingSlot::default().tokens().len(), RingSlot::VNODES);
    }
}
