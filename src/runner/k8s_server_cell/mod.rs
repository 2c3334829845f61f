//! A CQL cell with a managed Cassandra in a k8s environment: the database runs in the pods under
//! test, as users run it there. Each run makes a StatefulSet of `nodes` pods of the env's runtime
//! class (each pod's data on a claim of the cell's `pvc` volume), waits until every pod answers
//! CQL and every node sees every node Up and Normal, creates the load's role, then loads the pods
//! with an Indexed Job of loader pods (the load generator's runtime class), kills a pod on cue
//! when the suite asks for a fault, and reads the server's own statistics inside the pods. What
//! the run made carries its labels and is deleted when it ends (or by `isobench cleanup`).

mod cpu;
pub mod db_pod;
mod fault;
mod figures;
mod load;
mod machine_loss;
mod placement;
#[cfg(test)]
mod scripted_ring;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use futures::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use crate::env::k8s::api::block_on;
use crate::env::k8s::cluster_api::Live;
use crate::env::k8s::statefulset::{self, CONTAINER, Database};
use crate::env::k8s::{K8s, object_name};
use crate::ledger::KubeCluster;
use crate::server::in_pod::{self, DbPod, PodFacts};
use crate::server::{Managed, STOP_TIMEOUT};
use crate::store::{AgentReport, RunRecord, Sample};
use crate::volume::Provisioned;
use crate::workload::cql::{Cql, Target};
use figures::{combine_figures, server_figures};
use load::load_pods;
use placement::{pod_ip, pod_proof};

/// How long pods may take to be scheduled, bind their claims and pull the image, on top of the
/// nodes' own start.
const SCHEDULE_ALLOWANCE: Duration = Duration::from_secs(180);

/// The database's image when the server names none.
pub fn default_image(version: &str) -> String {
    format!("isobench-cassandra:{version}")
}

/// The StatefulSet's (and its Service's and Secret's) name for a run: short enough that the
/// controller's revision label (`<set>-<hash>`) stays a valid label.
pub fn set_name(run: &str) -> String {
    let base: String = run.chars().take(49).collect();
    format!("{}-db", base.trim_end_matches('-'))
}

/// The database's objects for the run `name` (what the run applies, and what `isobench k8s
/// render` prints).
pub fn database_objects(
    k8s: &K8s,
    managed: &Managed,
    claim: &crate::volume::pvc::Claim,
    name: &str,
    token: &str,
) -> Result<statefulset::DbObjects> {
    let set = set_name(name);
    let image = managed.image.clone().unwrap_or_else(|| default_image(&managed.version));
    let spec = DbPod {
        isobench: env!("CARGO_PKG_VERSION").into(),
        version: managed.version.clone(),
        heap: managed.heap.clone(),
        quick_jit: managed.quick_jit,
        jvm_args: managed.jvm_args.clone(),
        auth: managed.login.is_some(),
        tls: managed.tls,
        nodes: managed.nodes as u32,
        seed_pod: statefulset::pod_name(&set, 0),
        seed: format!("{}.{set}", statefulset::pod_name(&set, 0)),
        start_timeout: managed.start_timeout,
    };
    let database = Database {
        name: &set,
        run_name: name,
        run_token: token,
        image: &image,
        replicas: managed.nodes as u32,
        spread: k8s.spread,
        command: db_command("run"),
        ready: db_command("ready"),
        spec_json: serde_json::to_string(&spec)?,
        spec_dir: Path::new(in_pod::SPEC_PATH).parent().and_then(Path::to_str).unwrap_or("/run/isobench"),
        password: managed.login.as_ref().map(|(_, p)| p.as_str()),
        ip_var: in_pod::POD_IP_VAR,
        password_var: in_pod::PASSWORD_VAR,
        claim,
        data_dir: in_pod::DATA_DIR,
        ports: &[("cql", in_pod::NATIVE_PORT), ("storage", in_pod::STORAGE_PORT)],
        stop_grace: STOP_TIMEOUT.as_secs() as i64,
    };
    Ok(database.objects(&k8s.pod))
}

/// `isobench k8s db ACTION` in the database's image.
fn db_command(action: &str) -> Vec<String> {
    [crate::env::k8s::manifest::AGENT_IN_IMAGE, "k8s", "db", action].map(String::from).to_vec()
}

/// A database's pods, and how the orchestrator reaches them (the API server only).
struct Db<'a> {
    cluster: &'a KubeCluster,
    /// The controller whose events say why pods do not start (a StatefulSet), if known.
    owner: String,
    selector: String,
    /// The pods' names, node k's the k-th.
    pods: Vec<String>,
    container: String,
}

impl Db<'_> {
    fn pod(&self, k: usize) -> &str {
        &self.pods[k]
    }

    /// `isobench k8s db ARGS` in pod k (isobench's own database image).
    async fn call(&self, client: &Client, k: usize, args: &[&str]) -> Result<String> {
        let mut command = vec![crate::env::k8s::manifest::AGENT_IN_IMAGE.to_string(), "k8s".into(), "db".into()];
        command.extend(args.iter().map(|a| a.to_string()));
        self.cluster.exec(client, self.pod(k), &self.container, &command).await
    }

    async fn wait_ready(&self, client: &Client, timeout: Duration) -> Result<Vec<Pod>> {
        let (owner, selector, container) = (&self.owner, &self.selector, &self.container);
        self.cluster.wait_ready(client, owner, selector, container, self.pods.len(), timeout).await
    }

    /// Waits until `nodetool status` in every pod shows every pod's address Up and Normal.
    async fn wait_ring(&self, client: &Client, addresses: &[String], timeout: Duration) -> Result<()> {
        let what = format!("the {} pods to see one another Up and Normal", self.pods.len());
        let formed = crate::sys::Wait::new(what, timeout)
            .every(Duration::from_secs(1))
            .until_async(|| async {
                // Each view is a JVM started in its pod: side by side, not one after another.
                let views = join_all((0..self.pods.len()).map(|k| self.call(client, k, &["nodetool", "status"]))).await;
                if views.iter().all(|v| v.as_ref().is_ok_and(|text| crate::server::cluster::all_up(text, addresses))) {
                    return Ok(crate::sys::Check::Done(()));
                }
                let seen: Vec<String> = views
                    .iter()
                    .enumerate()
                    .map(|(k, v)| match v {
                        Ok(text) => format!("{} sees {}", self.pod(k), crate::server::cluster::describe_members(text)),
                        Err(e) => format!("{}: {e:#}", self.pod(k)),
                    })
                    .collect();
                Ok(crate::sys::Check::NotYet(seen.join("; ")))
            })
            .await;
        match formed {
            Err(e) if e.is::<crate::sys::TimedOut>() => {
                // A node missing from every view, its own included, is out of the token map (as
                // when two nodes claim one token): what gossip says of each endpoint tells why.
                let mut gossip = String::new();
                for k in 0..self.pods.len() {
                    if let Ok(text) = self.call(client, k, &["nodetool", "gossipinfo"]).await {
                        gossip.push_str(&format!("\n{} gossip:{}", self.pod(k), gossip_states(&text)));
                    }
                }
                bail!("{e}{gossip}")
            }
            other => other,
        }
    }
}

/// Each endpoint of `nodetool gossipinfo` with its generation, status and host id, one line each.
fn gossip_states(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('/') {
            out.push_str(&format!("\n  {line}"));
        } else if ["generation:", "STATUS_WITH_PORT:", "HOST_ID:"].iter().any(|key| line.starts_with(key)) {
            out.push_str(&format!(" {line}"));
        }
    }
    out
}

/// The database up: its pods' addresses, how long they took to form the ring, and their facts.
struct Up {
    addresses: Vec<String>,
    ready: Duration,
    facts: Vec<PodFacts>,
}

/// Runs one repetition of a served CQL cell in a k8s environment: the database's objects
/// applied, the ring up with the load's role, the loaders' Job, the server's figures and the
/// proof of where it ran.
pub fn run(
    k8s: &K8s,
    managed: &Managed,
    cql: &Cql,
    volume: &Provisioned,
    run_dir: &Path,
    ledger: &crate::ledger::Ledger,
    record: &mut RunRecord,
) -> Result<AgentReport> {
    let claim = match database_claim(k8s, managed, volume) {
        Ok(claim) => claim,
        Err(why) => return Ok(AgentReport { error: Some(why), unfit: true, ..Default::default() }),
    };
    if let Some(why) = placement::unplaceable(k8s, managed.nodes)? {
        return Ok(AgentReport { error: Some(why), unfit: true, ..Default::default() });
    }
    let name = object_name(run_dir);
    let set = set_name(&name);
    k8s.record_run(ledger, &name)?;
    let objects = database_objects(k8s, managed, claim, &name, ledger.token())?;
    let db = Db {
        cluster: &k8s.cluster,
        owner: set.clone(),
        selector: statefulset::selector(&name).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        pods: (0..managed.nodes).map(|k| statefulset::pod_name(&set, k)).collect(),
        container: CONTAINER.into(),
    };
    describe(&mut record.setup, k8s, managed, &set);
    let up = match start_database(k8s, &db, &objects, managed)? {
        Ok(up) => up,
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => {
            return Ok(AgentReport {
                // A cause that holds for every run (a claim that cannot bind) spares the others.
                unfit: e.downcast_ref::<crate::workload::Unfit>().is_some(),
                error: Some(format!("the database did not start: {e:#}")),
                ..Default::default()
            });
        }
    };
    let version = up.facts.first().map(|f| f.release_version.clone()).unwrap_or_default();
    record.setup.insert("server.version".into(), version);
    record.setup.insert("server.addresses".into(), up.addresses.join(", "));
    let mut load = cql.clone();
    let (user, password) = managed.login.clone().unzip();
    let truststore = managed.tls.then(|| up.facts.iter().filter_map(|f| f.certificate.clone()).collect::<String>());
    load.target = Some(Target { nodes: up.addresses.clone(), port: in_pod::NATIVE_PORT, user, password, truststore });
    let recovery = managed.start_timeout + SCHEDULE_ALLOWANCE;
    let mut report = load_pods(k8s, &db, load.clone(), managed.kill.as_ref(), &name, ledger, run_dir, recovery)?;
    name_pods_by_place(&mut report.notes, &up.addresses);
    report.samples.extend(start_samples(&up));
    if let Err(e) = block_on(after_load(&db, &load, &up.facts, &mut report))? {
        report.notes.push(format!("server: after the load: {e:#}"));
    }
    // The system under test is the database: its first pod's facts are the run's (the proof of
    // its runtime).
    report.facts = up.facts.into_iter().next().map(|f| f.facts).unwrap_or_default();
    Ok(report)
}

/// The cell's claim, or why a database cannot keep its data on this volume in these pods.
fn database_claim<'v>(
    k8s: &K8s,
    managed: &Managed,
    volume: &'v Provisioned,
) -> Result<&'v crate::volume::pvc::Claim, String> {
    let claim = filesystem_claim(volume)?;
    let heap = ::figures::units::parse_size(&managed.heap)?;
    if let Some(memory) = k8s.pod.memory.filter(|m| *m < heap + crate::server::cluster::OFF_HEAP) {
        return Err(format!(
            "resources.memory = {} is less than the node's heap ({}) and the {} it needs besides: give the pods more, or a smaller heap",
            ::figures::units::human(memory as f64, "B"),
            managed.heap,
            ::figures::units::human(crate::server::cluster::OFF_HEAP as f64, "B"),
        ));
    }
    Ok(claim)
}

/// The cell's claim where a database can keep its data: a `pvc` volume of a filesystem.
fn filesystem_claim(volume: &Provisioned) -> Result<&crate::volume::pvc::Claim, String> {
    let Some(claim) = &volume.claim else {
        return Err(
            "a database in a k8s environment keeps its data on a claim: give the cell a kind = \"pvc\" volume".into()
        );
    };
    if claim.block {
        return Err("volume_mode = \"Block\": a database needs a filesystem; use volume_mode = \"Filesystem\" (fio measures the raw device)".into());
    }
    Ok(claim)
}

/// The database as the run's setup names it.
fn describe(setup: &mut BTreeMap<String, String>, k8s: &K8s, managed: &Managed, set: &str) {
    crate::runner::served::describe_server(setup, managed);
    let image = managed.image.clone().unwrap_or_else(|| default_image(&managed.version));
    setup.insert("server.nodes".into(), managed.nodes.to_string());
    setup.insert("server.image".into(), image);
    setup.insert("k8s.statefulset".into(), set.into());
    setup.insert("k8s.spread".into(), k8s.spread.name().into());
    setup.insert("k8s.loaders_apart".into(), k8s.loaders_apart.name().into());
    if managed.tls {
        setup.insert("server.tls".into(), "client_encryption_options (a key made by each node)".into());
    }
}

/// The database's objects applied, its pods ready and in one ring, their facts read and the
/// load's role made. The outer error is the API's; the inner one the database's.
fn start_database(k8s: &K8s, db: &Db, objects: &statefulset::DbObjects, managed: &Managed) -> Result<Result<Up>> {
    let start_timeout = managed.start_timeout * managed.nodes as u32 + SCHEDULE_ALLOWANCE;
    let began = Instant::now();
    block_on(async {
        let client = k8s.cluster.client().await?;
        k8s.cluster.apply_database(&client, objects).await?;
        let pods = db.wait_ready(&client, start_timeout).await?;
        let addresses: Vec<String> = pods.iter().map(pod_ip).collect::<Result<_>>()?;
        if managed.nodes > 1 {
            db.wait_ring(&client, &addresses, managed.start_timeout).await?;
        }
        let ready = began.elapsed();
        let mut facts = Vec::new();
        for k in 0..managed.nodes {
            let text = db.call(&client, k, &["facts"]).await?;
            facts.push(serde_json::from_str::<PodFacts>(&text).map_err(|e| anyhow!("pod {}: facts: {e}", db.pod(k)))?);
        }
        if let Some((user, _)) = &managed.login {
            db.call(&client, 0, &["create-role", user]).await?;
        }
        Ok(Up { addresses, ready, facts })
    })
}

/// The loaders' command lines name the pods by the addresses of this run: by their place in
/// the StatefulSet instead, the same note for every run of the cell.
fn name_pods_by_place(notes: &mut [String], addresses: &[String]) {
    // Longest first, so that 10.244.0.1 does not rewrite part of 10.244.0.12.
    let mut places: Vec<(usize, &String)> = addresses.iter().enumerate().collect();
    places.sort_by_key(|(_, address)| std::cmp::Reverse(address.len()));
    for note in notes {
        for (k, address) in &places {
            *note = note.replace(address.as_str(), &format!("<pod {k}>"));
        }
    }
}

/// The ring's start: ready (as the orchestrator saw it), each node's own start and its phases,
/// each the slowest node's.
fn start_samples(up: &Up) -> Vec<Sample> {
    let mut samples = vec![Sample::new("server_ready", up.ready.as_secs_f64(), "s")];
    let startup = up.facts.iter().map(|f| f.ready_after_s).fold(0.0, f64::max);
    samples.push(Sample::new("server_startup", startup, "s"));
    let mut phases: Vec<(String, f64)> = Vec::new();
    for (metric, after) in up.facts.iter().flat_map(|f| &f.start_phases) {
        match phases.iter_mut().find(|(m, _)| m == metric) {
            Some((_, slowest)) => *slowest = slowest.max(*after),
            None => phases.push((metric.clone(), *after)),
        }
    }
    samples.extend(phases.into_iter().map(|(metric, after)| Sample::new(metric, after, "s")));
    samples
}

/// After the load: each node's figures of the load's table (flushed first, so that the sizes
/// are the table's), the proof of where the pods ran, and their kernel and filesystem.
async fn after_load(db: &Db<'_>, load: &Cql, facts: &[PodFacts], report: &mut AgentReport) -> Result<()> {
    let api = Live::connect(db.cluster).await?;
    let client = &api.client;
    let settings = load.phase(&load.args)?;
    let keyspace = settings.schema.keyspace.clone();
    let table = cql_stress::schema::table(settings.command.ops[0].0).to_string();
    // Three nodetool JVMs a pod, one after another (the flush before the sizes), and the pods
    // side by side: a ring of three's took 11 s one pod after another.
    let tables = format!("{keyspace}.{table}");
    let per_pod = join_all((0..db.pods.len()).map(|k| {
        let (keyspace, table, tables) = (&keyspace, &table, &tables);
        async move {
            let flushed = db.call(client, k, &["nodetool", "flush", keyspace, table]).await;
            let stats = db.call(client, k, &["nodetool", "tablestats", tables]).await;
            let histograms = db.call(client, k, &["nodetool", "tablehistograms", keyspace, table]).await;
            (flushed, stats, histograms)
        }
    }))
    .await;
    let mut figures = Vec::new();
    for (k, (flushed, stats, histograms)) in per_pod.into_iter().enumerate() {
        if let Err(e) = flushed {
            report.notes.push(format!("server: node {}: nodetool flush: {e:#}", k + 1));
        }
        for (what, text) in [("tablestats", &stats), ("tablehistograms", &histograms)] {
            match text {
                Ok(text) => report
                    .raw
                    .push(crate::store::RawFile { name: format!("node{}-{what}.txt", k + 1), content: text.clone() }),
                Err(e) => report.notes.push(format!("server: node {}: nodetool {what}: {e:#}", k + 1)),
            }
        }
        figures.push(server_figures(stats.as_deref().unwrap_or(""), histograms.as_deref().unwrap_or("")));
    }
    report.samples.extend(combine_figures(&figures));
    pod_proof(&api, db, &mut report.setup).await?;
    for (k, f) in facts.iter().enumerate() {
        for key in ["kernel.release", "dmesg.first", "data.fstype"] {
            if let Some(v) = f.facts.get(key) {
                report.setup.insert(format!("db.pod{}.{key}", k + 1), v.clone());
            }
        }
    }
    Ok(())
}

/// Runs one repetition of a CQL cell against a database someone else made in the cluster (an
/// operator's): its pods found by their labels, loaded through its Service.
pub fn run_external(
    k8s: &K8s,
    external: &crate::server::External,
    pods: &crate::server::Pods,
    cql: &Cql,
    run_dir: &Path,
    ledger: &crate::ledger::Ledger,
) -> Result<AgentReport> {
    let name = object_name(run_dir);
    k8s.record_run(ledger, &name)?;
    let found = block_on(async {
        let client = k8s.cluster.client().await?;
        let found = k8s.cluster.pods_with(&client, &pods.selector).await?;
        if found.is_empty() {
            bail!(
                "no pod in namespace {} is labelled {}: name the database's pods with selector = \"…\"",
                k8s.cluster.namespace,
                pods.selector
            );
        }
        Ok(found)
    })??;
    let db = Db {
        cluster: &k8s.cluster,
        owner: String::new(),
        selector: pods.selector.clone(),
        pods: found.iter().filter_map(|p| p.metadata.name.clone()).collect(),
        container: found[0]
            .spec
            .as_ref()
            .and_then(|s| s.containers.first())
            .map(|c| c.name.clone())
            .unwrap_or_default(),
    };
    if let Some(kill) = external.kill.as_ref().filter(|k| k.node > db.pods.len()) {
        return Ok(AgentReport {
            error: Some(format!(
                "kill_node = {}: the selector {} finds {} pods",
                kill.node,
                pods.selector,
                db.pods.len()
            )),
            unfit: true,
            ..Default::default()
        });
    }
    let mut load = cql.clone();
    let mut target = external.target.clone();
    target.nodes = match &pods.service {
        Some(service) => vec![format!("{service}.{}.svc", k8s.cluster.namespace)],
        None => found.iter().map(pod_ip).collect::<Result<_>>()?,
    };
    load.target = Some(target);
    let recovery = crate::server::START_TIMEOUT + SCHEDULE_ALLOWANCE;
    let mut report = load_pods(k8s, &db, load, external.kill.as_ref(), &name, ledger, run_dir, recovery)?;
    report.setup.insert("server.kind".into(), "external (pods in the cluster)".into());
    report.setup.insert("server.selector".into(), pods.selector.clone());
    if let Some(service) = &pods.service {
        report.setup.insert("server.service".into(), service.clone());
    }
    report.setup.insert("server.nodes".into(), db.pods.len().to_string());
    let proof = block_on(async { pod_proof(&Live::connect(&k8s.cluster).await?, &db, &mut report.setup).await })?;
    if let Err(e) = proof {
        report.notes.push(format!("server: reading its pods: {e:#}"));
    }
    // The pods under test are not isobench's to look into: the loaders' facts stay the run's.
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gossip_states_keep_each_endpoint_with_its_generation_status_and_host_id() {
        let text = "/10.244.77.50:7000\n  generation:1764122700\n  heartbeat:310\n  STATUS:18:NORMAL,-9\n  LOAD:300:1.0E5\n  STATUS_WITH_PORT:19:NORMAL,-9\n  HOST_ID:12:7a3f\n/10.244.77.52:7000\n  generation:1764122750\n  STATUS_WITH_PORT:21:BOOT,5\n";
        assert_eq!(
            gossip_states(text),
            "\n  /10.244.77.50:7000 generation:1764122700 STATUS_WITH_PORT:19:NORMAL,-9 HOST_ID:12:7a3f\n  /10.244.77.52:7000 generation:1764122750 STATUS_WITH_PORT:21:BOOT,5"
        );
    }

    #[test]
    fn the_set_name_leaves_room_for_the_controllers_labels() {
        let long = "isobench-".to_string() + &"9".repeat(60);
        assert!(set_name(&long).len() <= 52);
        assert_eq!(set_name("isobench-1-2"), "isobench-1-2-db");
    }
}
