//! A result set as the history keeps it: its runs (by a digest of each record, so that the same
//! run imported twice, or again inside a `merge`d set, is known), and a point per cell and metric
//! with the figures a series needs and the facts that say what ran.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::Recorded;
use super::db::{Db, Value};
use crate::compare;
use crate::store::{ResultSet, RunRecord, Status};

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Entry {
    /// A digest of its runs' ids.
    pub id: String,
    pub suite: String,
    /// Where the result set was when it was recorded.
    pub path: String,
    /// When its first run started.
    pub time: String,
    /// The machine's facts (host.json).
    pub facts: BTreeMap<String, String>,
    pub runs: Vec<RunKey>,
    pub points: Vec<Point>,
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct RunKey {
    pub id: String,
    pub cell: String,
    pub rep: u32,
    pub started: String,
}

/// One metric of one cell in one result set.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Point {
    pub cell: String,
    pub metric: String,
    pub unit: String,
    /// env, volume, workload and the workload's parameters: what `--filter` selects it by.
    pub labels: BTreeMap<String, String>,
    /// One of the cell's headline metrics (what the gate judges).
    pub headline: bool,
    pub values: Vec<f64>,
    pub median: f64,
    pub ci: (f64, f64),
    /// Against the same result set's baseline, signed so that positive is worse.
    pub overhead: Option<f64>,
    pub overhead_ci: Option<(f64, f64)>,
    /// The baseline cell's id ("" for a baseline cell).
    pub baseline: String,
    /// The facts that held for every successful run of the cell (`host.` ones are the machine's).
    pub facts: BTreeMap<String, String>,
    /// Filled when read back from the history: its result set's id, suite, path and time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub result_set: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub suite: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub time: String,
}

/// Facts that differ from one run to the next whatever ran (namespaces, boot, the host's name,
/// the first line of dmesg) and the run's own figures that its setup says (how long gVisor's
/// clock took, by how much the CPU's samples were scaled, how many of the JVM's were read):
/// never a component, and not worth keeping. A figure kept as a fact, when its presence follows
/// a change (the samples scaled in every result set on one platform, in none on the other),
/// would be named as a second component that changed.
pub fn is_volatile(fact: &str) -> bool {
    let name = fact.strip_prefix("host.").unwrap_or(fact);
    let per_run = ["ns.", "pid1.", "boot_id", "dmesg.", "hostname", "loader.nodes", "net.address", "server.addresses"];
    let figures = ["agent.clock_ready_after", "sys.cpu_parts_scaled", "sys.cpu_java_samples"];
    // A database pod's name, machine and claim are the run's; its runtime class and image are not.
    let per_pod = [".name", ".node", ".volume_node", ".pv", ".claim"];
    per_run.iter().any(|p| name.starts_with(p))
        || figures.contains(&name)
        || name == "k8s.statefulset"
        || (name.starts_with("db.pod") && per_pod.iter().any(|s| name.ends_with(s)))
        || [".path", "_path", ".dir", ".time", ".started", ".pid", ".token", ".uid"].iter().any(|s| name.ends_with(s))
}

fn digest(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes).as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// A run's identity: its record without what a merge changes (its number, its raw files'
/// paths, where it came from).
fn run_id(run: &RunRecord) -> Result<String> {
    let mut bare = run.clone();
    bare.rep = 0;
    bare.raw.clear();
    bare.origin = None;
    Ok(digest(&serde_json::to_vec(&bare)?))
}

/// The facts every one of `runs` had alike.
fn common_facts<'a>(runs: impl Iterator<Item = &'a RunRecord>) -> BTreeMap<String, String> {
    let mut common: Option<BTreeMap<String, String>> = None;
    for run in runs {
        let facts: BTreeMap<String, String> = run
            .setup
            .iter()
            .chain(&run.facts)
            .filter(|(k, _)| !is_volatile(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        common = Some(match common {
            None => facts,
            Some(c) => c.into_iter().filter(|(k, v)| facts.get(k) == Some(v)).collect(),
        });
    }
    common.unwrap_or_default()
}

impl Entry {
    pub fn read(dir: &Path) -> Result<Entry> {
        let set = ResultSet::open(dir)?;
        let plan = set.plan()?;
        let runs = set.runs()?;
        let host: BTreeMap<String, String> = set.read_json("host.json").unwrap_or_default();
        let host: BTreeMap<String, String> = host.into_iter().filter(|(k, _)| !is_volatile(k)).collect();
        let mut keys = runs
            .iter()
            .map(|r| Ok(RunKey { id: run_id(r)?, cell: r.cell.clone(), rep: r.rep, started: r.started.clone() }))
            .collect::<Result<Vec<_>>>()?;
        keys.sort_by(|a, b| a.id.cmp(&b.id));
        let id = digest(keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>().join(",").as_bytes());
        let time = runs.iter().map(|r| r.started.as_str()).filter(|s| !s.is_empty()).min();
        let analysis = compare::analyze(&plan, &runs);
        let mut points = Vec::new();
        for cell in analysis.cells.iter().filter(|c| c.runs_ok > 0) {
            let ok = runs.iter().filter(|r| r.cell == cell.record.cell && r.status == Status::Ok);
            let mut facts = common_facts(ok);
            facts.extend(host.iter().map(|(k, v)| (format!("host.{k}"), v.clone())));
            let labels = &cell.record.labels;
            let mut label_map: BTreeMap<String, String> = labels.params.iter().cloned().collect();
            label_map.insert("env".into(), labels.env.clone());
            label_map.insert("volume".into(), labels.volume.clone());
            label_map.insert("workload".into(), labels.workload.clone());
            let baseline = cell.baseline.filter(|_| !cell.is_baseline).map(|b| analysis.cells[b].record.cell.clone());
            for m in &cell.metrics {
                points.push(Point {
                    cell: cell.record.cell.clone(),
                    metric: m.metric.clone(),
                    unit: m.unit.clone(),
                    labels: label_map.clone(),
                    headline: cell.record.headline.contains(&m.metric),
                    values: m.values.clone(),
                    median: m.summary.median,
                    // A point without a CI (one run) is its own value, as its spread is unknown.
                    ci: m.summary.ci.unwrap_or((m.summary.median, m.summary.median)),
                    overhead: m.vs_baseline.as_ref().map(|d| d.overhead_pct),
                    overhead_ci: m.vs_baseline.as_ref().and_then(|d| d.overhead_ci),
                    baseline: baseline.clone().unwrap_or_default(),
                    facts: facts.clone(),
                    result_set: String::new(),
                    suite: String::new(),
                    path: String::new(),
                    time: String::new(),
                });
            }
        }
        let path = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        Ok(Entry {
            id,
            suite: plan.suite,
            path: path.display().to_string(),
            time: time.map(str::to_string).unwrap_or_else(crate::store::utc_now),
            facts: host,
            runs: keys,
            points,
        })
    }

    /// Its rows, inside the caller's transaction. Nothing is written when every run is there.
    pub fn insert(&self, db: &mut dyn Db) -> Result<Recorded> {
        let mut new_runs = 0;
        for run in &self.runs {
            new_runs += db.execute(
                "INSERT INTO runs (id, result_set, cell, rep, started) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
                &[run.id.as_str().into(), self.id.as_str().into(), run.cell.as_str().into(), (run.rep as i64).into(), run.started.as_str().into()],
            )?;
        }
        if new_runs == 0 && !self.runs.is_empty() {
            return Ok(Recorded::AlreadyThere);
        }
        let added = db.execute(
            "INSERT INTO result_sets (id, suite, path, time, facts, recorded) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
            &[
                self.id.as_str().into(),
                self.suite.as_str().into(),
                self.path.as_str().into(),
                self.time.as_str().into(),
                serde_json::to_string(&self.facts)?.into(),
                crate::store::utc_now().into(),
            ],
        )?;
        if added == 0 {
            return Ok(Recorded::AlreadyThere);
        }
        for (i, p) in self.points.iter().enumerate() {
            if i == self.points.len() / 2 {
                pause_for_a_test();
            }
            db.execute(
                "INSERT INTO points (result_set, cell, metric, unit, labels, headline, vals, median, lo, hi, overhead, overhead_lo, overhead_hi, baseline, facts)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT DO NOTHING",
                &[
                    self.id.as_str().into(),
                    p.cell.as_str().into(),
                    p.metric.as_str().into(),
                    p.unit.as_str().into(),
                    serde_json::to_string(&p.labels)?.into(),
                    (p.headline as i64).into(),
                    serde_json::to_string(&p.values)?.into(),
                    p.median.into(),
                    p.ci.0.into(),
                    p.ci.1.into(),
                    p.overhead.into(),
                    p.overhead_ci.map(|c| c.0).into(),
                    p.overhead_ci.map(|c| c.1).into(),
                    p.baseline.as_str().into(),
                    serde_json::to_string(&p.facts)?.into(),
                ],
            )?;
        }
        Ok(Recorded::Added { points: self.points.len() })
    }
}

/// The variable a test sets to stop a write halfway through its transaction, to kill it there.
pub const PAUSE_VAR: &str = "ISOBENCH_HISTORY_PAUSE_MID_WRITE";

fn pause_for_a_test() {
    if let Some(secs) = std::env::var(PAUSE_VAR).ok().and_then(|s| s.parse::<u64>().ok()) {
        eprintln!("isobench: history write paused halfway ({PAUSE_VAR})");
        std::thread::sleep(std::time::Duration::from_secs(secs));
    }
}

const POINT_COLUMNS: &str = "p.cell, p.metric, p.unit, p.labels, p.headline, p.vals, p.median, p.lo, p.hi, p.overhead, p.overhead_lo, p.overhead_hi, p.baseline, p.facts, r.id, r.suite, r.path, r.time";

fn point_of(row: &[Value]) -> Result<Point> {
    let json = |i: usize| row[i].text().to_string();
    let pair = |a: usize, b: usize| Some((row[a].real()?, row[b].real()?));
    Ok(Point {
        cell: json(0),
        metric: json(1),
        unit: json(2),
        labels: serde_json::from_str(row[3].text()).context("a point's labels")?,
        headline: row[4].int() != 0,
        values: serde_json::from_str(row[5].text()).context("a point's values")?,
        median: row[6].real().unwrap_or(f64::NAN),
        ci: pair(7, 8).unwrap_or((f64::NAN, f64::NAN)),
        overhead: row[9].real(),
        overhead_ci: pair(10, 11),
        baseline: json(12),
        facts: serde_json::from_str(row[13].text()).context("a point's facts")?,
        result_set: json(14),
        suite: json(15),
        path: json(16),
        time: json(17),
    })
}

/// Every point, oldest result set first.
pub fn select_points(db: &mut dyn Db) -> Result<Vec<Point>> {
    let sql = format!(
        "SELECT {POINT_COLUMNS} FROM points p JOIN result_sets r ON r.id = p.result_set ORDER BY r.time, r.id, p.cell, p.metric"
    );
    db.query(&sql, &[])?.iter().map(|row| point_of(row)).collect()
}

/// Every result set with its runs and points, oldest first: what an export writes.
pub fn select_entries(db: &mut dyn Db) -> Result<Vec<Entry>> {
    let mut entries: Vec<Entry> = db
        .query("SELECT id, suite, path, time, facts FROM result_sets ORDER BY time, id", &[])?
        .iter()
        .map(|r| {
            Ok(Entry {
                id: r[0].text().into(),
                suite: r[1].text().into(),
                path: r[2].text().into(),
                time: r[3].text().into(),
                facts: serde_json::from_str(r[4].text())?,
                runs: Vec::new(),
                points: Vec::new(),
            })
        })
        .collect::<Result<_>>()?;
    let index: BTreeMap<String, usize> = entries.iter().enumerate().map(|(i, e)| (e.id.clone(), i)).collect();
    for r in db.query("SELECT id, result_set, cell, rep, started FROM runs ORDER BY id", &[])? {
        if let Some(&i) = index.get(r[1].text()) {
            entries[i].runs.push(RunKey {
                id: r[0].text().into(),
                cell: r[2].text().into(),
                rep: r[3].int() as u32,
                started: r[4].text().into(),
            });
        }
    }
    for mut point in select_points(db)? {
        if let Some(&i) = index.get(&point.result_set) {
            point.result_set.clear();
            point.suite.clear();
            point.path.clear();
            point.time.clear();
            entries[i].points.push(point);
        }
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::is_volatile;

    #[test]
    fn facts_of_one_run_are_not_components() {
        let per_run = ["ns.net", "host.boot_id", "db.pod2.node", "db.pod1.pv", "server.addresses", "runtime.path"];
        let figures = ["sys.cpu_parts_scaled", "agent.clock_ready_after"];
        for fact in per_run.into_iter().chain(figures) {
            assert!(is_volatile(fact), "{fact}");
        }
        for fact in [
            "runtime.version",
            "runtime.platform",
            "runtime.name",
            "db.pod1.image_id",
            "host.kernel.release",
            "sys.cpu_parts_by",
        ] {
            assert!(!is_volatile(fact), "{fact}");
        }
    }
}
