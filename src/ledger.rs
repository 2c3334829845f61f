//! The record of everything isobench creates on the machine. Each resource is written to a state
//! file *before* it is created, and released in reverse order after the run that needed it, on
//! success, failure and interrupt alike. A state file whose owner died (SIGKILL, power loss) is
//! what `isobench cleanup` reads to remove the leftovers: release is the same code either way.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::process;
use crate::store::write_atomic;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A directory isobench made; removed with its contents.
    Dir { path: PathBuf },
    /// A file isobench made.
    File { path: PathBuf },
    /// A mount isobench made at `target`.
    Mount { target: PathBuf },
    /// Loop devices backed by `backing` (the device name is only known once attached).
    LoopDevice { backing: PathBuf },
    /// Every process carrying this token in its environment.
    Processes { token: String },
    /// A container, removed by running `delete` (`runc … delete --force ID`, `podman … rm -f ID`).
    Container { delete: Vec<String> },
}

impl Resource {
    /// Removes the resource; removing something already gone is not an error.
    pub fn release(&self) -> Result<()> {
        match self {
            Resource::Dir { path } => remove_tree(path),
            Resource::File { path } => match fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", path.display()))
                }
                _ => Ok(()),
            },
            Resource::Mount { target } => unmount(target),
            Resource::LoopDevice { backing } => detach_loops(backing),
            Resource::Processes { token } => {
                process::kill_by_token(token);
                Ok(())
            }
            Resource::Container { delete } => crate::env::oci::delete_container(delete),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Resource::Dir { path } => format!("directory {}", path.display()),
            Resource::File { path } => format!("file {}", path.display()),
            Resource::Mount { target } => format!("mount {}", target.display()),
            Resource::LoopDevice { backing } => format!("loop device on {}", backing.display()),
            Resource::Processes { token } => {
                format!("processes marked {}={token}", process::TOKEN_VAR)
            }
            Resource::Container { delete } => format!("container ({})", delete.join(" ")),
        }
    }
}

/// Removes a directory isobench made. Anything still mounted below it was mounted by isobench or
/// a tool it ran (a volume whose unmount failed earlier, runsc's network namespace file): it is
/// unmounted first. Then the directory goes like `rm -r --one-file-system`, so a mount that would
/// not come off can never turn into deleting through it.
fn remove_tree(path: &Path) -> Result<()> {
    if !path.exists() {
        return Ok(());
    }
    for inner in mounts_under(path).iter().rev() {
        unmount(inner)?;
    }
    remove_same_device(path, std::os::unix::fs::MetadataExt::dev(&fs::symlink_metadata(path)?))
        .with_context(|| format!("removing {}", path.display()))
}

fn remove_same_device(path: &Path, dev: u64) -> std::io::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::symlink_metadata(path)?;
    if meta.dev() != dev {
        return Err(std::io::Error::other(format!("{} is on another filesystem", path.display())));
    }
    if meta.is_dir() {
        for entry in fs::read_dir(path)? {
            remove_same_device(&entry?.path(), dev)?;
        }
        fs::remove_dir(path)
    } else {
        fs::remove_file(path)
    }
}

/// Mount points strictly below `dir`, in the order they were mounted.
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let prefix = format!("{}/", mountinfo_path(dir));
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with(&prefix))
        .map(|m| {
            PathBuf::from(m.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\"))
        })
        .collect()
}

/// Whether `target` is a mount point now (reads /proc/self/mountinfo, which shows the kernel's
/// escaped form of paths).
pub fn is_mounted(target: &Path) -> bool {
    let wanted = mountinfo_path(target);
    fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| info.lines().any(|l| l.split(' ').nth(4) == Some(wanted.as_str())))
}

/// `path` as /proc/self/mountinfo spells it: absolute, resolved, with the kernel's escapes.
fn mountinfo_path(path: &Path) -> String {
    let resolved = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    resolved
        .to_string_lossy()
        .replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

fn unmount(target: &Path) -> Result<()> {
    // Mounts can stack (a retried mount); peel all of them.
    for attempt in 0..20 {
        if !is_mounted(target) {
            return Ok(());
        }
        let t = target.to_string_lossy();
        let result = if attempt < 10 {
            process::command_output("umount", &[&t])
        } else {
            // Something still holds it open; detach it from the tree so nothing new can use it.
            process::command_output("umount", &["-l", &t])
        };
        if result.is_err() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    if is_mounted(target) {
        anyhow::bail!("{} is still mounted; see `fuser -vm {}`", target.display(), target.display());
    }
    Ok(())
}

/// Loop devices attached to `backing`, from `losetup -j`.
pub fn loops_of(backing: &Path) -> Vec<String> {
    process::command_output("losetup", &["-j", &backing.to_string_lossy()])
        .map(|out| out.lines().filter_map(|l| l.split(':').next()).map(str::to_string).collect())
        .unwrap_or_default()
}

fn detach_loops(backing: &Path) -> Result<()> {
    for attempt in 0..20 {
        let devices = loops_of(backing);
        if devices.is_empty() {
            return Ok(());
        }
        for dev in devices {
            let _ = process::command_output("losetup", &["-d", &dev]);
        }
        std::thread::sleep(Duration::from_millis(50 * (attempt + 1)));
    }
    anyhow::bail!("the loop device on {} could not be detached", backing.display())
}

#[derive(Serialize, Deserialize, Debug)]
struct StateFile {
    pid: u32,
    /// The owner's start time (from /proc/PID/stat), so a reused pid is not mistaken for it.
    start_time: u64,
    token: String,
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Entry {
    id: u64,
    resource: Resource,
}

/// Everything one isobench process has created and not yet released.
pub struct Ledger {
    path: PathBuf,
    state: StateFile,
    next_id: u64,
}

/// A position in the ledger; `release_to(mark)` undoes everything recorded after it.
#[derive(Clone, Copy, Debug)]
pub struct Mark(usize);

impl Ledger {
    /// Opens a new state file for this process under `workdir/state`.
    pub fn open(workdir: &Path) -> Result<Ledger> {
        let dir = workdir.join("state");
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let pid = std::process::id();
        let start_time = process_start_time(pid).unwrap_or(0);
        let token = format!("{pid}-{start_time}");
        let ledger = Ledger {
            path: dir.join(format!("{token}.json")),
            state: StateFile { pid, start_time, token, entries: Vec::new() },
            next_id: 0,
        };
        ledger.save()?;
        Ok(ledger)
    }

    /// A token unique to this isobench process, for naming things it creates.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// A fresh token for one group of processes (marked in their environment).
    pub fn new_process_token(&mut self) -> String {
        self.next_id += 1;
        format!("{}-p{}", self.state.token, self.next_id)
    }

    /// Records `resource` durably; call it before creating the resource.
    pub fn record(&mut self, resource: Resource) -> Result<()> {
        self.next_id += 1;
        self.state.entries.push(Entry { id: self.next_id, resource });
        self.save()
    }

    pub fn mark(&self) -> Mark {
        Mark(self.state.entries.len())
    }

    /// Releases, newest first, every resource recorded after `mark`. Every release is attempted;
    /// one that fails stays recorded (for `close` or `isobench cleanup` to retry) and the first
    /// failure is returned.
    pub fn release_to(&mut self, mark: Mark) -> Result<()> {
        let mut first_error = None;
        let mut i = self.state.entries.len();
        while i > mark.0 {
            i -= 1;
            let resource = self.state.entries[i].resource.clone();
            match resource.release() {
                Ok(()) => {
                    self.state.entries.remove(i);
                    self.save()?;
                }
                Err(e) => {
                    first_error.get_or_insert(e.context(format!("releasing {}", resource.describe())));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn save(&self) -> Result<()> {
        write_atomic(&self.path, &serde_json::to_vec_pretty(&self.state)?)
    }

    /// Releases everything and removes the state file.
    pub fn close(mut self) -> Result<()> {
        let result = self.release_to(Mark(0));
        if self.state.entries.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        result
    }
}

fn process_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22, counted after the parenthesised command name (which may contain spaces).
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// What `isobench cleanup` did.
#[derive(Default, Debug)]
pub struct CleanupReport {
    pub released: Vec<String>,
    pub failed: Vec<String>,
    pub still_running: Vec<u32>,
}

/// Releases the resources of every state file under `workdir` whose isobench process is gone.
pub fn cleanup(workdir: &Path) -> Result<CleanupReport> {
    let mut report = CleanupReport::default();
    let dir = workdir.join("state");
    let Ok(listing) = fs::read_dir(&dir) else {
        return Ok(report);
    };
    let mut files: Vec<PathBuf> =
        listing.filter_map(|e| Some(e.ok()?.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect();
    files.sort();
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Ok(mut state) = serde_json::from_str::<StateFile>(&text) else {
            report.failed.push(format!("{}: not a state file; remove it by hand", path.display()));
            continue;
        };
        if state.pid != std::process::id()
            && process_start_time(state.pid) == Some(state.start_time)
            && state.start_time != 0
        {
            report.still_running.push(state.pid);
            continue;
        }
        // Processes first (they may hold mounts and loop devices open), then the rest newest first.
        let order: Vec<Entry> = state
            .entries
            .iter()
            .filter(|e| matches!(e.resource, Resource::Processes { .. }))
            .chain(state.entries.iter().rev().filter(|e| !matches!(e.resource, Resource::Processes { .. })))
            .cloned()
            .collect();
        let mut failed_ids = Vec::new();
        for entry in order {
            match entry.resource.release() {
                Ok(()) => report.released.push(entry.resource.describe()),
                Err(e) => {
                    report.failed.push(format!("{}: {e:#}", entry.resource.describe()));
                    failed_ids.push(entry.id);
                }
            }
        }
        if failed_ids.is_empty() {
            let _ = fs::remove_file(&path);
        } else {
            state.entries.retain(|e| failed_ids.contains(&e.id));
            write_atomic(&path, &serde_json::to_vec_pretty(&state)?)?;
        }
    }
    Ok(report)
}
