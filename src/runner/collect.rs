//! Where the time went, from the host's side of one sandbox: the CPU of every process that
//! hosted it (the runtime, QEMU, gVisor's sentry and gofer, and the workload they ran), set
//! against the CPU the workload's own kernel counted inside (`sys.cpu_workload`, from the
//! agent); and the I/O of the device under the volume, set against what the workload did.

use std::collections::{BTreeMap, HashMap};

use anyhow::Result;

use crate::env::CpuCount;
use crate::ledger::{Ledger, Resource};
use crate::store::{
    AgentReport, CPU_PART, DISK_IRQ_CPU_SHARE, FunctionCpu, IPC_UNIT, PERF, RUNTIME_BY, Sample, UNEXPLAINED,
};
use crate::sys::code_names::{CodeNames, MappedFiles};
use crate::sys::cpu_parts::{self, Part};
use crate::sys::jit_map::JitMap;
use crate::sys::sampling::{PerfRecord, SAMPLES_PER_SECOND, StackSample, monotonic_now};
use crate::sys::{
    CpuGroup, DiskCounters, PerfStat, Placement, ProcessCpu, Usage, device_name, device_under, named_processes_cpu,
    remove_cgroup,
};
use crate::volume::Provisioned;

/// The processes that serve a network volume (`volume::nbd_export`), by argv[0]'s file name.
const VOLUME_DAEMONS: &[&str] = &["nbdkit", "qemu-storage-daemon"];

/// Below this share of the workload's own CPU, the host's count missed some of the sandbox's
/// processes (the two kernels' clocks differ by a little, not by this much).
const HOST_SAW_AT_LEAST: f64 = 0.9;

/// Counters read as a sandbox starts; `finish` adds the differences to its report.
pub struct HostCounters {
    /// A cgroup of the sandbox's own, where its environment starts it (`CpuCount::Group`).
    group: Option<CpuGroup>,
    /// Its processes as they come and go, read on a thread: for the sampled parts' roles, and
    /// where the environment says so, to tell the workload's processes apart by the tree.
    tree: Option<TreeSampler>,
    split_by_tree: bool,
    /// Otherwise the reaped children's usage: None when other processes' CPU would be mixed in
    /// (sandboxes started together) or the sandbox's processes are not isobench's children.
    usage: Option<Usage>,
    device: Option<((u32, u32), DiskCounters)>,
    /// The run's volume daemons' CPU so far, with the token that marks them.
    volume_daemons: Option<(String, f64)>,
    /// The whole machine's perf counters, for a sandbox alone.
    machine: Option<Result<PerfStat>>,
    /// The CPU sampled by part, from before the sandbox starts (so that perf sees its programs
    /// start, and knows their files: gVisor's sentry cannot be found in its own root later);
    /// a served cell marks its measured phase with `end_parts_window`.
    parts: std::sync::Mutex<Option<Result<PerfRecord>>>,
    parts_window: std::sync::Mutex<Option<PartsWindow>>,
    /// Why the CPU is not counted, for the run's notes.
    not_counted: Option<String>,
    /// Where the sandbox ran against where the volume's disk interrupted (a cgroup only).
    placement: Option<Placement>,
    /// The CPU time the hypervisor had taken from the machine when the sandbox started.
    stolen: Option<f64>,
}

impl HostCounters {
    /// `alone`: no other sandbox of isobench's runs meanwhile; `count`: how the environment's
    /// processes can be counted; `parts`: where to sample the run's CPU by part, if it is.
    pub fn start(
        volume: &Provisioned,
        alone: bool,
        count: CpuCount,
        ledger: &Ledger,
        parts: Option<&std::path::Path>,
    ) -> HostCounters {
        let device = device_under(&volume.path).and_then(|d| Some((d, DiskCounters::read(d)?)));
        // Alone only: a daemon serves one volume, but other sandboxes' volumes would mix in.
        let token = ledger.token().to_string();
        let volume_daemons =
            alone.then(|| named_processes_cpu(&token, VOLUME_DAEMONS).map(|cpu| (token, cpu))).flatten();
        let machine = alone.then(PerfStat::machine);
        let mut counters = HostCounters {
            group: None,
            tree: None,
            split_by_tree: count == CpuCount::GroupSplitByTree,
            usage: None,
            device,
            volume_daemons,
            machine,
            parts: Default::default(),
            parts_window: Default::default(),
            not_counted: None,
            placement: None,
            stolen: crate::sys::stolen_cpu_s(),
        };
        match count {
            CpuCount::Group | CpuCount::GroupSplitByTree => match make_group(ledger) {
                Ok(group) => {
                    // The samples are told apart by their processes, which the tree knows.
                    if count == CpuCount::GroupSplitByTree || parts.is_some() {
                        counters.tree = group.clone().map(TreeSampler::start);
                    }
                    if let Some(data) = parts.filter(|_| group.is_some()) {
                        counters.parts = std::sync::Mutex::new(Some(PerfRecord::machine(data, SAMPLES_PER_SECOND)));
                    }
                    counters.placement = group.as_ref().and_then(|g| Placement::start(&volume.path, g));
                    counters.group = group;
                }
                Err(e) => counters.not_counted = Some(format!("the sandbox's CPU was not counted: {e:#}")),
            },
            CpuCount::Reaped if alone => counters.usage = Some(Usage::children()),
            CpuCount::Reaped | CpuCount::Unknown => {}
        }
        counters
    }

    /// Where the environment starts the sandbox's processes, when they are counted there.
    pub fn cpu_group(&self) -> Option<&CpuGroup> {
        self.group.as_ref()
    }

    /// Starts counting the system calls and page faults of the sandbox's processes (a cgroup
    /// only: elsewhere they are not known apart from others').
    pub fn count_calls(&self) -> Option<Result<PerfStat>> {
        let pids: Vec<i32> = self.group.as_ref()?.processes().iter().map(|p| p.pid).collect();
        Some(PerfStat::processes(&pids))
    }

    /// CPU seconds the sandbox's processes used so far, while they run (a cgroup only).
    pub fn cpu_now(&self) -> Option<f64> {
        self.group.as_ref()?.cpu_s()
    }

    /// Ends the sampling of the sandbox's CPU by part: its window is from `from`
    /// ([`monotonic_now`]) to now, in which the sandbox's own count was `measured` CPU-seconds.
    /// `finish` reads the samples, once the sandbox is gone.
    pub fn end_parts_window(&self, from: f64, measured: Option<f64>) {
        let (Some(record), Some(group)) = (self.parts.lock().unwrap().take(), &self.group) else { return };
        let to = monotonic_now();
        // Read now: the processes live until the cell stops them.
        let seen = group.processes().into_iter().map(|p| (p.pid, p)).collect();
        let window = PartsWindow { recorded: record.and_then(PerfRecord::stop), from, to, measured, seen };
        *self.parts_window.lock().unwrap() = Some(window);
    }

    pub fn finish(self, report: &mut AgentReport) {
        let value = |metric: &str| report.samples.iter().find(|s| s.metric == metric).map(|s| s.value);
        // The sandbox's kernel's count, unless the process tree tells the workload apart: it
        // cannot when no process is below the runtime's own (gVisor's KVM platform runs the
        // workload in the sentry's threads).
        let seen = self.tree.map(TreeSampler::stop);
        let whole_run = self.parts.into_inner().unwrap().map(|record| record.and_then(PerfRecord::stop));
        let split = seen
            .as_ref()
            .filter(|_| self.split_by_tree)
            .map(|seen| split_at(seen, 2))
            .filter(|split| split.workload > 0.0);
        let tree_workload = split.as_ref().map(|split| split.workload);
        let workload = tree_workload.or(value("sys.cpu_workload"));
        let mut samples = Vec::new();
        let mut host = match &self.group {
            Some(group) => group.cpu_s(),
            None => self.usage.map(|before| Usage::children().since(&before).cpu_s),
        };
        if let (Some(group), Some(placement)) = (&self.group, self.placement) {
            let share = placement.finish(group);
            samples.extend(share.map(|share| Sample::new(DISK_IRQ_CPU_SHARE, share * 100.0, "%")));
        }
        if let Some(group) = &self.group {
            // Left to the ledger if a process in it is still exiting.
            let _ = remove_cgroup(group.relative());
        }
        report.notes.extend(self.not_counted);
        let counted_by = match (&self.group, tree_workload) {
            (Some(_), Some(_)) => Some("a cgroup of the sandbox's own, the workload told apart by the process tree"),
            (Some(_), None) => Some("a cgroup of the sandbox's own"),
            (None, _) => self.usage.map(|_| "isobench's reaped children"),
        };
        if let Some(by) = counted_by.filter(|_| host.is_some()) {
            report.setup.insert("sys.cpu_counted_by".into(), by.into());
        }
        if let (Some(seen), Some(own)) = (host, workload)
            && seen < own * HOST_SAW_AT_LEAST
        {
            // Processes that left isobench's tree (gVisor's systrap stubs, which run the
            // workload's own code) took their CPU with them: the host's count is short.
            report.notes.push(format!(
                "the host counted {seen:.2} CPU-s for the sandbox's processes, less than the {own:.2} CPU-s the workload's own kernel counted: some of its processes were not counted, so the runtime's share of the CPU is not known"
            ));
            host = None;
        }
        let window = self.parts_window.into_inner().unwrap();
        let stolen = self.stolen.zip(crate::sys::stolen_cpu_s()).map(|(before, now)| now - before);
        let parts =
            sampled_parts(window, whole_run, seen.as_ref(), host, stolen, &mut report.code_maps, &mut report.setup);
        samples.extend(parts.0);
        report.functions = parts.1;
        if let Some(host) = host {
            samples.push(Sample::new("sys.cpu_host", host, "s"));
            if let Some(split) = &split {
                samples.push(Sample::new("sys.cpu_workload_host", split.workload, "s"));
                for (name, cpu) in &split.runtime {
                    samples.push(Sample::new(format!("{RUNTIME_BY}{name}"), *cpu, "s"));
                }
            }
            if let Some(workload) = workload {
                samples.push(Sample::new("sys.cpu_runtime", (host - workload).max(0.0), "s"));
            }
        }
        // Of everything that hosted the sandbox: the workload's own CPU alone would hide the
        // runtime's.
        if let Some(ops) = value("ops").filter(|n| *n > 0.0)
            && let Some(cpu) = host
        {
            samples.push(Sample::new("sys.cpu_per_op", cpu / ops * 1e6, "us"));
        }
        if let Some((token, before)) = &self.volume_daemons
            && let Some(now) = named_processes_cpu(token, VOLUME_DAEMONS)
        {
            samples.push(Sample::new("sys.cpu_volume", now - before, "s"));
        }
        if let Some((device, before)) = self.device
            && let Some(after) = DiskCounters::read(device)
        {
            let io = after.since(&before);
            let name = device_name(device).unwrap_or_else(|| "?".into());
            report.setup.insert("sys.device".into(), format!("{name} ({}:{})", device.0, device.1));
            samples.push(Sample::new("sys.device_read_bytes", io.read_bytes as f64, "B"));
            samples.push(Sample::new("sys.device_write_bytes", io.write_bytes as f64, "B"));
            samples.push(Sample::new("sys.device_busy", io.busy_ms as f64 / 1000.0, "s"));
            if let Some(written) = value("write_bytes").filter(|b| *b > 0.0) {
                samples.push(Sample::new("sys.device_write_ratio", io.write_bytes as f64 / written, "x"));
            }
        }
        if let Some(machine) = self.machine {
            perf_samples(machine.and_then(PerfStat::finish), &mut samples, report);
        }
        report.samples.extend(samples);
    }
}

/// `sys.perf.EVENT` for each event perf counted (`cache-misses` as `cache_misses`) and the
/// instructions per cycle, with what perf could not count in the setup.
fn perf_samples(counted: Result<crate::sys::PerfCounts>, samples: &mut Vec<Sample>, report: &mut AgentReport) {
    let counts = match counted {
        Ok(counts) => counts,
        Err(e) => {
            report.setup.insert(PERF.into(), format!("not counted: {e:#}"));
            return;
        }
    };
    for (event, count) in &counts.counted {
        samples.push(Sample::new(format!("{PERF}.{}", event.replace('-', "_")), *count, "events"));
    }
    if let (Some(instructions), Some(cycles)) = (counts.get("instructions"), counts.get("cycles"))
        && cycles > 0.0
    {
        samples.push(Sample::new(format!("{PERF}.ipc"), instructions / cycles, IPC_UNIT));
    }
    let mut scope = "perf stat --all-cpus: every process of the machine while this run ran alone".to_string();
    if !counts.not_supported.is_empty() {
        scope += &format!("; this machine does not expose {}", counts.not_supported.join(", "));
    }
    report.setup.insert(PERF.into(), scope);
}

/// A cgroup for one sandbox, recorded before it is made.
fn make_group(ledger: &Ledger) -> Result<Option<CpuGroup>> {
    let name = format!("isobench-{}", ledger.new_process_token());
    let Some(group) = CpuGroup::locate(&name) else { return Ok(None) };
    ledger.record(Resource::Cgroup { path: group.relative().to_path_buf() })?;
    group.create()?;
    Ok(Some(group))
}

/// How `sys.host_syscalls` and `sys.host_page_faults` are counted, for the run's setup.
pub const CALLS_COUNTED_BY: &str = "perf stat --pid on the sandbox's processes during the measured phase: the system calls the host's kernel entered (one that gVisor's seccomp filter traps is not one) and the page faults it took";

/// The system calls and page faults of the measured phase, and per operation of the load: what
/// a sandbox that intercepts them pays for, counted where it does not (the baseline).
pub fn calls_per_op(counts: &crate::sys::PerfCounts, samples: &[Sample]) -> Vec<Sample> {
    let ops = samples.iter().find(|s| s.metric == "ops").map(|s| s.value).filter(|n| *n > 0.0);
    let mut out = Vec::new();
    for (event, metric) in [(crate::sys::SYSCALLS, "sys.host_syscalls"), ("page-faults", "sys.host_page_faults")] {
        if let Some(count) = counts.get(event) {
            out.push(Sample::new(metric, count, "events"));
            if let Some(ops) = ops {
                out.push(Sample::new(format!("{metric}_per_op"), count / ops, "events"));
            }
        }
    }
    out
}

/// The server's CPU during the measured phase, and per operation of the load: its CPU over its
/// whole life (start, ring, stop) would bury the load's.
pub fn per_op(measured_cpu: f64, samples: &[Sample]) -> Vec<Sample> {
    let mut out = vec![Sample::new("sys.cpu_measured", measured_cpu, "s")];
    if let Some(ops) = samples.iter().find(|s| s.metric == "ops").map(|s| s.value).filter(|n| *n > 0.0) {
        out.push(Sample::new("sys.cpu_per_op", measured_cpu / ops * 1e6, "us"));
    }
    out
}

/// How often the tree's processes are read: a process's CPU is only readable while it lives,
/// so each one's last reading misses at most this much of its life (and nothing is read while
/// the workload runs but a few small files).
const TREE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// Reads the processes of a sandbox's cgroup on a thread of its own until `stop`.
struct TreeSampler {
    /// Dropped to stop the thread: it wakes at once rather than at its next reading (a quarter
    /// of a second of every run it cost when it slept).
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<HashMap<i32, ProcessCpu>>>,
}

impl TreeSampler {
    fn start(group: CpuGroup) -> TreeSampler {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let (mut last, mut done) = (HashMap::new(), false);
            loop {
                for process in group.processes() {
                    let pid = process.pid;
                    let process = process.after(last.get(&pid));
                    last.insert(pid, process);
                }
                if done {
                    return last;
                }
                done = matches!(stopped.recv_timeout(TREE_EVERY), Err(std::sync::mpsc::RecvTimeoutError::Disconnected));
            }
        });
        TreeSampler { stop: Some(stop), thread: Some(thread) }
    }

    /// Every process seen in the group, as read last while it lived.
    fn stop(mut self) -> HashMap<i32, ProcessCpu> {
        drop(self.stop.take());
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

/// The sampled parts and functions of a served cell's measured phase (`window`) or, without one,
/// of the whole run; nothing where nothing was sampled.
fn sampled_parts(
    window: Option<PartsWindow>,
    whole_run: Option<Result<crate::sys::sampling::Recorded>>,
    seen: Option<&HashMap<i32, ProcessCpu>>,
    host: Option<f64>,
    stolen: Option<f64>,
    code_maps: &mut Vec<crate::store::RawFile>,
    setup: &mut BTreeMap<String, String>,
) -> (Vec<Sample>, Vec<FunctionCpu>) {
    for map in code_maps.iter() {
        let _ = crate::sys::sampling::keep("map", map.content.as_bytes());
    }
    let recordings = code_maps.extract_if(.., |m| m.name.starts_with(crate::workload::JAVA_SAMPLES_PREFIX));
    let java = interpreted_methods(recordings.collect(), window.as_ref().map(|w| (w.from, w.to)), setup);
    let names = code_names(code_maps.drain(..));
    if let Some(mut w) = window {
        // With the processes that ended in the window, as a server's per-connection backends
        // do when its load disconnects: their samples are the window's too.
        for (pid, process) in seen.into_iter().flatten() {
            w.seen.entry(*pid).or_insert_with(|| process.clone());
        }
        let sampled = w.recorded.and_then(|r| r.samples(Some((w.from, w.to)), &pids_of(&w.seen)));
        parts_samples(sampled, &w.seen, w.measured, stolen, &names, &java, setup)
    } else if let (Some(recorded), Some(seen)) = (whole_run, seen) {
        let sampled = recorded.and_then(|r| r.samples(None, &pids_of(seen)));
        parts_samples(sampled, seen, host, stolen, &names, &java, setup)
    } else {
        Default::default()
    }
}

/// The methods the JVMs' own samples (`sys::jfr`) found their interpreter running in `window`
/// (the host's monotonic clock; the whole recording without one), by thread and method.
fn interpreted_methods(
    recordings: Vec<crate::store::RawFile>,
    window: Option<(f64, f64)>,
    setup: &mut BTreeMap<String, String>,
) -> BTreeMap<(String, String), usize> {
    use base64::Engine as _;
    if recordings.is_empty() {
        return BTreeMap::new();
    }
    // The JVM stamps its samples with the wall clock, which a sandbox shares with the host.
    let unix = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let offset = unix.as_secs_f64() - monotonic_now();
    let window = window.map(|(from, to)| (from + offset, to + offset));
    let (mut counts, mut recorded, mut sampled) = (BTreeMap::new(), 0, 0);
    for recording in recordings {
        let read = base64::engine::general_purpose::STANDARD
            .decode(&recording.content)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| crate::sys::jfr::read(&bytes));
        match read {
            Ok(samples) => {
                let phase: Vec<_> = crate::sys::jfr::within(&samples, window).collect();
                recorded += samples.len();
                sampled += phase.len();
                for (key, n) in crate::sys::jfr::interpreted(phase.into_iter()) {
                    *counts.entry(key).or_default() += n;
                }
            }
            Err(e) => {
                setup.insert(JAVA_SAMPLES.into(), format!("not read: {e:#}"));
                return BTreeMap::new();
            }
        }
    }
    let interpreted: usize = counts.values().sum();
    // Few where the node's CPUs are busy: HotSpot gives up a sample whose thread has not answered
    // its suspending signal within 2 ms, and under gVisor that signal goes through the sentry.
    setup.insert(
        JAVA_SAMPLES.into(),
        format!(
            "{sampled} of the JVM's samples of its Java threads in the phase ({recorded} in its recording), {interpreted} of them interpreted"
        ),
    );
    counts
}

/// The setup entry that says how many of the JVM's own samples the interpreter's split rests on.
const JAVA_SAMPLES: &str = "sys.cpu_java_samples";

/// What the sandbox's processes said of their code, by each file's name.
fn code_names(maps: impl Iterator<Item = crate::store::RawFile>) -> CodeNames {
    let (mut jit, mut mapped) = (Vec::new(), Vec::new());
    for map in maps {
        if map.name.starts_with(crate::workload::MAPPINGS_PREFIX) {
            mapped.push(MappedFiles::parse(&map.content));
        } else {
            jit.push(JitMap::parse(&map.content));
        }
    }
    CodeNames::new(jit, mapped)
}

/// A served cell's measured phase, sampled.
struct PartsWindow {
    recorded: Result<crate::sys::sampling::Recorded>,
    from: f64,
    to: f64,
    /// The sandbox's own count of its CPU in the window.
    measured: Option<f64>,
    /// Its processes, by pid.
    seen: HashMap<i32, ProcessCpu>,
}

/// Where a run's parts were scaled to its sandbox's count, by how much: a figure of the run, kept
/// apart from how the parts are found (`sys.cpu_parts_by`), which is a component of its setup.
const PARTS_SCALED: &str = "sys.cpu_parts_scaled";

/// How `sys.cpu_part.*` are found, for the run's setup.
pub const PARTS_COUNTED_BY: &str = "perf record -e cpu-clock on every CPU with frame-pointer call chains, the samples of the sandbox's processes resolved to parts by process role and call chain";

fn pids_of(seen: &HashMap<i32, ProcessCpu>) -> Vec<i32> {
    seen.keys().copied().collect()
}

/// `sys.cpu_part.PART` (CPU-seconds) for each part the samples of the sandbox's processes
/// (`seen`, by pid) went to, `sys.cpu_sampled` what they stand for, and
/// `sys.cpu_part.unexplained`: the samples no part took, plus what the sandbox's own count
/// (`measured`) has that the samples do not. Where the samples stand for more than that count,
/// each part is its share of the count: the CPU clock they are taken on runs on while the
/// hypervisor holds the CPU (`stolen`, the machine's in the run), the sandbox's count does not.
/// The interpreter's functions are split by the methods `interpreted` counts.
fn parts_samples(
    sampled: Result<Vec<StackSample>>,
    seen: &HashMap<i32, ProcessCpu>,
    measured: Option<f64>,
    stolen: Option<f64>,
    names: &CodeNames,
    interpreted: &BTreeMap<(String, String), usize>,
    setup: &mut std::collections::BTreeMap<String, String>,
) -> (Vec<Sample>, Vec<FunctionCpu>) {
    let samples = match sampled {
        Ok(samples) => samples,
        Err(e) => {
            setup.insert("sys.cpu_parts_by".into(), format!("not sampled: {e:#}"));
            return Default::default();
        }
    };
    let roles = cpu_parts::roles(seen);
    let mut parts = cpu_parts::attribute(&samples, &roles, names);
    parts.split_interpreter(interpreted);
    let scale = match measured {
        Some(m) if parts.sampled > m && m > 0.0 => {
            let stolen = stolen.map_or(String::new(), |s| format!(", {s:.2} CPU-s of the machine's taken in the run"));
            setup.insert(
                PARTS_SCALED.into(),
                format!(
                    "the samples stood for {:.2} CPU-s, the sandbox's count for {m:.2}: each part is its share of the count (the samples' clock runs on while the hypervisor holds the CPU{stolen})",
                    parts.sampled
                ),
            );
            m / parts.sampled
        }
        _ => 1.0,
    };
    // Every part, those no sample went to at 0: each run of a cell has the same metrics.
    let mut out: Vec<Sample> = cpu_parts::Part::ALL
        .iter()
        .map(|part| {
            let seconds = parts.seconds.get(part).copied().unwrap_or(0.0) * scale;
            Sample::new(format!("{CPU_PART}{}", part.name()), seconds, "s")
        })
        .collect();
    let gap = measured.map_or(0.0, |m| (m - parts.sampled).max(0.0));
    out.push(Sample::new(format!("{CPU_PART}{UNEXPLAINED}"), parts.unresolved * scale + gap, "s"));
    out.push(Sample::new("sys.cpu_sampled", parts.sampled, "s"));
    setup.insert("sys.cpu_parts_by".into(), format!("{PARTS_COUNTED_BY}, {SAMPLES_PER_SECOND} per second per CPU"));
    let split = !interpreted.is_empty();
    let by: Vec<&str> = [
        (names.has_jit(), JIT_NAMED_BY),
        (split, crate::sys::jfr::NAMED_BY),
        (names.has_mappings(), MAPPINGS_NAMED_BY),
    ]
    .into_iter()
    .filter_map(|(given, by)| given.then_some(by))
    .collect();
    if !by.is_empty() {
        setup.insert("sys.cpu_functions_by".into(), format!("perf's symbols; {}", by.join("; ")));
    }
    (out, largest_functions(parts.functions, parts.sampled + gap))
}

/// How JIT-compiled code is named, for the run's setup.
const JIT_NAMED_BY: &str = "for a JIT's code, the JVM's own map of it (-XX:+DumpPerfMapAtExit, fetched from the sandbox when the server or command exited)";

/// How native code perf knew no mapping of is named, for the run's setup.
const MAPPINGS_NAMED_BY: &str = "for code perf knew no mapping of, the server's own mappings (/proc/PID/maps, read in the sandbox before it stopped) and the mapped files' symbols";

/// The functions a run keeps: those of at least `FUNCTION_SHARE_KEPT` of the sandbox's CPU, at
/// most `FUNCTIONS_KEPT`, the largest first.
fn largest_functions(functions: BTreeMap<(Part, String, String), f64>, total: f64) -> Vec<FunctionCpu> {
    let mut kept: Vec<FunctionCpu> = functions
        .into_iter()
        .map(|((part, thread, function), seconds)| FunctionCpu {
            part: part.name().into(),
            thread,
            function,
            share: seconds / total.max(1e-9),
        })
        .filter(|f| f.share >= FUNCTION_SHARE_KEPT)
        .collect();
    kept.sort_by(|a, b| b.share.total_cmp(&a.share));
    kept.truncate(FUNCTIONS_KEPT);
    kept
}

const FUNCTION_SHARE_KEPT: f64 = 0.001;
const FUNCTIONS_KEPT: usize = 200;

/// A sandbox's processes' CPU, as read last while they lived.
#[derive(Debug, PartialEq)]
struct TreeSplit {
    workload: f64,
    /// The runtime's processes, by name.
    runtime: std::collections::BTreeMap<String, f64>,
}

/// The CPU of the processes `depth` or more levels below a process whose parent is not in
/// `seen`, and of the others by name.
fn split_at(seen: &HashMap<i32, ProcessCpu>, depth: usize) -> TreeSplit {
    let level = |mut pid: i32| {
        let mut level = 0;
        while let Some(parent) = seen.get(&pid).map(|p| p.parent).filter(|p| seen.contains_key(p)) {
            (pid, level) = (parent, level + 1);
            if level > seen.len() {
                break;
            }
        }
        level
    };
    let mut split = TreeSplit { workload: 0.0, runtime: Default::default() };
    for process in seen.values() {
        if level(process.pid) >= depth {
            split.workload += process.cpu_s;
        } else {
            *split.runtime.entry(process.name.clone()).or_default() += process.cpu_s;
        }
    }
    split
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_is_what_the_runtimes_own_processes_forked() {
        // runsc (1) started the gofer (2) and the sentry (3); the sentry forked stubs (4, 5),
        // one through an intermediate (6).
        let tree = [
            (1, 0, 0.1, "runsc"),
            (2, 1, 0.5, "runsc-gofer"),
            (3, 1, 2.5, "runsc-sandbox"),
            (4, 3, 1.2, "runsc-sandbox"),
            (6, 3, 0.0, "runsc-sandbox"),
            (5, 6, 0.2, "runsc-sandbox"),
        ];
        let seen = tree
            .iter()
            .map(|&(pid, parent, cpu_s, name)| {
                (pid, ProcessCpu { pid, parent, cpu_s, name: name.into(), named_by_comm: false })
            })
            .collect();
        let split = split_at(&seen, 2);
        assert!((split.workload - 1.4).abs() < 1e-9);
        let runtime: Vec<(&str, f64)> = split.runtime.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert_eq!(runtime, [("runsc", 0.1), ("runsc-gofer", 0.5), ("runsc-sandbox", 2.5)]);
        assert_eq!(split_at(&HashMap::new(), 2).workload, 0.0);
    }

    #[test]
    fn samples_over_the_sandboxs_count_are_its_shares_and_samples_under_it_leave_the_rest_unexplained() {
        // A process of the workload: 3 samples in its code, 1 in the host's kernel, 4 ms each.
        let seen = HashMap::from([(
            7,
            ProcessCpu { pid: 7, parent: 1, cpu_s: 0.0, name: "loop".into(), named_by_comm: false },
        )]);
        let frame = |dso: &str| crate::sys::sampling::Frame { ip: 0, symbol: "f".into(), dso: dso.into() };
        let sample = |dso: &str| StackSample {
            comm: "loop".into(),
            pid: 7,
            tid: 7,
            time_s: 0.0,
            period_ns: 4_000_000,
            frames: vec![frame(dso)],
        };
        let samples =
            || Ok(vec![sample("/bin/loop"), sample("/bin/loop"), sample("/bin/loop"), sample("[kernel.kallsyms]")]);
        let names = CodeNames::new(Vec::new(), Vec::new());
        let part =
            |out: &[Sample], name: &str| out.iter().find(|s| s.metric == format!("{CPU_PART}{name}")).unwrap().value;
        let mut setup = BTreeMap::new();
        // 16 ms sampled where the sandbox's cgroup counted 8: the hypervisor held the CPU.
        let (over, _) = parts_samples(samples(), &seen, Some(0.008), Some(1.5), &names, &BTreeMap::new(), &mut setup);
        assert!(
            (part(&over, "app") - 0.006).abs() < 1e-12 && (part(&over, "host_kernel") - 0.002).abs() < 1e-12,
            "{over:?}"
        );
        assert_eq!(part(&over, UNEXPLAINED), 0.0);
        let said = &setup[PARTS_SCALED];
        assert!(
            said.contains("stood for 0.02 CPU-s, the sandbox's count for 0.01") && said.contains("1.50 CPU-s"),
            "{said}"
        );
        assert!(setup["sys.cpu_parts_by"].starts_with(PARTS_COUNTED_BY), "a component, the same in every run");
        // 16 ms sampled where it counted 20: the 4 the samples missed are unexplained.
        let mut setup = BTreeMap::new();
        let (under, _) = parts_samples(samples(), &seen, Some(0.020), None, &names, &BTreeMap::new(), &mut setup);
        assert!(
            (part(&under, "app") - 0.012).abs() < 1e-12 && (part(&under, UNEXPLAINED) - 0.004).abs() < 1e-12,
            "{under:?}"
        );
        assert!(!setup.contains_key(PARTS_SCALED));
    }
}
