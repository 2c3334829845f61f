//! What a node's kubelet counts of the pods it runs (its stats summary): the CPU each pod's
//! cgroup used so far. For a gVisor pod that cgroup is its sandbox's, so the count holds the
//! sentry and the gofer with the workload they run (measured here: the summary's figure and the
//! sandbox cgroup's `cpuacct.usage` agree within 0.05 CPU-s).

use std::collections::BTreeMap;
use std::net::IpAddr;

use anyhow::{Context, Result, anyhow};
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::{Client, Config};

use super::api::call;
use crate::ledger::KubeCluster;

/// How the API server refuses to proxy to a node whose address is a loopback one (a cluster on
/// one machine, such as `scripts/k8s-local.sh`'s).
const LOOPBACK_REFUSED: &str = "address not allowed";

/// One node's stats summary, reached through the API server's node proxy, or at the kubelet
/// itself where the node is this machine and the API server will not proxy to it.
pub struct Kubelet {
    client: Client,
    path: String,
    /// How the figures were reached, for the run's setup.
    pub route: String,
}

impl Kubelet {
    pub async fn connect(cluster: &KubeCluster, client: &Client, node: &str) -> Result<Kubelet> {
        let proxied = Kubelet {
            client: client.clone(),
            path: format!("/api/v1/nodes/{node}/proxy/stats/summary"),
            route: format!("{node}'s kubelet stats summary, through the API server's node proxy"),
        };
        let refused = match proxied.summary().await {
            Ok(_) => return Ok(proxied),
            Err(e) => e.context(format!("reading node {node}'s stats summary (the account needs get on nodes/proxy)")),
        };
        // The API server found the node at one of its own loopback addresses: where the API
        // server is this machine's too, so is the kubelet.
        let api_here = cluster.config().await?.cluster_url.host().and_then(|h| h.parse::<IpAddr>().ok());
        if !format!("{refused:#}").contains(LOOPBACK_REFUSED) || !api_here.is_some_and(|a| a.is_loopback()) {
            return Err(refused);
        }
        let port = kubelet_port(client, node).await?;
        let address = std::net::SocketAddr::new(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), port);
        // Asked anonymously: no credential goes to a server whose certificate is not checked (a
        // kubelet's is self-signed), and this one is on this machine.
        let mut config = Config::new(format!("https://{address}").parse()?);
        config.accept_invalid_certs = true;
        config.connect_timeout = Some(std::time::Duration::from_secs(10));
        config.read_timeout = Some(std::time::Duration::from_secs(30));
        let direct = Kubelet {
            client: Client::try_from(config).context("making a client of the kubelet")?,
            path: "/stats/summary".into(),
            route: format!(
                "{node}'s kubelet stats summary, read at {address} (the API server does not proxy to a node at a loopback address)"
            ),
        };
        direct.summary().await.with_context(|| format!("reading node {node}'s kubelet at {address}"))?;
        Ok(direct)
    }

    /// The CPU seconds each running pod of `namespace` on the node has used, by the pod's uid.
    pub async fn pods_cpu(&self, namespace: &str) -> Result<BTreeMap<String, CpuSample>> {
        parse_summary(&self.summary().await?, namespace)
    }

    async fn summary(&self) -> Result<String> {
        let request = http::Request::get(&self.path).body(Vec::new())?;
        call("reading the kubelet's stats summary", self.client.request_text(request)).await
    }
}

/// The kubelet's port, as the node reports it.
async fn kubelet_port(client: &Client, node: &str) -> Result<u16> {
    let nodes: Api<Node> = Api::all(client.clone());
    let status = call("reading the node", nodes.get(node)).await?.status.unwrap_or_default();
    let port = status.daemon_endpoints.and_then(|d| d.kubelet_endpoint).map(|e| e.port).unwrap_or(10250);
    Ok(u16::try_from(port)?)
}

/// A pod's CPU seconds so far, as the kubelet last sampled them (it samples every pod at its
/// housekeeping interval, 10 s by default, and serves the last sample in between).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuSample {
    pub seconds: f64,
    /// When the kubelet took the sample, in whole seconds since the epoch (its resolution).
    pub at: i64,
}

/// The pods of `namespace` in a stats summary, with the CPU seconds their cgroups used so far.
fn parse_summary(text: &str, namespace: &str) -> Result<BTreeMap<String, CpuSample>> {
    let summary: serde_json::Value =
        serde_json::from_str(text).map_err(|e| anyhow!("the kubelet's stats summary: {e}"))?;
    let mut pods = BTreeMap::new();
    for pod in summary["pods"].as_array().into_iter().flatten() {
        let pod_ref = &pod["podRef"];
        if pod_ref["namespace"] != namespace {
            continue;
        }
        // A pod that has not run yet, or has ended, has no CPU figure.
        let cpu = &pod["cpu"];
        let (Some(uid), Some(ns), Some(at)) = (
            pod_ref["uid"].as_str(),
            cpu["usageCoreNanoSeconds"].as_f64(),
            cpu["time"].as_str().and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok()),
        ) else {
            continue;
        };
        pods.insert(uid.to_string(), CpuSample { seconds: ns / 1e9, at: at.as_second() });
    }
    Ok(pods)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_gives_each_running_pod_of_the_namespace_its_cpu() {
        let summary = r#"{"node": {"nodeName": "localhost"}, "pods": [
            {"podRef": {"name": "db-0", "namespace": "default", "uid": "u1"},
             "cpu": {"time": "2026-11-27T02:45:30Z", "usageCoreNanoSeconds": 33036672913}},
            {"podRef": {"name": "loader-0", "namespace": "default", "uid": "u2"}},
            {"podRef": {"name": "coredns", "namespace": "kube-system", "uid": "u3"},
             "cpu": {"time": "2026-11-27T02:45:30Z", "usageCoreNanoSeconds": 5}}]}"#;
        let pods = parse_summary(summary, "default").unwrap();
        assert_eq!(pods.len(), 1);
        assert!((pods["u1"].seconds - 33.036672913).abs() < 1e-9);
        assert_eq!(pods["u1"].at, 1795747530);
        assert!(parse_summary("not json", "default").is_err());
    }
}
