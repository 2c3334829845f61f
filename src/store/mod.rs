//! The result set on disk: everything one `isobench run` produced. Nothing in it is ever
//! half-written: every file goes to a temporary name first and is renamed into place.
//!
//! ```text
//! results/<UTC timestamp>-<suite>/
//!   suite.toml          the resolved suite (overrides applied, secrets redacted)
//!   host.json           the machine: kernel, CPU, memory, tool versions, isobench version
//!   plan.json           the cells of the matrix and the run order
//!   runs/<cell>/<rep>.json
//!   raw/<cell>/<rep>/…  what the tools printed (fio's JSON, logs)
//!   samples.csv         cell,env,volume,workload,params,rep,metric,value,unit
//! ```

use std::collections::BTreeMap;

use figures::stats;
use serde::{Deserialize, Serialize};

mod clock;
mod result_set;

pub use clock::{utc_now, utc_stamp};
pub use result_set::ResultSet;

/// Selects cells by their labels: `env=runsc*,rw=randread` (every term must match; a term's
/// value is a glob). Keys: env, volume, workload, cell, or a workload parameter.
#[derive(Clone, Debug)]
pub struct Selector {
    terms: Vec<(String, glob::Pattern)>,
    text: String,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value) = term.split_once('=').ok_or_else(|| {
                format!("\"{term}\" is not a label selector; write key=pattern, e.g. env=runsc* or rw=randread")
            })?;
            let pattern =
                glob::Pattern::new(value.trim()).map_err(|e| format!("\"{value}\" is not a valid pattern: {e}"))?;
            terms.push((key.trim().to_string(), pattern));
        }
        if terms.is_empty() {
            return Err("the selector is empty; write key=pattern, e.g. env=host".into());
        }
        Ok(Selector { terms, text: text.to_string() })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.terms.iter().all(|(k, p)| labels.get(k).is_some_and(|v| p.matches(&v)))
    }

    /// Keys that no cell has (a typo in a filter should not silently select nothing).
    pub fn unknown_keys<'a>(&self, cells: impl Iterator<Item = &'a Labels> + Clone) -> Vec<String> {
        self.terms
            .iter()
            .filter(|(k, _)| !cells.clone().any(|labels| labels.get(k).is_some()))
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

/// How many runs each cell gets: a fixed number (`min == max`), or adaptive: at least `min`,
/// and more, a round at a time, while the CI of the cell's target metric is wider than
/// `target_ci_pct` (± % of the median), up to `max`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    pub min: u32,
    pub max: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ci_pct: Option<f64>,
    /// The metric whose CI decides; default: the cell's first headline metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

impl Repeat {
    pub fn fixed(n: u32) -> Repeat {
        Repeat { min: n, max: n, target_ci_pct: None, metric: None }
    }

    pub fn is_adaptive(&self) -> bool {
        self.target_ci_pct.is_some() && self.max > self.min
    }

    /// Whether a cell that has had `runs_done` runs, whose successful ones measured `values` of
    /// the target metric, should get another run.
    pub fn needs_another_run(&self, runs_done: u32, values: &[f64]) -> bool {
        if runs_done < self.min {
            return true;
        }
        if runs_done >= self.max || values.is_empty() {
            // At max, or nothing succeeded: more runs of a failing cell would only fail again.
            return false;
        }
        match (self.target_ci_pct, stats::summarize(values)) {
            (Some(target), Some(s)) => s.ci_half_width_pct() > target,
            _ => false,
        }
    }
}

impl std::fmt::Display for Repeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.target_ci_pct {
            Some(t) if self.is_adaptive() => write!(f, "{}–{} (until the CI is within ±{t}%)", self.min, self.max),
            _ => write!(f, "{}", self.min),
        }
    }
}

/// What one sandbox's agent measured and saw, as it sends it back to the host.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct AgentReport {
    pub samples: Vec<Sample>,
    #[serde(default)]
    pub series: Vec<Series>,
    pub facts: crate::facts::Facts,
    pub raw: Vec<RawFile>,
    pub notes: Vec<String>,
    /// Why the run failed, if it did.
    pub error: Option<String>,
    /// What the environment knows from the host side about this run (accelerator, attachment),
    /// added to the run's setup.
    #[serde(default)]
    pub setup: std::collections::BTreeMap<String, String>,
    /// The workload refused to start because this cell cannot work (see `workload::Unfit`).
    #[serde(default)]
    pub unfit: bool,
    /// A capacity search's steps, in the order they ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<cql_stress::capacity::Step>,
    /// What the processes it ran said of their code (`code_names`): a JIT's map of its compiled
    /// code (`perf-PID.map`), a process's mappings (`maps-PID`). What the host names the sampled
    /// code by; read by the host, not kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_maps: Vec<RawFile>,
    /// The sampled CPU by part, thread and function (the host's, from the samples).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionCpu>,
}

/// A share of a sandbox's sampled CPU in its measured phase: one part's, in one thread and one
/// function.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct FunctionCpu {
    pub part: String,
    pub thread: String,
    pub function: String,
    /// Of the sandbox's CPU the run's parts stand for (`sys.cpu_part.*` together).
    pub share: f64,
}

/// The start of the metrics that give the CPU of one of a runtime's own processes, by its name
/// (`sys.cpu_runtime_by.runsc-gofer`).
pub const RUNTIME_BY: &str = "sys.cpu_runtime_by.";
/// `sys.cpu_part.` and a part's name (`sys::cpu_parts::Part`): the CPU-seconds a part of the
/// stack spent in the measured window, from samples.
pub const CPU_PART: &str = "sys.cpu_part.";
/// The part no sample could be resolved to, with the sandbox's CPU the samples missed.
pub const UNEXPLAINED: &str = "unexplained";
/// `sys.gvisor.` and one of gVisor's own counters (`runsc export-metrics`, its `runsc_` cut):
/// what moved in a served cell's measured phase.
pub const GVISOR: &str = "sys.gvisor.";
/// How `sys.gvisor.*` are read, for the run's setup.
pub const GVISOR_COUNTED_BY: &str =
    "runsc export-metrics at the start and the end of the measured phase, the difference";

/// The prefix of the machine's perf counters (`sys.perf.context_switches`), and the setup
/// entry that says what they count.
pub const PERF: &str = "sys.perf";

/// Instructions per cycle (`sys.perf.ipc`): more is better.
pub const IPC_UNIT: &str = "insn/cycle";

/// One measured number.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Sample {
    pub metric: String,
    pub value: f64,
    pub unit: String,
}

impl Sample {
    pub fn new(metric: impl Into<String>, value: f64, unit: &str) -> Sample {
        Sample { metric: metric.into(), value, unit: unit.to_string() }
    }
}

/// A metric over the time of one run: (seconds since start, value) points.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Series {
    pub metric: String,
    pub unit: String,
    pub points: Vec<(f64, f64)>,
}

/// A file a tool produced, carried back from the sandbox with the result.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RawFile {
    pub name: String,
    pub content: String,
}

/// What identifies a cell of the matrix.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Labels {
    pub env: String,
    pub volume: String,
    pub workload: String,
    /// The values of the workload's matrix axes, in suite order.
    #[serde(with = "ordered_pairs")]
    pub params: Vec<(String, String)>,
}

impl Labels {
    /// `k=v;k=v`, the form used in samples.csv.
    pub fn params_text(&self) -> String {
        self.params.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";")
    }

    /// The workload setting without the environment and volume: what a cell is compared on.
    pub fn setting(&self) -> String {
        let mut s = self.workload.clone();
        for (k, v) in &self.params {
            s.push_str(&format!(" {k}={v}"));
        }
        s
    }

    /// A name for the cell that is also a safe directory name.
    pub fn cell_id(&self) -> String {
        let mut id = format!("{}.{}.{}", self.env, self.volume, self.workload);
        for (k, v) in &self.params {
            id.push_str(&format!(".{k}={v}"));
        }
        id.chars().map(|c| if c.is_ascii_alphanumeric() || "._=+-".contains(c) { c } else { '_' }).collect()
    }

    /// The value of a label by name: env, volume, workload, cell, or a parameter.
    pub fn get(&self, key: &str) -> Option<String> {
        match key {
            "env" => Some(self.env.clone()),
            "volume" => Some(self.volume.clone()),
            "workload" => Some(self.workload.clone()),
            "cell" => Some(self.cell_id()),
            _ => self.params.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()),
        }
    }
}

mod ordered_pairs {
    use serde::Deserialize;
    use serde::de::Deserializer;
    use serde::ser::{SerializeMap, Serializer};

    pub fn serialize<S: Serializer>(pairs: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(pairs.len()))?;
        for (k, v) in pairs {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
        let map = serde_json::Map::deserialize(d)?;
        Ok(map.into_iter().map(|(k, v)| (k, v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))).collect())
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    /// The run started and failed.
    Failed,
    /// The cell cannot run on this machine (missing runtime, …); the reason says why.
    Skipped,
}

/// One execution of a cell: `runs/<cell>/<rep>.json`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RunRecord {
    pub cell: String,
    #[serde(flatten)]
    pub labels: Labels,
    pub rep: u32,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub started: String,
    pub ended: String,
    pub seconds: f64,
    pub samples: Vec<Sample>,
    /// Metrics over the run's time, where the workload reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
    /// Facts the agent saw inside the environment (kernel, namespaces, the volume's filesystem).
    #[serde(default)]
    pub facts: BTreeMap<String, String>,
    /// What the environment and the volume were (runtime version, accel, mount options).
    #[serde(default)]
    pub setup: BTreeMap<String, String>,
    /// Things a reader of the numbers must know (e.g. a runtime that ignores O_DIRECT).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Paths of the raw tool output, relative to the result set.
    #[serde(default)]
    pub raw: Vec<String>,
    /// The result set this run was first written to, when it came in through `isobench merge`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// With `density = N`: each sandbox's own outcome (the samples above are their aggregate).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sandboxes: Vec<SandboxRecord>,
    /// A capacity search's steps (the run's `capacity` sample is the highest rate that passed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<cql_stress::capacity::Step>,
    /// The block it ran in: its pair is the baseline's run of the same block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<BlockId>,
    /// Its sampled CPU by part, thread and function, the largest shares.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<FunctionCpu>,
}

/// Where a run ran: the round, the block within the round (the cells compared with one
/// baseline, run back to back) and the isobench process that ran it. Runs of one block ran
/// within minutes of each other, on the machine as it was then, and pair; a block cut by an
/// interrupt and resumed by another process is two blocks, and pairs nothing across the cut.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId {
    pub round: u32,
    pub block: u32,
    pub session: String,
}

impl RunRecord {
    /// Repetition `rep` of the cell `labels` name, ok and with nothing recorded yet.
    pub fn new(labels: Labels, rep: u32) -> RunRecord {
        RunRecord {
            cell: labels.cell_id(),
            labels,
            rep,
            status: Status::Ok,
            error: None,
            started: String::new(),
            ended: String::new(),
            seconds: 0.0,
            samples: Vec::new(),
            series: Vec::new(),
            facts: Default::default(),
            setup: Default::default(),
            notes: Vec::new(),
            raw: Vec::new(),
            origin: None,
            sandboxes: Vec::new(),
            steps: Vec::new(),
            block: None,
            functions: Vec::new(),
        }
    }
}

/// One of the sandboxes a density run started together.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct SandboxRecord {
    /// 1-based, as messages name it ("sandbox 4 of 10").
    pub index: usize,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// From the start of its creation to its agent's ready line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_latency_s: Option<f64>,
    /// Host memory its processes held (PSS, bytes) while every sandbox was up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_pss: Option<f64>,
    pub samples: Vec<Sample>,
}

/// The seconds a run waited for the machine to settle before it began (0 where nothing had to).
pub const SETTLE_METRIC: &str = "sys.settle_s";
/// In a run's setup: what had not settled within its limit when the run began.
pub const UNSETTLED_SETUP: &str = "settle.unsettled";
/// The share (%) of a sandbox's CPU time on the CPUs that took its volume's disk interrupts
/// (`sys::Placement`).
pub const DISK_IRQ_CPU_SHARE: &str = "sys.cpu_on_disk_irq_cpus";
/// The mean time of a run's fsync (or fdatasync) calls, µs: the flush that made its writes
/// durable, which fio times apart from the write system calls (`write_clat_mean`).
pub const SYNC_LATENCY: &str = "sync_lat_mean";
/// In a run's setup: how its block ran in slices, where it did.
pub const SLICES_SETUP: &str = "slices";

/// The order of the cells within each round of runs (the suite's `order`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Order {
    /// Each round in an order of its own, drawn from the result set's seed, so that no cell
    /// always follows the same one: what a run leaves behind lands on a different cell each round.
    Shuffled,
    /// Every round in the order the suite lists its cells (result sets made before shuffling).
    Fixed,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::Shuffled => "shuffled",
            Order::Fixed => "fixed",
        }
    }

    fn before_shuffling() -> Order {
        Order::Fixed
    }
}

/// The cells of a run and the order they ran in: `plan.json`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct PlanRecord {
    pub suite: String,
    pub baseline: Baseline,
    pub repeat: Repeat,
    pub cells: Vec<CellRecord>,
    #[serde(default)]
    pub bounds: Vec<BoundRecord>,
    #[serde(default = "Order::before_shuffling")]
    pub order: Order,
    /// What the shuffled order was drawn from: `--seed` replays it, `--resume` keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// The precision the rounds ran for (`precision = "±5%"`), where the suite asked for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    /// The planned rounds, each its blocks in the order they run, each block its cells' ids in
    /// the order they run (precision rounds come after these, as the runs ask for them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rounds: Vec<Vec<Vec<String>>>,
}

/// Rounds until every comparison is precise: each difference's 95 % CI within ± `half_width`
/// percentage points, or the rounds or the time run out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precision {
    pub half_width: f64,
    pub max_rounds: u32,
    /// Seconds the runs may take in all, where the suite set a budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_s: Option<f64>,
}

/// What each cell is compared with: the cell of the same workload setting in the baseline
/// environment and/or on the baseline volume. Naming only the environment compares every cell
/// with the baseline environment on its own volume (what does the runtime cost?); naming only
/// the volume, with the baseline volume in its own environment (what does the storage cost?).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Baseline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// A workload's own baseline (`baseline = {...}` in its `[[workload]]`), replacing the
    /// suite's for its cells: a database on a filesystem cannot share the raw device's baseline.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub workloads: BTreeMap<String, Baseline>,
}

impl Baseline {
    /// The baseline that applies to a workload's cells.
    pub fn of(&self, workload: &str) -> &Baseline {
        self.workloads.get(workload).unwrap_or(self)
    }

    /// Whether a cell with these labels is a baseline cell.
    pub fn contains(&self, labels: &Labels) -> bool {
        let b = self.of(&labels.workload);
        b.env.as_ref().is_none_or(|e| *e == labels.env) && b.volume.as_ref().is_none_or(|v| *v == labels.volume)
    }

    /// Whether `baseline` is the baseline cell of `cell`.
    pub fn is_baseline_of(&self, baseline: &Labels, cell: &Labels) -> bool {
        let b = self.of(&cell.workload);
        baseline.workload == cell.workload
            && baseline.params == cell.params
            && baseline.env == *b.env.as_ref().unwrap_or(&cell.env)
            && baseline.volume == *b.volume.as_ref().unwrap_or(&cell.volume)
    }

    /// "env host on volume tmpfs", "env host, on each cell's own volume", and each workload's own.
    pub fn describe(&self) -> String {
        let mut text = self.describe_one();
        for (workload, own) in &self.workloads {
            text.push_str(&format!("; for workload {workload}: {}", own.describe_one()));
        }
        text
    }

    fn describe_one(&self) -> String {
        match (&self.env, &self.volume) {
            (Some(e), Some(v)) => format!("env {e} on volume {v}"),
            (Some(e), None) => format!("env {e}, on each cell's own volume"),
            (None, Some(v)) => format!("volume {v}, in each cell's own environment"),
            (None, None) => "none".into(),
        }
    }
}

/// A `[[bound]]` of the suite, kept with the result set so `isobench check` needs nothing else.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct BoundRecord {
    pub metric: String,
    pub max_overhead_pct: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cells: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct CellRecord {
    pub cell: String,
    #[serde(flatten)]
    pub labels: Labels,
    /// The metrics shown in the terminal table, in order.
    pub headline: Vec<String>,
    /// The environment's kind ("host", "oci", "vm" …).
    #[serde(default)]
    pub env_kind: String,
    /// Whether the environment is a sandbox (its runs must not look like the host).
    #[serde(default)]
    pub sandbox: bool,
    /// What the workload does, for validity checks: "fio.direct", "fio.size", "fio.rw" …
    #[serde(default)]
    pub workload_setup: BTreeMap<String, String>,
    /// What an hour of this environment costs, for $/operation figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_hour: Option<f64>,
    /// `density = N`: how many sandboxes ran the workload at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub density: Option<usize>,
    /// The load (op/s) its capacity is sized for in nodes and money (`target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// The database nodes a served CQL cell runs (its capacity is the ring's, its cost theirs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// Its environment is the baseline environment's twin: its comparison is an A/A check.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub twin: bool,
}

impl CellRecord {
    /// A cell of `labels` in an environment of kind `env_kind` that leads with `headline`, with
    /// nothing else known of it (what tools that make plans outside a suite start from).
    pub fn new(labels: Labels, env_kind: &str, sandbox: bool, headline: &[&str]) -> CellRecord {
        CellRecord {
            cell: labels.cell_id(),
            labels,
            headline: headline.iter().map(|m| m.to_string()).collect(),
            env_kind: env_kind.into(),
            sandbox,
            workload_setup: BTreeMap::new(),
            cost_per_hour: None,
            density: None,
            target: None,
            nodes: None,
            twin: false,
        }
    }
}

/// A capacity step's figures as samples named by its place in the search.
pub fn step_samples(n: usize, step: &cql_stress::capacity::Step) -> Vec<Sample> {
    let name = |figure: &str| format!("step.{n}.{figure}");
    let mut samples = vec![
        Sample::new(name("offered"), step.offered, "op/s"),
        Sample::new(name("achieved"), step.achieved, "op/s"),
        Sample::new(name("latency"), step.latency_us, "us"),
        Sample::new(name("p50"), step.p50_us, "us"),
        Sample::new(name("p99"), step.p99_us, "us"),
        Sample::new(name("p999"), step.p999_us, "us"),
        Sample::new(name("service"), step.service_us, "us"),
        Sample::new(name("errors"), step.errors as f64, "errors"),
        Sample::new(name("pass"), f64::from(u8::from(step.pass)), "bool"),
    ];
    if let Some(cpu) = step.client_cpu {
        samples.push(Sample::new(name("client_cpu"), cpu, "cores"));
    }
    samples
}

/// A run's error on one line, for tables and summaries: its first line and, while a line ends
/// with ':' (it introduces what follows: a pod's or a tool's own last words), the next one, so
/// that the line says what went wrong and not only where.
pub fn error_headline(error: &str) -> String {
    let mut out = String::new();
    for line in error.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
        if !line.ends_with(':') {
            break;
        }
    }
    out
}

/// A number as CSV wants it: no exponent for ordinary magnitudes, no trailing noise.
pub fn format_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 { format!("{v:.0}") } else { format!("{v}") }
}

pub fn csv_field(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) { format!("\"{}\"", f.replace('"', "\"\"")) } else { f.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use figures::stats::Rng;

    #[test]
    fn an_error_headline_reads_past_lines_that_introduce_what_follows() {
        let error = "the database did not start: pod p-1 exited with 1 (Error):\nisobench: error: Cassandra exited before it accepted CQL clients. Its errors:\nThe seed provider lists no seeds.\nThe end of its log:\n...";
        assert_eq!(
            error_headline(error),
            "the database did not start: pod p-1 exited with 1 (Error): isobench: error: Cassandra exited before it accepted CQL clients. Its errors: The seed provider lists no seeds."
        );
        assert_eq!(error_headline("fio failed\nmore"), "fio failed");
        assert_eq!(error_headline(""), "");
    }

    #[test]
    fn cell_ids_are_safe_paths() {
        let l = Labels {
            env: "runsc".into(),
            volume: "loop ext4".into(),
            workload: "fio".into(),
            params: vec![("rw".into(), "randread".into()), ("FILE".into(), "/a/b".into())],
        };
        assert_eq!(l.cell_id(), "runsc.loop_ext4.fio.rw=randread.FILE=_a_b");
        assert_eq!(l.params_text(), "rw=randread;FILE=/a/b");
    }

    #[test]
    fn a_baseline_may_name_one_axis() {
        let l = |env: &str, volume: &str| Labels {
            env: env.into(),
            volume: volume.into(),
            workload: "fio".into(),
            params: vec![],
        };
        let by_env = Baseline { env: Some("host".into()), volume: None, workloads: Default::default() };
        assert!(by_env.contains(&l("host", "ext4")) && by_env.contains(&l("host", "tmpfs")));
        assert!(by_env.is_baseline_of(&l("host", "ext4"), &l("runc", "ext4")));
        assert!(!by_env.is_baseline_of(&l("host", "tmpfs"), &l("runc", "ext4")), "same volume only");
        let both = Baseline { env: Some("host".into()), volume: Some("tmpfs".into()), workloads: Default::default() };
        assert!(both.is_baseline_of(&l("host", "tmpfs"), &l("runc", "ext4")));
        assert!(!both.contains(&l("host", "ext4")));
        let db = |volume: &str| Labels { workload: "db".into(), ..l("host", volume) };
        let mut own = both.clone();
        own.workloads.insert("db".into(), Baseline { volume: Some("ext4".into()), ..by_env.clone() });
        assert!(own.contains(&db("ext4")) && !own.contains(&db("tmpfs")), "the workload's own volume");
        assert!(own.is_baseline_of(&db("ext4"), &db("mirror")) && !own.is_baseline_of(&l("host", "tmpfs"), &db("x")));
        assert!(own.is_baseline_of(&l("host", "tmpfs"), &l("runc", "ext4")), "other workloads keep the suite's");
        assert!(own.describe().ends_with("; for workload db: env host on volume ext4"), "{}", own.describe());
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(format_value(52837.0), "52837");
        assert_eq!(format_value(65.5), "65.5");
    }

    /// Drives the adaptive rule the way the runner does, with a synthetic measurement.
    fn runs_until_done(repeat: &Repeat, mut measure: impl FnMut() -> f64) -> u32 {
        let mut values = Vec::new();
        while repeat.needs_another_run(values.len() as u32, &values) {
            values.push(measure());
        }
        values.len() as u32
    }

    #[test]
    fn adaptive_repetition_stops_early_on_quiet_cells_and_runs_to_max_on_noisy_ones() {
        let repeat = Repeat { min: 3, max: 15, target_ci_pct: Some(2.0), metric: None };
        let mut rng = Rng::new(7);
        let quiet = runs_until_done(&repeat, || 50_000.0 * (1.0 + 0.002 * rng.normal()));
        assert_eq!(quiet, 3, "a cell with 0.2 % noise meets ±2 % at the minimum");
        let noisy = runs_until_done(&repeat, || 50_000.0 * (1.0 + 0.30 * rng.normal()));
        assert_eq!(noisy, 15, "a cell with 30 % noise runs to the maximum");
        let fixed = Repeat::fixed(4);
        assert_eq!(runs_until_done(&fixed, || 1.0), 4);
        assert!(!repeat.needs_another_run(5, &[]), "a cell with no successful run gets no more");
    }
}
