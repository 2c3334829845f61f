//! Every kind isobench knows, and the one place that names them all: a new environment, volume
//! or workload kind is a file in its folder and a line here. The suite finds each section's kind
//! here, and [`register`] gives the ledger the release of what a kind made. (The server kinds,
//! a managed Cassandra, an external database and the databases of `server::database`, are the
//! arms of `server::ServerSpec`.)

use anyhow::{Result, bail};

use crate::ledger::{self, Resource};
use crate::{env, net, volume, workload};

pub const ENVS: &[env::Kind] =
    &[env::host::KIND, env::oci::KIND, env::podman::PODMAN, env::podman::DOCKER, env::vm::KIND, env::k8s::KIND];

pub const VOLUMES: &[volume::Kind] = &[
    volume::dir::KIND,
    volume::tmpfs::KIND,
    volume::loopfs::KIND,
    volume::block::KIND,
    volume::nbd::KIND,
    volume::mirror::KIND,
    volume::nvmeof::KIND,
    volume::pvc::KIND,
];

pub const WORKLOADS: &[workload::Kind] = &[
    workload::fio::KIND,
    workload::cql::KIND,
    workload::cpu::KIND,
    workload::memory::KIND,
    workload::network::KIND,
    workload::syscall::KIND,
    workload::pgbench::KIND,
    workload::oltp::KIND,
    workload::redis_bench::KIND,
    workload::command::KIND,
];

pub fn env(name: &str) -> Option<&'static env::Kind> {
    ENVS.iter().find(|k| k.name == name)
}

pub fn volume(name: &str) -> Option<&'static volume::Kind> {
    VOLUMES.iter().find(|k| k.name == name)
}

pub fn workload(name: &str) -> Option<&'static workload::Kind> {
    WORKLOADS.iter().find(|k| k.name == name)
}

/// Gives the ledger the kinds' release, before anything is made or cleaned up.
pub fn register() {
    ledger::register_kind_release(release);
}

/// Releases what a kind made (the ledger releases files, mounts, loop devices and processes
/// itself).
fn release(resource: &Resource) -> Result<()> {
    match resource {
        Resource::Container { delete } => env::oci::delete_container(delete),
        Resource::Kube { cluster, selector } => env::k8s::delete(cluster, selector),
        Resource::KubeMachine { cluster, machine, start } => env::k8s::machine::start_if_down(cluster, machine, start),
        Resource::NetNs { name } => net::delete_netns(name),
        Resource::Link { name } => net::delete_link(name),
        Resource::NbdClient { device } => volume::nbd_export::disconnect_nbd(device),
        Resource::NvmeConnection { nqn } => volume::nvmeof::disconnect(nqn),
        Resource::NvmetTarget { root, nqn, port_id } => {
            volume::nvmeof::KernelTarget { root: root.clone(), nqn: nqn.clone(), port_id: *port_id }.remove()
        }
        Resource::Dir { .. }
        | Resource::File { .. }
        | Resource::Mount { .. }
        | Resource::LoopDevice { .. }
        | Resource::Processes { .. }
        | Resource::Cgroup { .. } => bail!("the {} is the ledger's own to release", resource.describe()),
    }
}
