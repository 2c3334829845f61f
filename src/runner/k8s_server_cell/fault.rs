//! The fault a suite asks for on Kubernetes, on the loaders' cue: a database pod deleted
//! (grace 0) and gone for real before the load goes on, or the machine that runs it stopped
//! through the env's `machine_stop`, seen NotReady by the API server, and started again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, anyhow};

use super::Db;
use super::load::all_logged;
use crate::env::k8s::api::{block_on, is_ready};
use crate::env::k8s::cluster_api::{ClusterApi, Live};
use crate::env::k8s::machine::{MachineCommands, wait_node};
use crate::ledger::{Ledger, Resource};
use crate::server::Lost;
use crate::workload::cql::MEASURED_LINE;

/// How long the API server may take to see a stopped machine NotReady: its node monitor's
/// grace period (50 s by default) and the lease it last saw renewed.
const NOT_READY_WITHIN: Duration = Duration::from_secs(180);

/// A fault carried out on cue: which node, how far into the measured phase (which began at
/// `phase_began` by the wall clock), when, and when its pod was Ready again if that was before
/// the load ended.
pub(super) struct Killed {
    pub node: usize,
    pub at: Duration,
    pub phase_began: SystemTime,
    pub struck: Instant,
    pub back: Option<Instant>,
    pub machine: Option<MachineLoss>,
}

/// A machine lost: its name, how long after the stop the API server marked it NotReady, how
/// long it was down (from the stop until `machine_start` returned), and how far into the
/// measured phase its pod was Ready again, if that was before the load ended.
pub(super) struct MachineLoss {
    pub name: String,
    pub not_ready: Duration,
    pub down: Duration,
    pub ready: Option<Duration>,
}

/// What a fault needs of the run beyond the database: for `kill = "machine"` the env's machine
/// commands and the machine to stop (the one the loaders were kept off), and the ledger that
/// starts a stopped machine again if the run cannot.
pub(super) struct Means<'a> {
    pub machines: Option<&'a MachineCommands>,
    pub machine: Option<String>,
    pub ledger: &'a Ledger,
}

/// Strikes node `kill.node` `kill.after` into the measured phase: when every loader pod has
/// said its measured phase began. None when the load ended first.
pub(super) fn fault(
    db: &Db,
    job: &str,
    loaders: u32,
    kill: &crate::server::Kill,
    means: &Means,
    load_done: &AtomicBool,
) -> Result<Option<Killed>> {
    block_on(async { strike(&Live::connect(db.cluster).await?, db, job, loaders, kill, means, load_done).await })?
}

/// The fault as `fault` says, asking the cluster through `api`; after it, the pod's return is
/// watched for while the load lasts.
async fn strike(
    api: &impl ClusterApi,
    db: &Db<'_>,
    job: &str,
    loaders: u32,
    kill: &crate::server::Kill,
    means: &Means<'_>,
    load_done: &AtomicBool,
) -> Result<Option<Killed>> {
    let Some(began) = all_logged(api, job, loaders, MEASURED_LINE, load_done).await? else {
        return Ok(None);
    };
    let phase_began = SystemTime::now() - began.elapsed();
    while began.elapsed() < kill.after {
        if load_done.load(Ordering::Relaxed) || crate::sys::interrupted() {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at = began.elapsed();
    let pod = db.pod(kill.node - 1);
    let (struck, mut machine) = match kill.what {
        Lost::Pod => (delete_pod(api, pod).await?, None),
        Lost::Machine { down } => {
            let machines = means.machines.ok_or_else(|| anyhow!("the env has no machine_stop"))?;
            let name = means.machine.clone().ok_or_else(|| anyhow!("pod {pod} is on no machine"))?;
            let (struck, loss) = lose_machine(api, db, name, machines, means.ledger, down).await?;
            (struck, Some(loss))
        }
    };
    // The recovery is timed to the pod's Ready, not to the end of the load; and whether the
    // load was back once the ring was whole is judged from when.
    let back = ready_while_loading(api, pod, load_done).await?;
    if let Some(loss) = &mut machine {
        loss.ready = back.map(|at| at.duration_since(began));
    }
    Ok(Some(Killed { node: kill.node, at, phase_began, struck, back, machine }))
}

/// Deletes `pod` (grace 0) and waits until it is gone for real: the StatefulSet's new pod has
/// the same name and another uid.
async fn delete_pod(api: &impl ClusterApi, pod: &str) -> Result<Instant> {
    let old = api.pod(pod).await?.and_then(|p| p.metadata.uid);
    api.kill_pod(pod).await?;
    let deleted = Instant::now();
    while api.pod(pod).await?.is_some_and(|p| p.metadata.uid == old && is_ready(&p)) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(deleted)
}

/// Stops the machine `name`, waits until the API server marks it NotReady, keeps it down
/// `down` after the stop (if longer), and starts it again.
async fn lose_machine(
    api: &impl ClusterApi,
    db: &Db<'_>,
    name: String,
    machines: &MachineCommands,
    ledger: &Ledger,
    down: Option<Duration>,
) -> Result<(Instant, MachineLoss)> {
    ledger.record(Resource::KubeMachine {
        cluster: db.cluster.clone(),
        machine: name.clone(),
        start: machines.start.clone(),
    })?;
    let stopped = Instant::now();
    machines.stop(&name)?;
    let not_ready = wait_node(api, &name, false, NOT_READY_WITHIN).await?;
    if let Some(left) = down.and_then(|d| d.checked_sub(stopped.elapsed())) {
        tokio::time::sleep(left).await;
    }
    machines.start(&name)?;
    Ok((stopped, MachineLoss { name, not_ready, down: stopped.elapsed(), ready: None }))
}

/// Waits while the load lasts for `pod` to be Ready again (seen not Ready first: the API server
/// may still show it Ready from before the loss); when it was.
async fn ready_while_loading(api: &impl ClusterApi, pod: &str, load_done: &AtomicBool) -> Result<Option<Instant>> {
    let mut seen_down = false;
    while !load_done.load(Ordering::Relaxed) && !crate::sys::interrupted() {
        let ready = api.pod(pod).await?.is_some_and(|p| is_ready(&p));
        if ready && seen_down {
            return Ok(Some(Instant::now()));
        }
        seen_down |= !ready;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(None)
}

/// Waits until `pod` is Ready again after its machine came back; the machine it runs on.
pub(super) async fn wait_pod_ready(api: &impl ClusterApi, pod: &str, timeout: Duration) -> Result<String> {
    crate::sys::Wait::new(format!("pod {pod} to be Ready after its machine was started again"), timeout)
        .every(Duration::from_millis(500))
        .until_async(|| async {
            Ok(match api.pod(pod).await?.filter(is_ready) {
                Some(p) => crate::sys::Check::Done(p.spec.and_then(|s| s.node_name).unwrap_or_default()),
                None => crate::sys::Check::NotYet(String::new()),
            })
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::super::scripted_ring::{JOB, db, ring, run};
    use super::*;
    use crate::env::k8s::scripted::{Change, Scripted, pod};
    use crate::ledger::KubeCluster;
    use crate::server::Kill;

    const MS: Duration = Duration::from_millis(1);
    const NEVER: Duration = Duration::from_secs(3600);
    const SLACK: Duration = Duration::from_secs(1);

    /// Strikes as the run does, in a scripted cluster; how long after the script began it
    /// returned.
    fn strike_in(
        script: &Scripted,
        kill: Kill,
        machines: Option<&MachineCommands>,
        done: &AtomicBool,
    ) -> (Option<Killed>, Duration) {
        let (tmp, cluster) = (tempfile::tempdir().unwrap(), KubeCluster::default());
        let ledger = Ledger::open(tmp.path()).unwrap();
        let machine = machines.map(|_| "node-2".to_string());
        let means = Means { machines, machine, ledger: &ledger };
        let killed = run(strike(script, &db(&cluster, 3), JOB, 2, &kill, &means, done)).unwrap();
        (killed, script.elapsed())
    }

    #[test]
    fn a_pod_is_struck_its_time_after_the_last_loader_began_and_its_recovery_timed_to_its_return() {
        let script = ring(3, &[(50 * MS, NEVER), (150 * MS, NEVER)]);
        // The StatefulSet's controller: the deleted pod still shows Ready for 150 ms, then its
        // replacement (another uid) is there, Ready 400 ms after the deletion.
        script.on_kill(|_, name| {
            let replaced = |ready: bool| -> Change {
                let name = name.to_string();
                Box::new(move |s| {
                    s.pods.insert(name.clone(), pod(&name, "new-uid", "node-2", ready, serde_json::json!({})));
                })
            };
            vec![(150 * MS, replaced(false)), (400 * MS, replaced(true))]
        });
        let kill = Kill { node: 2, after: 200 * MS, what: Lost::Pod };
        let (killed, returned) = strike_in(&script, kill, None, &AtomicBool::new(false));
        let killed = killed.expect("the load went on: the fault struck");
        let deleted = script.calls("kill_pod db-1");
        assert_eq!(deleted.len(), 1, "the second node's pod, once");
        // The last loader's cue is seen within a poll of the logs (500 ms), the wait is 200 ms on;
        // the upper bounds leave a busy machine a second.
        assert!(deleted[0] >= 350 * MS && deleted[0] < 850 * MS + SLACK, "deleted at {:?}", deleted[0]);
        assert!(killed.at >= 200 * MS && killed.at < 200 * MS + SLACK, "{:?}", killed.at);
        // Timed from the last loader's cue as it stamped it (150 ms), not from when it was read.
        let from_cue = deleted[0].saturating_sub(150 * MS);
        assert!(killed.at.abs_diff(from_cue) < 50 * MS, "struck {:?} after the cue, said {:?}", from_cue, killed.at);
        assert!(returned >= deleted[0] + 400 * MS, "waited while loading until it was back: {returned:?}");
        // Its recovery is timed to its Ready, seen within a poll (250 ms), not to the load's end.
        let recovery = killed.back.expect("back while the load went on").duration_since(killed.struck);
        assert!(recovery >= 400 * MS && recovery < 650 * MS + SLACK, "{recovery:?}");
        assert!(killed.machine.is_none() && killed.node == 2);
    }

    #[test]
    fn a_load_that_ends_before_the_cue_or_the_wait_strikes_nothing() {
        let script = ring(3, &[(NEVER, NEVER), (NEVER, NEVER)]);
        let kill = Kill { node: 1, after: 100 * MS, what: Lost::Pod };
        assert!(strike_in(&script, kill, None, &AtomicBool::new(true)).0.is_none());
        let script = ring(3, &[(Duration::ZERO, NEVER), (Duration::ZERO, NEVER)]);
        let done = AtomicBool::new(false);
        let kill = Kill { node: 1, after: NEVER, what: Lost::Pod };
        let killed = std::thread::scope(|scope| {
            let striking = scope.spawn(|| strike_in(&script, kill, None, &done).0);
            std::thread::sleep(300 * MS);
            done.store(true, Ordering::Relaxed);
            striking.join().unwrap()
        });
        assert!(killed.is_none());
        assert!(script.calls("kill_pod").is_empty(), "nothing deleted");
    }

    #[test]
    fn a_lost_machine_is_seen_not_ready_kept_down_started_again_and_its_pod_seen_back() {
        let machines_dir = tempfile::tempdir().unwrap();
        let dir = machines_dir.path().display();
        let script = ring(3, &[(Duration::ZERO, NEVER), (Duration::ZERO, NEVER)])
            .with_machines(machines_dir.path().into(), 300 * MS);
        let commands =
            MachineCommands { stop: format!("touch {dir}/{{machine}}"), start: format!("rm {dir}/{{machine}}") };
        let kill = Kill { node: 2, after: 100 * MS, what: Lost::Machine { down: Some(600 * MS) } };
        let (killed, _) = strike_in(&script, kill, Some(&commands), &AtomicBool::new(false));
        let killed = killed.unwrap();
        let loss = killed.machine.as_ref().expect("a machine was lost");
        assert_eq!(loss.name, "node-2");
        // The first look at the node after the stop sees it NotReady.
        assert!(loss.not_ready < SLACK, "{:?}", loss.not_ready);
        assert!(loss.down >= 600 * MS && loss.down < 600 * MS + SLACK, "kept down as asked: {:?}", loss.down);
        assert!(!machines_dir.path().join("node-2").exists(), "started again");
        let ready = loss.ready.expect("its pod was Ready again while the load went on");
        assert!(killed.back.is_some());
        // Seen Ready once its containers restarted, 300 ms after the machine was seen back.
        assert!(ready >= 100 * MS + loss.down + 300 * MS, "Ready once back: {ready:?} {:?}", loss.down);
        assert!(script.calls("kill_pod").is_empty(), "a machine lost, no pod deleted");
    }
}
