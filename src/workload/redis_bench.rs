//! `kind = "redis-benchmark"`: Redis's own benchmark against the server isobench starts in the
//! cell's environment. `args` are its options as its users write them (`-t set,get -n 200000
//! -c 50 -P 16 -d 256 -r 100000`, or a command of one's own after them); `load` an unmeasured
//! run before (filling the keys a read test reads). Each test's rate and latencies come from
//! its CSV, whose percentiles redis-benchmark takes from its own histogram.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::served::{self, Address, ServedLoad};
use super::{Kind, Output, ParseContext, RunContext, Spec, Workload};
use crate::store::Sample;
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind {
    name: "redis-benchmark",
    list_keys: &[],
    parse,
    capacity: Err("cannot search a capacity: redis-benchmark holds no rate"),
};

/// The tests `-t` selects, as redis-benchmark 7 knows them (an unknown name runs nothing).
pub const TESTS: &[&str] = &[
    "ping_inline",
    "ping_mbulk",
    "ping",
    "set",
    "get",
    "incr",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "sadd",
    "hset",
    "spop",
    "zadd",
    "zpopmin",
    "lrange",
    "lrange_100",
    "lrange_300",
    "lrange_500",
    "lrange_600",
    "mset",
];

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RedisBenchmark {
    pub args: String,
    pub load: Option<String>,
}

/// The options isobench gives redis-benchmark itself, or that would change its output.
const OWN: &[&str] = &["-h", "-p", "-s", "-u", "--csv", "-q", "--user", "-a", "--tls", "--cluster", "-l"];

fn words(text: &str) -> Vec<String> {
    shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(String::from).collect())
}

fn check(tokens: &[String]) -> Result<(), String> {
    if let Some(own) = tokens.iter().find(|t| OWN.contains(&t.as_str())) {
        return Err(format!("{own}: isobench gives redis-benchmark the server's address and reads its CSV; remove it"));
    }
    for (i, t) in tokens.iter().enumerate() {
        let value = || tokens.get(i + 1).map(String::as_str).unwrap_or("");
        match t.as_str() {
            "-t" => {
                if let Some(unknown) =
                    value().split(',').find(|name| !TESTS.contains(&name.trim().to_lowercase().as_str()))
                {
                    return Err(format!(
                        "-t {}: redis-benchmark has no test \"{unknown}\" (it would run nothing); its tests are {}",
                        value(),
                        TESTS.join(", ")
                    ));
                }
            }
            "-n" | "-c" | "-P" | "-d" if !value().parse::<u64>().is_ok_and(|n| n > 0) => {
                return Err(format!("{t} {}: must be a whole number above 0", value()));
            }
            _ => {}
        }
    }
    Ok(())
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let args = f.str("args")?.ok_or_else(|| {
        f.error_at("args", "the measured run is required, e.g. args = \"-t set,get -n 100000 -c 50\"")
    })?;
    check(&words(&args)).map_err(|e| f.error_at("args", e))?;
    let load = f.str("load")?;
    if let Some(load) = &load {
        check(&words(load)).map_err(|e| f.error_at("load", e))?;
    }
    f.finish()?;
    Ok(Spec::RedisBenchmark(RedisBenchmark { args, load }))
}

/// One test's row of redis-benchmark's CSV.
#[derive(Debug, PartialEq)]
pub struct Row {
    /// The test's name, as a metric's suffix (`set`, `lrange_100`).
    pub test: String,
    pub rps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The rows of its CSV, but for the ones it runs to set a test up (`LPUSH (needed to benchmark
/// LRANGE)`).
pub fn parse_csv(text: &str) -> Result<Vec<Row>> {
    let mut rows = Vec::new();
    for line in text.lines().skip_while(|l| !l.starts_with("\"test\"")).skip(1) {
        let cells: Vec<&str> = line.split("\",\"").map(|c| c.trim_matches('"')).collect();
        if cells.len() != 8 {
            bail!("redis-benchmark's CSV has a row of {} cells, not 8: {line}", cells.len());
        }
        if cells[0].contains("needed to benchmark") {
            continue;
        }
        let number = |k: usize| cells[k].parse::<f64>().map_err(|_| anyhow::anyhow!("not a number in its CSV: {line}"));
        let test = cells[0].split_whitespace().next().unwrap_or_default().to_lowercase();
        rows.push(Row {
            test,
            rps: number(1)?,
            mean_ms: number(2)?,
            p50_ms: number(4)?,
            p95_ms: number(5)?,
            p99_ms: number(6)?,
            max_ms: number(7)?,
        });
    }
    Ok(rows)
}

/// The samples of a measured run: each test's rate and latencies, and over all tests the rate
/// (the requests over the time they took) and the mean latency; a percentile over all tests
/// only when there is one test (percentiles of different tests do not average).
pub fn samples(rows: &[Row], requests: f64) -> Vec<Sample> {
    let mut out = Vec::new();
    let us = |ms: f64| ms * 1000.0;
    let time: f64 = rows.iter().map(|r| requests / r.rps).sum();
    out.push(Sample::new("op_rate", requests * rows.len() as f64 / time, "op/s"));
    out.push(Sample::new("latency_mean", us(rows.iter().map(|r| r.mean_ms).sum::<f64>() / rows.len() as f64), "us"));
    if let [row] = rows {
        out.push(Sample::new("latency_p50", us(row.p50_ms), "us"));
        out.push(Sample::new("latency_p95", us(row.p95_ms), "us"));
        out.push(Sample::new("latency_p99", us(row.p99_ms), "us"));
        out.push(Sample::new("latency_max", us(row.max_ms), "us"));
    }
    for row in rows.iter().filter(|_| rows.len() > 1) {
        out.push(Sample::new(format!("op_rate_{}", row.test), row.rps, "op/s"));
        out.push(Sample::new(format!("latency_p99_{}", row.test), us(row.p99_ms), "us"));
    }
    out
}

impl RedisBenchmark {
    /// Requests per test (`-n`, redis-benchmark's default 100000).
    fn requests(&self) -> u64 {
        let tokens = words(&self.args);
        tokens.iter().position(|t| t == "-n").and_then(|i| tokens.get(i + 1)?.parse().ok()).unwrap_or(100_000)
    }

    fn tests(&self) -> usize {
        let tokens = words(&self.args);
        tokens.iter().position(|t| t == "-t").and_then(|i| tokens.get(i + 1)).map_or(1, |t| t.split(',').count())
    }

    fn command(at: &Address) -> Result<Command> {
        let program = crate::sys::find_program("redis-benchmark")
            .ok_or_else(|| anyhow::anyhow!("redis-benchmark is not installed: `apt-get install redis-tools`"))?;
        let mut cmd = Command::new(program);
        cmd.args(["-h", &at.host, "-p", &at.port.to_string(), "--csv"]);
        Ok(cmd)
    }
}

impl ServedLoad for RedisBenchmark {
    fn server_kinds(&self) -> &'static [&'static str] {
        &["redis"]
    }

    fn held(&self, at: &Address) -> Result<Sample> {
        let cli = crate::sys::find_program("redis-cli")
            .ok_or_else(|| anyhow::anyhow!("redis-cli is not installed: `apt-get install redis-tools`"))?;
        let mut cmd = Command::new(cli);
        cmd.args(["-h", &at.host, "-p", &at.port.to_string(), "DBSIZE"]);
        Ok(Sample::new("server_keys", served::count_said(&mut cmd, "redis-cli DBSIZE")?, "keys"))
    }

    fn run_cued(&self, at: &Address, _ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()> {
        if let Some(load) = &self.load {
            let began = std::time::Instant::now();
            served::run_tool(
                Self::command(at)?.args(words(load)),
                "the load phase (redis-benchmark)",
                Duration::from_secs(3600),
            )?;
            out.samples.push(Sample::new("load_time", began.elapsed().as_secs_f64(), "s"));
        }
        measured();
        let done = served::run_tool(Self::command(at)?.args(words(&self.args)), "redis-benchmark", self.timeout())?;
        let rows = parse_csv(&done.stdout)?;
        if rows.is_empty() {
            bail!("redis-benchmark ran no test:\n{}", done.tail(10));
        }
        out.samples.extend(samples(&rows, self.requests() as f64));
        // Every request counts: the CPU per operation is the measured phase's over them.
        out.samples.push(Sample::new("ops", (self.requests() as usize * rows.len()) as f64, "ops"));
        out.raw.push(crate::store::RawFile { name: "redis-benchmark.csv".into(), content: done.stdout });
        Ok(())
    }
}

impl Workload for RedisBenchmark {
    fn programs(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn headline(&self) -> Vec<&'static str> {
        if self.tests() == 1 { vec!["op_rate", "latency_mean", "latency_p99"] } else { vec!["op_rate", "latency_mean"] }
    }

    fn recorded(&self) -> Vec<String> {
        let mut all: Vec<String> = ["op_rate", "latency_mean", "load_time", "ops"].map(String::from).to_vec();
        if self.tests() == 1 {
            all.extend(["latency_p50", "latency_p95", "latency_p99", "latency_max"].map(String::from));
        }
        all
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([("redis_benchmark.args".to_string(), self.args.clone())]);
        if let Some(load) = &self.load {
            d.insert("redis_benchmark.load".into(), load.clone());
        }
        d.insert(
            "redis_benchmark.figures".into(),
            "each test's, from its CSV (percentiles from its own histogram); no per-second windows, so no warm-up is left out, and error replies are not counted".into(),
        );
        d
    }

    fn expected_duration(&self) -> Duration {
        // At some 20k requests a second, the least a sandboxed Redis gives here.
        Duration::from_secs_f64(self.requests() as f64 * self.tests() as f64 / 20_000.0 + 2.0)
    }

    fn writes_volume(&self) -> bool {
        true
    }

    fn run(&self, _ctx: &RunContext, _out: &mut Output) -> Result<()> {
        bail!("redis-benchmark loads a server isobench starts: add [[server]] kind = \"redis\" to the suite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"SET\",\"64724.92\",\"0.091\",\"0.024\",\"0.079\",\"0.151\",\"0.279\",\"3.783\"\n\"LPUSH (needed to benchmark LRANGE)\",\"50000.00\",\"0.1\",\"0.02\",\"0.08\",\"0.15\",\"0.2\",\"1.0\"\n\"LRANGE_100 (first 100 elements)\",\"20000.00\",\"0.3\",\"0.1\",\"0.3\",\"0.5\",\"0.9\",\"4.0\"\n";

    #[test]
    fn the_csv_gives_each_test_and_leaves_out_the_setup_rows() {
        let rows = parse_csv(CSV).unwrap();
        assert_eq!(rows.iter().map(|r| r.test.as_str()).collect::<Vec<_>>(), ["set", "lrange_100"]);
        assert_eq!(rows[0].p99_ms, 0.279);
    }

    #[test]
    fn percentiles_are_never_averaged_across_tests() {
        let rows = parse_csv(CSV).unwrap();
        let s = samples(&rows, 1000.0);
        assert!(!s.iter().any(|s| s.metric == "latency_p99"));
        assert!(s.iter().any(|s| s.metric == "latency_p99_lrange_100" && s.value == 900.0));
        let rate = s.iter().find(|s| s.metric == "op_rate").unwrap().value;
        // 2000 requests in 1000/64724.92 + 1000/20000 seconds.
        assert!((rate - 2000.0 / (1000.0 / 64724.92 + 0.05)).abs() < 1e-6);
    }

    #[test]
    fn an_unknown_test_or_a_zero_is_refused() {
        assert!(check(&words("-t set,gett -n 1000")).unwrap_err().contains("\"gett\""));
        assert!(check(&words("-t set -n 0")).unwrap_err().contains("-n 0"));
        assert!(check(&words("-t set -h 10.0.0.1")).unwrap_err().contains("-h"));
        assert!(check(&words("-t set,get -n 1000 -c 50 -P 16")).is_ok());
    }
}
