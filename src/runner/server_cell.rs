//! A CQL cell with a managed server: one agent per node, each serving its node inside a sandbox
//! of the cell's environment with its data on the cell's volume, while the host loads them over
//! the network that environment gives. Node k's agent starts its node when the host connects,
//! so nodes start one after another; a cluster is loaded once every node sees every node Up and
//! Normal. A fault the suite asks for (`kill_node`, `kill_after`) is carried out on the same
//! control connection: the agent kills its node with SIGKILL and still reports.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};

use super::collect::HostCounters;
use super::measured::{self, Measured, Moved, Phase, RuntimeCounters};
use super::{Place, served};
use crate::agent;
use crate::env::{Launch, Reach};
use crate::server::cassandra::Distribution;
use crate::server::cluster::{self, Layout};
use crate::server::serve::{CONNECT_WINDOW, Control, Ready, Serve, Served};
use crate::server::{Kill, Managed, STOP_TIMEOUT};
use crate::store::{AgentReport, RunRecord, Sample};
use crate::volume::Provisioned;
use crate::workload::cql::{Cql, Target};
use crate::workload::{self, Spec, Workload};

/// Why a served cell of `env` can never run, whatever the repetition: a suite error before any
/// run, and each run's reason if one is tried.
pub fn refusal(env: &dyn crate::env::Environment, env_name: &str, managed: &Managed) -> Option<String> {
    if managed.tls && env.as_k8s().is_none() {
        return Some("tls = true: a managed server speaks TLS in k8s environments only; on this host, start one with `isobench server start cassandra --tls` and name it as kind = \"external\" with -transport truststore= in args".into());
    }
    match env.reach() {
        Err(why) if env.as_k8s().is_none() => Some(format!("env \"{env_name}\": {why}")),
        Ok(Reach::Forwarded { .. }) if managed.nodes > 1 => Some(format!(
            "env \"{env_name}\": a cluster's nodes gossip with one another, and each sandbox of this environment reaches only the host (a VM's user network); run the cluster on the host or in containers"
        )),
        _ => None,
    }
}

/// The thread of isobench's that drives a served cell's load (15 characters: a thread's name as
/// the kernel keeps it).
pub const LOADER_THREAD: &str = "isobench-loader";

/// A ring to wait for: its nodes, and whether they are in networks of their own (their
/// `nodetool` then runs inside each sandbox, through its agent).
struct Ring<'a> {
    distribution: &'a Distribution,
    layout: &'a Layout,
    own: bool,
}

/// Where a cell's nodes listen: the ring's layout (addresses inside the sandboxes), each node's
/// sandbox network where the sandboxes have their own (one bridge for a ring), and the
/// addresses the host reaches them at.
struct Nodes {
    layout: Layout,
    paths: Vec<crate::net::NetPath>,
    host_addresses: Vec<String>,
}

impl Nodes {
    fn new(place: &Place, reach: &Reach, nodes: usize) -> Result<Nodes> {
        let mut layout = Layout::new(nodes, None)?;
        let paths = match (reach, nodes) {
            (Reach::Own, 1) => vec![place.env.network(place.ledger)?],
            (Reach::Own, n) => crate::net::bridged(place.ledger, n)?,
            _ => Vec::new(),
        };
        let host_addresses = match reach {
            Reach::Shared => layout.addresses.clone(),
            // A node alone listens where the environment says (every interface of a VM).
            Reach::Forwarded { inside, host } => {
                layout.addresses = vec![inside.clone()];
                vec![host.clone()]
            }
            Reach::Own => {
                layout.addresses = paths.iter().filter_map(|p| p.sandbox_address()).map(|a| a.to_string()).collect();
                layout.addresses.clone()
            }
        };
        Ok(Nodes { layout, paths, host_addresses })
    }
}

/// Runs one repetition of a served CQL cell: the nodes' agents in their sandboxes beside the
/// host's side (start, ring, load, stop), then one report of the nodes' and the load's.
pub fn run(
    place: &Place,
    env_name: &str,
    managed: &Managed,
    cql: &Cql,
    volume: &Provisioned,
    run_dir: &std::path::Path,
    record: &mut RunRecord,
) -> Result<AgentReport> {
    let env = place.env;
    if let Some(why) = refusal(env, env_name, managed) {
        return Ok(AgentReport { error: Some(why), unfit: true, ..Default::default() });
    }
    let reach = env.reach().map_err(|why| anyhow!("env \"{env_name}\": {why}"))?;
    let distribution = Distribution::fetch(&managed.version, &mut |m| eprintln!("isobench: {m}"))?;
    if managed.nodes > 1 {
        cluster::has_nodetool(&distribution)?;
    }
    let nodes = Nodes::new(place, &reach, managed.nodes)?;
    let control_ports = nodes.layout.other_free_ports(managed.nodes)?;
    let counters = place.host_counters(volume, run_dir, true);
    let moved = Moved::plan(place, counters.as_ref());
    let mut serves = serves(cql, managed, &distribution, &nodes.layout, &control_ports)?;
    for serve in &mut serves {
        serve.processors = moved.as_ref().map(|moved| moved.set.len());
        // The JVM names its compiled code once, as it exits: what the sampled parts' functions
        // are named by (JIT code is anonymous memory, or gVisor's memory file, to perf); its own
        // samples, where asked for, name the methods its interpreter ran.
        if place.samples_parts() {
            serve.jvm_args.extend(crate::sys::jit_map::JVM_FLAGS.map(String::from));
            serve.java_samples = managed.java_samples;
        }
    }
    let mut load = cql.clone();
    let (user, password) = managed.login.clone().unzip();
    load.target = Some(Target {
        nodes: nodes.host_addresses.clone(),
        port: nodes.layout.native_port,
        user,
        password,
        truststore: None,
    });
    let ring = (managed.nodes > 1).then_some(Ring {
        distribution: &distribution,
        layout: &nodes.layout,
        own: reach == Reach::Own,
    });
    let runtime = RuntimeCounters { env, dirs: node_dirs(run_dir, managed.nodes) };
    let host_side =
        HostSide { load: &load, managed, ring, counters: counters.as_ref(), moved: moved.as_ref(), runtime: &runtime };
    // The agents only serve: the load and its login stay on the host.
    let requests: Vec<agent::Request> = serves
        .into_iter()
        .map(|serve| agent::Request {
            workload: Spec::Cql(cql.clone()),
            data_dir: env.data_dir(volume),
            raw: None,
            read_only: false,
            scratch_dir: env.scratch_dir(run_dir),
            serve: Some(Served::Cassandra(Box::new(serve))),
            against: None,
            barrier: false,
            slices: 0,
            collect: place.collect,
        })
        .collect();
    let (reports, loaded) = run_nodes(place, &requests, &nodes, &control_ports, volume, run_dir, host_side)?;
    let mut report = combine(reports)?;
    volume.check_replicas(&mut report.setup, &mut report.notes);
    describe(&mut record.setup, managed, &nodes, &reach);
    measured::close(moved.as_ref().map(Moved::said), counters, &mut report, &mut record.setup);
    if report.error.is_some() {
        // The agent's error has the server's log; the load only saw its symptom.
        return Ok(report);
    }
    match loaded {
        Ok(loaded) => add_loaded(&mut report, record, loaded, managed, &nodes.layout),
        Err(e) => report.error = Some(format!("{e:#}")),
    }
    Ok(report)
}

/// What each node's agent serves: its address and ports, the ring's seeds and its slot, and the
/// time it may wait for the host (a later node waits for the earlier ones' starts).
fn serves(
    cql: &Cql,
    managed: &Managed,
    distribution: &Distribution,
    layout: &Layout,
    control_ports: &[u16],
) -> Result<Vec<Serve>> {
    let nodes = managed.nodes;
    let measured = cql.phase(&cql.args)?;
    Ok((0..nodes)
        .map(|k| Serve {
            keyspace: measured.schema.keyspace.clone(),
            table: cql_stress::schema::table(measured.command.ops[0].0).into(),
            distribution: distribution.clone(),
            heap: managed.heap.clone(),
            quick_jit: managed.quick_jit,
            jvm_args: managed.jvm_args.clone(),
            processors: None,
            listen: layout.addresses[k].clone(),
            native_port: layout.native_port,
            storage_port: layout.storage_port,
            jmx_port: layout.jmx_ports[k],
            control_port: control_ports[k],
            start_timeout: managed.start_timeout,
            auth: managed.login.is_some(),
            seeds: if nodes > 1 { layout.seeds() } else { Vec::new() },
            ring: layout.slot(k),
            connect_window: CONNECT_WINDOW + managed.start_timeout * k as u32,
            directory: if nodes > 1 { format!("cassandra/node{}", k + 1) } else { "cassandra".into() },
            java_samples: false,
        })
        .collect())
}

/// What the host's side of a cell drives besides the nodes' control connections.
struct HostSide<'a> {
    load: &'a Cql,
    managed: &'a Managed,
    ring: Option<Ring<'a>>,
    counters: Option<&'a HostCounters>,
    moved: Option<&'a Moved<'a>>,
    runtime: &'a RuntimeCounters<'a>,
}

/// Each node's own directory of the run.
fn node_dirs(run_dir: &std::path::Path, nodes: usize) -> Vec<std::path::PathBuf> {
    (0..nodes)
        .map(|k| if nodes == 1 { run_dir.to_path_buf() } else { run_dir.join(format!("node{}", k + 1)) })
        .collect()
}

/// The nodes' agents, each in its sandbox, and the host's side on its own thread (pinned to
/// the loader's CPUs), to their ends: the agents' reports and what the host's side learned.
#[allow(clippy::too_many_arguments)]
fn run_nodes(
    place: &Place,
    requests: &[agent::Request],
    nodes: &Nodes,
    control_ports: &[u16],
    volume: &Provisioned,
    run_dir: &std::path::Path,
    host_side: HostSide,
) -> Result<(Vec<Result<AgentReport>>, Result<Loaded>)> {
    let (env, count) = (place.env, requests.len());
    // Pinned from the start unless the database moves to its CPUs when the measured phase begins.
    let cpuset = if host_side.moved.is_some() { None } else { place.pins.sandbox.as_ref() };
    let timeout = host_side.managed.start_timeout * (count as u32 + 1) + STOP_TIMEOUT + host_side.load.timeout();
    let controls: Vec<String> =
        nodes.host_addresses.iter().zip(control_ports).map(|(address, port)| format!("{address}:{port}")).collect();
    let forwards: Vec<[u16; 2]> = control_ports.iter().map(|c| [nodes.layout.native_port, *c]).collect();
    let run_dirs = node_dirs(run_dir, count);
    for dir in &run_dirs {
        std::fs::create_dir_all(dir)?;
    }
    // The loaders' logs and HDR files, on the host, with the run's other files.
    let loads = run_dir.join("load");
    std::fs::create_dir_all(&loads)?;
    let agents_done = AtomicBool::new(false);
    let cpu_group = host_side.counters.and_then(HostCounters::cpu_group);
    Ok(std::thread::scope(|scope| {
        // Named, so that its CPUs can be looked up; its runtime's threads and loader processes
        // start from it and inherit its set.
        let loader = std::thread::Builder::new()
            .name(LOADER_THREAD.into())
            .spawn_scoped(scope, || {
                if let Some(set) = &place.pins.loader {
                    set.pin_this_thread().map_err(|e| anyhow!("pinning the load generator to CPUs {set}: {e}"))?;
                }
                drive(&controls, host_side, &loads, &agents_done)
            })
            .expect("a thread starts");
        let agents: Vec<_> = (0..count)
            .map(|k| {
                let (request, forward, run_dir) = (&requests[k], &forwards[k], &run_dirs[k]);
                let network = nodes.paths.get(k);
                scope.spawn(move || {
                    env.run_agent(Launch {
                        request,
                        volume,
                        run_dir,
                        timeout,
                        ledger: place.ledger,
                        workdir: place.workdir,
                        attach: place.attach,
                        forward,
                        network,
                        gate: None,
                        memory: None,
                        cpu_group,
                        cpuset,
                    })
                })
            })
            .collect();
        let reports: Vec<Result<AgentReport>> =
            agents.into_iter().map(|a| a.join().unwrap_or_else(|_| bail!("an agent panicked"))).collect();
        agents_done.store(true, Ordering::Relaxed);
        (reports, loader.join().unwrap_or_else(|_| Err(anyhow!("the load panicked"))))
    }))
}

/// The server and its network as the run's setup names them.
fn describe(setup: &mut BTreeMap<String, String>, managed: &Managed, nodes: &Nodes, reach: &Reach) {
    match nodes.paths.first() {
        Some(path) => setup.extend(path.describe()),
        None if *reach == Reach::Shared => {
            setup.insert("net.path".into(), "loopback (the host's network)".into());
        }
        None => {}
    }
    served::describe_server(setup, managed);
    if let Some(price) = managed.cost_per_hour {
        setup.insert("server.cost_per_hour".into(), format!("{} × ${price:.2} per node", managed.nodes));
    }
    if managed.nodes > 1 {
        setup.insert("server.nodes".into(), managed.nodes.to_string());
        setup.insert("server.addresses".into(), nodes.layout.addresses.join(", "));
    }
}

/// The host's side's findings in the run's report: the server's version, the ring's time, the
/// fault's outcome, the load's samples and the CPU and system calls per operation.
fn add_loaded(report: &mut AgentReport, record: &mut RunRecord, loaded: Loaded, managed: &Managed, layout: &Layout) {
    record.setup.insert("server.version".into(), loaded.ready[0].release_version.clone());
    if let Some(ring) = loaded.ring_after {
        report.samples.push(Sample::new("server_ring", ring.as_secs_f64(), "s"));
    }
    if let Some(kill) = &managed.kill {
        let struck = loaded.killed.map(|(kill, at)| served::Struck {
            node: format!("node {} ({})", kill.node, layout.addresses[kill.node - 1]),
            how: "was killed (SIGKILL)",
            at,
        });
        served::record_fault(&mut record.setup, &mut report.notes, kill, struck);
    }
    measured::add_load(report, &mut record.setup, loaded.out, loaded.measured);
    if let Some(e) = loaded.error {
        report.error = Some(e);
    }
}

/// One report from the nodes' reports: the first error, else the server's figures summed over
/// the nodes (what the cluster holds) and the slowest start and stop.
fn combine(reports: Vec<Result<AgentReport>>) -> Result<AgentReport> {
    let several = reports.len() > 1;
    let mut combined: Option<AgentReport> = None;
    for (k, report) in reports.into_iter().enumerate() {
        let mut report = report?;
        if several {
            report.notes.iter_mut().for_each(|n| *n = format!("node {}: {n}", k + 1));
            report.error = report.error.map(|e| format!("node {}: {e}", k + 1));
            report.raw.iter_mut().for_each(|r| r.name = format!("node{}-{}", k + 1, r.name));
        }
        let Some(into) = &mut combined else {
            combined = Some(report);
            continue;
        };
        for sample in report.samples {
            match into.samples.iter_mut().find(|s| s.metric == sample.metric) {
                // Times of the ring (startup, ready) are its slowest node's; what the nodes used adds up.
                Some(s) if sample.unit == "s" && !sample.metric.starts_with("sys.") => {
                    s.value = s.value.max(sample.value)
                }
                Some(s) => s.value += sample.value,
                None => into.samples.push(sample),
            }
        }
        into.notes.extend(report.notes);
        into.raw.extend(report.raw);
        into.code_maps.extend(report.code_maps);
        into.setup.extend(report.setup);
        into.unfit |= report.unfit;
        if into.error.is_none() {
            into.error = report.error;
        }
    }
    combined.ok_or_else(|| anyhow!("no node ran"))
}

/// What the host's side of a served cell learned.
struct Loaded {
    ready: Vec<Ready>,
    /// The system figures of the measured phase.
    measured: Measured,
    ring_after: Option<Duration>,
    out: workload::Output,
    killed: Option<(Kill, Duration)>,
    /// The load's own failure: the nodes still report what they hold.
    error: Option<String>,
}

/// The host's side: start the nodes one by one, wait for the ring, run the load phases (killing
/// a node on cue), read the server's own statistics, and always tell the agents to stop.
fn drive(
    controls: &[String],
    host_side: HostSide,
    scratch: &std::path::Path,
    agents_done: &AtomicBool,
) -> Result<Loaded> {
    let HostSide { load, managed, ring, counters, moved, runtime } = host_side;
    let began = Instant::now();
    let mut connected = Vec::new();
    let mut ready = Vec::new();
    let mut failed = None;
    for address in controls {
        let mut control = Control::connect(address, agents_done)?;
        // An earlier node failed: the later agents are told to give up, not left waiting.
        if failed.is_some() {
            control.call_off();
            continue;
        }
        match control.ready(managed.start_timeout) {
            Ok(r) => {
                ready.push(r);
                connected.push(control);
            }
            Err(e) => failed = Some(e),
        }
    }
    if let Some(e) = failed {
        bail!("node {} of {} did not start: {e:#}", ready.len() + 1, controls.len());
    }
    let ring_after = match ring {
        Some(ring) => {
            let status = |k: usize| match ring.own {
                true => connected[k].status(),
                false => cluster::nodetool_status(ring.distribution, ring.layout.jmx_ports[k]),
            };
            cluster::wait_ring(&ring.layout.addresses, &status, managed.start_timeout)?;
            Some(began.elapsed())
        }
        None => None,
    };
    if let Some(Target { nodes, port, user: Some(user), password: Some(password), .. }) = &load.target {
        let auth_rf = controls.len().min(3) as u32;
        crate::server::cassandra::create_role(&format!("{}:{port}", nodes[0]), user, password, auth_rf, None)?;
    }
    let mut out = workload::Output::default();
    let ctx = workload::RunContext { data_dir: scratch, raw: None, read_only: false, scratch_dir: scratch };
    let (cue, cued) = mpsc::channel();
    let phase = Phase::new(counters, moved, runtime);
    let (result, killed) = std::thread::scope(|scope| {
        let fault = managed.kill.as_ref().map(|kill| {
            let control = &connected[kill.node - 1];
            scope.spawn(move || fault(kill, control, &cued))
        });
        let measured = cue.clone();
        let result = load.run_cued(&ctx, &mut out, &|| {
            phase.begin();
            let _ = measured.send(Cue::Measured(Instant::now()));
        });
        let _ = cue.send(Cue::Done);
        (result, fault.and_then(|f| f.join().ok().flatten()))
    });
    let measured = phase.end();
    if result.is_ok() && controls.len() == 1 {
        out.samples.extend(crate::server::stats::after_run(load));
    }
    for control in connected {
        control.stop();
    }
    let error = result.err().map(|e| format!("{e:#}")).or_else(|| measured.moved_error.clone());
    Ok(Loaded { ready, measured, ring_after, out, killed, error })
}

enum Cue {
    Measured(Instant),
    Done,
}

/// Kills the node `kill.after` into the measured phase, unless the load is done by then;
/// returns when it was killed, counted from the start of the measured phase.
fn fault(kill: &Kill, control: &Control, cued: &mpsc::Receiver<Cue>) -> Option<(Kill, Duration)> {
    let Ok(Cue::Measured(began)) = cued.recv() else { return None };
    match cued.recv_timeout(kill.after) {
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let at = began.elapsed();
            control.kill().ok()?;
            Some((kill.clone(), at))
        }
        _ => None,
    }
}
