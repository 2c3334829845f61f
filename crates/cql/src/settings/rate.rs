//! `-rate` (`SettingsRate.java`).

use super::ArgError;
use super::command::Command;
use super::tokens::{Params, number, per_second};

#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// None: a series of runs from `min_threads` up to `max_threads` threads.
    pub threads: Option<u32>,
    /// With `threads` None: stop the series once throughput stops improving.
    pub auto: bool,
    pub min_threads: u32,
    pub max_threads: u32,
    /// `throttle=R/s`: at most R operations per second, latency measured as service time.
    pub throttle: Option<u64>,
    /// `fixed=R/s`: R operations per second on a schedule; latency from each intended start.
    pub fixed: Option<u64>,
}

impl Rate {
    pub fn ops_per_second(&self) -> Option<u64> {
        self.fixed.or(self.throttle)
    }
}

pub(super) fn parse_rate(command: &Command, params: Option<Params>) -> Result<Rate, ArgError> {
    let auto = Rate { threads: None, auto: false, min_threads: 4, max_threads: 1000, throttle: None, fixed: None };
    let Some(mut p) = params else {
        // cassandra-stress: 200 threads for a counted write, auto otherwise.
        return Ok(if command.updates() && !command.is_mixed() && command.count().is_some() {
            Rate { threads: Some(200), ..auto }
        } else {
            auto
        });
    };
    let threads = p.take("threads=");
    let throttle = p.take("throttle=").map(|t| per_second(&p, "throttle=", &t)).transpose()?.filter(|r| *r > 0);
    let fixed = p.take("fixed=").map(|t| per_second(&p, "fixed=", &t)).transpose()?.filter(|r| *r > 0);
    let min_threads = p.take("threads>=").map(|t| number(&p, "threads>=", &t)).transpose()?.unwrap_or(4);
    let max_threads = p.take("threads<=").map(|t| number(&p, "threads<=", &t)).transpose()?.unwrap_or(1000);
    let is_auto = p.flag("auto");
    p.finish("threads=, throttle=R/s, fixed=R/s, auto, threads>=, threads<=")?;
    if throttle.is_some() && fixed.is_some() {
        return Err(ArgError::Invalid("can't have both fixed and throttle set, choose one.".into()));
    }
    let threads = match threads {
        Some(t) if !is_auto => {
            Some(number::<u32>(&Params { group: "-rate".into(), items: vec![] }, "threads=", &t)?.max(1))
        }
        _ => None,
    };
    if threads.is_none() && (throttle.is_some() || fixed.is_some()) {
        return Err(ArgError::Invalid(
            "Invalid -rate options provided: throttle= and fixed= need threads=, e.g. -rate threads=64 fixed=1000/s"
                .into(),
        ));
    }
    Ok(Rate { threads, auto: is_auto, min_threads, max_threads, throttle, fixed })
}
