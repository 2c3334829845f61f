//! The suite file: the axes to compare, the baseline, repetitions and bounds. Loading it
//! validates everything up front, every kind checking its own keys, so a mistake is reported
//! once, with the file, line and key, before anything runs.

pub mod adhoc;
mod overrides;
mod secrets;
mod servers;
pub mod twins;
mod variants;

use std::path::{Path, PathBuf};

use crate::kinds;
use crate::syntax::{Fields, Node, Origin, SuiteError, Table, Value};

use crate::env::Environment;
pub use crate::store::Baseline;
use crate::store::{Order, Precision, Repeat, Selector};
use crate::sys::{CpuSet, Settle};
use crate::volume::Volume;
use crate::workload::{self, ParseContext};
use figures::units;
use overrides::apply_override;
pub use secrets::is_secret_key;
use secrets::{redact, unwrap_secrets};
use servers::{parse_servers, resolve_servers, server_of, serves};
use variants::workload_entry;

pub struct Suite {
    /// The path as the user gave it, for messages.
    pub file: String,
    pub name: String,
    pub repeat: Repeat,
    /// `precision = "±5%"`: rounds until every comparison's CI is that narrow (`repeat` is then
    /// the least number of rounds).
    pub precision: Option<Precision>,
    /// Per `[[env]]`: whether it is the baseline environment's twin (`aa = true`, or written
    /// out), whose comparisons with the baseline are A/A checks.
    pub twins: Vec<bool>,
    /// `collect = false`: no `sys.` figures (what the workload, the runtime and the device used).
    pub collect: bool,
    /// `attribute = false`: the sandbox's CPU not sampled by part (`sys.cpu_part.*`).
    pub attribute: bool,
    pub baseline: Baseline,
    pub envs: Vec<Named<Box<dyn Environment>>>,
    pub volumes: Vec<Named<Box<dyn Volume>>>,
    pub workloads: Vec<WorkloadEntry>,
    pub bounds: Vec<Bound>,
    /// `cells = ["env=host", "env=vm-*,volume=ext4"]`: the env × volume × workload cells to
    /// keep, when not every pairing makes sense (empty: all).
    pub cells: Vec<Selector>,
    /// The databases the suite's workloads load (`[[server]]`); each workload's is `server`.
    pub servers: Vec<NamedServer>,
    /// `target = "50k op/s"`: the load to size for, in nodes and money, from each capacity
    /// workload's capacity (a workload's own `target` replaces it).
    pub target: Option<f64>,
    /// `order`: the cells of each round shuffled (the default) or as the suite lists them.
    pub order: Order,
    /// `settle`: how long the machine may take to settle before each run (None: no wait).
    pub settle: Option<Settle>,
    /// `split_cpus = true`: in each cell whose database isobench starts, the database gets the
    /// upper half of the machine's CPUs and the load generator the lower.
    pub split_cpus: bool,
    /// `cpu_idle = "poll"`: every CPU kept polling rather than halting while the suite runs
    /// (`sys::cpu_idle`); the default, `"as-is"`, leaves the machine's idle states alone.
    pub cpu_idle_poll: bool,
    /// The suite after overrides, secrets redacted: what the result set keeps.
    pub resolved: String,
}

/// Where on this machine's CPUs a cell's sandbox and its load generator run (an env's `cpuset`
/// and `loader_cpuset`, or the suite's `split_cpus`); None: on any.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuPins {
    pub sandbox: Option<CpuSet>,
    pub loader: Option<CpuSet>,
}

pub struct Named<T> {
    pub name: String,
    pub kind: String,
    pub item: T,
    /// What an hour of it costs (environments only): `cost_per_hour`, or the `[cost]` table.
    pub cost_per_hour: Option<f64>,
    /// How a VM attaches it (volumes only): `attach = "9p" | "virtiofs" | "virtio-blk"`, with
    /// its options; overrides the VM environment's own choice.
    pub attach: Option<crate::env::vm::attach::Attach>,
    /// The CPUs its sandboxes and its cells' load generator are pinned to (environments only).
    pub pins: CpuPins,
}

pub struct WorkloadEntry {
    pub name: String,
    pub kind: String,
    /// The metrics tables and charts lead with (`headline = [...]`); the kind's own otherwise.
    pub headline: Option<Vec<String>>,
    /// One per combination of the workload's list-valued parameters.
    pub variants: Vec<Variant>,
    /// The load its cells are sized for (the suite's when the workload names none).
    pub target: Option<f64>,
    /// The `[[server]]` it loads (`server = "NAME"`, or the one of a kind it loads).
    pub server: Option<usize>,
    /// The name its table gave, resolved to `server` once the servers are read.
    pub server_name: Option<String>,
}

/// A `[[server]]`: its `name` (needed when the suite has several) and what it is.
pub struct NamedServer {
    pub name: Option<String>,
    pub spec: crate::server::ServerSpec,
}

pub struct Variant {
    /// The axis values of this combination, in suite order.
    pub params: Vec<(String, String)>,
    pub spec: workload::Spec,
    /// `density = N`: N sandboxes of each cell run it at once.
    pub density: Option<usize>,
}

#[derive(Clone, Debug)]
pub struct Bound {
    pub metric: String,
    pub max_overhead_pct: f64,
    pub cells: Option<Selector>,
}

impl Suite {
    /// Reads, overrides and validates a suite file.
    pub fn load(path: &Path, overrides: &[String]) -> Result<Suite, SuiteError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SuiteError {
            file: file.clone(),
            origin: Origin::Default,
            message: format!("cannot read the suite file: {e}"),
        })?;
        let suite_dir = path.parent().map(Path::to_path_buf).unwrap_or_else(|| PathBuf::from("."));
        Suite::from_text(&file, &text, &suite_dir, overrides)
    }

    pub fn from_text(file: &str, text: &str, suite_dir: &Path, overrides: &[String]) -> Result<Suite, SuiteError> {
        let mut root = crate::syntax::parse(file, text)?;
        for o in overrides {
            apply_override(file, &mut root, o)?;
        }
        twins::add_twin(file, &mut root)?;
        let mut secrets = Vec::new();
        unwrap_secrets(file, &mut root, &mut secrets)?;
        for secret in &secrets {
            crate::secrets::register(secret);
        }
        let mut top = Fields::new(file, "the suite", &root, Origin::Line(1));
        let name = top.required_str("name")?;
        check_name(&top, "name", &name)?;
        let repeat = parse_repeat(&mut top)?;
        top.bool("aa")?; // read by twins::add_twin
        let precision = parse_precision(&mut top, &repeat)?;
        let collect = top.bool("collect")?.unwrap_or(true);
        let attribute = top.bool("attribute")?.unwrap_or(true);
        let order = match top.choice("order", &["shuffled", "fixed"])?.as_deref() {
            Some("fixed") => Order::Fixed,
            _ => Order::Shuffled,
        };
        let settle = parse_settle(&mut top)?;
        let split_cpus = top.bool("split_cpus")?.unwrap_or(false);
        let cpu_idle_poll = top.choice("cpu_idle", &["as-is", "poll"])?.as_deref() == Some("poll");
        let baseline_node = top.node("baseline").ok_or_else(|| {
            top.error("the key \"baseline\" is required, e.g. baseline = { env = \"host\", volume = \"tmpfs\" }")
        })?;
        let env_tables = sections(&mut top, "env")?;
        let envs = parse_envs(file, &env_tables)?;
        let volumes = parse_volumes(&mut top)?;
        let ctx = ParseContext { suite_dir };
        let workload_tables = sections(&mut top, "workload")?;
        let workloads = workload_tables
            .iter()
            .map(|(t, origin)| workload_entry(file, t, origin.clone(), &ctx))
            .collect::<Result<Vec<_>, _>>()?;
        let servers = parse_servers(&mut top)?;
        if let Some(metric) = &repeat.metric {
            check_repeat_metric(&top, metric, &workloads)?;
        }
        let target = crate::workload::rate(&mut top, "target")?;
        let mut workloads = workloads;
        apply_target(&top, target, &mut workloads, &workload_tables)?;
        let cells = parse_cells(&mut top)?;
        let bounds = optional_sections(&mut top, "bound")?
            .into_iter()
            .map(|(t, origin)| bound(file, t, origin))
            .collect::<Result<Vec<_>, _>>()?;
        for (section, names) in [
            ("env", envs.iter().map(|e| &e.name).collect::<Vec<_>>()),
            ("volume", volumes.iter().map(|v| &v.name).collect()),
            ("workload", workloads.iter().map(|w| &w.name).collect()),
        ] {
            check_unique(&top, section, &names)?;
        }
        let mut envs = envs;
        apply_cost_table(&mut top, &mut envs)?;
        resolve_servers(&top, &servers, &mut workloads, &workload_tables)?;
        let serves = workloads.iter().any(|w| w.variants.iter().any(|v| serves(server_of(&servers, w), &v.spec)));
        check_envs(file, &env_tables, &envs, &servers, serves)?;
        if split_cpus {
            check_split(&top, &envs, serves)?;
        }
        let mut baseline = parse_baseline(file, baseline_node, &envs, &volumes)?;
        let env_only: Vec<&Table> = env_tables.iter().map(|(t, _)| *t).collect();
        let twins = twins::twins(&env_only, baseline.env.as_deref());
        for ((table, _), workload) in workload_tables.iter().zip(&workloads) {
            if let Some(node) = table.get("baseline") {
                baseline.workloads.insert(workload.name.clone(), parse_baseline(file, node, &envs, &volumes)?);
            }
        }
        top.finish()?;
        let mut resolved_tree = root.clone();
        redact(&mut resolved_tree, &secrets);
        Ok(Suite {
            file: file.to_string(),
            name,
            repeat,
            precision,
            twins,
            collect,
            attribute,
            baseline,
            envs,
            volumes,
            workloads,
            bounds,
            cells,
            servers,
            target,
            order,
            settle,
            split_cpus,
            cpu_idle_poll,
            resolved: crate::syntax::to_toml(&resolved_tree),
        })
    }

    /// Whether cells of this workload load a database that isobench starts in the sandbox, from a
    /// load generator on this host.
    pub fn serves(&self, workload: usize, spec: &workload::Spec) -> bool {
        serves(self.server(workload), spec)
    }

    /// The `[[server]]` workload `workload` loads, if it loads one.
    pub fn server(&self, workload: usize) -> Option<&crate::server::ServerSpec> {
        server_of(&self.servers, &self.workloads[workload])
    }

    /// The CPUs a cell of env `env` running `spec` is pinned to: its environment's own, or the
    /// halves `split_cpus` gives a served cell. A load generator only runs apart in served cells.
    pub fn pins(&self, env: usize, workload: usize, spec: &workload::Spec) -> CpuPins {
        let served = self.serves(workload, spec);
        if self.split_cpus && served {
            let (loader, sandbox) = CpuSet::available().halves().expect("split_cpus was checked when loaded");
            return CpuPins { sandbox: Some(sandbox), loader: Some(loader) };
        }
        let own = &self.envs[env].pins;
        CpuPins { sandbox: own.sandbox.clone(), loader: own.loader.clone().filter(|_| served) }
    }
}

/// The `[[volume]]` tables, each parsed by its kind.
fn parse_volumes(top: &mut Fields) -> Result<Vec<Named<Box<dyn Volume>>>, SuiteError> {
    let file = top.file();
    sections(top, "volume")?
        .into_iter()
        .map(|(t, origin)| {
            named(file, "volume", t, origin, kinds::VOLUMES.iter().map(|k| k.name).collect(), |kind, f| {
                (kinds::volume(kind).expect("listed").parse)(f)
            })
        })
        .collect()
}

/// The suite's `target` given to each workload that searches a capacity and has none of its
/// own; a target where no capacity is measured is refused.
fn apply_target(
    top: &Fields,
    target: Option<f64>,
    workloads: &mut [WorkloadEntry],
    tables: &[(&Table, Origin)],
) -> Result<(), SuiteError> {
    for (w, (table, origin)) in workloads.iter_mut().zip(tables) {
        let searched = w.variants.iter().any(|v| v.spec.workload().capacity().is_some());
        if w.target.is_some() && !searched {
            let f = Fields::new(top.file(), format!("workload \"{}\"", w.name), table, origin.clone());
            return Err(f.error_at(
                "target",
                "nodes are counted from a measured capacity: give this workload capacity = { percentile = 99, latency = \"10ms\" }",
            ));
        }
        if searched {
            w.target = w.target.or(target);
        }
    }
    if target.is_some() && !workloads.iter().any(|w| w.target.is_some()) {
        return Err(top.error_at(
            "target",
            "nodes are counted from a measured capacity, and no workload has one: give a workload capacity = { percentile = 99, latency = \"10ms\" }",
        ));
    }
    Ok(())
}

/// An adaptive repeat's metric is one some workload records: on any other, no cell would ever
/// reach its CI and every cell would run `max` times.
fn check_repeat_metric(top: &Fields, metric: &str, workloads: &[WorkloadEntry]) -> Result<(), SuiteError> {
    let specs = || workloads.iter().flat_map(|w| &w.variants).map(|v| v.spec.workload());
    if specs().any(|w| workload::records(w, metric)) {
        return Ok(());
    }
    let mut recorded: Vec<String> = specs().flat_map(|w| w.recorded()).collect();
    recorded.sort();
    recorded.dedup();
    Err(top.error_at(
        "repeat",
        format!("metric = \"{metric}\": no workload of the suite records it; they record {}", recorded.join(", ")),
    ))
}

/// No two tables of a section share a name: cells are named by them.
fn check_unique(top: &Fields, section: &str, names: &[&String]) -> Result<(), SuiteError> {
    for (i, n) in names.iter().enumerate() {
        if names[..i].contains(n) {
            return Err(
                top.error_at(section, format!("two [[{section}]] tables are named \"{n}\"; names must be unique"))
            );
        }
    }
    Ok(())
}

/// `settle = false`, or `settle = { timeout = "10s", cpu_busy = "10%" }` (each part's limit, and
/// the share of the machine's CPUs busy at which they count as idle); on by default.
fn parse_settle(top: &mut Fields) -> Result<Option<Settle>, SuiteError> {
    match top.node("settle").map(|n| &n.value) {
        None | Some(Value::Bool(true)) => return Ok(Some(Settle::default())),
        Some(Value::Bool(false)) => return Ok(None),
        Some(Value::Table(_)) => {}
        Some(other) => {
            return Err(top.error_at(
                "settle",
                format!(
                    "expected true, false or a table like {{ timeout = \"10s\", cpu_busy = \"10%\" }}, found {}",
                    other.type_name()
                ),
            ));
        }
    }
    let mut f = top.table("settle")?.expect("a table");
    let default = Settle::default();
    let timeout = f.duration("timeout")?.unwrap_or(default.timeout);
    let cpu_busy = f.percent("cpu_busy")?.map_or(default.cpu_busy, |p| p / 100.0);
    f.finish()?;
    if timeout.is_zero() {
        return Err(f.error_at("timeout", "must be more than 0; to start each run at once, write settle = false"));
    }
    if !(cpu_busy > 0.0 && cpu_busy <= 1.0) {
        return Err(f.error_at("cpu_busy", "must be more than 0% and at most 100% (100% leaves the CPUs out)"));
    }
    Ok(Some(Settle { timeout, cpu_busy, shared: false }))
}

/// An environment's `cpuset` and `loader_cpuset`: only where it can pin its sandboxes, and a
/// load generator only where one runs apart from the sandbox.
fn check_pins(
    file: &str,
    tables: &[(&Table, Origin)],
    envs: &[Named<Box<dyn Environment>>],
    serves: bool,
) -> Result<(), SuiteError> {
    for ((table, origin), env) in tables.iter().zip(envs) {
        let f = Fields::new(file, format!("env \"{}\"", env.name), table, origin.clone());
        if let Some(why) = env.item.cannot_pin() {
            for key in ["cpuset", "loader_cpuset"] {
                if table.get(key).is_some() {
                    return Err(f.error_at(key, why));
                }
            }
        }
        if env.pins.loader.is_some() && !serves {
            return Err(f.error_at(
                "loader_cpuset",
                "only a cell whose database isobench starts (a [[server]] of kind cassandra, postgres, mariadb or redis) has a load generator apart from its sandbox; a workload without one runs inside the sandbox, which cpuset pins",
            ));
        }
    }
    Ok(())
}

/// What the environments must allow of the suite's other parts: CPU pins, and a fault's lost
/// machine.
fn check_envs(
    file: &str,
    tables: &[(&Table, Origin)],
    envs: &[Named<Box<dyn Environment>>],
    servers: &[NamedServer],
    serves: bool,
) -> Result<(), SuiteError> {
    check_pins(file, tables, envs, serves)?;
    for server in servers {
        check_machine_loss(file, tables, envs, &server.spec)?;
    }
    Ok(())
}

/// `kill = "machine"`: every environment a k8s one with the commands that stop and start its
/// machines.
fn check_machine_loss(
    file: &str,
    tables: &[(&Table, Origin)],
    envs: &[Named<Box<dyn Environment>>],
    server: &crate::server::ServerSpec,
) -> Result<(), SuiteError> {
    let kill = match server {
        crate::server::ServerSpec::Managed(m) => m.kill.as_ref(),
        crate::server::ServerSpec::External(e) => e.kill.as_ref(),
        crate::server::ServerSpec::Database(_) => None,
    };
    if !kill.is_some_and(crate::server::Kill::stops_machine) {
        return Ok(());
    }
    for ((table, origin), env) in tables.iter().zip(envs) {
        let f = Fields::new(file, format!("env \"{}\"", env.name), table, origin.clone());
        match env.item.as_k8s() {
            None => {
                return Err(f.error_at(
                    "kind",
                    format!(
                        "the [[server]]'s kill = \"machine\" stops a Kubernetes node, and this env is of kind \"{}\": run the suite in k8s envs, or use kill = \"pod\"",
                        env.kind
                    ),
                ));
            }
            Some(k8s) if k8s.machines.is_none() => {
                return Err(f.error_at(
                    "machine_stop",
                    "the [[server]]'s kill = \"machine\" needs the commands that stop and start a node: machine_stop = \"COMMAND {machine}\" and machine_start = \"COMMAND {machine}\" (the local cluster's: scripts/k8s-local.sh stop-node DIR {machine}, start-node DIR {machine})",
                ));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// `split_cpus = true`: a machine of two CPUs or more, cells it applies to, and no environment
/// pinned some other way.
fn check_split(top: &Fields, envs: &[Named<Box<dyn Environment>>], serves: bool) -> Result<(), SuiteError> {
    let available = CpuSet::available();
    if available.halves().is_none() {
        return Err(top.error_at(
            "split_cpus",
            format!("isobench may use one CPU here ({available}): there is nothing to split"),
        ));
    }
    if !serves {
        return Err(top.error_at(
            "split_cpus",
            "it splits the CPUs of a cell whose database isobench starts (a [[server]] of kind cassandra, postgres, mariadb or redis, and a workload that loads it) between the database and the load generator; this suite has none",
        ));
    }
    for env in envs {
        if env.pins != CpuPins::default() {
            return Err(top.error_at(
                "split_cpus",
                format!("env \"{}\" sets its own cpuset or loader_cpuset: use one or the other", env.name),
            ));
        }
        if let Some(why) = env.item.cannot_pin() {
            return Err(top.error_at("split_cpus", format!("env \"{}\": {why}", env.name)));
        }
    }
    Ok(())
}

/// `[cost]`: environment name → $ per hour, for environments without their own cost_per_hour.
fn apply_cost_table(top: &mut Fields, envs: &mut [Named<Box<dyn Environment>>]) -> Result<(), SuiteError> {
    let Some(node) = top.node("cost") else {
        return Ok(());
    };
    let Value::Table(table) = &node.value else {
        return Err(
            top.error_at("cost", "expected a table of environment names and $ per hour, e.g. [cost] host = 4.32")
        );
    };
    for (name, value) in &table.entries {
        let price = match value.value {
            Value::Int(i) => i as f64,
            Value::Float(f) => f,
            _ => {
                return Err(top.error_at("cost", format!("\"{name}\" must be a number of $ per hour")));
            }
        };
        let Some(env) = envs.iter_mut().find(|e| e.name == *name) else {
            let names: Vec<&str> = envs.iter().map(|e| e.name.as_str()).collect();
            return Err(top.error_at(
                "cost",
                format!("names no [[env]]: \"{name}\"; the suite's environments are: {}", names.join(", ")),
            ));
        };
        env.cost_per_hour.get_or_insert(price);
    }
    Ok(())
}

/// `repeat = 5`, or adaptive: `repeat = { min = 3, max = 15, target_ci = "2%", metric = "iops" }`.
/// The most repetitions a cell may ask for: each is a run of its own in the plan.
const MAX_REPEAT: u64 = 1000;

fn at_most_max_repeat(f: &mut Fields, key: &'static str) -> Result<Option<u32>, SuiteError> {
    match f.count(key)? {
        Some(n) if n > MAX_REPEAT => {
            Err(f.error_at(key, format!("{n} repetitions is more than {MAX_REPEAT}, the most a cell runs")))
        }
        n => Ok(n.map(|n| n as u32)),
    }
}

fn parse_repeat(top: &mut Fields) -> Result<Repeat, SuiteError> {
    let Some(node) = top.node("repeat") else {
        return Ok(Repeat::fixed(3));
    };
    let Value::Table(table) = &node.value else {
        return at_most_max_repeat(top, "repeat").map(|n| Repeat::fixed(n.unwrap_or(3)));
    };
    let mut f = Fields::new(top.file(), "repeat", table, node.origin.clone());
    let min = at_most_max_repeat(&mut f, "min")?.unwrap_or(3);
    let max = at_most_max_repeat(&mut f, "max")?;
    let target = f.percent("target_ci")?;
    let metric = f.str("metric")?;
    f.finish()?;
    let max = max.ok_or_else(|| {
        f.error("an adaptive repeat needs \"max\", e.g. repeat = { min = 3, max = 15, target_ci = \"2%\" }")
    })?;
    let target = target.ok_or_else(|| {
        f.error("an adaptive repeat needs \"target_ci\" (the CI half-width to reach, e.g. \"2%\"); for a fixed count write repeat = N")
    })?;
    if max < min {
        return Err(f.error_at("max", format!("must be at least min ({min})")));
    }
    if target <= 0.0 {
        return Err(f.error_at("target_ci", "must be more than 0%"));
    }
    Ok(Repeat { min, max, target_ci_pct: Some(target), metric })
}

/// Rounds a precision goal runs at most when the suite sets neither `max_rounds` nor `budget`.
pub const DEFAULT_MAX_ROUNDS: u32 = 20;

/// `precision = "±5%"`, with `max_rounds = 12` and/or `budget = "10m"` as its limits.
fn parse_precision(top: &mut Fields, repeat: &Repeat) -> Result<Option<Precision>, SuiteError> {
    let text = top.str("precision")?;
    let max_rounds = at_most_max_repeat(top, "max_rounds")?;
    let budget = top.timeout("budget")?;
    let Some(text) = text else {
        for (key, given) in [("max_rounds", max_rounds.is_some()), ("budget", budget.is_some())] {
            if given {
                return Err(top.error_at(
                    key,
                    "limits the rounds a precision goal runs, and the suite sets none: add precision = \"±5%\", or remove it",
                ));
            }
        }
        return Ok(None);
    };
    let bad = |why: &str| {
        top.error_at(
            "precision",
            format!(
                "\"{text}\" {why}; write the 95% CI half-width every comparison should reach, e.g. precision = \"±5%\""
            ),
        )
    };
    let number = text.trim().trim_start_matches('±').trim_start_matches("+-").trim();
    if number.starts_with('-') {
        return Err(bad("is negative, and a half-width is a size"));
    }
    let half_width = units::parse_percent(number).map_err(|_| bad("is not a percentage"))?;
    if half_width <= 0.0 {
        return Err(bad("asks for no uncertainty at all, which no number of rounds reaches"));
    }
    if repeat.is_adaptive() {
        return Err(top.error_at(
            "precision",
            "and an adaptive repeat (target_ci) both say when to stop: keep one (precision judges the comparisons, target_ci each cell's own CI)",
        ));
    }
    let max_rounds = match (max_rounds, budget) {
        (Some(n), _) => n,
        (None, Some(_)) => MAX_REPEAT as u32,
        (None, None) => DEFAULT_MAX_ROUNDS.max(repeat.min),
    };
    if max_rounds < repeat.min {
        return Err(
            top.error_at("max_rounds", format!("must be at least repeat ({}), the rounds every cell runs", repeat.min))
        );
    }
    Ok(Some(Precision { half_width, max_rounds, budget_s: budget.map(|d| d.as_secs_f64()) }))
}

impl WorkloadEntry {
    /// The metrics a variant's tables and charts lead with.
    pub fn headline(&self, variant: usize) -> Vec<String> {
        match &self.headline {
            Some(h) => h.clone(),
            None => self.variants[variant].spec.workload().headline().iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// Names become parts of directory names and labels: keep them plain.
fn check_name(f: &Fields, key: &str, name: &str) -> Result<(), SuiteError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c)) {
        return Err(f.error(format!("{key} \"{name}\" may contain only letters, digits, '_', '-' and '.'")));
    }
    Ok(())
}

/// The tables of a required `[[section]]` list.
/// The `[[env]]` tables, each read by its kind.
fn parse_envs(file: &str, tables: &[(&Table, Origin)]) -> Result<Vec<Named<Box<dyn Environment>>>, SuiteError> {
    let kinds = || kinds::ENVS.iter().map(|k| k.name).collect();
    tables
        .iter()
        .map(|(t, origin)| {
            named(file, "env", t, origin.clone(), kinds(), |kind, f| (kinds::env(kind).expect("listed").parse)(f))
        })
        .collect()
}

/// `cells = ["env=runsc*,rw=randread", …]`: the selectors that keep part of the matrix.
fn parse_cells(top: &mut Fields) -> Result<Vec<Selector>, SuiteError> {
    let texts = top.str_list("cells")?.unwrap_or_default();
    texts.iter().map(|text| Selector::parse(text).map_err(|e| top.error_at("cells", e))).collect()
}

fn sections<'a>(top: &mut Fields<'a>, key: &'static str) -> Result<Vec<(&'a Table, Origin)>, SuiteError> {
    let found = optional_sections(top, key)?;
    if found.is_empty() {
        return Err(top.error(format!("at least one [[{key}]] table is required")));
    }
    Ok(found)
}

fn optional_sections<'a>(top: &mut Fields<'a>, key: &'static str) -> Result<Vec<(&'a Table, Origin)>, SuiteError> {
    match top.node(key).map(|n| &n.value) {
        None => Ok(Vec::new()),
        Some(Value::List(items)) => items
            .iter()
            .map(|n| match &n.value {
                Value::Table(t) => Ok((t, n.origin.clone())),
                other => Err(top.error_at(key, format!("expected [[{key}]] tables, found {}", other.type_name()))),
            })
            .collect(),
        Some(other) => Err(top.error_at(key, format!("expected [[{key}]] tables, found {}", other.type_name()))),
    }
}

/// Reads `name` and `kind`, then lets the kind read (and check) the rest.
fn named<T>(
    file: &str,
    section: &str,
    table: &Table,
    origin: Origin,
    kind_names: Vec<&'static str>,
    parse: impl Fn(&str, &mut Fields) -> Result<T, SuiteError>,
) -> Result<Named<T>, SuiteError> {
    let mut f = Fields::new(file, format!("[[{section}]]"), table, origin.clone());
    let name = f.required_str("name")?;
    check_name(&f, "name", &name)?;
    let mut f = Fields::new(file, format!("{section} \"{name}\""), table, origin);
    f.required_str("name")?;
    let kind = f.required_str("kind")?;
    if !kind_names.contains(&kind.as_str()) {
        return Err(
            f.error_at("kind", format!("unknown kind \"{kind}\"; allowed kinds are: {}", kind_names.join(", ")))
        );
    }
    let cost_per_hour = if section == "env" { f.float("cost_per_hour")? } else { None };
    if cost_per_hour.is_some_and(|c| c < 0.0) {
        return Err(f.error_at("cost_per_hour", "must not be negative"));
    }
    let attach = if section == "volume" { crate::env::vm::attach::Attach::parse(&mut f, None)? } else { None };
    let pins = if section == "env" {
        CpuPins { sandbox: f.cpuset("cpuset")?, loader: f.cpuset("loader_cpuset")? }
    } else {
        CpuPins::default()
    };
    if let CpuPins { sandbox: Some(sandbox), loader: Some(loader) } = &pins {
        let shared = sandbox.overlap(loader);
        if !shared.is_empty() {
            return Err(f.error_at(
                "loader_cpuset",
                format!("shares CPU(s) {shared} with cpuset = \"{sandbox}\": give the database and the load generator CPUs of their own"),
            ));
        }
    }
    let item = parse(&kind, &mut f)?;
    Ok(Named { name, kind, item, cost_per_hour, attach, pins })
}

fn bound(file: &str, table: &Table, origin: Origin) -> Result<Bound, SuiteError> {
    let mut f = Fields::new(file, "[[bound]]", table, origin);
    let metric = f.required_str("metric")?;
    let max_overhead_pct = f
        .percent("max_overhead")?
        .ok_or_else(|| f.error("the key \"max_overhead\" is required, e.g. max_overhead = \"10%\""))?;
    let cells = match f.str("cells")? {
        Some(text) => Some(Selector::parse(&text).map_err(|e| f.error_at("cells", e))?),
        None => None,
    };
    f.finish()?;
    Ok(Bound { metric, max_overhead_pct, cells })
}

fn parse_baseline(
    file: &str,
    node: &Node,
    envs: &[Named<Box<dyn Environment>>],
    volumes: &[Named<Box<dyn Volume>>],
) -> Result<Baseline, SuiteError> {
    let Value::Table(table) = &node.value else {
        return Err(SuiteError {
            file: file.into(),
            origin: node.origin.clone(),
            message:
                "baseline must be a table like { env = \"host\", volume = \"tmpfs\" } (either key may be left out)"
                    .into(),
        });
    };
    let mut f = Fields::new(file, "baseline", table, node.origin.clone());
    let env = f.str("env")?;
    let volume = f.str("volume")?;
    f.finish()?;
    if env.is_none() && volume.is_none() {
        return Err(f.error("name the baseline env, volume or both, e.g. { env = \"host\" } to compare every cell with the host on its own volume"));
    }
    if let Some(env) = &env
        && !envs.iter().any(|e| e.name == *env)
    {
        let names: Vec<&str> = envs.iter().map(|e| e.name.as_str()).collect();
        return Err(f.error_at(
            "env",
            format!("names no [[env]]: \"{env}\"; the suite's environments are: {}", names.join(", ")),
        ));
    }
    if let Some(volume) = &volume
        && !volumes.iter().any(|v| v.name == *volume)
    {
        let names: Vec<&str> = volumes.iter().map(|v| v.name.as_str()).collect();
        return Err(f.error_at(
            "volume",
            format!("names no [[volume]]: \"{volume}\"; the suite's volumes are: {}", names.join(", ")),
        ));
    }
    Ok(Baseline { env, volume, workloads: Default::default() })
}
