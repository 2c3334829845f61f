//! `kind = "cpu"`: sysbench's prime-number test. With `events`, a fixed amount of work whose run
//! time is the figure (what the published runtime comparisons time); with `time`, a fixed
//! duration whose event rate is.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Kind, Output, ParseContext, RunContext, Spec, Workload, sysbench};
use crate::store::Sample;
use crate::syntax::{Fields, SuiteError};

pub const KIND: Kind = Kind { name: "cpu", list_keys: &[], parse, capacity: Err(super::NO_LATENCY) };

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Cpu {
    pub threads: u64,
    pub max_prime: u64,
    /// A fixed amount of work: the run time is measured.
    pub events: Option<u64>,
    /// A fixed duration (when `events` is not given): the event rate is measured.
    pub time_s: Option<f64>,
    /// How long a run may take before it is stopped.
    pub timeout_s: u64,
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let threads = f.count("threads")?.unwrap_or(1);
    let max_prime = f.count("max_prime")?.unwrap_or(10_000);
    let events = f.count("events")?;
    let time = f.duration("time")?;
    let timeout = f.timeout("timeout")?;
    f.finish()?;
    if events.is_some() && time.is_some() {
        return Err(f.error_at(
            "time",
            "give either events (a fixed amount of work, timed) or time (a fixed duration, its rate measured), not both",
        ));
    }
    if time.is_some_and(|t| t.is_zero()) {
        return Err(f.error_at("time", "must be more than zero"));
    }
    let time_s = match (events, time) {
        (None, None) => Some(10.0),
        (_, t) => t.map(|t| t.as_secs_f64()),
    };
    Ok(Spec::Cpu(Cpu {
        threads,
        max_prime,
        events,
        time_s,
        timeout_s: timeout.map(|t| t.as_secs().max(1)).unwrap_or(600),
    }))
}

impl Cpu {
    fn args(&self) -> Vec<String> {
        vec![
            format!("--threads={}", self.threads),
            format!("--cpu-max-prime={}", self.max_prime),
            // sysbench stops at whichever limit comes first; 0 lifts a limit.
            format!("--events={}", self.events.unwrap_or(0)),
            format!("--time={}", self.time_s.map(|t| t.ceil() as u64).unwrap_or(0)),
        ]
    }
}

impl Workload for Cpu {
    fn programs(&self) -> Vec<&'static str> {
        vec!["sysbench"]
    }

    fn headline(&self) -> Vec<&'static str> {
        if self.events.is_some() {
            vec!["total_time", "events_per_s", "latency_p95"]
        } else {
            vec!["events_per_s", "latency_mean", "latency_p95"]
        }
    }

    fn recorded(&self) -> Vec<String> {
        ["events_per_s", "events", "latency_mean", "latency_max", "latency_p95", "total_time"].map(String::from).into()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([
            ("cpu.threads".to_string(), self.threads.to_string()),
            ("cpu.max_prime".into(), self.max_prime.to_string()),
        ]);
        if let Some(e) = self.events {
            d.insert("cpu.events".into(), e.to_string());
        }
        d
    }

    fn expected_duration(&self) -> Duration {
        // A fixed amount of work: about 3,500 events/s per thread at max_prime 10000 on a
        // current core (sysbench's cost grows with max_prime); only for the ETA.
        let work = || self.events.unwrap_or(0) as f64 * self.max_prime as f64 / 3.5e7 / self.threads as f64;
        figures::units::seconds(self.time_s.unwrap_or_else(work).max(1.0))
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s) + Duration::from_secs(180)
    }

    fn run(&self, _ctx: &RunContext, out: &mut Output) -> Result<()> {
        let report = sysbench::run("cpu", &self.args(), Duration::from_secs(self.timeout_s), out)?;
        let rate = report.events_per_s.unwrap_or(report.events as f64 / report.total_time_s);
        out.samples.push(Sample::new("events_per_s", rate, "events/s"));
        out.samples.extend(report.common_samples());
        Ok(())
    }
}
