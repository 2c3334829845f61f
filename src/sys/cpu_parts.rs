//! A sandbox's CPU resolved to parts: each sample of its processes (see `sampling`) to the
//! part of the stack that spent it, by the role of its process and the frames of its call
//! chain. The same parts for every environment, so that a sandbox's extra CPU per operation
//! is told as the sum of its parts' growth against the baseline's:
//! - gVisor: the stubs' user time is the workload's (`app`), their kernel time the platform's
//!   (a trapped system call, a signal delivered and returned); the sentry's time goes to the
//!   first of its frames, from the leaf up, that belongs to a part (GC by its chain, wherever
//!   its leaf is); the gofer serves files.
//! - A VM: QEMU's vCPU threads are the `guest`, its other threads device emulation and I/O
//!   (`qemu`), virtiofsd its own.
//! - The host and runc: `app`, and `host_kernel` for the kernel's time on its behalf.

use std::collections::{BTreeMap, HashMap};

use super::ProcessCpu;
use super::code_names::CodeNames;
use super::sampling::{Frame, StackSample};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    App,
    Platform,
    Syscalls,
    Network,
    Files,
    Memory,
    GoRuntime,
    HostKernel,
    Guest,
    Qemu,
    Virtiofsd,
    /// The runtime's own processes (runsc's, runc's), outside the sandbox's.
    Runtime,
}

impl Part {
    pub const ALL: [Part; 12] = [
        Part::App,
        Part::Platform,
        Part::Syscalls,
        Part::Network,
        Part::Files,
        Part::Memory,
        Part::GoRuntime,
        Part::HostKernel,
        Part::Guest,
        Part::Qemu,
        Part::Virtiofsd,
        Part::Runtime,
    ];

    /// Its name in a sample's metric (`sys.cpu_part.NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Part::App => "app",
            Part::Platform => "platform",
            Part::Syscalls => "syscalls",
            Part::Network => "network",
            Part::Files => "files",
            Part::Memory => "memory",
            Part::GoRuntime => "go_runtime",
            Part::HostKernel => "host_kernel",
            Part::Guest => "guest",
            Part::Qemu => "qemu",
            Part::Virtiofsd => "virtiofsd",
            Part::Runtime => "runtime",
        }
    }

    /// How the why names it.
    pub fn label(self) -> &'static str {
        match self {
            Part::App => "the workload's own code",
            Part::Platform => "the platform (system calls trapped, switches to and from the sandbox)",
            Part::Syscalls => "system calls served",
            Part::Network => "network stack",
            Part::Files => "files",
            Part::Memory => "memory",
            Part::GoRuntime => "Go runtime (GC, scheduler)",
            Part::HostKernel => "host kernel",
            Part::Guest => "the guest's vCPUs",
            Part::Qemu => "QEMU's devices and I/O",
            Part::Virtiofsd => "virtiofsd",
            Part::Runtime => "the runtime's own processes",
        }
    }

    pub fn from_name(name: &str) -> Option<Part> {
        Part::ALL.into_iter().find(|p| p.name() == name)
    }
}

/// What a process of the sandbox is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    App,
    Sentry,
    /// A process the sentry forked to run the workload's code (its threads' stubs).
    Stub,
    Gofer,
    Runtime,
    Qemu,
    Virtiofsd,
}

/// Each process's role, from its program's name (the file name of its argv[0]) and its
/// ancestors': gVisor's stubs have no command line of their own, and some are forked by other
/// stubs, so a process below the sentry is a stub whatever its name.
pub fn roles(processes: &HashMap<i32, ProcessCpu>) -> HashMap<i32, Role> {
    let below_sentry = |process: &ProcessCpu| {
        let mut parent = processes.get(&process.parent);
        for _ in 0..processes.len() {
            match parent {
                Some(p) if p.name == "runsc-sandbox" => return true,
                Some(p) => parent = processes.get(&p.parent),
                None => return false,
            }
        }
        false
    };
    processes
        .values()
        .map(|p| {
            let role = match p.name.as_str() {
                _ if below_sentry(p) => Role::Stub,
                "runsc-sandbox" => Role::Sentry,
                "runsc-gofer" => Role::Gofer,
                "runsc" | "runc" | "crun" | "conmon" | "containerd-shim-runsc-v1" => Role::Runtime,
                "virtiofsd" => Role::Virtiofsd,
                n if n.starts_with("qemu-system-") => Role::Qemu,
                _ => Role::App,
            };
            (p.pid, role)
        })
        .collect()
}

/// What the sentry's explicit yields are: the Go scheduler's frames below `runtime.goyield_m`
/// run on the scheduler's own stack, so a yield's caller is not in its chain. In runsc's binary
/// three functions yield: systrap's fast-path dispatcher, which spins by yielding while it
/// waits for a stub, the fd notifier after it wakes waiters, and a sequence count's contended
/// read; only the first runs hot. Where the sentry runs systrap, a yield is its platform's spin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Yields {
    Platform,
    GoRuntime,
}

impl Yields {
    /// From the run's own samples: systrap's frames in the sentry's chains.
    pub fn of(samples: &[StackSample], roles: &HashMap<i32, Role>) -> Yields {
        let systrap = samples
            .iter()
            .filter(|s| roles.get(&s.pid) == Some(&Role::Sentry))
            .any(|s| s.frames.iter().any(|f| f.symbol.starts_with("gvisor.dev/gvisor/pkg/sentry/platform/systrap")));
        if systrap { Yields::Platform } else { Yields::GoRuntime }
    }
}

/// The part a sample goes to, or None where its frames say nothing (an unresolved sample).
pub fn part_of(role: Role, sample: &StackSample, yields: Yields) -> Option<Part> {
    let kernel = sample.in_kernel();
    Some(match role {
        Role::App if kernel => Part::HostKernel,
        Role::App => Part::App,
        // A stub's own code (its signal handler, its wait for the sentry) is anonymous
        // executable memory; the workload's is a file's or gVisor's memory file's.
        Role::Stub if kernel => Part::Platform,
        // (The workload's own code may be unknown to perf: gVisor maps it into the stub in
        // pieces, and a JIT's code never had a file.)
        Role::Stub if sample.frames.first().is_some_and(Frame::anonymous) => Part::Platform,
        Role::Stub => Part::App,
        Role::Gofer => Part::Files,
        Role::Runtime => Part::Runtime,
        Role::Virtiofsd => Part::Virtiofsd,
        Role::Qemu if sample.comm.starts_with("CPU ") => Part::Guest,
        Role::Qemu => Part::Qemu,
        Role::Sentry => return sentry_part(sample, yields),
    })
}

/// The sentry's sample: GC wherever its chain passes; else the first frame from the leaf up
/// in a gVisor package of a part (a utility package, a Go runtime frame below it, are its
/// caller's); the kernel's time is the platform's or the Go scheduler's when the chain says
/// so, else the host kernel's on the sentry's behalf.
fn sentry_part(sample: &StackSample, yields: Yields) -> Option<Part> {
    let symbols = || sample.frames.iter().filter(|f| !f.kernel()).map(|f| f.symbol.as_str());
    if symbols().any(|s| GC.iter().any(|gc| s.starts_with(gc))) {
        return Some(Part::GoRuntime);
    }
    if yields == Yields::Platform && symbols().any(|s| s == "runtime.goyield_m") {
        return Some(Part::Platform);
    }
    let by_package = symbols().find_map(gvisor_part);
    let runtime_only = by_package.is_none() && symbols().any(|s| s.starts_with("runtime."));
    let user = by_package.or(runtime_only.then_some(Part::GoRuntime));
    if sample.in_kernel() {
        return Some(match user {
            Some(part @ (Part::Platform | Part::GoRuntime)) => part,
            _ => Part::HostKernel,
        });
    }
    user
}

/// The Go runtime's garbage collection, charged by chain: an allocation's assist included.
const GC: &[&str] = &[
    "runtime.gcBgMarkWorker",
    "runtime.gcAssistAlloc",
    "runtime.gcDrain",
    "runtime.gcStart",
    "runtime.bgsweep",
    "runtime.bgscavenge",
    "runtime.markroot",
    "runtime.scanobject",
    "runtime.sweepone",
];

/// gVisor's packages (below `gvisor.dev/gvisor/`) by part, the longer prefixes first where two
/// overlap; a package not here (sync, buffer, log, …) serves every part and is its caller's.
const PACKAGES: &[(&str, Part)] = &[
    ("pkg/sentry/fsimpl/sockfs", Part::Network),
    ("pkg/sentry/platform", Part::Platform),
    ("pkg/ring0", Part::Platform),
    ("pkg/sentry/arch", Part::Platform),
    ("pkg/tcpip", Part::Network),
    ("pkg/sentry/socket", Part::Network),
    ("pkg/sentry/inet", Part::Network),
    ("pkg/sentry/devices/tundev", Part::Network),
    ("pkg/xdp", Part::Network),
    ("pkg/sentry/kernel/pipe", Part::Files),
    ("pkg/sentry/vfs", Part::Files),
    ("pkg/sentry/fsimpl", Part::Files),
    ("pkg/sentry/fsutil", Part::Files),
    ("pkg/sentry/fsmetric", Part::Files),
    ("pkg/lisafs", Part::Files),
    ("pkg/p9", Part::Files),
    ("pkg/flipcall", Part::Files),
    ("pkg/fspath", Part::Files),
    ("runsc/fsgofer", Part::Files),
    ("pkg/sentry/mm", Part::Memory),
    ("pkg/sentry/pgalloc", Part::Memory),
    ("pkg/sentry/memmap", Part::Memory),
    ("pkg/sentry/hostmm", Part::Memory),
    ("pkg/safemem", Part::Memory),
    ("pkg/usermem", Part::Memory),
    ("pkg/sentry/kernel", Part::Syscalls),
    ("pkg/sentry/syscalls", Part::Syscalls),
    ("pkg/sentry/seccheck", Part::Syscalls),
    ("pkg/sentry/strace", Part::Syscalls),
    ("pkg/sentry/loader", Part::Syscalls),
    ("pkg/sentry/limits", Part::Syscalls),
];

fn gvisor_part(symbol: &str) -> Option<Part> {
    let path = symbol.strip_prefix("gvisor.dev/gvisor/")?;
    PACKAGES.iter().find_map(|(prefix, part)| {
        let rest = path.strip_prefix(prefix)?;
        // At a package's boundary: "pkg/sentry/fs" is not "pkg/sentry/fsimpl".
        rest.starts_with(['/', '.']).then_some(*part)
    })
}

/// The samples of a sandbox's processes, summed by part.
#[derive(Debug, Default, PartialEq)]
pub struct Parts {
    /// CPU seconds by part.
    pub seconds: BTreeMap<Part, f64>,
    /// CPU seconds by part, thread (its name as the host saw it) and function (`function_of`).
    pub functions: BTreeMap<(Part, String, String), f64>,
    /// CPU seconds of samples no part could take.
    pub unresolved: f64,
    /// CPU seconds all the sandbox's samples stand for.
    pub sampled: f64,
}

impl Parts {
    /// The interpreter's CPU (`jit_map::INTERPRETER`) split among the Java threads and methods
    /// the JVM's own samples found it running (`jfr::interpreted`), in proportion to their
    /// counts; left whole where there are none.
    pub fn split_interpreter(&mut self, interpreted: &BTreeMap<(String, String), usize>) {
        let total = interpreted.values().sum::<usize>() as f64;
        if total == 0.0 {
            return;
        }
        let whole: Vec<(Part, String, String)> =
            self.functions.keys().filter(|(_, _, f)| f == super::jit_map::INTERPRETER).cloned().collect();
        let mut by_part: BTreeMap<Part, f64> = BTreeMap::new();
        for key in whole {
            *by_part.entry(key.0).or_default() += self.functions.remove(&key).unwrap_or(0.0);
        }
        for (part, seconds) in by_part {
            for ((thread, method), n) in interpreted {
                let key = (part, thread.clone(), format!("{method} (interpreted)"));
                *self.functions.entry(key).or_default() += seconds * *n as f64 / total;
            }
        }
    }
}

/// `roles`: the sandbox's processes by pid; samples of other processes are not its. `names`:
/// what the sandbox's processes said of their code, which names code perf could not.
pub fn attribute(samples: &[StackSample], roles: &HashMap<i32, Role>, names: &CodeNames) -> Parts {
    let yields = Yields::of(samples, roles);
    let mut parts = Parts::default();
    for sample in samples {
        let Some(role) = roles.get(&sample.pid) else { continue };
        let seconds = sample.period_ns as f64 / 1e9;
        parts.sampled += seconds;
        match part_of(*role, sample, yields) {
            Some(part) => {
                *parts.seconds.entry(part).or_default() += seconds;
                let key = (part, sample.comm.clone(), function_of(sample, names));
                *parts.functions.entry(key).or_default() += seconds;
            }
            None => parts.unresolved += seconds,
        }
    }
    parts
}

/// The function a sample was in: its leaf frame's, named by perf or by what the sandbox's
/// processes said of their code; for time in the host's kernel (whose names are not read), the
/// nearest function on the stack that can be named and says what called: libc's generic
/// `syscall` wrapper, named or not, is passed over for its caller (under gVisor the JIT
/// compiler's parse traps in a `gettid` that `ttyLocker::release_tty_if_locked` makes through it,
/// which otherwise read as `[kernel]` or `[kernel] from syscall`).
pub fn function_of(sample: &StackSample, names: &CodeNames) -> String {
    let named = |f: &Frame| match f.symbol.as_str() {
        UNRESOLVED if f.at_address() => names.name(f.ip),
        UNRESOLVED => None,
        symbol => Some(symbol.to_string()),
    };
    // Anonymous code's object is named by the pid it ran in: the same code in every run.
    let object = |f: &Frame| match (f.at_address().then(|| names.object(f.ip)).flatten(), f.anonymous()) {
        (Some(file), _) => file.to_string(),
        (None, true) => "anonymous memory".to_string(),
        (None, false) => f.dso.rsplit('/').next().unwrap_or_default().to_string(),
    };
    let named = |f: &Frame| named(f).map(|name| readable(&name));
    let Some(leaf) = sample.frames.first() else { return UNRESOLVED.into() };
    if leaf.kernel() {
        let caller = |f: &Frame| named(f).filter(|name| name != GENERIC_SYSCALL);
        return match sample.frames.iter().filter(|f| !f.kernel()).find_map(caller) {
            Some(caller) => format!("[kernel] from {caller}"),
            None => "[kernel]".into(),
        };
    }
    named(leaf).unwrap_or_else(|| format!("{UNRESOLVED} in {}", object(leaf)))
}

/// libc's wrapper for any system call by number, which names no call.
const GENERIC_SYSCALL: &str = "syscall";

/// How a function no symbol or map names is called, followed by its object.
pub const UNRESOLVED: &str = "[unknown]";

/// A C++ function's name as its source says it (`PhaseChaitin::Split` for
/// `_ZN12PhaseChaitin5SplitEjP12ResourceArea`), its parameters left out: the mangled names of
/// the nested and plain functions a JVM's C++ is made of, and a Rust binary's paths (perf's script
/// does not demangle here, which would cost every run a tenth of a second); any other name as it is.
pub fn readable(symbol: &str) -> String {
    fn identifier<'a>(rest: &mut &'a str) -> Option<&'a str> {
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let length: usize = rest[..digits].parse().ok()?;
        let name = rest.get(digits..digits + length)?;
        *rest = &rest[digits + length..];
        Some(name)
    }
    let demangled = || -> Option<String> {
        let mut rest = symbol.strip_prefix("_Z")?;
        let Some(nested) = rest.strip_prefix('N') else { return identifier(&mut rest).map(String::from) };
        rest = nested.trim_start_matches(['r', 'V', 'K']);
        let mut names: Vec<String> = Vec::new();
        loop {
            if let Some(after) = rest.strip_prefix("St") {
                names.push("std".into());
                rest = after;
            } else if rest.starts_with(|c: char| c.is_ascii_digit()) {
                names.push(identifier(&mut rest)?.into());
            } else if let Some(kind) = ["C1", "C2", "C3", "D0", "D1", "D2"].iter().find(|k| rest.starts_with(**k)) {
                let class = names.last()?.clone();
                names.push(if kind.starts_with('C') { class } else { format!("~{class}") });
                rest = &rest[2..];
            } else if rest.starts_with('E') {
                return (!names.is_empty()).then(|| rust_legacy(&names).unwrap_or_else(|| names.join("::")));
            } else {
                // Templates and operators: the name so far, marked as cut short.
                return (!names.is_empty()).then(|| format!("{}::…", names.join("::")));
            }
        }
    };
    demangled().unwrap_or_else(|| symbol.to_string())
}

/// A Rust function's path from its legacy mangled parts, which end in a hash (`h` and 16 hex
/// digits) and spell `<`, `>`, spaces and `::` inside a part as `$LT$`, `$GT$`, `$u20$` and `..`:
/// `<isobench::cli::RunArgs as clap_builder::derive::Args>::augment_args`. None for C++'s parts.
fn rust_legacy(names: &[String]) -> Option<String> {
    let (hash, path) = names.split_last()?;
    let hex = hash.strip_prefix('h')?;
    if hex.len() != 16 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    const ESCAPES: [(&str, &str); 13] = [
        ("$LT$", "<"),
        ("$GT$", ">"),
        ("$u20$", " "),
        ("$RF$", "&"),
        ("$BP$", "*"),
        ("$C$", ","),
        ("$SP$", "@"),
        ("$LP$", "("),
        ("$RP$", ")"),
        ("$u7b$", "{"),
        ("$u7d$", "}"),
        ("$u5b$", "["),
        ("$u5d$", "]"),
    ];
    let part = |name: &String| {
        let name = name.strip_prefix("_$").map(|n| format!("${n}")).unwrap_or_else(|| name.clone());
        ESCAPES.iter().fold(name.replace("..", "::"), |n, (escape, c)| n.replace(escape, c))
    };
    Some(path.iter().map(part).collect::<Vec<_>>().join("::"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::code_names::MappedFiles;
    use crate::sys::jit_map::JitMap;

    fn sample(pid: i32, comm: &str, frames: &[(&str, bool)]) -> StackSample {
        let frames =
            frames.iter().map(|(s, kernel)| (*s, if *kernel { "[kernel.kallsyms]" } else { "/usr/bin/runsc" }));
        sample_in(pid, comm, &frames.collect::<Vec<_>>())
    }

    fn sample_in(pid: i32, comm: &str, frames: &[(&str, &str)]) -> StackSample {
        StackSample {
            comm: comm.into(),
            pid,
            tid: pid,
            time_s: 0.0,
            period_ns: 4_000_000,
            frames: frames
                .iter()
                .map(|(s, dso)| Frame { ip: 0, symbol: s.to_string(), dso: dso.to_string() })
                .collect(),
        }
    }

    const SYSTRAP: &str = "gvisor.dev/gvisor/pkg/sentry/platform/systrap.(*subprocess).switchToApp";
    const TASK: &str = "gvisor.dev/gvisor/pkg/sentry/kernel.(*Task).run";

    #[test]
    fn the_sentrys_samples_go_to_the_first_package_of_a_part_and_gc_by_its_chain() {
        let part = |frames: &[(&str, bool)]| sentry_part(&sample(1, "exe", frames), Yields::GoRuntime);
        let tcp = "gvisor.dev/gvisor/pkg/tcpip/transport/tcp.(*endpoint).Write";
        let buffer = "gvisor.dev/gvisor/pkg/buffer.(*Buffer).Append";
        assert_eq!(
            part(&[("runtime.memmove", false), (buffer, false), (tcp, false), (TASK, false)]),
            Some(Part::Network)
        );
        assert_eq!(
            part(&[("runtime.scanobject", false), ("runtime.gcDrain", false), (TASK, false)]),
            Some(Part::GoRuntime)
        );
        assert_eq!(
            part(&[("runtime.memclr", false), ("runtime.gcAssistAlloc", false), (tcp, false)]),
            Some(Part::GoRuntime)
        );
        assert_eq!(part(&[("runtime.findRunnable", false), ("runtime.schedule", false)]), Some(Part::GoRuntime));
        assert_eq!(part(&[("futex_wake", true), (SYSTRAP, false), (TASK, false)]), Some(Part::Platform));
        assert_eq!(part(&[("tcp_sendmsg", true), ("syscall.Syscall", false), (tcp, false)]), Some(Part::HostKernel));
        assert_eq!(part(&[(TASK, false)]), Some(Part::Syscalls));
        assert_eq!(part(&[("gvisor.dev/gvisor/pkg/sentry/fsimpl/sockfs.x", false)]), Some(Part::Network));
        assert_eq!(part(&[("gvisor.dev/gvisor/pkg/sentry/fsimpl/gofer.x", false)]), Some(Part::Files));
        assert_eq!(part(&[("[unknown]", false)]), None);
    }

    #[test]
    fn a_yield_is_systraps_spin_where_the_sentry_runs_systrap_and_the_schedulers_elsewhere() {
        let roles = HashMap::from([(1, Role::Sentry), (2, Role::Stub)]);
        let yielded = sample(1, "exe", &[("runtime.findRunnable", false), ("runtime.goyield_m", false)]);
        let parked = sample(1, "exe", &[("runtime.findRunnable", false), ("runtime.park_m", false)]);
        let ptrace = sample(1, "exe", &[("gvisor.dev/gvisor/pkg/sentry/platform/ptrace.(*thread).wait", false)]);
        let of = |samples: &[StackSample]| attribute(samples, &roles, &CodeNames::default()).seconds;
        let systrap_run = of(&[sample(1, "exe", &[(SYSTRAP, false)]), yielded.clone(), parked.clone()]);
        assert_eq!(systrap_run[&Part::Platform], 0.008, "{systrap_run:?}");
        assert_eq!(systrap_run[&Part::GoRuntime], 0.004, "a goroutine that blocks is the scheduler's: {systrap_run:?}");
        let ptrace_run = of(&[ptrace, yielded.clone()]);
        assert_eq!(ptrace_run[&Part::GoRuntime], 0.004, "{ptrace_run:?}");
        // A stub's chain naming systrap is not the sentry's.
        let stub = sample(2, "exe", &[(SYSTRAP, false)]);
        assert_eq!(Yields::of(&[stub, yielded], &roles), Yields::GoRuntime);
    }

    #[test]
    fn the_interpreters_cpu_is_split_by_the_methods_the_jvm_sampled_it_running() {
        let mut parts = Parts::default();
        parts.functions.insert((Part::App, "exe".into(), "Interpreter".into()), 0.3);
        parts.functions.insert((Part::App, "exe2".into(), "Interpreter".into()), 0.1);
        parts.functions.insert((Part::App, "exe".into(), "void Foo.bar()".into()), 0.2);
        let none = BTreeMap::new();
        parts.split_interpreter(&none);
        assert_eq!(parts.functions.len(), 3, "left whole without samples");
        let interpreted = BTreeMap::from([
            (("ReadStage-1".to_string(), "a.B.c".to_string()), 3),
            (("Native-Transport-Requests-2".to_string(), "a.B.d".to_string()), 1),
        ]);
        parts.split_interpreter(&interpreted);
        let of = |thread: &str, function: &str| parts.functions[&(Part::App, thread.into(), function.into())];
        assert!((of("ReadStage-1", "a.B.c (interpreted)") - 0.3).abs() < 1e-12);
        assert!((of("Native-Transport-Requests-2", "a.B.d (interpreted)") - 0.1).abs() < 1e-12);
        assert!((of("exe", "void Foo.bar()") - 0.2).abs() < 1e-12, "compiled code stays as it was");
        assert!(!parts.functions.keys().any(|(_, _, f)| f == "Interpreter"));
    }

    #[test]
    fn a_cpp_or_rust_name_reads_as_in_its_source() {
        assert_eq!(readable("_ZN12PhaseChaitin5SplitEjP12ResourceArea"), "PhaseChaitin::Split");
        assert_eq!(readable("_ZN14PhaseIdealLoop10DominatorsEv"), "PhaseIdealLoop::Dominators");
        assert_eq!(readable("_ZNK4Node7is_CFG2Ev"), "Node::is_CFG2");
        assert_eq!(readable("_ZN9PhaseLiveC2EjP12ResourceArea"), "PhaseLive::PhaseLive");
        assert_eq!(readable("_ZN6Thread4callI3FooEEvv"), "Thread::call::…");
        assert_eq!(readable("_Z13os_sleep_msecl"), "os_sleep_msec");
        assert_eq!(
            readable(
                "_ZN69_$LT$isobench..cli..RunArgs$u20$as$u20$clap_builder..derive..Args$GT$12augment_args17h0123456789abcdefE"
            ),
            "<isobench::cli::RunArgs as clap_builder::derive::Args>::augment_args"
        );
        assert_eq!(readable("_ZN3std2io5stdio6_print17h89abcdef01234567E"), "std::io::stdio::_print");
        for other in ["void java.lang.Object.<init>()", "Interpreter", "_ZN99short", "_Z", "runtime.futex"] {
            assert_eq!(readable(other), other);
        }
    }

    /// A JIT's code, which perf leaves unknown in gVisor's memory file, is named by the JVM's
    /// map, a file perf knew no mapping of by the process's own; time in the host's kernel by the
    /// function that entered it.
    #[test]
    fn functions_are_named_by_symbols_the_jit_map_and_the_process_mappings() {
        let jit = vec![JitMap::parse("0x7f0000001000 0x100 void Foo.spin()\n0x7f0000002000 0x1000 Interpreter\n")];
        let mapped = MappedFiles::parse("7e0000000000-7e0000100000 r-xp 00002000 fe:00 9 /nonexistent/libfoo.so\n");
        let jit = CodeNames::new(jit, vec![mapped]);
        let at = |ip: u64, dso: &str| Frame { ip, symbol: "[unknown]".into(), dso: dso.into() };
        let memfd = "/memfd:runsc-memory (deleted)";
        let mut spin = sample_in(1, "exe", &[]);
        spin.frames = vec![at(0x7f0000001010, memfd), at(0x7f0000002010, memfd)];
        assert_eq!(function_of(&spin, &jit), "void Foo.spin()");
        spin.frames[0].ip = 0x7f0000009000;
        assert_eq!(function_of(&spin, &jit), "[unknown] in memfd:runsc-memory (deleted)");
        spin.frames[0] = at(0x7e0000000100, "[unknown]");
        assert_eq!(function_of(&spin, &jit), "[unknown] in libfoo.so", "a file the host cannot read is named");
        spin.frames[0] = at(0x7e0000000100, "/usr/lib/libc.so.6");
        assert_eq!(function_of(&spin, &jit), "[unknown] in libc.so.6", "a file's offset is not an address");
        let entered = sample_in(1, "java", &[("do_syscall_64", "[kernel.kallsyms]"), ("read", "/usr/lib/libc.so.6")]);
        assert_eq!(function_of(&entered, &jit), "[kernel] from read");
        let mut trapped = sample_in(1, "exe", &[("do_syscall_64", "[kernel.kallsyms]")]);
        trapped.frames.extend([at(0x7f0000009000, memfd), at(0x7f0000001010, memfd)]);
        assert_eq!(function_of(&trapped, &jit), "[kernel] from void Foo.spin()", "an unnamed wrapper is passed over");
        trapped.frames[1] = Frame { ip: 0x5b829, symbol: "syscall".into(), dso: "/usr/lib/libc.so.6".into() };
        assert_eq!(function_of(&trapped, &jit), "[kernel] from void Foo.spin()", "so is libc's generic one");
        trapped.frames.truncate(2);
        assert_eq!(function_of(&trapped, &jit), "[kernel]");
        let roles = HashMap::from([(1, Role::Stub)]);
        spin.frames[0] = at(0x7f0000001010, memfd);
        let parts = attribute(&[spin.clone(), spin], &roles, &jit);
        assert_eq!(parts.functions[&(Part::App, "exe".to_string(), "void Foo.spin()".to_string())], 0.008);
    }

    #[test]
    fn processes_have_roles_and_their_samples_parts() {
        let process = |pid, parent, name: &str| {
            (pid, ProcessCpu { pid, parent, cpu_s: 0.0, name: name.into(), named_by_comm: false })
        };
        // runsc (1) started the gofer (2) and the sentry (3), which forked stubs (4, and 5 below it).
        let tree = HashMap::from([
            process(1, 0, "runsc"),
            process(2, 1, "runsc-gofer"),
            process(3, 1, "runsc-sandbox"),
            process(4, 3, "exe"),
            process(5, 4, "exe"),
            process(6, 0, "qemu-system-x86_64"),
            process(7, 0, "java"),
        ]);
        let got = roles(&tree);
        let want = [Role::Runtime, Role::Gofer, Role::Sentry, Role::Stub, Role::Stub, Role::Qemu, Role::App];
        for (pid, role) in (1..=7).zip(want) {
            assert_eq!(got[&pid], role, "pid {pid}");
        }
        let roles = HashMap::from([(1, Role::Stub), (2, Role::Qemu), (3, Role::App)]);
        let samples = [
            sample_in(1, "exe", &[("[unknown]", "/memfd:runsc-memory (deleted)")]),
            sample_in(1, "exe", &[("[unknown]", "/tmp/perf-77.map")]),
            sample_in(1, "exe", &[("[unknown]", "[unknown]")]),
            sample(2, "CPU 0/TCG", &[("x", false)]),
            sample(2, "IO iothread1", &[("x", false)]),
            sample(3, "java", &[("x", false)]),
            sample(9, "other", &[("x", false)]),
        ];
        let parts = attribute(&samples, &roles, &CodeNames::default());
        let got: Vec<(Part, f64)> = parts.seconds.iter().map(|(p, s)| (*p, (s * 1000.0).round())).collect();
        assert_eq!(got, [(Part::App, 12.0), (Part::Platform, 4.0), (Part::Guest, 4.0), (Part::Qemu, 4.0)]);
        assert!((parts.sampled - 0.024).abs() < 1e-9, "the other process's sample is not the sandbox's");
        assert_eq!(Part::from_name("go_runtime"), Some(Part::GoRuntime));
    }
}
