//! The storage under test. Each kind is one file. A volume is provisioned before every run and
//! torn down after it; everything it creates is recorded in the ledger first, and the ledger
//! releases it, so teardown after success, failure, Ctrl-C or a later `isobench cleanup` is the
//! same code.

pub mod dir;
pub mod loopfs;
pub mod tmpfs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::ledger::Ledger;
use crate::suite::tree::{Fields, SuiteError};

/// A volume ready for a run.
#[derive(Debug, Clone)]
pub struct Provisioned {
    /// Where the volume is usable on the host (a mount point or a directory); for a block
    /// volume, the device.
    pub path: PathBuf,
    /// The unmounted block device holding the volume's filesystem, when one was asked for.
    pub block: Option<PathBuf>,
    /// What it is: kind, filesystem, device, mount options.
    pub facts: BTreeMap<String, String>,
}

pub struct ProvisionContext<'a> {
    pub ledger: &'a mut Ledger,
    /// A host directory private to this run, on the work directory's filesystem.
    pub run_dir: &'a Path,
    /// Hand the volume over as a formatted but unmounted block device (virtio-blk).
    pub block: bool,
}

pub trait Volume {
    /// Why this volume cannot be made on this machine, if it cannot.
    fn unavailable(&self) -> Option<String>;
    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned>;
}

pub struct Kind {
    pub name: &'static str,
    pub parse: fn(&mut Fields) -> Result<Box<dyn Volume>, SuiteError>,
}

pub const KINDS: &[Kind] = &[dir::KIND, tmpfs::KIND, loopfs::KIND];

pub fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

pub fn kind_names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).collect()
}

/// Mounting needs root (CAP_SYS_ADMIN); say so plainly instead of failing in mount(8).
pub fn needs_root() -> Option<String> {
    (!nix::unistd::geteuid().is_root()).then(|| "needs root to mount (run isobench as root)".to_string())
}

/// The refusal of a volume kind that cannot be a block device.
pub fn no_block(kind: &str) -> anyhow::Error {
    anyhow::anyhow!("a {kind} volume cannot be attached as a block device (virtio-blk); use kind = \"loop\"")
}

/// Creates the mount point `run_dir/mnt` and records the mount before it is made.
pub fn mount_point(ctx: &mut ProvisionContext) -> Result<PathBuf> {
    let target = ctx.run_dir.join("mnt");
    std::fs::create_dir_all(&target)?;
    ctx.ledger.record(crate::ledger::Resource::Mount { target: target.clone() })?;
    Ok(target)
}
