//! What the loads of the databases isobench serves (pgbench, sysbench's OLTP, redis-benchmark)
//! share: where the server answers, which server kinds each loads, and the figures made from
//! each operation's completion time and latency, as the tools log them, with the warm-up left out
//! as for CQL (MSER on the per-second rates).

use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::{Output, RunContext};
use crate::store::{Sample, Series};

/// Where the server answers the load: set by the runner for each run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Address {
    pub host: String,
    pub port: u16,
    /// The server's kind (`postgres`): a load that speaks to several picks its driver by it.
    pub server: String,
}

/// A load a database server isobench starts takes, run from the host over the environment's
/// network path.
pub trait ServedLoad: super::Workload + Sync {
    /// The `[[server]]` kinds it can load.
    fn server_kinds(&self) -> &'static [&'static str];
    /// Runs the load against the server at `at`: its unmeasured phase, then `measured()`, then
    /// the measured phase.
    fn run_cued(&self, at: &Address, ctx: &RunContext, out: &mut Output, measured: &(dyn Fn() + Sync)) -> Result<()>;
    /// What the server holds once loaded, asked by its own client from the host (the rows of the
    /// load's tables, the keys): `server_rows` or `server_keys`.
    fn held(&self, at: &Address) -> Result<Sample>;
}

/// A count a client printed alone on its output (`psql -tA`, `mariadb -N`, `redis-cli`).
pub fn count_said(cmd: &mut std::process::Command, what: &str) -> Result<f64> {
    let done = run_tool(cmd, what, Duration::from_secs(60))?;
    let text = done.stdout.trim();
    text.lines()
        .map(|l| l.trim().parse::<f64>())
        .sum::<Result<f64, _>>()
        .map_err(|_| anyhow::anyhow!("{what} said {text:?}, not a count"))
}

/// One operation as a tool logged it: when it ended (seconds on any clock), how long it took,
/// and whether it failed.
#[derive(Clone, Copy, Debug)]
pub struct Op {
    pub end_s: f64,
    pub latency_us: f64,
    pub ok: bool,
}

/// The longest measured phase a log may span (a week).
const MAX_PHASE_S: f64 = 7.0 * 86400.0;

/// The figures of a measured phase from its operations: `op_rate` from those that ended after
/// the warm-up, their latencies' mean and percentiles (exact, from every operation), `errors`
/// over the whole phase, and per-second series.
pub fn figures_of(ops: &[Op], keep_warmup: bool, out: &mut Output) -> Result<()> {
    let Some(start) = ops.iter().map(|o| o.end_s - o.latency_us / 1e6).min_by(f64::total_cmp) else {
        bail!("the measured phase completed no operation");
    };
    let end = ops.iter().map(|o| o.end_s).fold(f64::MIN, f64::max);
    // A second's bin each: a log whose times are not of one run would ask for years of them.
    if !(end - start).is_finite() || end - start > MAX_PHASE_S {
        bail!("the logged operations span {:.0} s from first to last: not one measured phase", end - start);
    }
    let seconds = ((end - start).floor() as usize).max(1);
    let mut per_second = vec![(0u64, 0.0f64); seconds];
    for op in ops.iter().filter(|o| o.ok) {
        if let Some(bin) = per_second.get_mut((op.end_s - start) as usize) {
            bin.0 += 1;
            bin.1 += op.latency_us;
        }
    }
    let rates: Vec<f64> = per_second.iter().map(|(n, _)| *n as f64).collect();
    let warmup = if keep_warmup { 0 } else { figures::stats::warmup_windows(&rates) };
    let from = start + warmup as f64;
    let mut latencies: Vec<f64> = ops.iter().filter(|o| o.ok && o.end_s >= from).map(|o| o.latency_us).collect();
    if latencies.is_empty() {
        bail!("no operation succeeded after the warm-up ({warmup} s)");
    }
    latencies.sort_by(f64::total_cmp);
    let quantile = |q: f64| latencies[((q * latencies.len() as f64).ceil() as usize).clamp(1, latencies.len()) - 1];
    let mean = latencies.iter().sum::<f64>() / latencies.len() as f64;
    out.samples.extend([
        Sample::new("op_rate", latencies.len() as f64 / (end - from).max(1e-3), "op/s"),
        Sample::new("latency_mean", mean, "us"),
        Sample::new("latency_p50", quantile(0.50), "us"),
        Sample::new("latency_p95", quantile(0.95), "us"),
        Sample::new("latency_p99", quantile(0.99), "us"),
        Sample::new("latency_p999", quantile(0.999), "us"),
        Sample::new("latency_max", latencies[latencies.len() - 1], "us"),
        Sample::new("errors", ops.iter().filter(|o| !o.ok).count() as f64, "errors"),
        Sample::new("ops", ops.iter().filter(|o| o.ok).count() as f64, "ops"),
    ]);
    if !keep_warmup {
        out.samples.push(Sample::new("warmup_s", warmup as f64, "s"));
    }
    let points =
        |f: &dyn Fn(&(u64, f64)) -> f64| per_second.iter().enumerate().map(|(k, b)| (k as f64, f(b))).collect();
    out.series.push(Series { metric: "op_rate".into(), unit: "op/s".into(), points: points(&|b| b.0 as f64) });
    out.series.push(Series {
        metric: "latency_mean".into(),
        unit: "us".into(),
        points: points(&|b| if b.0 == 0 { 0.0 } else { b.1 / b.0 as f64 }),
    });
    Ok(())
}

/// The metrics `figures_of` records.
pub const RECORDED: [&str; 10] = [
    "op_rate",
    "latency_mean",
    "latency_p50",
    "latency_p95",
    "latency_p99",
    "latency_p999",
    "latency_max",
    "errors",
    "ops",
    "load_time",
];

/// Runs a load tool to its end within `timeout`: its stdout, or an error with its words.
pub fn run_tool(cmd: &mut std::process::Command, what: &str, timeout: Duration) -> Result<crate::sys::Finished> {
    let options = crate::sys::Options { timeout: Some(timeout), ..Default::default() };
    let done = crate::sys::run(cmd, options)?;
    if !done.status.success() {
        bail!("{what} failed ({}):\n{}", done.status, done.tail(12));
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slow_start_is_left_out_and_the_percentiles_are_exact() {
        // 20 s: the first 4 at 10 op/s, then 100 op/s; every op 1 ms but one of 50 ms per second.
        let mut ops = Vec::new();
        for second in 0..20 {
            let n = if second < 4 { 10 } else { 100 };
            for k in 0..n {
                let end = second as f64 + (k as f64 + 1.0) / (n as f64 + 1.0);
                ops.push(Op { end_s: 1000.0 + end, latency_us: if k == 0 { 50_000.0 } else { 1000.0 }, ok: true });
            }
        }
        ops.push(Op { end_s: 1010.0, latency_us: 0.0, ok: false });
        let mut out = Output::default();
        figures_of(&ops, false, &mut out).unwrap();
        let value = |m: &str| out.samples.iter().find(|s| s.metric == m).unwrap().value;
        assert!(value("warmup_s") >= 4.0 && value("warmup_s") <= 6.0, "{}", value("warmup_s"));
        assert!((value("op_rate") - 100.0).abs() < 8.0, "{}", value("op_rate"));
        assert_eq!(value("latency_p50"), 1000.0);
        assert_eq!(value("latency_max"), 50_000.0);
        assert_eq!(value("errors"), 1.0);
    }

    #[test]
    fn no_operation_is_an_error_not_a_zero() {
        assert!(figures_of(&[], false, &mut Output::default()).is_err());
    }
}
