//! CQL load with isobench's cassandra-stress-compatible generator (`isobench cql`), as a suite
//! workload: `args` is the measured phase in cassandra-stress's syntax, `load` optional phases
//! run first and not measured (`load = "write n=100000"`, then `args = "read duration=30s"`; or
//! `load = ["write n=100000", "read duration=5s"]`, the rows written and then read once more to
//! warm the server's code up).
//! Which nodes it talks to comes from the suite's `[[server]]`, or from `-node` in `args`.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::{CapacityDefaults, Kind, Output, ParseContext, RunContext, Spec, Unfit, Workload, parse_capacity};
use crate::store::{RawFile, Sample, Series};
use crate::syntax::{Fields, SuiteError};
use crate::sys;
use cql_stress::capacity::{Plan, Search, Step};
use cql_stress::loaders;
use cql_stress::process::{Finished, Launcher, StdinFeed};
use cql_stress::{self as cql, settings, settings::Settings, stress::RunResult};

mod indexed;

pub const KIND: Kind = Kind { name: "cql", list_keys: &["load"], parse, capacity: Ok(()) };

/// Gives the load generator isobench's way of starting its loaders: as `isobench cql …`, each
/// marked with the run's token for `cleanup` and stopped on an interrupt, as every process of a
/// run is.
pub fn launch_loaders_as_isobench() {
    cql_stress::process::launched_by(Launcher { name: "isobench cql", subcommand: &["cql"], run: run_loader });
}

fn run_loader(
    cmd: &mut std::process::Command,
    on_line: &mut (dyn FnMut(&str) + Send),
    feed: Option<StdinFeed>,
) -> Result<Finished> {
    let token = std::env::var(sys::TOKEN_VAR).ok();
    let options =
        sys::Options { token: token.as_deref(), on_stdout_line: Some(on_line), stdin_then: feed, ..Default::default() };
    let finished = sys::run(cmd, options)?;
    Ok(Finished { status: finished.status, stdout: finished.stdout, stderr: finished.stderr })
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Cql {
    pub args: String,
    /// The phases run in turn before the measured one, not measured.
    #[serde(default, deserialize_with = "one_or_more", skip_serializing_if = "Vec::is_empty")]
    pub load: Vec<String>,
    /// The nodes to load, when the suite names a server; otherwise `-node` in `args`.
    #[serde(default)]
    pub target: Option<Target>,
    /// Loader processes that split the key space (`-loaders N` of `isobench cql`); one in-process
    /// loader when not set.
    #[serde(default)]
    pub loaders: Option<u32>,
    /// This agent is one pod of an Indexed Job of `loaders` pods: it runs its own slice (the
    /// pod's `JOB_COMPLETION_INDEX`) and sends its HDR logs back for the host to merge
    /// (`combine_indexed`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub indexed: bool,
    /// The `profile=` files of `user` phases, as written in the phase (relative to the suite),
    /// with their text: carried to wherever the load runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, String>,
    /// The managed server's node count for this workload's cells (`nodes = [1, 3]` is an axis
    /// of the matrix); the server's own `nodes` when not set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<usize>,
    /// Search the highest `fixed=` rate whose response time stays within a bound, in place of
    /// one run of the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Plan>,
    /// `warmup = "keep"`: the measured figures include the phase's warm-up, where by default
    /// the windows that show one are left out (`warmup_s` says how long it was).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_warmup: bool,
}

/// Where a CQL capacity search starts and how long its steps are.
const CAPACITY: CapacityDefaults =
    CapacityDefaults { start: 500.0, warmup: Duration::from_secs(2), window: Duration::from_secs(5) };

/// The tasks a capacity search keeps when the phase names no `-rate threads=`: each has one
/// operation in flight, so they bound the rate at a given latency (64 at 10 ms: 6.4k op/s).
const CAPACITY_THREADS: u32 = 64;

/// Where Kubernetes tells a pod of an Indexed Job its index.
pub const INDEX_VAR: &str = "JOB_COMPLETION_INDEX";

/// What a loader pod prints on stderr as its measured phase begins: the cue for a fault and for
/// counting the database pods' CPU, read from the pods' logs.
pub const MEASURED_LINE: &str = "ISOBENCH-MEASURED";

/// What a loader pod prints on stderr as its measured phase ends.
pub const MEASURED_END_LINE: &str = "ISOBENCH-MEASURED-END";

/// A cue as a pod prints it: the line, then when (seconds since the epoch by the pod's clock).
/// The host reads the pods' logs a poll and an API call after: timed from the cue itself, a
/// fault lands where the loaders' own seconds say (it landed up to 1 s later, once 0.9 s).
pub fn stamped(line: &str, at: SystemTime) -> String {
    format!("{line} at {:.3}", at.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64())
}

/// The cue that the measured phase begins now, as a pod prints it on stderr.
pub fn measured_began() -> String {
    stamped(MEASURED_LINE, SystemTime::now())
}

/// Whether `log` holds the cue `line` on a line of its own, as [`stamped`] prints it or bare;
/// Some(when it was said) where the line carries a time it can read.
pub fn find_cue(log: &str, line: &str) -> Option<Option<SystemTime>> {
    log.lines().find_map(|l| {
        let rest = l.trim_end().strip_prefix(line)?;
        if rest.is_empty() {
            return Some(None);
        }
        let secs: Option<f64> = rest.strip_prefix(" at ")?.parse().ok();
        Some(secs.filter(|s| s.is_finite() && *s >= 0.0).map(|s| UNIX_EPOCH + Duration::from_secs_f64(s)))
    })
}

/// Where the database is and how to log in. The password travels to the agent but is never
/// shown: `Debug` and every description redact it.
#[derive(Serialize, Deserialize, Clone, Default)]
pub struct Target {
    pub nodes: Vec<String>,
    pub port: u16,
    pub user: Option<String>,
    pub password: Option<String>,
    /// The nodes' certificates (PEM) when they speak TLS: loader processes trust them
    /// (`-transport truststore=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truststore: Option<String>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("nodes", &self.nodes)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "REDACTED"))
            .finish()
    }
}

fn parse(f: &mut Fields, ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let args = f.str("args")?.ok_or_else(|| {
        f.error_at("args", "the measured phase is required, e.g. args = \"read duration=30s -rate threads=32\"")
    })?;
    let load = match f.node("load").map(|n| &n.value) {
        Some(crate::syntax::Value::List(_)) => f.str_list("load")?.unwrap_or_default(),
        _ => f.str("load")?.into_iter().collect(),
    };
    let loaders = f.count("loaders")?.map(|n| n as u32).filter(|n| *n > 1);
    let mut profiles = BTreeMap::new();
    for (key, text) in std::iter::once(("args", &args)).chain(load.iter().map(|l| ("load", l))) {
        for name in profile_names(text) {
            let full = ctx.resolve(&name);
            let content = std::fs::read_to_string(&full)
                .map_err(|e| f.error_at(key, format!("profile={name}: cannot read {}: {e}", full.display())))?;
            profiles.insert(name, content);
        }
        parse_phase(text, None, &profiles).map_err(|e| f.error_at(key, e.to_string()))?;
        if let Some(n) = loaders {
            loaders::split_with(&words(text), n, &profiles)
                .map_err(|e| f.error_at(key, e.to_string().trim_end().to_string()))?;
        }
    }
    let nodes = f.count("nodes")?.map(|n| n as usize);
    if nodes.is_some_and(|n| n > 254) {
        return Err(f.error_at("nodes", "a managed cluster has 1 to 254 nodes"));
    }
    let capacity = parse_capacity(f, CAPACITY)?;
    if capacity.is_some() {
        capacity_phase(&args).map_err(|e| f.error_at("args", e))?;
    }
    let keep_warmup = f.choice("warmup", &["cut", "keep"])?.as_deref() == Some("keep");
    f.finish()?;
    Ok(Spec::Cql(Cql { args, load, target: None, loaders, indexed: false, profiles, nodes, capacity, keep_warmup }))
}

/// `load` as stored: one phase (a string, as result sets before the list have it), several, or
/// none.
fn one_or_more<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Phases {
        One(String),
        More(Vec<String>),
    }
    Ok(match Option::<Phases>::deserialize(d)? {
        None => Vec::new(),
        Some(Phases::One(p)) => vec![p],
        Some(Phases::More(p)) => p,
    })
}

/// A measured phase a capacity search can run: the search sets each step's rate and length.
fn capacity_phase(text: &str) -> Result<(), String> {
    let tokens = words(text);
    let command = tokens.iter().take_while(|t| !t.starts_with('-'));
    if let Some(stop) =
        command.clone().find(|t| ["n=", "n>", "n<", "duration=", "err<"].iter().any(|k| t.starts_with(k)))
    {
        return Err(format!(
            "{stop}: a capacity search runs timed steps (capacity.window); leave the stop condition out of the measured phase"
        ));
    }
    if let Some(rate) = tokens.iter().find(|t| t.starts_with("fixed=") || t.starts_with("throttle=")) {
        return Err(format!("{rate}: a capacity search sets the rate of each step itself; remove it from -rate"));
    }
    Ok(())
}

/// A node that cannot be reached fails every repetition the same way: the cell is unfit.
fn unfit_if_unreachable(e: anyhow::Error) -> anyhow::Error {
    if format!("{e:#}").contains("cannot connect to") { anyhow::Error::new(Unfit(format!("{e:#}"))) } else { e }
}

/// The files of a phase's `profile=` (several, comma-separated).
fn profile_names(text: &str) -> Vec<String> {
    words(text)
        .iter()
        .filter_map(|w| w.strip_prefix("profile="))
        .flat_map(|list| list.split(','))
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

/// A phase as a shell would pass it: `keyspace="keys" "replication(factor=3)"` pasted from a
/// study's command line means what it meant there.
fn words(text: &str) -> Vec<String> {
    settings::tokens(&shlex::split(text).unwrap_or_else(|| vec![text.to_string()]))
}

/// One phase's settings; the target's nodes, port and login take the place of `-node`,
/// `-port` and `-mode user=/password=`.
fn parse_phase(text: &str, target: Option<&Target>, profiles: &BTreeMap<String, String>) -> Result<Settings> {
    let mut settings =
        settings::parse_with(&words(text), profiles).map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
    if settings.graph.is_some() || settings.log.file.is_some() || settings.log.hdrfile.is_some() {
        bail!(
            "-graph and -log file=/hdrfile= write files on the machine that runs the load; in a suite, the report has the series"
        );
    }
    if let Some(t) = target {
        settings.nodes = t.nodes.clone();
        settings.native_port = t.port;
        if t.user.is_some() {
            settings.mode.user = t.user.clone();
            settings.mode.password = t.password.clone();
        }
    }
    Ok(settings)
}

/// A phase as reports show it: passwords replaced.
fn shown(phase: &str) -> String {
    cql::redacted(std::slice::from_ref(&phase.to_string()))
}

impl Cql {
    pub fn phase(&self, text: &str) -> Result<Settings> {
        parse_phase(text, self.target.as_ref(), &self.profiles)
    }

    /// A phase's command line for loader processes: the target in place of `-node`, `-port`
    /// and the login, and its profile written into `dir` (loaders read it as a file).
    fn loader_command(&self, text: &str, dir: &std::path::Path) -> Result<Vec<String>> {
        let mut tokens = words(text);
        let mut written: Vec<String> = Vec::new();
        for (i, name) in profile_names(text).iter().enumerate() {
            let content = self.profiles.get(name).ok_or_else(|| anyhow!("profile={name} was not carried"))?;
            std::fs::create_dir_all(dir)?;
            let base = std::path::Path::new(name).file_name().map_or("profile.yaml".into(), |n| n.to_string_lossy());
            // Two profiles of one name from different folders each keep a file of their own.
            let mut file = dir.join(base.as_ref()).to_string_lossy().into_owned();
            if written.contains(&file) {
                file = dir.join(format!("{i}-{base}")).to_string_lossy().into_owned();
            }
            std::fs::write(&file, content).with_context(|| format!("writing {file}"))?;
            written.push(file);
        }
        if !written.is_empty() {
            loaders::set(&mut tokens, None, "profile=", &written.join(","));
        }
        if let Some(t) = &self.target {
            loaders::set(&mut tokens, Some("-node"), "", &t.nodes.join(","));
            loaders::set(&mut tokens, Some("-port"), "native=", &t.port.to_string());
            if let Some(user) = &t.user {
                loaders::set(&mut tokens, Some("-mode"), "user=", user);
                loaders::set(&mut tokens, Some("-mode"), "password=", t.password.as_deref().unwrap_or_default());
            }
            if let Some(pem) = &t.truststore {
                std::fs::create_dir_all(dir)?;
                let file = dir.join("truststore.pem");
                std::fs::write(&file, pem).with_context(|| format!("writing {}", file.display()))?;
                loaders::set(&mut tokens, Some("-transport"), "truststore=", &file.to_string_lossy());
            }
        }
        Ok(tokens)
    }

    /// Runs a phase as `n` loader processes (each one's output kept in `out`) and merges them.
    fn run_loaders(
        &self,
        text: &str,
        n: u32,
        dir: &std::path::Path,
        out: &mut Output,
        running: &(dyn Fn() + Sync),
    ) -> Result<loaders::Merged> {
        let commands =
            loaders::split(&self.loader_command(text, dir)?, n).map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
        let ran = loaders::run(&commands, dir, running)?;
        let phase = dir.file_name().map_or("cql".into(), |n| n.to_string_lossy().into_owned());
        for (i, l) in ran.iter().enumerate() {
            let content = format!("isobench cql {}\n\n{}", l.command, l.output);
            out.raw.push(RawFile { name: format!("{phase}-loader-{}.log", i + 1), content });
        }
        let fixed = self.phase(text)?.rate.fixed.is_some();
        loaders::merge(&ran, if fixed { "rt" } else { "st" })
    }
}

impl Workload for Cql {
    fn writes_volume(&self) -> bool {
        // A managed database keeps its data on the volume.
        true
    }

    fn programs(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn headline(&self) -> Vec<&'static str> {
        crate::workload::served_headline(self.capacity.is_some())
    }

    fn recorded(&self) -> Vec<String> {
        let latency = ["latency_mean", "latency_p50", "latency_p95", "latency_p99", "latency_p999", "latency_max"];
        let rates = ["op_rate", "partition_rate", "row_rate", "load_op_rate", "ops", "errors"];
        latency.into_iter().chain(rates).map(String::from).collect()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([("cql.args".to_string(), shown(&self.args))]);
        if !self.load.is_empty() {
            d.insert("cql.load".into(), self.load.iter().map(|l| shown(l)).collect::<Vec<_>>().join(", then "));
        }
        if let Ok(s) = self.phase(&self.args) {
            let threads = match (&self.capacity, s.rate.threads) {
                (_, Some(t)) => t.to_string(),
                (Some(_), None) => CAPACITY_THREADS.to_string(),
                (None, None) => "auto".into(),
            };
            d.insert("cql.threads".into(), threads);
            let latency = if s.rate.fixed.is_some() || self.capacity.is_some() {
                "response time (fixed rate)"
            } else {
                "service time"
            };
            d.insert("cql.latency".into(), latency.into());
        }
        if let Some(plan) = &self.capacity {
            d.insert("capacity.bound".into(), plan.bound.text());
            d.insert("capacity.search".into(), plan.describe());
        } else {
            let warmup = match (self.keep_warmup, self.loaders) {
                (true, _) => "kept in the measured figures",
                (false, Some(_)) => "kept: loader processes merge their logs, which keep no windows apart",
                (false, None) => "left out where the measured phase's windows show one (warmup_s)",
            };
            d.insert("cql.warmup".into(), warmup.into());
        }
        d
    }

    fn capacity(&self) -> Option<&Plan> {
        self.capacity.as_ref()
    }

    fn timeout(&self) -> Duration {
        match &self.capacity {
            Some(plan) => super::capacity_timeout(plan) + self.expected_duration(),
            None => self.expected_duration() * 3 + Duration::from_secs(180),
        }
    }

    fn expected_duration(&self) -> Duration {
        let phase = |text: &str| {
            self.phase(text).ok().map_or(Duration::from_secs(60), |s| match s.command.stop {
                settings::Stop::Duration(d, _) => d + Duration::from_secs(15),
                // No rate to go by before the run: assume a slow node (5k op/s) and warm-up.
                _ => Duration::from_secs(15 + s.command.count().unwrap_or(100_000) / 5_000),
            })
        };
        let measured = match &self.capacity {
            Some(plan) => super::capacity_duration(plan),
            None => phase(&self.args),
        };
        measured + self.load.iter().map(|l| phase(l)).sum::<Duration>()
    }

    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()> {
        self.run_cued(ctx, out, &|| {})
    }
}

impl Cql {
    /// The load phases with the names their loaders' files and folders take: `load`, then
    /// `load-2`, `load-3`, ….
    fn load_phases(&self) -> impl Iterator<Item = (String, &String)> {
        self.load
            .iter()
            .enumerate()
            .map(|(i, l)| (if i == 0 { "load".to_string() } else { format!("load-{}", i + 1) }, l))
    }

    /// Runs the phases; `measured` is called as the measured phase begins (a fault's cue).
    pub fn run_cued(&self, ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()> {
        if let (Some(n), true) = (self.loaders, self.indexed) {
            return self.run_slice(n, ctx, out);
        }
        if let Some(n) = self.loaders {
            return self.run_with_loaders(n, ctx, out, measured);
        }
        for (i, load) in self.load.iter().enumerate() {
            let report = cql::run(self.phase(load)?, &shown(load), false, cql::Pauses::None)?;
            let last = report.runs.last().ok_or_else(|| anyhow!("the load phase ran nothing"))?;
            if !report.success {
                bail!("the load phase ({load}) failed: {} errors", last.total.errors);
            }
            if i == 0 {
                out.samples.push(Sample::new("load_op_rate", last.summary().op_rate, "op/s"));
            }
        }
        measured();
        if let Some(plan) = &self.capacity {
            return self.search(plan, ctx, out);
        }
        let report = cql::run(self.phase(&self.args)?, &shown(&self.args), false, cql::Pauses::None)
            .map_err(unfit_if_unreachable)?;
        let run = report.runs.last().ok_or_else(|| anyhow!("the measured phase ran nothing"))?;
        out.samples.extend(samples(run, !self.keep_warmup));
        out.series.extend(series(run));
        if run.total.operations() == 0 {
            bail!("the load did no operation ({})", shown(&self.args));
        }
        if !report.success {
            bail!(
                "{} of {} operations failed ({})",
                run.total.errors,
                run.total.operations() + run.total.errors,
                self.args
            );
        }
        Ok(())
    }

    fn run_with_loaders(&self, n: u32, ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()> {
        for (i, (phase, load)) in self.load_phases().enumerate() {
            let merged = self.run_loaders(load, n, &ctx.scratch_dir.join(&phase), out, &|| {})?;
            if let Some(failed) = &merged.failed {
                bail!("the load phase ({}) failed: {failed}", shown(load));
            }
            if i == 0 {
                out.samples.push(Sample::new("load_op_rate", merged.op_rate, "op/s"));
            }
        }
        if let Some(plan) = &self.capacity {
            measured();
            return self.search(plan, ctx, out);
        }
        // The measured phase begins when every loader has begun its load.
        let merged = self.run_loaders(&self.args, n, &ctx.scratch_dir.join("run"), out, measured)?;
        self.merged_output(&merged, n, out)
    }

    /// The capacity search: in this process, or with `loaders` as that many loader processes per
    /// step, each offered its share of the rate, their HDR logs merged per step.
    fn search(&self, plan: &Plan, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let settings = self.phase(&self.args)?;
        let threads = settings.rate.threads.unwrap_or(CAPACITY_THREADS);
        let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let mut search = Search::new(plan.clone(), cores, Some(threads * self.loaders.unwrap_or(1)));
        let say = |step: &Step, n: usize| {
            crate::sys::progress::say(&format!("capacity step {n}: {}", step.line(&plan.bound)));
        };
        match self.loaders.filter(|n| *n > 1) {
            None => {
                let mut n = 0;
                cql::capacity(settings, threads, &mut search, &mut |step| {
                    n += 1;
                    say(step, n);
                })
                .map_err(unfit_if_unreachable)?;
            }
            Some(loaders) => {
                if !settings.command.no_warmup {
                    self.loaders_warm_up(&settings, loaders, &ctx.scratch_dir.join("warm-up"))?;
                }
                while let Some(rate) = search.next_rate() {
                    let n = search.steps().len() + 1;
                    let dir = ctx.scratch_dir.join(format!("step-{n}"));
                    let step = self.loaders_step(plan, threads, loaders, rate, &dir, out)?;
                    say(search.record(step), n);
                }
            }
        }
        super::capacity_output(&search, out)
    }

    /// cassandra-stress's warm-up, as the loaders' one unscheduled run of its operations before
    /// the steps, each step's loaders being fresh processes.
    fn loaders_warm_up(&self, settings: &Settings, loaders: u32, dir: &std::path::Path) -> Result<()> {
        let mut tokens = self.loader_command(&self.args, dir)?;
        let count = cql_stress::engine::warmup_iterations(settings).max(u64::from(loaders));
        loaders::set(&mut tokens, None, "n=", &count.to_string());
        tokens.insert(1, "no-warmup".into());
        let commands = loaders::split(&tokens, loaders).map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
        let ran = loaders::run(&commands, dir, &|| {})?;
        match ran.iter().find(|l| !l.success) {
            Some(failed) => bail!("the capacity search's warm-up failed: {}", failed.reason()),
            None => Ok(()),
        }
    }

    /// One capacity step as `loaders` loader processes at rate ÷ `loaders` each, merged from
    /// their HDR logs (response and service times); their warm-up is not in their logs.
    fn loaders_step(
        &self,
        plan: &Plan,
        threads: u32,
        loaders: u32,
        rate: f64,
        dir: &std::path::Path,
        out: &mut Output,
    ) -> Result<Step> {
        let mut tokens = self.loader_command(&self.args, dir)?;
        let share = (rate / f64::from(loaders)).round().max(1.0);
        loaders::set(&mut tokens, None, "duration=", &format!("{}s", plan.step_time().as_secs_f64().ceil()));
        loaders::set(&mut tokens, Some("-rate"), "threads=", &threads.to_string());
        loaders::set(&mut tokens, Some("-rate"), "fixed=", &format!("{share}/s"));
        if !tokens.iter().any(|t| t == "no-warmup") {
            tokens.insert(1, "no-warmup".into());
        }
        let commands = loaders::split(&tokens, loaders).map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
        let settle = [(cql::stress::STEP_VAR, plan.warmup.as_millis().to_string())];
        let before = (crate::sys::Usage::children(), std::time::Instant::now());
        let ran = loaders::run_with(&commands, dir, &settle, &|| {})?;
        let cpu = crate::sys::Usage::children().since(&before.0).cpu_s / before.1.elapsed().as_secs_f64();
        let step_name = dir.file_name().map_or("step".into(), |n| n.to_string_lossy().into_owned());
        for (i, l) in ran.iter().enumerate() {
            let content = format!("isobench cql {}\n\n{}", l.command, l.output);
            out.raw.push(RawFile { name: format!("{step_name}-loader-{}.log", i + 1), content });
        }
        let response = loaders::merge(&ran, "rt")?;
        let service = loaders::merge(&ran, "st")?;
        let errors = response.errors + u64::from(response.failed.is_some());
        // Each loader's rate over its own window, added: the loaders start together, but a few
        // milliseconds apart, and the merged span would count those as time none of them ran.
        let achieved = ran.iter().map(|l| l.op_rate).sum();
        let step = cql::stress::step_of(&response.latency, &service.latency, achieved, errors, plan.bound.percentile);
        // Each loader offers a whole op/s share: within one op/s per loader of what was asked.
        Ok(Step { offered: rate, client_cpu: Some(cpu), ..step })
    }

    /// The merged figures of `n` loaders, each loader's own, and its command lines.
    fn merged_output(&self, merged: &loaders::Merged, n: u32, out: &mut Output) -> Result<()> {
        let ms = |q: f64| merged.latency.value_at_quantile(q) as f64 / 1000.0;
        out.samples.extend([
            Sample::new("op_rate", merged.op_rate, "op/s"),
            Sample::new("latency_mean", merged.latency.mean() / 1000.0, "us"),
            Sample::new("latency_p50", ms(0.5), "us"),
            Sample::new("latency_p95", ms(0.95), "us"),
            Sample::new("latency_p99", ms(0.99), "us"),
            Sample::new("latency_p999", ms(0.999), "us"),
            Sample::new("latency_max", merged.latency.max() as f64 / 1000.0, "us"),
            Sample::new("errors", merged.errors as f64, "errors"),
            Sample::new("ops", merged.latency.len() as f64, "ops"),
            Sample::new("loaders", f64::from(n), "loaders"),
        ]);
        out.samples.extend(client_samples(&merged.client));
        let rates: Vec<f64> = merged.each.iter().map(|l| l.op_rate).collect();
        let (min, max) = rates.iter().fold((f64::MAX, 0.0f64), |(a, b), r| (a.min(*r), b.max(*r)));
        out.samples.push(Sample::new("loader_op_rate_min", min, "op/s"));
        out.samples.push(Sample::new("loader_op_rate_max", max, "op/s"));
        for (i, l) in merged.each.iter().enumerate() {
            out.samples.push(Sample::new(format!("loader_{}_op_rate", i + 1), l.op_rate, "op/s"));
            out.samples.push(Sample::new(format!("loader_{}_errors", i + 1), l.errors as f64, "errors"));
        }
        out.notes.push(format!(
            "{n} loaders: {}",
            merged.each.iter().map(|l| l.command.as_str()).collect::<Vec<_>>().join(" | ")
        ));
        if let Some(failed) = &merged.failed {
            bail!("{failed} ({})", shown(&self.args));
        }
        if merged.latency.is_empty() {
            bail!("the {n} loaders did no operation ({})", shown(&self.args));
        }
        Ok(())
    }
}

/// The summary figures, as cassandra-stress's Results block has them (latencies in µs); with
/// `steady`, from the end of the run's warm-up on (`warmup_s`), but for `ops`, every operation of
/// the phase (its CPU per operation is the whole phase's).
pub fn samples(run: &RunResult, steady: bool) -> Vec<Sample> {
    let whole = run.summary();
    let (s, warmup) = match steady {
        true => {
            let steady = run.steady();
            (steady.summary, Some(steady.warmup_s))
        }
        false => (run.summary(), None),
    };
    let us = |ms: f64| ms * 1000.0;
    let mut samples = vec![
        Sample::new("op_rate", s.op_rate, "op/s"),
        Sample::new("partition_rate", s.partition_rate, "pk/s"),
        Sample::new("row_rate", s.row_rate, "row/s"),
        Sample::new("latency_mean", us(s.mean_ms), "us"),
        Sample::new("latency_p50", us(s.median_ms), "us"),
        Sample::new("latency_p95", us(s.p95_ms), "us"),
        Sample::new("latency_p99", us(s.p99_ms), "us"),
        Sample::new("latency_p999", us(s.p999_ms), "us"),
        Sample::new("latency_max", us(s.max_ms), "us"),
        Sample::new("errors", whole.errors as f64, "errors"),
        Sample::new("ops", whole.operations as f64, "ops"),
    ];
    samples.extend(warmup.map(|w| Sample::new("warmup_s", w, "s")));
    samples.extend(client_samples(&run.client));
    samples
}

/// What the client did besides getting answers, where it did anything (a node went silent): its
/// timeouts, retries and speculative executions over `rows` (one loader's, or every loader's).
fn client_samples(rows: &[cql::failover::ClientRow]) -> Vec<Sample> {
    let Some(totals) = cql::failover::totals(rows) else { return Vec::new() };
    client_counts().into_iter().map(|(metric, count)| Sample::new(metric, count(&totals) as f64, "requests")).collect()
}

/// One of the client's own counts in an interval (`cql::failover`).
type ClientCount = fn(&cql::failover::ClientRow) -> u64;

/// The client's own counts, by metric.
fn client_counts() -> [(&'static str, ClientCount); 3] {
    [("client_timeouts", |r| r.timeouts), ("client_retries", |r| r.retries), ("client_speculative", |r| r.speculative)]
}

fn series(run: &RunResult) -> Vec<Series> {
    let of = |metric: &str, unit: &str, value: fn(&cql::metrics::Figures) -> f64| Series {
        metric: metric.into(),
        unit: unit.into(),
        points: run.intervals.iter().map(|f| (f.time, value(f))).collect(),
    };
    let mut series = vec![
        of("op_rate", "op/s", |f| f.op_rate),
        of("latency_mean", "us", |f| f.mean_ms * 1000.0),
        of("latency_p99", "us", |f| f.p99_ms * 1000.0),
    ];
    if cql::failover::eventful(&run.client) {
        series.extend(client_counts().map(|(metric, count)| Series {
            metric: metric.into(),
            unit: "requests".into(),
            points: run.client.iter().map(|r| (r.time, count(r) as f64)).collect(),
        }));
    }
    series
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cue_is_found_on_a_line_of_its_own_with_its_time() {
        let at = UNIX_EPOCH + Duration::from_millis(1_796_597_154_045);
        let log = format!("connected\n{MEASURED_END_LINE}\n{}\n", stamped(MEASURED_LINE, at));
        let found = find_cue(&log, MEASURED_LINE).flatten().expect("the stamped cue, not the end line");
        assert!(found.duration_since(at).unwrap_or_else(|e| e.duration()) < Duration::from_millis(1), "{found:?}");
        assert_eq!(find_cue(&format!("{MEASURED_LINE}\n"), MEASURED_LINE), Some(None), "bare, as before");
        assert_eq!(find_cue(&format!("{MEASURED_LINE} at soon\n"), MEASURED_LINE), Some(None));
        assert_eq!(find_cue(&format!("x {MEASURED_LINE}\n{MEASURED_END_LINE}"), MEASURED_LINE), None);
        assert_eq!(find_cue(&log, MEASURED_END_LINE), Some(None));
    }

    #[test]
    fn the_target_replaces_nodes_port_and_login() {
        let target = Target {
            nodes: vec!["10.0.0.7".into()],
            port: 19042,
            user: Some("u".into()),
            password: Some("p".into()),
            truststore: None,
        };
        let s = parse_phase("read n=10 -node 127.0.0.1 -port native=9042", Some(&target), &BTreeMap::new()).unwrap();
        assert_eq!(s.nodes, ["10.0.0.7"]);
        assert_eq!(s.native_port, 19042);
        assert_eq!(s.mode.password.as_deref(), Some("p"));
        assert!(!format!("{target:?}").contains("\"p\""));
    }

    #[test]
    fn load_is_one_phase_or_several_and_a_stored_string_still_reads() {
        let read = |json: &str| serde_json::from_str::<Cql>(json).unwrap().load;
        assert_eq!(read(r#"{"args": "read n=1", "load": "write n=10"}"#), ["write n=10"]);
        assert_eq!(read(r#"{"args": "read n=1", "load": null}"#), Vec::<String>::new());
        assert_eq!(read(r#"{"args": "read n=1"}"#), Vec::<String>::new());
        let cql = serde_json::from_str::<Cql>(r#"{"args": "read n=1", "load": ["write n=10", "read n=5"]}"#).unwrap();
        let names: Vec<String> = cql.load_phases().map(|(name, _)| name).collect();
        assert_eq!(names, ["load", "load-2"]);
        assert!(!serde_json::to_string(&Cql { load: Vec::new(), ..cql }).unwrap().contains(r#""load""#));
    }

    #[test]
    fn a_phase_pasted_from_a_shell_loses_its_quotes() {
        let s = parse_phase(
            r#"write n=10 cl=QUORUM -schema keyspace="keys" "replication(factor=3)""#,
            None,
            &BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(s.schema.keyspace, "keys");
        assert_eq!(words("write -schema 'replication(factor=3)'"), ["write", "-schema", "replication(factor=3)"]);
    }

    #[test]
    fn files_written_by_the_loader_are_refused_in_a_suite() {
        let e = parse_phase("write n=10 -graph file=g.html", None, &BTreeMap::new()).unwrap_err();
        assert!(e.to_string().contains("-graph"), "{e}");
    }
}
