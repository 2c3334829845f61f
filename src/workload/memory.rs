//! `kind = "memory"`: sysbench's memory test, reading or writing `total_size` in blocks of
//! `block_size`, sequentially or at random.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{Kind, Output, ParseContext, RunContext, Spec, Workload, sysbench};
use crate::store::Sample;
use crate::syntax::{Fields, SuiteError};
use figures::units;

pub const KIND: Kind = Kind { name: "memory", list_keys: &[], parse, capacity: Err(super::NO_LATENCY) };

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Memory {
    /// read | write
    pub oper: String,
    /// seq | rnd
    pub access: String,
    pub block_size: u64,
    pub total_size: u64,
    pub threads: u64,
    /// sysbench stops after this long even if `total_size` is not done.
    pub time_s: u64,
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let oper = f.choice("oper", &["read", "write"])?.unwrap_or_else(|| "write".into());
    let access = f.choice("access", &["seq", "rnd"])?.unwrap_or_else(|| "seq".into());
    let block_size = f.size("block_size")?.unwrap_or(1 << 10);
    let total_size = f.size("total_size")?.unwrap_or(10 << 30);
    let threads = f.count("threads")?.unwrap_or(1);
    let time = f.duration("time")?.unwrap_or(Duration::from_secs(60));
    f.finish()?;
    if total_size < block_size {
        return Err(f.error_at("total_size", "is smaller than one block; raise total_size or lower block_size"));
    }
    Ok(Spec::Memory(Memory { oper, access, block_size, total_size, threads, time_s: time.as_secs().max(1) }))
}

impl Workload for Memory {
    fn programs(&self) -> Vec<&'static str> {
        vec!["sysbench"]
    }

    fn headline(&self) -> Vec<&'static str> {
        vec!["bw", "ops", "total_time"]
    }

    fn recorded(&self) -> Vec<String> {
        ["bw", "ops", "events", "latency_mean", "latency_max", "latency_p95", "total_time"].map(String::from).into()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("memory.oper".to_string(), self.oper.clone()),
            ("memory.access".into(), self.access.clone()),
            ("memory.block_size".into(), self.block_size.to_string()),
            ("memory.total_size".into(), self.total_size.to_string()),
        ])
    }

    fn expected_duration(&self) -> Duration {
        // At ~1 GB/s it is done well before its time limit; the limit bounds the rest.
        Duration::from_secs((self.total_size >> 30).clamp(1, self.time_s))
    }

    fn run(&self, _ctx: &RunContext, out: &mut Output) -> Result<()> {
        let args = vec![
            format!("--threads={}", self.threads),
            format!("--memory-block-size={}", units::fio_size(self.block_size)),
            format!("--memory-total-size={}", units::fio_size(self.total_size)),
            format!("--memory-oper={}", self.oper),
            format!("--memory-access-mode={}", self.access),
            format!("--time={}", self.time_s),
            "--events=0".into(),
        ];
        let timeout = Duration::from_secs(self.time_s * 2 + 60);
        let report = sysbench::run("memory", &args, timeout, out)?;
        if let Some(mib) = report.mib_per_s {
            out.samples.push(Sample::new("bw", mib * 1048576.0, "B/s"));
        }
        if let Some(ops) = report.ops_per_s {
            out.samples.push(Sample::new("ops", ops, "op/s"));
        }
        out.samples.extend(report.common_samples());
        Ok(())
    }
}
