//! The fault a suite asks for on Kubernetes: a database pod deleted (grace 0) on the loaders'
//! cue, and gone for real before the load goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;

use super::Db;
use super::load::all_logged;
use crate::env::k8s::api::{block_on, is_ready};
use crate::workload::cql::MEASURED_LINE;

/// A pod deleted on cue: which node, how far into the measured phase, and when.
pub(super) struct Killed {
    pub node: usize,
    pub at: Duration,
    pub deleted: Instant,
}

/// Deletes node `kill.node`'s pod (grace 0) `kill.after` into the measured phase: when every
/// loader pod has said its measured phase began. None when the load ended first.
pub(super) fn fault(
    db: &Db,
    job: &str,
    loaders: u32,
    kill: &crate::server::Kill,
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
        let old = db.cluster.pod(&client, pod).await?.and_then(|p| p.metadata.uid);
        db.cluster.kill_pod(&client, pod).await?;
        let deleted = Instant::now();
        // Gone for real: the StatefulSet's new pod has the same name and another uid.
        while db.cluster.pod(&client, pod).await?.is_some_and(|p| p.metadata.uid == old && is_ready(&p)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Some(Killed { node: kill.node, at, deleted }))
    })?
}
