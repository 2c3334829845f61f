//! The CPU the database's pods and the loader pods used in the measured phase, read from the
//! kubelets of their nodes between the loaders' logged cues.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use k8s_openapi::api::core::v1::Pod;

use super::Db;
use super::load::{all_logged, logged};
use crate::env::k8s::api::block_on;
use crate::env::k8s::kubelet::{CpuSample, Kubelet};
use crate::workload::cql::{MEASURED_END_LINE, MEASURED_LINE};

/// How often the pods' CPU is read while the measured phase runs: each reading catches the
/// kubelet's latest sample (a loader pod's last one comes before it exits: a pod that ended has
/// none), and costs the kubelet ~7 ms of CPU here.
const CPU_READ_EVERY: Duration = Duration::from_secs(1);

/// The CPU the database's pods and the loader pods used in the measured phase, as their nodes'
/// kubelets count each pod's cgroup.
pub(super) struct PodsCpu {
    pub database: f64,
    pub loaders: Option<f64>,
    pub route: String,
}

/// Reads the pods' CPU when every loader says its measured phase began and every second until
/// every one says it ended (the cues are seen up to a poll late). None when the load ended
/// before it began; an error names what could not be read.
pub(super) fn measured_cpu(db: &Db, job: &str, loaders: u32, load_done: &AtomicBool) -> Result<Option<PodsCpu>> {
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
        let routes: Vec<&str> = kubelets.iter().map(|k| k.route.as_str()).collect();
        let placed: Vec<String> = database_pods
            .iter()
            .chain(&loader_pods)
            .map(|p| {
                let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or("?");
                format!("{} on {node}", p.metadata.name.as_deref().unwrap_or("?"))
            })
            .collect();
        let route = format!("{} (pods: {})", routes.join("; "), placed.join(", "));
        Ok(Some(PodsCpu { database, loaders, route }))
    })?
}
