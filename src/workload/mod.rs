//! What is measured. Each kind is one file; its configuration is parsed from the suite on the
//! host and travels to the agent inside the sandbox as a `Spec`, where `run` executes it.

pub mod command;
pub mod cpu;
pub mod cql;
pub mod fio;
pub mod memory;
pub mod network;
pub mod oltp;
pub mod pgbench;
pub mod redis_bench;
pub mod served;
pub mod sysbench;
pub mod syscall;

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::store::{RawFile, Sample, Series};
use crate::syntax::{Fields, SuiteError};
use cql_stress::capacity::{Bound, CLIENT_LIMIT_NOTE, Plan, Search};

/// What one run of a workload produced.
#[derive(Default, Debug)]
pub struct Output {
    pub samples: Vec<Sample>,
    pub series: Vec<Series>,
    pub raw: Vec<RawFile>,
    pub notes: Vec<String>,
    /// A capacity search's steps.
    pub steps: Vec<cql_stress::capacity::Step>,
    /// What the processes it ran said of their code (`store::AgentReport::code_maps`).
    pub code_maps: Vec<RawFile>,
}

/// The JIT map a process wrote as it exited (a JVM with `sys::jit_map::JVM_FLAGS`), taken out of
/// the environment's /tmp for the host: a map left there would name another run's process of the
/// same pid.
pub fn take_jit_map(pid: i32) -> Option<RawFile> {
    let path = crate::sys::jit_map::path_of(pid);
    let content = std::fs::read_to_string(&path).ok()?;
    let _ = std::fs::remove_file(&path);
    Some(RawFile { name: format!("{JIT_MAP_PREFIX}{pid}.map"), content })
}

/// The mappings of a live process, as its kernel shows them (`/proc/PID/maps`): inside gVisor,
/// its files at the addresses the workload sees them, which perf may not know. A server that runs
/// as a user of its own (PostgreSQL) shows them only to that user where the sandbox's root may
/// not trace processes: they are then read as it.
pub fn mappings_of(pid: i32) -> Option<RawFile> {
    let path = format!("/proc/{pid}/maps");
    let content = match std::fs::read_to_string(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let id =
                |key: &str| status.lines().find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok());
            let read = std::process::Command::new("cat").arg(&path).uid(id("Uid:")?).gid(id("Gid:")?).output().ok()?;
            read.status.success().then(|| String::from_utf8_lossy(&read.stdout).into_owned())?
        }
        read => read.ok()?,
    };
    Some(RawFile { name: format!("{MAPPINGS_PREFIX}{pid}"), content })
}

/// A JVM's recording of its own samples (`sys::jfr`), written as it exited, taken out of the
/// environment for the host, which reads it: binary, so in base64.
pub fn take_java_samples(pid: i32, recording: &Path) -> Option<RawFile> {
    use base64::Engine as _;
    let bytes = std::fs::read(recording).ok()?;
    let _ = std::fs::remove_file(recording);
    let content = base64::engine::general_purpose::STANDARD.encode(bytes);
    Some(RawFile { name: format!("{JAVA_SAMPLES_PREFIX}{pid}.jfr"), content })
}

/// How the code maps are told apart: a JIT's map, a process's mappings, a JVM's own samples.
pub const JIT_MAP_PREFIX: &str = "perf-";
pub const MAPPINGS_PREFIX: &str = "maps-";
pub const JAVA_SAMPLES_PREFIX: &str = "jfr-";

/// Where and with what a workload runs, as the agent sees it.
pub struct RunContext<'a> {
    /// The volume under test.
    pub data_dir: &'a Path,
    /// A raw volume: the device or NBD export itself (then `data_dir` is only a working directory).
    pub raw: Option<&'a crate::volume::RawTarget>,
    /// Nothing may be written to the volume.
    pub read_only: bool,
    /// A private directory for temporary files, not on the volume under test.
    pub scratch_dir: &'a Path,
}

/// A workload refused to start because the cell cannot work (not because a run went wrong):
/// the same cell would fail the same way every time, so its other repetitions are skipped.
#[derive(Debug)]
pub struct Unfit(pub String);

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unfit {}

/// What a capacity search records besides its steps.
pub const CAPACITY_METRICS: [&str; 3] = ["capacity", "capacity_latency", "capacity_steps"];

/// Metrics a run records beside its workload's, by the prefix each family's names share: the
/// machine's and the sandbox's counters, the database's phases and sizes, a capacity search's
/// steps, a density run's sandboxes, a VM's boot, the loaders.
pub const RUN_METRIC_FAMILIES: [&str; 9] =
    ["sys.", "server_", "step.", "sandbox", "start_latency_", "vm_boot", "loader", "total_time", "cpu_"];

/// Every metric a run of `workload` records by name, but for the families the run adds beside
/// it (`RUN_METRIC_FAMILIES`).
pub fn metrics(workload: &dyn Workload) -> Vec<String> {
    let mut all = workload.recorded();
    if workload.capacity().is_some() {
        all.extend(CAPACITY_METRICS.map(String::from));
    }
    all.sort();
    all.dedup();
    all
}

/// Whether a run of `workload` records `metric`, as far as can be known before it runs.
pub fn records(workload: &dyn Workload, metric: &str) -> bool {
    RUN_METRIC_FAMILIES.iter().any(|family| metric.starts_with(family)) || metrics(workload).iter().any(|m| m == metric)
}

pub trait Workload {
    /// Programs that must exist where the workload runs.
    fn programs(&self) -> Vec<&str>;
    /// Metrics for the terminal table, most important first.
    fn headline(&self) -> Vec<&'static str>;
    /// Every metric its own output gives (its headline among them), that a `[[bound]]` may
    /// name; see `metrics` for all a run records.
    fn recorded(&self) -> Vec<String> {
        self.headline().into_iter().map(String::from).collect()
    }
    /// What the workload does, for validity checks and reports ("fio.direct" = "true" …).
    fn describe(&self) -> BTreeMap<String, String>;
    /// How long one run should take (for the ETA).
    fn expected_duration(&self) -> Duration;
    /// How long one run may take before its sandbox is stopped (a capacity search: its budget).
    fn timeout(&self) -> Duration {
        match self.capacity() {
            Some(plan) => capacity_timeout(plan),
            None => self.expected_duration() * 3 + Duration::from_secs(180),
        }
    }
    /// Whether it writes to the volume under test (a read-only volume refuses the cell).
    fn writes_volume(&self) -> bool {
        false
    }
    /// Whether it talks to a peer on the host over the sandbox's network path.
    fn needs_network(&self) -> bool {
        false
    }
    /// The capacity search it runs in place of one measurement, if it runs one.
    fn capacity(&self) -> Option<&Plan> {
        None
    }
    /// Runs once, inside the environment.
    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()>;
}

/// A workload's concrete configuration (one cell's values).
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Spec {
    Fio(fio::Fio),
    Cql(cql::Cql),
    Cpu(cpu::Cpu),
    Memory(memory::Memory),
    Network(network::Network),
    Syscall(syscall::Syscall),
    Pgbench(pgbench::Pgbench),
    #[serde(rename = "redis-benchmark")]
    RedisBenchmark(redis_bench::RedisBenchmark),
    Oltp(oltp::Oltp),
    Command(command::Command),
}

impl Spec {
    pub fn workload(&self) -> &dyn Workload {
        match self {
            Spec::Fio(w) => w,
            Spec::Cql(w) => w,
            Spec::Cpu(w) => w,
            Spec::Memory(w) => w,
            Spec::Network(w) => w,
            Spec::Syscall(w) => w,
            Spec::Pgbench(w) => w,
            Spec::RedisBenchmark(w) => w,
            Spec::Oltp(w) => w,
            Spec::Command(w) => w,
        }
    }

    /// A load of a database server isobench starts, run from the host.
    pub fn served_load(&self) -> Option<&dyn served::ServedLoad> {
        match self {
            Spec::Pgbench(w) => Some(w),
            Spec::RedisBenchmark(w) => Some(w),
            Spec::Oltp(w) => Some(w),
            _ => None,
        }
    }

    /// Puts the volume in the state the workload's I/O will find it in through a block's slices
    /// (fio's files written once); says what it did, if anything.
    pub fn precondition(&self, ctx: &RunContext) -> Result<Option<String>> {
        match self {
            Spec::Fio(f) => f.precondition(ctx),
            _ => Ok(None),
        }
    }

    /// For a workload whose runs are cut in slices (fio's `slice`): how.
    pub fn sliced(&self) -> Option<Sliced> {
        match self {
            Spec::Fio(f) => f.sliced().map(|(slice, count, length)| Sliced { slice: Spec::Fio(slice), count, length }),
            _ => None,
        }
    }
}

/// A run cut in slices: the spec of one slice, how many make the run, and how long each is.
pub struct Sliced {
    pub slice: Spec,
    pub count: u32,
    pub length: Duration,
}

/// Where suite-relative paths (job files) are resolved.
pub struct ParseContext<'a> {
    pub suite_dir: &'a Path,
}

impl ParseContext<'_> {
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.suite_dir.join(path)
    }
}

/// A workload kind: its name, the keys whose values are lists by nature (every other list is a
/// matrix axis), how to read one cell's configuration, and whether its operations have a
/// latency that a capacity search can bound.
pub struct Kind {
    pub name: &'static str,
    pub list_keys: &'static [&'static str],
    pub parse: fn(&mut Fields, &ParseContext) -> Result<Spec, SuiteError>,
    /// Whether a capacity search can bound its latency, or why not ("has no latency …").
    pub capacity: Result<(), &'static str>,
}

/// Why a kind without operations cannot search a capacity.
pub const NO_LATENCY: &str = "has no latency per operation to bound";

/// Where a kind's capacity search starts and how long its steps are, unless the suite says.
pub struct CapacityDefaults {
    pub start: f64,
    pub warmup: Duration,
    pub window: Duration,
}

/// How many more times a failed rate is offered before it counts, unless the suite says.
const CAPACITY_RETRIES: u32 = 1;

/// How long a capacity search may take unless the suite says.
const CAPACITY_BUDGET: Duration = Duration::from_secs(300);

/// `capacity = { percentile = 99, latency = "10ms", … }`: the latency bound a capacity search
/// holds and how it searches (`start`, `growth`, `resolution`, `warmup`, `window`, `budget`,
/// `max`, `retries`).
pub fn parse_capacity(f: &mut Fields, defaults: CapacityDefaults) -> Result<Option<Plan>, SuiteError> {
    let Some(mut c) = f.table("capacity")? else {
        return Ok(None);
    };
    let percentile = c.float("percentile")?.unwrap_or(99.0);
    if percentile.is_nan() || percentile <= 0.0 || percentile >= 100.0 {
        return Err(c.error_at("percentile", "must be above 0 and below 100, e.g. 99 or 99.9"));
    }
    let latency = c.duration("latency")?.ok_or_else(|| {
        c.error("the key \"latency\" is required: what the percentile must stay within, e.g. latency = \"10ms\"")
    })?;
    if latency.is_zero() {
        return Err(c.error_at("latency", "must be more than zero"));
    }
    let start = rate(&mut c, "start")?.unwrap_or(defaults.start);
    let growth = c.float("growth")?.unwrap_or(2.0);
    if growth.is_nan() || growth <= 1.0 || growth > 10.0 {
        return Err(c.error_at(
            "growth",
            "each ramp step multiplies the rate by it: must be more than 1 and at most 10, e.g. 2",
        ));
    }
    let resolution = c.percent("resolution")?.unwrap_or(5.0);
    if resolution <= 0.0 || resolution >= 100.0 {
        return Err(c.error_at("resolution", "must be above 0% and below 100%, e.g. \"5%\""));
    }
    let warmup = c.duration("warmup")?.unwrap_or(defaults.warmup);
    let window = c.duration("window")?.unwrap_or(defaults.window);
    if window < Duration::from_secs(1) {
        return Err(c.error_at("window", "each step's measured window must be at least 1s"));
    }
    let budget = c.duration("budget")?.unwrap_or(CAPACITY_BUDGET);
    if budget < warmup + window {
        return Err(c.error_at("budget", "must leave time for at least one step (warmup + window)"));
    }
    let max = rate(&mut c, "max")?;
    if max.is_some_and(|m| m < start) {
        return Err(c.error_at("max", "must not be below start"));
    }
    let retries = match c.uint("retries")? {
        None => CAPACITY_RETRIES,
        Some(n @ 0..=9) => n as u32,
        Some(_) => return Err(c.error_at("retries", "a failed rate is offered at most 9 more times, e.g. retries = 1")),
    };
    c.finish()?;
    let bound = Bound { percentile, latency_us: latency.as_secs_f64() * 1e6 };
    Ok(Some(Plan { bound, start, growth, resolution: resolution / 100.0, warmup, window, budget, max, retries }))
}

/// A database load's headline: the rate it was served at, its latencies and its errors; a
/// capacity search's, the highest rate that passed.
pub fn served_headline(capacity: bool) -> Vec<&'static str> {
    if capacity { vec!["capacity"] } else { vec!["op_rate", "latency_mean", "latency_p99", "errors"] }
}

/// What a capacity search is expected to take (for the ETA): a dozen steps and their setup,
/// within its budget.
pub fn capacity_duration(plan: &Plan) -> Duration {
    ((plan.step_time() + Duration::from_secs(1)) * 12).min(plan.budget)
}

/// The most a capacity search may take: its budget, a step that began just before the budget
/// ran out, and what runs around the steps.
pub fn capacity_timeout(plan: &Plan) -> Duration {
    plan.budget + plan.step_time() * 2 + Duration::from_secs(180)
}

/// A finished search as a run's output: the capacity (the highest rate that passed), the
/// latency there, every step, and what a reader must know (a lower bound, a client that set
/// the limit). A search that failed at every rate it offered fails the run with what it saw.
pub fn capacity_output(search: &Search, out: &mut Output) -> Result<()> {
    let plan = search.plan();
    let outcome = search.outcome();
    let steps = search.steps();
    out.steps = steps.to_vec();
    out.samples.push(Sample::new("capacity_steps", steps.len() as f64, "steps"));
    let Some(capacity) = outcome.capacity else {
        anyhow::bail!("{}", cql_stress::capacity::failed_at_start(plan, steps));
    };
    out.samples.push(Sample::new("capacity", capacity, "op/s"));
    if let Some(at) = &outcome.at {
        out.samples.push(Sample::new("capacity_latency", at.latency_us, "us"));
    }
    out.notes.extend(outcome.note(plan, steps.len()));
    if let Some(limit) = outcome.client_limit {
        out.notes.push(format!("{CLIENT_LIMIT_NOTE}{limit}"));
    }
    Ok(())
}

/// A rate: a number of operations per second, or text like "50k op/s".
pub fn rate(f: &mut Fields, key: &'static str) -> Result<Option<f64>, SuiteError> {
    let parsed = match f.node(key).map(|n| &n.value) {
        None => return Ok(None),
        Some(crate::syntax::Value::Str(text)) => figures::units::parse_rate(text),
        Some(_) => f.float(key)?.filter(|v| *v > 0.0).ok_or_else(|| "must be more than zero".to_string()),
    };
    match parsed {
        Ok(rate) if rate > MAX_RATE => {
            Err(f.error_at(key, format!("{rate} op/s is more than any rate a load offers (at most {MAX_RATE:e} op/s)")))
        }
        parsed => parsed.map(Some).map_err(|e| f.error_at(key, e)),
    }
}

/// The highest rate a suite may name: a billion operations per second, far beyond any
/// database's; above it, a typo.
const MAX_RATE: f64 = 1e9;
