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
use crate::env::k8s::cluster_api::{ClusterApi, Live};
use crate::env::k8s::kubelet::CpuSample;
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
    block_on(async { count_cpu(&Live::connect(db.cluster).await?, db, job, loaders, load_done).await })?
}

/// `measured_cpu`, asking the cluster through `api`.
async fn count_cpu(
    api: &impl ClusterApi,
    db: &Db<'_>,
    job: &str,
    loaders: u32,
    load_done: &AtomicBool,
) -> Result<Option<PodsCpu>> {
    if all_logged(api, job, loaders, MEASURED_LINE, load_done).await?.is_none() {
        return Ok(None);
    }
    let loader_pods: Vec<Pod> = api.job_pods(job).await?;
    let mut database_pods = Vec::new();
    for name in &db.pods {
        database_pods.extend(api.pod(name).await?);
    }
    let uids = |pods: &[Pod]| -> Vec<String> { pods.iter().filter_map(|p| p.metadata.uid.clone()).collect() };
    let (database_uids, loader_uids) = (uids(&database_pods), uids(&loader_pods));
    let nodes: std::collections::BTreeSet<String> =
        database_pods.iter().chain(&loader_pods).filter_map(|p| p.spec.as_ref()?.node_name.clone()).collect();
    let mut routes = Vec::new();
    for node in &nodes {
        routes.push(api.reach_kubelet(node).await?);
    }
    let read = async || {
        let mut all = BTreeMap::new();
        for node in &nodes {
            all.extend(api.pods_cpu(node).await?);
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
        let done = logged(api, job, MEASURED_END_LINE).await?.len() == loaders as usize;
        keep(read().await?);
        if done || ended {
            break;
        }
        tokio::time::sleep(CPU_READ_EVERY).await;
    }
    let phase = now().saturating_sub(began);
    let from = began.as_secs() as i64;
    let in_phase = |uid: &String| phase_cpu(samples.get(uid)?, from, phase);
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
}

/// A pod's CPU in a phase that began at `from` (seconds since the epoch) and lasted `phase`:
/// its rate between its first and last samples taken in the phase (whole seconds apart, as the
/// kubelet stamps them), over the phase's length; None with fewer than two. A stale sample can
/// be older than the phase. A pod's count can fall between two samples (seen once in a test:
/// -0.22 CPU-s over 6 s), so the CPU between its first and last samples is what it rose by, its
/// falls not subtracted.
fn phase_cpu(samples: &[CpuSample], from: i64, phase: Duration) -> Option<f64> {
    let inside: Vec<&CpuSample> = samples.iter().filter(|s| s.at >= from).collect();
    let (first, last) = (inside.first()?, inside.last()?);
    let rose: f64 = inside.windows(2).map(|w| (w[1].seconds - w[0].seconds).max(0.0)).sum();
    (last.at > first.at).then(|| rose / (last.at - first.at) as f64 * phase.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::super::scripted_ring::{JOB, db, ring, run};
    use super::*;
    use crate::env::k8s::scripted::Scripted;
    use crate::ledger::KubeCluster;

    const MS: Duration = Duration::from_millis(1);

    fn sample(at: i64, seconds: f64) -> CpuSample {
        CpuSample { seconds, at }
    }

    #[test]
    fn a_pods_cpu_in_the_phase_is_what_it_rose_by_between_its_samples_in_it_at_that_rate() {
        let phase = Duration::from_secs(20);
        // A stale sample from before the phase, then four in it; the count fell once by 0.2 s.
        let samples = [sample(95, 1.0), sample(100, 10.0), sample(105, 15.0), sample(110, 14.8), sample(115, 20.0)];
        let cpu = phase_cpu(&samples, 100, phase).unwrap();
        // It rose 5 + 0 + 5.2 CPU-s in 15 s, over the 20-s phase.
        assert!((cpu - 10.2 / 15.0 * 20.0).abs() < 1e-9, "{cpu}");
        assert_eq!(phase_cpu(&samples[..2], 100, phase), None, "one sample in the phase gives no rate");
        assert_eq!(phase_cpu(&samples[..1], 100, phase), None, "a stale one neither");
    }

    fn now() -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
    }

    /// The kubelets' samples: each pod of `uids` at `cpu` CPU-s, stamped `at`.
    fn samples(script: &Scripted, at: i64, cpu: f64, uids: &[(&str, &str)]) {
        let mut state = script.state();
        for (node, uid) in uids {
            state.cpu.entry(node.to_string()).or_default().insert(uid.to_string(), sample(at, cpu));
        }
    }

    const PODS: [(&str, &str); 3] = [("node-1", "db-0-uid"), ("node-2", "db-1-uid"), ("node-loader", "loader-0-uid")];

    #[test]
    fn the_pods_cpu_is_read_from_their_nodes_kubelets_once_every_loader_began() {
        let script = ring(2, &[(100 * MS, 800 * MS)]);
        // Stamped a second on, so that the phase (begun within it) holds them.
        let t = now() + 1;
        samples(&script, t, 1.0, &PODS);
        // The kubelets' next samples, 2 s later by their stamps: 3 CPU-s more for each pod.
        script.at(700 * MS, move |s| {
            for (node, uid) in PODS {
                s.cpu.get_mut(node).unwrap().insert(uid.into(), sample(t + 2, 4.0));
            }
        });
        let cluster = KubeCluster::default();
        let began = std::time::Instant::now();
        let cpu = run(count_cpu(&script, &db(&cluster, 2), JOB, 1, &AtomicBool::new(false))).unwrap().unwrap();
        let phase = began.elapsed().as_secs_f64();
        assert!(script.calls("pods_cpu").iter().all(|at| *at >= 100 * MS), "read once the loader began");
        for node in ["node-1", "node-2", "node-loader"] {
            assert_eq!(script.calls(&format!("reach_kubelet {node}")).len(), 1, "{node}'s kubelet, reached once");
        }
        // Each pod at 1.5 CPU, over a phase that lasted no longer than the test.
        assert!(cpu.database > 0.0 && cpu.database <= 2.0 * 1.5 * phase, "{}", cpu.database);
        assert!((cpu.loaders.unwrap() - cpu.database / 2.0).abs() < 1e-9, "{:?}", cpu.loaders);
        assert!(
            cpu.route.contains("node-2's scripted kubelet") && cpu.route.contains("db-1 on node-2"),
            "{}",
            cpu.route
        );
    }

    #[test]
    fn a_database_pod_replaced_in_the_phase_or_sampled_once_gets_no_figure() {
        let script = ring(2, &[(Duration::ZERO, Duration::ZERO)]);
        // db-1's kubelet runs no pod of its uid: it was replaced.
        samples(&script, now(), 1.0, &[PODS[0], PODS[2]]);
        let cluster = KubeCluster::default();
        let counted = run(count_cpu(&script, &db(&cluster, 2), JOB, 1, &AtomicBool::new(false)));
        let why = counted.err().expect("no figure").to_string();
        assert!(why.contains("replaced or ended"), "{why}");
        let script = ring(2, &[(Duration::ZERO, Duration::ZERO)]);
        samples(&script, now(), 1.0, &PODS);
        let counted = run(count_cpu(&script, &db(&cluster, 2), JOB, 1, &AtomicBool::new(false)));
        let why = counted.err().expect("no figure").to_string();
        assert!(why.contains("fewer than twice") && why.contains("a longer phase"), "{why}");
        let script = ring(2, &[(Duration::from_secs(3600), Duration::from_secs(3600))]);
        let none = run(count_cpu(&script, &db(&cluster, 2), JOB, 1, &AtomicBool::new(true))).unwrap();
        assert!(none.is_none() && script.calls("pods_cpu").is_empty(), "a load that ended before it began");
    }
}
