//! The record of everything isobench creates on the machine. Each resource is written to a state
//! file *before* it is created, and released in reverse order after the run that needed it, on
//! success, failure and interrupt alike. A state file whose owner died (SIGKILL, power loss) is
//! what `isobench cleanup` reads to remove the leftovers: release is the same code either way.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, anyhow};
use serde::{Deserialize, Serialize};

use crate::sys;
use crate::sys::write_atomic;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A directory isobench made; removed with its contents.
    Dir { path: PathBuf },
    /// A file isobench made.
    File { path: PathBuf },
    /// A mount isobench made at `target`.
    Mount { target: PathBuf },
    /// Loop devices backed by `backing`, at `offset` when given (the device name is only known
    /// once attached). Without an offset, every loop device on `backing`: a file isobench made.
    LoopDevice {
        backing: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offset: Option<u64>,
    },
    /// Every process carrying this token in its environment.
    Processes { token: String },
    /// A cgroup isobench made to count a sandbox's CPU (`sys::CpuGroup`), by its path from
    /// the hierarchies' root: removed from each hierarchy a runtime made it in.
    Cgroup { path: PathBuf },
    /// A container, removed by running `delete` (`runc … delete --force ID`, `podman … rm -f ID`).
    Container { delete: Vec<String> },
    /// A network namespace (`ip netns add NAME`).
    NetNs { name: String },
    /// A network link on the host: a veth pair's host end, or a tap device.
    Link { name: String },
    /// A kernel NBD client connection (`nbd-client HOST PORT /dev/nbdN`).
    NbdClient { device: String },
    /// The kernel's NVMe/TCP host connected to a subsystem (`nvme connect … -n NQN`).
    NvmeConnection { nqn: String },
    /// A kernel nvmet target made through configfs: a subsystem and its port.
    NvmetTarget { root: PathBuf, nqn: String, port_id: u16 },
    /// Kubernetes objects (Jobs, pods, Secrets, claims) in a cluster, by a label selector that
    /// names one run.
    Kube { cluster: KubeCluster, selector: String },
    /// A cluster's machine a fault stopped (`kill = "machine"`), with the env's command that
    /// starts it again (`{machine}` in it): started if the API server does not see it Ready.
    KubeMachine { cluster: KubeCluster, machine: String, start: String },
}

/// Which Kubernetes cluster, as the suite names it: recorded here so that `cleanup` finds it
/// again, and how the k8s environment connects (`env::k8s::api`). A path and names only, never
/// credentials.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KubeCluster {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    pub namespace: String,
}

/// How the kinds release what they made. The ledger keeps resources as data and names no kind:
/// the registry hands it this once (`kinds::register`), before anything is made.
pub type KindRelease = fn(&Resource) -> Result<()>;

static KIND_RELEASE: OnceLock<KindRelease> = OnceLock::new();

/// Sets how the kinds' resources are released; the first call wins (it is the same function).
pub fn register_kind_release(release: KindRelease) {
    let _ = KIND_RELEASE.set(release);
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
            Resource::LoopDevice { backing, offset } => detach_loops(backing, *offset),
            Resource::Processes { token } => {
                sys::kill_by_token(token);
                Ok(())
            }
            Resource::Cgroup { path } => sys::remove_cgroup(path),
            kind_made => match KIND_RELEASE.get() {
                Some(release) => release(kind_made),
                None => Err(anyhow!("no kind's release is registered to remove the {}", kind_made.describe())),
            },
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Resource::Dir { path } => format!("directory {}", path.display()),
            Resource::File { path } => format!("file {}", path.display()),
            Resource::Mount { target } => format!("mount {}", target.display()),
            Resource::LoopDevice { backing, offset: None } => format!("loop device on {}", backing.display()),
            Resource::LoopDevice { backing, offset: Some(o) } => {
                format!("loop device on {} at offset {o}", backing.display())
            }
            Resource::Processes { token } => {
                format!("processes marked {}={token}", sys::TOKEN_VAR)
            }
            Resource::Cgroup { path } => format!("cgroup {} in every hierarchy", path.display()),
            Resource::Container { delete } => format!("container ({})", delete.join(" ")),
            Resource::NetNs { name } => format!("network namespace {name}"),
            Resource::Link { name } => format!("network link {name}"),
            Resource::NbdClient { device } => format!("NBD client on {device}"),
            Resource::NvmeConnection { nqn } => format!("NVMe/TCP connection to {nqn}"),
            Resource::NvmetTarget { nqn, port_id, .. } => format!("nvmet target {nqn} on port {port_id}"),
            Resource::Kube { cluster, selector } => {
                format!("Kubernetes objects labelled {selector} in namespace {}", cluster.namespace)
            }
            Resource::KubeMachine { machine, .. } => {
                format!("Kubernetes node {machine}, stopped by a fault (started again unless it is Ready)")
            }
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
            sys::command_output("umount", &[&t])
        } else {
            // Something still holds it open; detach it from the tree so nothing new can use it.
            sys::command_output("umount", &["-l", &t])
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

/// Loop devices attached to `backing` (at `offset`, when given), from `losetup -j`.
pub fn loops_of(backing: &Path, offset: Option<u64>) -> Vec<String> {
    let backing = backing.to_string_lossy();
    let offset = offset.map(|o| o.to_string());
    let mut args = vec!["-j", &backing];
    if let Some(o) = &offset {
        args.extend(["-o", o]);
    }
    sys::command_output("losetup", &args)
        .map(|out| out.lines().filter_map(|l| l.split(':').next()).map(str::to_string).collect())
        .unwrap_or_default()
}

fn detach_loops(backing: &Path, offset: Option<u64>) -> Result<()> {
    for attempt in 0..20 {
        let devices = loops_of(backing, offset);
        if devices.is_empty() {
            return Ok(());
        }
        for dev in devices {
            let _ = sys::command_output("losetup", &["-d", &dev]);
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

/// Everything one isobench process has created and not yet released. Shared by reference:
/// sandboxes started at once (density) record from their own threads.
pub struct Ledger {
    path: PathBuf,
    token: String,
    inner: Mutex<Inner>,
}

struct Inner {
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
            token: token.clone(),
            inner: Mutex::new(Inner { state: StateFile { pid, start_time, token, entries: Vec::new() }, next_id: 0 }),
        };
        ledger.save(&ledger.lock())?;
        Ok(ledger)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A thread that panicked while holding the lock left the entries as they were.
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A token unique to this isobench process, for naming things it creates.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// A fresh token for one group of processes (marked in their environment).
    pub fn new_process_token(&self) -> String {
        format!("{}-p{}", self.token, self.next_id())
    }

    /// A number no other call on this ledger returns: for names of things isobench creates.
    pub fn next_id(&self) -> u64 {
        let mut inner = self.lock();
        inner.next_id += 1;
        inner.next_id
    }

    /// Records `resource` durably; call it before creating the resource.
    pub fn record(&self, resource: Resource) -> Result<()> {
        let mut inner = self.lock();
        inner.next_id += 1;
        let id = inner.next_id;
        inner.state.entries.push(Entry { id, resource });
        self.save(&inner)
    }

    pub fn mark(&self) -> Mark {
        Mark(self.lock().state.entries.len())
    }

    /// Releases, newest first, every resource recorded after `mark`. Every release is attempted;
    /// one that fails stays recorded (for `close` or `isobench cleanup` to retry) and the first
    /// failure is returned. Call it when nothing records concurrently any more.
    pub fn release_to(&self, mark: Mark) -> Result<()> {
        let mut first_error = None;
        let mut i = self.lock().state.entries.len();
        while i > mark.0 {
            i -= 1;
            let resource = self.lock().state.entries[i].resource.clone();
            // Not under the lock: a release may take seconds (a container's delete).
            match resource.release() {
                Ok(()) => {
                    let mut inner = self.lock();
                    inner.state.entries.remove(i);
                    self.save(&inner)?;
                }
                Err(e) => {
                    first_error.get_or_insert(e.context(format!("releasing {}", resource.describe())));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn save(&self, inner: &Inner) -> Result<()> {
        write_atomic(&self.path, &serde_json::to_vec_pretty(&inner.state)?)
    }

    /// Removes the state file and releases nothing: what it recorded now belongs to someone
    /// else (detached servers, which `isobench server stop` stops).
    pub fn forget(self) -> Result<()> {
        fs::remove_file(&self.path).with_context(|| format!("removing {}", self.path.display()))
    }

    /// Releases everything and removes the state file.
    pub fn close(self) -> Result<()> {
        let result = self.release_to(Mark(0));
        if self.lock().state.entries.is_empty() {
            let _ = fs::remove_file(&self.path);
        }
        result
    }
}

fn process_start_time(pid: u32) -> Option<u64> {
    crate::sys::ProcStat::read(pid as i32)?.start_ticks()
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
    let (mut files, others): (Vec<PathBuf>, Vec<PathBuf>) =
        listing.filter_map(|e| Some(e.ok()?.path())).partition(|p| p.extension().is_some_and(|x| x == "json"));
    // A state file's owner killed while it wrote one: the state file itself is whole (renamed
    // over atomically), the temporary beside it is nobody's.
    for path in others.into_iter().filter(|p| crate::sys::temporary_of_a_dead_writer(p)) {
        if fs::remove_file(&path).is_ok() {
            report.released.push(format!("partial write {}", path.display()));
        }
    }
    files.sort();
    for path in files {
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Some(Salvaged { mut state, unreadable, cut_short }) = read_state(&text, &path) else {
            report.failed.push(format!("{}: not a state file (no owner pid in it); remove it by hand", path.display()));
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
        if cut_short {
            report.failed.push(format!(
                "{}: the file was cut short; its last entry is lost: check by hand for what it named",
                path.display()
            ));
        }
        for entry in &unreadable {
            report.failed.push(format!("{}: an entry isobench cannot read, kept: {entry}", path.display()));
        }
        if failed_ids.is_empty() && unreadable.is_empty() {
            let _ = fs::remove_file(&path);
        } else {
            state.entries.retain(|e| failed_ids.contains(&e.id));
            let mut kept = serde_json::to_value(&state)?;
            kept["entries"].as_array_mut().expect("entries").extend(unreadable);
            write_atomic(&path, &serde_json::to_vec_pretty(&kept)?)?;
        }
    }
    Ok(report)
}

/// A state file read as far as it goes.
struct Salvaged {
    state: StateFile,
    /// Entries that are JSON but not a resource this isobench knows (edited by hand, or written
    /// by another version): kept in the file for a human.
    unreadable: Vec<serde_json::Value>,
    cut_short: bool,
}

/// Reads a state file; one that is damaged (written atomically, so only by a disk or a hand)
/// still gives its owner and every entry that reads whole, so that those are released.
fn read_state(text: &str, path: &Path) -> Option<Salvaged> {
    if let Ok(state) = serde_json::from_str::<StateFile>(text) {
        return Some(Salvaged { state, unreadable: Vec::new(), cut_short: false });
    }
    let number = |key: &str| -> Option<u64> {
        let (_, rest) = text.split_once(&format!("\"{key}\""))?;
        let rest = rest.trim_start().strip_prefix(':')?.trim_start();
        rest[..rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())].parse().ok()
    };
    let pid = u32::try_from(number("pid")?).ok()?;
    let start_time = number("start_time")?;
    let token = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let (mut entries, mut unreadable, mut cut_short) = (Vec::new(), Vec::new(), true);
    if let Some((_, list)) = text.split_once("\"entries\"").and_then(|(_, rest)| rest.split_once('[')) {
        let mut rest = list;
        loop {
            rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',');
            if rest.starts_with(']') {
                cut_short = false;
                break;
            }
            let mut values = serde_json::Deserializer::from_str(rest).into_iter::<serde_json::Value>();
            let Some(Ok(value)) = values.next() else { break };
            rest = &rest[values.byte_offset()..];
            match serde_json::from_value::<Entry>(value.clone()) {
                Ok(entry) => entries.push(entry),
                Err(_) => unreadable.push(value),
            }
        }
    }
    Some(Salvaged { state: StateFile { pid, start_time, token, entries }, unreadable, cut_short })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text of a state file of a process that is gone, naming the files `names` (made under
    /// `dir`) and then `more` as it stands; and where it goes.
    fn state_of_a_dead_run(dir: &Path, names: &[&str], more: &str) -> (PathBuf, String) {
        let entries: Vec<String> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let path = dir.join(n);
                fs::write(&path, "x").unwrap();
                format!(r#"{{"id": {i}, "resource": {{"kind": "file", "path": "{}"}}}}"#, path.display())
            })
            .collect();
        let state = dir.join("state");
        fs::create_dir_all(&state).unwrap();
        // No process has this pid (pid_max is at most 2^22).
        let text =
            format!(r#"{{"pid": 4294967295, "start_time": 1, "token": "t", "entries": [{}{more}"#, entries.join(", "));
        (state.join("4294967295-1.json"), text)
    }

    #[test]
    fn a_state_file_cut_short_still_releases_every_entry_it_holds_whole() {
        let dir = tempfile::tempdir().unwrap();
        let (path, text) =
            state_of_a_dead_run(dir.path(), &["a", "b"], r#", {"id": 9, "resource": {"kind": "mount", "tar"#);
        fs::write(&path, text).unwrap();
        // What a writer killed between its write and its rename leaves beside it.
        let partial = path.with_file_name(".4294967295-1.json.tmp-4294967295");
        fs::write(&partial, "{").unwrap();
        let report = cleanup(dir.path()).unwrap();
        assert_eq!(report.released.len(), 3, "{report:?}");
        assert!(!dir.path().join("a").exists() && !dir.path().join("b").exists() && !partial.exists());
        assert!(report.failed.iter().any(|f| f.contains("cut short")), "{report:?}");
        assert!(!path.exists(), "nothing more can be read from it");
        let again = cleanup(dir.path()).unwrap();
        assert!(again.released.is_empty() && again.failed.is_empty(), "{again:?}");
    }

    #[test]
    fn an_entry_cleanup_cannot_read_is_kept_for_a_human_and_the_rest_released() {
        let dir = tempfile::tempdir().unwrap();
        let (path, text) = state_of_a_dead_run(dir.path(), &["a"], r#", {"id": 7, "resource": {"kind": "warp"}}]}"#);
        fs::write(&path, text).unwrap();
        let report = cleanup(dir.path()).unwrap();
        assert_eq!(report.released.len(), 1, "{report:?}");
        assert!(!dir.path().join("a").exists());
        assert!(report.failed.iter().any(|f| f.contains("cannot read") && f.contains("warp")), "{report:?}");
        let kept: serde_json::Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(kept["entries"].as_array().unwrap().len(), 1, "{kept}");
        assert_eq!(kept["entries"][0]["resource"]["kind"], "warp");
        // Idempotent: the next cleanup says the same and releases nothing more.
        let again = cleanup(dir.path()).unwrap();
        assert!(again.released.is_empty() && again.failed.len() == 1, "{again:?}");
        fs::write(&path, "garbage").unwrap();
        let garbage = cleanup(dir.path()).unwrap();
        assert!(garbage.failed[0].contains("not a state file"), "{garbage:?}");
    }
}
