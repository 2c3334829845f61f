//! A CQL cell with a managed Cassandra in a k8s environment: the database runs in the pods under
//! test, as users run it there. Each run makes a StatefulSet of `nodes` pods of the env's runtime
//! class (each pod's data on a claim of the cell's `pvc` volume), waits until every pod answers
//! CQL and every node sees every node Up and Normal, creates the load's role, then loads the pods
//! with an Indexed Job of loader pods (the load generator's runtime class), kills a pod on cue
//! when the suite asks for a fault, and reads the server's own statistics inside the pods. What
//! the run made carries its labels and is deleted when it ends (or by `isobench cleanup`).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use crate::agent;
use crate::env::k8s::api::{block_on, is_ready};
use crate::env::k8s::kubelet::{CpuSample, Kubelet};
use crate::env::k8s::manifest::SCRATCH_DIR;
use crate::env::k8s::statefulset::{self, CONTAINER, Database};
use crate::env::k8s::{JobRun, K8s, object_name};
use crate::ledger::KubeCluster;
use crate::server::in_pod::{self, DbPod, PodFacts};
use crate::server::{Managed, STOP_TIMEOUT};
use crate::store::{RunRecord, Sample};
use crate::volume::Provisioned;
use crate::workload::Spec;
use crate::workload::cql::{Cql, MEASURED_END_LINE, MEASURED_LINE, Target};

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
        let began = Instant::now();
        loop {
            let mut views = Vec::new();
            for k in 0..self.pods.len() {
                views.push(self.call(client, k, &["nodetool", "status"]).await);
            }
            if views.iter().all(|v| v.as_ref().is_ok_and(|text| crate::server::cluster::all_up(text, addresses))) {
                return Ok(());
            }
            if began.elapsed() > timeout || crate::sys::interrupted() {
                let seen: Vec<String> = views
                    .iter()
                    .enumerate()
                    .map(|(k, v)| match v {
                        Ok(text) => format!("{} sees {}", self.pod(k), crate::server::cluster::describe_members(text)),
                        Err(e) => format!("{}: {e:#}", self.pod(k)),
                    })
                    .collect();
                // A node missing from every view, its own included, is out of the token map (as
                // when two nodes claim one token): what gossip says of each endpoint tells why.
                let mut gossip = String::new();
                for k in 0..self.pods.len() {
                    if let Ok(text) = self.call(client, k, &["nodetool", "gossipinfo"]).await {
                        gossip.push_str(&format!("\n{} gossip:{}", self.pod(k), gossip_states(&text)));
                    }
                }
                bail!(
                    "the {} pods did not all see one another Up and Normal within {} s: {}{gossip}",
                    self.pods.len(),
                    timeout.as_secs(),
                    seen.join("; ")
                );
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
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

/// Runs one repetition of a served CQL cell in a k8s environment.
pub fn run(
    k8s: &K8s,
    managed: &Managed,
    cql: &Cql,
    volume: &Provisioned,
    run_dir: &Path,
    ledger: &crate::ledger::Ledger,
    record: &mut RunRecord,
) -> Result<crate::store::AgentReport> {
    let unfit = |why: String| Ok(crate::store::AgentReport { error: Some(why), unfit: true, ..Default::default() });
    let Some(claim) = &volume.claim else {
        return unfit(
            "a database in a k8s environment keeps its data on a claim: give the cell a kind = \"pvc\" volume".into(),
        );
    };
    if claim.block {
        return unfit(
            "volume_mode = \"Block\": a database needs a filesystem; use volume_mode = \"Filesystem\" (fio measures the raw device)"
                .into(),
        );
    }
    let heap = crate::units::parse_size(&managed.heap).map_err(anyhow::Error::msg)?;
    if let Some(memory) = k8s.pod.memory.filter(|m| *m < heap + crate::server::cluster::OFF_HEAP) {
        return unfit(format!(
            "resources.memory = {} is less than the node's heap ({}) and the {} it needs besides: give the pods more, or a smaller heap",
            crate::units::human(memory as f64, "B"),
            managed.heap,
            crate::units::human(crate::server::cluster::OFF_HEAP as f64, "B"),
        ));
    }
    let name = object_name(run_dir);
    let set = set_name(&name);
    k8s.record_run(ledger, &name)?;
    let nodes = managed.nodes;
    let image = managed.image.clone().unwrap_or_else(|| default_image(&managed.version));
    let objects = database_objects(k8s, managed, claim, &name, ledger.token())?;
    let db = Db {
        cluster: &k8s.cluster,
        owner: set.clone(),
        selector: statefulset::selector(&name).iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        pods: (0..nodes).map(|k| statefulset::pod_name(&set, k)).collect(),
        container: CONTAINER.into(),
    };
    let start_timeout = managed.start_timeout * nodes as u32 + SCHEDULE_ALLOWANCE;
    record.setup.insert("server.kind".into(), "cassandra".into());
    record.setup.insert("server.heap".into(), managed.heap.clone());
    record.setup.insert("server.nodes".into(), nodes.to_string());
    record.setup.insert("server.image".into(), image.clone());
    record.setup.insert("k8s.statefulset".into(), set.clone());
    record.setup.insert("k8s.spread".into(), k8s.spread.name().into());
    if let Some((user, _)) = &managed.login {
        record.setup.insert("server.login".into(), format!("PasswordAuthenticator, role {user}"));
    }
    if managed.tls {
        record.setup.insert("server.tls".into(), "client_encryption_options (a key made by each node)".into());
    }

    // The database: up, in a ring, with the load's role.
    let began = Instant::now();
    let up = block_on(async {
        let client = k8s.cluster.client().await?;
        k8s.cluster.apply_database(&client, &objects).await?;
        let pods = db.wait_ready(&client, start_timeout).await?;
        let addresses: Vec<String> = pods.iter().map(pod_ip).collect::<Result<_>>()?;
        if nodes > 1 {
            db.wait_ring(&client, &addresses, managed.start_timeout).await?;
        }
        let ready = began.elapsed();
        let mut facts = Vec::new();
        for k in 0..nodes {
            let text = db.call(&client, k, &["facts"]).await?;
            facts.push(serde_json::from_str::<PodFacts>(&text).map_err(|e| anyhow!("pod {}: facts: {e}", db.pod(k)))?);
        }
        if let Some((user, _)) = &managed.login {
            db.call(&client, 0, &["create-role", user]).await?;
        }
        Ok::<_, anyhow::Error>((addresses, ready, facts))
    })?;
    let (addresses, ready, facts) = match up {
        Ok(up) => up,
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => {
            return Ok(crate::store::AgentReport {
                // A cause that holds for every run (a claim that cannot bind) spares the others.
                unfit: e.downcast_ref::<crate::workload::Unfit>().is_some(),
                error: Some(format!("the database did not start: {e:#}")),
                ..Default::default()
            });
        }
    };
    let version = facts.first().map(|f| f.release_version.clone()).unwrap_or_default();
    record.setup.insert("server.version".into(), version);
    record.setup.insert("server.addresses".into(), addresses.join(", "));

    let mut load = cql.clone();
    let (user, password) = managed.login.clone().unzip();
    let truststore = managed.tls.then(|| facts.iter().filter_map(|f| f.certificate.clone()).collect::<String>());
    load.target = Some(Target { nodes: addresses.clone(), port: in_pod::NATIVE_PORT, user, password, truststore });
    let recovery = managed.start_timeout + SCHEDULE_ALLOWANCE;
    let mut report = load_pods(k8s, &db, load.clone(), managed.kill.as_ref(), &name, ledger, run_dir, recovery)?;
    // The loaders' command lines name the pods by the addresses of this run: by their place in
    // the StatefulSet instead, the same note for every run of the cell.
    // Longest first, so that 10.244.0.1 does not rewrite part of 10.244.0.12.
    let mut places: Vec<(usize, &String)> = addresses.iter().enumerate().collect();
    places.sort_by_key(|(_, address)| std::cmp::Reverse(address.len()));
    for note in &mut report.notes {
        for (k, address) in &places {
            *note = note.replace(address.as_str(), &format!("<pod {k}>"));
        }
    }
    report.samples.push(Sample::new("server_ready", ready.as_secs_f64(), "s"));
    let startup = facts.iter().map(|f| f.ready_after_s).fold(0.0, f64::max);
    report.samples.push(Sample::new("server_startup", startup, "s"));
    // Each phase as the ring's slowest node's, as the start itself.
    let mut phases: Vec<(String, f64)> = Vec::new();
    for (metric, after) in facts.iter().flat_map(|f| &f.start_phases) {
        match phases.iter_mut().find(|(m, _)| m == metric) {
            Some((_, slowest)) => *slowest = slowest.max(*after),
            None => phases.push((metric.clone(), *after)),
        }
    }
    report.samples.extend(phases.into_iter().map(|(metric, after)| Sample::new(metric, after, "s")));

    // After the load: the server's figures and the proof of where it ran.
    let after = block_on(async {
        let client = k8s.cluster.client().await?;
        let settings = load.phase(&load.args)?;
        let keyspace = settings.schema.keyspace.clone();
        let table = crate::cql::schema::table(settings.command.ops[0].0).to_string();
        let mut figures = Vec::new();
        for k in 0..nodes {
            // What the memtables hold goes to disk first, so that the sizes are the table's.
            if let Err(e) = db.call(&client, k, &["nodetool", "flush", &keyspace, &table]).await {
                report.notes.push(format!("server: node {}: nodetool flush: {e:#}", k + 1));
            }
            let stats = db.call(&client, k, &["nodetool", "tablestats", &format!("{keyspace}.{table}")]).await;
            let histograms = db.call(&client, k, &["nodetool", "tablehistograms", &keyspace, &table]).await;
            for (what, text) in [("tablestats", &stats), ("tablehistograms", &histograms)] {
                match text {
                    Ok(text) => report.raw.push(crate::store::RawFile {
                        name: format!("node{}-{what}.txt", k + 1),
                        content: text.clone(),
                    }),
                    Err(e) => report.notes.push(format!("server: node {}: nodetool {what}: {e:#}", k + 1)),
                }
            }
            figures.push(server_figures(stats.as_deref().unwrap_or(""), histograms.as_deref().unwrap_or("")));
        }
        report.samples.extend(combine_figures(&figures));
        pod_proof(&db, &client, &mut report.setup).await?;
        for (k, f) in facts.iter().enumerate() {
            for key in ["kernel.release", "dmesg.first", "data.fstype"] {
                if let Some(v) = f.facts.get(key) {
                    report.setup.insert(format!("db.pod{}.{key}", k + 1), v.clone());
                }
            }
        }
        Ok::<_, anyhow::Error>(())
    })?;
    if let Err(e) = after {
        report.notes.push(format!("server: after the load: {e:#}"));
    }
    // The system under test is the database: its first pod's facts are the run's (the proof of
    // its runtime).
    report.facts = facts.into_iter().next().map(|f| f.facts).unwrap_or_default();
    Ok(report)
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
) -> Result<crate::store::AgentReport> {
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
        return Ok(crate::store::AgentReport {
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
    let proof = block_on(async {
        let client = k8s.cluster.client().await?;
        pod_proof(&db, &client, &mut report.setup).await
    })?;
    if let Err(e) = proof {
        report.notes.push(format!("server: reading its pods: {e:#}"));
    }
    // The pods under test are not isobench's to look into: the loaders' facts stay the run's.
    Ok(report)
}

/// The load from an Indexed Job of loader pods (the load generator's runtime class), the fault
/// on cue, and the killed pod's return.
#[allow(clippy::too_many_arguments)]
fn load_pods(
    k8s: &K8s,
    db: &Db,
    mut load: Cql,
    kill: Option<&crate::server::Kill>,
    name: &str,
    ledger: &crate::ledger::Ledger,
    run_dir: &Path,
    recovery: Duration,
) -> Result<crate::store::AgentReport> {
    let loaders = load.loaders.unwrap_or(1);
    if load.capacity.is_some() && loaders > 1 {
        let why = "a capacity search on Kubernetes runs from one loader pod, which offers every step's rate: set loaders = 1 (a step of several pods at once is not built yet)";
        return Ok(crate::store::AgentReport { error: Some(why.into()), unfit: true, ..Default::default() });
    }
    load.loaders = Some(loaders);
    load.indexed = true;
    let request = agent::Request {
        workload: Spec::Cql(load.clone()),
        data_dir: SCRATCH_DIR.into(),
        raw: None,
        read_only: false,
        scratch_dir: SCRATCH_DIR.into(),
        serve: None,
        barrier: false,
        // The loaders' reports are combined from their HDR logs: what each pod used is not
        // the database's, and is not kept.
        collect: false,
    };
    let loader_pods = k8s.loader_pods();
    let job = JobRun {
        name,
        token: ledger.token(),
        pod: &loader_pods,
        request: &request,
        claim: None,
        loaders: Some(loaders),
        deadline: crate::workload::Workload::timeout(&load) + SCHEDULE_ALLOWANCE,
    };
    let load_done = AtomicBool::new(false);
    let (loaded, killed, cpu) = std::thread::scope(|scope| {
        let fault = kill.map(|kill| {
            let load_done = &load_done;
            scope.spawn(move || fault(db, name, loaders, kill, load_done))
        });
        let cpu = scope.spawn(|| measured_cpu(db, name, loaders, &load_done));
        let loaded = k8s.run_job(&job);
        load_done.store(true, Ordering::Relaxed);
        (
            loaded,
            fault.map(|f| f.join().unwrap_or_else(|_| Err(anyhow!("the fault panicked")))),
            cpu.join().unwrap_or_else(|_| Err(anyhow!("counting the pods' CPU panicked"))),
        )
    });
    let mut report = match loaded {
        Ok((reports, proof)) => {
            let mut report = load.combine_indexed(reports, run_dir);
            for (key, value) in proof {
                // The loaders' own placement, apart from the database's.
                let key = match key.strip_prefix("k8s.") {
                    Some("server") | None => key,
                    Some(rest) => format!("loader.{rest}"),
                };
                report.setup.insert(key, value);
            }
            if let Some(kernel) = report.facts.get("kernel.release") {
                report.setup.insert("loader.kernel.release".into(), kernel.clone());
            }
            report
        }
        Err(e) if e.downcast_ref::<crate::sys::Interrupted>().is_some() => return Err(e),
        Err(e) => crate::store::AgentReport { error: Some(format!("the load failed: {e:#}")), ..Default::default() },
    };
    match cpu {
        Ok(Some(cpu)) => {
            report.samples.extend(super::collect::per_op(cpu.database, &report.samples));
            report.samples.extend(cpu.loaders.map(|s| Sample::new("sys.cpu_loaders", s, "s")));
            report.setup.insert("sys.cpu_counted_by".into(), format!("{}: each pod's cgroup, its rate between the kubelet's first and last samples in the measured phase (from the loaders' first line of it to their last) times the phase's length; a gVisor pod's cgroup is its sandbox's: the sentry and gofer with the workload", cpu.route));
        }
        Ok(None) => {}
        Err(e) => report.notes.push(format!("the pods' CPU was not counted: {e:#}")),
    }
    match killed {
        Some(Ok(Some(killed))) => {
            let node = format!("node {} (pod {})", killed.node, db.pod(killed.node - 1));
            report.setup.insert("fault.killed".into(), format!("{node} at {:.1} s", killed.at.as_secs_f64()));
            report.notes.push(format!(
                "fault: {node} was deleted (grace 0) {:.1} s into the measured phase, as the suite asked",
                killed.at.as_secs_f64()
            ));
            let back = block_on(async {
                let client = db.cluster.client().await?;
                db.wait_ready(&client, recovery).await
            })?;
            match back {
                Ok(_) => {
                    let after = killed.deleted.elapsed().as_secs_f64();
                    report.samples.push(Sample::new("server_recovery", after, "s"));
                }
                Err(e) => report.notes.push(format!("fault: the deleted pod did not come back: {e:#}")),
            }
        }
        Some(Ok(None)) => {
            let kill = kill.expect("a fault was asked for");
            report.notes.push(format!(
                "fault: node {} was not killed: the measured phase ended before {} s",
                kill.node,
                kill.after.as_secs_f64()
            ));
        }
        Some(Err(e)) => report.notes.push(format!("fault: {e:#}")),
        None => {}
    }
    Ok(report)
}

/// Where each of the database's pods ran: its machine, runtime class and image, and the claims
/// it mounts with the PersistentVolume and StorageClass behind each.
async fn pod_proof(db: &Db<'_>, client: &Client, setup: &mut BTreeMap<String, String>) -> Result<()> {
    let pods = db.cluster.pods_with(client, &db.selector).await?;
    for k in 0..db.pods.len() {
        let p = format!("db.pod{}", k + 1);
        let pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some(db.pod(k)));
        let spec = pod.and_then(|p| p.spec.clone()).unwrap_or_default();
        setup.insert(format!("{p}.name"), db.pod(k).to_string());
        let node = spec.node_name.unwrap_or_default();
        if k == 0 {
            db.cluster.runtime_facts(client, &node, spec.runtime_class_name.as_deref(), setup).await;
        }
        let class = spec.runtime_class_name.unwrap_or_else(|| "(default)".into());
        if k == 0 {
            setup.insert("k8s.runtime_class".into(), class.clone());
        }
        setup.insert(format!("{p}.node"), node);
        setup.insert(format!("{p}.runtime_class"), class);
        let status = pod.and_then(|p| p.status.clone()?.container_statuses);
        if let Some(c) = status.unwrap_or_default().into_iter().find(|c| c.name == db.container) {
            setup.insert(format!("{p}.image_id"), c.image_id);
        }
        let claims: Vec<String> = spec
            .volumes
            .unwrap_or_default()
            .into_iter()
            .filter_map(|v| Some(v.persistent_volume_claim?.claim_name))
            .collect();
        for (i, claim) in claims.iter().enumerate() {
            let at = if i == 0 { p.clone() } else { format!("{p}.claim{}", i + 1) };
            let pv = db.cluster.bound_volume(client, claim).await?.unwrap_or_default();
            let (class, source) = db.cluster.volume_source(client, &pv).await?;
            setup.insert(format!("{at}.claim"), claim.clone());
            setup.insert(format!("{at}.pv"), format!("{pv} ({source})"));
            setup.insert(format!("{at}.storage_class"), class);
        }
    }
    Ok(())
}

fn pod_ip(pod: &Pod) -> Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or_else(|| anyhow!("pod {} has no IP", pod.metadata.name.as_deref().unwrap_or("?")))
}

/// A pod deleted on cue: which node, how far into the measured phase, and when.
struct Killed {
    node: usize,
    at: Duration,
    deleted: Instant,
}

/// How often the loader pods' logs are read for a cue: a cue is seen this much late at most
/// (and the time an API call takes).
const CUE_POLL: Duration = Duration::from_millis(500);

/// Waits until every loader pod of `job` has printed `line`: false when the load ended first.
async fn all_logged(
    db: &Db<'_>,
    client: &Client,
    job: &str,
    loaders: u32,
    line: &str,
    load_done: &AtomicBool,
) -> Result<bool> {
    loop {
        // Read before the end is looked at: the last line of a load that just ended still counts.
        let ended = load_done.load(Ordering::Relaxed);
        if logged(db, client, job, line).await? == loaders as usize {
            return Ok(true);
        }
        if ended || crate::sys::interrupted() {
            return Ok(false);
        }
        tokio::time::sleep(CUE_POLL).await;
    }
}

/// How many loader pods of `job` have printed `line`.
async fn logged(db: &Db<'_>, client: &Client, job: &str, line: &str) -> Result<usize> {
    let mut cued = 0;
    for pod in db.cluster.pods(client, job).await? {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if db.cluster.logs(client, &name).await.is_ok_and(|log| log.contains(line)) {
            cued += 1;
        }
    }
    Ok(cued)
}

/// How often the pods' CPU is read while the measured phase runs: each reading catches the
/// kubelet's latest sample (a loader pod's last one comes before it exits: a pod that ended has
/// none), and costs the kubelet ~7 ms of CPU here.
const CPU_READ_EVERY: Duration = Duration::from_secs(1);

/// The CPU the database's pods and the loader pods used in the measured phase, as their nodes'
/// kubelets count each pod's cgroup.
struct PodsCpu {
    database: f64,
    loaders: Option<f64>,
    route: String,
}

/// Reads the pods' CPU when every loader says its measured phase began and every second until
/// every one says it ended (the cues are seen up to a poll late). None when the load ended
/// before it began; an error names what could not be read.
fn measured_cpu(db: &Db, job: &str, loaders: u32, load_done: &AtomicBool) -> Result<Option<PodsCpu>> {
    block_on(async {
        let client = db.cluster.client().await?;
        if !all_logged(db, &client, job, loaders, MEASURED_LINE, load_done).await? {
            return Ok(None);
        }
        let loader_pods: Vec<Pod> = db.cluster.pods(&client, job).await?;
        let mut database_pods = Vec::new();
        for name in &db.pods {
            database_pods.extend(db.cluster.pod(&client, name).await?);
        }
        let uids = |pods: &[Pod]| -> Vec<String> { pods.iter().filter_map(|p| p.metadata.uid.clone()).collect() };
        let (database_uids, loader_uids) = (uids(&database_pods), uids(&loader_pods));
        let nodes: std::collections::BTreeSet<String> =
            database_pods.iter().chain(&loader_pods).filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
        let mut kubelets = Vec::new();
        for node in &nodes {
            kubelets.push(Kubelet::connect(db.cluster, &client, node).await?);
        }
        let read = async || {
            let mut all = BTreeMap::new();
            for kubelet in &kubelets {
                all.extend(kubelet.pods_cpu(&db.cluster.namespace).await?);
            }
            Ok::<_, anyhow::Error>(all)
        };
        // Each pod's distinct samples (the kubelet serves its last one until it takes the next),
        // and the pods in the latest reading.
        let mut samples: BTreeMap<String, Vec<CpuSample>> = BTreeMap::new();
        let mut running = Vec::new();
        let mut keep = |reading: BTreeMap<String, CpuSample>| {
            running = reading.keys().cloned().collect();
            for (uid, sample) in reading {
                let kept = samples.entry(uid).or_default();
                if kept.last().is_none_or(|last| last.at != sample.at) {
                    kept.push(sample);
                }
            }
        };
        let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let began = now();
        keep(read().await?);
        loop {
            let ended = load_done.load(Ordering::Relaxed) || crate::sys::interrupted();
            let done = logged(db, &client, job, MEASURED_END_LINE).await? == loaders as usize;
            keep(read().await?);
            if done || ended {
                break;
            }
            tokio::time::sleep(CPU_READ_EVERY).await;
        }
        let phase = now().saturating_sub(began);
        // A pod's CPU in the phase: its rate between its first and last samples taken in the
        // phase (whole seconds apart, as the kubelet stamps them), over the phase's length. No
        // sample is later than the last reading; a stale one can be older than the phase. A pod's
        // count can fall between two samples (seen once in a test: -0.22 CPU-s over 6 s), so the
        // CPU between its first and last samples is what it rose by, its falls not subtracted.
        let from = began.as_secs() as i64;
        let in_phase = |uid: &String| -> Option<f64> {
            let inside: Vec<&CpuSample> = samples.get(uid)?.iter().filter(|s| s.at >= from).collect();
            let (first, last) = (inside.first()?, inside.last()?);
            let rose: f64 = inside.windows(2).map(|w| (w[1].seconds - w[0].seconds).max(0.0)).sum();
            (last.at > first.at).then(|| rose / (last.at - first.at) as f64 * phase.as_secs_f64())
        };
        // A database pod replaced by a fault is not counted in part: no figure instead.
        if database_uids.len() != db.pods.len() || database_uids.iter().any(|uid| !running.contains(uid)) {
            bail!("a database pod was replaced or ended during the measured phase");
        }
        let Some(database) = database_uids.iter().map(in_phase).sum::<Option<f64>>() else {
            bail!(
                "the kubelet sampled the database's pods fewer than twice in the {:.1} s measured phase (it samples each pod at its housekeeping interval, 10 s unless set): a longer phase gets a figure",
                phase.as_secs_f64()
            );
        };
        let loaders = loader_uids.iter().map(in_phase).sum::<Option<f64>>();
        let route = kubelets.iter().map(|k| k.route.as_str()).collect::<std::collections::BTreeSet<_>>();
        let route = route.into_iter().collect::<Vec<_>>().join("; ");
        Ok(Some(PodsCpu { database, loaders, route }))
    })?
}

/// Deletes node `kill.node`'s pod (grace 0) `kill.after` into the measured phase: when every
/// loader pod has said its measured phase began. None when the load ended first.
fn fault(
    db: &Db,
    job: &str,
    loaders: u32,
    kill: &crate::server::Kill,
    load_done: &AtomicBool,
) -> Result<Option<Killed>> {
    block_on(async {
        let client = db.cluster.client().await?;
        if !all_logged(db, &client, job, loaders, MEASURED_LINE, load_done).await? {
            return Ok(None);
        }
        let began = Instant::now();
        while began.elapsed() < kill.after {
            if load_done.load(Ordering::Relaxed) || crate::sys::interrupted() {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let at = began.elapsed();
        let pod = db.pod(kill.node - 1);
        let old = db.cluster.pod(&client, pod).await?.and_then(|p| p.metadata.uid);
        db.cluster.kill_pod(&client, pod).await?;
        let deleted = Instant::now();
        // Gone for real: the StatefulSet's new pod has the same name and another uid.
        while db.cluster.pod(&client, pod).await?.is_some_and(|p| p.metadata.uid == old && is_ready(&p)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Some(Killed { node: kill.node, at, deleted }))
    })?
}

/// What one node's `nodetool tablestats` and `tablehistograms` say of the load's table.
#[derive(Debug, Default, PartialEq)]
struct Figures {
    sstables: Option<f64>,
    live_bytes: Option<f64>,
    /// (p50, p99) in µs, where the node saw such operations.
    write: Option<(f64, f64)>,
    read: Option<(f64, f64)>,
}

fn server_figures(tablestats: &str, histograms: &str) -> Figures {
    let field = |name: &str| {
        tablestats
            .lines()
            .filter_map(|l| l.trim().strip_prefix(name))
            .find_map(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    let row = |label: &str| -> Option<Vec<f64>> {
        let line = histograms.lines().find(|l| l.split_whitespace().next() == Some(label))?;
        line.split_whitespace().skip(1).map(|v| v.parse().ok()).collect()
    };
    let (p50, p99) = (row("50%").unwrap_or_default(), row("99%").unwrap_or_default());
    // Columns: read latency, write latency (µs), SSTables, partition size, cell count; a
    // latency of 0 means the node saw no such operation.
    let latency = |column: usize| match (p50.get(column), p99.get(column)) {
        (Some(a), Some(b)) if *b > 0.0 => Some((*a, *b)),
        _ => None,
    };
    Figures {
        sstables: field("SSTable count:"),
        live_bytes: field("Space used (live):"),
        write: latency(1),
        read: latency(0),
    }
}

/// The cluster's figures: what its nodes hold, summed; the slowest node's latencies.
fn combine_figures(nodes: &[Figures]) -> Vec<Sample> {
    let mut out = Vec::new();
    let sum = |f: fn(&Figures) -> Option<f64>| nodes.iter().filter_map(f).reduce(|a, b| a + b);
    if let Some(n) = sum(|f| f.sstables) {
        out.push(Sample::new("server_sstables", n, "files"));
    }
    if let Some(bytes) = sum(|f| f.live_bytes) {
        out.push(Sample::new("server_table_size", bytes, "B"));
    }
    for (metric, pick) in [
        ("server_local_write", (|f: &Figures| f.write) as fn(&Figures) -> Option<(f64, f64)>),
        ("server_local_read", |f: &Figures| f.read),
    ] {
        let worst = nodes.iter().filter_map(pick).reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)));
        if let Some((p50, p99)) = worst {
            out.push(Sample::new(format!("{metric}_p50"), p50, "us"));
            out.push(Sample::new(format!("{metric}_p99"), p99, "us"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLESTATS: &str = "Total number of tables: 1\n----------------\nKeyspace : keyspace1\n\tRead Count: 0\n\tWrite Count: 4000\n\t\tTable: standard1\n\t\tSSTable count: 2\n\t\tOld SSTable count: 0\n\t\tSpace used (live): 1048576\n\t\tSpace used (total): 1048576\n\t\tLocal write count: 4000\n\t\tLocal write latency: 0.021 ms\n";
    const HISTOGRAMS: &str = "keyspace1/standard1 histograms\nPercentile      Read Latency     Write Latency          SSTables    Partition Size        Cell Count\n                    (micros)          (micros)                             (bytes)                  \n50%                     0.00             17.08              0.00               258                 5\n75%                     0.00             24.60              0.00               258                 5\n99%                     0.00             88.15              0.00               258                 5\nMin                     0.00              2.30              0.00               216                 5\nMax                     0.00           6866.96              0.00               258                 5\n";

    #[test]
    fn gossip_states_keep_each_endpoint_with_its_generation_status_and_host_id() {
        let text = "/10.244.77.50:7000\n  generation:1764122700\n  heartbeat:310\n  STATUS:18:NORMAL,-9\n  LOAD:300:1.0E5\n  STATUS_WITH_PORT:19:NORMAL,-9\n  HOST_ID:12:7a3f\n/10.244.77.52:7000\n  generation:1764122750\n  STATUS_WITH_PORT:21:BOOT,5\n";
        assert_eq!(
            gossip_states(text),
            "\n  /10.244.77.50:7000 generation:1764122700 STATUS_WITH_PORT:19:NORMAL,-9 HOST_ID:12:7a3f\n  /10.244.77.52:7000 generation:1764122750 STATUS_WITH_PORT:21:BOOT,5"
        );
    }

    #[test]
    fn nodetool_figures_are_read_and_a_cluster_sums_sizes_and_keeps_the_worst_latency() {
        let one = server_figures(TABLESTATS, HISTOGRAMS);
        assert_eq!(
            one,
            Figures { sstables: Some(2.0), live_bytes: Some(1048576.0), write: Some((17.08, 88.15)), read: None }
        );
        let two = Figures { sstables: Some(1.0), live_bytes: Some(1.0), write: Some((20.0, 50.0)), read: None };
        let samples = combine_figures(&[one, two]);
        let value = |m: &str| samples.iter().find(|s| s.metric == m).map(|s| s.value);
        assert_eq!(value("server_sstables"), Some(3.0));
        assert_eq!(value("server_table_size"), Some(1048577.0));
        assert_eq!(value("server_local_write_p50"), Some(20.0));
        assert_eq!(value("server_local_write_p99"), Some(88.15));
        assert_eq!(value("server_local_read_p99"), None, "no reads: no read latency");
        assert_eq!(server_figures("", ""), Figures::default());
    }

    #[test]
    fn the_set_name_leaves_room_for_the_controllers_labels() {
        let long = "isobench-".to_string() + &"9".repeat(60);
        assert!(set_name(&long).len() <= 52);
        assert_eq!(set_name("isobench-1-2"), "isobench-1-2-db");
    }
}
