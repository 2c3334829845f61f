//! The fault a suite asks for on Kubernetes, on the loaders' cue: a database pod deleted
//! (grace 0) and gone for real before the load goes on, or the machine that runs it stopped
//! through the env's `machine_stop`, seen NotReady by the API server, and started again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use kube::Client;

use super::Db;
use super::load::all_logged;
use crate::env::k8s::api::{block_on, is_ready};
use crate::env::k8s::machine::{MachineCommands, wait_node};
use crate::ledger::{Ledger, Resource};
use crate::server::Lost;
use crate::workload::cql::MEASURED_LINE;

/// How long the API server may take to see a stopped machine NotReady: its node monitor's
/// grace period (50 s by default) and the lease it last saw renewed.
const NOT_READY_WITHIN: Duration = Duration::from_secs(180);

/// A fault carried out on cue: which node, how far into the measured phase, and when.
pub(super) struct Killed {
    pub node: usize,
    pub at: Duration,
    pub struck: Instant,
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
    block_on(async {
        let client = db.cluster.client().await?;
        if !all_logged(db, &client, job, loaders, MEASURED_LINE, load_done).await? {
            return Ok(None);
        }
        let began = Instant::now();
        while began.elapsed() < kill.after {
            if load_done.load(Ordering::Relaxed) || crate::sys::interrupted() {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let at = began.elapsed();
        let pod = db.pod(kill.node - 1);
        let (struck, machine) = match kill.what {
            Lost::Pod => (delete_pod(db, &client, pod).await?, None),
            Lost::Machine { down } => {
                let machines = means.machines.ok_or_else(|| anyhow!("the env has no machine_stop"))?;
                let name = means.machine.clone().ok_or_else(|| anyhow!("pod {pod} is on no machine"))?;
                let (struck, mut loss) = lose_machine(db, &client, name, machines, means.ledger, down).await?;
                // Whether the load was back once the ring was whole is judged from when.
                if ready_while_loading(db, &client, pod, load_done).await? {
                    loss.ready = Some(began.elapsed());
                }
                (struck, Some(loss))
            }
        };
        Ok(Some(Killed { node: kill.node, at, struck, machine }))
    })?
}

/// Deletes `pod` (grace 0) and waits until it is gone for real: the StatefulSet's new pod has
/// the same name and another uid.
async fn delete_pod(db: &Db<'_>, client: &Client, pod: &str) -> Result<Instant> {
    let old = db.cluster.pod(client, pod).await?.and_then(|p| p.metadata.uid);
    db.cluster.kill_pod(client, pod).await?;
    let deleted = Instant::now();
    while db.cluster.pod(client, pod).await?.is_some_and(|p| p.metadata.uid == old && is_ready(&p)) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(deleted)
}

/// Stops the machine `name`, waits until the API server marks it NotReady, keeps it down
/// `down` after the stop (if longer), and starts it again.
async fn lose_machine(
    db: &Db<'_>,
    client: &Client,
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
    let not_ready = wait_node(db.cluster, client, &name, false, NOT_READY_WITHIN).await?;
    if let Some(left) = down.and_then(|d| d.checked_sub(stopped.elapsed())) {
        tokio::time::sleep(left).await;
    }
    machines.start(&name)?;
    Ok((stopped, MachineLoss { name, not_ready, down: stopped.elapsed(), ready: None }))
}

/// Waits while the load lasts for `pod` to be Ready again (seen not Ready first: the API server
/// may still show it Ready from before the loss); whether it was.
async fn ready_while_loading(db: &Db<'_>, client: &Client, pod: &str, load_done: &AtomicBool) -> Result<bool> {
    let mut seen_down = false;
    while !load_done.load(Ordering::Relaxed) && !crate::sys::interrupted() {
        let ready = db.cluster.pod(client, pod).await?.is_some_and(|p| is_ready(&p));
        if ready && seen_down {
            return Ok(true);
        }
        seen_down |= !ready;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(false)
}

/// Waits until `pod` is Ready again after its machine came back; the machine it runs on.
pub(super) async fn wait_pod_ready(db: &Db<'_>, client: &Client, pod: &str, timeout: Duration) -> Result<String> {
    crate::sys::Wait::new(format!("pod {pod} to be Ready after its machine was started again"), timeout)
        .every(Duration::from_millis(500))
        .until_async(|| async {
            Ok(match db.cluster.pod(client, pod).await?.filter(is_ready) {
                Some(p) => crate::sys::Check::Done(p.spec.and_then(|s| s.node_name).unwrap_or_default()),
                None => crate::sys::Check::NotYet(String::new()),
            })
        })
        .await
}
