//! Where the database's pods ran: machine, runtime class, image, and the volumes behind their
//! claims, read from the API server after the load.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Pod;

use super::Db;
use crate::env::k8s::K8s;
use crate::env::k8s::api::block_on;
use crate::env::k8s::cluster_api::ClusterApi;
use crate::env::k8s::manifest::Apart;

/// Why the cluster cannot place the database and its loaders as the env asks, judged from its
/// schedulable nodes before anything is made: the scheduler's refusal would only leave a pod
/// Pending, which the run would wait out for the ring's start timeout.
pub(super) fn unplaceable(k8s: &K8s, replicas: usize) -> Result<Option<String>> {
    if k8s.spread != Apart::Required && k8s.loaders_apart != Apart::Required {
        return Ok(None);
    }
    let nodes = block_on(async { k8s.cluster.schedulable_nodes(&k8s.cluster.client().await?).await })??;
    Ok(refusal(k8s.spread, k8s.loaders_apart, replicas, &nodes))
}

fn refusal(spread: Apart, loaders_apart: Apart, replicas: usize, nodes: &[String]) -> Option<String> {
    let n = nodes.len();
    let named = format!("{n} schedulable node{} ({})", if n == 1 { "" } else { "s" }, nodes.join(", "));
    if spread == Apart::Required && replicas > n {
        return Some(format!(
            "spread = \"required\" puts each of the {replicas} database pods on a machine of its own, and the cluster has {named}: add nodes, or set spread = \"preferred\""
        ));
    }
    // The machines the database takes: one a pod where they keep apart, at least one otherwise.
    let taken = if spread == Apart::None { 1 } else { replicas.min(n) };
    (loaders_apart == Apart::Required && n <= taken).then(|| {
        format!(
            "loaders_apart = \"required\" keeps the loader pods off every machine that runs a database pod, and the database takes {taken} of the cluster's {named}: add a node, or set loaders_apart = \"preferred\""
        )
    })
}

/// Where each of the database's pods ran: its machine, runtime class and image, and the claims
/// it mounts with the PersistentVolume and StorageClass behind each.
pub(super) async fn pod_proof(api: &impl ClusterApi, db: &Db<'_>, setup: &mut BTreeMap<String, String>) -> Result<()> {
    let pods = api.pods_with(&db.selector).await?;
    for k in 0..db.pods.len() {
        let p = format!("db.pod{}", k + 1);
        let pod = pods.iter().find(|p| p.metadata.name.as_deref() == Some(db.pod(k)));
        let spec = pod.and_then(|p| p.spec.clone()).unwrap_or_default();
        setup.insert(format!("{p}.name"), db.pod(k).to_string());
        let node = spec.node_name.unwrap_or_default();
        if k == 0 {
            api.runtime_facts(&node, spec.runtime_class_name.as_deref(), setup).await;
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
            let pv = api.bound_volume(claim).await?.unwrap_or_default();
            let (class, source) = api.volume_source(&pv).await?;
            setup.insert(format!("{at}.claim"), claim.clone());
            setup.insert(format!("{at}.pv"), format!("{pv} ({source})"));
            setup.insert(format!("{at}.storage_class"), class);
            let volume_node = api.volume_node(&pv).await?;
            setup.insert(
                format!("{at}.volume_node"),
                volume_node.unwrap_or_else(|| "none: its PersistentVolume names no node".into()),
            );
        }
    }
    Ok(())
}

pub(super) fn pod_ip(pod: &Pod) -> Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or_else(|| anyhow!("pod {} has no IP", pod.metadata.name.as_deref().unwrap_or("?")))
}

#[cfg(test)]
mod tests {
    use super::super::scripted_ring::{database_pod, db, run};
    use super::*;
    use crate::env::k8s::scripted::{Scripted, State};
    use crate::ledger::KubeCluster;

    #[test]
    fn where_each_database_pod_ran_and_what_backs_its_claims_goes_into_the_setup() {
        let mut state = State::default();
        let mounts = |claims: &[&str]| -> serde_json::Value {
            claims.iter().map(|c| serde_json::json!({"name": c, "persistentVolumeClaim": {"claimName": c}})).collect()
        };
        for (k, extra) in [
            (
                0,
                serde_json::json!({"spec": {"runtimeClassName": "gvisor", "volumes": mounts(&["data-0", "logs-0"])},
                "status": {"containerStatuses": [{"name": "agent", "imageID": "sha256:abc", "image": "i", "ready": true, "restartCount": 0}]}}),
            ),
            (1, serde_json::json!({"spec": {"volumes": mounts(&["data-1"])}})),
        ] {
            let mut pod = serde_json::to_value(database_pod(k)).unwrap();
            crate::env::k8s::scripted::merge(&mut pod, extra);
            state.pods.insert(format!("db-{k}"), serde_json::from_value(pod).unwrap());
        }
        for (claim, pv) in [("data-0", "pv-a"), ("logs-0", "pv-b"), ("data-1", "pv-c")] {
            state.claims.insert(claim.into(), pv.into());
        }
        state.volumes.insert("pv-a".into(), ("local".into(), "local /mnt/a".into(), Some("node-1".into())));
        state.volumes.insert("pv-b".into(), ("nfs".into(), "csi nfs.csi.k8s.io".into(), None));
        state.volumes.insert("pv-c".into(), ("local".into(), "local /mnt/c".into(), Some("node-2".into())));
        state.node_runtimes.insert("node-1".into(), "containerd://2.1.5".into());
        let script = Scripted::new(state);
        let cluster = KubeCluster::default();
        let mut setup = BTreeMap::new();
        run(pod_proof(&script, &db(&cluster, 2), &mut setup)).unwrap();
        let expected = [
            ("k8s.runtime_class", "gvisor"),
            ("k8s.node_runtime", "containerd://2.1.5"),
            ("db.pod1.name", "db-0"),
            ("db.pod1.node", "node-1"),
            ("db.pod1.runtime_class", "gvisor"),
            ("db.pod1.image_id", "sha256:abc"),
            ("db.pod1.claim", "data-0"),
            ("db.pod1.pv", "pv-a (local /mnt/a)"),
            ("db.pod1.storage_class", "local"),
            ("db.pod1.volume_node", "node-1"),
            ("db.pod1.claim2.claim", "logs-0"),
            ("db.pod1.claim2.pv", "pv-b (csi nfs.csi.k8s.io)"),
            ("db.pod1.claim2.volume_node", "none: its PersistentVolume names no node"),
            ("db.pod2.node", "node-2"),
            ("db.pod2.runtime_class", "(default)"),
            ("db.pod2.volume_node", "node-2"),
        ];
        for (key, value) in expected {
            assert_eq!(setup.get(key).map(String::as_str), Some(value), "{key}: {setup:?}");
        }
        assert!(!setup.contains_key("db.pod2.image_id"), "{setup:?}");
        assert_eq!(script.calls("runtime_facts").len(), 1, "the runtime facts are the first pod's");
    }

    #[test]
    fn a_placement_the_nodes_cannot_give_is_refused_with_the_fix() {
        let nodes = |n: usize| (1..=n).map(|k| format!("node{k}")).collect::<Vec<_>>();
        let why = refusal(Apart::Required, Apart::Preferred, 4, &nodes(3)).unwrap();
        assert!(why.contains("4 database pods") && why.contains("3 schedulable nodes (node1, node2, node3)"), "{why}");
        assert!(why.contains("spread = \"preferred\""), "{why}");
        assert_eq!(refusal(Apart::Required, Apart::Preferred, 3, &nodes(3)), None);
        let why = refusal(Apart::Required, Apart::Required, 3, &nodes(3)).unwrap();
        assert!(why.contains("takes 3 of") && why.contains("loaders_apart = \"preferred\""), "{why}");
        assert_eq!(refusal(Apart::Required, Apart::Required, 3, &nodes(4)), None);
        assert!(refusal(Apart::None, Apart::Required, 3, &nodes(1)).is_some(), "one node has no room apart");
        assert_eq!(refusal(Apart::None, Apart::Required, 3, &nodes(2)), None);
        assert_eq!(refusal(Apart::Preferred, Apart::None, 5, &nodes(1)), None);
    }
}
