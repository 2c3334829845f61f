//! `kind = "k8s"`: each run is a Job in a Kubernetes cluster whose pod runs `isobench agent`
//! with the suite's `runtimeClassName`, resources and node selector, on a `pvc` volume's claim.
//! The request goes in as a Secret, the framed report comes back in the pod's log, and the pod's
//! node, runtime class, image and bound PersistentVolume are recorded as proof. A CQL workload
//! with `loaders = N` is an Indexed Job of N pods, merged from their HDR logs. Every object
//! carries the run's labels; the ledger deletes them by label, after the run or in `cleanup`.

pub mod api;
pub(crate) mod cluster_api;
pub mod kubelet;
pub mod machine;
pub mod manifest;
#[cfg(test)]
pub(crate) mod scripted;
pub mod statefulset;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};

use super::{Environment, Kind, Launch};
use crate::agent;
use crate::ledger::KubeCluster;
use crate::ledger::{Ledger, Resource};
use crate::syntax::{Fields, SuiteError};
use crate::volume::{Provisioned, RawTarget};
use crate::workload::Spec;
use api::block_on;
use figures::units;
use manifest::{Apart, DATA_DIR, DEVICE_PATH, PodSettings, SCRATCH_DIR};

pub const KIND: Kind = Kind { name: "k8s", parse };

/// The image when the suite names none: what `scripts/k8s-image.sh` imports into a node's
/// containerd, and what the Dockerfile builds for a registry.
pub const DEFAULT_IMAGE: &str = concat!("isobench:", env!("CARGO_PKG_VERSION"));

/// How long a pod may take to be scheduled, pull its image and start, on top of the workload's
/// own timeout.
const START_ALLOWANCE: Duration = Duration::from_secs(180);

pub struct K8s {
    pub cluster: KubeCluster,
    pub pod: PodSettings,
    /// How a database's pods keep apart from one another on the cluster's machines.
    pub spread: Apart,
    /// How the loader pods keep off the database's machines.
    pub loaders_apart: Apart,
    /// The runtime class of the load generator's pods, when they load a database in this
    /// environment: the cluster's default unless the suite names one (never the one under test
    /// by accident).
    pub loader_runtime_class: Option<String>,
    /// How a fault stops and starts one of the cluster's machines (`kill = "machine"`).
    pub machines: Option<machine::MachineCommands>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    let kubeconfig = f.str("kubeconfig")?.map(PathBuf::from);
    let context = f.str("context")?;
    let namespace = f.str("namespace")?.unwrap_or_else(|| "default".into());
    let runtime_class = f.str("runtime_class")?;
    let image = f.str("image")?.unwrap_or_else(|| DEFAULT_IMAGE.into());
    let pull_policy = f.choice("image_pull_policy", &["Always", "IfNotPresent", "Never"])?;
    let node_selector = f.str_map("node_selector")?.unwrap_or_default();
    let mut cpu = None;
    let mut memory = None;
    for (key, value) in f.str_map("resources")?.unwrap_or_default() {
        match key.as_str() {
            "cpu" if cpu_quantity(&value).is_some_and(|c| c > 0.0 && c <= crate::syntax::MAX_WHOLE as f64) => {
                cpu = Some(value)
            }
            "cpu" => {
                return Err(f.error_at(
                    "resources",
                    format!("cpu = \"{value}\": give CPUs (\"1.5\") or millicores (\"1500m\")"),
                ));
            }
            "memory" => {
                let bytes = units::parse_size(&value).map_err(|e| f.error_at("resources", format!("memory: {e}")))?;
                if bytes == 0 || bytes > crate::syntax::MAX_SIZE {
                    return Err(f.error_at("resources", format!("memory = \"{value}\": give more than 0, at most 1P")));
                }
                memory = Some(bytes)
            }
            other => {
                return Err(f.error_at(
                    "resources",
                    format!("\"{other}\" is not a resource isobench sets; use cpu and memory"),
                ));
            }
        }
    }
    let host_network = f.bool("host_network")?.unwrap_or(false);
    let spread = f.choice("spread", Apart::CHOICES)?;
    let spread = spread.as_deref().and_then(Apart::parse).unwrap_or_default();
    let loaders_apart = f.choice("loaders_apart", Apart::CHOICES)?;
    let loaders_apart = loaders_apart.as_deref().and_then(Apart::parse).unwrap_or_default();
    let loader_runtime_class = f.str("loader_runtime_class")?;
    let machines = machine::MachineCommands::parse(f)?;
    f.finish()?;
    for (what, name) in [
        ("namespace", Some(&namespace)),
        ("runtime_class", runtime_class.as_ref()),
        ("loader_runtime_class", loader_runtime_class.as_ref()),
    ] {
        if let Some(name) = name.filter(|n| !is_dns_label(n)) {
            return Err(f.error_at(
                what,
                format!("\"{name}\" is not a valid Kubernetes name (lower-case letters, digits and '-')"),
            ));
        }
    }
    Ok(Box::new(K8s {
        cluster: KubeCluster { kubeconfig, context, namespace: namespace.clone() },
        pod: PodSettings {
            namespace,
            runtime_class,
            image,
            pull_policy,
            node_selector,
            cpu,
            memory,
            host_network,
            apart_from: None,
            avoid_node: None,
        },
        spread,
        loaders_apart,
        loader_runtime_class,
        machines,
    }))
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// The objects' name for one run: its run directory's name (the ledger token and the run's
/// number), which no other run of any isobench shares.
pub fn object_name(run_dir: &Path) -> String {
    let base = run_dir.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default();
    let clean: String = base.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
    format!("isobench-{}", clean.trim_matches('-')).chars().take(52).collect()
}

impl K8s {
    /// The request as the pod reads it: a CQL workload with loaders marked for an Indexed Job.
    pub fn pod_request(&self, request: &agent::Request) -> (agent::Request, Option<u32>) {
        let mut request = request.clone();
        let loaders = match &mut request.workload {
            Spec::Cql(cql) if cql.loaders.is_some() => {
                cql.indexed = true;
                cql.loaders
            }
            _ => None,
        };
        (request, loaders)
    }

    /// Records that every object labelled with this run's name is the ledger's to delete: before
    /// any is made, so that a killed run's are found by `isobench cleanup`.
    pub fn record_run(&self, ledger: &Ledger, name: &str) -> Result<()> {
        ledger.record(Resource::Kube {
            cluster: self.cluster.clone(),
            selector: format!("{}={name}", manifest::NAME_LABEL),
        })
    }

    /// Applies one Job's objects, follows the Job and returns the pods' reports in index order
    /// with the proof of where they ran.
    pub fn run_job(&self, job: &JobRun) -> Result<(Vec<crate::store::AgentReport>, BTreeMap<String, String>)> {
        let objects = manifest::objects(
            job.pod,
            job.name,
            job.token,
            serde_json::to_string(job.request)?,
            job.claim,
            job.loaders,
            job.deadline,
        );
        let completions = job.loaders.unwrap_or(1) as i32;
        let name = job.name;
        block_on(async {
            let client = self.cluster.client().await?;
            let server = self.cluster.check(&client).await?;
            self.cluster.apply(&client, &objects).await?;
            self.cluster.wait(&client, name, completions, job.deadline).await?;
            let pods = self.cluster.pods(&client, name).await?;
            let mut reports = Vec::new();
            for pod in &pods {
                let pod_name = pod.metadata.name.clone().unwrap_or_default();
                let log = self.cluster.logs(&client, &pod_name).await?;
                let report = agent::parse_output(&log).ok_or_else(|| {
                    anyhow!("pod {pod_name} sent no report: {}", crate::sys::tail_lines(&log, 10).trim_end())
                })?;
                reports.push(report);
            }
            let mut proof = BTreeMap::from([
                ("k8s.server".to_string(), server),
                ("k8s.job".into(), name.to_string()),
                ("k8s.pods".into(), pods.len().to_string()),
            ]);
            if let Some(pod) = pods.first() {
                let spec = pod.spec.clone().unwrap_or_default();
                let node = spec.node_name.clone().unwrap_or_default();
                self.cluster.runtime_facts(&client, &node, spec.runtime_class_name.as_deref(), &mut proof).await;
                proof.insert("k8s.node".into(), node);
                proof.insert("k8s.runtime_class".into(), spec.runtime_class_name.unwrap_or_else(|| "(default)".into()));
                let nodes: std::collections::BTreeSet<String> =
                    pods.iter().filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
                proof.insert("k8s.nodes".into(), nodes.into_iter().collect::<Vec<_>>().join(","));
                let status = pod.status.clone().unwrap_or_default();
                if let Some(c) = status.container_statuses.unwrap_or_default().first() {
                    proof.insert("k8s.image_id".into(), c.image_id.clone());
                }
            }
            if objects.claim.is_some() {
                let pv = self.cluster.bound_volume(&client, name).await?;
                proof.insert("volume.pvc".into(), name.to_string());
                proof.insert("volume.pv".into(), pv.unwrap_or_else(|| "(not bound)".into()));
            }
            Ok::<_, anyhow::Error>((reports, proof))
        })?
    }

    /// The pods that load the database of the run `run_name` in this environment: the load
    /// generator's runtime class, no limits of the pods under test, off the database's machines
    /// as `loaders_apart` says, and never on `avoid` (a machine the run's fault will stop).
    pub fn loader_pods(&self, run_name: &str, avoid: Option<String>) -> PodSettings {
        PodSettings {
            runtime_class: self.loader_runtime_class.clone(),
            cpu: None,
            memory: None,
            apart_from: Some((self.loaders_apart, statefulset::selector(run_name))),
            avoid_node: avoid,
            ..self.pod.clone()
        }
    }
}

/// One Job: `loaders` pods of an Indexed Job, or one pod, running the agent on `request`.
pub struct JobRun<'a> {
    pub name: &'a str,
    pub token: &'a str,
    pub pod: &'a PodSettings,
    pub request: &'a agent::Request,
    pub claim: Option<&'a crate::volume::pvc::Claim>,
    pub loaders: Option<u32>,
    /// How long the Job may take, from its creation.
    pub deadline: Duration,
}

impl Environment for K8s {
    fn unavailable(&self) -> Option<String> {
        self.cluster.missing()
    }

    fn is_sandbox(&self) -> bool {
        true
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([
            ("env.kind".to_string(), "k8s".to_string()),
            ("k8s.namespace".into(), self.pod.namespace.clone()),
            ("k8s.image".into(), self.pod.image.clone()),
            ("runtime.name".into(), self.pod.runtime_class.clone().unwrap_or_else(|| "(cluster default)".into())),
            ("k8s.host_network".into(), self.pod.host_network.to_string()),
        ]);
        if let Some(context) = &self.cluster.context {
            d.insert("k8s.context".into(), context.clone());
        }
        if let Some(cpu) = &self.pod.cpu {
            d.insert("limit.cpus".into(), cpu.clone());
        }
        if let Some(memory) = self.pod.memory {
            d.insert("limit.memory".into(), units::fio_size(memory));
        }
        if !self.pod.node_selector.is_empty() {
            let selector: Vec<String> = self.pod.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            d.insert("k8s.node_selector".into(), selector.join(","));
        }
        d
    }

    fn data_dir(&self, _volume: &Provisioned) -> PathBuf {
        PathBuf::from(DATA_DIR)
    }

    fn raw_target(&self, _volume: &Provisioned) -> RawTarget {
        RawTarget::Device(PathBuf::from(DEVICE_PATH))
    }

    fn cannot_pin(&self) -> Option<String> {
        Some("a cluster's kubelet places a pod's processes on its node's CPUs, not isobench: pin them with the kubelet's CPU manager (policy static, whole-CPU requests in cpu = \"…\")".into())
    }

    fn mounts_claims(&self) -> bool {
        true
    }

    fn as_k8s(&self) -> Option<&K8s> {
        Some(self)
    }

    fn memory_per_sandbox(&self) -> Option<u64> {
        self.pod.memory
    }

    fn scratch_dir(&self, _run_dir: &Path) -> PathBuf {
        PathBuf::from(SCRATCH_DIR)
    }

    /// The API server answers, the namespace exists, and it admits a pod like the runs' (a
    /// RuntimeClass that does not exist is refused here, in the API server's words).
    fn preflight(&self, _ledger: &Ledger, run_dir: &Path, _workdir: &Path) -> Result<()> {
        let pod = manifest::dry_run_pod(&self.pod, &object_name(run_dir));
        block_on(async {
            let client = self.cluster.client().await?;
            self.cluster.check(&client).await?;
            self.cluster.dry_run(&client, &pod).await
        })?
    }

    fn reach(&self) -> Result<super::Reach, String> {
        Err("a [[server]] inside a k8s environment is not supported yet: run the database in the cluster yourself and name it with kind = \"external\"".into())
    }

    fn run_agent(&self, launch: Launch) -> Result<crate::store::AgentReport> {
        if launch.gate.is_some() {
            anyhow::bail!("density cells are not supported on k8s yet: run N pods with a CQL workload's loaders = N");
        }
        let (request, loaders) = self.pod_request(launch.request);
        let name = object_name(launch.run_dir);
        self.record_run(launch.ledger, &name)?;
        let ran = self.run_job(&JobRun {
            name: &name,
            token: launch.ledger.token(),
            pod: &self.pod,
            request: &request,
            claim: launch.volume.claim.as_ref(),
            loaders,
            deadline: launch.timeout + START_ALLOWANCE,
        });
        let (reports, proof) = match ran {
            // A cause that holds for every run (a claim that cannot bind) spares the others.
            Err(e) if e.downcast_ref::<crate::workload::Unfit>().is_some() => {
                return Ok(crate::store::AgentReport {
                    error: Some(format!("{e:#}")),
                    unfit: true,
                    ..Default::default()
                });
            }
            ran => ran?,
        };
        let mut report = match (&request.workload, loaders) {
            (Spec::Cql(cql), Some(_)) => cql.combine_indexed(reports, launch.run_dir),
            _ => reports.into_iter().next().context("the Job had no pod")?,
        };
        report.setup.extend(proof);
        Ok(super::oci::with_limit_notes(report, self.pod.cpu.as_deref().and_then(cpus), None, self.pod.memory))
    }
}

/// CPUs of a Kubernetes CPU quantity ("1.5", "1500m").
fn cpus(quantity: &str) -> Option<f64> {
    match quantity.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
        None => quantity.parse().ok(),
    }
}

/// Deletes what a run left, by the labels the ledger recorded.
pub fn delete(cluster: &KubeCluster, selector: &str) -> Result<()> {
    block_on(async {
        let client = cluster.client().await?;
        cluster.delete(&client, selector).await
    })?
}

/// A CPU quantity as Kubernetes writes it: CPUs ("1.5") or millicores ("1500m").
fn cpu_quantity(text: &str) -> Option<f64> {
    match text.strip_suffix('m') {
        Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
        None => text.parse().ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_names_are_valid_kubernetes_names() {
        let name = object_name(Path::new("/var/lib/isobench/run/12345-987_3"));
        assert_eq!(name, "isobench-12345-987-3");
        assert!(is_dns_label(&name));
        assert!(!is_dns_label("Gvisor"));
        assert_eq!(cpus("1500m"), Some(1.5));
        assert_eq!(cpus("2"), Some(2.0));
    }
}
