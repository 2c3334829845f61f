//! Density: N sandboxes of one cell started at once, each on its own volume (or slice of one),
//! held behind a barrier until every one is up, then running the workload together. A run
//! reports the aggregate (rates summed; fio's latency from its merged histograms), the spread
//! between sandboxes (a starved one shows as the minimum), how long each took from "create" to
//! "agent ready", and the host memory each took (PSS, sampled while all were up). A sandbox
//! that fails is counted and named, never dropped.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::Place;
use crate::agent::READY;
use crate::compare::higher_is_better;
use crate::env::StartGate;
use crate::ledger::Resource;
use crate::plan::Plan;
use crate::store::{RawFile, Sample, SandboxRecord, Status};
use crate::suite::Suite;
use crate::sys;
use crate::volume::Provisioned;
use crate::workload::{Spec, fio};
use figures::units;

/// How long sandboxes may take to come up before the ready ones start without the rest.
pub const START_TIMEOUT: Duration = Duration::from_secs(600);

/// Gives sandbox INDEX (1-based) a 1 MiB memory limit, so that it fails to start: for testing
/// that a failed sandbox is counted, named and cleaned up.
pub const FAULT_VAR: &str = "ISOBENCH_FAULT_SANDBOX";

/// Where every sandbox of one run stands.
#[derive(Default)]
struct State {
    pid: Vec<Option<u32>>,
    ready_after: Vec<Option<Duration>>,
    started: Vec<Option<Instant>>,
    done: Vec<bool>,
    /// Some(true): go; Some(false): called off.
    release: Option<bool>,
}

pub struct Barrier {
    state: Mutex<State>,
    changed: Condvar,
}

impl Barrier {
    fn new(n: usize) -> Arc<Barrier> {
        let state = State {
            pid: vec![None; n],
            ready_after: vec![None; n],
            started: vec![None; n],
            done: vec![false; n],
            release: None,
        };
        Arc::new(Barrier { state: Mutex::new(state), changed: Condvar::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    /// Waits until every sandbox is up or has ended, the timeout passes, or the user interrupts.
    fn wait_for_all(&self, timeout: Duration) {
        let all_up = |s: &State| (0..s.done.len()).all(|i| s.done[i] || s.ready_after[i].is_some());
        sys::wait_on(&self.state, &self.changed, Instant::now() + timeout, all_up);
    }

    fn release(&self, go: bool) {
        self.update(|s| {
            s.release.get_or_insert(go);
        });
    }
}

/// One sandbox's handle on the barrier, passed to its environment through `Launch::gate`.
#[derive(Clone)]
pub struct Gate {
    barrier: Arc<Barrier>,
    index: usize,
}

impl StartGate for Gate {
    /// The sandbox's first process started (its runtime, QEMU, or the agent itself).
    fn spawned(&self, pid: u32) {
        self.barrier.update(|s| s.pid[self.index] = Some(pid));
    }

    /// A line the sandbox printed; the agent's ready line marks it up.
    fn saw_line(&self, line: &str) {
        if line.contains(READY) {
            self.barrier.update(|s| {
                let since = s.started[self.index].map(|t| t.elapsed());
                s.ready_after[self.index].get_or_insert(since.unwrap_or_default());
            });
        }
    }

    /// What the sandbox's stdin gets once every sandbox is up: "go", or nothing (called off).
    fn go(&self) -> sys::StdinFeed {
        let barrier = Arc::clone(&self.barrier);
        Box::new(move |stdin| {
            let mut state = barrier.lock();
            while state.release.is_none() {
                state = barrier.changed.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            if state.release == Some(true) {
                let _ = stdin.write_all(b"go\n");
            }
        })
    }
}

/// Runs the workload in `n` sandboxes of `place` at once; the run's report (aggregate and
/// density samples) and each sandbox's record.
pub fn run(
    place: &Place,
    spec: &Spec,
    volumes: &[Provisioned],
    run_dir: &std::path::Path,
) -> Result<(crate::store::AgentReport, Vec<SandboxRecord>)> {
    let (ledger, n) = (place.ledger, volumes.len());
    let fault = std::env::var(FAULT_VAR).ok().and_then(|v| v.trim().parse::<usize>().ok());
    let barrier = Barrier::new(n);
    let mut dirs = Vec::new();
    for i in 0..n {
        let dir = run_dir.join(format!("sandbox-{}", i + 1));
        ledger.record(Resource::Dir { path: dir.clone() })?;
        std::fs::create_dir_all(&dir)?;
        dirs.push(dir);
    }
    let mut memory = vec![None; n];
    let results: Vec<Result<crate::store::AgentReport>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let gate = Gate { barrier: Arc::clone(&barrier), index: i };
                let (volume, dir) = (&volumes[i], &dirs[i]);
                let limit = (fault == Some(i + 1)).then_some(1 << 20);
                scope.spawn(move || {
                    gate.barrier.update(|s| s.started[i] = Some(Instant::now()));
                    let result = place.run(spec, volume, dir, Some(&gate), limit);
                    gate.barrier.update(|s| s.done[i] = true);
                    result
                })
            })
            .collect();
        barrier.wait_for_all(START_TIMEOUT);
        {
            let state = barrier.lock();
            for (i, held) in memory.iter_mut().enumerate() {
                if state.ready_after[i].is_some() {
                    *held = state.pid[i].and_then(sandbox_pss);
                }
            }
        }
        barrier.release(!sys::interrupted());
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| bail!("the sandbox's thread panicked"))).collect()
    });
    if sys::interrupted() {
        return Err(sys::Interrupted.into());
    }
    let state = barrier.lock();
    let records: Vec<SandboxRecord> = results
        .iter()
        .enumerate()
        .map(|(i, result)| {
            let (status, error, samples) = match result {
                Ok(r) if r.error.is_none() && !r.samples.is_empty() => (Status::Ok, None, r.samples.clone()),
                Ok(r) => (Status::Failed, Some(r.error.clone().unwrap_or_else(|| "no samples".into())), vec![]),
                Err(e) => (Status::Failed, Some(format!("{e:#}")), vec![]),
            };
            let never_up = state.ready_after[i].is_none() && status == Status::Failed;
            let error = error.map(|e| if never_up { format!("did not start: {e}") } else { e });
            SandboxRecord {
                index: i + 1,
                status,
                error,
                start_latency_s: state.ready_after[i].map(|d| d.as_secs_f64()),
                memory_pss: memory[i],
                samples,
            }
        })
        .collect();
    drop(state);
    Ok((report(spec, n, &results, &records), records))
}

/// The run's report: the first successful sandbox's facts and setup (every sandbox is the same
/// environment), every sandbox's raw files, the aggregate and density samples, and a note per
/// failed sandbox.
fn report(
    spec: &Spec,
    n: usize,
    results: &[Result<crate::store::AgentReport>],
    records: &[SandboxRecord],
) -> crate::store::AgentReport {
    let ok: Vec<&crate::store::AgentReport> = results
        .iter()
        .zip(records)
        .filter(|(_, rec)| rec.status == Status::Ok)
        .filter_map(|(r, _)| r.as_ref().ok())
        .collect();
    let mut report = crate::store::AgentReport::default();
    if let Some(first) = ok.first() {
        report.facts = first.facts.clone();
        report.setup = first.setup.clone();
    }
    for (r, rec) in results.iter().zip(records) {
        if let Ok(r) = r {
            for note in &r.notes {
                if !report.notes.contains(note) {
                    report.notes.push(note.clone());
                }
            }
            report.raw.extend(
                r.raw
                    .iter()
                    .map(|f| RawFile { name: format!("sandbox-{}-{}", rec.index, f.name), content: f.content.clone() }),
            );
        }
    }
    for rec in records.iter().filter(|r| r.status == Status::Failed) {
        let why = crate::store::error_headline(rec.error.as_deref().unwrap_or(""));
        report.notes.push(format!("sandbox {} of {n} failed: {why}", rec.index));
    }
    if ok.is_empty() {
        let first = records.iter().find_map(|r| r.error.clone()).unwrap_or_default();
        report.error = Some(format!("all {n} sandboxes failed; the first: {first}"));
        return report;
    }
    report.samples = aggregate(spec, &ok);
    report.samples.extend(spread(spec, records));
    report.samples.extend(density_samples(n, records));
    report
}

/// One figure per metric for all sandboxes together: rates and counts summed, the rest
/// averaged; fio's percentiles from its histograms merged across every sandbox's jobs.
pub fn aggregate(spec: &Spec, ok: &[&crate::store::AgentReport]) -> Vec<Sample> {
    if let Spec::Fio(_) = spec {
        let docs: Vec<serde_json::Value> = ok
            .iter()
            .filter_map(|r| r.raw.iter().find(|f| f.name == "fio.json"))
            .filter_map(|f| serde_json::from_str(&f.content).ok())
            .collect();
        if docs.len() == ok.len() {
            let jobs: Vec<serde_json::Value> =
                docs.iter().flat_map(|d| d["jobs"].as_array().cloned().unwrap_or_default()).collect();
            if let Ok(samples) = fio::samples_from_json(&serde_json::json!({ "jobs": jobs }).to_string()) {
                return samples;
            }
        }
    }
    let mut by_metric: Vec<(String, String, Vec<f64>)> = Vec::new();
    for r in ok {
        for s in &r.samples {
            match by_metric.iter_mut().find(|(m, _, _)| *m == s.metric) {
                Some((_, _, values)) => values.push(s.value),
                None => by_metric.push((s.metric.clone(), s.unit.clone(), vec![s.value])),
            }
        }
    }
    by_metric
        .into_iter()
        .map(|(metric, unit, values)| {
            let summed = higher_is_better(&unit) || matches!(unit.as_str(), "" | "events");
            let total: f64 = values.iter().sum();
            Sample::new(metric, if summed { total } else { total / values.len() as f64 }, &unit)
        })
        .collect()
}

/// Min, median and max across the sandboxes that ran, for each headline metric: a starved
/// sandbox shows as the minimum.
fn spread(spec: &Spec, records: &[SandboxRecord]) -> Vec<Sample> {
    let mut out = Vec::new();
    for metric in spec.workload().headline() {
        let mut values: Vec<(f64, &str)> = records
            .iter()
            .filter_map(|r| r.samples.iter().find(|s| s.metric == metric))
            .map(|s| (s.value, s.unit.as_str()))
            .collect();
        if values.is_empty() {
            continue;
        }
        values.sort_by(|a, b| a.0.total_cmp(&b.0));
        let unit = values[0].1;
        for (label, value) in [("min", values[0].0), ("median", median(&values)), ("max", values[values.len() - 1].0)] {
            out.push(Sample::new(format!("{metric}_sandbox_{label}"), value, unit));
        }
    }
    out
}

fn median(sorted: &[(f64, &str)]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2].0 } else { (sorted[n / 2 - 1].0 + sorted[n / 2].0) / 2.0 }
}

/// How many sandboxes ran and failed, how long they took to come up, and what each held in
/// host memory.
fn density_samples(n: usize, records: &[SandboxRecord]) -> Vec<Sample> {
    let failed = records.iter().filter(|r| r.status == Status::Failed).count();
    let mut out = vec![
        Sample::new("sandboxes", n as f64, "sandboxes"),
        Sample::new("sandboxes_ok", (n - failed) as f64, "sandboxes"),
        Sample::new("sandboxes_failed", failed as f64, "sandboxes"),
    ];
    let mut starts: Vec<f64> = records.iter().filter_map(|r| r.start_latency_s).collect();
    starts.sort_by(f64::total_cmp);
    if !starts.is_empty() {
        for (label, p) in [("p50", 50.0), ("p95", 95.0), ("max", 100.0)] {
            out.push(Sample::new(format!("start_latency_{label}"), nearest_rank(&starts, p), "s"));
        }
    }
    let memory: Vec<f64> = records.iter().filter_map(|r| r.memory_pss).collect();
    if !memory.is_empty() {
        out.push(Sample::new("sandbox_memory", memory.iter().sum::<f64>() / memory.len() as f64, "B"));
        out.push(Sample::new("sandbox_memory_max", memory.iter().cloned().fold(0.0, f64::max), "B"));
    }
    out
}

/// The nearest-rank percentile of sorted values.
fn nearest_rank(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

/// The proportional set size of a sandbox: the process isobench started for it, every process
/// below it, and every process carrying its token (runtimes' daemons that left the tree).
fn sandbox_pss(pid: u32) -> Option<f64> {
    let mut pids = descendants(pid as i32);
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    if let Some(token) = environ.split(|b| *b == 0).find(|kv| kv.starts_with(sys::TOKEN_VAR.as_bytes())) {
        for p in sys::pids_with_env(&String::from_utf8_lossy(token)) {
            if !pids.contains(&p) {
                pids.push(p);
            }
        }
    }
    let kib: u64 = pids.iter().filter_map(|p| pss_kib(*p)).sum();
    (kib > 0).then_some(kib as f64 * 1024.0)
}

fn pss_kib(pid: i32) -> Option<u64> {
    let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    rollup.lines().find_map(|l| l.strip_prefix("Pss:")).and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// `root` and every process below it.
fn descendants(root: i32) -> Vec<i32> {
    let parents: Vec<(i32, i32)> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, crate::sys::ProcStat::read(pid)?.parent()?)))
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(p, _)| *p));
        i += 1;
    }
    tree
}

/// Refuses, before anything runs, a density this machine cannot hold: more sandboxes than the
/// volume has slices, or more memory than it has (each sandbox's memory limit or guest memory,
/// plus its tmpfs volume), with the arithmetic.
pub fn check(suite: &Suite, plan: &Plan) -> Result<(), String> {
    let available = crate::facts::meminfo_kib("MemAvailable").map(|k| k * 1024);
    let mut seen = BTreeMap::new();
    for cell in &plan.cells {
        let Some(n) = suite.workloads[cell.workload].variants[cell.variant].density else { continue };
        let (env, volume) = (&suite.envs[cell.env], &suite.volumes[cell.volume]);
        if matches!(suite.server(cell.workload), Some(crate::server::ServerSpec::Managed(_)))
            && matches!(suite.workloads[cell.workload].variants[cell.variant].spec, Spec::Cql(_))
        {
            return Err(format!(
                "{}: workload \"{}\" has density = {n} and the suite a managed [[server]]: each sandbox would need a database of its own; load an external cluster ([[server]] kind = \"external\") from N sandboxes instead",
                suite.file, suite.workloads[cell.workload].name
            ));
        }
        if seen.insert((cell.env, cell.volume, n), ()).is_some() {
            continue;
        }
        if let Some(max) = volume.item.max_sandboxes()
            && n > max
        {
            return Err(format!(
                "{}: cell {} starts {n} sandboxes, but volume \"{}\" gives at most {max} their own slice; set partitions = {n} on it or lower density",
                suite.file, cell.id, volume.name
            ));
        }
        let per_env = env.item.memory_per_sandbox().unwrap_or(0);
        let per_volume = volume.item.memory().unwrap_or(0);
        let needed = n as u64 * (per_env + per_volume);
        if let Some(available) = available
            && needed > available
        {
            let parts: Vec<String> = [("env", &env.name, per_env), ("volume", &volume.name, per_volume)]
                .iter()
                .filter(|(_, _, b)| *b > 0)
                .map(|(what, name, b)| format!("{} for {what} \"{name}\"", units::human(*b as f64, "B")))
                .collect();
            return Err(format!(
                "{}: cell {} starts {n} sandboxes × ({}) = {}, but this machine has {} available (MemAvailable); lower density or the memory each needs",
                suite.file,
                cell.id,
                parts.join(" + "),
                units::human(needed as f64, "B"),
                units::human(available as f64, "B")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(index: usize, iops: Option<f64>, start: Option<f64>) -> SandboxRecord {
        SandboxRecord {
            index,
            status: if iops.is_some() { Status::Ok } else { Status::Failed },
            error: iops.is_none().then(|| "boom".into()),
            start_latency_s: start,
            memory_pss: Some(1e6 * index as f64),
            samples: iops.map(|v| vec![Sample::new("events_per_s", v, "events/s")]).unwrap_or_default(),
        }
    }

    #[test]
    fn rates_add_up_and_the_rest_is_averaged() {
        let a = crate::store::AgentReport {
            samples: vec![Sample::new("events_per_s", 100.0, "events/s"), Sample::new("total_time", 2.0, "s")],
            ..Default::default()
        };
        let b = crate::store::AgentReport {
            samples: vec![Sample::new("events_per_s", 50.0, "events/s"), Sample::new("total_time", 4.0, "s")],
            ..Default::default()
        };
        let spec: Spec = serde_json::from_str(
            r#"{"kind":"cpu","threads":1,"max_prime":10000,"events":100,"time_s":null,"timeout_s":60}"#,
        )
        .unwrap();
        let agg = aggregate(&spec, &[&a, &b]);
        assert_eq!(agg[0], Sample::new("events_per_s", 150.0, "events/s"));
        assert_eq!(agg[1], Sample::new("total_time", 3.0, "s"));
    }

    #[test]
    fn fio_sandboxes_merge_as_one_job_list() {
        let json =
            std::fs::read_to_string(format!("{}/tests/fixtures/fio-randread-2jobs.json", env!("CARGO_MANIFEST_DIR")))
                .unwrap();
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        // Each sandbox ran one of the fixture's two jobs: together they are the fixture.
        let halves: Vec<crate::store::AgentReport> = (0..2)
            .map(|i| crate::store::AgentReport {
                raw: vec![RawFile {
                    name: "fio.json".into(),
                    content: serde_json::json!({ "jobs": [doc["jobs"][i].clone()] }).to_string(),
                }],
                ..Default::default()
            })
            .collect();
        let spec: Spec = serde_json::from_str(
            r#"{"kind":"fio","job":{"options":{"rw":"randread","bs":4096,"iodepth":8,"numjobs":1,"size":1048576,"runtime_ms":1000,"ramp_time_ms":0,"direct":true,"ioengine":"libaio","rwmixread":null,"fsync":null}},"args":[],"env":[]}"#,
        )
        .unwrap();
        let merged = aggregate(&spec, &[&halves[0], &halves[1]]);
        assert_eq!(merged, fio::samples_from_json(&json).unwrap(), "the same as fio's two jobs in one run");
    }

    #[test]
    fn failures_are_counted_and_latencies_ranked() {
        let records: Vec<SandboxRecord> = (1..=10)
            .map(|i| if i == 4 { sandbox(i, None, None) } else { sandbox(i, Some(100.0 * i as f64), Some(i as f64)) })
            .collect();
        let samples = density_samples(10, &records);
        let get = |m: &str| samples.iter().find(|s| s.metric == m).unwrap().value;
        assert_eq!((get("sandboxes_ok"), get("sandboxes_failed")), (9.0, 1.0));
        assert_eq!(get("start_latency_max"), 10.0);
        // The nine starts that happened (sandbox 4 never came up): 1 2 3 5 6 7 8 9 10; the
        // nearest rank of the 50th percentile is the 5th.
        assert_eq!(get("start_latency_p50"), 6.0);
        let spec: Spec = serde_json::from_str(
            r#"{"kind":"cpu","threads":1,"max_prime":10000,"events":null,"time_s":10.0,"timeout_s":60}"#,
        )
        .unwrap();
        let s = spread(&spec, &records);
        let get = |m: &str| s.iter().find(|x| x.metric == m).unwrap().value;
        assert_eq!((get("events_per_s_sandbox_min"), get("events_per_s_sandbox_max")), (100.0, 1000.0));
        assert_eq!(get("events_per_s_sandbox_median"), 600.0);
    }
}
