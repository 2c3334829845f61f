//! The cluster's operations that a run's logic reads and acts on while the database is loaded
//! (its pods, the loaders' logs, the nodes, the volumes behind the claims, the kubelets' CPU
//! figures), as a trait: `Live` asks the API server; the unit tests' `Scripted` cluster answers
//! from a script, so that when a fault strikes, where the pods ran and the CPU they used are
//! tested in milliseconds, and the live tests keep what needs a cluster.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use super::kubelet::{CpuSample, Kubelet};
use crate::ledger::KubeCluster;

pub(crate) trait ClusterApi {
    /// The pod, if it exists.
    async fn pod(&self, name: &str) -> Result<Option<Pod>>;
    /// The pods `selector` selects, by name.
    async fn pods_with(&self, selector: &str) -> Result<Vec<Pod>>;
    /// The Job's pods, in completion-index order.
    async fn job_pods(&self, job: &str) -> Result<Vec<Pod>>;
    /// The agent container's log of a pod.
    async fn log(&self, pod: &str) -> Result<String>;
    /// Deletes one pod at once (grace 0), as a machine failing would.
    async fn kill_pod(&self, pod: &str) -> Result<()>;
    /// Whether the API server sees `node` Ready.
    async fn node_ready(&self, node: &str) -> Result<bool>;
    /// The PersistentVolume that bound a claim.
    async fn bound_volume(&self, claim: &str) -> Result<Option<String>>;
    /// A PersistentVolume's StorageClass and what backs it.
    async fn volume_source(&self, pv: &str) -> Result<(String, String)>;
    /// The node a PersistentVolume is pinned to, if one.
    async fn volume_node(&self, pv: &str) -> Result<Option<String>>;
    /// What runs the node's pods and the runtime class's handler, into the run's setup.
    async fn runtime_facts(&self, node: &str, class: Option<&str>, setup: &mut BTreeMap<String, String>);
    /// Reaches the node's kubelet; how (for the run's setup).
    async fn reach_kubelet(&self, node: &str) -> Result<String>;
    /// The CPU seconds each running pod of the namespace on a reached node has used, by uid.
    async fn pods_cpu(&self, node: &str) -> Result<BTreeMap<String, CpuSample>>;
}

/// The cluster through its API server, with one client (made in the runtime that uses it).
pub(crate) struct Live<'a> {
    pub cluster: &'a KubeCluster,
    pub client: Client,
    kubelets: Mutex<BTreeMap<String, Arc<Kubelet>>>,
}

impl<'a> Live<'a> {
    pub async fn connect(cluster: &'a KubeCluster) -> Result<Live<'a>> {
        Ok(Live { cluster, client: cluster.client().await?, kubelets: Mutex::default() })
    }

    fn kubelets(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Arc<Kubelet>>> {
        self.kubelets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClusterApi for Live<'_> {
    async fn pod(&self, name: &str) -> Result<Option<Pod>> {
        self.cluster.pod(&self.client, name).await
    }

    async fn pods_with(&self, selector: &str) -> Result<Vec<Pod>> {
        self.cluster.pods_with(&self.client, selector).await
    }

    async fn job_pods(&self, job: &str) -> Result<Vec<Pod>> {
        self.cluster.pods(&self.client, job).await
    }

    async fn log(&self, pod: &str) -> Result<String> {
        self.cluster.logs(&self.client, pod).await
    }

    async fn kill_pod(&self, pod: &str) -> Result<()> {
        self.cluster.kill_pod(&self.client, pod).await
    }

    async fn node_ready(&self, node: &str) -> Result<bool> {
        self.cluster.node_ready(&self.client, node).await
    }

    async fn bound_volume(&self, claim: &str) -> Result<Option<String>> {
        self.cluster.bound_volume(&self.client, claim).await
    }

    async fn volume_source(&self, pv: &str) -> Result<(String, String)> {
        self.cluster.volume_source(&self.client, pv).await
    }

    async fn volume_node(&self, pv: &str) -> Result<Option<String>> {
        self.cluster.volume_node(&self.client, pv).await
    }

    async fn runtime_facts(&self, node: &str, class: Option<&str>, setup: &mut BTreeMap<String, String>) {
        self.cluster.runtime_facts(&self.client, node, class, setup).await
    }

    async fn reach_kubelet(&self, node: &str) -> Result<String> {
        let kubelet = Kubelet::connect(self.cluster, &self.client, node).await?;
        let route = kubelet.route.clone();
        self.kubelets().insert(node.into(), Arc::new(kubelet));
        Ok(route)
    }

    async fn pods_cpu(&self, node: &str) -> Result<BTreeMap<String, CpuSample>> {
        let kubelet = self.kubelets().get(node).cloned();
        let kubelet = kubelet.ok_or_else(|| anyhow!("node {node}'s kubelet was not reached"))?;
        kubelet.pods_cpu(&self.cluster.namespace).await
    }
}
