//! Block storage: a device the user names, or a loop device over a file isobench makes. With
//! `fs = "none"` the workload gets the device itself (fio on `/dev/…`; a device node inside a
//! container, virtio-blk inside a VM); with `fs = "ext4" | "xfs"` a filesystem made on it, so
//! "raw" and "ext4 on the same device" sit side by side in one suite. `partitions = N` cuts it
//! into N equal slices (loop devices at offsets), one per sandbox started together.
//!
//! A device the user names is never formatted or written unless the suite says
//! `destructive = true`, and never touched while it is mounted or in use.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::{BlockSource, Kind, ProvisionContext, Provisioned, Volume, mount_point};
use crate::ledger::Resource;
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};
use figures::units;

pub const KIND: Kind = Kind { name: "block", parse };

/// Slices start on 1 MiB boundaries, as partitioning tools align them.
const ALIGN: u64 = 1 << 20;

#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// A block device the user named.
    Device(PathBuf),
    /// A sparse file of this size that isobench makes (and removes) for each run.
    File { size: u64 },
}

#[derive(Clone, Debug)]
pub struct Block {
    /// The kind's name as the suite wrote it ("block", or "loop" for the file-backed filesystem).
    pub kind: &'static str,
    pub source: Source,
    /// The filesystem to make; `None`: the raw device.
    pub fs: Option<String>,
    /// A user's device may be written (and formatted).
    pub destructive: bool,
    pub partitions: usize,
    /// `losetup --direct-io=on`: the loop device bypasses the host page cache for its backing,
    /// so what is measured is the filesystem's (or the raw device's) own caching, not two stacked.
    pub direct_io: bool,
    pub mkfs_args: Vec<String>,
    pub mount_options: Option<String>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let device = f.str("device")?;
    let backing = f.choice("backing", &["file"])?;
    let size = f.size("size")?;
    let source = match (device, backing) {
        (Some(_), Some(_)) => {
            return Err(f.error_at("backing", "give either device = \"/dev/…\" or backing = \"file\", not both"));
        }
        (Some(device), None) => {
            if size.is_some() {
                return Err(f.error_at("size", "applies to backing = \"file\"; a device's size is its own"));
            }
            let path = PathBuf::from(&device);
            if let Some(why) = check_device(&path) {
                return Err(f.error_at("device", why));
            }
            Source::Device(path)
        }
        (None, Some(_)) => Source::File { size: size.unwrap_or(4 << 30) },
        (None, None) => {
            return Err(f.error(
                "name the storage: device = \"/dev/…\" (a device of yours) or backing = \"file\" with a size (a loop device over a file isobench makes)",
            ));
        }
    };
    let fs = f.choice("fs", &["none", "ext4", "xfs"])?.filter(|fs| fs != "none");
    let destructive = f.bool("destructive")?.unwrap_or(false);
    if let (Source::Device(device), Some(fs)) = (&source, &fs)
        && !destructive
    {
        return Err(f.error_at(
            "fs",
            format!(
                "fs = \"{fs}\" formats {}, destroying what is on it; set destructive = true if that is what you want",
                device.display()
            ),
        ));
    }
    let partitions = f.count("partitions")?.unwrap_or(1) as usize;
    let direct_io = f.bool("direct_io")?.unwrap_or(true);
    let mkfs_args = f.str_list("mkfs_args")?.unwrap_or_default();
    let mount_options = f.str("mount_options")?;
    if fs.is_none() && (!mkfs_args.is_empty() || mount_options.is_some()) {
        let key = if mount_options.is_some() { "mount_options" } else { "mkfs_args" };
        return Err(f.error_at(key, "applies to a filesystem; set fs = \"ext4\" or \"xfs\""));
    }
    f.finish()?;
    let block = Block { kind: "block", source, fs, destructive, partitions, direct_io, mkfs_args, mount_options };
    if let Some(why) = block.slice_too_small() {
        return Err(f.error_at("partitions", why));
    }
    Ok(Box::new(block))
}

impl Block {
    /// A user's device that nothing may write to.
    fn read_only(&self) -> bool {
        matches!(self.source, Source::Device(_)) && !self.destructive
    }

    fn slice_too_small(&self) -> Option<String> {
        let total = match &self.source {
            Source::File { size } => *size,
            Source::Device(d) => device_size(d).ok()?,
        };
        (self.partitions > 1 && total / self.partitions as u64 / ALIGN == 0).then(|| {
            format!(
                "{} cut into {} slices leaves less than 1 MiB each; use fewer partitions or more space",
                units::human(total as f64, "B"),
                self.partitions
            )
        })
    }

    /// `count` slices of the volume, each made ready for one sandbox: slice i of `partitions`
    /// (the whole volume when it has one partition).
    fn provision_slices(&self, ctx: &ProvisionContext, count: usize) -> Result<Vec<Provisioned>> {
        if count > self.partitions && (self.partitions > 1 || matches!(self.source, Source::Device(_))) {
            bail!(
                "{count} sandboxes need a slice each, but the volume has partitions = {}; set partitions = {count} or more",
                self.partitions
            );
        }
        let (backing, total) = match &self.source {
            Source::File { size } => {
                let image = ctx.run_dir.join("volume.img");
                ctx.ledger.record(Resource::File { path: image.clone() })?;
                std::fs::File::create(&image).and_then(|f| f.set_len(*size)).with_context(|| {
                    format!("creating the {} backing file {}", units::fio_size(*size), image.display())
                })?;
                (image, *size)
            }
            Source::Device(device) => {
                if let Some(why) = check_device(device) {
                    bail!("{why}");
                }
                (device.clone(), device_size(device)?)
            }
        };
        let slice_len = if self.partitions == 1 { total } else { total / self.partitions as u64 / ALIGN * ALIGN };
        (0..count).map(|i| self.slice(ctx, &backing, i, i as u64 * slice_len, slice_len, count)).collect()
    }

    fn slice(
        &self,
        ctx: &ProvisionContext,
        backing: &Path,
        index: usize,
        offset: u64,
        len: u64,
        count: usize,
    ) -> Result<Provisioned> {
        let whole_device = matches!(self.source, Source::Device(_)) && self.partitions == 1;
        let device = if whole_device {
            backing.display().to_string()
        } else {
            attach_loop(ctx, backing, offset, len, self.direct_io, self.read_only())?
        };
        let mut facts = BTreeMap::from([
            ("volume.kind".to_string(), self.kind.to_string()),
            ("volume.fs".into(), self.fs.clone().unwrap_or_else(|| "none".into())),
            ("volume.size".into(), units::fio_size(len)),
            ("volume.device".into(), device.clone()),
        ]);
        if !whole_device {
            facts.insert("volume.loop_direct_io".into(), self.direct_io.to_string());
        }
        if let Source::Device(d) = &self.source {
            facts.insert("volume.backing".into(), d.display().to_string());
            facts.insert("volume.destructive".into(), self.destructive.to_string());
        }
        if self.partitions > 1 {
            facts.insert("volume.slice".into(), format!("{} of {} at offset {}", index + 1, self.partitions, offset));
        }
        let source =
            BlockSource::File { path: backing.to_path_buf(), offset, size: (self.partitions > 1).then_some(len) };
        let Some(fs) = &self.fs else {
            return Ok(Provisioned {
                path: PathBuf::from(device),
                raw: true,
                read_only: self.read_only(),
                block: Some(source),
                nbd: None,
                replicas: None,
                claim: None,
                facts,
            });
        };
        mkfs(fs, &device, &self.mkfs_args)?;
        if ctx.block {
            // Formatted, not mounted, and the loop device let go: the backing itself is the
            // guest's disk, so its I/O takes the path a VM disk takes (guest filesystem →
            // virtio-blk → QEMU → file), with no loop driver stacked under QEMU.
            if !whole_device {
                sys::command_output("losetup", &["-d", &device])?;
            }
            facts.insert("volume.device".into(), backing.display().to_string());
            return Ok(Provisioned {
                path: backing.to_path_buf(),
                raw: false,
                read_only: false,
                block: Some(source),
                nbd: None,
                replicas: None,
                claim: None,
                facts,
            });
        }
        let name = if count == 1 { "mnt".into() } else { format!("mnt-{index}") };
        let target = mount(ctx, fs, &device, self.mount_options.as_deref(), name)?;
        Ok(Provisioned::dir(target, facts))
    }
}

/// Makes filesystem `fs` on `device`: ext4 without lazy initialisation (ext4lazyinit would
/// otherwise write in the background while the benchmark runs), then the suite's own arguments.
pub fn mkfs(fs: &str, device: &str, extra: &[String]) -> Result<()> {
    let mut args: Vec<String> = match fs {
        "ext4" => vec!["-q".into(), "-F".into(), "-E".into(), "lazy_itable_init=0,lazy_journal_init=0".into()],
        _ => vec!["-q".into(), "-f".into()],
    };
    args.extend(extra.iter().cloned());
    args.push(device.to_string());
    sys::command_output(&format!("mkfs.{fs}"), &args.iter().map(String::as_str).collect::<Vec<_>>())?;
    Ok(())
}

/// Mounts `device` (filesystem `fs`) at `run_dir/name`, recorded first.
pub fn mount(ctx: &ProvisionContext, fs: &str, device: &str, options: Option<&str>, name: String) -> Result<PathBuf> {
    let target = mount_point(ctx, name)?;
    let mut args = vec!["-t", fs];
    if let Some(o) = options {
        args.extend(["-o", o]);
    }
    let target_text = target.to_string_lossy().into_owned();
    args.extend([device, target_text.as_str()]);
    sys::command_output("mount", &args)?;
    Ok(target)
}

/// Attaches a loop device over `len` bytes of `backing` at `offset` (recorded first) and returns
/// its name.
pub fn attach_loop(
    ctx: &ProvisionContext,
    backing: &Path,
    offset: u64,
    len: u64,
    direct_io: bool,
    read_only: bool,
) -> Result<String> {
    ctx.ledger.record(Resource::LoopDevice { backing: backing.to_path_buf(), offset: Some(offset) })?;
    let (offset, len) = (offset.to_string(), len.to_string());
    let direct = format!("--direct-io={}", if direct_io { "on" } else { "off" });
    let backing = backing.to_string_lossy();
    let mut args = vec!["--find", "--show", &direct, "--offset", &offset, "--sizelimit", &len];
    if read_only {
        args.push("--read-only");
    }
    args.push(&backing);
    Ok(sys::command_output("losetup", &args)?.trim().to_string())
}

/// The size of a file or block device in bytes.
pub fn device_size(path: &Path) -> Result<u64> {
    let mut f = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(f.seek(SeekFrom::End(0))?)
}

/// Why `device` must not be used: not a block device, or mounted, swapped on or held by another
/// driver (device-mapper, md) — itself or one of its partitions.
pub fn check_device(device: &Path) -> Option<String> {
    let meta = match std::fs::metadata(device) {
        Ok(m) => m,
        Err(e) => return Some(format!("{}: {e}", device.display())),
    };
    if !meta.file_type().is_block_device() {
        return Some(format!("{} is not a block device", device.display()));
    }
    let mut numbers = vec![dev_text(meta.rdev())];
    let sys = PathBuf::from(format!("/sys/dev/block/{}", numbers[0]));
    for entry in std::fs::read_dir(&sys).into_iter().flatten().flatten() {
        if entry.path().join("partition").exists()
            && let Ok(n) = std::fs::read_to_string(entry.path().join("dev"))
        {
            numbers.push(n.trim().to_string());
        }
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if let (Some(number), Some(mount_point)) = (fields.get(2), fields.get(4))
            && numbers.iter().any(|n| n == number)
        {
            return Some(format!(
                "{} is mounted at {} (device {number}); isobench never touches a mounted device: unmount it or name another",
                device.display(),
                mount_point.replace("\\040", " ")
            ));
        }
    }
    let canonical = std::fs::canonicalize(device).unwrap_or_else(|_| device.to_path_buf());
    for line in std::fs::read_to_string("/proc/swaps").unwrap_or_default().lines().skip(1) {
        if let Some(swap) = line.split_whitespace().next()
            && std::fs::canonicalize(swap).is_ok_and(|s| s.starts_with(&canonical))
        {
            return Some(format!("{} is in use as swap ({swap})", device.display()));
        }
    }
    let holders: Vec<String> = std::fs::read_dir(sys.join("holders"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    if !holders.is_empty() {
        return Some(format!("{} is held by {} (device-mapper, md or the like)", device.display(), holders.join(", ")));
    }
    None
}

/// "major:minor" of a device number, as /proc/self/mountinfo writes it.
fn dev_text(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

impl Volume for Block {
    fn raw(&self) -> bool {
        self.fs.is_none()
    }

    fn unavailable(&self) -> Option<String> {
        if let Some(why) = crate::sys::needs_root() {
            return Some(why);
        }
        let loops = matches!(self.source, Source::File { .. }) || self.partitions > 1;
        if loops && !Path::new("/dev/loop-control").exists() {
            return Some("this kernel has no loop devices (/dev/loop-control is missing)".into());
        }
        let mut programs = vec!["losetup".to_string()];
        if let Some(fs) = &self.fs {
            programs.push(format!("mkfs.{fs}"));
        }
        for program in programs {
            if find_program(&program).is_none() {
                let package = match program.as_str() {
                    "mkfs.xfs" => "xfsprogs",
                    "mkfs.ext4" => "e2fsprogs",
                    _ => "util-linux",
                };
                return Some(format!("{program} is not installed (apt-get install {package})"));
            }
        }
        None
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        Ok(self.provision_slices(&ctx, 1)?.remove(0))
    }

    fn provision_many(&self, ctx: ProvisionContext, n: usize) -> Result<Vec<Provisioned>> {
        if self.partitions == 1 && matches!(self.source, Source::File { .. }) {
            return super::separately(self, ctx, n);
        }
        self.provision_slices(&ctx, n)
    }

    fn max_sandboxes(&self) -> Option<usize> {
        match self.source {
            Source::File { .. } if self.partitions == 1 => None,
            _ => Some(self.partitions),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_non_device_is_refused_by_name() {
        let why = check_device(Path::new("/etc/hostname")).unwrap();
        assert!(why.contains("is not a block device"), "{why}");
        let why = check_device(Path::new("/dev/isobench-absent")).unwrap();
        assert!(why.contains("/dev/isobench-absent"), "{why}");
    }

    #[test]
    fn device_numbers_read_like_mountinfo() {
        assert_eq!(dev_text(libc::makedev(7, 3)), "7:3");
        assert_eq!(dev_text(libc::makedev(259, 70000)), "259:70000");
    }
}
