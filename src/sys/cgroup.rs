//! A cgroup of isobench's own around one sandbox, for its CPU: every process started in it and
//! every process those start is charged to it, whoever reaps them (gVisor's systrap stubs are
//! reaped by no process isobench waits on, so `getrusage` never sees their CPU). cgroup v1's
//! `cpuacct` hierarchy where it is mounted, else the v2 hierarchy, whose `cpu.stat` every
//! cgroup has without any controller enabled. Both keep counting what a removed child used.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use super::{ProcessCpu, clock_ticks, process_cpu};

/// One cgroup isobench made for a sandbox, under this process's own.
#[derive(Clone, Debug)]
pub struct CpuGroup {
    dir: PathBuf,
    /// Its path from the hierarchy's root, as a runtime's `cgroupsPath` names a cgroup.
    relative: PathBuf,
    version: Version,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Version {
    V1,
    V2,
}

impl CpuGroup {
    /// Where `name` goes, under this process's cgroup (made by `create`, once the ledger has
    /// it); None where no hierarchy counts CPU.
    pub fn locate(name: &str) -> Option<CpuGroup> {
        let (hierarchy, own) = own_cgroup()?;
        Some(CpuGroup::in_hierarchy(hierarchy, own.join(name)))
    }

    /// The cgroup at `relative` from the hierarchy's root, whoever made it.
    pub fn at(relative: &Path) -> Option<CpuGroup> {
        let (hierarchy, _) = own_cgroup()?;
        Some(CpuGroup::in_hierarchy(hierarchy, relative.to_path_buf()))
    }

    fn in_hierarchy((mount, version): (PathBuf, Version), relative: PathBuf) -> CpuGroup {
        let dir = mount.join(relative.strip_prefix("/").unwrap_or(&relative));
        CpuGroup { dir, relative, version }
    }

    pub fn create(&self) -> Result<()> {
        std::fs::create_dir(&self.dir).with_context(|| format!("making the cgroup {}", self.dir.display()))?;
        if self.version == Version::V1 {
            hand_down_cpuset(&self.relative)?;
        }
        Ok(())
    }

    /// Whether runtimes can be told to make their container's cgroup below this one: v1,
    /// where each controller is a hierarchy of its own. (On v2 a runtime enables controllers
    /// along the path, which this group's own processes forbid.)
    pub fn nests_runtimes() -> bool {
        own_cgroup().is_some_and(|((_, version), _)| version == Version::V1)
    }

    /// Its path from the hierarchies' root (what `remove_cgroup` takes).
    pub fn relative(&self) -> &Path {
        &self.relative
    }

    /// A runtime's `cgroupsPath` for a container `id` below this group.
    pub fn runtime_path(&self, id: &str) -> String {
        self.relative.join(id).display().to_string()
    }

    /// `cmd` starts inside this cgroup: it joins before it runs its program, so that nothing it
    /// forks is outside.
    pub fn start_in(&self, cmd: &mut Command) {
        use std::os::unix::ffi::OsStrExt;
        let procs = std::ffi::CString::new(self.dir.join("cgroup.procs").as_os_str().as_bytes())
            .expect("a cgroup path has no NUL");
        // SAFETY: open, write and close are async-signal-safe; the path was built before the
        // fork, so nothing is allocated after it.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                let error = std::io::Error::last_os_error();
                libc::close(fd);
                if written == 1 { Ok(()) } else { Err(error) }
            });
        }
    }

    /// CPU seconds used so far on each CPU, as `cpu_s` counts them (cgroup v1's cpuacct only:
    /// v2 keeps no count per CPU).
    pub fn cpu_s_per_cpu(&self) -> Option<Vec<f64>> {
        match self.version {
            Version::V1 => Some(
                read(&self.dir.join("cpuacct.usage_percpu"))?
                    .split_whitespace()
                    .map(|ns| ns.parse::<f64>().map(|ns| ns / 1e9))
                    .collect::<Result<_, _>>()
                    .ok()?,
            ),
            Version::V2 => None,
        }
    }

    /// CPU seconds used by everything that has run in it and below it, removed cgroups
    /// included; readable while its processes run.
    pub fn cpu_s(&self) -> Option<f64> {
        match self.version {
            Version::V1 => read(&self.dir.join("cpuacct.usage"))?.trim().parse::<f64>().ok().map(|ns| ns / 1e9),
            Version::V2 => {
                let stat = read(&self.dir.join("cpu.stat"))?;
                let usec = stat.lines().find_map(|l| l.strip_prefix("usage_usec "))?;
                usec.trim().parse::<f64>().ok().map(|us| us / 1e6)
            }
        }
    }

    /// The processes in it and in the cgroups below it, now.
    pub fn processes(&self) -> Vec<ProcessCpu> {
        let ticks = clock_ticks();
        let mut dirs = vec![self.dir.clone()];
        let mut out = Vec::new();
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            dirs.extend(entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            let pids = read(&dir.join("cgroup.procs")).unwrap_or_default();
            out.extend(pids.lines().filter_map(|pid| process_cpu(pid.trim().parse().ok()?, ticks)));
        }
        out
    }
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn mountinfo() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default()
}

/// The hierarchy that counts CPU and this process's cgroup in it.
fn own_cgroup() -> Option<((PathBuf, Version), PathBuf)> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    hierarchy(&mountinfo(), &own)
}

/// Every cgroup mount: (mount point, filesystem type, super options).
fn cgroup_mounts(mountinfo: &str) -> Vec<(PathBuf, &str, &str)> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let mount_point = left.split_whitespace().nth(4)?;
            let mut right = right.split_whitespace();
            let fstype = right.next()?;
            let options = right.nth(1)?;
            fstype.starts_with("cgroup").then(|| (PathBuf::from(mount_point), fstype, options))
        })
        .collect()
}

/// v1's `cpuacct` hierarchy where it is mounted (also on hybrid machines, where runtimes use
/// v1), else v2's; with this process's path in it.
fn hierarchy(mountinfo: &str, own: &str) -> Option<((PathBuf, Version), PathBuf)> {
    let mounts = cgroup_mounts(mountinfo);
    let v1 =
        mounts.iter().find(|(_, fstype, options)| *fstype == "cgroup" && options.split(',').any(|o| o == "cpuacct"));
    if let Some((mount_point, _, _)) = v1 {
        let path = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "cpuacct").then_some(path)
        })?;
        return Some(((mount_point.clone(), Version::V1), PathBuf::from(path)));
    }
    let (mount_point, _, _) = mounts.iter().find(|(_, fstype, _)| *fstype == "cgroup2")?;
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(((mount_point.clone(), Version::V2), PathBuf::from(path)))
}

/// A runtime told to nest its container below a v1 group makes the container's cgroup in every
/// controller, cpuset's too, where a new cgroup has no CPUs until given some. runc fills an
/// empty parent from its own parent; gVisor does not, and cannot set a container's CPUs under
/// an empty parent. So the group's cpuset cgroup is made first, with its parent's CPUs and
/// memory nodes, and hands them down to the cgroups made below it (`cgroup.clone_children`).
fn hand_down_cpuset(relative: &Path) -> Result<()> {
    let mountinfo = mountinfo();
    let mounts = cgroup_mounts(&mountinfo);
    let cpuset =
        mounts.iter().find(|(_, fstype, options)| *fstype == "cgroup" && options.split(',').any(|o| o == "cpuset"));
    let Some((mount_point, _, _)) = cpuset else { return Ok(()) };
    let mut dir = mount_point.clone();
    for part in relative.strip_prefix("/").unwrap_or(relative).components() {
        let parent = dir.clone();
        dir.push(part);
        if dir.exists() {
            continue;
        }
        std::fs::create_dir(&dir).with_context(|| format!("making the cgroup {}", dir.display()))?;
        for file in ["cpuset.cpus", "cpuset.mems", "cgroup.clone_children"] {
            let value =
                if file == "cgroup.clone_children" { "1".into() } else { read(&parent.join(file)).unwrap_or_default() };
            std::fs::write(dir.join(file), value.trim())
                .with_context(|| format!("writing {}", dir.join(file).display()))?;
        }
    }
    Ok(())
}

/// Removes a cgroup isobench made, named from the hierarchies' root, from every hierarchy: a
/// runtime told to nest its container below it makes it in each v1 controller it uses, and
/// removes only its own.
pub fn remove_cgroup(relative: &Path) -> Result<()> {
    let relative = relative.strip_prefix("/").unwrap_or(relative);
    for (mount_point, _, _) in cgroup_mounts(&mountinfo()) {
        remove_tree(&mount_point.join(relative))?;
    }
    Ok(())
}

/// A cgroup's children first, then itself, once its processes are gone (`rmdir` is the only
/// way a cgroup goes).
fn remove_tree(dir: &Path) -> Result<()> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&entry.path())?;
        }
    }
    // A process killed a moment ago is charged to its cgroup until it is reaped.
    let mut attempts = 0;
    loop {
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && attempts < 20 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing the cgroup {}", dir.display()));
            }
            _ => return Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn v1_cpuacct_is_preferred_and_the_path_is_this_processs() {
        let own = "4:memory:/limited\n2:cpuacct:/jobs/a\n0::/\n";
        let cpuacct = (PathBuf::from("/sys/fs/cgroup/cpuacct"), Version::V1);
        assert_eq!(hierarchy(HYBRID, own), Some((cpuacct.clone(), PathBuf::from("/jobs/a"))));
        let joined = HYBRID.replace("rw,cpuacct", "rw,cpu,cpuacct");
        let own = "1:cpu,cpuacct:/\n";
        assert_eq!(hierarchy(&joined, own), Some((cpuacct, PathBuf::from("/"))));
    }

    #[test]
    fn v2_alone_is_used_from_this_processs_cgroup() {
        let unified = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
        let own = "0::/user.slice/session-1.scope\n";
        assert_eq!(
            hierarchy(unified, own),
            Some(((PathBuf::from("/sys/fs/cgroup"), Version::V2), PathBuf::from("/user.slice/session-1.scope")))
        );
        assert_eq!(hierarchy("", own), None);
    }
}
