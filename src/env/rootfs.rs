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

/// Where the agent binary and the volume appear inside a container.
pub const AGENT_PATH: &str = "/.isobench/isobench";
pub const DATA_PATH: &str = "/data";
/// Where a raw volume's device node appears inside a container.
pub const DEVICE_PATH: &str = "/dev/isobench-data";
pub const SCRATCH_PATH: &str = "/tmp/isobench";
