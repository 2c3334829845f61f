//! From a suite to the runs to do: the matrix of cells (env × volume × workload variant), the
//! cells a `--filter` selects, and the order of runs. Runs go round-robin across cells (rep 1 of
//! every cell, then rep 2 …) so that slow drift of the machine spreads over all cells instead of
//! biasing the ones that happened to run last.

use crate::store::{BoundRecord, CellRecord, Labels, PlanRecord, Selector};
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
            let unknown = f.unknown_keys(all.iter().map(|c| &c.labels));
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
        /// The nodes of the managed database a CQL cell loads.
        fn served_nodes(suite: &Suite, c: &Cell) -> Option<usize> {
            match (&suite.server, &suite.workloads[c.workload].variants[c.variant].spec) {
                (Some(crate::server::ServerSpec::Managed(m)), crate::workload::Spec::Cql(cql)) => {
                    Some(cql.nodes.unwrap_or(m.nodes))
                }
                _ => None,
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
                        target: suite.workloads[c.workload].target,
                        nodes: served_nodes(suite, c),
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
