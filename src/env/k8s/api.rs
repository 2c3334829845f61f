//! Talking to the API server: the client from a kubeconfig (token or client certificate, as
//! kubectl reads it), applying a run's objects, following its Job to the end, reading its pods'
//! logs, and deleting everything with a label. Every call has a timeout; waits poll the interrupt
//! flag, so Ctrl-C ends a run within a second even while the cluster is slow.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{
    Event, Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, AttachParams, DeleteParams, ListParams, LogParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::manifest::{AGENT_CONTAINER, Objects};
use super::statefulset::DbObjects;
use crate::ledger::KubeCluster;
use crate::sys;

/// One API call at most this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// A command run in a pod at most this long (nodetool starts a JVM; in gVisor, slowly).
const EXEC_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs a future on a runtime of its own: isobench's orchestration is synchronous.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(future))
}

/// An API call with the call timeout, its error as the API server said it.
/// How long a claim may stay Pending before its class and volumes are asked why.
const CLAIM_BINDS_WITHIN: Duration = Duration::from_secs(5);

/// The class a provisioner-less StorageClass names: its volumes are made by hand, in advance.
const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// Why `claim` cannot bind, when no waiting will change it.
async fn unbindable(client: &Client, claim: &PersistentVolumeClaim) -> Result<Option<String>> {
    let spec = claim.spec.clone().unwrap_or_default();
    // Without a class the cluster's default decides, through a provisioner: not certain.
    let Some(class) = spec.storage_class_name.clone() else { return Ok(None) };
    let classes: Api<StorageClass> = Api::all(client.clone());
    let Some(found) = call("reading a storage class", classes.get_opt(&class)).await? else {
        let all = call("listing storage classes", classes.list(&ListParams::default())).await?;
        let names: Vec<String> = all.items.into_iter().filter_map(|c| c.metadata.name).collect();
        return Ok(Some(format!(
            "its storage class {class} does not exist; give the volume one of the cluster's: {}",
            names.join(", ")
        )));
    };
    if found.provisioner != NO_PROVISIONER {
        return Ok(None);
    }
    let mode = spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into());
    let wanted = spec.resources.as_ref().and_then(|r| r.requests.as_ref()?.get("storage")).map(|q| q.0.clone());
    let wanted_bytes = wanted.as_deref().and_then(quantity_bytes).unwrap_or(0.0);
    let access = spec.access_modes.clone().unwrap_or_default();
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let all = call("listing volumes", volumes.list(&ListParams::default())).await?.items;
    let available: Vec<&PersistentVolume> =
        all.iter().filter(|v| v.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Available")).collect();
    let fits = |v: &PersistentVolume, class: &str| {
        let Some(s) = &v.spec else { return false };
        s.storage_class_name.as_deref() == Some(class)
            && s.volume_mode.as_deref().unwrap_or("Filesystem") == mode
            && s.capacity.as_ref().and_then(|c| c.get("storage")).and_then(|q| quantity_bytes(&q.0)).unwrap_or(0.0)
                >= wanted_bytes
            && access.iter().all(|a| s.access_modes.iter().flatten().any(|m| m == a))
    };
    if available.iter().any(|v| fits(v, &class)) {
        return Ok(None);
    }
    let size = if wanted_bytes > 0.0 { quantity_text(wanted_bytes) } else { "any size".into() };
    let mut counted: std::collections::BTreeMap<String, usize> = Default::default();
    for v in
        available.iter().filter_map(|v| v.spec.as_ref()).filter(|s| s.storage_class_name.as_deref() == Some(&class))
    {
        let capacity = v.capacity.as_ref().and_then(|c| c.get("storage")).map(|q| q.0.clone()).unwrap_or_default();
        let capacity = quantity_bytes(&capacity).map_or(capacity, quantity_text);
        *counted.entry(format!("{} {capacity}", v.volume_mode.as_deref().unwrap_or("Filesystem"))).or_default() += 1;
    }
    let has: Vec<String> = counted.iter().map(|(what, n)| format!("{n} × {what}")).collect();
    let has = if has.is_empty() { "none Available".to_string() } else { format!("Available: {}", has.join(", ")) };
    let other_classes: std::collections::BTreeSet<String> = available
        .iter()
        .filter_map(|v| v.spec.as_ref()?.storage_class_name.clone())
        .filter(|c| *c != class && available.iter().any(|v| fits(v, c)))
        .collect();
    let mut fix = Vec::new();
    if counted.keys().any(|k| !k.starts_with(&mode)) {
        let other = if mode == "Block" { "Filesystem" } else { "Block" };
        fix.push(format!(
            "volume_mode = \"{other}\" on the volume, where the workload can use it (fio can, a database cannot)"
        ));
    }
    if !other_classes.is_empty() {
        fix.push(format!(
            "storage_class = one with such volumes: {}",
            other_classes.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    fix.push(format!("or make a {mode} volume of at least {size} for class {class}"));
    Ok(Some(format!(
        "it asks class {class} for a {mode} volume of {size}, and the class has no provisioner ({NO_PROVISIONER}: only volumes made for it in advance) and no such volume ({has}); use {}",
        fix.join("; ")
    )))
}

/// Bytes as Kubernetes writes them: "4Gi" for a whole number of binary units, else bytes.
fn quantity_text(bytes: f64) -> String {
    for (suffix, unit) in [("Ti", 1099511627776.0), ("Gi", 1073741824.0), ("Mi", 1048576.0), ("Ki", 1024.0)] {
        if bytes >= unit && (bytes / unit).fract() == 0.0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    format!("{bytes}")
}

/// A Kubernetes quantity in bytes ("1Gi", "500M", "1073741824").
fn quantity_bytes(quantity: &str) -> Option<f64> {
    const SUFFIXES: &[(&str, f64)] = &[
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
    ];
    let quantity = quantity.trim();
    for (suffix, factor) in SUFFIXES {
        if let Some(number) = quantity.strip_suffix(suffix) {
            return number.parse::<f64>().ok().map(|n| n * factor);
        }
    }
    quantity.parse().ok()
}

pub(super) async fn call<T>(what: &str, future: impl Future<Output = Result<T, kube::Error>>) -> Result<T> {
    match tokio::time::timeout(CALL_TIMEOUT, future).await {
        Err(_) => bail!("{what}: the API server did not answer within {}s", CALL_TIMEOUT.as_secs()),
        Ok(Err(e)) => Err(anyhow!("{what}: {}", message(&e))),
        Ok(Ok(v)) => Ok(v),
    }
}

/// The API server's own words for a refusal; the error itself otherwise.
pub fn message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if !status.message.is_empty() => status.message.clone(),
        other => other.to_string(),
    }
}

impl KubeCluster {
    /// Where the kubeconfig is, as kubectl looks: the suite's, $KUBECONFIG, ~/.kube/config.
    pub fn kubeconfig_path(&self) -> Option<PathBuf> {
        self.kubeconfig
            .clone()
            .or_else(|| std::env::var_os("KUBECONFIG").map(|v| PathBuf::from(v).components().collect()))
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config")))
    }

    /// Why no client can be made here, if none can (checked before the first cell).
    pub fn missing(&self) -> Option<String> {
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() && self.kubeconfig.is_none() {
            return None;
        }
        match self.kubeconfig_path() {
            Some(p) if p.exists() => None,
            Some(p) => {
                Some(format!("no kubeconfig at {} (set kubeconfig = \"…\" on the env, or KUBECONFIG)", p.display()))
            }
            None => Some("no kubeconfig (set kubeconfig = \"…\" on the env, or KUBECONFIG)".into()),
        }
    }

    pub async fn client(&self) -> Result<Client> {
        let config = self.config().await?;
        // The CQL driver's rustls brings aws-lc-rs beside kube's ring, and with two providers
        // built in rustls cannot choose one for a client that names none, as kube's does:
        // ring is made the process's (an Err says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::try_from(config).context("making the Kubernetes client")
    }

    /// The API server's address and credentials, as the kubeconfig (or the pod) gives them.
    pub async fn config(&self) -> Result<Config> {
        let options = KubeConfigOptions { context: self.context.clone(), ..Default::default() };
        let config = match self.kubeconfig_path().filter(|p| p.exists()) {
            Some(path) => {
                let file = Kubeconfig::read_from(&path).with_context(|| format!("reading {}", path.display()))?;
                Config::from_custom_kubeconfig(file, &options)
                    .await
                    .with_context(|| format!("kubeconfig {}", path.display()))?
            }
            None => Config::incluster().context("no kubeconfig, and not inside a pod")?,
        };
        let mut config = config;
        config.connect_timeout = Some(Duration::from_secs(10));
        config.read_timeout = Some(CALL_TIMEOUT);
        Ok(config)
    }

    /// The API server's version and that the namespace exists.
    pub async fn check(&self, client: &Client) -> Result<String> {
        let version = call("asking the API server its version", client.apiserver_version()).await?;
        let namespaces: Api<Namespace> = Api::all(client.clone());
        if call("reading the namespace", namespaces.get_opt(&self.namespace)).await?.is_none() {
            bail!("namespace \"{}\" does not exist (kubectl create namespace {0})", self.namespace);
        }
        Ok(version.git_version)
    }

    /// The API server's admission of a pod like the runs' (a missing RuntimeClass is refused
    /// here, in its own words), without creating anything.
    pub async fn dry_run(&self, client: &Client, pod: &Pod) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let params = PostParams { dry_run: true, ..Default::default() };
        call("creating a pod (dry run)", pods.create(&params, pod)).await.map(|_| ())
    }

    pub async fn apply(&self, client: &Client, objects: &Objects) -> Result<()> {
        let params = PostParams::default();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        call("creating the request's Secret", secrets.create(&params, &objects.secret)).await?;
        if let Some(claim) = &objects.claim {
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &self.namespace);
            call("creating the PersistentVolumeClaim", claims.create(&params, claim)).await?;
        }
        let jobs: Api<Job> = Api::namespaced(client.clone(), &self.namespace);
        call("creating the Job", jobs.create(&params, &objects.job)).await?;
        Ok(())
    }

    /// Follows the Job until all its pods completed or one failed, or until `timeout`. Fails
    /// early with the cluster's reason when a pod cannot be made or cannot start.
    pub async fn wait(&self, client: &Client, name: &str, completions: i32, timeout: Duration) -> Result<()> {
        let jobs: Api<Job> = Api::namespaced(client.clone(), &self.namespace);
        let started = Instant::now();
        let waited =
            sys::Wait::new(format!("Job {name} to complete"), timeout)
                .every(Duration::from_millis(200))
                .backing_off_to(Duration::from_secs(2))
                .until_async(|| async {
                    let job = call("reading the Job", jobs.get(name)).await?;
                    let status = job.status.unwrap_or_default();
                    if status.succeeded.unwrap_or(0) >= completions {
                        return Ok(sys::Check::Done(()));
                    }
                    if status.failed.unwrap_or(0) > 0 {
                        let why =
                            status.conditions.unwrap_or_default().into_iter().find(|c| c.type_ == "Failed").map(|c| {
                                format!("{}: {}", c.reason.unwrap_or_default(), c.message.unwrap_or_default())
                            });
                        let pod = self.failed_pod(client, name).await.unwrap_or_default();
                        bail!("the Job failed ({}){pod}", why.unwrap_or_else(|| "a pod failed".into()));
                    }
                    let pods = self.pods(client, name).await?;
                    if let Some(why) = self.stuck_pods(client, name, &pods).await? {
                        bail!("{why}");
                    }
                    if started.elapsed() > CLAIM_BINDS_WITHIN
                        && let Some(why) = self.unbindable_claim(client, &pods).await?
                    {
                        return Err(crate::workload::Unfit(why).into());
                    }
                    Ok(sys::Check::NotYet(format!("{} of {completions} pods succeeded", status.succeeded.unwrap_or(0))))
                })
                .await;
        self.with_last_warning(client, name, &format!("job-name={name}"), waited).await
    }

    /// A wait's outcome, and where it timed out, the cluster's last warning about `owner` and its
    /// pods (those `selector` selects).
    async fn with_last_warning<T>(&self, client: &Client, owner: &str, selector: &str, waited: Result<T>) -> Result<T> {
        match waited {
            Err(e) if e.is::<sys::TimedOut>() => {
                let pods = self.pods_with(client, selector).await.unwrap_or_default();
                let last = self.warnings(client, owner, &pods).await.ok().and_then(|mut w| w.pop());
                bail!("{e}{}", last.map(|w| format!(" (last warning: {w})")).unwrap_or_default())
            }
            other => other,
        }
    }

    /// Why `pods` (of the controller `owner`) cannot start by themselves, if they cannot.
    async fn stuck_pods(&self, client: &Client, owner: &str, pods: &[Pod]) -> Result<Option<String>> {
        const FATAL: &[&str] = &["FailedCreate", "FailedCreatePodSandBox"];
        if let Some(w) = self.events(client, owner, pods).await?.into_iter().find(|e| FATAL.contains(&e.0.as_str())) {
            return Ok(Some(w.1));
        }
        const WAITING: &[&str] = &[
            "ErrImagePull",
            "ImagePullBackOff",
            "ErrImageNeverPull",
            "InvalidImageName",
            "CreateContainerConfigError",
        ];
        for pod in pods {
            let statuses = pod.status.clone().and_then(|s| s.container_statuses).unwrap_or_default();
            for waiting in statuses.into_iter().filter_map(|c| c.state?.waiting) {
                let reason = waiting.reason.unwrap_or_default();
                if WAITING.contains(&reason.as_str()) {
                    return Ok(Some(format!("{reason}: {}", waiting.message.unwrap_or_default())));
                }
            }
        }
        Ok(None)
    }

    /// How the first failed pod ended: its exit code and reason, and the last lines it printed.
    async fn failed_pod(&self, client: &Client, name: &str) -> Result<String> {
        for pod in self.pods(client, name).await? {
            let pod_name = pod.metadata.name.clone().unwrap_or_default();
            let statuses = pod.status.and_then(|s| s.container_statuses).unwrap_or_default();
            let Some(ended) = statuses.into_iter().find_map(|c| c.state?.terminated) else { continue };
            if ended.exit_code == 0 {
                continue;
            }
            let log = self.logs(client, &pod_name).await.unwrap_or_default();
            return Ok(format!(
                ": pod {pod_name} exited with {} ({}){}\n{}",
                ended.exit_code,
                ended.reason.unwrap_or_default(),
                ended.message.map(|m| format!(": {}", m.trim())).unwrap_or_default(),
                sys::tail_lines(&log, 8).trim_end()
            ));
        }
        Ok(String::new())
    }

    /// Warning events of a controller (a Job, a StatefulSet) and its pods, oldest first, as
    /// (reason, "Kind name: message").
    async fn events(&self, client: &Client, name: &str, pods: &[Pod]) -> Result<Vec<(String, String)>> {
        let events: Api<Event> = Api::namespaced(client.clone(), &self.namespace);
        let listed = call("reading events", events.list(&ListParams::default().fields("type=Warning"))).await?;
        let pods: Vec<String> = pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
        let mut found: Vec<_> = listed
            .items
            .into_iter()
            .filter(|e| {
                let object = e.involved_object.name.as_deref().unwrap_or_default();
                object == name || pods.iter().any(|p| p == object)
            })
            .map(|e| {
                let what = format!(
                    "{} {}: {}",
                    e.involved_object.kind.clone().unwrap_or_default(),
                    e.involved_object.name.clone().unwrap_or_default(),
                    e.message.clone().unwrap_or_default().trim()
                );
                (e.last_timestamp.clone().map(|t| t.0), e.reason.unwrap_or_default(), what)
            })
            .collect();
        found.sort_by_key(|e| e.0);
        Ok(found.into_iter().map(|(_, reason, what)| (reason, what)).collect())
    }

    async fn warnings(&self, client: &Client, name: &str, pods: &[Pod]) -> Result<Vec<String>> {
        let events = self.events(client, name, pods).await?;
        Ok(events.into_iter().map(|(reason, what)| format!("{reason}: {what}")).collect())
    }

    /// The pods `selector` selects, by name.
    pub async fn pods_with(&self, client: &Client, selector: &str) -> Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let mut found = call("listing pods", pods.list(&ListParams::default().labels(selector))).await?.items;
        found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        Ok(found)
    }

    /// The Job's pods, in completion-index order.
    pub async fn pods(&self, client: &Client, name: &str) -> Result<Vec<Pod>> {
        let mut found = self.pods_with(client, &format!("job-name={name}")).await?;
        let index = |p: &Pod| {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("batch.kubernetes.io/job-completion-index"))
                .and_then(|i| i.parse::<u32>().ok())
                .unwrap_or(0)
        };
        found.sort_by_key(index);
        Ok(found)
    }

    pub async fn logs(&self, client: &Client, pod: &str) -> Result<String> {
        self.container_logs(client, pod, AGENT_CONTAINER, false).await
    }

    /// A container's log; `previous`: that of its last run before a restart.
    pub async fn container_logs(&self, client: &Client, pod: &str, container: &str, previous: bool) -> Result<String> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let params = LogParams { container: Some(container.into()), previous, ..Default::default() };
        call("reading the pod's log", pods.logs(pod, &params)).await
    }

    /// The PersistentVolume that bound a claim.
    pub async fn bound_volume(&self, client: &Client, claim: &str) -> Result<Option<String>> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &self.namespace);
        Ok(call("reading the claim", claims.get_opt(claim)).await?.and_then(|c| c.spec?.volume_name))
    }

    /// A PersistentVolume's StorageClass and where its data is ("hostPath /…", "csi driver …").
    pub async fn volume_source(&self, client: &Client, pv: &str) -> Result<(String, String)> {
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let Some(spec) = call("reading the PersistentVolume", volumes.get_opt(pv)).await?.and_then(|v| v.spec) else {
            return Ok(Default::default());
        };
        let source = if let Some(h) = &spec.host_path {
            format!("hostPath {}", h.path)
        } else if let Some(l) = &spec.local {
            format!("local {}", l.path)
        } else if let Some(c) = &spec.csi {
            format!("csi {}", c.driver)
        } else {
            "other".into()
        };
        Ok((spec.storage_class_name.unwrap_or_default(), source))
    }

    /// The nodes a pod can be scheduled on: Ready, not cordoned, and without a taint that keeps
    /// pods off (NoSchedule, NoExecute).
    pub async fn schedulable_nodes(&self, client: &Client) -> Result<Vec<String>> {
        let nodes: Api<Node> = Api::all(client.clone());
        let list = call("listing the nodes", nodes.list(&Default::default())).await?;
        Ok(list
            .items
            .into_iter()
            .filter(|n| {
                let spec = n.spec.clone().unwrap_or_default();
                let tainted =
                    spec.taints.unwrap_or_default().iter().any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute");
                node_is_ready(n) && !spec.unschedulable.unwrap_or(false) && !tainted
            })
            .filter_map(|n| n.metadata.name)
            .collect())
    }

    /// Whether the API server sees `node` Ready (its kubelet renewing its lease).
    pub async fn node_ready(&self, client: &Client, node: &str) -> Result<bool> {
        let nodes: Api<Node> = Api::all(client.clone());
        Ok(node_is_ready(&call("reading the node", nodes.get(node)).await?))
    }

    /// The node a PersistentVolume's node affinity pins it to (a `local` volume's); None for a
    /// volume any node reaches, or one that names no single node.
    pub async fn volume_node(&self, client: &Client, pv: &str) -> Result<Option<String>> {
        let volumes: Api<PersistentVolume> = Api::all(client.clone());
        let spec = call("reading the PersistentVolume", volumes.get_opt(pv)).await?.and_then(|v| v.spec);
        let terms = spec.and_then(|s| s.node_affinity?.required).map(|r| r.node_selector_terms).unwrap_or_default();
        Ok(terms.iter().flat_map(|t| t.match_expressions.iter().flatten()).find_map(|e| {
            let values = e.values.as_ref()?;
            (e.key == "kubernetes.io/hostname" && e.operator == "In" && values.len() == 1).then(|| values[0].clone())
        }))
    }

    /// What runs a node's pods, as its kubelet reports it ("containerd://2.1.5, kubelet
    /// v1.34.4, kernel 6.1.0-…"); None where this account may not read nodes.
    pub async fn node_runtime(&self, client: &Client, node: &str) -> Option<String> {
        let nodes: Api<Node> = Api::all(client.clone());
        let info = nodes.get_opt(node).await.ok()??.status?.node_info?;
        Some(format!(
            "{}, kubelet {}, kernel {}",
            info.container_runtime_version, info.kubelet_version, info.kernel_version
        ))
    }

    /// The handler a RuntimeClass names (the node's runtime's configuration: "runsc", "kata");
    /// None where it cannot be read.
    pub async fn runtime_handler(&self, client: &Client, class: &str) -> Option<String> {
        let classes: Api<RuntimeClass> = Api::all(client.clone());
        Some(classes.get_opt(class).await.ok()??.handler)
    }

    /// What ran a pod, into a run's setup: its node's runtime (`k8s.node_runtime`) and its
    /// RuntimeClass's handler (`k8s.runtime_handler`), as far as this account may read them.
    pub async fn runtime_facts(
        &self,
        client: &Client,
        node: &str,
        class: Option<&str>,
        setup: &mut std::collections::BTreeMap<String, String>,
    ) {
        if let Some(runtime) = self.node_runtime(client, node).await {
            setup.insert("k8s.node_runtime".into(), runtime);
        }
        if let Some(class) = class
            && let Some(handler) = self.runtime_handler(client, class).await
        {
            setup.insert("k8s.runtime_handler".into(), handler);
        }
    }

    /// Runs `command` in a pod's container as `kubectl exec` does; its standard output, or an
    /// error with its exit status and standard error.
    pub async fn exec(&self, client: &Client, pod: &str, container: &str, command: &[String]) -> Result<String> {
        use tokio::io::AsyncReadExt;
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let params = AttachParams::default().container(container).stdout(true).stderr(true);
        let what = format!("exec {} in pod {pod}", command.join(" "));
        let run = async {
            let mut attached =
                pods.exec(pod, command.to_vec(), &params).await.map_err(|e| anyhow!("{}", message(&e)))?;
            let (mut out, mut err) = (String::new(), String::new());
            let mut stdout = attached.stdout().context("no stdout")?;
            let mut stderr = attached.stderr().context("no stderr")?;
            let status = attached.take_status().context("no status")?;
            let (read_out, read_err) = tokio::join!(stdout.read_to_string(&mut out), stderr.read_to_string(&mut err));
            read_out?;
            read_err?;
            let status = status.await;
            let _ = attached.join().await;
            match status {
                Some(s) if s.status.as_deref() == Some("Success") => Ok(out),
                Some(s) => bail!(
                    "{}{}",
                    s.message.unwrap_or_else(|| "it failed".into()),
                    if err.trim().is_empty() {
                        String::new()
                    } else {
                        format!(":\n{}", sys::tail_lines(&err, 12).trim_end())
                    }
                ),
                None => bail!("the API server did not say how it ended"),
            }
        };
        match tokio::time::timeout(EXEC_TIMEOUT, run).await {
            Err(_) => bail!("{what}: no answer within {} s", EXEC_TIMEOUT.as_secs()),
            Ok(result) => result.with_context(|| what.clone()),
        }
    }

    /// Creates a database's Secret, headless Service and StatefulSet.
    pub async fn apply_database(&self, client: &Client, objects: &DbObjects) -> Result<()> {
        let params = PostParams::default();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &self.namespace);
        call("creating the database's Secret", secrets.create(&params, &objects.secret)).await?;
        let services: Api<Service> = Api::namespaced(client.clone(), &self.namespace);
        call("creating the headless Service", services.create(&params, &objects.service)).await?;
        let sets: Api<StatefulSet> = Api::namespaced(client.clone(), &self.namespace);
        call("creating the StatefulSet", sets.create(&params, &objects.set)).await?;
        Ok(())
    }

    /// Waits until the StatefulSet `name` has `replicas` ready pods (selected by `selector`), or
    /// fails with the cluster's reason: a pod that cannot start, a container that exited (with
    /// the end of its log), or the last warning when `timeout` passes.
    pub async fn wait_ready(
        &self,
        client: &Client,
        name: &str,
        selector: &str,
        container: &str,
        replicas: usize,
        timeout: Duration,
    ) -> Result<Vec<Pod>> {
        let started = Instant::now();
        let waited = sys::Wait::new(format!("{replicas} pods of {name} to be Ready"), timeout)
            .every(Duration::from_millis(500))
            .until_async(|| async {
                let pods = self.pods_with(client, selector).await?;
                let ready = pods.iter().filter(|p| is_ready(p)).count();
                if ready >= replicas && pods.len() == replicas {
                    return Ok(sys::Check::Done(pods));
                }
                if let Some(why) = self.stuck_pods(client, name, &pods).await? {
                    bail!("{why}");
                }
                // A claim is Pending for a moment while its volume binds: certain only after that.
                if started.elapsed() > CLAIM_BINDS_WITHIN
                    && let Some(why) = self.unbindable_claim(client, &pods).await?
                {
                    return Err(crate::workload::Unfit(why).into());
                }
                for pod in &pods {
                    if let Some(why) = self.crashed(client, pod, container).await? {
                        bail!("{why}");
                    }
                }
                Ok(sys::Check::NotYet(format!("{ready} of {replicas} Ready")))
            })
            .await;
        self.with_last_warning(client, name, selector, waited).await
    }

    /// Why a pending pod's claim can never bind, where that is certain: its storage class does
    /// not exist, or it has no provisioner (only the volumes made for it, as a `local` class)
    /// and none of its Available volumes fits the claim's mode, size and access.
    async fn unbindable_claim(&self, client: &Client, pods: &[Pod]) -> Result<Option<String>> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &self.namespace);
        let pending = pods.iter().filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"));
        let names = pending
            .flat_map(|p| p.spec.iter().flat_map(|s| s.volumes.iter().flatten()))
            .filter_map(|v| Some(v.persistent_volume_claim.as_ref()?.claim_name.clone()));
        for name in names {
            let Some(claim) = call("reading a claim", claims.get_opt(&name)).await? else { continue };
            if claim.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Pending") {
                continue;
            }
            if let Some(why) = unbindable(client, &claim).await? {
                return Ok(Some(format!("claim {name} cannot bind: {why}")));
            }
        }
        Ok(None)
    }

    /// How a pod's container ended, if it ended: its exit code and the end of its log.
    async fn crashed(&self, client: &Client, pod: &Pod, container: &str) -> Result<Option<String>> {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let statuses = pod.status.clone().and_then(|s| s.container_statuses).unwrap_or_default();
        let Some(status) = statuses.into_iter().find(|c| c.name == container) else { return Ok(None) };
        let ended = status.state.and_then(|s| s.terminated).map(|t| (t, false)).or_else(|| {
            (status.restart_count > 0)
                .then_some(())
                .and(status.last_state.and_then(|s| s.terminated))
                .map(|t| (t, true))
        });
        let Some((ended, previous)) = ended else { return Ok(None) };
        let log = self.container_logs(client, &name, container, previous).await.unwrap_or_default();
        // isobench's own last words in the pod name the cause; the log's end rarely does.
        let said = log
            .rfind("isobench: error:")
            .map_or_else(|| sys::tail_lines(&log, 12), |at| log[at..].lines().take(30).collect::<Vec<_>>().join("\n"));
        Ok(Some(format!(
            "pod {name} exited with {} ({}):\n{}",
            ended.exit_code,
            ended.reason.unwrap_or_default(),
            said.trim_end()
        )))
    }

    /// Deletes one pod at once (grace 0), as a machine failing would.
    pub async fn kill_pod(&self, client: &Client, pod: &str) -> Result<()> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::background() };
        call("deleting the pod", pods.delete(pod, &now)).await.map(|_| ())
    }

    /// The pod, if it exists.
    pub async fn pod(&self, client: &Client, name: &str) -> Result<Option<Pod>> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        call("reading the pod", pods.get_opt(name)).await
    }

    /// Deletes the StatefulSets, Jobs, pods, Services, Secrets and claims with `selector`, and
    /// waits until they are gone.
    pub async fn delete(&self, client: &Client, selector: &str) -> Result<()> {
        let list = ListParams::default().labels(selector);
        let delete = DeleteParams::background();
        let ns = &self.namespace;
        let sets: Api<StatefulSet> = Api::namespaced(client.clone(), ns);
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let services: Api<Service> = Api::namespaced(client.clone(), ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        // Controllers first, or they make new pods for those deleted.
        call("deleting StatefulSets", sets.delete_collection(&delete, &list)).await?;
        call("deleting Jobs", jobs.delete_collection(&delete, &list)).await?;
        // Pods go with their controller, but not before the garbage collector gets to them.
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::background() };
        call("deleting pods", pods.delete_collection(&now, &list)).await?;
        call("deleting Services", services.delete_collection(&delete, &list)).await?;
        call("deleting Secrets", secrets.delete_collection(&delete, &list)).await?;
        // A StatefulSet's claims outlive it unless its retention policy says otherwise: they
        // carry the run's labels (its claim template's) and go here.
        call("deleting claims", claims.delete_collection(&delete, &list)).await?;
        let what = format!("the objects labelled {selector} in namespace {ns} to go after their deletion");
        sys::Wait::new(what, Duration::from_secs(120))
            .every(Duration::from_millis(500))
            .until_async(|| async {
                // A pod its kubelet cannot end (its machine lost) stays Terminating: deleted again
                // with grace 0, it goes from the API at once.
                let pods_left = call("listing pods", pods.list(&list)).await?.items.len();
                if pods_left > 0 {
                    call("deleting pods", pods.delete_collection(&now, &list)).await?;
                }
                let left = call("listing StatefulSets", sets.list(&list)).await?.items.len()
                    + call("listing Jobs", jobs.list(&list)).await?.items.len()
                    + pods_left
                    + call("listing Services", services.list(&list)).await?.items.len()
                    + call("listing Secrets", secrets.list(&list)).await?.items.len()
                    + call("listing claims", claims.list(&list)).await?.items.len();
                Ok(if left == 0 { sys::Check::Done(()) } else { sys::Check::NotYet(format!("{left} objects left")) })
            })
            .await
    }
}

fn node_is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Whether the pod's Ready condition is true.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_and_print_as_kubernetes_writes_them() {
        assert_eq!(quantity_bytes("1Gi"), Some(1073741824.0));
        assert_eq!(quantity_bytes("500M"), Some(5e8));
        assert_eq!(quantity_bytes("1073741824"), Some(1073741824.0));
        assert_eq!(quantity_bytes("lots"), None);
        assert_eq!(quantity_text(1073741824.0), "1Gi");
        assert_eq!(quantity_text(4.0 * 1073741824.0), "4Gi");
        assert_eq!(quantity_text(5e8), "500000000");
    }
}
