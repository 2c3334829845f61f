//! From a suite to the runs to do: the matrix of cells (env × volume × workload variant), the
//! cells a `--filter` selects, and the order of runs. Runs go round-robin across cells (rep 1 of
//! every cell, then rep 2 …) so that slow drift of the machine spreads over all cells instead of
//! biasing the ones that happened to run last.

use crate::store::{BoundRecord, CellRecord, Labels, PlanRecord};
use crate::suite::Suite;

/// One cell of the matrix, with indexes into the suite.
#[derive(Clone, Debug)]
pub struct Cell {
    pub id: String,
    pub labels: Labels,
    pub env: usize,
    pub volume: usize,
    pub workload: usize,
    pub variant: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub cell: usize,
    pub rep: u32,
}

pub struct Plan {
    pub cells: Vec<Cell>,
    pub runs: Vec<Slot>,
    /// Baseline cells added because the filter left them out but a selected cell needs them.
    pub added_baselines: Vec<String>,
}

/// Selects cells by their labels: `env=runsc*,rw=randread` (every term must match; a term's
/// value is a glob). Keys: env, volume, workload, cell, or a workload parameter.
#[derive(Clone, Debug)]
pub struct Selector {
    terms: Vec<(String, glob::Pattern)>,
    text: String,
}

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let (key, value) = term
                .split_once('=')
                .ok_or_else(|| format!("\"{term}\" is not a label selector; write key=pattern, e.g. env=runsc* or rw=randread"))?;
            let pattern = glob::Pattern::new(value.trim())
                .map_err(|e| format!("\"{value}\" is not a valid pattern: {e}"))?;
            terms.push((key.trim().to_string(), pattern));
        }
        if terms.is_empty() {
            return Err("the selector is empty; write key=pattern, e.g. env=host".into());
        }
        Ok(Selector {
            terms,
            text: text.to_string(),
        })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.terms
            .iter()
            .all(|(k, p)| labels.get(k).is_some_and(|v| p.matches(&v)))
    }

    /// Keys that no cell has (a typo in a filter should not silently select nothing).
    pub fn unknown_keys(&self, cells: &[Cell]) -> Vec<String> {
        self.terms
            .iter()
            .filter(|(k, _)| !cells.iter().any(|c| c.labels.get(k).is_some()))
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

impl Plan {
    /// Expands the suite into cells, keeps those any of `filters` selects (all when none), and
    /// orders `repeat` runs of each round-robin.
    pub fn new(suite: &Suite, filters: &[Selector]) -> Result<Plan, String> {
        let all = cells_of(suite);
        for f in filters {
            let unknown = f.unknown_keys(&all);
            if !unknown.is_empty() {
                return Err(format!(
                    "--filter {}: no cell has a label named {}; labels are env, volume, workload, cell and the workload parameters",
                    f.text(),
                    unknown.join(", ")
                ));
            }
        }
        let selected =
            |c: &Cell| filters.is_empty() || filters.iter().any(|f| f.matches(&c.labels));
        let is_baseline = |c: &Cell| {
            c.labels.env == suite.baseline.env && c.labels.volume == suite.baseline.volume
        };
        let mut added_baselines = Vec::new();
        let cells: Vec<Cell> = all
            .iter()
            .filter(|c| {
                if selected(c) {
                    return true;
                }
                // A selected cell is compared with its baseline: keep that too.
                let needed = is_baseline(c)
                    && all
                        .iter()
                        .any(|o| selected(o) && o.workload == c.workload && o.variant == c.variant);
                if needed {
                    added_baselines.push(c.id.clone());
                }
                needed
            })
            .cloned()
            .collect();
        if cells.is_empty() {
            let texts: Vec<&str> = filters.iter().map(Selector::text).collect();
            return Err(format!(
                "--filter {} selects no cell; `isobench run --dry-run` lists them",
                texts.join(" --filter ")
            ));
        }
        let runs = (1..=suite.repeat)
            .flat_map(|rep| (0..cells.len()).map(move |cell| Slot { cell, rep }))
            .collect();
        Ok(Plan {
            cells,
            runs,
            added_baselines,
        })
    }

    pub fn record(&self, suite: &Suite) -> PlanRecord {
        PlanRecord {
            suite: suite.name.clone(),
            baseline_env: suite.baseline.env.clone(),
            baseline_volume: suite.baseline.volume.clone(),
            cells: self
                .cells
                .iter()
                .map(|c| CellRecord {
                    cell: c.id.clone(),
                    labels: c.labels.clone(),
                    headline: suite.workloads[c.workload].variants[c.variant]
                        .spec
                        .workload()
                        .headline()
                        .iter()
                        .map(|s| s.to_string())
                        .collect(),
                })
                .collect(),
            bounds: suite
                .bounds
                .iter()
                .map(|b| BoundRecord {
                    metric: b.metric.clone(),
                    max_overhead_pct: b.max_overhead_pct,
                    cells: b.cells.as_ref().map(|s| s.text().to_string()),
                })
                .collect(),
        }
    }
}

/// Every cell, ordered so that one workload setting is measured across all environments and
/// volumes close together in time.
fn cells_of(suite: &Suite) -> Vec<Cell> {
    let mut cells = Vec::new();
    for (wi, w) in suite.workloads.iter().enumerate() {
        for (vi, variant) in w.variants.iter().enumerate() {
            for (ei, e) in suite.envs.iter().enumerate() {
                for (oi, v) in suite.volumes.iter().enumerate() {
                    let labels = Labels {
                        env: e.name.clone(),
                        volume: v.name.clone(),
                        workload: w.name.clone(),
                        params: variant.params.clone(),
                    };
                    cells.push(Cell {
                        id: labels.cell_id(),
                        labels,
                        env: ei,
                        volume: oi,
                        workload: wi,
                        variant: vi,
                    });
                }
            }
        }
    }
    cells
}
