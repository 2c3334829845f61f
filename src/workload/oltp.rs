//! `kind = "oltp"`: sysbench's OLTP scripts against the server isobench starts in the cell's
//! environment, MariaDB through its mysql driver or PostgreSQL through its pgsql driver. `args`
//! are the script and its options as its users write them (`oltp_read_write --tables=4
//! --table-size=10000 --threads=4 --time=30`); the same script's `prepare` runs first and is not
//! measured. The latencies' percentiles come from sysbench's own histogram, the per-second
//! rates from its interval reports.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::served::{self, Address, ServedLoad};
use super::{Kind, Output, ParseContext, RunContext, Spec, Workload};
use crate::store::{Sample, Series};
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind {
    name: "oltp",
    list_keys: &[],
    parse,
    capacity: Err(
        "cannot search a capacity: sysbench's --rate queues transactions behind its schedule and logs none a step could be judged by",
    ),
};

/// sysbench's OLTP scripts (`/usr/share/sysbench`).
pub const SCRIPTS: &[&str] = &[
    "oltp_read_write",
    "oltp_read_only",
    "oltp_write_only",
    "oltp_point_select",
    "oltp_insert",
    "oltp_delete",
    "oltp_update_index",
    "oltp_update_non_index",
];

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Oltp {
    pub args: String,
}

fn words(text: &str) -> Vec<String> {
    shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(String::from).collect())
}

/// `--name=value`'s value, the last one given.
fn option<'a>(tokens: &'a [String], name: &str) -> Option<&'a str> {
    tokens.iter().rev().find_map(|t| t.strip_prefix(&format!("--{name}=")))
}

fn check(tokens: &[String]) -> Result<(), String> {
    let script = tokens.first().map(String::as_str).unwrap_or("");
    if !SCRIPTS.contains(&script) {
        return Err(format!("\"{script}\": name one of sysbench's OLTP scripts first: {}", SCRIPTS.join(", ")));
    }
    if let Some(own) = tokens.iter().find(|t| ["--db-driver", "--mysql-", "--pgsql-"].iter().any(|o| t.starts_with(o)))
    {
        return Err(format!("{own}: isobench gives sysbench the server's driver, address and login; remove it"));
    }
    if let Some(command) = tokens.iter().skip(1).find(|t| ["prepare", "run", "cleanup"].contains(&t.as_str())) {
        return Err(format!("{command}: isobench runs prepare, then run; give the script and its options only"));
    }
    for (name, required) in [("threads", false), ("time", true), ("tables", false), ("table-size", false)] {
        match option(tokens, name) {
            None if required => {
                return Err(format!("the measured phase runs for a time: add --{name}=SECONDS, e.g. --time=30"));
            }
            None => {}
            Some(v) if v.parse::<u64>().is_ok_and(|n| n > 0) => {}
            Some(v) => return Err(format!("--{name}={v}: must be a whole number above 0")),
        }
    }
    Ok(())
}

/// sysbench checks a script's options when asked for the script's help: an option it does not
/// know is refused there, before any run.
fn ask_sysbench(tokens: &[String]) -> Result<(), String> {
    let Some(sysbench) = crate::sys::find_program("sysbench") else { return Ok(()) };
    let said = Command::new(sysbench).args(tokens).arg("help").output().map_err(|e| e.to_string())?;
    let text = format!("{}{}", String::from_utf8_lossy(&said.stdout), String::from_utf8_lossy(&said.stderr));
    match text.lines().find(|l| l.starts_with("invalid option") || l.contains("FATAL")) {
        Some(line) => Err(format!("sysbench refuses it: {line}")),
        None => Ok(()),
    }
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let args = f.str("args")?.ok_or_else(|| {
        f.error_at("args", "the script and its options are required, e.g. args = \"oltp_read_write --tables=4 --table-size=10000 --threads=4 --time=30\"")
    })?;
    check(&words(&args)).map_err(|e| f.error_at("args", e))?;
    ask_sysbench(&words(&args)).map_err(|e| f.error_at("args", e))?;
    f.finish()?;
    Ok(Spec::Oltp(Oltp { args }))
}

/// What sysbench's report of a run says.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    pub tps: f64,
    pub transactions: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub errors: f64,
    /// Its histogram: each bucket's latency (ms) and count.
    pub histogram: Vec<(f64, u64)>,
    /// Each interval report's transactions per second.
    pub per_second: Vec<f64>,
}

/// Reads sysbench's report (with `--histogram=on --report-interval=1`).
pub fn parse_report(text: &str) -> Result<Report> {
    let mut r = Report::default();
    let number_after = |line: &str, key: &str| -> Option<f64> {
        line.split_once(key)?.1.split_whitespace().next()?.trim_start_matches('(').parse().ok()
    };
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') && t.contains(" tps: ") {
            r.per_second.extend(number_after(t, " tps: "));
        } else if t.starts_with("transactions:") {
            r.transactions = number_after(t, "transactions:").unwrap_or_default();
            r.tps = number_after(t, "(").unwrap_or_default();
        } else if t.starts_with("ignored errors:") {
            r.errors = number_after(t, "ignored errors:").unwrap_or_default();
        } else if t.starts_with("avg:") {
            r.mean_ms = number_after(t, "avg:").unwrap_or_default();
        } else if t.starts_with("max:") {
            r.max_ms = number_after(t, "max:").unwrap_or_default();
        } else if let Some((value, rest)) = t.split_once('|')
            && let (Ok(ms), Some(Ok(count))) =
                (value.trim().parse::<f64>(), rest.split_whitespace().last().map(str::parse::<u64>))
        {
            r.histogram.push((ms, count));
        }
    }
    if r.tps <= 0.0 {
        bail!("sysbench's report has no transactions per second:\n{}", crate::sys::tail_lines(text, 10));
    }
    Ok(r)
}

impl Report {
    /// The latency below which a `q` share of the histogram's counts fall.
    pub fn percentile(&self, q: f64) -> Option<f64> {
        let total = self.histogram.iter().fold(0u64, |sum, (_, n)| sum.saturating_add(*n));
        let rank = (q * total as f64).ceil() as u64;
        let mut seen = 0u64;
        self.histogram
            .iter()
            .find(|(_, n)| {
                seen = seen.saturating_add(*n);
                seen >= rank.max(1)
            })
            .map(|(ms, _)| *ms)
    }
}

impl Oltp {
    fn seconds(&self) -> u64 {
        option(&words(&self.args), "time").and_then(|v| v.parse().ok()).unwrap_or(60)
    }

    fn command(&self, at: &Address, step: &str) -> Result<Command> {
        let sysbench = crate::sys::find_program("sysbench")
            .ok_or_else(|| anyhow!("sysbench is not installed: `apt-get install sysbench`"))?;
        let mut cmd = Command::new(sysbench);
        cmd.args(words(&self.args));
        let (host, port) = (at.host.as_str(), at.port.to_string());
        match at.server.as_str() {
            "postgres" => cmd
                .args(["--db-driver=pgsql", "--pgsql-user=postgres", "--pgsql-db=sbtest"])
                .args([format!("--pgsql-host={host}"), format!("--pgsql-port={port}")]),
            _ => cmd
                .args(["--db-driver=mysql", "--mysql-user=isobench", "--mysql-db=sbtest"])
                .args([format!("--mysql-host={host}"), format!("--mysql-port={port}")]),
        };
        cmd.arg(step);
        Ok(cmd)
    }
}

impl ServedLoad for Oltp {
    fn server_kinds(&self) -> &'static [&'static str] {
        &["mariadb", "postgres"]
    }

    fn held(&self, at: &Address) -> Result<Sample> {
        let tables: u64 = option(&words(&self.args), "tables").and_then(|v| v.parse().ok()).unwrap_or(1);
        let query = (1..=tables).map(|k| format!("SELECT count(*) FROM sbtest{k};")).collect::<String>();
        let mut cmd = match at.server.as_str() {
            "postgres" => {
                let mut cmd = super::pgbench::psql(at, &query)?;
                cmd.env("PGDATABASE", "sbtest");
                cmd
            }
            _ => {
                let client = crate::sys::find_program("mariadb")
                    .ok_or_else(|| anyhow!("mariadb's client is not installed: `apt-get install mariadb-client`"))?;
                let mut cmd = Command::new(client);
                cmd.args([
                    "--no-defaults",
                    "-N",
                    "-B",
                    "-h",
                    &at.host,
                    "-P",
                    &at.port.to_string(),
                    "-u",
                    "isobench",
                    "sbtest",
                    "-e",
                    &query,
                ]);
                cmd
            }
        };
        Ok(Sample::new("server_rows", served::count_said(&mut cmd, "counting sysbench's rows")?, "rows"))
    }

    fn run_cued(&self, at: &Address, _ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()> {
        let began = std::time::Instant::now();
        served::run_tool(&mut self.command(at, "prepare")?, "sysbench prepare", Duration::from_secs(3600))?;
        out.samples.push(Sample::new("load_time", began.elapsed().as_secs_f64(), "s"));
        let mut run = self.command(at, "run")?;
        run.args(["--histogram=on", "--report-interval=1"]);
        measured();
        let done = served::run_tool(&mut run, "sysbench run", self.timeout())?;
        let report = parse_report(&done.stdout)?;
        let us = |ms: f64| ms * 1000.0;
        out.samples.push(Sample::new("op_rate", report.tps, "op/s"));
        out.samples.push(Sample::new("latency_mean", us(report.mean_ms), "us"));
        for (metric, q) in [("latency_p50", 0.5), ("latency_p95", 0.95), ("latency_p99", 0.99)] {
            out.samples.extend(report.percentile(q).map(|ms| Sample::new(metric, us(ms), "us")));
        }
        out.samples.push(Sample::new("latency_max", us(report.max_ms), "us"));
        out.samples.push(Sample::new("errors", report.errors, "errors"));
        out.samples.push(Sample::new("ops", report.transactions, "ops"));
        let points = report.per_second.iter().enumerate().map(|(k, tps)| (k as f64, *tps)).collect();
        out.series.push(Series { metric: "op_rate".into(), unit: "op/s".into(), points });
        out.raw.push(crate::store::RawFile { name: "sysbench.txt".into(), content: done.stdout });
        Ok(())
    }
}

impl Workload for Oltp {
    fn programs(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn headline(&self) -> Vec<&'static str> {
        super::served_headline(false)
    }

    fn recorded(&self) -> Vec<String> {
        [
            "op_rate",
            "latency_mean",
            "latency_p50",
            "latency_p95",
            "latency_p99",
            "latency_max",
            "errors",
            "ops",
            "load_time",
        ]
        .map(String::from)
        .to_vec()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("oltp.args".to_string(), self.args.clone()),
            (
                "oltp.warmup".into(),
                "kept: sysbench 1.0 has no warm-up of its own and its histogram covers the whole run".into(),
            ),
            ("oltp.latency".into(), "each transaction's, percentiles from sysbench's histogram".into()),
        ])
    }

    fn expected_duration(&self) -> Duration {
        Duration::from_secs(self.seconds() + 10)
    }

    fn writes_volume(&self) -> bool {
        true
    }

    fn run(&self, _ctx: &RunContext, _out: &mut Output) -> Result<()> {
        bail!("oltp loads a server isobench starts: add [[server]] kind = \"mariadb\" or \"postgres\" to the suite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = "[ 1s ] thds: 4 tps: 312.91 qps: 6276.31 (r/w/o: 4395.57/1253.62/627.12) lat (ms,95%): 17.95 err/s: 0.00 reconn/s: 0.00
[ 2s ] thds: 4 tps: 330.02 qps: 6600.40 (r/w/o: 4620.28/1320.08/660.04) lat (ms,95%): 16.41 err/s: 0.00 reconn/s: 0.00
Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       5.000 |**********                               90
      10.000 |****                                     9
      40.000 |*                                        1
SQL statistics:
    transactions:                        642    (321.00 per sec.)
    ignored errors:                      2      (0.10 per sec.)
Latency (ms):
         min:                                    3.10
         avg:                                   12.40
         max:                                   40.00
";

    #[test]
    fn the_report_gives_rates_errors_and_the_histograms_percentiles() {
        let r = parse_report(REPORT).unwrap();
        assert_eq!(r.tps, 321.0);
        assert_eq!(r.transactions, 642.0);
        assert_eq!(r.errors, 2.0);
        assert_eq!(r.per_second, [312.91, 330.02]);
        assert_eq!(r.percentile(0.5), Some(5.0));
        assert_eq!(r.percentile(0.99), Some(10.0));
        assert_eq!(r.percentile(0.999), Some(40.0));
    }

    #[test]
    fn the_script_a_time_and_no_driver_options_are_required() {
        assert!(check(&words("oltp_read_write --threads=4 --time=30")).is_ok());
        assert!(check(&words("oltp_nope --time=30")).unwrap_err().contains("oltp_read_write"));
        assert!(check(&words("oltp_read_only --threads=4")).unwrap_err().contains("--time"));
        assert!(check(&words("oltp_read_only --time=0")).unwrap_err().contains("--time=0"));
        assert!(check(&words("oltp_read_only --time=5 --mysql-host=x")).unwrap_err().contains("--mysql-host"));
    }
}
