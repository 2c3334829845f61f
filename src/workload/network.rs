//! `kind = "network"`: iperf3 between the sandbox (the client) and a server on the host side of
//! the sandbox's network path (loopback, a veth pair, a tap or QEMU's user network). The figures
//! come from iperf3's own JSON: the rate the receiver got, TCP retransmits, UDP loss and
//! jitter, and both ends' CPU use.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::{Kind, Output, ParseContext, RunContext, Spec, Workload};
use crate::ledger::{Ledger, Resource};
use crate::store::{RawFile, Sample, Series};
use crate::syntax::{Fields, SuiteError};
use crate::sys;

pub const KIND: Kind = Kind { name: "network", list_keys: &[], parse, capacity: Err(super::NO_LATENCY) };

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Network {
    pub streams: u64,
    pub time_s: u64,
    /// The host sends and the sandbox receives (iperf3 -R).
    pub reverse: bool,
    /// A cap on the sending rate in iperf3's notation ("1G", "500M"); UDP's default is 1M.
    pub bitrate: Option<String>,
    pub udp: bool,
    /// The host-side server the client connects to, filled in for each run.
    #[serde(default)]
    pub server: Option<(Ipv4Addr, u16)>,
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let streams = f.count("streams")?.unwrap_or(1);
    if streams > 128 {
        return Err(f.error_at("streams", "iperf3 runs at most 128 parallel streams"));
    }
    let time = f.duration("time")?.unwrap_or(Duration::from_secs(10));
    let reverse = f.bool("reverse")?.unwrap_or(false);
    let bitrate = f.str("bitrate")?;
    if let Some(b) = &bitrate
        && !valid_bitrate(b)
    {
        return Err(
            f.error_at("bitrate", format!("\"{b}\" is not a rate; write bits per second like \"500M\" or \"1G\""))
        );
    }
    let udp = f.choice("protocol", &["tcp", "udp"])?.is_some_and(|p| p == "udp");
    f.finish()?;
    if time.as_secs() == 0 {
        return Err(f.error_at("time", "must be at least 1s"));
    }
    Ok(Spec::Network(Network { streams, time_s: time.as_secs(), reverse, bitrate, udp, server: None }))
}

/// iperf3's rate notation: a number with an optional K, M, G or T (powers of 1000).
/// iperf3's `-b`: a number with at most one of its suffixes, more than 0 and at most
/// `MAX_BITS_PER_SECOND`.
fn valid_bitrate(text: &str) -> bool {
    let number = text.trim_end_matches(['K', 'M', 'G', 'T', 'k', 'm', 'g', 't']);
    let scale = match text[number.len()..].to_ascii_uppercase().as_str() {
        "K" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        _ => 1.0,
    };
    number.len() + 1 >= text.len()
        && number.parse::<f64>().is_ok_and(|n| n > 0.0 && n * scale <= figures::units::MAX_BITS_PER_SECOND)
}

impl Workload for Network {
    fn programs(&self) -> Vec<&'static str> {
        vec!["iperf3"]
    }

    fn headline(&self) -> Vec<&'static str> {
        if self.udp {
            vec!["bitrate", "lost_percent", "jitter", "cpu_sandbox", "cpu_host"]
        } else {
            vec!["bitrate", "retransmits", "cpu_sandbox", "cpu_host"]
        }
    }

    fn recorded(&self) -> Vec<String> {
        ["bitrate", "sent_bitrate", "retransmits", "lost_percent", "jitter"].map(String::from).into()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("network.protocol".to_string(), if self.udp { "udp" } else { "tcp" }.to_string()),
            ("network.streams".into(), self.streams.to_string()),
            ("network.direction".into(), if self.reverse { "host to sandbox" } else { "sandbox to host" }.into()),
        ])
    }

    fn expected_duration(&self) -> Duration {
        Duration::from_secs(self.time_s + 2)
    }

    fn needs_network(&self) -> bool {
        true
    }

    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let (address, port) = self.server.ok_or_else(|| anyhow!("the network workload was given no server"))?;
        let output = ctx.scratch_dir.join("iperf3.json");
        let mut cmd = Command::new("iperf3");
        cmd.args(["-c", &address.to_string(), "-p", &port.to_string(), "-t", &self.time_s.to_string()]);
        cmd.args(["-P", &self.streams.to_string(), "--json", "--connect-timeout", "5000"]);
        cmd.arg(format!("--logfile={}", output.display()));
        if self.reverse {
            cmd.arg("-R");
        }
        if self.udp {
            cmd.arg("-u");
        }
        if let Some(b) = &self.bitrate {
            cmd.args(["-b", b]);
        }
        let timeout = self.expected_duration() + Duration::from_secs(30);
        let finished = sys::run(&mut cmd, sys::Options { timeout: Some(timeout), ..Default::default() })?;
        let json = std::fs::read_to_string(&output).unwrap_or_default();
        out.raw.push(RawFile { name: "iperf3.json".into(), content: json.clone() });
        if json.trim().is_empty() {
            bail!("iperf3 printed no report ({}): {}", finished.status, finished.tail(5));
        }
        let (samples, series) = parse_report(&json)?;
        out.samples.extend(samples);
        out.series.extend(series);
        Ok(())
    }
}

/// The samples and the per-second series of an iperf3 client's `--json` report.
pub fn parse_report(json: &str) -> Result<(Vec<Sample>, Vec<Series>)> {
    let doc: serde_json::Value = serde_json::from_str(json).context("iperf3's report is not JSON")?;
    if let Some(error) = doc["error"].as_str() {
        bail!("iperf3: {error}");
    }
    let end = &doc["end"];
    let received = &end["sum_received"];
    let bits = |v: &serde_json::Value| v["bits_per_second"].as_f64();
    let rate = bits(received).ok_or_else(|| anyhow!("iperf3's report has no end.sum_received"))?;
    if received["bytes"].as_f64().unwrap_or(0.0) <= 0.0 {
        bail!("iperf3 moved no data: the server received 0 bytes (end.sum_received.bytes)");
    }
    let mut samples = vec![Sample::new("bitrate", rate, "bit/s")];
    if let Some(sent) = bits(&end["sum_sent"]) {
        samples.push(Sample::new("sent_bitrate", sent, "bit/s"));
    }
    if let Some(r) = end["sum_sent"]["retransmits"].as_f64() {
        samples.push(Sample::new("retransmits", r, ""));
    }
    if let Some(lost) = received["lost_percent"].as_f64() {
        samples.push(Sample::new("lost_percent", lost, "%"));
    }
    if let Some(jitter) = received["jitter_ms"].as_f64().or(end["sum"]["jitter_ms"].as_f64()) {
        samples.push(Sample::new("jitter", jitter * 1000.0, "us"));
    }
    let cpu = &end["cpu_utilization_percent"];
    // The client runs in the sandbox ("host" in iperf3's words); the server on the host ("remote").
    for (metric, key) in [("cpu_sandbox", "host_total"), ("cpu_host", "remote_total")] {
        if let Some(v) = cpu[key].as_f64() {
            samples.push(Sample::new(metric, v, "%"));
        }
    }
    let points: Vec<(f64, f64)> = doc["intervals"]
        .as_array()
        .map(|intervals| intervals.iter().filter_map(|i| Some((i["sum"]["end"].as_f64()?, bits(&i["sum"])?))).collect())
        .unwrap_or_default();
    let series = if points.is_empty() {
        vec![]
    } else {
        vec![Series { metric: "bitrate".into(), unit: "bit/s".into(), points }]
    };
    Ok((samples, series))
}

/// The iperf3 server on the host side of one run: one test, then it exits (`-1`).
pub struct Iperf3Peer {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Iperf3Peer {
    /// Starts a server on `address`, recorded in the ledger, and waits until it listens.
    pub fn start(ledger: &Ledger, address: Ipv4Addr, run_dir: &Path) -> Result<Iperf3Peer> {
        let port = crate::sys::free_port()?;
        let token = ledger.new_process_token();
        ledger.record(Resource::Processes { token: token.clone() })?;
        let log = run_dir.join(format!("iperf3-server-{port}.json"));
        let mut cmd = Command::new("iperf3");
        cmd.args(["-s", "-1", "-B", &address.to_string(), "-p", &port.to_string(), "--json"]);
        cmd.arg(format!("--logfile={}", log.display()));
        sys::prepare(&mut cmd, Some(&token));
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().context("starting the iperf3 server (apt-get install iperf3)")?;
        if let Err(e) = crate::net::wait_listening(address, port, Duration::from_secs(10)) {
            let _ = child.kill();
            let _ = child.wait();
            let said = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("the iperf3 server did not start on {address}:{port}: {e}; it said: {}", sys::tail_lines(&said, 5));
        }
        Ok(Iperf3Peer { child, port, log })
    }

    /// Waits briefly for the server to finish its one test, and returns its report.
    pub fn finish(mut self) -> Option<RawFile> {
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let content = std::fs::read_to_string(&self.log).ok()?;
        Some(RawFile { name: "iperf3-server.json".into(), content })
    }
}

/// iperf3's version line, if it is installed.
pub fn version() -> Option<String> {
    sys::command_output("iperf3", &["--version"]).ok().and_then(|s| s.lines().next().map(|l| l.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn get(samples: &[Sample], metric: &str) -> Option<f64> {
        samples.iter().find(|s| s.metric == metric).map(|s| s.value)
    }

    #[test]
    fn tcp_reports_give_the_received_rate_retransmits_and_both_cpus() {
        for name in ["iperf3-tcp-2streams.json", "iperf3-tcp-reverse.json"] {
            let json = fixture(name);
            let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
            let (samples, series) = parse_report(&json).unwrap();
            let rate = get(&samples, "bitrate").unwrap();
            assert_eq!(rate, doc["end"]["sum_received"]["bits_per_second"].as_f64().unwrap(), "{name}");
            assert!(rate > 1e9, "{name}: loopback carries gigabits");
            assert!(get(&samples, "retransmits").is_some());
            assert!(get(&samples, "cpu_sandbox").unwrap() > 0.0 && get(&samples, "cpu_host").unwrap() > 0.0);
            assert!(get(&samples, "lost_percent").is_none(), "TCP loses nothing it reports");
            let mean: f64 = series[0].points.iter().map(|p| p.1).sum::<f64>() / series[0].points.len() as f64;
            assert!((mean - rate).abs() / rate < 0.2, "{name}: the per-second series averages near the total");
        }
    }

    #[test]
    fn udp_reports_give_loss_and_jitter() {
        let (samples, _) = parse_report(&fixture("iperf3-udp-500M.json")).unwrap();
        let lost = get(&samples, "lost_percent").unwrap();
        assert!((0.0..100.0).contains(&lost));
        assert!(get(&samples, "jitter").is_some());
        assert!(get(&samples, "bitrate").unwrap() <= get(&samples, "sent_bitrate").unwrap(), "received ≤ sent");
        assert!(get(&samples, "retransmits").is_none());
    }

    #[test]
    fn an_error_report_is_an_error() {
        let e = parse_report(
            r#"{"start":{},"intervals":[],"end":{},"error":"unable to connect to server: Connection refused"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("Connection refused"), "{e}");
        assert!(valid_bitrate("500M") && valid_bitrate("1.5G") && valid_bitrate("100000"));
        assert!(!valid_bitrate("fast") && !valid_bitrate("1GG") && !valid_bitrate("0"));
    }
}
