//! Talking to the API server: the client from a kubeconfig (token or client certificate, as
//! kubectl reads it), applying a run's objects, following its Job to the end, reading its pods'
//! logs, and deleting everything with a label. Every call has a timeout; waits poll the interrupt
//! flag, so Ctrl-C ends a run within a second even while the cluster is slow.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, LogParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::{Deserialize, Serialize};

use super::manifest::{AGENT_CONTAINER, Objects};
use crate::process::{self, Interrupted};

/// One API call at most this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Which cluster, as the suite names it (recorded in the ledger so `cleanup` finds it again;
/// a path and names only, never credentials).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    pub namespace: String,
}

/// Runs a future on a runtime of its own: isobench's orchestration is synchronous.
pub fn block_on<F: Future>(future: F) -> Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(runtime.block_on(future))
}

/// An API call with the call timeout, its error as the API server said it.
async fn call<T>(what: &str, future: impl Future<Output = Result<T, kube::Error>>) -> Result<T> {
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

impl Cluster {
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
        // The CQL driver's rustls brings aws-lc-rs beside kube's ring, and with two providers
        // built in rustls cannot choose one for a client that names none, as kube's does:
        // ring is made the process's (an Err says one is installed already).
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::try_from(config).context("making the Kubernetes client")
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
        let mut pause = Duration::from_millis(200);
        loop {
            if process::interrupted() {
                return Err(Interrupted.into());
            }
            let job = call("reading the Job", jobs.get(name)).await?;
            let status = job.status.unwrap_or_default();
            if status.succeeded.unwrap_or(0) >= completions {
                return Ok(());
            }
            if status.failed.unwrap_or(0) > 0 {
                let why = status
                    .conditions
                    .unwrap_or_default()
                    .into_iter()
                    .find(|c| c.type_ == "Failed")
                    .map(|c| format!("{}: {}", c.reason.unwrap_or_default(), c.message.unwrap_or_default()));
                let pod = self.failed_pod(client, name).await.unwrap_or_default();
                bail!("the Job failed ({}){pod}", why.unwrap_or_else(|| "a pod failed".into()));
            }
            if let Some(why) = self.stuck(client, name).await? {
                bail!("{why}");
            }
            if started.elapsed() > timeout {
                let last = self.warnings(client, name).await?.pop();
                bail!(
                    "the Job did not complete within {}s{}",
                    timeout.as_secs(),
                    last.map(|w| format!(" (last warning: {w})")).unwrap_or_default()
                );
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// A reason the Job cannot go on by itself: the job controller could not create a pod (the
    /// API server's admission said no), the node could not make the sandbox, or the image cannot
    /// be had.
    async fn stuck(&self, client: &Client, name: &str) -> Result<Option<String>> {
        const FATAL: &[&str] = &["FailedCreate", "FailedCreatePodSandBox"];
        if let Some(w) = self.events(client, name).await?.into_iter().find(|e| FATAL.contains(&e.0.as_str())) {
            return Ok(Some(w.1));
        }
        const WAITING: &[&str] = &[
            "ErrImagePull",
            "ImagePullBackOff",
            "ErrImageNeverPull",
            "InvalidImageName",
            "CreateContainerConfigError",
        ];
        for pod in self.pods(client, name).await? {
            let statuses = pod.status.and_then(|s| s.container_statuses).unwrap_or_default();
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
                process::tail_lines(&log, 8).trim_end()
            ));
        }
        Ok(String::new())
    }

    /// Warning events of the run's objects (the Job and its pods), oldest first, as
    /// (reason, "Kind name: message").
    async fn events(&self, client: &Client, name: &str) -> Result<Vec<(String, String)>> {
        let events: Api<Event> = Api::namespaced(client.clone(), &self.namespace);
        let listed = call("reading events", events.list(&ListParams::default().fields("type=Warning"))).await?;
        let pods: Vec<String> = self.pods(client, name).await?.into_iter().filter_map(|p| p.metadata.name).collect();
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

    async fn warnings(&self, client: &Client, name: &str) -> Result<Vec<String>> {
        Ok(self.events(client, name).await?.into_iter().map(|(reason, what)| format!("{reason}: {what}")).collect())
    }

    /// The Job's pods, in completion-index order.
    pub async fn pods(&self, client: &Client, name: &str) -> Result<Vec<Pod>> {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let selector = format!("job-name={name}");
        let mut found =
            call("listing the Job's pods", pods.list(&ListParams::default().labels(&selector))).await?.items;
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
        let pods: Api<Pod> = Api::namespaced(client.clone(), &self.namespace);
        let params = LogParams { container: Some(AGENT_CONTAINER.into()), ..Default::default() };
        call("reading the pod's log", pods.logs(pod, &params)).await
    }

    /// The PersistentVolume that bound a claim.
    pub async fn bound_volume(&self, client: &Client, claim: &str) -> Result<Option<String>> {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &self.namespace);
        Ok(call("reading the claim", claims.get_opt(claim)).await?.and_then(|c| c.spec?.volume_name))
    }

    /// Deletes the Jobs, pods, Secrets and claims with `selector`, and waits until they are gone.
    pub async fn delete(&self, client: &Client, selector: &str) -> Result<()> {
        let list = ListParams::default().labels(selector);
        let delete = DeleteParams::background();
        let ns = &self.namespace;
        let jobs: Api<Job> = Api::namespaced(client.clone(), ns);
        let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ns);
        call("deleting Jobs", jobs.delete_collection(&delete, &list)).await?;
        // Pods go with their Job, but not before the garbage collector gets to them.
        let now = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::background() };
        call("deleting pods", pods.delete_collection(&now, &list)).await?;
        call("deleting Secrets", secrets.delete_collection(&delete, &list)).await?;
        call("deleting claims", claims.delete_collection(&delete, &list)).await?;
        let started = Instant::now();
        loop {
            let left = call("listing Jobs", jobs.list(&list)).await?.items.len()
                + call("listing pods", pods.list(&list)).await?.items.len()
                + call("listing Secrets", secrets.list(&list)).await?.items.len()
                + call("listing claims", claims.list(&list)).await?.items.len();
            if left == 0 {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(120) {
                bail!(
                    "{left} objects labelled {selector} in namespace {ns} were still there 120 s after their deletion"
                );
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
