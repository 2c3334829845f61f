//! From a suite to the runs to do: the matrix of cells (env × volume × workload variant), the
//! cells a `--filter` selects, and the order of runs. Runs go round-robin across cells (rep 1 of
//! every cell, then rep 2 …) so that slow drift of the machine spreads over all cells instead of
//! biasing the ones that happened to run last.

use serde::{Deserialize, Serialize};

use crate::stats;
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

/// How many runs each cell gets: a fixed number (`min == max`), or adaptive: at least `min`,
/// and more, a round at a time, while the CI of the cell's target metric is wider than
/// `target_ci_pct` (± % of the median), up to `max`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    pub min: u32,
    pub max: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ci_pct: Option<f64>,
    /// The metric whose CI decides; default: the cell's first headline metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<String>,
}

impl Repeat {
    pub fn fixed(n: u32) -> Repeat {
        Repeat { min: n, max: n, target_ci_pct: None, metric: None }
    }

    pub fn is_adaptive(&self) -> bool {
        self.target_ci_pct.is_some() && self.max > self.min
    }

    /// Whether a cell that has had `runs_done` runs, whose successful ones measured `values` of
    /// the target metric, should get another run.
    pub fn needs_another_run(&self, runs_done: u32, values: &[f64]) -> bool {
        if runs_done < self.min {
            return true;
        }
        if runs_done >= self.max || values.is_empty() {
            // At max, or nothing succeeded: more runs of a failing cell would only fail again.
            return false;
        }
        match (self.target_ci_pct, stats::summarize(values)) {
            (Some(target), Some(s)) => s.ci_half_width_pct() > target,
            _ => false,
        }
    }
}

impl std::fmt::Display for Repeat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.target_ci_pct {
            Some(t) if self.is_adaptive() => write!(f, "{}–{} (until the CI is within ±{t}%)", self.min, self.max),
            _ => write!(f, "{}", self.min),
        }
    }
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
            let (key, value) = term.split_once('=').ok_or_else(|| {
                format!("\"{term}\" is not a label selector; write key=pattern, e.g. env=runsc* or rw=randread")
            })?;
            let pattern =
                glob::Pattern::new(value.trim()).map_err(|e| format!("\"{value}\" is not a valid pattern: {e}"))?;
            terms.push((key.trim().to_string(), pattern));
        }
        if terms.is_empty() {
            return Err("the selector is empty; write key=pattern, e.g. env=host".into());
        }
        Ok(Selector { terms, text: text.to_string() })
    }

    pub fn matches(&self, labels: &Labels) -> bool {
        self.terms.iter().all(|(k, p)| labels.get(k).is_some_and(|v| p.matches(&v)))
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
    /// orders the first `repeat.min` runs of each round-robin (adaptive rounds come later, from
    /// what those runs measured).
    pub fn new(suite: &Suite, filters: &[Selector]) -> Result<Plan, String> {
        let all = cells_of(suite);
        if all.is_empty() || !all.iter().any(|c| suite.baseline.contains(&c.labels)) {
            return Err(format!(
                "{}: `cells` leaves out the baseline; keep a selector that matches it, e.g. \"env={}\"",
                suite.file,
                suite.baseline.env.as_deref().unwrap_or("*")
            ));
        }
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
        let selected = |c: &Cell| filters.is_empty() || filters.iter().any(|f| f.matches(&c.labels));

        let mut added_baselines = Vec::new();
        let cells: Vec<Cell> = all
            .iter()
            .filter(|c| {
                if selected(c) {
                    return true;
                }
                // A selected cell is compared with its baseline: keep that too.
                let needed = all.iter().any(|o| selected(o) && suite.baseline.is_baseline_of(&c.labels, &o.labels));
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
        let runs =
            (1..=suite.repeat.min).flat_map(|rep| (0..cells.len()).map(move |cell| Slot { cell, rep })).collect();
        Ok(Plan { cells, runs, added_baselines })
    }

    pub fn record(&self, suite: &Suite) -> PlanRecord {
        /// A cell's $/hour: its environment's, plus each node of a managed cluster it loads.
        fn cost_per_hour(suite: &Suite, c: &Cell) -> Option<f64> {
            let env = suite.envs[c.env].cost_per_hour;
            match (&suite.server, &suite.workloads[c.workload].variants[c.variant].spec) {
                (Some(crate::server::ServerSpec::Managed(m)), crate::workload::Spec::Cql(cql)) => {
                    match (env, m.cost_per_hour) {
                        (None, None) => None,
                        (env, node) => {
                            Some(env.unwrap_or(0.0) + cql.nodes.unwrap_or(m.nodes) as f64 * node.unwrap_or(0.0))
                        }
                    }
                }
                _ => env,
            }
        }
        PlanRecord {
            suite: suite.name.clone(),
            baseline: suite.baseline.clone(),
            repeat: suite.repeat.clone(),
            cells: self
                .cells
                .iter()
                .map(|c| {
                    let workload = suite.workloads[c.workload].variants[c.variant].spec.workload();
                    let env = &suite.envs[c.env];
                    CellRecord {
                        cell: c.id.clone(),
                        labels: c.labels.clone(),
                        headline: suite.workloads[c.workload].headline(c.variant),
                        env_kind: env.kind.clone(),
                        sandbox: env.item.is_sandbox(),
                        workload_setup: workload.describe(),
                        cost_per_hour: cost_per_hour(suite, c),
                        density: suite.workloads[c.workload].variants[c.variant].density,
                    }
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
                    if suite.cells.is_empty() || suite.cells.iter().any(|s| s.matches(&labels)) {
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
    }
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Rng;

    /// Drives the adaptive rule the way the runner does, with a synthetic measurement.
    fn runs_until_done(repeat: &Repeat, mut measure: impl FnMut() -> f64) -> u32 {
        let mut values = Vec::new();
        while repeat.needs_another_run(values.len() as u32, &values) {
            values.push(measure());
        }
        values.len() as u32
    }

    #[test]
    fn adaptive_repetition_stops_early_on_quiet_cells_and_runs_to_max_on_noisy_ones() {
        let repeat = Repeat { min: 3, max: 15, target_ci_pct: Some(2.0), metric: None };
        let mut rng = Rng::new(7);
        let quiet = runs_until_done(&repeat, || 50_000.0 * (1.0 + 0.002 * rng.normal()));
        assert_eq!(quiet, 3, "a cell with 0.2 % noise meets ±2 % at the minimum");
        let noisy = runs_until_done(&repeat, || 50_000.0 * (1.0 + 0.30 * rng.normal()));
        assert_eq!(noisy, 15, "a cell with 30 % noise runs to the maximum");
        let fixed = Repeat::fixed(4);
        assert_eq!(runs_until_done(&fixed, || 1.0), 4);
        assert!(!repeat.needs_another_run(5, &[]), "a cell with no successful run gets no more");
    }
}
