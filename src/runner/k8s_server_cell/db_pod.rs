//! A cell with one of the databases of Debian's packages (PostgreSQL, MariaDB, Redis) in a k8s
//! environment: the server runs as the one pod of a StatefulSet of the env's runtime class with
//! its data on a claim of the cell's `pvc` volume, and a loader pod (the load generator's runtime
//! class) loads it with its users' tool over the cluster's network. The pods' CPU in the measured
//! phase is counted between the loader's cues, as for Cassandra; what the server holds is counted
//! by its own client from the loader pod.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{Result, anyhow};

use super::load::{add_loader_proof, record_cpu, run_counted};
use super::placement::{pod_ip, pod_proof};
use super::{Db, SCHEDULE_ALLOWANCE, set_name};
use crate::agent;
use crate::env::k8s::api::block_on;
use crate::env::k8s::cluster_api::Live;
use crate::env::k8s::manifest::SCRATCH_DIR;
use crate::env::k8s::statefulset::{self, CONTAINER, Database as DbObjects};
use crate::env::k8s::{JobRun, K8s, object_name};
use crate::server::STOP_TIMEOUT;
use crate::server::database::Database;
use crate::server::database::in_pod::ServedPod;
use crate::server::in_pod::{self, PodFacts};
use crate::store::{AgentReport, RunRecord, Sample};
use crate::volume::Provisioned;
use crate::workload::Spec;
use crate::workload::served::{Address, ServedLoad};

/// Runs one repetition: the server's StatefulSet up, the loader pod's Job, the pods' CPU, and
/// what the server's pod says of itself.
#[allow(clippy::too_many_arguments)]
pub fn run(
    k8s: &K8s,
    db: &Database,
    spec: &Spec,
    load: &dyn ServedLoad,
    volume: &Provisioned,
    run_dir: &Path,
    ledger: &crate::ledger::Ledger,
    record: &mut RunRecord,
) -> Result<AgentReport> {
    let claim = match claim_for(k8s, db, volume) {
        Ok(claim) => claim,
        Err(why) => return Ok(AgentReport { error: Some(why), unfit: true, ..Default::default() }),
    };
    let name = object_name(run_dir);
    let set = set_name(&name);
    k8s.record_run(ledger, &name)?;
    let engine = db.kind.engine();
    let port = engine.default_port();
    let image = db.image();
    let objects = database_objects(k8s, db, claim, &name, ledger.token())?;
    let server = Db {
        cluster: &k8s.cluster,
        owner: set.clone(),
        selector: statefulset::selector(&name).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        pods: vec![statefulset::pod_name(&set, 0)],
        container: CONTAINER.into(),
    };
    describe(&mut record.setup, db, &image, &set);
    let began = Instant::now();
    let started = block_on(async {
        let client = k8s.cluster.client().await?;
        k8s.cluster.apply_database(&client, &objects).await?;
        let pods = server.wait_ready(&client, db.start_timeout + SCHEDULE_ALLOWANCE).await?;
        pods.first().map(pod_ip).ok_or_else(|| anyhow!("the server's pod is gone"))?
    })?;
    let host = match started {
        Ok(host) => host,
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => {
            return Ok(AgentReport {
                unfit: e.downcast_ref::<crate::workload::Unfit>().is_some(),
                error: Some(format!("{} did not start: {e:#}", engine.name())),
                ..Default::default()
            });
        }
    };
    let ready = began.elapsed();
    let at = Address { host, port, server: db.kind.key().into() };
    record.setup.insert("server.address".into(), format!("<pod 0>:{port}"));
    let mut report = load_pod(k8s, &server, spec, load, &at, &name, ledger)?;
    report.samples.push(Sample::new("server_ready", ready.as_secs_f64(), "s"));
    if let Err(e) = block_on(after_load(&server, engine.name(), &mut report))? {
        report.notes.push(format!("server: after the load: {e:#}"));
    }
    if let Some(version) = report.setup.remove("server.version") {
        record.setup.insert("server.version".into(), version);
    }
    Ok(report)
}

/// The server's objects for the run `name` (what the run applies, and what `isobench k8s render`
/// prints): a StatefulSet of one pod, its headless Service and the Secret with its spec.
pub fn database_objects(
    k8s: &K8s,
    db: &Database,
    claim: &crate::volume::pvc::Claim,
    name: &str,
    token: &str,
) -> Result<statefulset::DbObjects> {
    let port = db.kind.engine().default_port();
    let spec_json = serde_json::to_string(&ServedPod {
        isobench: env!("CARGO_PKG_VERSION").into(),
        // The pod listens on its own IP, which it learns when it runs.
        serve: db.serve("", port, 0),
    })?;
    let set = set_name(name);
    let image = db.image();
    let ports = [(db.kind.key(), port)];
    Ok(DbObjects {
        name: &set,
        run_name: name,
        run_token: token,
        image: &image,
        replicas: 1,
        spread: k8s.spread,
        command: super::db_command("run"),
        ready: super::db_command("ready"),
        spec_json,
        spec_dir: Path::new(in_pod::SPEC_PATH).parent().and_then(Path::to_str).unwrap_or("/run/isobench"),
        password: None,
        ip_var: in_pod::POD_IP_VAR,
        password_var: in_pod::PASSWORD_VAR,
        claim,
        data_dir: in_pod::DATA_DIR,
        ports: &ports,
        stop_grace: STOP_TIMEOUT.as_secs() as i64,
    }
    .objects(&k8s.pod))
}

/// The cell's claim, or why the server cannot keep its data on this volume in these pods.
fn claim_for<'v>(k8s: &K8s, db: &Database, volume: &'v Provisioned) -> Result<&'v crate::volume::pvc::Claim, String> {
    let claim = super::filesystem_claim(volume)?;
    if let Some(memory) = k8s.pod.memory.filter(|m| *m < db.memory) {
        return Err(format!(
            "resources.memory = {} is less than the server's memory = {}: give the pods more, or the server less",
            ::figures::units::human(memory as f64, "B"),
            ::figures::units::human(db.memory as f64, "B"),
        ));
    }
    Ok(claim)
}

fn describe(setup: &mut BTreeMap<String, String>, db: &Database, image: &str, set: &str) {
    db.describe(setup);
    setup.insert("server.image".into(), image.into());
    setup.insert("k8s.statefulset".into(), set.into());
}

/// The load from one loader pod, and the pods' CPU counted between its cues.
fn load_pod(
    k8s: &K8s,
    server: &Db,
    spec: &Spec,
    load: &dyn ServedLoad,
    at: &Address,
    name: &str,
    ledger: &crate::ledger::Ledger,
) -> Result<AgentReport> {
    let request = agent::Request {
        workload: spec.clone(),
        data_dir: SCRATCH_DIR.into(),
        raw: None,
        read_only: false,
        scratch_dir: SCRATCH_DIR.into(),
        serve: None,
        against: Some(at.clone()),
        barrier: false,
        slices: 0,
        collect: false,
    };
    let loader_pods = k8s.loader_pods(name, None);
    let job = JobRun {
        name,
        token: ledger.token(),
        pod: &loader_pods,
        request: &request,
        claim: None,
        loaders: None,
        deadline: load.timeout() + SCHEDULE_ALLOWANCE,
    };
    let (loaded, _, cpu) = run_counted(k8s, &job, server, 1, |_| ());
    let mut report = match loaded {
        Ok((mut reports, proof)) => {
            let mut report = reports.pop().unwrap_or_default();
            add_loader_proof(&mut report.setup, proof);
            report.setup.insert("loader.address".into(), "the loader pod, over the cluster's pod network".into());
            report
        }
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => AgentReport { error: Some(format!("the load failed: {e:#}")), ..Default::default() },
    };
    report.notes.iter_mut().for_each(|n| *n = n.replace(&at.host, "<pod 0>"));
    record_cpu(&mut report, cpu);
    Ok(report)
}

/// After the load: the server's start and where its data was, from its pod, and the proof of
/// where the pod ran (its runtime class, node and claim). The pod's facts are the run's.
async fn after_load(server: &Db<'_>, name: &str, report: &mut AgentReport) -> Result<()> {
    let api = Live::connect(server.cluster).await?;
    let text = server.call(&api.client, 0, &["facts"]).await?;
    let facts: PodFacts = serde_json::from_str(&text).map_err(|e| anyhow!("pod {}: facts: {e}", server.pod(0)))?;
    report.samples.push(Sample::new("server_startup", facts.ready_after_s, "s"));
    report.samples.extend(facts.start_phases.iter().map(|(metric, after)| Sample::new(metric.clone(), *after, "s")));
    report.setup.insert("server.version".into(), facts.release_version.clone());
    let data = facts.facts.get("server.data").cloned().unwrap_or_default();
    report.notes.push(format!(
        "server: {name} {} ran inside the StatefulSet's pod with its data in {data} on the pod's claim",
        facts.release_version,
    ));
    if let Some(bytes) = facts.facts.get("server.data_bytes").and_then(|b| b.parse::<f64>().ok()) {
        report.samples.push(Sample::new("server_data_size", bytes, "B"));
    }
    pod_proof(&api, server, &mut report.setup).await?;
    for key in ["kernel.release", "dmesg.first", "data.fstype"] {
        if let Some(v) = facts.facts.get(key) {
            report.setup.insert(format!("db.pod1.{key}"), v.clone());
        }
    }
    report.facts = facts.facts;
    Ok(())
}
