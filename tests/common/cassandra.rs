//! A real Cassandra for the tests: fetched from Maven Central (once, into the cache), started
//! with C1 only (it starts twice as fast; the tests measure behaviour, not speed), its data under
//! target/. One node serves the whole test binary; a test that must kill a node starts its own.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use isobench::server::cassandra::{Distribution, Node, NodeConfig, Start, default_version};
use isobench::sys::free_port;

use super::{Missing, missing};

/// Where a started node answers.
#[derive(Clone, Debug)]
pub struct TestNode {
    pub port: u16,
    pub pid: i32,
    pub data: PathBuf,
}

impl TestNode {
    /// cassandra-stress arguments that point at this node.
    pub fn target(&self) -> Vec<String> {
        ["-node", "127.0.0.1", "-port", &format!("native={}", self.port)].map(String::from).to_vec()
    }
}

/// Why Cassandra cannot run here, if it cannot.
pub fn unavailable() -> Option<Missing> {
    isobench::server::cassandra::java_feature_version()
        .is_none()
        .then(|| missing("java", "java is not installed (scripts/setup.sh test installs openjdk-17-jre-headless)"))
}

/// Starts a node that lives as long as the test binary: it is started from a thread that never
/// ends, because the kernel's parent-death signal, which kills it with the tests, fires when
/// the *thread* that spawned it exits.
pub fn start_node(name: &str) -> Result<TestNode, Missing> {
    start_node_with(name, |_| {})
}

/// [`start_node`], its configuration changed by `configure` first. Only a missing capability
/// is an `Err` (a skip): a node that cannot start where it could fails the test.
pub fn start_node_with(name: &str, configure: fn(&mut NodeConfig)) -> Result<TestNode, Missing> {
    if let Some(missing) = unavailable() {
        return Err(missing);
    }
    let (tx, rx) = mpsc::channel();
    let name = name.to_string();
    std::thread::spawn(move || {
        let started = (|| -> anyhow::Result<TestNode> {
            let dist = Distribution::fetch(&default_version(), &mut |m| eprintln!("{m}"))?;
            let data =
                PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("cassandra-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&data);
            let mut config = NodeConfig::local(&data, free_port()?)?;
            config.quick_jit = true;
            config.heap = "768M".into();
            configure(&mut config);
            let node = Node::start(
                &dist,
                &config,
                Start { token: None, detached: false, timeout: Duration::from_secs(240), make_archive: true },
            )?;
            eprintln!(
                "test Cassandra {name} up on port {} after {:.1} s",
                config.native_port,
                node.ready_after.as_secs_f64()
            );
            Ok(TestNode { port: config.native_port, pid: node.pid, data })
        })();
        let failed = started.is_err();
        let _ = tx.send(started.map_err(|e| format!("{e:#}")));
        if !failed {
            loop {
                std::thread::park();
            }
        }
    });
    match rx.recv() {
        Ok(Ok(node)) => Ok(node),
        Ok(Err(e)) => panic!("the test Cassandra did not start: {e}"),
        Err(_) => panic!("the thread starting Cassandra died"),
    }
}

/// The node the tests share, started on first use.
pub fn shared() -> Result<TestNode, Missing> {
    static NODE: OnceLock<Result<TestNode, Missing>> = OnceLock::new();
    NODE.get_or_init(|| start_node("shared")).clone()
}

/// Why isobench cannot manage a Cassandra here (`isobench server`, `[[server]]`), if it cannot.
pub fn unable_to_manage() -> Option<Missing> {
    super::need_root("mounts").or_else(unavailable).or_else(|| super::need_program("mvn", "maven"))
}

/// Java processes whose command line names this sandbox (their data or configuration).
pub fn javas(sb: &super::Scratch) -> Vec<String> {
    sb.processes().into_iter().filter(|p| p.contains("java")).collect()
}

/// `SELECT COUNT(*)` at QUORUM with the test's own CQL client, not isobench's.
pub fn count_at_quorum(node: &str, port: u16, table: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let session = scylla::client::session_builder::SessionBuilder::new()
            .known_node(format!("{node}:{port}"))
            .build()
            .await
            .unwrap();
        let mut count = scylla::statement::unprepared::Statement::new(format!("SELECT COUNT(*) FROM {table}"));
        count.set_consistency(scylla::statement::Consistency::Quorum);
        count.set_request_timeout(Some(Duration::from_secs(60)));
        let rows = session.query_unpaged(count, ()).await.unwrap();
        let (n,): (i64,) = rows.into_rows_result().unwrap().first_row().unwrap();
        n
    })
}
