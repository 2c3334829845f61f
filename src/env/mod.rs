//! Where a workload runs. Each kind is one file; an environment only has to know how to start
//! the isobench agent inside its sandbox with the volume visible, and carry its report back.

pub mod host;
pub mod k8s;
pub mod oci;
pub mod podman;
pub mod rootfs;
pub mod vm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Result, bail};

use crate::agent;
use crate::ledger::Ledger;
use crate::syntax::{Fields, SuiteError};
use crate::volume::{Provisioned, RawTarget};

/// A sandbox started together with others (density, or a block run in slices): the environment
/// tells it when the sandbox's first process spawned and each line it printed, and feeds the
/// sandbox's stdin what `go` writes (a "go" once all are up; one per slice).
pub trait StartGate: Sync {
    fn spawned(&self, pid: u32);
    fn saw_line(&self, line: &str);
    fn go(&self) -> crate::sys::StdinFeed;
    /// How many slices the sandbox runs its workload in, each at its own "go" (0: at once).
    fn slices(&self) -> u32 {
        0
    }
}

/// Everything an environment needs to run the agent once.
pub struct Launch<'a> {
    pub request: &'a agent::Request,
    pub volume: &'a Provisioned,
    /// A host directory private to this run (bundles, sockets, logs).
    pub run_dir: &'a Path,
    /// The agent must have reported by then.
    pub timeout: Duration,
    pub ledger: &'a Ledger,
    /// isobench's work directory (caches live under it).
    pub workdir: &'a Path,
    /// How the suite asks this volume to be attached, where the environment has a choice (VMs).
    pub attach: Option<&'a vm::attach::Attach>,
    /// TCP ports a server listens on inside, which the host must reach (see `reach`).
    pub forward: &'a [u16],
    /// The sandbox's network to the host, when the workload needs one (see `network`).
    pub network: Option<&'a crate::net::NetPath>,
    /// Started together with other sandboxes (density): the agent says when it is up and waits
    /// for the others; the environment passes its pid, its ready line and the "go" through.
    pub gate: Option<&'a dyn StartGate>,
    /// A memory limit for this one sandbox in place of the environment's (fault injection).
    pub memory: Option<u64>,
    /// Where the sandbox's processes start, when its CPU is counted (`CpuCount::Group`).
    pub cpu_group: Option<&'a crate::sys::CpuGroup>,
    /// The host CPUs every process of the sandbox runs on (its runtime's, a VM's vCPU threads,
    /// the workload's), when the cell pins it.
    pub cpuset: Option<&'a crate::sys::CpuSet>,
}

/// How the CPU of a sandbox's processes (runtime and workload) is counted on the host.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CpuCount {
    /// They start in `Launch::cpu_group` and stay in it or below it: counted exactly, while
    /// they run, whatever else runs beside them.
    Group,
    /// As `Group`, but the sandbox's kernel does not count its workload's CPU as the host's
    /// does (gVisor's clock counts the time a call waits on the host): the workload's share is
    /// that of the processes the runtime's own processes forked (gVisor's systrap stubs, which
    /// run the workload's code), read while they live.
    GroupSplitByTree,
    /// They are isobench's children, reaped before `run_agent` returns: counted once they
    /// exited, and only when no other sandbox ran meanwhile.
    Reaped,
    /// Neither (an engine's daemonized monitor, a cluster's pods).
    Unknown,
}

/// How the host reaches a server inside one of this environment's sandboxes.
#[derive(Clone, Debug, PartialEq)]
pub enum Reach {
    /// The sandboxes share the host's network (the host; containers with network = "host"):
    /// node k of a ring listens on 127.0.0.k, loopback on both sides.
    Shared,
    /// Each sandbox has a network of its own, which the host makes (`Environment::network`; a
    /// ring's on one bridge, `net::bridged`): a node listens on its sandbox's address, which the
    /// host dials, through the sandbox's own network stack (gVisor's netstack under runsc).
    Own,
    /// One sandbox whose ports the environment forwards (a VM's user network): the node
    /// listens on `inside`, reached at `host`; a ring's nodes could not reach one another.
    Forwarded { inside: String, host: String },
}

pub trait Environment: Send + Sync {
    /// Why this environment cannot run on this machine, if it cannot.
    fn unavailable(&self) -> Option<String>;
    /// Whether the agent must see a kernel or namespaces different from the host's.
    fn is_sandbox(&self) -> bool;
    /// What the environment is (runtime and version, accelerator …), recorded with each run.
    fn describe(&self) -> BTreeMap<String, String>;
    /// Where the volume appears inside the environment.
    fn data_dir(&self, volume: &Provisioned) -> PathBuf;
    /// How the workload inside reaches a raw volume: the host's own device, or the NBD export
    /// itself when the volume is one.
    fn raw_target(&self, volume: &Provisioned) -> RawTarget {
        match &volume.nbd {
            Some(export) => RawTarget::Nbd(export.clone()),
            None => RawTarget::Device(volume.path.clone()),
        }
    }
    /// Whether its sandbox can stay up through a block and run its workload in slices, one at
    /// each "go" from the runner (the agent's stdin and stderr reach the runner while it runs).
    fn takes_slices(&self) -> bool {
        false
    }
    /// Whether the workload reaches an NBD export itself here (fio's nbd engine on the host,
    /// QEMU's client for a VM's disk), so that a raw network volume needs no device.
    fn speaks_nbd(&self) -> bool {
        false
    }
    /// Host memory one sandbox is given for certain (a memory limit, a guest's RAM), for
    /// refusing a density the machine cannot hold.
    fn memory_per_sandbox(&self) -> Option<u64> {
        None
    }
    /// How the host can count the CPU of every process that hosts one of its sandboxes.
    fn cpu_count(&self) -> CpuCount {
        if self.mounts_claims() { CpuCount::Unknown } else { CpuCount::Reaped }
    }
    /// Whether its sandboxes are a cluster's pods, which mount claims (`pvc` volumes) and nothing
    /// on this host.
    fn mounts_claims(&self) -> bool {
        false
    }
    /// The k8s environment itself (`isobench k8s render` builds its objects).
    fn as_k8s(&self) -> Option<&k8s::K8s> {
        None
    }
    /// Why this environment cannot pin its sandboxes to CPUs of this host (`cpuset`), if it cannot.
    fn cannot_pin(&self) -> Option<String> {
        None
    }
    /// Why this environment cannot hand a raw block device to the workload, if it cannot.
    fn no_raw_devices(&self) -> Option<String> {
        None
    }
    /// Where the agent may keep temporary files inside the environment.
    fn scratch_dir(&self, run_dir: &Path) -> PathBuf;
    /// Checked once per run of a suite, before the environment's first cell: a runtime that
    /// cannot start anything fails its cells with that one reason instead of run by run.
    fn preflight(&self, _ledger: &Ledger, _run_dir: &Path, _workdir: &Path) -> Result<()> {
        Ok(())
    }
    /// Whether the volume must be handed over as an unmounted block device (virtio-blk).
    fn wants_block(&self, _attach: Option<&vm::attach::Attach>) -> bool {
        false
    }
    /// How the host reaches TCP ports a server listens on inside (the same port numbers
    /// inside and out, forwarded by the environment where it must: `Launch::forward`), or why
    /// it cannot.
    fn reach(&self) -> Result<Reach, String> {
        Err("isobench cannot reach a server inside this kind of environment yet".into())
    }
    /// Makes the network path between a sandbox and the host (everything recorded in the
    /// ledger), for workloads that talk to a peer on the host (iperf3).
    fn network(&self, _ledger: &Ledger) -> Result<crate::net::NetPath> {
        bail!("this kind of environment cannot give a sandbox a network path yet")
    }
    /// The runtime's own counters of the sandbox that runs in `run_dir`, now, by name (gVisor's
    /// packets, segments, file opens and reads); None where the runtime keeps none.
    fn runtime_counters(&self, _run_dir: &Path) -> Option<Result<BTreeMap<String, f64>>> {
        None
    }
    /// Runs the agent once and returns its report.
    fn run_agent(&self, launch: Launch) -> Result<crate::store::AgentReport>;
}

/// An environment kind: its name and how to read its suite table.
pub struct Kind {
    pub name: &'static str,
    pub parse: fn(&mut Fields) -> Result<Box<dyn Environment>, SuiteError>,
}

static AGENT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Copies this very program to a file of the run's own, which every environment then starts as
/// the agent: rebuilding or upgrading isobench during a long run cannot pull it away, and
/// sandboxes bind-mount a stable path. /proc/self/exe reads even when the file was replaced.
pub fn install_agent(ledger: &crate::ledger::Ledger, workdir: &Path) -> Result<PathBuf> {
    let path = workdir.join("bin").join(format!("isobench-{}", ledger.token()));
    ledger.record(crate::ledger::Resource::File { path: path.clone() })?;
    std::fs::create_dir_all(workdir.join("bin"))?;
    std::fs::copy("/proc/self/exe", &path)
        .map_err(|e| anyhow::anyhow!("copying the isobench binary to {}: {e}", path.display()))?;
    let _ = AGENT.set(path.clone());
    Ok(path)
}

/// The isobench binary that serves as the agent.
pub fn agent_binary() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("ISOBENCH_AGENT_BIN") {
        return Ok(PathBuf::from(p));
    }
    if let Some(p) = AGENT.get() {
        return Ok(p.clone());
    }
    std::env::current_exe().map_err(|e| anyhow::anyhow!("cannot find the isobench binary: {e}"))
}
