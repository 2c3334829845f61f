//! The sysbench engine that the `cpu` and `memory` kinds drive: running it under a timeout and
//! reading its plain-text report (sysbench 1.0 has no machine-readable output for these tests).

use std::process::Command;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};

use super::Output;
use crate::store::{RawFile, Sample};
use crate::sys;

/// What sysbench's report says, in its own units.
#[derive(Debug, Default, PartialEq)]
pub struct Report {
    /// "total time: 10.0002s".
    pub total_time_s: f64,
    /// "total number of events: 12345".
    pub events: u64,
    /// "CPU speed: events per second: 1234.56" (cpu test only).
    pub events_per_s: Option<f64>,
    /// "Total operations: N (X per second)" (memory test only).
    pub ops_per_s: Option<f64>,
    /// "1024.00 MiB transferred (2409.63 MiB/sec)" (memory test only).
    pub mib_per_s: Option<f64>,
    /// Latency (ms): avg, 95th percentile, max.
    pub latency_avg_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_max_ms: f64,
}

/// The number after `label` on the first line that holds it, e.g. `number_after(text, "total
/// time:")` → 10.0002 for "    total time:   10.0002s".
fn number_after(text: &str, label: &str) -> Option<f64> {
    let rest = text.lines().find_map(|l| l.trim_start().strip_prefix(label))?;
    let token = rest.split_whitespace().next()?;
    token.trim_start_matches('(').trim_end_matches(|c: char| !c.is_ascii_digit()).parse().ok()
}

/// The number inside the parentheses of a line starting with `label`, before `unit`:
/// "Total operations: 1048576 (2467457.81 per second)" → 2467457.81.
fn number_in_parens(text: &str, label: &str) -> Option<f64> {
    let line = text.lines().find(|l| l.trim_start().starts_with(label) || l.contains(label))?;
    let inside = line.split_once('(')?.1;
    inside.split_whitespace().next()?.parse().ok()
}

/// Reads sysbench 1.0's report.
pub fn parse(text: &str) -> Result<Report> {
    let missing = |what: &str| anyhow!("sysbench's report has no \"{what}\" line");
    // The latency block's lines ("avg:", "max:") also occur elsewhere; read them after its header.
    let latency = text.split_once("Latency (ms):").map(|(_, rest)| rest).ok_or_else(|| missing("Latency (ms):"))?;
    Ok(Report {
        total_time_s: number_after(text, "total time:").ok_or_else(|| missing("total time:"))?,
        events: number_after(text, "total number of events:").ok_or_else(|| missing("total number of events:"))? as u64,
        events_per_s: number_after(text, "events per second:"),
        ops_per_s: number_in_parens(text, "Total operations:"),
        mib_per_s: number_in_parens(text, "MiB transferred"),
        latency_avg_ms: number_after(latency, "avg:").ok_or_else(|| missing("avg:"))?,
        latency_p95_ms: number_after(latency, "95th percentile:").ok_or_else(|| missing("95th percentile:"))?,
        latency_max_ms: number_after(latency, "max:").ok_or_else(|| missing("max:"))?,
    })
}

impl Report {
    /// The samples every sysbench test gives: run time, events and latency (µs).
    pub fn common_samples(&self) -> Vec<Sample> {
        vec![
            Sample::new("total_time", self.total_time_s, "s"),
            Sample::new("events", self.events as f64, "events"),
            Sample::new("latency_mean", self.latency_avg_ms * 1000.0, "us"),
            Sample::new("latency_p95", self.latency_p95_ms * 1000.0, "us"),
            Sample::new("latency_max", self.latency_max_ms * 1000.0, "us"),
        ]
    }
}

/// Runs `sysbench TEST ARGS… run`, keeps its report as a raw file and returns it parsed.
pub fn run(test: &str, args: &[String], timeout: Duration, out: &mut Output) -> Result<Report> {
    let finished = sys::run(
        Command::new("sysbench").arg(test).args(args).arg("run"),
        sys::Options { timeout: Some(timeout), ..Default::default() },
    )?;
    if !finished.status.success() {
        bail!("sysbench {test} failed ({}):\n{}", finished.status, finished.tail(10));
    }
    out.raw.push(RawFile { name: format!("sysbench-{test}.txt"), content: finished.stdout.clone() });
    parse(&finished.stdout).map_err(|e| anyhow!("{e}; sysbench printed:\n{}", sys::tail_lines(&finished.stdout, 20)))
}

/// sysbench's version line ("sysbench 1.0.20"), if it is installed.
pub fn version() -> Option<String> {
    sys::command_output("sysbench", &["--version"]).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    #[test]
    fn cpu_reports_give_events_time_and_latency() {
        let text = fixture("sysbench-cpu-events.txt");
        let r = parse(&text).unwrap();
        assert_eq!(r.events, 2000, "the fixture ran --events=2000");
        let eps = r.events_per_s.unwrap();
        // sysbench's own figure is events / total time (to its printed precision).
        assert!((eps - r.events as f64 / r.total_time_s).abs() / eps < 0.01, "{r:?}");
        assert!(r.latency_avg_ms <= r.latency_max_ms && r.latency_p95_ms <= r.latency_max_ms, "{r:?}");
        assert!(r.ops_per_s.is_none() && r.mib_per_s.is_none());
        let two = parse(&fixture("sysbench-cpu-time-2threads.txt")).unwrap();
        assert!((1.9..2.2).contains(&two.total_time_s), "a --time=2 run: {two:?}");
    }

    #[test]
    fn memory_reports_give_throughput_and_operations() {
        for (name, block) in
            [("sysbench-memory-seq-write-2threads.txt", 1024.0), ("sysbench-memory-rnd-read.txt", 4096.0)]
        {
            let r = parse(&fixture(name)).unwrap();
            let (ops, mib) = (r.ops_per_s.unwrap(), r.mib_per_s.unwrap());
            // Every operation moves one block: MiB/s = ops/s × block / MiB.
            assert!((ops * block / 1048576.0 - mib).abs() / mib < 0.01, "{name}: {r:?}");
            assert!(r.events > 0 && r.total_time_s > 0.0);
        }
    }

    #[test]
    fn a_report_without_its_statistics_is_an_error() {
        let e = parse("sysbench 1.0.20\nFATAL: something\n").unwrap_err().to_string();
        assert!(e.contains("Latency (ms):"), "{e}");
    }
}
