//! Counters read before and after a run, their difference recorded: what processes used
//! (getrusage: CPU, context switches, page faults) and what a block device did
//! (/proc/diskstats). Reading them costs two system calls or one small file per run, nothing
//! while the workload runs.

use std::path::Path;

use nix::sys::resource::{UsageWho, getrusage};

/// CPU and scheduling figures of some processes, as the kernel (or a sandbox's kernel) counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Usage {
    /// User plus system CPU time, in seconds.
    pub cpu_s: f64,
    /// Voluntary and involuntary context switches.
    pub switches: f64,
    pub minor_faults: f64,
    pub major_faults: f64,
}

impl Usage {
    /// This process and the children it has reaped: the agent and its workload's processes.
    pub fn own_and_children() -> Usage {
        Usage::of(UsageWho::RUSAGE_SELF).plus(&Usage::of(UsageWho::RUSAGE_CHILDREN))
    }

    /// This process alone: a load generator running in it.
    pub fn own() -> Usage {
        Usage::of(UsageWho::RUSAGE_SELF)
    }

    /// The children this process has reaped, with everything they reaped in turn: every
    /// process that hosted a sandbox isobench started in the foreground, once it exited.
    pub fn children() -> Usage {
        Usage::of(UsageWho::RUSAGE_CHILDREN)
    }

    fn of(who: UsageWho) -> Usage {
        let Ok(u) = getrusage(who) else { return Usage::default() };
        let seconds = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
        Usage {
            cpu_s: seconds(u.user_time()) + seconds(u.system_time()),
            switches: (u.voluntary_context_switches() + u.involuntary_context_switches()) as f64,
            minor_faults: u.minor_page_faults() as f64,
            major_faults: u.major_page_faults() as f64,
        }
    }

    fn plus(&self, other: &Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s + other.cpu_s,
            switches: self.switches + other.switches,
            minor_faults: self.minor_faults + other.minor_faults,
            major_faults: self.major_faults + other.major_faults,
        }
    }

    /// What was used since `before` was read.
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            cpu_s: self.cpu_s - before.cpu_s,
            switches: self.switches - before.switches,
            minor_faults: self.minor_faults - before.minor_faults,
            major_faults: self.major_faults - before.major_faults,
        }
    }
}

/// A live process, with the CPU it used itself (its reaped children's not added).
#[derive(Clone, Debug, PartialEq)]
pub struct ProcessCpu {
    pub pid: i32,
    pub parent: i32,
    pub cpu_s: f64,
    /// The file name of its argv[0] (gVisor's `runsc-sandbox`, `runsc-gofer`), not its comm,
    /// which runsc's processes all leave as `exe`.
    pub name: String,
    /// Its command line was empty, and `name` is its comm: a zombie, or a process on its way
    /// out (a Go program's first thread, gone while the others still exit, has no memory left).
    pub named_by_comm: bool,
}

impl ProcessCpu {
    /// This later reading of the process, with the name an earlier one read from its command
    /// line, if this one could not: a sentry read on its way out is `exe`, not `runsc-sandbox`,
    /// and its samples would be taken for the workload's.
    pub fn after(mut self, earlier: Option<&ProcessCpu>) -> ProcessCpu {
        if let Some(earlier) = earlier.filter(|e| self.named_by_comm && !e.named_by_comm) {
            self.name.clone_from(&earlier.name);
            self.named_by_comm = false;
        }
        self
    }
}

/// The process's parent and CPU from /proc/PID/stat, its name from its command line.
pub fn process_cpu(pid: i32, ticks: f64) -> Option<ProcessCpu> {
    let stat = super::ProcStat::read(pid)?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = String::from_utf8_lossy(cmdline.split(|b| *b == 0).next().unwrap_or_default()).into_owned();
    let mut name = argv0.rsplit('/').next().unwrap_or_default().to_string();
    // An empty command line (a zombie, a process that cleared it) named nothing in the why
    // ("runsc-sandbox 50%,  50%"): its comm then (`exe` for gVisor's re-executed runsc).
    let named_by_comm = name.is_empty();
    if named_by_comm {
        name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default().trim().to_string();
    }
    if name.is_empty() {
        name = format!("pid {pid}");
    }
    Some(ProcessCpu { pid, parent: stat.parent()?, cpu_s: stat.cpu_ticks()? as f64 / ticks, name, named_by_comm })
}

/// The kernel's clock ticks per second, the unit of /proc/PID/stat's times.
pub fn clock_ticks() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64
}

/// CPU seconds the hypervisor has taken from this machine's CPUs so far (/proc/stat's steal),
/// all CPUs together; None on a machine that does not say.
pub fn stolen_cpu_s() -> Option<f64> {
    Some(*machine_cpu_ticks().get(7)? as f64 / clock_ticks())
}

/// The machine's CPU time so far by kind, in clock ticks: /proc/stat's first line (user nice
/// system idle iowait irq softirq steal …); empty where it cannot be read.
pub fn machine_cpu_ticks() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines().next().unwrap_or("").split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect()
}

/// CPU seconds used so far by the live processes named `names` (argv[0]'s file name) marked
/// with a token starting `token_prefix`: a run's volume daemons (nbdkit, qemu-storage-daemon),
/// their threads included.
pub fn named_processes_cpu(token_prefix: &str, names: &[&str]) -> Option<f64> {
    let ticks = clock_ticks();
    let mark = format!("{}={token_prefix}", super::TOKEN_VAR);
    let found: Vec<f64> = super::pids_whose_env(|kv| kv.starts_with(mark.as_bytes()))
        .into_iter()
        .filter_map(|pid| process_cpu(pid, ticks))
        .filter(|p| names.contains(&p.name.as_str()))
        .map(|p| p.cpu_s)
        .collect();
    (!found.is_empty()).then(|| found.iter().sum())
}

/// A block device's cumulative I/O, as /proc/diskstats has it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskCounters {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Time the device had I/O in flight, in milliseconds.
    pub busy_ms: u64,
}

/// diskstats counts in 512-byte sectors whatever the device's own sector size.
const SECTOR: u64 = 512;

impl DiskCounters {
    pub fn read(device: (u32, u32)) -> Option<DiskCounters> {
        DiskCounters::parse(&std::fs::read_to_string("/proc/diskstats").ok()?, device)
    }

    /// The line of `device` (major, minor) in diskstats' text.
    pub fn parse(text: &str, (major, minor): (u32, u32)) -> Option<DiskCounters> {
        text.lines().find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 13 || f[0].parse() != Ok(major) || f[1].parse() != Ok(minor) {
                return None;
            }
            let n = |i: usize| f[i].parse::<u64>().ok();
            Some(DiskCounters {
                reads: n(3)?,
                read_bytes: n(5)? * SECTOR,
                writes: n(7)?,
                write_bytes: n(9)? * SECTOR,
                busy_ms: n(12)?,
            })
        })
    }

    pub fn since(&self, before: &DiskCounters) -> DiskCounters {
        DiskCounters {
            reads: self.reads.saturating_sub(before.reads),
            read_bytes: self.read_bytes.saturating_sub(before.read_bytes),
            writes: self.writes.saturating_sub(before.writes),
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
            busy_ms: self.busy_ms.saturating_sub(before.busy_ms),
        }
    }
}

/// The block device (major, minor) under `path`: the device itself when `path` is a device
/// node, else the one its filesystem is on. None for filesystems without one (tmpfs, overlay).
pub fn device_under(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let meta = std::fs::metadata(path).ok()?;
    let dev = if meta.file_type().is_block_device() { meta.rdev() } else { meta.dev() };
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    (major != 0).then_some((major, minor))
}

/// The kernel's name of a device ("loop3", "sda1"), for saying which device was counted.
pub fn device_name((major, minor): (u32, u32)) -> Option<String> {
    let link = std::fs::read_link(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    Some(link.file_name()?.to_string_lossy().into_owned())
}

/// The sysfs directory of the disk that finally holds `path` (see `disk_behind`).
pub fn disk_dir_behind(path: &Path) -> Option<std::path::PathBuf> {
    let mut device = device_under(path)?;
    // A loop device's file is on another device, possibly another loop device's.
    for _ in 0..8 {
        let name = device_name(device)?;
        let Ok(backing) = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")) else { break };
        device = device_under(Path::new(backing.trim()))?;
    }
    let sys = std::fs::canonicalize(format!("/sys/dev/block/{}:{}", device.0, device.1)).ok()?;
    Some(if sys.join("partition").exists() { sys.parent()?.to_path_buf() } else { sys })
}

/// The disk that finally holds `path`, through loop devices to their backing files' disks and
/// from a partition to its disk: "vda (256 GiB, virtio_blk, not rotational)". None where no disk
/// does (tmpfs, a network filesystem).
pub fn disk_behind(path: &Path) -> Option<String> {
    let disk = disk_dir_behind(path)?;
    let read = |file: &str| std::fs::read_to_string(disk.join(file)).ok().map(|v| v.trim().to_string());
    let mut said = Vec::new();
    if let Some(sectors) = read("size").and_then(|s| s.parse::<u64>().ok()) {
        said.push(format!("{:.0} GiB", sectors as f64 * 512.0 / f64::from(1u32 << 30)));
    }
    let driver = std::fs::read_link(disk.join("device/driver"))
        .ok()
        .and_then(|d| Some(d.file_name()?.to_string_lossy().into_owned()));
    said.extend(read("device/model").filter(|m| !m.is_empty()).or(driver));
    said.extend(read("queue/rotational").map(|r| if r == "1" { "rotational" } else { "not rotational" }.to_string()));
    Some(format!("{} ({})", disk.file_name()?.to_string_lossy(), said.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_from_proc() {
        let me = process_cpu(std::process::id() as i32, 100.0).unwrap();
        assert_eq!(me.parent, nix::unistd::getppid().as_raw());
        assert!(me.cpu_s >= 0.0);
        assert!(!me.name.is_empty() && !me.name.contains('/'), "{}", me.name);
    }

    #[test]
    fn a_process_read_on_its_way_out_keeps_the_name_it_ran_as() {
        let mut child = std::process::Command::new("sleep").arg("0").spawn().unwrap();
        let pid = child.id() as i32;
        let running = ProcessCpu { pid, parent: 1, cpu_s: 0.0, name: "runsc-sandbox".into(), named_by_comm: false };
        // Exited and not yet waited for: a zombie, whose command line is gone.
        let zombie = crate::sys::Wait::new("sleep 0 to exit", std::time::Duration::from_secs(10))
            .until(|| {
                let read = process_cpu(pid, 100.0).unwrap();
                Ok(if read.named_by_comm {
                    crate::sys::Check::Done(read)
                } else {
                    crate::sys::Check::NotYet(String::new())
                })
            })
            .unwrap();
        child.wait().unwrap();
        assert_eq!(zombie.name, "sleep");
        let later = zombie.clone().after(Some(&running));
        assert_eq!((later.name.as_str(), later.named_by_comm, later.cpu_s), ("runsc-sandbox", false, zombie.cpu_s));
        assert_eq!(zombie.clone().after(None).name, "sleep");
        let execed = ProcessCpu { name: "runsc-gofer".into(), ..running.clone() };
        assert_eq!(execed.after(Some(&running)).name, "runsc-gofer", "a command line read later wins");
    }

    #[test]
    fn a_devices_line_is_read_in_bytes_and_busy_time() {
        let text = "   7       3 loop3 120 0 2048 31 4000 10 65536 900 0 1500 931 0 0 0 0 0 0\n\
                    8       0 sda 5 0 8 1 2 0 16 1 0 3 2 0 0 0 0 0 0\n";
        let loop3 = DiskCounters::parse(text, (7, 3)).unwrap();
        assert_eq!(
            loop3,
            DiskCounters { reads: 120, read_bytes: 2048 * 512, writes: 4000, write_bytes: 65536 * 512, busy_ms: 1500 }
        );
        assert_eq!(DiskCounters::parse(text, (7, 30)), None, "minor 30 is not minor 3");
        let later = DiskCounters { writes: 4100, write_bytes: 70000 * 512, ..loop3 };
        assert_eq!(later.since(&loop3).write_bytes, (70000 - 65536) * 512);
    }

    /// This process's CPU as /proc/self/stat counts it, in seconds: an independent reading.
    fn proc_cpu() -> f64 {
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap().split_whitespace().collect();
        let ticks = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
        ticks / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).unwrap().unwrap() as f64
    }

    #[test]
    fn this_processs_cpu_is_what_the_kernel_counts_and_tmpfs_has_no_device() {
        let (before, proc_before) = (Usage::own_and_children(), proc_cpu());
        let mut x = 0u64;
        let start = std::time::Instant::now();
        // Until the kernel has counted 0.3 s of this thread's CPU, however busy the machine is.
        while proc_cpu() - proc_before < 0.3 && start.elapsed() < std::time::Duration::from_secs(30) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let (used, proc_used) = (Usage::own_and_children().since(&before).cpu_s, proc_cpu() - proc_before);
        assert!(proc_used >= 0.3, "the loop never got 0.3 s of CPU");
        assert!((used - proc_used).abs() < 0.05, "getrusage says {used} s, /proc/self/stat {proc_used} s");
        assert_eq!(device_under(Path::new("/dev/shm")), None);
        assert_eq!(device_under(Path::new("/proc")), None);
    }
}
