//! The java command line Cassandra 5.0 needs on Java 17, and its class-data-sharing archive.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{Distribution, NodeConfig};

/// The java command line (Cassandra 5.0's jvm17-server.options, trimmed to what matters here).
pub(super) fn java_command(dist: &Distribution, cfg: &NodeConfig, conf: &Path, cds: &Cds) -> Result<Command> {
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
    // The archive is made with the jamm agent loaded, and the JVM maps it only when the setting
    // that allowed that is the same at its use: without it, it says so in its cds log alone and
    // starts without the archive.
    let with_agent = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+AllowArchivingWithJavaAgent"];
    match cds {
        Cds::Use(archive) => cmd.args(with_agent).arg(format!("-XX:SharedArchiveFile={}", archive.display())),
        Cds::Create(partial) => cmd.args(with_agent).arg(format!("-XX:ArchiveClassesAtExit={}", partial.display())),
        Cds::None => &mut cmd,
    };
    cmd.args(row_overhead_flag(dist, cfg));
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
    open_modules(&mut cmd);
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
    .arg(format!("-Djava.io.tmpdir={}", cfg.tmp().display()))
    .args(["-Dcassandra-foreground=yes", "-Dcassandra.skip_wait_for_gossip_to_settle=0"])
    .arg(format!("-Dcassandra.ring_delay_ms={}", cfg.ring_delay.as_millis()))
    .args(cfg.serves_jmx().then(|| format!("-Dcassandra.jmx.local.port={}", cfg.jmx_port)))
    // The default superuser is made at once rather than 10 s after start: with logins, so that
    // it can log in; on a node alone, so that its password's hashing (bcrypt, 1,024 rounds,
    // interpreted under gVisor on the node's one CPU: 6-12 % of a read's sampled CPU) is part of
    // its start and load, not of its measured phase, which it fell in or not by the start's
    // length. A ring's seeds must agree on it first, so a ring without logins keeps the delay.
    .args((cfg.auth || cfg.ring.nodes <= 1).then_some("-Dcassandra.superuser_setup_delay_ms=0"))
    // A fresh node makes its system keyspaces and flushes them table by table (some 25
    // blocking flushes, each with its fsyncs: 0.9 s of a 4.6 s start on the host, 2.4 s of 8.5 s
    // in gVisor), a cost a user's node pays once in its life. Without the flushes those writes
    // are in the commit log only, which a restart replays after it has loaded the schema from
    // the flushed tables: a node killed and started again would not know its tables. So only
    // for a node that is never started again; the drain at its clean stop still flushes them.
    .args(cfg.one_run.then_some("-Dcassandra.unsafesystem=true"))
    // At shutdown gossip sleeps so that its peers hear of it (a node alone has none), and
    // messaging waits for its connections to drain: to the netty loops' quiet period, which a
    // ring stopping together keeps breaking with reconnections (a ring's stop 12.7 s here, 8.8 s
    // of it that wait; a node alone's 4.1 s of 6.3 s). The stop comes after the load, with no
    // message in flight to wait for; the drain's flushes still happen.
    .args((cfg.ring.nodes <= 1).then_some("-Dcassandra.shutdown_announce_in_ms=0"))
    .arg("-Dcassandra.test.messagingService.nonGracefulShutdown=true")
    // The JVM sizes its threads for the CPUs it will run on, not those it starts on. Not one of
    // `jvm_args`: it changes no object's layout, so the kept row overhead still holds.
    .args(cfg.processors.map(|n| format!("-XX:ActiveProcessorCount={n}")))
    .args(&cfg.jvm_args)
    .arg("-cp")
    .arg(dist.classpath()?)
    .arg("org.apache.cassandra.service.CassandraDaemon");
    Ok(cmd)
}

/// What Cassandra 5.0's jvm17-server.options exports and opens to its code on Java 17.
fn open_modules(cmd: &mut Command) {
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
}

/// Class-data sharing: use the archive if there is one, else make one at this node's exit.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Cds {
    Use(PathBuf),
    Create(PathBuf),
    None,
}

impl Cds {
    pub(super) fn for_distribution(dist: &Distribution, make: bool) -> Cds {
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
    /// Archives of other JVM builds, 60 MB each, go once this one is in place.
    pub(super) fn settle(&self, dist: &Distribution) {
        if let Cds::Create(partial) = self {
            let archive = dist.cds_archive();
            if partial.metadata().is_ok_and(|m| m.len() > 0) && !archive.exists() {
                let _ = fs::rename(partial, &archive);
            }
            let _ = fs::remove_file(partial);
            if archive.exists() {
                remove_stale_archives(&archive);
            }
        }
    }
}

/// Removes the archives (and their row overheads) beside `current` that other JVM builds made.
fn remove_stale_archives(current: &Path) {
    let (Some(dir), Some(stem)) = (current.parent(), current.file_stem()) else { return };
    let Ok(entries) = fs::read_dir(dir) else { return };
    for path in entries.filter_map(|e| e.ok().map(|e| e.path())) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let archive_or_overhead = name.ends_with(".jsa") || name.ends_with(".row-overhead");
        if name.starts_with("cds-java") && archive_or_overhead && path.file_stem() != Some(stem) {
            let _ = fs::remove_file(path);
        }
    }
}

/// The line in which Cassandra gives the memtable row overhead it measured at start.
const ROW_OVERHEAD_LINE: &str = "Estimated SkipListMemtable row overhead: ";

/// Cassandra measures a memtable row's overhead at every start by filling a skip list with
/// 100,000 rows and weighing it (0.8 s of a 7 s start on 2 cores). The figure depends only on
/// the JVM's object layout, so the first start's, read from its log, is kept beside the class-data
/// sharing archive and handed to later starts, which then skip the measurement. Not for heaps of
/// 31 GiB or more (no compressed pointers) or a user's own JVM flags, which may change the layout.
pub(super) fn row_overhead_flag(dist: &Distribution, cfg: &NodeConfig) -> Option<String> {
    if !default_layout(cfg) {
        return None;
    }
    let bytes: u32 = fs::read_to_string(row_overhead_file(dist)).ok()?.trim().parse().ok()?;
    Some(format!("-Dcassandra.memtable.row_overhead_size={bytes}"))
}

/// Keeps the overhead a start measured (`log`: its output) for later starts, if none is kept.
pub(super) fn keep_row_overhead(dist: &Distribution, cfg: &NodeConfig, log: &str) {
    let file = row_overhead_file(dist);
    if !default_layout(cfg) || file.exists() {
        return;
    }
    let measured = log.lines().find_map(|l| l.split_once(ROW_OVERHEAD_LINE)).map(|(_, n)| n.trim());
    if let Some(bytes) = measured.and_then(|n| n.parse::<u32>().ok()) {
        // Best effort: a sandbox sees the distribution read-only, and the next start measures.
        let _ = crate::sys::write_atomic(&file, bytes.to_string().as_bytes());
    }
}

fn row_overhead_file(dist: &Distribution) -> PathBuf {
    dist.cds_archive().with_extension("row-overhead")
}

fn default_layout(cfg: &NodeConfig) -> bool {
    cfg.jvm_args.is_empty() && figures::units::parse_size(&cfg.heap).is_ok_and(|b| b < 31 << 30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::cassandra::RingSlot;

    #[test]
    fn a_new_archive_removes_the_ones_of_other_jvm_builds_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let names = [
            "cds-java17-aaaa.jsa",
            "cds-java17-aaaa.row-overhead",
            "cds-java17-bbbb.jsa",
            "cds-java17-bbbb.row-overhead",
            "cds-java17-bbbb.jsa.4242",
            "lib",
        ];
        for name in names {
            fs::write(dir.path().join(name), "x").unwrap();
        }
        remove_stale_archives(&dir.path().join("cds-java17-aaaa.jsa"));
        let mut left: Vec<String> =
            fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        // Another start's archive in the making (".jsa.PID") stays.
        assert_eq!(left, ["cds-java17-aaaa.jsa", "cds-java17-aaaa.row-overhead", "cds-java17-bbbb.jsa.4242", "lib"]);
    }

    /// A cell's node alone, moved to one CPU for its measured phase: told of that CPU, still
    /// handed the kept row overhead (the CPU count changes no object's layout), and without a
    /// JMX server, which nothing asks of it; a ring's node and `server start`'s serve JMX.
    #[test]
    fn a_cells_node_is_told_its_cpus_keeps_the_row_overhead_and_serves_no_jmx() {
        let home = tempfile::tempdir().unwrap();
        let dist = Distribution { version: "5.0.9".into(), home: home.path().to_path_buf() };
        fs::create_dir_all(dist.lib()).unwrap();
        fs::write(dist.lib().join("jamm-0.4.0.jar"), "").unwrap();
        fs::write(row_overhead_file(&dist), "181").unwrap();
        let base = NodeConfig::local(&home.path().join("data"), 19042).unwrap();
        let args = |cfg: &NodeConfig| -> Vec<String> {
            let cmd = java_command(&dist, cfg, Path::new("/conf"), &Cds::None).unwrap();
            cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect()
        };
        let cell = NodeConfig { one_run: true, processors: Some(1), ..base.clone() };
        let cell = args(&cell);
        assert!(cell.contains(&"-XX:ActiveProcessorCount=1".to_string()), "{cell:?}");
        assert!(cell.contains(&"-Dcassandra.memtable.row_overhead_size=181".to_string()), "{cell:?}");
        assert!(!cell.iter().any(|a| a.starts_with("-Dcassandra.jmx.local.port")), "{cell:?}");
        let ring = NodeConfig { one_run: true, ring: RingSlot { index: 1, nodes: 3 }, ..base.clone() };
        for served in [args(&ring), args(&base)] {
            assert!(served.iter().any(|a| a.starts_with("-Dcassandra.jmx.local.port=")), "{served:?}");
            assert!(!served.iter().any(|a| a.starts_with("-XX:ActiveProcessorCount")), "{served:?}");
        }
    }
}
