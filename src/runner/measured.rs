//! The system figures of a served cell's measured phase, wherever its server runs on this
//! machine (a Cassandra ring or one database of Debian's): the database moved to its own CPUs,
//! its CPU, system calls, sampled parts and runtime counters read when the load's measured phase
//! begins and again when it ends.

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::Result;

use super::Place;
use super::collect::HostCounters;
use crate::store::Sample;

/// What a served cell learned of its server's sandboxes over the measured phase.
pub struct Measured {
    /// CPU seconds the server's processes used in it, where they are counted while they run.
    pub cpu: Option<f64>,
    /// Their system calls and page faults in it, where they run in a group of their own.
    pub calls: Option<Result<crate::sys::PerfCounts>>,
    /// What the runtime's own counters (gVisor's) say happened in it, and how they were read.
    pub runtime_counted: Vec<Sample>,
    pub runtime_setup: BTreeMap<String, String>,
    /// When it began and ended (UTC), where it began.
    pub window: Option<(String, String)>,
    /// Why the server could not be moved to its CPUs.
    pub moved_error: Option<String>,
}

/// The measured phase's bookkeeping: `begin` on the load's cue, `end` once the load is done.
pub struct Phase<'a> {
    counters: Option<&'a HostCounters>,
    moved: Option<&'a Moved<'a>>,
    runtime: &'a RuntimeCounters<'a>,
    began: Mutex<Option<Began>>,
}

struct Began {
    at: String,
    cpu: Option<f64>,
    calls: Option<Result<crate::sys::PerfStat>>,
    parts_from: f64,
    runtime: Option<Result<BTreeMap<String, f64>>>,
}

impl<'a> Phase<'a> {
    pub fn new(
        counters: Option<&'a HostCounters>,
        moved: Option<&'a Moved<'a>>,
        runtime: &'a RuntimeCounters<'a>,
    ) -> Self {
        Phase { counters, moved, runtime, began: Mutex::new(None) }
    }

    /// The measured phase begins: the server moves to its CPUs, its counters are read.
    pub fn begin(&self) {
        if let Some(moved) = self.moved {
            moved.now();
        }
        let began = Began {
            at: crate::store::utc_now(),
            cpu: self.counters.and_then(HostCounters::cpu_now),
            calls: self.counters.and_then(HostCounters::count_calls),
            parts_from: crate::sys::sampling::monotonic_now(),
            runtime: self.runtime.read(),
        };
        *self.began.lock().unwrap() = Some(began);
    }

    /// The measured phase has ended (or never began): what changed in it.
    pub fn end(self) -> Measured {
        let moved_error = self.moved.and_then(Moved::error);
        let Some(began) = self.began.into_inner().unwrap() else {
            return Measured {
                cpu: None,
                calls: None,
                runtime_counted: Vec::new(),
                runtime_setup: BTreeMap::new(),
                window: None,
                moved_error,
            };
        };
        let cpu = began.cpu.zip(self.counters.and_then(HostCounters::cpu_now)).map(|(start, end)| end - start);
        let calls = began.calls.map(|counting| counting.and_then(crate::sys::PerfStat::finish));
        if let Some(counters) = self.counters {
            counters.end_parts_window(began.parts_from, cpu);
        }
        let mut runtime_setup = BTreeMap::new();
        let runtime_counted = match began.runtime {
            Some(before) => runtime_samples(before, self.runtime.read(), &mut runtime_setup),
            None => Vec::new(),
        };
        let window = Some((began.at, crate::store::utc_now()));
        Measured { cpu, calls, runtime_counted, runtime_setup, window, moved_error }
    }
}

/// Once a served cell's agents have ended, before the load's samples join: where the server was
/// moved to its CPUs (`Moved::said`), and what its sandboxes used over their whole life (start, load, stop), from
/// which no CPU per operation of the measured phase can be made.
pub fn close(
    moved: Option<String>,
    counters: Option<HostCounters>,
    report: &mut crate::store::AgentReport,
    setup: &mut BTreeMap<String, String>,
) {
    if let Some(said) = moved {
        setup.insert("limit.cpuset_from".into(), said);
    }
    if let Some(counters) = counters {
        counters.finish(report);
    }
}

/// The load's output in the run's report, then the measured phase's figures made from it.
pub fn add_load(
    report: &mut crate::store::AgentReport,
    setup: &mut BTreeMap<String, String>,
    out: crate::workload::Output,
    measured: Measured,
) {
    report.samples.extend(out.samples);
    report.series.extend(out.series);
    report.steps.extend(out.steps);
    report.notes.extend(out.notes);
    report.raw.extend(out.raw);
    measured.add_to(report, setup);
}

impl Measured {
    /// The phase's figures in the run's report and setup: CPU, system calls per operation of
    /// the load's, the runtime's counters.
    pub fn add_to(self, report: &mut crate::store::AgentReport, setup: &mut BTreeMap<String, String>) {
        if let Some((from, to)) = &self.window {
            setup.insert("load.measured".into(), format!("{from} to {to}"));
        }
        if let Some(cpu) = self.cpu {
            report.samples.extend(super::collect::per_op(cpu, &report.samples));
        }
        report.samples.extend(self.runtime_counted);
        setup.extend(self.runtime_setup);
        match self.calls {
            Some(Ok(counts)) => {
                report.samples.extend(super::collect::calls_per_op(&counts, &report.samples));
                setup.insert("sys.calls_counted_by".into(), super::collect::CALLS_COUNTED_BY.into());
            }
            Some(Err(e)) => {
                setup.insert("sys.calls_counted_by".into(), format!("not counted: {e:#}"));
            }
            None => {}
        }
    }
}

/// The runtime's own counters of the nodes' sandboxes (gVisor's), summed over the nodes.
pub struct RuntimeCounters<'a> {
    pub env: &'a dyn crate::env::Environment,
    pub dirs: Vec<std::path::PathBuf>,
}

impl RuntimeCounters<'_> {
    pub fn read(&self) -> Option<Result<BTreeMap<String, f64>>> {
        let mut sum = BTreeMap::new();
        for dir in &self.dirs {
            match self.env.runtime_counters(dir)? {
                Ok(counters) => counters.into_iter().for_each(|(name, n)| *sum.entry(name).or_default() += n),
                Err(e) => return Some(Err(e)),
            }
        }
        Some(Ok(sum))
    }
}

/// `sys.gvisor.NAME` for each of the runtime's counters that moved in the measured phase.
fn runtime_samples(
    before: Result<BTreeMap<String, f64>>,
    after: Option<Result<BTreeMap<String, f64>>>,
    setup: &mut BTreeMap<String, String>,
) -> Vec<Sample> {
    let (before, after) = match (before, after) {
        (Ok(before), Some(Ok(after))) => (before, after),
        (Err(e), _) | (_, Some(Err(e))) => {
            setup.insert("sys.gvisor_counted_by".into(), format!("not read: {e:#}"));
            return Vec::new();
        }
        _ => return Vec::new(),
    };
    setup.insert("sys.gvisor_counted_by".into(), crate::store::GVISOR_COUNTED_BY.into());
    after
        .iter()
        .filter_map(|(name, n)| {
            let moved = n - before.get(name).copied().unwrap_or(0.0);
            let name = name.strip_prefix("runsc_").unwrap_or(name);
            (moved > 0.0).then(|| Sample::new(format!("{}{name}", crate::store::GVISOR), moved, "events"))
        })
        .collect()
}

/// A database that starts on every CPU and moves to its own when the measured phase begins: its
/// start and the load phase before the measured one are not what a cell measures, and a JVM
/// starts in half the time on two CPUs as on one. Where the sandbox's processes are not in a
/// group of isobench's own, they cannot all be found to move, and it starts pinned instead.
pub struct Moved<'a> {
    pub set: &'a crate::sys::CpuSet,
    group: &'a crate::sys::CpuGroup,
    /// The threads moved, or why they could not be, once the measured phase began.
    outcome: std::sync::Mutex<Option<Result<usize, String>>>,
}

impl<'a> Moved<'a> {
    pub fn plan(place: &'a Place, counters: Option<&'a HostCounters>) -> Option<Moved<'a>> {
        let set = place.pins.sandbox.as_ref()?;
        let group = counters?.cpu_group()?;
        Some(Moved { set, group, outcome: std::sync::Mutex::new(None) })
    }

    /// Moves every thread of the sandbox's processes now.
    fn now(&self) {
        let pids = || self.group.processes().iter().map(|p| p.pid).collect();
        let outcome = self
            .set
            .move_threads(&pids)
            .map_err(|e| format!("moving the database's threads to CPUs {}: {e}", self.set));
        *self.outcome.lock().unwrap() = Some(outcome);
    }

    /// The run's `limit.cpuset_from`.
    pub fn said(&self) -> String {
        match self.outcome.lock().unwrap().as_ref() {
            Some(Ok(threads)) => format!(
                "the measured phase: the start and the load phase before it ran on every CPU, then {threads} threads of the sandbox's processes moved to CPUs {}",
                self.set
            ),
            Some(Err(e)) => format!("not applied: {e}"),
            None => "not applied: the measured phase never began".into(),
        }
    }

    fn error(&self) -> Option<String> {
        self.outcome.lock().unwrap().as_ref().and_then(|o| o.as_ref().err().cloned())
    }
}
