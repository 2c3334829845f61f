//! `kind = "pgbench"`: PostgreSQL's own benchmark against the server isobench starts in the
//! cell's environment. `load` is its initialisation (`-i -s 10`, not measured), `args` the
//! measured run's options as its users write them (`-c 8 -j 2 -T 30 -S`, `-f script.sql`); each
//! transaction's latency comes from pgbench's own per-transaction log (`-l`).

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::served::{self, Address, Op, ServedLoad};
use super::{CapacityDefaults, Kind, Output, ParseContext, RunContext, Spec, Workload, parse_capacity};
use crate::syntax::{Fields, SuiteError};
use cql_stress::capacity::{Plan, Search, Step};

pub const KIND: Kind = Kind { name: "pgbench", list_keys: &[], parse, capacity: Ok(()) };

/// Where a pgbench capacity search starts and how long its steps are.
const CAPACITY: CapacityDefaults =
    CapacityDefaults { start: 100.0, warmup: Duration::from_secs(2), window: Duration::from_secs(10) };

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Pgbench {
    /// The measured run's options.
    pub args: String,
    /// The initialisation's options, run before and not measured.
    pub load: Option<String>,
    /// The `-f` scripts, by the name `args` gives them, with their text.
    pub scripts: BTreeMap<String, String>,
    pub keep_warmup: bool,
    /// Search the highest rate (`-R`) whose response time stays within a bound.
    #[serde(default)]
    pub capacity: Option<Plan>,
}

/// The options isobench gives pgbench itself.
const OWN: &[&str] = &["-h", "--host", "-p", "--port", "-U", "--username", "-l", "--log", "--log-prefix"];

fn words(text: &str) -> Vec<String> {
    shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(String::from).collect())
}

/// The value of option `short` (`-c 8`, `-c8`) or `long` (`--client=8`), the last one given.
fn option<'a>(tokens: &'a [String], short: &str, long: &str) -> Option<&'a str> {
    let mut found = None;
    for (i, t) in tokens.iter().enumerate() {
        if t == short || t == long {
            found = tokens.get(i + 1).map(String::as_str);
        } else if let Some(v) = t.strip_prefix(&format!("{long}=")) {
            found = Some(v);
        } else if let Some(v) = t.strip_prefix(short).filter(|v| !v.is_empty() && !t.starts_with("--")) {
            found = Some(v);
        }
    }
    found
}

/// The `-f` scripts `args` names (`-f FILE`, `-f FILE@WEIGHT`, `--file=FILE`).
fn script_names(tokens: &[String]) -> Vec<String> {
    let mut names = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        let value = match t.as_str() {
            "-f" | "--file" => tokens.get(i + 1).map(String::as_str),
            _ => t
                .strip_prefix("--file=")
                .or_else(|| t.strip_prefix("-f").filter(|v| !v.is_empty() && !t.starts_with("--"))),
        };
        if let Some(v) = value {
            names.push(v.split('@').next().unwrap_or(v).to_string());
        }
    }
    names
}

/// Checks the measured run's options: a time to run, clients to run it, nothing isobench sets;
/// in a capacity search, no rate and no time of its own (each step sets both).
fn check_args(tokens: &[String], capacity: bool) -> Result<(), String> {
    if let Some(own) = tokens.iter().find(|t| OWN.iter().any(|o| t.as_str() == *o || t.starts_with(&format!("{o}=")))) {
        return Err(format!("{own}: isobench gives pgbench the server's address, user and log; remove it"));
    }
    if tokens.iter().any(|t| t == "-i" || t == "--initialize") {
        return Err("-i initialises: put it in load = \"-i -s 10\", which runs before the measured phase".into());
    }
    let positive = |short: &str, long: &str, what: &str| -> Result<Option<u64>, String> {
        match option(tokens, short, long) {
            None => Ok(None),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n > 0 => Ok(Some(n)),
                _ => Err(format!("{short} {v}: {what} must be a whole number above 0")),
            },
        }
    };
    positive("-c", "--client", "the clients")?;
    positive("-j", "--jobs", "the threads")?;
    if capacity {
        let steps_set = [("-R", "--rate"), ("-T", "--time")];
        if let Some((set, _)) = steps_set.iter().find(|(short, long)| option(tokens, short, long).is_some()) {
            return Err(format!("{set}: a capacity search sets each step's rate and length itself; remove it"));
        }
        return Ok(());
    }
    if positive("-T", "--time", "the seconds to run")?.is_none() {
        return Err("the measured phase runs for a time: add -T SECONDS, e.g. -T 30".into());
    }
    if option(tokens, "-t", "--transactions").is_some() {
        return Err("-t counts transactions per client; the measured phase runs for a time (-T): remove -t".into());
    }
    Ok(())
}

/// pgbench reads its options and its scripts before it connects: run against a port where
/// nothing listens, the options it refuses are told apart from the connection it could not make.
fn ask_pgbench(tokens: &[String], scripts: &BTreeMap<String, String>) -> Result<(), String> {
    let Some(pgbench) = program() else { return Ok(()) };
    let dir = std::env::temp_dir().join(format!("isobench-pgbench-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let tokens = with_scripts(tokens, scripts, &dir).map_err(|e| e.to_string())?;
    let said = Command::new(pgbench).args(["-h", "127.0.0.1", "-p", "1", "-U", "postgres"]).args(&tokens).output();
    let _ = std::fs::remove_dir_all(&dir);
    let said = said.map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&said.stderr);
    if stderr.contains("connection to server") || stderr.contains("could not connect") {
        return Ok(());
    }
    Err(format!("pgbench refuses it: {}", crate::sys::tail_lines(&stderr, 3)))
}

/// pgbench, on PATH or where Debian's PostgreSQL keeps it.
pub fn program() -> Option<std::path::PathBuf> {
    crate::sys::find_program("pgbench").or_else(|| {
        let mut dirs: Vec<_> = std::fs::read_dir("/usr/lib/postgresql").ok()?.flatten().map(|e| e.path()).collect();
        dirs.sort();
        dirs.iter().rev().map(|d| d.join("bin/pgbench")).find(|p| p.exists())
    })
}

/// A script the suite names, written where the tool reads it.
fn write_script(dir: &std::path::Path, name: &str, content: &str) -> Result<std::path::PathBuf> {
    let base = std::path::Path::new(name).file_name().map_or("script".into(), |n| n.to_string_lossy().into_owned());
    let path = dir.join(base);
    std::fs::write(&path, content)?;
    Ok(path)
}

/// `tokens` with each `-f` script's name replaced by its copy in `dir`.
fn with_scripts(tokens: &[String], scripts: &BTreeMap<String, String>, dir: &std::path::Path) -> Result<Vec<String>> {
    let mut written = BTreeMap::new();
    for (name, text) in scripts {
        written.insert(name.clone(), write_script(dir, name, text)?.to_string_lossy().into_owned());
    }
    Ok(tokens
        .iter()
        .map(|t| written.iter().fold(t.clone(), |t, (name, path)| t.replace(name.as_str(), path)))
        .collect())
}

fn parse(f: &mut Fields, ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let args = f
        .str("args")?
        .ok_or_else(|| f.error_at("args", "the measured phase is required, e.g. args = \"-c 8 -j 2 -T 30\""))?;
    let tokens = words(&args);
    let capacity = parse_capacity(f, CAPACITY)?;
    check_args(&tokens, capacity.is_some()).map_err(|e| f.error_at("args", e))?;
    let mut scripts = BTreeMap::new();
    for name in script_names(&tokens) {
        let full = ctx.resolve(&name);
        let text = std::fs::read_to_string(&full).map_err(|e| {
            f.error_at("args", format!("-f {name}: cannot read {}: {e}; give a file beside the suite", full.display()))
        })?;
        scripts.insert(name, text);
    }
    let timed = ["-T".to_string(), "1".into()];
    let asked: Vec<String> = tokens.iter().chain(capacity.iter().flat_map(|_| timed.iter())).cloned().collect();
    ask_pgbench(&asked, &scripts).map_err(|e| f.error_at("args", e))?;
    let load = f.str("load")?;
    if let Some(load) = &load {
        let tokens = words(load);
        if !tokens.iter().any(|t| t == "-i" || t == "--initialize") {
            return Err(f.error_at("load", "the load phase initialises the tables: load = \"-i -s 10\""));
        }
        ask_pgbench(&tokens, &BTreeMap::new()).map_err(|e| f.error_at("load", e))?;
    }
    let keep_warmup = f.choice("warmup", &["cut", "keep"])?.as_deref() == Some("keep");
    f.finish()?;
    Ok(Spec::Pgbench(Pgbench { args, load, scripts, keep_warmup, capacity }))
}

impl Pgbench {
    fn seconds(&self) -> u64 {
        option(&words(&self.args), "-T", "--time").and_then(|v| v.parse().ok()).unwrap_or(60)
    }

    fn command(&self, at: &Address) -> Result<Command> {
        let pgbench = program().ok_or_else(|| anyhow!("pgbench is not installed: `apt-get install postgresql`"))?;
        let mut cmd = Command::new(pgbench);
        cmd.args(["-h", &at.host, "-p", &at.port.to_string(), "-U", "postgres"]).env("PGDATABASE", "postgres");
        Ok(cmd)
    }
}

/// One capacity step's figures from its transactions: those that ended in the measured window
/// (after `from`, `window` long). With `-R`, pgbench's latency counts from each transaction's
/// scheduled start (the response time); its schedule lag is the wait before it began.
///
/// pgbench schedules `-R` as a Poisson process: a window of a few seconds at a low rate is
/// offered 20 % more or less than the rate by chance alone (18 ± 4 transactions in 3 s at
/// 6/s), which a fixed share of the rate would judge as a server that fell behind. So `achieved`
/// is `offered` times the share of the transactions scheduled in the window that the window
/// completed: a server that keeps up completes what it is offered, whatever the draw.
fn step(ops: &[Op], lags: &[f64], offered: f64, from: f64, window: f64, percentile: f64) -> Step {
    let in_window = |t: f64| t >= from && t < from + window;
    let scheduled = ops.iter().filter(|o| in_window(o.end_s - o.latency_us / 1e6)).count();
    let within: Vec<(f64, f64)> = ops
        .iter()
        .zip(lags)
        .filter(|(o, _)| o.ok && o.end_s >= from && o.end_s < from + window)
        .map(|(o, lag)| (o.latency_us, o.latency_us - lag))
        .collect();
    let errors = ops.iter().filter(|o| !o.ok && o.end_s >= from).count() as u64;
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    let response = sorted(within.iter().map(|w| w.0).collect());
    let service = sorted(within.iter().map(|w| w.1).collect());
    let at = |v: &[f64], q: f64| match v.len() {
        0 => f64::NAN,
        n => v[((q / 100.0 * n as f64).ceil() as usize).clamp(1, n) - 1],
    };
    let kept_up = match scheduled {
        0 => 0.0,
        n => (response.len() as f64 / n as f64).min(1.0),
    };
    Step {
        offered,
        achieved: offered * kept_up,
        latency_us: at(&response, percentile),
        p50_us: at(&response, 50.0),
        p99_us: at(&response, 99.0),
        p999_us: at(&response, 99.9),
        service_us: at(&service, percentile),
        service_mean_us: service.iter().sum::<f64>() / service.len().max(1) as f64,
        errors,
        ..Default::default()
    }
}

/// The schedule lag of each logged transaction (`-R`: the field after the completion time), in
/// the order `parse_log` gives them; 0 without it.
fn parse_lags(text: &str) -> Vec<f64> {
    text.lines()
        .filter(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            f.len() >= 6 && f[4].parse::<f64>().is_ok() && f[5].parse::<f64>().is_ok() && f[2] != "skipped"
        })
        .map(|line| line.split_whitespace().nth(6).and_then(|v| v.parse().ok()).unwrap_or(0.0))
        .collect()
}

/// The operations of pgbench's per-transaction logs (`client transaction latency_us script
/// epoch_s epoch_us [lag] [retries]`; a failed transaction's latency is a word, `failed`).
pub fn parse_log(text: &str) -> Vec<Op> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (s, us): (f64, f64) = (f.get(4)?.parse().ok()?, f.get(5)?.parse().ok()?);
            let end_s = s + us / 1e6;
            Some(match f.get(2)?.parse::<f64>() {
                Ok(latency_us) => Op { end_s, latency_us, ok: true },
                // "skipped" (-L): late by more than the limit, never sent; not an answer.
                Err(_) if f[2] == "skipped" => return None,
                Err(_) => Op { end_s, latency_us: 0.0, ok: false },
            })
        })
        .collect()
}

impl Pgbench {
    /// Runs pgbench with `tokens` and `extra`, logging each transaction into `logs` (under the
    /// scratch directory): the transactions, their schedule lags, and what pgbench said.
    fn logged(
        &self,
        at: &Address,
        tokens: &[String],
        extra: &[String],
        ctx: &RunContext,
        logs: &str,
        timeout: Duration,
    ) -> Result<(Vec<Op>, Vec<f64>, crate::sys::Finished)> {
        let logs = ctx.scratch_dir.join(logs);
        std::fs::create_dir_all(&logs)?;
        let mut cmd = self.command(at)?;
        cmd.arg("-l").arg(format!("--log-prefix={}", logs.join("tx").display())).args(tokens).args(extra);
        let done = served::run_tool(&mut cmd, "pgbench", timeout)?;
        let (mut ops, mut lags) = (Vec::new(), Vec::new());
        for entry in std::fs::read_dir(&logs)?.flatten() {
            let text = std::fs::read_to_string(entry.path())?;
            ops.extend(parse_log(&text));
            lags.extend(parse_lags(&text));
        }
        std::fs::remove_dir_all(&logs)?;
        if ops.is_empty() {
            bail!("pgbench logged no transaction:\n{}", done.tail(10));
        }
        Ok((ops, lags, done))
    }

    /// The capacity search: pgbench at `-R` in steps, each a warm-up then the measured window in
    /// one run, judged on the bound's percentile of the response time, the rate achieved and
    /// the errors.
    fn search(&self, plan: &Plan, at: &Address, tokens: &[String], ctx: &RunContext, out: &mut Output) -> Result<()> {
        let clients = option(tokens, "-c", "--client").and_then(|v| v.parse().ok()).unwrap_or(1u32);
        let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let mut search = Search::new(plan.clone(), cores, Some(clients));
        let length = plan.warmup + plan.window;
        while let Some(rate) = search.next_rate() {
            let n = search.steps().len() + 1;
            let before = (crate::sys::Usage::children(), std::time::Instant::now());
            let extra = ["-R".to_string(), format!("{rate}"), "-T".into(), length.as_secs().max(1).to_string()];
            let (ops, lags, _) =
                self.logged(at, tokens, &extra, ctx, "pgbench-step", length * 2 + Duration::from_secs(60))?;
            let seconds = before.1.elapsed().as_secs_f64();
            let start = ops.iter().map(|o| o.end_s - o.latency_us / 1e6).fold(f64::MAX, f64::min);
            let (from, window) = (start + plan.warmup.as_secs_f64(), plan.window.as_secs_f64());
            let mut ran = step(&ops, &lags, rate, from, window, plan.bound.percentile);
            ran.client_cpu = Some(crate::sys::Usage::children().since(&before.0).cpu_s / seconds);
            let ran = search.record(ran);
            crate::sys::progress::say(&format!("capacity step {n}: {}", ran.line(&plan.bound)));
        }
        super::capacity_output(&search, out)
    }
}

impl ServedLoad for Pgbench {
    fn server_kinds(&self) -> &'static [&'static str] {
        &["postgres"]
    }

    fn held(&self, at: &Address) -> Result<crate::store::Sample> {
        let rows = served::count_said(
            &mut psql(at, "SELECT count(*) FROM pgbench_accounts")?,
            "psql counting pgbench_accounts",
        )?;
        Ok(crate::store::Sample::new("server_rows", rows, "rows"))
    }

    fn run_cued(&self, at: &Address, ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()> {
        let timeout = Duration::from_secs(self.seconds()) * 3 + Duration::from_secs(120);
        if let Some(load) = &self.load {
            let began = std::time::Instant::now();
            served::run_tool(
                self.command(at)?.args(words(load)),
                "the load phase (pgbench -i)",
                Duration::from_secs(3600),
            )?;
            out.samples.push(crate::store::Sample::new("load_time", began.elapsed().as_secs_f64(), "s"));
        }
        let tokens = with_scripts(&words(&self.args), &self.scripts, ctx.scratch_dir)?;
        measured();
        if let Some(plan) = &self.capacity {
            return self.search(plan, at, &tokens, ctx, out);
        }
        let (ops, _, done) = self.logged(at, &tokens, &[], ctx, "pgbench-log", timeout)?;
        served::figures_of(&ops, self.keep_warmup, out)?;
        out.raw.push(crate::store::RawFile { name: "pgbench.txt".into(), content: done.stdout });
        Ok(())
    }
}

/// PostgreSQL's client, as the package installs it.
pub fn psql(at: &Address, query: &str) -> Result<Command> {
    let psql = crate::sys::find_program("psql")
        .ok_or_else(|| anyhow!("psql is not installed: `apt-get install postgresql-client`"))?;
    let mut cmd = Command::new(psql);
    cmd.args(["-h", &at.host, "-p", &at.port.to_string(), "-U", "postgres", "-tA", "-c", query])
        .env("PGDATABASE", "postgres");
    Ok(cmd)
}

impl Workload for Pgbench {
    fn programs(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn headline(&self) -> Vec<&'static str> {
        super::served_headline(self.capacity.is_some())
    }

    fn recorded(&self) -> Vec<String> {
        if self.capacity.is_some() {
            return vec!["load_time".into()];
        }
        served::RECORDED.iter().map(|m| m.to_string()).collect()
    }

    fn capacity(&self) -> Option<&Plan> {
        self.capacity.as_ref()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([("pgbench.args".to_string(), self.args.clone())]);
        if let Some(load) = &self.load {
            d.insert("pgbench.load".into(), load.clone());
        }
        if let Some(plan) = &self.capacity {
            d.insert("capacity.bound".into(), plan.bound.text());
            d.insert("capacity.search".into(), plan.describe());
            d.insert(
                "capacity.latency".into(),
                "response time (pgbench -R: from each transaction's scheduled start)".into(),
            );
            return d;
        }
        let warmup = if self.keep_warmup {
            "kept in the measured figures"
        } else {
            "left out where the per-second rates show one (warmup_s)"
        };
        d.insert("pgbench.warmup".into(), warmup.into());
        d.insert("pgbench.latency".into(), "each transaction's, from pgbench's per-transaction log".into());
        d
    }

    fn expected_duration(&self) -> Duration {
        match &self.capacity {
            Some(plan) => super::capacity_duration(plan),
            None => Duration::from_secs(self.seconds() + 5),
        }
    }

    fn writes_volume(&self) -> bool {
        true
    }

    fn run(&self, _ctx: &RunContext, _out: &mut Output) -> Result<()> {
        bail!("pgbench loads a server isobench starts: add [[server]] kind = \"postgres\" to the suite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<String> {
        words(text)
    }

    fn check_args_plain(tokens: &[String]) -> Result<(), String> {
        check_args(tokens, false)
    }

    #[test]
    fn a_capacity_search_sets_the_rate_and_the_time_itself() {
        assert!(check_args(&tokens("-c 4 -j 2"), true).is_ok());
        assert!(check_args(&tokens("-c 4 -R 100"), true).unwrap_err().contains("-R"));
        assert!(check_args(&tokens("-c 4 -T 10"), true).unwrap_err().contains("-T"));
    }

    #[test]
    fn a_step_counts_the_window_only_and_tells_response_from_service_time() {
        // 20 transactions a second for 3 s; the last second's waited 4 ms behind the schedule.
        let (mut ops, mut lags) = (Vec::new(), Vec::new());
        for k in 0..60 {
            let lag = if k >= 40 { 4000.0 } else { 0.0 };
            ops.push(Op { end_s: 100.0 + k as f64 / 20.0, latency_us: 1000.0 + lag, ok: true });
            lags.push(lag);
        }
        let s = step(&ops, &lags, 20.0, 101.0, 2.0, 99.0);
        assert_eq!(s.achieved, 20.0);
        assert_eq!(s.latency_us, 5000.0, "the response time counts the wait");
        assert_eq!(s.service_us, 1000.0);
        assert_eq!(s.p50_us, 1000.0);
    }

    /// A window the Poisson schedule happened to offer less is no shortfall; a server that
    /// completes half of what was scheduled achieved half the rate.
    #[test]
    fn achieved_is_the_share_of_the_schedule_completed() {
        let schedule = |every: f64, wait: f64| -> Vec<Op> {
            (0..40)
                .map(|k| {
                    let scheduled = 100.0 + k as f64 * every;
                    Op {
                        end_s: scheduled + 0.001 + wait * k as f64,
                        latency_us: (0.001 + wait * k as f64) * 1e6,
                        ok: true,
                    }
                })
                .collect()
        };
        // 6/s offered, but 4.5/s drawn in this window, each answered in 1 ms.
        let sparse = schedule(1.0 / 4.5, 0.0);
        let s = step(&sparse, &vec![0.0; sparse.len()], 6.0, 100.5, 3.0, 99.0);
        assert_eq!(s.achieved, 6.0, "{s:?}");
        // 20/s scheduled, each waiting 50 ms longer than the one before: the queue grows.
        let behind = schedule(0.05, 0.05);
        let s = step(&behind, &vec![0.0; behind.len()], 20.0, 100.5, 1.0, 99.0);
        assert!(s.achieved < 12.0, "{s:?}");
    }

    #[test]
    fn the_measured_phase_needs_a_time_and_clients_above_zero() {
        assert!(check_args_plain(&tokens("-c 8 -j 2 -T 30 -S")).is_ok());
        assert!(check_args_plain(&tokens("-c 0 -T 30")).unwrap_err().contains("-c 0"));
        assert!(check_args_plain(&tokens("-c 4 -T 0")).unwrap_err().contains("-T 0"));
        assert!(check_args_plain(&tokens("-c 4")).unwrap_err().contains("-T SECONDS"));
        assert!(check_args_plain(&tokens("-c4 --time=10 -h db")).unwrap_err().contains("-h"));
        assert!(check_args_plain(&tokens("-i -T 10")).unwrap_err().contains("load"));
    }

    #[test]
    fn options_are_read_in_every_form() {
        assert_eq!(option(&tokens("-c8 -T 30"), "-c", "--client"), Some("8"));
        assert_eq!(option(&tokens("--client=16"), "-c", "--client"), Some("16"));
        assert_eq!(script_names(&tokens("-f a.sql@3 --file=b.sql -fc.sql")), ["a.sql", "b.sql", "c.sql"]);
    }

    #[test]
    fn the_log_gives_each_transaction_its_latency_and_end() {
        let log = "0 1 1520 0 1733140000 250000\n1 1 failed 0 1733140000 500000\n2 3 skipped 0 1733140001 0 900\n";
        let ops = parse_log(log);
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[0].latency_us, 1520.0);
        assert!((ops[0].end_s - 1733140000.25).abs() < 1e-6);
        assert!(!ops[1].ok);
    }
}
