//! The storage under test. Each kind is one file. A volume is provisioned before every run and
//! torn down after it; everything it creates is recorded in the ledger first, and the ledger
//! releases it, so teardown after success, failure, Ctrl-C or a later `isobench cleanup` is the
//! same code.

pub mod block;
pub mod dir;
pub mod loopfs;
pub mod mirror;
pub mod nbd;
pub mod nbd_export;
pub mod nvmeof;
pub mod pvc;
pub mod tmpfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::ledger::Ledger;
use crate::syntax::{Fields, SuiteError};

/// A volume ready for a run.
#[derive(Debug, Clone)]
pub struct Provisioned {
    /// Where the volume is usable on the host: a mount point or a directory, or, for a raw
    /// volume, the block device itself.
    pub path: PathBuf,
    /// The workload gets the device at `path` itself, with no filesystem (`fs = "none"`).
    pub raw: bool,
    /// Nothing may write to it (a device the suite did not call destructive).
    pub read_only: bool,
    /// What a VM attaches as its virtio-blk disk: the file or device holding a raw volume, or
    /// the formatted, unmounted image when the environment asked for one (`ProvisionContext::block`).
    pub block: Option<BlockSource>,
    /// An NBD export the workload may talk to itself (fio's nbd engine), instead of `path`.
    pub nbd: Option<NbdExport>,
    /// A mirror's copies, compared after the run.
    pub replicas: Option<mirror::Replicas>,
    /// A PersistentVolumeClaim the environment asks its cluster for (nothing on the host).
    pub claim: Option<pvc::Claim>,
    /// What it is: kind, filesystem, device, mount options.
    pub facts: BTreeMap<String, String>,
}

impl Provisioned {
    /// A mirror's copies after the run: identical or not, and what its nexus reported.
    pub fn check_replicas(&self, facts: &mut std::collections::BTreeMap<String, String>, notes: &mut Vec<String>) {
        if let Some(replicas) = &self.replicas {
            let (found, noted) = replicas.check();
            facts.extend(found);
            notes.extend(noted);
        }
    }

    /// A directory (or mount point) on the host, described by `facts`.
    pub fn dir(path: PathBuf, facts: BTreeMap<String, String>) -> Provisioned {
        Provisioned { path, raw: false, read_only: false, block: None, nbd: None, replicas: None, claim: None, facts }
    }
}

/// What a VM sees as a whole disk.
#[derive(Debug, Clone, PartialEq)]
pub enum BlockSource {
    /// A range of a file or block device (`size`: its length; `None`: to the end).
    File { path: PathBuf, offset: u64, size: Option<u64> },
    /// An NBD export, which QEMU's own client reaches over TCP.
    Nbd(NbdExport),
}

/// How the workload inside reaches a raw volume.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RawTarget {
    /// A block device node, as the environment shows it.
    Device(PathBuf),
    /// An NBD export the workload talks to itself (fio's nbd engine).
    Nbd(NbdExport),
}

/// An NBD export on a TCP address.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NbdExport {
    pub host: std::net::Ipv4Addr,
    pub port: u16,
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

impl NbdExport {
    pub fn uri(&self) -> String {
        format!("nbd://{}:{}/{}", self.host, self.port, self.name)
    }
}

#[derive(Clone, Copy)]
pub struct ProvisionContext<'a> {
    pub ledger: &'a Ledger,
    /// A host directory private to this run, on the work directory's filesystem.
    pub run_dir: &'a Path,
    /// Hand the volume over as a formatted but unmounted block device (virtio-blk).
    pub block: bool,
    /// The environment can talk to an NBD export itself (fio's nbd engine on the host, QEMU's
    /// client), so a raw network volume needs no device on the host.
    pub speaks_nbd: bool,
}

pub trait Volume {
    /// Why this volume cannot be made on this machine, if it cannot.
    fn unavailable(&self) -> Option<String>;
    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned>;
    /// One volume for each of `n` sandboxes started together (density): by default `n`
    /// independent volumes, each in a directory of its own under the run's.
    fn provision_many(&self, ctx: ProvisionContext, n: usize) -> Result<Vec<Provisioned>> {
        separately(self, ctx, n)
    }
    /// Whether the workload gets the device itself, with no filesystem (`fs = "none"`).
    fn raw(&self) -> bool {
        false
    }
    /// How many sandboxes at once can each have their own slice of it (`None`: any number).
    fn max_sandboxes(&self) -> Option<usize> {
        None
    }
    /// Host memory each copy of it takes at most (a tmpfs), for the density memory check.
    fn memory(&self) -> Option<u64> {
        None
    }
    /// The claim on a cluster's storage it is, which only a cluster's pods can mount.
    fn claim(&self) -> Option<pvc::Claim> {
        None
    }
}

/// `n` independent copies of `volume`, each provisioned in a directory of its own under the run's.
pub fn separately<V: Volume + ?Sized>(volume: &V, ctx: ProvisionContext, n: usize) -> Result<Vec<Provisioned>> {
    (0..n)
        .map(|i| {
            let run_dir = ctx.run_dir.join(format!("vol-{i}"));
            ctx.ledger.record(crate::ledger::Resource::Dir { path: run_dir.clone() })?;
            std::fs::create_dir_all(&run_dir)?;
            volume.provision(ProvisionContext { run_dir: &run_dir, ..ctx })
        })
        .collect()
}

pub struct Kind {
    pub name: &'static str,
    pub parse: fn(&mut Fields) -> Result<Box<dyn Volume>, SuiteError>,
}

/// The refusal of a volume kind that cannot be a block device.
pub fn no_block(kind: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "a {kind} volume cannot be attached as a block device (virtio-blk); use kind = \"loop\" or \"block\""
    )
}

/// Creates the mount point `run_dir/name` and records the mount before it is made.
pub fn mount_point(ctx: &ProvisionContext, name: String) -> Result<PathBuf> {
    let target = ctx.run_dir.join(name);
    std::fs::create_dir_all(&target)?;
    ctx.ledger.record(crate::ledger::Resource::Mount { target: target.clone() })?;
    Ok(target)
}
