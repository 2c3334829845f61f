//! Every cell against its baseline: the cell with the suite's baseline environment and volume
//! and the same workload setting. Overheads are signed so that positive always means worse:
//! fewer operations per second, or more microseconds.

use std::collections::BTreeMap;

use crate::plan::Selector;
use crate::stats::{self, Summary};
use crate::store::{BoundRecord, CellRecord, PlanRecord, RunRecord, Status};

pub struct Analysis {
    pub plan: PlanRecord,
    pub cells: Vec<CellResult>,
}

pub struct CellResult {
    pub record: CellRecord,
    pub is_baseline: bool,
    /// Index of the baseline cell in `Analysis::cells`.
    pub baseline: Option<usize>,
    pub runs_ok: usize,
    pub runs_failed: usize,
    /// Why the cell could not run here, when it was skipped.
    pub skipped: Option<String>,
    /// Distinct failure messages.
    pub errors: Vec<String>,
    /// Distinct notes from the runs.
    pub notes: Vec<String>,
    pub metrics: Vec<MetricResult>,
}

pub struct MetricResult {
    pub metric: String,
    pub unit: String,
    pub values: Vec<f64>,
    pub summary: Summary,
    pub vs_baseline: Option<Diff>,
}

#[derive(Clone, Debug)]
pub struct Diff {
    pub baseline_median: f64,
    /// (cell − baseline) / baseline, in percent.
    pub pct: f64,
    /// The same difference signed so that positive is worse.
    pub overhead_pct: f64,
}

/// Whether more of this unit is better (rates) or worse (latencies, CPU use).
pub fn higher_is_better(unit: &str) -> bool {
    matches!(
        unit,
        "op/s" | "B/s" | "events/s" | "bit/s" | "pk/s" | "row/s"
    )
}

pub fn overhead_pct(pct: f64, unit: &str) -> f64 {
    if higher_is_better(unit) { -pct } else { pct }
}

impl CellResult {
    pub fn metric(&self, name: &str) -> Option<&MetricResult> {
        self.metrics.iter().find(|m| m.metric == name)
    }

    pub fn name(&self) -> String {
        format!("{}/{}", self.record.labels.env, self.record.labels.volume)
    }
}

pub fn analyze(plan: &PlanRecord, runs: &[RunRecord]) -> Analysis {
    let mut by_cell: BTreeMap<&str, Vec<&RunRecord>> = BTreeMap::new();
    for r in runs {
        by_cell.entry(r.cell.as_str()).or_default().push(r);
    }
    let mut cells: Vec<CellResult> = plan
        .cells
        .iter()
        .map(|record| {
            let runs = by_cell
                .get(record.cell.as_str())
                .cloned()
                .unwrap_or_default();
            cell_result(plan, record, &runs)
        })
        .collect();
    for i in 0..cells.len() {
        let labels = &cells[i].record.labels;
        cells[i].baseline = cells.iter().position(|b| {
            b.is_baseline
                && b.record.labels.workload == labels.workload
                && b.record.labels.params == labels.params
        });
    }
    for i in 0..cells.len() {
        let Some(b) = cells[i].baseline.filter(|b| *b != i) else {
            continue;
        };
        let diffs: Vec<Option<Diff>> = cells[i]
            .metrics
            .iter()
            .map(|m| {
                let base = cells[b].metric(&m.metric)?;
                let baseline_median = base.summary.median;
                if baseline_median == 0.0 || !baseline_median.is_finite() {
                    return None;
                }
                let pct = (m.summary.median - baseline_median) / baseline_median * 100.0;
                Some(Diff {
                    baseline_median,
                    pct,
                    overhead_pct: overhead_pct(pct, &m.unit),
                })
            })
            .collect();
        for (m, d) in cells[i].metrics.iter_mut().zip(diffs) {
            m.vs_baseline = d;
        }
    }
    Analysis {
        plan: plan.clone(),
        cells,
    }
}

fn cell_result(plan: &PlanRecord, record: &CellRecord, runs: &[&RunRecord]) -> CellResult {
    let mut metrics: Vec<(String, String, Vec<f64>)> = Vec::new();
    let mut errors = Vec::new();
    let mut notes = Vec::new();
    let mut skipped = None;
    let (mut ok, mut failed) = (0, 0);
    for run in runs {
        for n in &run.notes {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
        match run.status {
            Status::Ok => {
                ok += 1;
                for s in &run.samples {
                    match metrics.iter_mut().find(|(m, _, _)| *m == s.metric) {
                        Some((_, _, values)) => values.push(s.value),
                        None => metrics.push((s.metric.clone(), s.unit.clone(), vec![s.value])),
                    }
                }
            }
            Status::Failed => {
                failed += 1;
                if let Some(e) = &run.error
                    && !errors.contains(e)
                {
                    errors.push(e.clone());
                }
            }
            Status::Skipped => skipped = run.error.clone().or(Some("skipped".into())),
        }
    }
    CellResult {
        is_baseline: record.labels.env == plan.baseline_env
            && record.labels.volume == plan.baseline_volume,
        record: record.clone(),
        baseline: None,
        runs_ok: ok,
        runs_failed: failed,
        skipped,
        errors,
        notes,
        metrics: metrics
            .into_iter()
            .filter_map(|(metric, unit, values)| {
                let summary = stats::summarize(&values)?;
                Some(MetricResult {
                    metric,
                    unit,
                    values,
                    summary,
                    vs_baseline: None,
                })
            })
            .collect(),
    }
}

/// One bound applied to one cell.
pub struct BoundCheck {
    pub bound: BoundRecord,
    pub cell: String,
    pub overhead_pct: f64,
    pub passed: bool,
}

/// Applies every bound to every non-baseline cell it selects that has the metric.
pub fn check_bounds(analysis: &Analysis) -> Vec<BoundCheck> {
    let mut checks = Vec::new();
    for bound in &analysis.plan.bounds {
        let selector = bound.cells.as_deref().and_then(|t| Selector::parse(t).ok());
        for cell in analysis.cells.iter().filter(|c| !c.is_baseline) {
            if selector
                .as_ref()
                .is_some_and(|s| !s.matches(&cell.record.labels))
            {
                continue;
            }
            let Some(diff) = cell
                .metric(&bound.metric)
                .and_then(|m| m.vs_baseline.as_ref())
            else {
                continue;
            };
            checks.push(BoundCheck {
                bound: bound.clone(),
                cell: cell.record.cell.clone(),
                overhead_pct: diff.overhead_pct,
                passed: diff.overhead_pct <= bound.max_overhead_pct,
            });
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Labels, Sample};

    fn labels(env: &str) -> Labels {
        Labels {
            env: env.into(),
            volume: "v".into(),
            workload: "fio".into(),
            params: vec![("rw".into(), "read".into())],
        }
    }

    fn run(env: &str, rep: u32, iops: f64, lat: f64) -> RunRecord {
        let labels = labels(env);
        RunRecord {
            cell: labels.cell_id(),
            labels,
            rep,
            status: Status::Ok,
            error: None,
            started: String::new(),
            ended: String::new(),
            seconds: 1.0,
            samples: vec![
                Sample::new("iops", iops, "op/s"),
                Sample::new("read_clat_mean", lat, "us"),
            ],
            facts: Default::default(),
            setup: Default::default(),
            notes: vec![],
            raw: vec![],
            origin: None,
        }
    }

    fn plan(bound: f64) -> PlanRecord {
        PlanRecord {
            suite: "t".into(),
            baseline_env: "host".into(),
            baseline_volume: "v".into(),
            cells: ["host", "runc"]
                .iter()
                .map(|e| CellRecord {
                    cell: labels(e).cell_id(),
                    labels: labels(e),
                    headline: vec!["iops".into()],
                })
                .collect(),
            bounds: vec![BoundRecord {
                metric: "iops".into(),
                max_overhead_pct: bound,
                cells: None,
            }],
        }
    }

    #[test]
    fn overhead_is_positive_when_worse_for_both_polarities() {
        let runs = vec![
            run("host", 1, 100.0, 10.0),
            run("host", 2, 100.0, 10.0),
            run("runc", 1, 80.0, 12.0),
            run("runc", 2, 80.0, 12.0),
        ];
        let a = analyze(&plan(10.0), &runs);
        let runc = &a.cells[1];
        let iops = runc.metric("iops").unwrap().vs_baseline.as_ref().unwrap();
        assert!((iops.pct + 20.0).abs() < 1e-9 && (iops.overhead_pct - 20.0).abs() < 1e-9);
        let lat = runc
            .metric("read_clat_mean")
            .unwrap()
            .vs_baseline
            .as_ref()
            .unwrap();
        assert!((lat.pct - 20.0).abs() < 1e-9 && (lat.overhead_pct - 20.0).abs() < 1e-9);
        assert!(
            a.cells[0].metric("iops").unwrap().vs_baseline.is_none(),
            "the baseline is not compared with itself"
        );
        let checks = check_bounds(&a);
        assert_eq!(checks.len(), 1);
        assert!(!checks[0].passed);
        assert!(check_bounds(&analyze(&plan(25.0), &runs))[0].passed);
    }
}
