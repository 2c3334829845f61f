//! A sandbox root without an image: the host's own `/`, read-only, as the lower layer of an
//! overlay whose upper layer is a small tmpfs. fio, sysbench, Java and the agent are simply
//! there; directories a runtime creates for its mount points land in memory, never on the host.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::ledger::{Ledger, Resource};
use crate::sys;

/// Mounts the overlay root at `run_dir/rootfs` (its tmpfs at `run_dir/root-upper`), both
/// recorded before they are made.
pub fn overlay_of_host_root(ledger: &Ledger, run_dir: &Path) -> Result<PathBuf> {
    let upper = run_dir.join("root-upper");
    let root = run_dir.join("rootfs");
    std::fs::create_dir_all(&upper)?;
    std::fs::create_dir_all(&root)?;
    ledger.record(Resource::Mount { target: upper.clone() })?;
    sys::command_output(
        "mount",
        &["-t", "tmpfs", "-o", "size=256m,mode=755", "isobench-root-upper", &upper.to_string_lossy()],
    )?;
    for dir in ["upper", "work"] {
        std::fs::create_dir_all(upper.join(dir))?;
    }
    ledger.record(Resource::Mount { target: root.clone() })?;
    let options =
        format!("lowerdir=/,upperdir={},workdir={}", upper.join("upper").display(), upper.join("work").display());
    sys::command_output("mount", &["-t", "overlay", "-o", &options, "isobench-root", &root.to_string_lossy()])
        .context("mounting an overlay of / as the sandbox root")?;
    // The sandbox's own mounts must not travel back to the host.
    sys::command_output("mount", &["--make-private", &root.to_string_lossy()])?;
    Ok(root)
}

/// Mounts a tmpfs at `dir` (recorded first), for an agent's temporary files on the host: every
/// sandbox keeps its own in memory (this overlay's upper layer, a guest's RAM), and on the host's
/// root disk they would share its journal with a loop volume's backing file, whose every
/// fsync would then commit them too (the host's fsynced writes measured 5 % under runc's).
pub fn scratch_in_memory(ledger: &Ledger, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    ledger.record(Resource::Mount { target: dir.to_path_buf() })?;
    sys::command_output(
        "mount",
        &["-t", "tmpfs", "-o", "size=256m,mode=755", "isobench-scratch", &dir.to_string_lossy()],
    )
    .context("mounting a tmpfs for the agent's temporary files")?;
    Ok(())
}

/// Where the agent binary and the volume appear inside a container.
pub const AGENT_PATH: &str = "/.isobench/isobench";
pub const DATA_PATH: &str = "/data";
/// Where a raw volume's device node appears inside a container.
pub const DEVICE_PATH: &str = "/dev/isobench-data";
pub const SCRATCH_PATH: &str = "/tmp/isobench";
