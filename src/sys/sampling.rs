//! Where a sandbox's CPU went, sampled: `perf record` on every CPU's clock (`cpu-clock`, the
//! one event a machine without a PMU has) with frame-pointer call chains while a run's
//! measured window lasts, read back by `perf script` as samples, each with its thread, the
//! CPU time it stands for, and its frames. Every CPU, not the sandbox's processes: a process
//! the sandbox starts later (a stub, a helper) is sampled too, and the samples are kept by pid.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use super::perf::interrupt;

/// Samples per second per CPU: a few thousand samples in a window of seconds, at a cost the
/// workload does not see (bench/attribution-cost.sh measures it).
pub const SAMPLES_PER_SECOND: u32 = 250;

/// One sample: the thread the CPU ran and the call chain, the leaf first.
#[derive(Debug, Clone, PartialEq)]
pub struct StackSample {
    /// The thread's name (a JVM's, QEMU's "CPU 0/TCG").
    pub comm: String,
    pub pid: i32,
    pub tid: i32,
    /// When, in seconds of the machine's monotonic clock ([`monotonic_now`]).
    pub time_s: f64,
    /// The CPU time the sample stands for, in nanoseconds.
    pub period_ns: u64,
    pub frames: Vec<Frame>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    /// The address the CPU was at (or a caller returns to), in the process's address space.
    pub ip: u64,
    /// The function, or "[unknown]" where the binary or a JIT gave none.
    pub symbol: String,
    /// The object it is in as perf names it: a file, "[kernel.kallsyms]", "/tmp/perf-PID.map"
    /// for anonymous executable memory (a JIT's, gVisor's stub code), "[unknown]".
    pub dso: String,
}

impl Frame {
    /// In the host's kernel: its image and modules, or code it compiled (the BPF of a seccomp
    /// filter, which gVisor's stubs run at each system call), which perf knows no object of.
    pub fn kernel(&self) -> bool {
        self.dso.starts_with("[kernel") || (self.dso == "[unknown]" && self.ip >= KERNEL_SPACE)
    }

    /// At its address in the process, rather than at an offset in a file perf names: in memory
    /// no file backs, in gVisor's memory file, or where perf knew of no mapping.
    pub fn at_address(&self) -> bool {
        self.anonymous() || self.dso == "[unknown]" || self.dso.starts_with(MEMORY_FILE)
    }

    /// In executable memory no file backs (perf looks for a JIT's map of it).
    pub fn anonymous(&self) -> bool {
        self.dso.starts_with("/tmp/perf-") || self.dso == "//anon"
    }
}

impl StackSample {
    /// The CPU was in the host's kernel when sampled.
    pub fn in_kernel(&self) -> bool {
        self.frames.first().is_some_and(Frame::kernel)
    }
}

/// `perf record` running until `stop`.
pub struct PerfRecord {
    child: Option<Child>,
    data: PathBuf,
}

impl Drop for PerfRecord {
    /// A run that failed before `stop` stops its perf too, and leaves no data behind.
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = interrupt(child);
            let _ = std::fs::remove_file(&self.data);
        }
    }
}

impl PerfRecord {
    /// Starts sampling every CPU into `data`. Fails where perf is not installed or may not
    /// sample (`kernel.perf_event_paranoid` above 0 for a user other than root).
    pub fn machine(data: &Path, per_second: u32) -> Result<PerfRecord> {
        let mut cmd = Command::new("perf");
        // Without build ids, their cache and BPF's side band: each cost perf a second or a tenth
        // of a CPU-second at its start or end, whatever the window. Without the maps of the
        // processes already running, too (`--synth=no`: perf would read every one's from /proc
        // before it samples): the sandbox's processes start after it, and their maps are
        // recorded as they are made.
        cmd.args([
            "record",
            "--all-cpus",
            "--no-buildid",
            "--no-buildid-cache",
            "--no-bpf-event",
            "--quiet",
            "--synth=no",
        ])
        .args(["--clockid", "monotonic", "--event", "cpu-clock", "--call-graph", "fp", "--freq"])
        .arg(per_second.to_string())
        .arg("--output")
        .arg(data)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        // Its control FIFOs: perf answers a ping once it samples, which takes it a tenth of a
        // second or more (it first reads the kernel's symbols), a start not to miss.
        let fifos = [data.with_extension("ctl"), data.with_extension("ack")];
        for fifo in &fifos {
            let _ = std::fs::remove_file(fifo);
            nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR)
                .with_context(|| format!("making {}", fifo.display()))?;
        }
        cmd.arg("--control").arg(format!("fifo:{},{}", fifos[0].display(), fifos[1].display()));
        // In a group of its own, so that only `stop` interrupts it, and killed if isobench dies.
        super::prepare(&mut cmd, None);
        let spawned = cmd.spawn().context("cannot start perf (Debian's linux-perf package)");
        let mut record = PerfRecord { child: None, data: data.to_path_buf() };
        record.child = Some(spawned.inspect_err(|_| fifos.iter().for_each(|f| drop(std::fs::remove_file(f))))?);
        let started = record.wait_sampling(&fifos);
        fifos.iter().for_each(|f| drop(std::fs::remove_file(f)));
        started?;
        Ok(record)
    }

    /// Pings perf through its control FIFOs and waits for its answer.
    fn wait_sampling(&mut self, [ctl, ack]: &[PathBuf; 2]) -> Result<()> {
        use std::io::{Read, Write};
        use std::os::unix::fs::OpenOptionsExt;
        // Read and write, so that neither open waits for perf to open its end.
        let open = |path: &Path| {
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))
        };
        // Held open until the answer: a FIFO no one holds loses what was written to it.
        let mut ask = open(ctl)?;
        ask.write_all(b"ping\n")?;
        let mut answer = open(ack)?;
        let child = self.child.as_mut().expect("perf was started");
        let mut said = Vec::new();
        super::Wait::new("perf record to start sampling", std::time::Duration::from_secs(10))
            .every(std::time::Duration::from_millis(10))
            .until(|| {
                if let Some(status) = child.try_wait()? {
                    let mut err = String::new();
                    let _ = child.stderr.take().map(|mut e| e.read_to_string(&mut err));
                    bail!("perf record exited ({status}): {}", err.trim());
                }
                let mut buf = [0u8; 64];
                if let Ok(n) = answer.read(&mut buf) {
                    said.extend_from_slice(&buf[..n]);
                }
                Ok(if said.starts_with(b"ack") { super::Check::Done(()) } else { super::Check::NotYet(String::new()) })
            })
    }

    /// Stops sampling; the samples are read with [`Recorded::samples`].
    pub fn stop(mut self) -> Result<Recorded> {
        let out = interrupt(self.child.take().expect("perf runs until stopped"))?;
        let data = std::mem::take(&mut self.data);
        if !data.exists() {
            let said = String::from_utf8_lossy(&out.stderr);
            bail!("perf record wrote nothing ({}): {}", out.status, said.trim());
        }
        Ok(Recorded { data })
    }
}

/// What `perf record` wrote, removed when dropped.
pub struct Recorded {
    data: PathBuf,
}

impl Drop for Recorded {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.data);
    }
}

impl Recorded {
    /// The samples of `pids`, those between `window`'s two times ([`monotonic_now`]) only, if
    /// given. Their symbols are resolved now: call it once the sampled processes have ended, as
    /// perf looks for a live process's files in its own mount namespace (gVisor's sentry has its
    /// binary in none, and its frames would stay unknown).
    pub fn samples(&self, window: Option<(f64, f64)>, pids: &[i32]) -> Result<Vec<StackSample>> {
        if pids.is_empty() {
            return Ok(Vec::new());
        }
        // The sandbox's processes only: the symbols of every other program on the machine are
        // what makes perf script slow (seconds, between one run and the next).
        let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
        let kept = std::env::var_os("ISOBENCH_KEEP_SAMPLES");
        let mut script = Command::new("perf");
        script.args(["script", "--fields", "comm,pid,tid,time,period,ip,sym,dso"]);
        script.args(["--show-mmap-events", "--show-task-events"]);
        script.args(["--pid", &pids.join(","), "--input"]);
        script.arg(&self.data);
        // The parts need a kernel frame's object, never its function, and gVisor's functions,
        // whose Go names are not mangled: the kernel's names (/proc/kallsyms) and demangled C++
        // and Rust names cost perf 0.07-0.1 s each in every run, as much as the rest of the
        // script, so they are read only for whoever keeps the samples to look at them.
        if kept.is_none() {
            script.arg("--kallsyms").arg(NO_KERNEL_SYMBOLS).arg("--no-demangle");
        }
        let symfs = self.data.with_extension("symfs");
        let linked = host_root_as_gofer_sees_it(&symfs);
        if linked.is_ok() {
            script.arg("--symfs").arg(&symfs);
        }
        let script = script.stdin(Stdio::null()).output().context("running perf script");
        let _ = std::fs::remove_dir_all(&symfs);
        let script = script?;
        if !script.status.success() {
            bail!("perf script failed ({}): {}", script.status, String::from_utf8_lossy(&script.stderr).trim());
        }
        // For whoever checks or extends the parts: `ISOBENCH_KEEP_SAMPLES=DIR` keeps each run's
        // samples as perf script printed them (docs/development.md).
        if kept.is_some() {
            keep("txt", &script.stdout)?;
        }
        let mut samples = parse_script(&String::from_utf8_lossy(&script.stdout));
        if let Some((from, to)) = window {
            samples.retain(|s| (from..=to).contains(&s.time_s));
        }
        Ok(samples)
    }
}

/// `dir` made a view of the host's root where gVisor's paths are found too: a link to each of the
/// root's entries, and `root` a link to the root itself. gVisor's gofer opens the container's
/// files below `/root` in its own mount namespace, so a library the workload maps (the JVM's
/// libjvm.so) reaches perf as `/root/usr/lib/…`, a path the host does not have: with
/// `--symfs dir` perf reads it at `/usr/lib/…`, the file the sandbox's root overlays (a file of
/// the host's own `/root` is then looked for at the root: none that a sandbox runs).
fn host_root_as_gofer_sees_it(dir: &Path) -> Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    for entry in std::fs::read_dir("/")?.flatten() {
        if entry.file_name() != "root" {
            std::os::unix::fs::symlink(entry.path(), dir.join(entry.file_name()))?;
        }
    }
    std::os::unix::fs::symlink("/", dir.join("root"))?;
    Ok(())
}

/// Where the kernel's half of an x86-64 address space begins.
const KERNEL_SPACE: u64 = 0xffff_8000_0000_0000;

/// An empty symbol table for the kernel: its frames keep their object, `[kernel.kallsyms]`.
const NO_KERNEL_SYMBOLS: &str = "/dev/null";

/// With `ISOBENCH_KEEP_SAMPLES=DIR`, writes `content` there as a file of its own (`EXTENSION`):
/// a run's samples as perf script printed them, the JIT maps that named them.
pub fn keep(extension: &str, content: &[u8]) -> Result<()> {
    let Some(dir) = std::env::var_os("ISOBENCH_KEEP_SAMPLES") else { return Ok(()) };
    let n = KEPT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("{}-{n}.{extension}", std::process::id());
    std::fs::write(Path::new(&dir).join(name), content).context("keeping the samples")
}

static KEPT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Now on the clock perf stamps its samples with.
pub fn monotonic_now() -> f64 {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given, which lives for the call.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) };
    now.tv_sec as f64 + now.tv_nsec as f64 / 1e9
}

/// `perf script --fields comm,pid,tid,time,period,ip,sym,dso --show-mmap-events
/// --show-task-events`: a sample is a line `COMM PID/TID TIME: PERIOD` (the thread's name may hold
/// spaces; without the time where it was not asked for) and a line per frame, `IP SYMBOL (DSO)`,
/// indented, leaf first; a blank line ends it. Lines of any other shape are passed over, but for
/// the mappings of a memory file and the processes forked (which inherit their parent's).
///
/// perf prints an unnamed frame in a mapped object at its offset in the object, not at its
/// address. For a file that is what its symbols are found by, but gVisor maps the workload's
/// memory into its stubs from one memory file (`/memfd:runsc-memory`), whose offset says nothing
/// of the code there: such a frame is put back at its address in the process, by the process's
/// latest mapping of that offset before it, so that a JIT's map can name it.
pub fn parse_script(text: &str) -> Vec<StackSample> {
    let mut samples = Vec::new();
    let mut current: Option<StackSample> = None;
    let mut memory_files = MemoryFileMaps::default();
    for line in text.lines() {
        if line.trim().is_empty() {
            samples.extend(current.take());
        } else if line.starts_with([' ', '\t']) {
            if let (Some(sample), Some(mut frame)) = (current.as_mut(), frame(line.trim())) {
                if frame.dso.starts_with(MEMORY_FILE) {
                    frame.ip = memory_files.address(sample.pid, frame.ip).unwrap_or(frame.ip);
                }
                sample.frames.push(frame);
            }
        } else if let Some(mapped) = memory_file_mapping(line) {
            samples.extend(current.take());
            memory_files.add(mapped);
        } else if let Some((child, parent)) = forked(line) {
            samples.extend(current.take());
            memory_files.fork(child, parent);
        } else {
            samples.extend(current.take());
            current = header(line);
        }
    }
    samples.extend(current);
    samples
}

/// How perf names a memory file's mapping (a memfd's).
const MEMORY_FILE: &str = "/memfd:";

/// A process's mapping of part of a memory file: `length` bytes at `offset` in the file, at
/// `start` in the process.
#[derive(Debug, Clone, Copy, PartialEq)]
struct MemoryFileMapping {
    pid: i32,
    start: u64,
    length: u64,
    offset: u64,
}

/// Each process's mappings of memory files so far, by their offset in the file, the latest last.
#[derive(Default)]
struct MemoryFileMaps {
    by_pid: HashMap<i32, BTreeMap<u64, Vec<(u64, u64)>>>,
}

impl MemoryFileMaps {
    fn add(&mut self, m: MemoryFileMapping) {
        self.by_pid.entry(m.pid).or_default().entry(m.offset).or_default().push((m.start, m.length));
    }

    /// A process forked from `parent` has its mappings, older than any of its own (perf tells a
    /// process that was there when it started its mappings, and its fork, in either order).
    fn fork(&mut self, child: i32, parent: i32) {
        let Some(inherited) = self.by_pid.get(&parent).cloned() else { return };
        let own = self.by_pid.entry(child).or_default();
        for (offset, mut mapped) in inherited {
            let later = own.entry(offset).or_default();
            mapped.append(later);
            *later = mapped;
        }
    }

    /// The address in `pid` of `offset` in its memory file: by the latest mapping that holds it
    /// among those that begin nearest below it (gVisor maps a few pages at a time).
    fn address(&self, pid: i32, offset: u64) -> Option<u64> {
        let maps = self.by_pid.get(&pid)?;
        maps.range(..=offset).rev().take(64).find_map(|(at, mapped)| {
            let (start, _) = mapped.iter().rev().find(|(_, length)| offset - at < *length)?;
            Some(start + (offset - at))
        })
    }
}

/// A process (not a thread) forked: `PERF_RECORD_FORK(PID:TID):(PARENT_PID:PARENT_TID)`, as
/// gVisor's stubs fork more stubs.
fn forked(line: &str) -> Option<(i32, i32)> {
    let (_, event) = line.split_once("PERF_RECORD_FORK(")?;
    let (child, parent) = event.split_once("):(")?;
    let pid = |ids: &str| ids.split(':').next()?.parse::<i32>().ok();
    let (child, parent) = (pid(child)?, pid(parent)?);
    (child != parent).then_some((child, parent))
}

/// A `PERF_RECORD_MMAP2 PID/TID: [0xSTART(0xLENGTH) @ 0xOFFSET …]: PROT /memfd:NAME` line.
fn memory_file_mapping(line: &str) -> Option<MemoryFileMapping> {
    let (_, event) = line.split_once("PERF_RECORD_MMAP")?;
    let (event, object) = event.split_once("]: ")?;
    let path = object.split_once(' ')?.1;
    if !path.starts_with(MEMORY_FILE) {
        return None;
    }
    let mut words = event.strip_prefix('2').unwrap_or(event).split_whitespace();
    let pid = words.next()?.split('/').next()?.parse().ok()?;
    let (start, length) = words.next()?.strip_prefix('[')?.strip_suffix(')')?.split_once('(')?;
    let _at = words.next().filter(|w| *w == "@")?;
    let hex = |w: &str| u64::from_str_radix(w.strip_prefix("0x")?, 16).ok();
    Some(MemoryFileMapping { pid, start: hex(start)?, length: hex(length)?, offset: hex(words.next()?)? })
}

fn header(line: &str) -> Option<StackSample> {
    let mut words = line.split_whitespace().rev();
    let period_ns = words.next()?.parse().ok()?;
    let mut ids = words.next()?;
    let mut time_s = 0.0;
    if let Some(time) = ids.strip_suffix(':') {
        time_s = time.parse().ok()?;
        ids = words.next()?;
    }
    let (pid, tid) = ids.split_once('/')?;
    let comm = line[..line.rfind(ids)?].trim().to_string();
    Some(StackSample { comm, pid: pid.parse().ok()?, tid: tid.parse().ok()?, time_s, period_ns, frames: Vec::new() })
}

fn frame(line: &str) -> Option<Frame> {
    let (ip, rest) = line.split_once(char::is_whitespace)?;
    let ip = u64::from_str_radix(ip, 16).ok()?;
    let rest = rest.trim();
    let (symbol, dso) = match object_start(rest) {
        Some(open) => (&rest[..open], &rest[open + 1..rest.len() - 1]),
        None => (rest, ""),
    };
    Some(Frame { ip, symbol: symbol.trim().to_string(), dso: dso.to_string() })
}

/// Where a frame's object begins: the parenthesis that the line's last one closes, after a
/// space. An object's name may hold parentheses of its own (`/memfd:runsc-memory (deleted)`).
fn object_start(rest: &str) -> Option<usize> {
    if !rest.ends_with(')') {
        return None;
    }
    let mut depth = 0;
    for (at, c) in rest.char_indices().rev() {
        match c {
            ')' => depth += 1,
            '(' => {
                depth -= 1;
                if depth == 0 {
                    return (at > 0 && rest[..at].ends_with(' ')).then_some(at);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_read_with_their_threads_and_frames_leaf_first() {
        let text = "\
java  8220/8328     4000000 
\t    7f3c25439418 [unknown] (/tmp/perf-8220.map)
\t          ed58b1 Unsafe_CopyMemory0 (/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so)

CPU 0/TCG  911/915     4000000 
\tffffffff82237d62 mas_next_slot ([kernel.kallsyms])
\t          d4ad7 __GI___execve (/usr/lib/x86_64-linux-gnu/libc.so.6)

exe  77/78 14856.631554:    3999999 
\t  5a3b2c gvisor.dev/gvisor/pkg/tcpip/stack.(*nic).DeliverNetworkPacket (/usr/local/lib/isobench/bin/runsc)
\t  7f3c2543 [unknown] (/memfd:runsc-memory (deleted))
garbage line
\tnot a frame
";
        let samples = parse_script(text);
        assert_eq!(samples.len(), 3);
        assert_eq!((samples[0].comm.as_str(), samples[0].pid, samples[0].tid), ("java", 8220, 8328));
        assert_eq!(samples[0].frames[1].symbol, "Unsafe_CopyMemory0");
        assert!(!samples[0].in_kernel());
        assert_eq!(samples[1].comm, "CPU 0/TCG");
        assert!(samples[1].in_kernel());
        assert!(samples[0].frames[0].anonymous() && !samples[0].frames[1].anonymous());
        assert_eq!(samples[2].period_ns, 3_999_999);
        assert_eq!((samples[2].time_s, samples[0].time_s), (14856.631554, 0.0));
        assert_eq!(samples[2].frames[0].symbol, "gvisor.dev/gvisor/pkg/tcpip/stack.(*nic).DeliverNetworkPacket");
        assert_eq!(samples[2].frames.len(), 2, "a line that is not a frame is passed over");
        assert_eq!(samples[0].frames[0].ip, 0x7f3c25439418);
        let bpf = frame("ffffffffc0028a1c [unknown] ([unknown])").unwrap();
        assert!(bpf.kernel() && !frame("7f3c2543 [unknown] ([unknown])").unwrap().kernel());
        let memfd = &samples[2].frames[1];
        assert_eq!((memfd.symbol.as_str(), memfd.dso.as_str()), ("[unknown]", "/memfd:runsc-memory (deleted)"));
        assert!(parse_script("").is_empty());
    }

    #[test]
    fn a_frame_in_gvisors_memory_file_is_put_back_at_its_address_in_the_process() {
        // The JVM's code cache, mapped into a stub from gVisor's memory file at two places over
        // time; perf prints the frames at their offsets in the file.
        let text = "\
exe     0/0         0.000000: PERF_RECORD_MMAP2 77/77: [0x7eefa8200000(0x10000) @ 0x3fb90000 00:01 86084 0]: rwxs /memfd:runsc-memory (deleted)
exe     0/0         0.000000: PERF_RECORD_MMAP2 77/77: [0x7f0000000000(0x1000) @ 0x1000 fe:00 325 0]: r-xp /usr/lib/x86_64-linux-gnu/libc.so.6
exe  77/78 10.5:    4000000 
\t  3fb90a10 [unknown] (/memfd:runsc-memory (deleted))
\t  3fb9ffff [unknown] (/memfd:runsc-memory (deleted))
\t  3fba0000 [unknown] (/memfd:runsc-memory (deleted))
\t  1010 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)

exe     0/0         11.000000: PERF_RECORD_MMAP2 77/77: [0x7ab000000000(0x1000) @ 0x3fb90000 00:01 86084 0]: rwxs /memfd:runsc-memory (deleted)
exe  77/78 11.5:    4000000 
\t  3fb90a10 [unknown] (/memfd:runsc-memory (deleted))
\t  3fb91a10 [unknown] (/memfd:runsc-memory (deleted))

exe  88/88 11.6:    4000000 
\t  3fb90a10 [unknown] (/memfd:runsc-memory (deleted))

exe  77/77 11.7: PERF_RECORD_FORK(99:99):(77:77)
exe  77/77 11.7: PERF_RECORD_FORK(77:100):(77:77)
exe  99/99 11.8:    4000000 
\t  3fb91a10 [unknown] (/memfd:runsc-memory (deleted))
";
        let samples = parse_script(text);
        assert_eq!(samples.len(), 4, "a mapping or a fork is not a sample");
        let ips = |s: &StackSample| s.frames.iter().map(|f| f.ip).collect::<Vec<_>>();
        assert_eq!(
            ips(&samples[0]),
            [0x7eefa8200a10, 0x7eefa820ffff, 0x3fba0000, 0x1010],
            "past the mapping's end, and a file's frame, stay as printed"
        );
        // The offset mapped again: its latest mapping; the rest of the first still holds.
        assert_eq!(ips(&samples[1]), [0x7ab000000a10, 0x7eefa8201a10]);
        assert_eq!(ips(&samples[2]), [0x3fb90a10], "another process's mappings are its own");
        assert_eq!(ips(&samples[3]), [0x7eefa8201a10], "a forked process's are its parent's");
    }
}
