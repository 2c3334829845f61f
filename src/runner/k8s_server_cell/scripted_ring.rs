//! The unit tests' ring: database pods and a Job of loader pods in a scripted cluster, the
//! loaders saying on cue that their measured phase began and ended.

use std::time::{Duration, SystemTime};

use serde_json::json;

use super::Db;
use crate::env::k8s::scripted::{Scripted, State, pod};
use crate::ledger::KubeCluster;
use crate::workload::cql::{MEASURED_END_LINE, MEASURED_LINE, stamped};

pub const JOB: &str = "run-1";
pub const SELECTOR: &str = "isobench/run=run-1";

/// Database pod k: `db-k` on `node-{k+1}`, its uid `db-k-uid`.
pub fn database_pod(k: usize) -> k8s_openapi::api::core::v1::Pod {
    let name = format!("db-{k}");
    pod(
        &name,
        &format!("{name}-uid"),
        &format!("node-{}", k + 1),
        true,
        json!({"metadata": {"labels": {"isobench/run": "run-1"}}}),
    )
}

/// A ring of `nodes` database pods and one loader pod on `node-loader` for each cue: when (after
/// the script began) it logs that its measured phase began, and that it ended.
pub fn ring(nodes: usize, cues: &[(Duration, Duration)]) -> Scripted {
    let mut state = State::default();
    for k in 0..nodes {
        state.pods.insert(format!("db-{k}"), database_pod(k));
    }
    for i in 0..cues.len() {
        let name = format!("{JOB}-{i}");
        let labels = json!({"metadata": {"labels": {"job-name": JOB}}});
        state.pods.insert(name.clone(), pod(&name, &format!("loader-{i}-uid"), "node-loader", true, labels));
        state.logs.insert(name, "connected\n".into());
    }
    let script = Scripted::new(state);
    // The measured phase's cue carries its time, as a loader pod prints it.
    let origin = SystemTime::now();
    for (i, (began, ended)) in cues.iter().enumerate() {
        let said = stamped(MEASURED_LINE, origin + *began);
        for (at, line) in [(*began, said), (*ended, MEASURED_END_LINE.to_string())] {
            let name = format!("{JOB}-{i}");
            script.at(at, move |s| s.logs.get_mut(&name).unwrap().push_str(&format!("{line}\n")));
        }
    }
    script
}

/// The run's view of the ring's database pods.
pub fn db(cluster: &KubeCluster, nodes: usize) -> Db<'_> {
    Db {
        cluster,
        owner: "db".into(),
        selector: SELECTOR.into(),
        pods: (0..nodes).map(|k| format!("db-{k}")).collect(),
        container: "agent".into(),
    }
}

/// Runs a test's future as the orchestrator runs its own; one that waits for what the script
/// never does fails in 10 s instead of hanging.
pub fn run<F: std::future::Future>(future: F) -> F::Output {
    let limited = async { tokio::time::timeout(Duration::from_secs(10), future).await };
    crate::env::k8s::api::block_on(limited).unwrap().expect("the scripted cluster was waited on for 10 s")
}
