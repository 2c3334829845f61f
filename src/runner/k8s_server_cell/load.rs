//! The load on Kubernetes: an Indexed Job of loader pods (the load generator's runtime class)
//! against the database's pods, with the fault and the pods' CPU counted beside it, cued by
//! the lines the loaders log.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, anyhow};

use super::cpu::{PodsCpu, measured_cpu};
use super::fault::{Killed, Means, fault};
use super::machine_loss::Pause;
use super::{Db, SCHEDULE_ALLOWANCE};
use crate::agent;
use crate::env::k8s::api::block_on;
use crate::env::k8s::cluster_api::{ClusterApi, Live};
use crate::env::k8s::manifest::SCRATCH_DIR;
use crate::env::k8s::{JobRun, K8s};
use crate::runner::served::{Struck, record_fault};
use crate::server::cassandra::gc;
use crate::store::{AgentReport, Sample};
use crate::workload::Spec;
use crate::workload::cql::{Cql, find_cue};
use futures::future::join_all;

/// The load from an Indexed Job of loader pods, the fault on cue, and the killed pod's return.
#[allow(clippy::too_many_arguments)]
pub(super) fn load_pods(
    k8s: &K8s,
    db: &Db,
    mut load: Cql,
    kill: Option<&crate::server::Kill>,
    name: &str,
    ledger: &crate::ledger::Ledger,
    run_dir: &Path,
    recovery: Duration,
) -> Result<AgentReport> {
    let loaders = load.loaders.unwrap_or(1);
    if load.capacity.is_some() && loaders > 1 {
        let why = "a capacity search on Kubernetes runs from one loader pod, which offers every step's rate: set loaders = 1 (a step of several pods at once is not built yet)";
        return Ok(AgentReport { error: Some(why.into()), unfit: true, ..Default::default() });
    }
    load.loaders = Some(loaders);
    load.indexed = true;
    let request = loader_request(&load);
    let machine = machine_to_lose(db, kill)?;
    let loader_pods = k8s.loader_pods(name, machine.clone());
    let means = Means { machines: k8s.machines.as_ref(), machine, ledger };
    let job = JobRun {
        name,
        token: ledger.token(),
        pod: &loader_pods,
        request: &request,
        claim: None,
        loaders: Some(loaders),
        deadline: crate::workload::Workload::timeout(&load) + SCHEDULE_ALLOWANCE,
    };
    let (loaded, killed, cpu) = run_counted(k8s, &job, db, loaders, |load_done| {
        kill.map(|kill| fault(db, name, loaders, kill, &means, load_done))
    });
    let killed = killed.unwrap_or_else(|panicked| Some(Err(panicked)));
    let mut report = match loaded {
        Ok((reports, proof)) => loaders_report(&load, reports, proof, run_dir),
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => AgentReport { error: Some(format!("the load failed: {e:#}")), ..Default::default() },
    };
    // A lost machine's pod restarts its containers (the same pod, so the replaced-pod check does
    // not see it): the database's start would count as the load's work.
    let cpu = match &killed {
        Some(Ok(Some(k))) if k.machine.is_some() => {
            Err(anyhow!("a database pod's machine was lost in the measured phase and its containers restarted"))
        }
        _ => cpu,
    };
    record_cpu(&mut report, cpu);
    if let (Some(kill), Some(killed)) = (kill, killed) {
        let addresses = load.target.as_ref().map(|t| t.nodes.as_slice()).unwrap_or_default();
        record_kill(&mut report, db, kill, killed, recovery, addresses)?;
    }
    Ok(report)
}

/// What each loader pod's agent runs: the load alone, nothing of the database's.
fn loader_request(load: &Cql) -> agent::Request {
    agent::Request {
        workload: Spec::Cql(load.clone()),
        data_dir: SCRATCH_DIR.into(),
        raw: None,
        read_only: false,
        scratch_dir: SCRATCH_DIR.into(),
        serve: None,
        against: None,
        barrier: false,
        slices: 0,
        // The loaders' reports are combined from their HDR logs: what each pod used is not
        // the database's, and is not kept.
        collect: false,
    }
}

/// The loaders' reports as one, with the loader pods' own placement beside the database's.
fn loaders_report(
    load: &Cql,
    reports: Vec<AgentReport>,
    proof: BTreeMap<String, String>,
    run_dir: &Path,
) -> AgentReport {
    let mut report = load.combine_indexed(reports, run_dir);
    add_loader_proof(&mut report.setup, proof);
    if let Some(kernel) = report.facts.get("kernel.release") {
        report.setup.insert("loader.kernel.release".into(), kernel.clone());
    }
    report
}

/// The proof of where the loader pods ran, under `loader.*` beside the database's own.
pub(super) fn add_loader_proof(setup: &mut BTreeMap<String, String>, proof: BTreeMap<String, String>) {
    for (key, value) in proof {
        let key = match key.strip_prefix("k8s.") {
            Some("server") | None => key,
            Some(rest) => format!("loader.{rest}"),
        };
        setup.insert(key, value);
    }
}

/// The loaders' reports and the proof of where they ran.
type JobOutcome = Result<(Vec<AgentReport>, BTreeMap<String, String>)>;

/// The loaders' Job run to its end while the database pods' CPU is counted over the load's
/// measured phase, and `beside` (the fault) runs alongside, told when the load is done.
pub(super) fn run_counted<T: Send>(
    k8s: &K8s,
    job: &JobRun,
    db: &Db,
    loaders: u32,
    beside: impl FnOnce(&AtomicBool) -> T + Send,
) -> (JobOutcome, Result<T>, Result<Option<PodsCpu>>) {
    let load_done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let beside = scope.spawn(|| beside(&load_done));
        let cpu = scope.spawn(|| measured_cpu(db, job.name, loaders, &load_done));
        let loaded = k8s.run_job(job);
        load_done.store(true, Ordering::Relaxed);
        (
            loaded,
            beside.join().map_err(|_| anyhow!("what ran beside the load (the fault) panicked")),
            cpu.join().unwrap_or_else(|_| Err(anyhow!("counting the pods' CPU panicked"))),
        )
    })
}

/// The pods' CPU in the measured phase, per operation for the database's, or why it is not.
pub(super) fn record_cpu(report: &mut AgentReport, cpu: Result<Option<PodsCpu>>) {
    match cpu {
        Ok(Some(cpu)) => {
            report.samples.extend(crate::runner::collect::per_op(cpu.database, &report.samples));
            report.samples.extend(cpu.loaders.map(|s| Sample::new("sys.cpu_loaders", s, "s")));
            report.setup.insert("sys.cpu_counted_by".into(), format!("{}: each pod's cgroup, its rate between the kubelet's first and last samples in the measured phase (from the loaders' first line of it to their last) times the phase's length; a gVisor pod's cgroup is its sandbox's: the sentry and gofer with the workload", cpu.route));
        }
        Ok(None) => {}
        Err(e) => report.notes.push(format!("the pods' CPU was not counted: {e:#}")),
    }
}

/// The garbage collections of 200 ms or more each database pod's node logged in the measured
/// phase (which began at `phase_began`), from the start of each; a pod whose log cannot be read
/// is said in `notes`, and None when none could be.
async fn gc_pauses(db: &Db<'_>, phase_began: SystemTime, notes: &mut Vec<String>) -> Option<Vec<Pause>> {
    let api = match Live::connect(db.cluster).await {
        Ok(api) => api,
        Err(e) => {
            notes.push(format!("fault: the database pods' garbage collections were not read: {e:#}"));
            return None;
        }
    };
    let logs = join_all((0..db.pods.len()).map(|k| db.call(&api.client, k, &["gc-log"]))).await;
    let (mut pauses, mut read) = (Vec::new(), false);
    for (k, log) in logs.into_iter().enumerate() {
        let log = match log {
            Ok(log) => log,
            Err(e) => {
                notes.push(format!("fault: pod {}'s garbage collections were not read: {e:#}", db.pod(k)));
                continue;
            }
        };
        read = true;
        for pause in gc::pauses(&log) {
            let Ok(from) = (pause.ended - pause.took).duration_since(phase_began) else { continue };
            pauses.push(Pause { pod: db.pod(k).to_string(), from: from.as_secs_f64(), took: pause.took.as_secs_f64() });
        }
    }
    read.then_some(pauses)
}

/// The machine a `kill = "machine"` fault will stop: the one that runs its pod now.
fn machine_to_lose(db: &Db, kill: Option<&crate::server::Kill>) -> Result<Option<String>> {
    let Some(kill) = kill.filter(|k| k.stops_machine()) else { return Ok(None) };
    block_on(async {
        let api = Live::connect(db.cluster).await?;
        Ok(api.pod(db.pod(kill.node - 1)).await?.and_then(|p| p.spec?.node_name))
    })?
}

/// The fault's outcome, and the time the struck pod took to be ready again.
fn record_kill(
    report: &mut AgentReport,
    db: &Db,
    kill: &crate::server::Kill,
    killed: Result<Option<Killed>>,
    recovery: Duration,
    addresses: &[String],
) -> Result<()> {
    let killed = match killed {
        Ok(killed) => killed,
        Err(e) => {
            report.notes.push(format!("fault: {e:#}"));
            return Ok(());
        }
    };
    let struck = killed.as_ref().map(|k| Struck {
        node: match &k.machine {
            None => format!("node {} (pod {})", k.node, db.pod(k.node - 1)),
            Some(m) => format!("node {} (pod {} on machine {})", k.node, db.pod(k.node - 1), m.name),
        },
        how: if k.machine.is_some() { "lost its machine (machine_stop)" } else { "was deleted (grace 0)" },
        at: k.at,
    });
    record_fault(&mut report.setup, &mut report.notes, kill, struck);
    let Some(killed) = killed else { return Ok(()) };
    report.setup.insert("fault.kind".into(), if killed.machine.is_some() { "machine" } else { "pod" }.into());
    if let Some(machine) = &killed.machine {
        let lost = addresses.get(killed.node - 1).map(String::as_str);
        let pauses = block_on(gc_pauses(db, killed.phase_began, &mut report.notes))?;
        super::machine_loss::record(report, killed.at, machine, lost, pauses.as_deref());
    }
    let pod = db.pod(killed.node - 1);
    let back = block_on(async {
        let api = Live::connect(db.cluster).await?;
        match &killed.machine {
            None => db.wait_ready(&api.client, recovery).await.map(|_| None),
            // The same pod, its containers restarted by its machine's kubelet: waited for alone
            // (a restarted container is what a lost machine leaves, not a crash).
            Some(_) => super::fault::wait_pod_ready(&api, pod, recovery).await.map(Some),
        }
    })?;
    match back {
        Ok(node) => {
            let recovered = killed.back.map_or_else(|| killed.struck.elapsed(), |at| at.duration_since(killed.struck));
            report.samples.push(Sample::new("server_recovery", recovered.as_secs_f64(), "s"));
            if let (Some(machine), Some(node)) = (&killed.machine, node) {
                report.setup.insert("fault.back_on".into(), node.clone());
                if node != machine.name {
                    report
                        .notes
                        .push(format!("fault: pod {pod} came back on {node}, not on its machine {}", machine.name));
                }
            }
        }
        Err(e) => report.notes.push(format!("fault: pod {pod} did not come back: {e:#}")),
    }
    Ok(())
}

/// How often the loader pods' logs are read for a cue: a cue is seen this much late at most
/// (and the time an API call takes).
const CUE_POLL: Duration = Duration::from_millis(500);

/// A cue's own time is believed when it is at most this old as it is read: the pods' clocks are
/// the host's here and NTP's elsewhere, and a poll and an API call take well under it.
const CUE_LAG_BELIEVED: Duration = Duration::from_secs(5);

/// Waits until every loader pod of `job` has printed `line`: when the last of them printed it,
/// on this host's clock, or None when the load ended first.
pub(super) async fn all_logged(
    api: &impl ClusterApi,
    job: &str,
    loaders: u32,
    line: &str,
    load_done: &AtomicBool,
) -> Result<Option<Instant>> {
    loop {
        // Read before the end is looked at: the last line of a load that just ended still counts.
        let ended = load_done.load(Ordering::Relaxed);
        let said = logged(api, job, line).await?;
        if said.len() == loaders as usize {
            return Ok(Some(last_said(&said)));
        }
        if ended || crate::sys::interrupted() {
            return Ok(None);
        }
        tokio::time::sleep(CUE_POLL).await;
    }
}

/// When the last of the cues `said` was printed, from their times where each carries one that
/// is believable, and now otherwise.
fn last_said(said: &[Option<SystemTime>]) -> Instant {
    let last = said.iter().copied().collect::<Option<Vec<SystemTime>>>().and_then(|times| times.into_iter().max());
    let lag = last.and_then(|t| SystemTime::now().duration_since(t).ok()).filter(|lag| *lag <= CUE_LAG_BELIEVED);
    Instant::now() - lag.unwrap_or_default()
}

/// The loader pods of `job` that have printed `line`: when each printed it, where it says.
pub(super) async fn logged(api: &impl ClusterApi, job: &str, line: &str) -> Result<Vec<Option<SystemTime>>> {
    let mut said = Vec::new();
    for pod in api.job_pods(job).await? {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Some(when) = api.log(&name).await.ok().and_then(|log| find_cue(&log, line)) {
            said.push(when);
        }
    }
    Ok(said)
}
