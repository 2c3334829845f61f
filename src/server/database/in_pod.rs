//! A database of Debian's packages (PostgreSQL, MariaDB, Redis) as the main process of a
//! Kubernetes pod: the one pod of the StatefulSet a k8s cell makes for it (see
//! `runner::k8s_server_cell::db_pod`), its data on the claim at `/data`, listening on the pod's
//! IP. The same `isobench k8s db` calls answer for it as for a Cassandra pod: `run`, `ready`
//! (its readiness probe) and `facts`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::{DbServe, Running};
use crate::server::STOP_TIMEOUT;
use crate::server::in_pod::{self, DATA_DIR, PodFacts};

/// What the run's Secret tells the database's pod.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct ServedPod {
    /// The isobench that wrote the spec; the image's must be the same release.
    pub isobench: String,
    pub serve: DbServe,
}

/// Its logs and sockets: the container's own, off the claim.
const SCRATCH_DIR: &str = "/tmp/isobench";

/// `isobench k8s db run`: starts the server on the pod's IP with its data on the claim, says
/// when it answers, and keeps it until the pod is told to stop.
pub fn run(spec: &ServedPod) -> Result<()> {
    crate::sys::install_interrupt_handler()?;
    let ip = in_pod::pod_ip()?;
    let serve = DbServe { listen: ip.clone(), ..spec.serve.clone() };
    let name = serve.kind.engine().name();
    let scratch = Path::new(SCRATCH_DIR);
    std::fs::create_dir_all(scratch).with_context(|| format!("creating {SCRATCH_DIR}"))?;
    println!("isobench: starting {name} on {ip}:{}, data in {DATA_DIR}/{}", serve.port, serve.directory());
    let mut server = Running::start(&serve, Path::new(DATA_DIR), scratch)?;
    let status = PodFacts {
        ready_after_s: server.ready_after.as_secs_f64(),
        start_phases: server.start_phases.iter().map(|(m, d)| (m.clone(), d.as_secs_f64())).collect(),
        release_version: server.version.clone(),
        ..Default::default()
    };
    in_pod::save_status(&status)?;
    println!("isobench: {name} {} answers after {:.1} s", server.version, server.ready_after.as_secs_f64());
    while !crate::sys::interrupted() {
        if !server.alive() {
            bail!("{name} exited on its own. Its log ends:\n{}", server.log_tail());
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    let took = server.stop(STOP_TIMEOUT)?;
    println!("isobench: {name} stopped in {:.1} s", took.as_secs_f64());
    Ok(())
}

const NOT_YET: &str = "the server in this pod has not answered yet";

/// `isobench k8s db ready`: whether the server in this pod has answered.
pub fn ready() -> Result<()> {
    in_pod::answered(NOT_YET)
}

/// `isobench k8s db facts`: JSON of where this pod runs and how its server started.
pub fn facts(spec: &ServedPod) -> Result<String> {
    let mut out = in_pod::status(NOT_YET)?;
    let data = Path::new(DATA_DIR).join(spec.serve.directory());
    let (files, bytes) = crate::server::serve::tree_size(&data);
    out.facts.insert("server.data".into(), data.display().to_string());
    out.facts.insert("server.data_files".into(), files.to_string());
    out.facts.insert("server.data_bytes".into(), bytes.to_string());
    Ok(serde_json::to_string(&out)?)
}
