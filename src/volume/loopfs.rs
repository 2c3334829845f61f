//! A filesystem (ext4 or xfs) on a loop device over a sparse file: a real block-device
//! filesystem that isobench can make and destroy on any machine.

use std::collections::BTreeMap;

use anyhow::{Context, Result};

use super::{Kind, ProvisionContext, Provisioned, Volume, mount_point, needs_root};
use crate::ledger::Resource;
use crate::process::{self, find_program};
use crate::suite::tree::{Fields, SuiteError};
use crate::units;

pub const KIND: Kind = Kind { name: "loop", parse };

pub struct LoopFs {
    fs: String,
    size: u64,
    /// `losetup --direct-io=on`: the loop device bypasses the host page cache for its backing
    /// file, so the filesystem's own caching is what is measured, not two caches stacked.
    direct_io: bool,
    mkfs_args: Vec<String>,
    mount_options: Option<String>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let fs = f.choice("fs", &["ext4", "xfs"])?.unwrap_or_else(|| "ext4".into());
    let size = f.size("size")?.unwrap_or(4 << 30);
    let direct_io = f.bool("direct_io")?.unwrap_or(true);
    let mkfs_args = f.str_list("mkfs_args")?.unwrap_or_default();
    let mount_options = f.str("mount_options")?;
    f.finish()?;
    Ok(Box::new(LoopFs { fs, size, direct_io, mkfs_args, mount_options }))
}

impl LoopFs {
    fn mkfs_command(&self, device: &str) -> (String, Vec<String>) {
        let mut args: Vec<String> = match self.fs.as_str() {
            // No lazy initialisation: ext4lazyinit would otherwise write in the background
            // while the benchmark runs.
            "ext4" => vec!["-q".into(), "-F".into(), "-E".into(), "lazy_itable_init=0,lazy_journal_init=0".into()],
            _ => vec!["-q".into(), "-f".into()],
        };
        args.extend(self.mkfs_args.iter().cloned());
        args.push(device.to_string());
        (format!("mkfs.{}", self.fs), args)
    }
}

impl Volume for LoopFs {
    fn unavailable(&self) -> Option<String> {
        if let Some(why) = needs_root() {
            return Some(why);
        }
        if !std::path::Path::new("/dev/loop-control").exists() {
            return Some("this kernel has no loop devices (/dev/loop-control is missing)".into());
        }
        for program in ["losetup", &format!("mkfs.{}", self.fs)] {
            if find_program(program).is_none() {
                let package = if self.fs == "xfs" { "xfsprogs" } else { "e2fsprogs" };
                return Some(format!("{program} is not installed (Debian package {package})"));
            }
        }
        None
    }

    fn provision(&self, mut ctx: ProvisionContext) -> Result<Provisioned> {
        let image = ctx.run_dir.join("volume.img");
        ctx.ledger.record(Resource::File { path: image.clone() })?;
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(self.size))
            .with_context(|| format!("creating the {} backing file {}", units::fio_size(self.size), image.display()))?;
        ctx.ledger.record(Resource::LoopDevice { backing: image.clone() })?;
        let direct = format!("--direct-io={}", if self.direct_io { "on" } else { "off" });
        let device = process::command_output("losetup", &["--find", "--show", &direct, &image.to_string_lossy()])?
            .trim()
            .to_string();
        let (mkfs, args) = self.mkfs_command(&device);
        process::command_output(&mkfs, &args.iter().map(String::as_str).collect::<Vec<_>>())?;
        let facts = BTreeMap::from([
            ("volume.kind".into(), "loop".into()),
            ("volume.fs".into(), self.fs.clone()),
            ("volume.size".into(), units::fio_size(self.size)),
            ("volume.device".into(), device.clone()),
            ("volume.loop_direct_io".into(), self.direct_io.to_string()),
        ]);
        if ctx.block {
            // Formatted, not mounted, and the loop device let go: the file itself is the block
            // volume, so a guest's I/O takes the path a VM disk takes (guest filesystem →
            // virtio-blk → QEMU → file), with no loop driver stacked under QEMU.
            process::command_output("losetup", &["-d", &device])?;
            let mut facts = facts;
            facts.insert("volume.device".into(), image.display().to_string());
            return Ok(Provisioned { path: image.clone(), block: Some(image), facts });
        }
        let target = mount_point(&mut ctx)?;
        let mut mount_args = vec!["-t", &self.fs];
        if let Some(o) = &self.mount_options {
            mount_args.extend(["-o", o]);
        }
        let target_text = target.to_string_lossy().into_owned();
        mount_args.extend([device.as_str(), target_text.as_str()]);
        process::command_output("mount", &mount_args)?;
        Ok(Provisioned { path: target, block: None, facts })
    }
}
