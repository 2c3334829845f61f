//! Apache Cassandra from Maven Central: `cassandra-all` and its runtime dependencies fetched with
//! `mvn dependency:copy-dependencies` into a cache, a minimal single-node configuration under the
//! data directory, the JVM flags Cassandra 5.0 needs on Java 17, readiness proven by the log line
//! and a real CQL query, and a clean stop (SIGTERM, SIGKILL after a timeout).

use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use nix::sys::signal::Signal;

use crate::sys;

/// The Cassandra isobench fetches unless told otherwise (`--version`, ISOBENCH_CASSANDRA_VERSION).
pub const DEFAULT_VERSION: &str = "5.0.9";

/// The line Cassandra logs once it accepts CQL clients.
const READY_LINE: &str = "Starting listening for CQL clients on";

/// Where fetched distributions live: $ISOBENCH_CACHE, else $XDG_CACHE_HOME/isobench, else
/// ~/.cache/isobench.
pub fn cache_root() -> PathBuf {
    if let Some(dir) = std::env::var_os("ISOBENCH_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("isobench");
    }
    PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/isobench")
}

pub fn default_version() -> String {
    std::env::var("ISOBENCH_CASSANDRA_VERSION").unwrap_or_else(|_| DEFAULT_VERSION.to_string())
}

/// A fetched Cassandra: its jars, and the class-data-sharing archive once one was made.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Distribution {
    pub version: String,
    pub home: PathBuf,
}

impl Distribution {
    pub fn lib(&self) -> PathBuf {
        self.home.join("lib")
    }

    /// The jars, in one order wherever the distribution is copied (`lib/*` would take the
    /// order of a directory listing, which differs between filesystems and breaks an archive).
    pub fn classpath(&self) -> Result<String> {
        let mut jars: Vec<String> = fs::read_dir(self.lib())
            .with_context(|| format!("reading {}", self.lib().display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "jar"))
            .map(|p| p.display().to_string())
            .collect();
        jars.sort();
        Ok(jars.join(":"))
    }

    /// The class-data-sharing archive for this Java and these jars (made at the first clean
    /// stop). Java checks an archive against the class path it was made with; its name holds
    /// a digest of that path, so a distribution that moved or changed makes a new one.
    pub fn cds_archive(&self) -> PathBuf {
        let path = self.classpath().unwrap_or_default();
        let digest = ring::digest::digest(&ring::digest::SHA256, path.as_bytes());
        let short: String = digest.as_ref()[..4].iter().map(|b| format!("{b:02x}")).collect();
        self.home.join(format!("cds-java{}-{short}.jsa", java_feature_version().unwrap_or(0)))
    }

    /// The cached distribution of `version`, if it was fetched completely.
    pub fn cached(version: &str) -> Option<Distribution> {
        let home = cache_root().join(format!("cassandra-{version}"));
        home.join("lib/.complete").exists().then(|| Distribution { version: version.to_string(), home })
    }

    /// Fetches `version` from Maven Central unless it is cached; `say` hears what happens.
    pub fn fetch(version: &str, say: &mut dyn FnMut(&str)) -> Result<Distribution> {
        if let Some(d) = Distribution::cached(version) {
            return Ok(d);
        }
        if !version.chars().all(|c| c.is_ascii_alphanumeric() || ".-".contains(c)) {
            bail!("Cassandra version \"{version}\" is not a version; use e.g. {DEFAULT_VERSION}");
        }
        let mvn = sys::find_program("mvn")
            .context("fetching Cassandra needs Maven (mvn) and Java 17; install them with `scripts/setup.sh demo` or `apt-get install maven openjdk-17-jre-headless`")?;
        let home = cache_root().join(format!("cassandra-{version}"));
        fs::create_dir_all(&home).with_context(|| format!("creating {}", home.display()))?;
        let pom = home.join("pom.xml");
        fs::write(&pom, POM.replace("VERSION", version)).with_context(|| format!("writing {}", pom.display()))?;
        let partial = home.join("lib.partial");
        let _ = fs::remove_dir_all(&partial);
        say(&format!("fetching Cassandra {version} and its dependencies from Maven Central into {}", home.display()));
        let started = Instant::now();
        let finished = sys::run(
            Command::new(mvn)
                .args(["-q", "-B", "-f"])
                .arg(&pom)
                .arg(format!("-Dmaven.repo.local={}", cache_root().join("m2").display()))
                .args(["dependency:copy-dependencies", "-DincludeScope=runtime"])
                .arg(format!("-DoutputDirectory={}", partial.display())),
            sys::Options { timeout: Some(Duration::from_secs(1800)), ..Default::default() },
        )?;
        if !finished.status.success() || !partial.join(format!("cassandra-all-{version}.jar")).exists() {
            bail!(
                "Maven could not fetch org.apache.cassandra:cassandra-all:{version} ({}):\n{}",
                finished.status,
                finished.tail(15)
            );
        }
        fs::write(partial.join(".complete"), format!("fetched in {:.1} s\n", started.elapsed().as_secs_f64()))?;
        let lib = home.join("lib");
        let _ = fs::remove_dir_all(&lib);
        fs::rename(&partial, &lib).with_context(|| format!("moving the jars to {}", lib.display()))?;
        say(&format!("fetched Cassandra {version} in {:.1} s", started.elapsed().as_secs_f64()));
        Ok(Distribution { version: version.to_string(), home })
    }
}

const POM: &str = r#"<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>isobench</groupId><artifactId>cassandra-fetch</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId><version>VERSION</version></dependency>
  </dependencies>
</project>
"#;

/// The major version of the `java` on PATH (17 for "17.0.15").
pub fn java_feature_version() -> Option<u32> {
    let out = Command::new("java").arg("-version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stderr);
    let quoted = text.split('"').nth(1)?;
    quoted.split(['.', '-', '+']).next()?.parse().ok()
}

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
    /// Clients log in (PasswordAuthenticator); the default superuser exists from the start.
    #[serde(default)]
    pub auth: bool,
    /// The cluster's seeds ("address:storage_port"); a node alone is its own seed.
    #[serde(default)]
    pub seeds: Vec<String>,
    /// The replication factor the token allocator balances the ring for.
    #[serde(default = "one")]
    pub token_rf: u32,
    /// Clients must speak TLS (`client_encryption_options`): the node's key is made with
    /// keytool on its first start; clients trust [`NodeConfig::certificate`].
    #[serde(default)]
    pub tls: bool,
    /// How long gossip waits on the ring (Cassandra's `ring_delay_ms`); a node that is not a
    /// seed gives up on reaching one after twice this.
    #[serde(default = "quick_ring")]
    pub ring_delay: Duration,
}

fn one() -> u32 {
    1
}

/// Nodes on one machine's loopback answer one another at once.
pub const QUICK_RING: Duration = Duration::from_millis(100);

fn quick_ring() -> Duration {
    QUICK_RING
}

/// The superuser Cassandra makes on its first start with PasswordAuthenticator.
pub const DEFAULT_LOGIN: (&str, &str) = ("cassandra", "cassandra");

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
            auth: false,
            seeds: Vec::new(),
            token_rf: 1,
            tls: false,
            ring_delay: QUICK_RING,
        })
    }

    /// The node's own address: where it gossips, and where clients inside reach it.
    pub fn local_address(&self) -> &str {
        if self.address == "0.0.0.0" { "127.0.0.1" } else { &self.address }
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
num_tokens: 16
allocate_tokens_for_local_replication_factor: {token_rf}
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
            token_rf = self.token_rf,
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

    /// Writes cassandra.yaml and logback.xml under `data/conf`.
    fn write(&self) -> Result<PathBuf> {
        let conf = self.data.join("conf");
        for dir in [&conf, &self.data.join("logs")] {
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

/// The java command line (Cassandra 5.0's jvm17-server.options, trimmed to what matters here).
fn java_command(dist: &Distribution, cfg: &NodeConfig, conf: &Path, cds: &Cds) -> Result<Command> {
    let lib = dist.lib();
    let jamm = fs::read_dir(&lib)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("jamm-") && n.ends_with(".jar")))
        .with_context(|| format!("{} has no jamm jar: fetch again (remove {})", lib.display(), dist.home.display()))?;
    let mut cmd = Command::new("java");
    cmd.arg(format!("-Xms{}", cfg.heap)).arg(format!("-Xmx{}", cfg.heap)).arg("-Xss256k");
    if cfg.quick_jit {
        cmd.arg("-XX:TieredStopAtLevel=1");
    }
    match cds {
        Cds::Use(archive) => {
            cmd.arg(format!("-XX:SharedArchiveFile={}", archive.display()));
        }
        Cds::Create(partial) => {
            cmd.args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+AllowArchivingWithJavaAgent"])
                .arg(format!("-XX:ArchiveClassesAtExit={}", partial.display()));
        }
        Cds::None => {}
    }
    cmd.args([
        "-XX:+UseG1GC",
        "-XX:+ParallelRefProcEnabled",
        "-XX:MaxTenuringThreshold=1",
        "-XX:G1HeapRegionSize=16m",
        "-XX:+UseTLAB",
        "-XX:+ResizeTLAB",
        "-XX:+PerfDisableSharedMem",
        "-ea",
        "-Djava.net.preferIPv4Stack=true",
        "-Djdk.attach.allowAttachSelf=true",
    ]);
    for export in [
        "java.base/jdk.internal.misc",
        "java.management.rmi/com.sun.jmx.remote.internal.rmi",
        "java.rmi/sun.rmi.registry",
        "java.rmi/sun.rmi.server",
        "java.sql/java.sql",
        "java.base/java.lang.ref",
        "jdk.unsupported/sun.misc",
        "jdk.compiler/com.sun.tools.javac.file",
        "jdk.attach/sun.tools.attach",
    ] {
        cmd.arg("--add-exports").arg(format!("{export}=ALL-UNNAMED"));
    }
    for open in [
        "java.base/java.lang.module",
        "java.base/jdk.internal.loader",
        "java.base/jdk.internal.ref",
        "java.base/jdk.internal.reflect",
        "java.base/jdk.internal.math",
        "java.base/jdk.internal.module",
        "java.base/jdk.internal.util.jar",
        "jdk.management/com.sun.management.internal",
        "java.base/sun.nio.ch",
        "java.base/java.io",
        "java.base/java.lang.reflect",
        "jdk.compiler/com.sun.tools.javac",
        "java.base/java.lang",
        "java.base/java.util",
    ] {
        cmd.arg("--add-opens").arg(format!("{open}=ALL-UNNAMED"));
    }
    cmd.args([
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dio.netty.allocator.useCacheForAllThreads=true",
        "-Dio.netty.allocator.maxOrder=11",
    ])
    .arg(format!("-javaagent:{}", jamm.display()))
    .arg(format!("-Dcassandra.config=file://{}/cassandra.yaml", conf.display()))
    .arg(format!("-Dlogback.configurationFile=file://{}/logback.xml", conf.display()))
    .arg(format!("-Dcassandra.logdir={}/logs", cfg.data.display()))
    .arg(format!("-Dcassandra.storagedir={}", cfg.data.display()))
    .args(["-Dcassandra-foreground=yes", "-Dcassandra.skip_wait_for_gossip_to_settle=0"])
    .arg(format!("-Dcassandra.ring_delay_ms={}", cfg.ring_delay.as_millis()))
    .arg(format!("-Dcassandra.jmx.local.port={}", cfg.jmx_port))
    // With logins, the default superuser is made at once rather than 10 s after start.
    .args(cfg.auth.then_some("-Dcassandra.superuser_setup_delay_ms=0"))
    .args(&cfg.jvm_args)
    .arg("-cp")
    .arg(dist.classpath()?)
    .arg("org.apache.cassandra.service.CassandraDaemon");
    Ok(cmd)
}

/// Class-data sharing: use the archive if there is one, else make one at this node's exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Cds {
    Use(PathBuf),
    Create(PathBuf),
    None,
}

impl Cds {
    fn for_distribution(dist: &Distribution, make: bool) -> Cds {
        let archive = dist.cds_archive();
        if archive.exists() {
            return Cds::Use(archive);
        }
        if !make {
            return Cds::None;
        }
        let partial = archive.with_extension(format!("jsa.{}", std::process::id()));
        Cds::Create(partial)
    }

    /// After a clean exit: the archive the JVM wrote becomes the one later starts use.
    fn settle(&self, dist: &Distribution) {
        if let Cds::Create(partial) = self {
            if partial.metadata().is_ok_and(|m| m.len() > 0) && !dist.cds_archive().exists() {
                let _ = fs::rename(partial, dist.cds_archive());
            }
            let _ = fs::remove_file(partial);
        }
    }
}

/// A running node.
#[derive(Debug, Serialize, Deserialize)]
pub struct Node {
    pub pid: i32,
    pub config: NodeConfig,
    pub distribution: Distribution,
    pub cds: Cds,
    /// From spawning java to the first successful CQL query.
    pub ready_after: Duration,
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
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command's closing parenthesis start at field 3 (state).
        let start_ticks = stat.rsplit(')').next()?.split_whitespace().nth(19)?.parse().ok()?;
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
            release_version: String::new(),
            identity: Identity::of(pid),
            child: Some(child),
        };
        match node.wait_ready(started, how.timeout) {
            Ok(()) => Ok(node),
            Err(e) => {
                let _ = node.stop(Duration::from_secs(10));
                Err(e)
            }
        }
    }

    fn wait_ready(&mut self, started: Instant, timeout: Duration) -> Result<()> {
        let address = format!("{}:{}", self.config.local_address(), self.config.native_port);
        loop {
            if let Some(child) = &mut self.child
                && let Some(status) = child.try_wait()?
            {
                bail!("Cassandra exited ({status}) before it accepted CQL clients. {}", self.failure_excerpt());
            }
            if started.elapsed() > timeout {
                bail!(
                    "Cassandra did not accept CQL clients on {address} within {} s. {}",
                    timeout.as_secs(),
                    self.failure_excerpt()
                );
            }
            if sys::interrupted() {
                return Err(sys::Interrupted.into());
            }
            if read_text(&self.config.stdout_log()).contains(READY_LINE)
                && let Ok(version) = cql_probe(
                    &address,
                    self.config.auth.then_some(DEFAULT_LOGIN),
                    self.config.tls.then(|| self.config.certificate()).as_deref(),
                )
            {
                self.ready_after = started.elapsed();
                self.release_version = version;
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
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

fn read_text(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut f) = fs::File::open(path) {
        let _ = f.read_to_string(&mut text);
    }
    text
}

/// Makes `user` a superuser who logs in with `password`, as the default superuser: the role a
/// suite's load logs in as. With `auth_rf` above 1 the roles are first replicated to that many
/// nodes, so that logins outlive a node's loss. The statement is not logged anywhere.
pub fn create_role(address: &str, user: &str, password: &str, auth_rf: u32, trust: Option<&Path>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let attempt = || {
        runtime.block_on(async {
            let session = session(address, Some(DEFAULT_LOGIN), trust, Duration::from_secs(5))
                .await
                .context("logging in as Cassandra's default superuser")?;
            if auth_rf > 1 {
                let statement = format!(
                    "ALTER KEYSPACE system_auth WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {auth_rf}}}"
                );
                session.query_unpaged(statement, ()).await.context("replicating the roles")?;
            }
            let statement = format!(
                "CREATE ROLE IF NOT EXISTS \"{}\" WITH PASSWORD = '{}' AND LOGIN = true AND SUPERUSER = true",
                user.replace('"', "\"\""),
                password.replace('\'', "''")
            );
            session.query_unpaged(statement, ()).await.context(format!("creating the role \"{user}\""))?;
            anyhow::Ok(())
        })
    };
    // A ring that has just formed on a loaded machine times out writes at the roles' quorum now
    // and then; both statements may simply be made again.
    let began = Instant::now();
    loop {
        match attempt() {
            Ok(()) => return Ok(()),
            Err(_) if began.elapsed() < Duration::from_secs(60) && !sys::interrupted() => {
                std::thread::sleep(Duration::from_secs(1))
            }
            // The server's own words, never the statement (it holds the password).
            Err(e) => bail!("{}", format!("{e:#}").replace(password, "REDACTED")),
        }
    }
}

/// A CQL session to one node, logging in as `login` and trusting `trust` (a PEM certificate)
/// when given.
async fn session(
    address: &str,
    login: Option<(&str, &str)>,
    trust: Option<&Path>,
    timeout: Duration,
) -> Result<scylla::client::session::Session> {
    let mut builder =
        scylla::client::session_builder::SessionBuilder::new().known_node(address).connection_timeout(timeout);
    if let Some((user, password)) = login {
        builder = builder.user(user, password);
    }
    if let Some(certificate) = trust {
        let transport = crate::cql::tls::Transport {
            truststore: Some(certificate.to_path_buf()),
            protocol: "TLS".into(),
            ..Default::default()
        };
        builder = builder.tls_context(Some(std::sync::Arc::new(transport.client_config()?)));
    }
    Ok(tokio::time::timeout(timeout + Duration::from_secs(2), builder.build()).await.context("timed out")??)
}

/// Connects with the CQL driver (logging in as `login`, if given) and reads `release_version`:
/// proof that CQL is served.
pub fn cql_probe(address: &str, login: Option<(&str, &str)>, trust: Option<&Path>) -> Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let session = session(address, login, trust, Duration::from_secs(3)).await?;
        let rows = session.query_unpaged("SELECT release_version FROM system.local", ()).await?.into_rows_result()?;
        let (version,): (Option<String>,) = rows.first_row()?;
        Ok(version.unwrap_or_default())
    })
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
