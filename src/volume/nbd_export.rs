//! What the network volumes (`nbd`, `mirror`) are made of: storage nodes (an nbdkit exporting a
//! backing file, on the host's loopback or in a network namespace of its own reached over a
//! veth pair, with its latency and bandwidth shaped), qemu-storage-daemon (NBD client nodes, a
//! quorum nexus, NBD and FUSE exports, QMP events), and the ways a workload reaches an export:
//! fio's nbd engine or QEMU's client (no host device), the kernel's NBD client, or a FUSE export
//! with a loop device over it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::block::{attach_loop, mkfs, mount};
use super::{BlockSource, NbdExport, ProvisionContext, Provisioned};
use crate::ledger::Resource;
use crate::net::{self, NetPath};
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};

pub const QSD: &str = "qemu-storage-daemon";

/// Where a storage node runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    /// On the host's loopback.
    Local,
    /// In a network namespace of its own, reached over a veth pair: "the storage node".
    Netns,
}

/// How a storage node's network is shaped.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Shaping {
    /// Added to every read and write.
    pub latency: Option<Duration>,
    /// A cap on the node's bandwidth, in bits per second.
    pub bandwidth: Option<u64>,
    /// How long a client may send at any speed after an idle spell before the cap holds (a
    /// token bucket's size): nbdkit's rate filter allows 2 s unless told.
    pub burst: Option<Duration>,
}

/// How the workload reaches the volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// fio's nbd engine or QEMU's client where the environment speaks NBD and the volume is
    /// raw; otherwise the kernel's NBD client where there is one, else FUSE + loop.
    Auto,
    FioNbd,
    Fuse,
    Kernel,
}

/// The keys every network volume has: `size`, `where`, `latency`, `bandwidth`, `burst`, `fs`, `access`,
/// `mkfs_args`, `mount_options`.
#[derive(Clone, Debug)]
pub struct Common {
    pub size: u64,
    pub place: Where,
    pub shaping: Shaping,
    pub fs: Option<String>,
    pub access: Access,
    pub mkfs_args: Vec<String>,
    pub mount_options: Option<String>,
}

impl Common {
    pub fn parse(f: &mut Fields, default_where: Where) -> Result<Common, SuiteError> {
        let size = f.size("size")?.unwrap_or(4 << 30);
        let place = match f.choice("where", &["local", "netns"])?.as_deref() {
            Some("local") => Where::Local,
            Some(_) => Where::Netns,
            None => default_where,
        };
        let latency = f.duration("latency")?;
        let bandwidth = match f.str("bandwidth")? {
            Some(text) => Some(parse_bits(&text).map_err(|e| f.error_at("bandwidth", e))?),
            None => None,
        };
        let burst = f.duration("burst")?;
        if burst.is_some() && bandwidth.is_none() {
            return Err(f.error_at("burst", "is how long a client may exceed the bandwidth: give bandwidth too"));
        }
        if burst.is_some_and(|b| b.is_zero()) {
            return Err(f.error_at("burst", "must be more than zero, e.g. \"100ms\""));
        }
        let fs = f.choice("fs", &["none", "ext4", "xfs"])?.filter(|fs| fs != "none");
        let access = match f.choice("access", &["auto", "fio-nbd", "fuse", "kernel"])?.as_deref() {
            Some("fio-nbd") => Access::FioNbd,
            Some("fuse") => Access::Fuse,
            Some("kernel") => Access::Kernel,
            _ => Access::Auto,
        };
        if access == Access::FioNbd && fs.is_some() {
            return Err(f.error_at("access", "fio's nbd engine reaches the raw export: it needs fs = \"none\""));
        }
        let mkfs_args = f.str_list("mkfs_args")?.unwrap_or_default();
        let mount_options = f.str("mount_options")?;
        if fs.is_none() && (!mkfs_args.is_empty() || mount_options.is_some()) {
            let key = if mount_options.is_some() { "mount_options" } else { "mkfs_args" };
            return Err(f.error_at(key, "applies to a filesystem; set fs = \"ext4\" or \"xfs\""));
        }
        Ok(Common { size, place, shaping: Shaping { latency, bandwidth, burst }, fs, access, mkfs_args, mount_options })
    }

    /// Why this volume cannot be made here, if it cannot.
    pub fn unavailable(&self, needs_qsd: bool) -> Option<String> {
        if let Some(why) = crate::sys::needs_root() {
            return Some(why);
        }
        if find_program("nbdkit").is_none() {
            return Some("nbdkit is not installed (apt-get install nbdkit)".into());
        }
        if needs_qsd && find_program(QSD).is_none() {
            return Some(format!("{QSD} is not installed (apt-get install qemu-system-common)"));
        }
        if self.place == Where::Netns
            && let Some(why) = net::namespaces_unavailable()
        {
            return Some(why);
        }
        if let Some(latency) = self.shaping.latency
            && let Some(why) = latency_unavailable(latency, self.place)
        {
            return Some(why);
        }
        match self.access {
            Access::Kernel => kernel_nbd_unavailable(),
            Access::Fuse => fuse_unavailable(),
            _ => None,
        }
    }
}

/// "1Gbit", "500Mbit", "100M" (bits) → bits per second.
fn parse_bits(text: &str) -> Result<u64, String> {
    let t = text.trim().trim_end_matches("/s").trim_end_matches("bit").trim_end_matches("bps");
    let (number, scale) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(n) if n > 0.0 && n * scale <= figures::units::MAX_BITS_PER_SECOND => Ok((n * scale) as u64),
        _ => Err(format!("\"{text}\" is not a bandwidth; write bits per second like \"1Gbit\" or \"500Mbit\"")),
    }
}

/// Whether netem can shape a link here (a probe on a dummy qdisc would need a link; the module
/// is what decides).
fn netem_present() -> bool {
    Path::new("/sys/module/sch_netem").exists() || sys::command_output("modprobe", &["-n", "sch_netem"]).is_ok()
}

/// nbdkit's version, as (major, minor).
fn nbdkit_version() -> Option<(u32, u32)> {
    let out = sys::command_output("nbdkit", &["--version"]).ok()?;
    let v = out.split_whitespace().nth(1)?;
    let mut parts = v.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// Why `latency` cannot be added here: netem (any latency) is not in this kernel, and nbdkit's
/// delay filter below 1.40 delays in whole milliseconds only.
fn latency_unavailable(latency: Duration, place: Where) -> Option<String> {
    if place == Where::Netns && netem_present() {
        return None;
    }
    let whole_ms = latency.as_micros().is_multiple_of(1000);
    let fine = nbdkit_version().is_some_and(|v| v >= (1, 40));
    (!whole_ms && !fine).then(|| {
        format!(
            "latency = {:?} needs netem (not in this kernel) or nbdkit ≥ 1.40 (this one delays in whole milliseconds only); give whole milliseconds",
            latency
        )
    })
}

pub fn kernel_nbd_unavailable() -> Option<String> {
    if !(Path::new("/sys/module/nbd").exists() || Path::new("/dev/nbd0").exists()) {
        return Some("this kernel has no NBD client (no nbd module)".into());
    }
    find_program("nbd-client").is_none().then(|| "nbd-client is not installed (apt-get install nbd-client)".into())
}

fn fuse_unavailable() -> Option<String> {
    if !Path::new("/dev/fuse").exists() {
        return Some("there is no /dev/fuse".into());
    }
    find_program(QSD).is_none().then(|| format!("{QSD} is not installed (apt-get install qemu-system-common)"))
}

/// A storage node: an nbdkit exporting its backing file.
pub struct Node {
    pub export: NbdExport,
    pub backing: PathBuf,
    pub facts: BTreeMap<String, String>,
}

/// Starts storage node `index`: its backing file (in the run's directory, or in a directory of
/// its own under `home`: a disk of its own), its namespace (for `Where::Netns`) and its nbdkit,
/// everything recorded first; waits until it listens.
pub fn start_node(ctx: &ProvisionContext, common: &Common, index: usize, home: Option<&Path>) -> Result<Node> {
    let (dir, backing) = node_disk(ctx, common, index, home)?;
    let (address, netns) = match common.place {
        Where::Local => (Ipv4Addr::LOCALHOST, None),
        Where::Netns => match net::namespace(ctx.ledger)? {
            NetPath::Namespace { name, host_if, sandbox, .. } => (sandbox, Some((name, host_if))),
            other => bail!("a storage node needs a namespace, not {other:?}"),
        },
    };
    let port = crate::sys::free_port()?;
    let shaping = match &netns {
        Some((_, host_if)) if netem_present() => netem_shaping(common, host_if)?,
        _ => nbdkit_shaping(common),
    };
    let namespace = netns.as_ref().map(|(name, _)| name.as_str());
    spawn_nbdkit(ctx, &dir, &backing, namespace, address, port, &shaping)?;
    let mut facts = BTreeMap::new();
    facts.insert(
        format!("volume.node.{index}"),
        format!(
            "nbdkit {} on {address}:{port}{}",
            nbdkit_version().map(|(a, b)| format!("{a}.{b}")).unwrap_or_default(),
            netns.as_ref().map(|(n, h)| format!(" in namespace {n} (veth {h})")).unwrap_or_default()
        ),
    );
    if !shaping.described.is_empty() {
        facts.insert(format!("volume.node.{index}.shaping"), shaping.described.join("; "));
    }
    Ok(Node { export: NbdExport { host: address, port, name: String::new(), size: common.size }, backing, facts })
}

/// The node's directory (under `home` when its disk lives on another filesystem) and its
/// sparse backing file of the volume's size.
fn node_disk(ctx: &ProvisionContext, common: &Common, index: usize, home: Option<&Path>) -> Result<(PathBuf, PathBuf)> {
    let dir = match home {
        Some(home) => {
            let run = ctx.run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            home.join(format!("isobench-{run}-node-{index}"))
        }
        None => ctx.run_dir.join(format!("node-{index}")),
    };
    ctx.ledger.record(Resource::Dir { path: dir.clone() })?;
    std::fs::create_dir_all(&dir)?;
    let backing = dir.join("disk.img");
    ctx.ledger.record(Resource::File { path: backing.clone() })?;
    std::fs::File::create(&backing)
        .and_then(|f| f.set_len(common.size))
        .with_context(|| format!("creating {}", backing.display()))?;
    Ok((dir, backing))
}

/// The latency and bandwidth a node adds: nbdkit's filters and their parameters, and what they
/// do in words.
#[derive(Default)]
struct Shaper {
    filters: Vec<&'static str>,
    params: Vec<String>,
    described: Vec<String>,
}

/// netem on the host's end of the node's veth: every request the host sends waits there.
fn netem_shaping(common: &Common, host_if: &str) -> Result<Shaper> {
    let mut shape = Vec::new();
    if let Some(l) = common.shaping.latency {
        shape.extend(["delay".to_string(), format!("{}us", l.as_micros())]);
    }
    if let Some(b) = common.shaping.bandwidth {
        shape.extend(["rate".to_string(), format!("{b}bit")]);
    }
    let mut shaping = Shaper::default();
    if !shape.is_empty() {
        let mut args = vec!["qdisc", "add", "dev", host_if, "root", "netem"];
        args.extend(shape.iter().map(String::as_str));
        sys::command_output("tc", &args)?;
        let burst =
            if common.shaping.burst.is_some() { " (netem's rate has no burst: burst does not apply)" } else { "" };
        shaping.described.push(format!("netem on {host_if}: {}{burst}", shape.join(" ")));
    }
    Ok(shaping)
}

/// nbdkit's own delay and rate filters, where there is no netem (or no namespace).
fn nbdkit_shaping(common: &Common) -> Shaper {
    let mut shaping = Shaper::default();
    if let Some(l) = common.shaping.latency {
        shaping.filters.push("--filter=delay");
        let value = if l.as_micros().is_multiple_of(1000) {
            format!("{}ms", l.as_millis())
        } else {
            format!("{}us", l.as_micros())
        };
        shaping.params.push(format!("delay-read={value}"));
        shaping.params.push(format!("delay-write={value}"));
        shaping.described.push(format!("nbdkit delay filter: {value} on every read and write"));
    }
    if let Some(b) = common.shaping.bandwidth {
        shaping.filters.push("--filter=rate");
        shaping.params.push(format!("rate={b}"));
        let burst = match common.shaping.burst {
            Some(d) => {
                shaping.params.push(format!("burstiness={}", d.as_secs_f64()));
                format!("{} s", d.as_secs_f64())
            }
            None => "2 s, its default".into(),
        };
        shaping.described.push(format!("nbdkit rate filter: {b} bit/s, bursts of {burst} after an idle spell"));
    }
    shaping
}

/// nbdkit serving `backing` on `address:port` (inside `namespace`, if given), under a process
/// token of the ledger's, once it listens; its log in `dir`.
fn spawn_nbdkit(
    ctx: &ProvisionContext,
    dir: &Path,
    backing: &Path,
    namespace: Option<&str>,
    address: Ipv4Addr,
    port: u16,
    shaping: &Shaper,
) -> Result<()> {
    let token = ctx.ledger.new_process_token();
    ctx.ledger.record(Resource::Processes { token: token.clone() })?;
    let log = dir.join("nbdkit.log");
    let mut cmd = match namespace {
        Some(name) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", name, "nbdkit"]);
            c
        }
        None => Command::new("nbdkit"),
    };
    cmd.args(["--foreground", "--exit-with-parent", "-i", &address.to_string(), "-p", &port.to_string()]);
    cmd.args(&shaping.filters).arg("file").arg(backing).args(&shaping.params);
    sys::prepare(&mut cmd, Some(&token));
    let log_file = std::fs::File::create(&log)?;
    cmd.stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
    let mut child = cmd.spawn().context("starting nbdkit (apt-get install nbdkit)")?;
    sys::Wait::new(format!("nbdkit to listen on {address}:{port}"), Duration::from_secs(15))
        .every(Duration::from_millis(20))
        .until(|| {
            if listening_in(child.id(), address, port) {
                return Ok(sys::Check::Done(()));
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "nbdkit exited ({status}): {}",
                    sys::tail_lines(&std::fs::read_to_string(&log).unwrap_or_default(), 5)
                );
            }
            Ok(sys::Check::NotYet(String::new()))
        })?;
    // The ledger's token stops it; this thread only reaps it then.
    sys::reap_in_background(child);
    Ok(())
}

/// Whether `address:port` is listening in the network namespace of process `pid`.
fn listening_in(pid: u32, address: Ipv4Addr, port: u16) -> bool {
    // `ip netns exec` execs nbdkit in place: its /proc/PID/net is the namespace's.
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).unwrap_or_default();
    let wanted = format!("{:08X}:{port:04X}", u32::from_ne_bytes(address.octets()));
    table.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3 && f[1] == wanted && f[3] == "0A"
    })
}

/// A running qemu-storage-daemon: its NBD export on the host's loopback (when it exports over
/// NBD), and where its QMP events go.
pub struct Daemon {
    pub export: Option<NbdExport>,
    pub events: PathBuf,
}

/// Starts qemu-storage-daemon with `blockdevs` (the last is the exported node `top`), exporting
/// `top` as the file `fuse_file` over FUSE when it is given, else over NBD on 127.0.0.1. Its QMP
/// events (quorum's reports of failing children) are appended to `run_dir/qmp-events.jsonl`.
pub fn start_daemon(
    ctx: &ProvisionContext,
    blockdevs: &[String],
    top: &str,
    size: u64,
    fuse_file: Option<&Path>,
) -> Result<Daemon> {
    // One export per daemon: an NBD and a FUSE export of one node conflict over resizing it.
    let port = crate::sys::free_port()?;
    let socket = ctx.run_dir.join("qmp.sock");
    let log = ctx.run_dir.join("qsd.log");
    let token = ctx.ledger.new_process_token();
    ctx.ledger.record(Resource::Processes { token: token.clone() })?;
    let mut cmd = Command::new(QSD);
    for b in blockdevs {
        cmd.args(["--blockdev", b]);
    }
    match fuse_file {
        Some(file) => {
            std::fs::File::create(file)?;
            ctx.ledger.record(Resource::Mount { target: file.to_path_buf() })?;
            cmd.args([
                "--export",
                &format!("type=fuse,id=fuse0,node-name={top},mountpoint={},writable=on", file.display()),
            ]);
        }
        None => {
            cmd.args(["--nbd-server", &format!("addr.type=inet,addr.host=127.0.0.1,addr.port={port}")]);
            cmd.args(["--export", &format!("type=nbd,id=nbd0,node-name={top},name={top},writable=on")]);
        }
    }
    cmd.args(["--chardev", &format!("socket,id=qmp,path={},server=on,wait=off", socket.display())]);
    cmd.args(["--monitor", "chardev=qmp"]);
    sys::prepare(&mut cmd, Some(&token));
    let log_file = std::fs::File::create(&log)?;
    cmd.stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
    let mut child = cmd.spawn().with_context(|| format!("starting {QSD}"))?;
    let monitor = sys::Wait::new(format!("{QSD} to start its exports"), Duration::from_secs(20))
        .every(Duration::from_millis(20))
        .until(|| {
            let exported = match fuse_file {
                Some(file) => crate::ledger::is_mounted(file),
                None => listening_in(child.id(), Ipv4Addr::LOCALHOST, port),
            };
            // The socket's file is there from its bind, before it listens: a connection then was
            // refused (seen once in a loaded `make test`). Up is when it accepts one.
            if exported && let Ok(monitor) = std::os::unix::net::UnixStream::connect(&socket) {
                return Ok(sys::Check::Done(monitor));
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "{QSD} exited ({status}): {}",
                    sys::tail_lines(&std::fs::read_to_string(&log).unwrap_or_default(), 5)
                );
            }
            Ok(sys::Check::NotYet(String::new()))
        })?;
    sys::reap_in_background(child);
    let events = ctx.run_dir.join("qmp-events.jsonl");
    collect_events(monitor, &events)?;
    let export =
        fuse_file.is_none().then(|| NbdExport { host: Ipv4Addr::LOCALHOST, port, name: top.to_string(), size });
    Ok(Daemon { export, events })
}

/// Greets the daemon's QMP monitor and appends every event it sends to `events`, from a thread
/// that ends when the daemon does.
fn collect_events(stream: std::os::unix::net::UnixStream, events: &Path) -> Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).context("reading QMP's greeting")?;
    writer.write_all(b"{\"execute\": \"qmp_capabilities\"}\n")?;
    line.clear();
    reader.read_line(&mut line).context("QMP did not answer qmp_capabilities")?;
    if !line.contains("\"return\"") {
        bail!("QMP refused qmp_capabilities: {line}");
    }
    reader.get_ref().set_read_timeout(None)?;
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(events)?;
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.contains("\"event\"") {
                let _ = out.write_all(line.as_bytes());
            }
            line.clear();
        }
    });
    Ok(())
}

/// The quorum events a daemon reported: (event name, node, type, error).
pub fn quorum_events(events: &Path) -> Vec<(String, String, String, String)> {
    std::fs::read_to_string(events)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["event"].as_str().is_some_and(|e| e.starts_with("QUORUM")))
        .map(|v| {
            let text = |k: &str| v["data"][k].as_str().unwrap_or("").to_string();
            let node = if text("node-name").is_empty() { text("reference") } else { text("node-name") };
            (v["event"].as_str().unwrap_or("").to_string(), node, text("type"), text("error"))
        })
        .collect()
}

/// The NBD client node for `export`, as qemu-storage-daemon's --blockdev takes it.
pub fn nbd_blockdev(node: &str, export: &NbdExport) -> String {
    format!("driver=nbd,node-name={node},server.type=inet,server.host={},server.port={}", export.host, export.port)
        + &if export.name.is_empty() { String::new() } else { format!(",export={}", export.name) }
}

/// How the workload reaches a network volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// It talks NBD to the export itself: fio's nbd engine on the host, QEMU's client for a VM.
    Direct,
    /// Through the kernel's NBD client, a block device on the host.
    Kernel,
    /// Through a FUSE export of the volume and a loop device over that file.
    Fuse,
}

/// The route `common.access` and the environment choose: direct where the environment speaks
/// NBD and needs no filesystem on the host (a raw volume, or a VM's disk); else the kernel's
/// NBD client where the kernel has one; else FUSE + loop.
pub fn route(ctx: &ProvisionContext, common: &Common) -> Result<Route> {
    let kernel_here = kernel_nbd_unavailable().is_none();
    Ok(match common.access {
        Access::FioNbd if !ctx.speaks_nbd => {
            bail!("access = \"fio-nbd\": this environment cannot talk NBD itself; use access = \"fuse\" or \"kernel\"")
        }
        Access::FioNbd => Route::Direct,
        Access::Auto if ctx.speaks_nbd && (common.fs.is_none() || ctx.block) => Route::Direct,
        Access::Auto if kernel_here => Route::Kernel,
        Access::Auto | Access::Fuse => Route::Fuse,
        Access::Kernel => Route::Kernel,
    })
}

/// What a volume's data is offered as: an NBD export, or a FUSE file a daemon already serves
/// (a mirror's nexus, exported the one way its path needs).
pub enum Source<'a> {
    Nbd(&'a NbdExport),
    Fuse { file: &'a Path, size: u64 },
}

/// Hands the volume to the workload along `route` (see `route`): the export itself, or a block
/// device on the host, formatted and mounted when the volume has a filesystem and the
/// environment mounts. Records which path it took.
pub fn deliver(
    ctx: &ProvisionContext,
    common: &Common,
    route: Route,
    source: Source,
    mut facts: BTreeMap<String, String>,
) -> Result<Provisioned> {
    if route == Route::Direct {
        let Source::Nbd(export) = source else { bail!("the direct path needs an NBD export") };
        if let (Some(fs), true) = (&common.fs, ctx.block) {
            // QEMU's client is the guest's disk: format it once through a host device.
            let fmt = if kernel_nbd_unavailable().is_none() { Route::Kernel } else { Route::Fuse };
            let (device, resource) = host_device(ctx, fmt, source, &mut BTreeMap::new())?;
            mkfs(fs, &device, &common.mkfs_args)?;
            resource.release()?;
        }
        let how = if ctx.block { "qemu nbd client (virtio-blk)" } else { "fio-nbd (fio's nbd engine, libnbd)" };
        facts.insert("volume.access".into(), how.into());
        return Ok(Provisioned {
            path: PathBuf::from(export.uri()),
            raw: common.fs.is_none(),
            read_only: false,
            block: Some(BlockSource::Nbd(export.clone())),
            nbd: Some(export.clone()),
            replicas: None,
            claim: None,
            facts,
        });
    }
    let (device, _) = host_device(ctx, route, source, &mut facts)?;
    let as_disk = BlockSource::File { path: PathBuf::from(&device), offset: 0, size: None };
    let on_device = |raw| Provisioned {
        path: PathBuf::from(&device),
        raw,
        read_only: false,
        block: Some(as_disk.clone()),
        nbd: None,
        replicas: None,
        claim: None,
        facts: facts.clone(),
    };
    let Some(fs) = &common.fs else {
        return Ok(on_device(true));
    };
    mkfs(fs, &device, &common.mkfs_args)?;
    if ctx.block {
        return Ok(on_device(false));
    }
    let target = mount(ctx, fs, &device, common.mount_options.as_deref(), "mnt".into())?;
    Ok(Provisioned::dir(target, facts))
}

/// A block device on the host for `source` along `route` (kernel NBD, or FUSE + loop, starting a
/// FUSE daemon for an NBD export), and the ledger entry that lets it go.
fn host_device(
    ctx: &ProvisionContext,
    route: Route,
    source: Source,
    facts: &mut BTreeMap<String, String>,
) -> Result<(String, Resource)> {
    if route == Route::Kernel {
        if let Some(why) = kernel_nbd_unavailable() {
            bail!("access = \"kernel\": {why}");
        }
        let Source::Nbd(export) = source else { bail!("the kernel's NBD client needs an NBD export") };
        let device = free_nbd_device().ok_or_else(|| anyhow::anyhow!("no free /dev/nbdN"))?;
        let resource = Resource::NbdClient { device: device.clone() };
        ctx.ledger.record(resource.clone())?;
        let mut args = vec![export.host.to_string(), export.port.to_string(), device.clone()];
        if !export.name.is_empty() {
            args.extend(["-N".into(), export.name.clone()]);
        }
        sys::command_output("nbd-client", &args.iter().map(String::as_str).collect::<Vec<_>>())?;
        facts.insert("volume.access".into(), format!("kernel nbd ({device})"));
        return Ok((device, resource));
    }
    if let Some(why) = fuse_unavailable() {
        bail!("FUSE access: {why}");
    }
    let (file, size) = match source {
        Source::Fuse { file, size } => (file.to_path_buf(), size),
        Source::Nbd(export) => {
            let dir = ctx.run_dir.join("fuse");
            ctx.ledger.record(Resource::Dir { path: dir.clone() })?;
            std::fs::create_dir_all(&dir)?;
            let file = dir.join("export");
            let sub = ProvisionContext { run_dir: &dir, ..*ctx };
            start_daemon(&sub, &[nbd_blockdev("remote", export)], "remote", export.size, Some(&file))?;
            (file, export.size)
        }
    };
    // FUSE files take no O_DIRECT here: the loop device reads and writes through FUSE's own path.
    let device = attach_loop(ctx, &file, 0, size, false, false)?;
    facts.insert("volume.access".into(), format!("fuse+loop ({QSD} FUSE export, {device})"));
    Ok((device, Resource::LoopDevice { backing: file, offset: Some(0) }))
}

/// The first /dev/nbdN no client holds.
fn free_nbd_device() -> Option<String> {
    (0..64).find_map(|i| {
        let sys = PathBuf::from(format!("/sys/block/nbd{i}"));
        let size: u64 = std::fs::read_to_string(sys.join("size")).ok()?.trim().parse().ok()?;
        (size == 0 && !sys.join("pid").exists()).then(|| format!("/dev/nbd{i}"))
    })
}

/// Disconnects a kernel NBD client isobench connected; one already gone is not an error.
pub fn disconnect_nbd(device: &str) -> Result<()> {
    let sys = PathBuf::from("/sys/block").join(device.trim_start_matches("/dev/"));
    if !sys.join("pid").exists() {
        return Ok(());
    }
    sys::command_output("nbd-client", &["-d", device]).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidths_are_bits_per_second() {
        assert_eq!(parse_bits("1Gbit"), Ok(1_000_000_000));
        assert_eq!(parse_bits("500Mbit/s"), Ok(500_000_000));
        assert_eq!(parse_bits("100M"), Ok(100_000_000));
        assert!(parse_bits("fast").is_err());
    }

    #[test]
    fn qsd_reaches_an_export_by_address_port_and_name() {
        let e = NbdExport { host: Ipv4Addr::new(10, 211, 0, 2), port: 10809, name: String::new(), size: 1 };
        assert_eq!(
            nbd_blockdev("c0", &e),
            "driver=nbd,node-name=c0,server.type=inet,server.host=10.211.0.2,server.port=10809"
        );
        let named = NbdExport { name: "nexus".into(), ..e };
        assert!(nbd_blockdev("c0", &named).ends_with(",export=nexus"));
        assert_eq!(named.uri(), "nbd://10.211.0.2:10809/nexus");
    }
}
