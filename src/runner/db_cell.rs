//! A cell with one of the databases of Debian's packages (PostgreSQL, MariaDB, Redis): an agent
//! serves it inside a sandbox of the cell's environment with its data on the cell's volume,
//! while the host loads it with its users' tool (pgbench, sysbench, redis-benchmark) over the
//! network that environment gives, on the loader's CPUs.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Result, anyhow, bail};

use super::Place;
use super::collect::HostCounters;
use super::measured::{self, Measured, Moved, Phase, RuntimeCounters};
use super::server_cell::LOADER_THREAD;
use crate::agent;
use crate::env::{Launch, Reach};
use crate::server::STOP_TIMEOUT;
use crate::server::database::Database;
use crate::server::serve::{Control, Ready, Served};
use crate::store::{AgentReport, RunRecord};
use crate::volume::Provisioned;
use crate::workload::served::{Address, ServedLoad};
use crate::workload::{self, Spec};

/// Why a cell of `env` cannot serve a database, whatever the repetition.
pub fn refusal(env: &dyn crate::env::Environment, env_name: &str) -> Option<String> {
    if env.as_k8s().is_some() {
        // Its pods are reached through the cluster (k8s_server_cell::db_pod).
        return None;
    }
    env.reach().err().map(|why| format!("env \"{env_name}\": {why}"))
}

/// Where the server listens inside the sandbox and where the host reaches it.
struct Listening {
    inside: String,
    host: String,
    port: u16,
    control_port: u16,
    path: Option<crate::net::NetPath>,
}

impl Listening {
    fn new(place: &Place, reach: &Reach, db: &Database) -> Result<Listening> {
        let ports = crate::sys::free_ports(2)?;
        let (port, control_port) = (ports[0], ports[1]);
        Ok(match reach {
            Reach::Shared => {
                Listening { inside: "127.0.0.1".into(), host: "127.0.0.1".into(), port, control_port, path: None }
            }
            Reach::Forwarded { inside, host } => {
                Listening { inside: inside.clone(), host: host.clone(), port, control_port, path: None }
            }
            // A network of its own: the port its users know.
            Reach::Own => {
                let path = place.env.network(place.ledger)?;
                let address = path.sandbox_address().ok_or_else(|| anyhow!("the sandbox's network has no address"))?;
                let port = db.kind.engine().default_port();
                Listening {
                    inside: address.to_string(),
                    host: address.to_string(),
                    port,
                    control_port,
                    path: Some(path),
                }
            }
        })
    }
}

/// Runs one repetition: the server's agent in its sandbox beside the host's side (start, load,
/// stop), then one report of the server's and the load's.
#[allow(clippy::too_many_arguments)]
pub fn run(
    place: &Place,
    env_name: &str,
    db: &Database,
    spec: &Spec,
    load: &dyn ServedLoad,
    volume: &Provisioned,
    run_dir: &std::path::Path,
    record: &mut RunRecord,
) -> Result<AgentReport> {
    let env = place.env;
    if let Some(why) = refusal(env, env_name) {
        return Ok(AgentReport { error: Some(why), unfit: true, ..Default::default() });
    }
    let reach = env.reach().map_err(|why| anyhow!("env \"{env_name}\": {why}"))?;
    let listening = Listening::new(place, &reach, db)?;
    let counters = place.host_counters(volume, run_dir, true);
    let moved = Moved::plan(place, counters.as_ref());
    let request = agent::Request {
        workload: spec.clone(),
        data_dir: env.data_dir(volume),
        raw: None,
        read_only: false,
        scratch_dir: env.scratch_dir(run_dir),
        serve: Some(Served::Database(db.serve(&listening.inside, listening.port, listening.control_port))),
        against: None,
        barrier: false,
        slices: 0,
        collect: place.collect,
    };
    let runtime = RuntimeCounters { env, dirs: vec![run_dir.to_path_buf()] };
    let phase = Phase::new(counters.as_ref(), moved.as_ref(), &runtime);
    let loads = run_dir.join("load");
    std::fs::create_dir_all(&loads)?;
    let at = Address { host: listening.host.clone(), port: listening.port, server: db.kind.key().into() };
    let control = format!("{}:{}", listening.host, listening.control_port);
    let agent_done = AtomicBool::new(false);
    let timeout = db.start_timeout + STOP_TIMEOUT + load.timeout();
    let (report, loaded) = std::thread::scope(|scope| {
        let loader = std::thread::Builder::new()
            .name(LOADER_THREAD.into())
            .spawn_scoped(scope, || {
                if let Some(set) = &place.pins.loader {
                    set.pin_this_thread().map_err(|e| anyhow!("pinning the load generator to CPUs {set}: {e}"))?;
                }
                drive(&control, db, load, &at, &loads, phase, &agent_done)
            })
            .expect("a thread starts");
        let report = env.run_agent(Launch {
            request: &request,
            volume,
            run_dir,
            timeout,
            ledger: place.ledger,
            workdir: place.workdir,
            attach: place.attach,
            forward: &[listening.port, listening.control_port],
            network: listening.path.as_ref(),
            gate: None,
            memory: None,
            cpu_group: counters.as_ref().and_then(HostCounters::cpu_group),
            // Pinned from the start unless the server moves to its CPUs when the measured phase begins.
            cpuset: if moved.is_some() { None } else { place.pins.sandbox.as_ref() },
        });
        agent_done.store(true, Ordering::Relaxed);
        (report, loader.join().unwrap_or_else(|_| Err(anyhow!("the load panicked"))))
    });
    let mut report = report?;
    volume.check_replicas(&mut report.setup, &mut report.notes);
    describe(&mut record.setup, db, &listening, &reach);
    measured::close(moved.as_ref().map(Moved::said), counters, &mut report, &mut record.setup);
    if report.error.is_some() {
        // The agent's error has the server's log; the load only saw its symptom.
        return Ok(report);
    }
    match loaded {
        Ok(loaded) => {
            record.setup.insert("server.version".into(), loaded.ready.release_version);
            measured::add_load(&mut report, &mut record.setup, loaded.out, loaded.measured);
            report.error = loaded.error;
        }
        Err(e) => report.error = Some(format!("{e:#}")),
    }
    Ok(report)
}

/// What the host's side learned.
struct Loaded {
    ready: Ready,
    measured: Measured,
    out: workload::Output,
    /// The load's own failure: the server still reports what it holds.
    error: Option<String>,
}

/// The host's side: has the agent start the server, runs the load (its measured phase between
/// the phase's marks), and always tells the agent to stop.
fn drive(
    control: &str,
    db: &Database,
    load: &dyn ServedLoad,
    at: &Address,
    scratch: &std::path::Path,
    phase: Phase,
    agent_done: &AtomicBool,
) -> Result<Loaded> {
    let mut control = Control::connect(control, agent_done)?;
    let ready = match control.ready(db.start_timeout) {
        Ok(ready) => ready,
        Err(e) => bail!("{} did not start: {e:#}", db.kind.engine().name()),
    };
    let mut out = workload::Output::default();
    let ctx = workload::RunContext { data_dir: scratch, raw: None, read_only: false, scratch_dir: scratch };
    let result = load.run_cued(at, &ctx, &mut out, &|| phase.begin());
    let measured = phase.end();
    if result.is_ok() {
        match load.held(at) {
            Ok(held) => out.samples.push(held),
            Err(e) => out.notes.push(format!("what the server holds was not counted: {e:#}")),
        }
    }
    control.stop();
    let error = result.err().map(|e| format!("{e:#}")).or_else(|| measured.moved_error.clone());
    Ok(Loaded { ready, measured, out, error })
}

/// The server and where it listened, as the run's setup names them.
fn describe(setup: &mut BTreeMap<String, String>, db: &Database, listening: &Listening, reach: &Reach) {
    match &listening.path {
        Some(path) => setup.extend(path.describe()),
        None if *reach == Reach::Shared => {
            setup.insert("net.path".into(), "loopback (the host's network)".into());
        }
        None => {}
    }
    db.describe(setup);
    setup.insert("server.address".into(), format!("{}:{}", listening.host, listening.port));
}
