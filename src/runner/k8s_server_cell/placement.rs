//! Where the database's pods ran: machine, runtime class, image, and the volumes behind their
//! claims, read from the API server after the load.

use std::collections::BTreeMap;

use anyhow::{Result, anyhow};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;

use super::Db;

/// Where each of the database's pods ran: its machine, runtime class and image, and the claims
/// it mounts with the PersistentVolume and StorageClass behind each.
pub(super) async fn pod_proof(db: &Db<'_>, client: &Client, setup: &mut BTreeMap<String, String>) -> Result<()> {
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

pub(super) fn pod_ip(pod: &Pod) -> Result<String> {
    pod.status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .ok_or_else(|| anyhow!("pod {} has no IP", pod.metadata.name.as_deref().unwrap_or("?")))
}
