//! Files written so that a kill or a power cut never leaves a part of one.

use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// Writes `bytes` to `path` through a temporary file in the same directory, fsynced, and a
/// rename (the directory fsynced too), so readers, a later isobench after a kill and the machine
/// after a power cut see either the old file or the new one, never a part. Flushing now, between
/// runs, also keeps the kernel from writing results back later, during the next measurement, to
/// what is often the disk under test.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let mut f = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))?;
    fs::File::open(dir).and_then(|d| d.sync_all()).with_context(|| format!("syncing {}", dir.display()))
}

/// Whether `path` is a temporary of `write_atomic` whose writer is gone (killed between its
/// write and its rename): the pid in its name no longer runs.
pub fn temporary_of_a_dead_writer(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let pid = name.strip_prefix('.').and_then(|n| n.rsplit_once(".tmp-")).map(|(_, pid)| pid);
    pid.and_then(|p| p.parse::<u32>().ok()).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
}
