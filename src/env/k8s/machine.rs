//! A machine lost on purpose (`kill = "machine"`): the user's own commands stop and start the
//! Kubernetes node that runs a database pod (the env's `machine_stop` and `machine_start`,
//! `{machine}` the node's name), and the API server says when the cluster sees it gone
//! (NotReady) and back (Ready).

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::api::block_on;
use super::cluster_api::{ClusterApi, Live};
use crate::ledger::KubeCluster;
use crate::syntax::{Fields, SuiteError};

/// What the commands name the machine by.
pub const PLACEHOLDER: &str = "{machine}";

/// How long a started machine may take to be Ready again.
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The env's commands that stop and start one of the cluster's machines.
#[derive(Clone, Debug)]
pub struct MachineCommands {
    pub stop: String,
    pub start: String,
}

impl MachineCommands {
    /// `machine_stop` and `machine_start`: both or neither, each naming `{machine}`.
    pub fn parse(f: &mut Fields) -> Result<Option<MachineCommands>, SuiteError> {
        let (stop, start) = match (f.str("machine_stop")?, f.str("machine_start")?) {
            (Some(stop), Some(start)) => (stop, start),
            (None, None) => return Ok(None),
            (stop, _) => {
                return Err(f.error_at(
                    if stop.is_some() { "machine_start" } else { "machine_stop" },
                    "a machine stopped is started again: give both, machine_stop = \"COMMAND {machine}\" and machine_start = \"COMMAND {machine}\"",
                ));
            }
        };
        for (key, command) in [("machine_stop", &stop), ("machine_start", &start)] {
            if !command.contains(PLACEHOLDER) {
                return Err(f.error_at(
                    key,
                    format!("\"{command}\" does not name the machine: write {PLACEHOLDER} where the node's name goes"),
                ));
            }
        }
        Ok(Some(MachineCommands { stop, start }))
    }

    pub fn stop(&self, machine: &str) -> Result<()> {
        run("machine_stop", &self.stop, machine)
    }

    pub fn start(&self, machine: &str) -> Result<()> {
        run("machine_start", &self.start, machine)
    }
}

/// Runs a command of the env's with `{machine}` replaced (a node's name is a DNS name: nothing
/// a shell would read as more than a word).
fn run(key: &str, template: &str, machine: &str) -> Result<()> {
    let command = template.replace(PLACEHOLDER, machine);
    let out = Command::new("sh").args(["-c", &command]).output()?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        bail!("{key} for {machine} failed ({}): {}", out.status, crate::sys::tail_lines(&said, 5).trim_end());
    }
    Ok(())
}

/// Waits until the API server reports `node` Ready (`ready`) or not; the time it took.
pub(crate) async fn wait_node(api: &impl ClusterApi, node: &str, ready: bool, timeout: Duration) -> Result<Duration> {
    let began = Instant::now();
    let what = format!("node {node} to be {}", if ready { "Ready" } else { "NotReady" });
    crate::sys::Wait::new(what, timeout)
        .every(Duration::from_millis(250))
        .until_async(|| async {
            Ok(match api.node_ready(node).await? == ready {
                true => crate::sys::Check::Done(began.elapsed()),
                false => crate::sys::Check::NotYet(String::new()),
            })
        })
        .await
}

/// The ledger's undoing of a stop: a machine the API server does not see Ready is started
/// again (a run stopped while its machine was down, or `isobench cleanup` after a killed one),
/// and waited for until pods may be scheduled on it again (the node controller lifts the
/// unreachable taint some seconds after Ready); one that is Ready was started by the run itself.
pub fn start_if_down(cluster: &KubeCluster, machine: &str, start: &str) -> Result<()> {
    block_on(async {
        let api = Live::connect(cluster).await?;
        if api.node_ready(machine).await? {
            return Ok(());
        }
        run("machine_start", start, machine)?;
        let began = Instant::now();
        wait_node(&api, machine, true, READY_WITHIN).await?;
        crate::sys::Wait::new(
            format!("node {machine} to take pods again"),
            READY_WITHIN.saturating_sub(began.elapsed()),
        )
        .every(Duration::from_millis(250))
        .until_async(|| async {
            Ok(match cluster.schedulable_nodes(&api.client).await?.iter().any(|n| n == machine) {
                true => crate::sys::Check::Done(()),
                false => crate::sys::Check::NotYet("Ready, still tainted or cordoned".into()),
            })
        })
        .await
    })?
}
