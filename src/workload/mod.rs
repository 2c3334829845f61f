//! What is measured. Each kind is one file; its configuration is parsed from the suite on the
//! host and travels to the agent inside the sandbox as a `Spec`, where `run` executes it.

pub mod cpu;
pub mod cql;
pub mod fio;
pub mod memory;
pub mod network;
pub mod sysbench;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use crate::store::{RawFile, Sample, Series};
use crate::syntax::{Fields, SuiteError};

/// What one run of a workload produced.
#[derive(Default, Debug)]
pub struct Output {
    pub samples: Vec<Sample>,
    pub series: Vec<Series>,
    pub raw: Vec<RawFile>,
    pub notes: Vec<String>,
}

/// Where and with what a workload runs, as the agent sees it.
pub struct RunContext<'a> {
    /// The volume under test.
    pub data_dir: &'a Path,
    /// A raw volume: the device or NBD export itself (then `data_dir` is only a working directory).
    pub raw: Option<&'a crate::volume::RawTarget>,
    /// Nothing may be written to the volume.
    pub read_only: bool,
    /// A private directory for temporary files, not on the volume under test.
    pub scratch_dir: &'a Path,
}

/// A workload refused to start because the cell cannot work (not because a run went wrong):
/// the same cell would fail the same way every time, so its other repetitions are skipped.
#[derive(Debug)]
pub struct Unfit(pub String);

impl std::fmt::Display for Unfit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unfit {}

pub trait Workload {
    /// Programs that must exist where the workload runs.
    fn programs(&self) -> Vec<&'static str>;
    /// Metrics for the terminal table, most important first.
    fn headline(&self) -> Vec<&'static str>;
    /// What the workload does, for validity checks and reports ("fio.direct" = "true" …).
    fn describe(&self) -> BTreeMap<String, String>;
    /// How long one run should take (for the ETA).
    fn expected_duration(&self) -> Duration;
    /// How long one run may take before its sandbox is stopped.
    fn timeout(&self) -> Duration {
        self.expected_duration() * 3 + Duration::from_secs(180)
    }
    /// Whether it writes to the volume under test (a read-only volume refuses the cell).
    fn writes_volume(&self) -> bool {
        false
    }
    /// Whether it talks to a peer on the host over the sandbox's network path.
    fn needs_network(&self) -> bool {
        false
    }
    /// Runs once, inside the environment.
    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()>;
}

/// A workload's concrete configuration (one cell's values).
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Spec {
    Fio(fio::Fio),
    Cql(cql::Cql),
    Cpu(cpu::Cpu),
    Memory(memory::Memory),
    Network(network::Network),
}

impl Spec {
    pub fn workload(&self) -> &dyn Workload {
        match self {
            Spec::Fio(w) => w,
            Spec::Cql(w) => w,
            Spec::Cpu(w) => w,
            Spec::Memory(w) => w,
            Spec::Network(w) => w,
        }
    }
}

/// Where suite-relative paths (job files) are resolved.
pub struct ParseContext<'a> {
    pub suite_dir: &'a Path,
}

impl ParseContext<'_> {
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.suite_dir.join(path)
    }
}

/// A workload kind: its name, the keys whose values are lists by nature (every other list is a
/// matrix axis), and how to read one cell's configuration.
pub struct Kind {
    pub name: &'static str,
    pub list_keys: &'static [&'static str],
    pub parse: fn(&mut Fields, &ParseContext) -> Result<Spec, SuiteError>,
}
