//! Sets of CPUs in the kernel's list syntax ("0-3,6"): where a sandbox or the load generator
//! may run. A set is applied as an affinity (a process's before it runs its program, or the
//! calling thread's), which every process and thread started afterwards inherits, and read back
//! from /proc, where the kernel says what a task is allowed.

use std::collections::BTreeSet;
use std::os::unix::process::CommandExt;
use std::process::Command;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(BTreeSet<usize>);

impl CpuSet {
    /// "1", "0-3", "0,2-3": the kernel's list syntax (cpuset.cpus, Cpus_allowed_list, taskset -c).
    pub fn parse(text: &str) -> Result<CpuSet, String> {
        let example = "write CPU numbers and ranges, e.g. \"1\", \"2-3\" or \"0,2-3\"";
        let mut cpus = BTreeSet::new();
        for part in text.split(',').map(str::trim) {
            let number =
                |s: &str| s.trim().parse::<usize>().map_err(|_| format!("\"{text}\" is not a list of CPUs: {example}"));
            let (first, last) = match part.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None => (number(part)?, number(part)?),
            };
            if last < first {
                return Err(format!("\"{text}\": the range {part} runs backwards; write it low-high"));
            }
            // Far beyond any machine: a typo, not a CPU (and no range to walk for minutes).
            if last >= 1 << 16 {
                return Err(format!("\"{text}\": CPU {last} is beyond any machine's numbering"));
            }
            cpus.extend(first..=last);
        }
        Ok(CpuSet(cpus))
    }

    pub fn from_cpus(cpus: impl IntoIterator<Item = usize>) -> CpuSet {
        CpuSet(cpus.into_iter().collect())
    }

    /// The CPUs isobench itself may run on: what it can hand out (all of the machine's online
    /// CPUs, unless isobench was started pinned).
    pub fn available() -> CpuSet {
        CpuSet::of_thread().filter(|s| !s.is_empty()).unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            CpuSet::from_cpus(0..n)
        })
    }

    /// The calling thread's affinity.
    pub fn of_thread() -> Option<CpuSet> {
        // SAFETY: a zeroed cpu_set_t is a valid empty set, and sched_getaffinity writes at most
        // its size into it.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut mask) };
        (got == 0).then(|| {
            CpuSet::from_cpus((0..libc::CPU_SETSIZE as usize).filter(|c| unsafe { libc::CPU_ISSET(*c, &mask) }))
        })
    }

    /// What the kernel allows a process (its main thread): `Cpus_allowed_list` in its status.
    pub fn of_task(status_path: &std::path::Path) -> Option<CpuSet> {
        let status = std::fs::read_to_string(status_path).ok()?;
        let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
        CpuSet::parse(list.trim()).ok()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn cpus(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }

    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.0.is_subset(&other.0)
    }

    pub fn overlap(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.intersection(&other.0).copied().collect())
    }

    pub fn union(&self, other: &CpuSet) -> CpuSet {
        CpuSet(self.0.union(&other.0).copied().collect())
    }

    /// The lower and the upper half (the upper one the larger when the count is odd), or None
    /// for a single CPU, which cannot be shared out.
    pub fn halves(&self) -> Option<(CpuSet, CpuSet)> {
        let n = self.0.len();
        (n >= 2).then(|| {
            let lower = n / 2;
            (CpuSet(self.0.iter().take(lower).copied().collect()), CpuSet(self.0.iter().skip(lower).copied().collect()))
        })
    }

    fn mask(&self) -> libc::cpu_set_t {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET stays within CPU_SETSIZE.
        let mut mask: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in self.0.iter().filter(|c| **c < libc::CPU_SETSIZE as usize) {
            unsafe { libc::CPU_SET(*cpu, &mut mask) };
        }
        mask
    }

    /// Pins the calling thread: the threads and processes it starts from now on inherit the set.
    pub fn pin_this_thread(&self) -> std::io::Result<()> {
        let mask = self.mask();
        // SAFETY: the mask is a valid cpu_set_t of the size given.
        match unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    }

    /// Moves every thread of the processes `pids` lists to this set, pass after pass until one
    /// moves none (a thread started meanwhile inherits the set of the one that started it, which
    /// may not have been moved yet); returns the threads moved. Threads and processes that end
    /// meanwhile are no error.
    pub fn move_threads(&self, pids: &dyn Fn() -> Vec<i32>) -> std::io::Result<usize> {
        let mask = self.mask();
        let mut moved = 0;
        for _ in 0..MOVE_PASSES {
            let mut this_pass = 0;
            for pid in pids() {
                let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).into_iter().flatten().flatten();
                for tid in tasks.filter_map(|t| t.file_name().to_str()?.parse::<i32>().ok()) {
                    if CpuSet::of_task(std::path::Path::new(&format!("/proc/{pid}/task/{tid}/status"))).as_ref()
                        == Some(self)
                    {
                        continue;
                    }
                    // SAFETY: the mask is a valid cpu_set_t of the size given.
                    match unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mask) } {
                        0 => this_pass += 1,
                        _ if std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) => {}
                        _ => return Err(std::io::Error::last_os_error()),
                    }
                }
            }
            moved += this_pass;
            if this_pass == 0 {
                return Ok(moved);
            }
        }
        Err(std::io::Error::other(format!("threads still appeared outside CPUs {self} after {MOVE_PASSES} passes")))
    }

    /// `cmd` runs its program pinned to this set: the affinity is set between its fork and its
    /// exec, so that nothing it starts runs elsewhere.
    pub fn start_in(&self, cmd: &mut Command) {
        let mask = self.mask();
        // SAFETY: sched_setaffinity is a plain system call, async-signal-safe; the mask was
        // built before the fork.
        unsafe {
            cmd.pre_exec(move || match libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mask) {
                0 => Ok(()),
                _ => Err(std::io::Error::last_os_error()),
            });
        }
    }
}

/// Passes `move_threads` makes before it gives up on threads that keep appearing.
const MOVE_PASSES: usize = 10;

impl std::fmt::Display for CpuSet {
    /// The kernel's list syntax, ranges joined: "0-2,5".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let mut cpus = self.0.iter().copied().peekable();
        while let Some(first) = cpus.next() {
            let mut last = first;
            while cpus.peek() == Some(&(last + 1)) {
                last = cpus.next().expect("peeked");
            }
            parts.push(if first == last { first.to_string() } else { format!("{first}-{last}") });
        }
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_print_and_halve_as_the_kernel_writes_them() {
        let set = CpuSet::parse("0, 2-4,7").unwrap();
        assert_eq!(set.len(), 5);
        assert_eq!(set.to_string(), "0,2-4,7");
        assert_eq!(CpuSet::parse("3").unwrap().to_string(), "3");
        let (lower, upper) = CpuSet::parse("0-1").unwrap().halves().unwrap();
        assert_eq!((lower.to_string(), upper.to_string()), ("0".into(), "1".into()));
        let (lower, upper) = CpuSet::parse("0-2").unwrap().halves().unwrap();
        assert_eq!((lower.to_string(), upper.to_string()), ("0".into(), "1-2".into()), "the upper half the larger");
        assert!(CpuSet::parse("5").unwrap().halves().is_none());
        for bad in ["", "a", "1-", "3-1", "-2", "1,,2", "99999"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad:?}");
        }
        assert!(CpuSet::parse("0-1").unwrap().overlap(&CpuSet::parse("1-2").unwrap()).to_string() == "1");
    }

    #[test]
    fn a_pinned_thread_reads_back_its_set_and_its_children_inherit_it() {
        let available = CpuSet::available();
        let one = CpuSet::from_cpus(available.cpus().last());
        let (set, child) = std::thread::spawn(move || {
            one.pin_this_thread().unwrap();
            let inherited = std::thread::spawn(CpuSet::of_thread).join().unwrap();
            (CpuSet::of_thread(), inherited)
        })
        .join()
        .unwrap();
        let want = Some(CpuSet::from_cpus(available.cpus().last()));
        assert_eq!(set, want);
        assert_eq!(child, want, "a thread started by a pinned thread inherits its set");
        let mut cat = Command::new("cat");
        cat.arg("/proc/self/status");
        CpuSet::from_cpus(available.cpus().last()).start_in(&mut cat);
        let status = String::from_utf8(cat.output().unwrap().stdout).unwrap();
        let listed = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap().trim();
        assert_eq!(CpuSet::parse(listed).ok(), want, "a command started in the set runs in it");
    }

    /// Every thread of a running process moves, and moving again moves nothing.
    #[test]
    fn a_running_process_is_moved_thread_by_thread() {
        let one = CpuSet::from_cpus(CpuSet::available().cpus().last());
        // python3's threads, waiting: several threads in one process.
        let mut child = Command::new("python3")
            .args(["-c", "import threading,time\nfor _ in range(3): threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\nprint('up', flush=True)\ntime.sleep(30)"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut up = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut up).unwrap();
        let pid = child.id() as i32;
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().count();
        assert_eq!(threads, 4);
        let moved = one.move_threads(&|| vec![pid]).unwrap();
        let again = one.move_threads(&|| vec![pid, 999_999_999]).unwrap();
        let sets: Vec<Option<CpuSet>> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .map(|t| CpuSet::of_task(&t.path().join("status")))
            .collect();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(moved, if CpuSet::available() == one { 0 } else { 4 });
        assert_eq!(again, 0, "a process that is gone is no error, and nothing is left to move");
        assert!(sets.iter().all(|s| s.as_ref() == Some(&one)), "{sets:?}");
    }
}
