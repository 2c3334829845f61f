//! From a suite to the runs to do: the matrix of cells (env × volume × workload variant), the
//! cells a `--filter` selects, and the order of runs. Runs go in rounds (rep 1 of every cell,
//! then rep 2 …) so that slow drift of the machine spreads over all cells instead of biasing the
//! ones that happened to run last. Within a round, the cells compared with one baseline run back
//! to back as a block, so that a sandbox's run and the baseline's run it is paired with share the
//! machine's moment; the blocks and the cells inside each are shuffled from a seed, so that what
//! one run leaves behind (its teardown, its writeback) does not land on the same cell every
//! round, where no CI could see it.

use std::collections::HashMap;

use crate::store::{BoundRecord, CellRecord, Labels, Order, PlanRecord, Selector};
use crate::suite::Suite;
use figures::stats::Rng;

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

/// One run to do: repetition `rep` of a cell, in block `block` of round `round` (a cell's rep
/// is its round until precision rounds leave it out of some).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    pub cell: usize,
    pub rep: u32,
    pub round: u32,
    pub block: usize,
}

pub struct Plan {
    pub cells: Vec<Cell>,
    /// The cells compared with one baseline (the baseline among them), as indexes into `cells`.
    pub blocks: Vec<Vec<usize>>,
    pub runs: Vec<Slot>,
    /// Baseline cells added because the filter left them out but a selected cell needs them.
    pub added_baselines: Vec<String>,
    /// What the rounds' orders were drawn from.
    pub seed: u64,
    /// Orders the rounds after the first `repeat.min` (adaptive repetition), continuing theirs.
    pub orderer: Orderer,
}

impl Plan {
    /// Expands the suite into cells, keeps those any of `filters` selects (all when none), and
    /// orders the first `repeat.min` runs in rounds, each in the suite's `order` (shuffled from
    /// `seed`); adaptive rounds come later, from what those runs measured.
    pub fn new(suite: &Suite, filters: &[Selector], seed: u64) -> Result<Plan, String> {
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
        let blocks = blocks_of(suite, &cells);
        let mut orderer = Orderer::new(suite.order, seed);
        let runs = (1..=suite.repeat.min).flat_map(|round| orderer.round_slots(&blocks, round, |_| round)).collect();
        Ok(Plan { cells, blocks, runs, added_baselines, seed, orderer })
    }

    /// Bounds that could judge no cell of this plan, each in words that say why and what to write
    /// instead: a gate with a typo must not pass by judging nothing.
    pub fn idle_bounds(&self, suite: &Suite) -> Vec<String> {
        let judged: Vec<&Cell> = self.cells.iter().filter(|c| !suite.baseline.contains(&c.labels)).collect();
        let mut idle = Vec::new();
        for bound in &suite.bounds {
            let selected: Vec<&&Cell> =
                judged.iter().filter(|c| bound.cells.as_ref().is_none_or(|s| s.matches(&c.labels))).collect();
            let named = format!("[[bound]] on \"{}\"", bound.metric);
            if selected.is_empty() {
                let within = bound.cells.as_ref().map_or(String::new(), |s| format!(" with cells = \"{}\"", s.text()));
                let cells: Vec<&str> = judged.iter().map(|c| c.id.as_str()).collect();
                idle.push(format!(
                    "{named}{within} selects no cell but baselines; the cells it can judge: {}",
                    if cells.is_empty() { "none (every cell is a baseline)".into() } else { cells.join(", ") }
                ));
                continue;
            }
            let workload = |c: &Cell| suite.workloads[c.workload].variants[c.variant].spec.workload();
            if !selected.iter().any(|c| crate::workload::records(workload(c), &bound.metric)) {
                let mut known: Vec<String> =
                    selected.iter().flat_map(|c| crate::workload::metrics(workload(c))).collect();
                known.sort();
                known.dedup();
                idle.push(format!(
                    "{named}: no workload of the cells it selects records \"{}\"; they record: {} (and the run's own: {}…)",
                    bound.metric,
                    known.join(", "),
                    crate::workload::RUN_METRIC_FAMILIES.join("…, ")
                ));
            }
        }
        idle
    }

    /// The runs' cells round by round and block by block, as `isobench run --dry-run` shows
    /// them and plan.json keeps them.
    pub fn rounds(&self) -> Vec<Vec<Vec<usize>>> {
        let mut rounds: Vec<Vec<Vec<usize>>> = Vec::new();
        let mut last: Option<(u32, usize)> = None;
        for slot in &self.runs {
            if rounds.len() < slot.round as usize {
                rounds.push(Vec::new());
            }
            let round = &mut rounds[slot.round as usize - 1];
            if last != Some((slot.round, slot.block)) {
                round.push(Vec::new());
            }
            round.last_mut().expect("pushed").push(slot.cell);
            last = Some((slot.round, slot.block));
        }
        rounds
    }

    pub fn record(&self, suite: &Suite) -> PlanRecord {
        /// A cell's $/hour: its environment's, plus each node of a managed cluster it loads.
        fn cost_per_hour(suite: &Suite, c: &Cell) -> Option<f64> {
            let env = suite.envs[c.env].cost_per_hour;
            match (suite.server(c.workload), &suite.workloads[c.workload].variants[c.variant].spec) {
                (Some(crate::server::ServerSpec::Managed(m)), crate::workload::Spec::Cql(cql)) => {
                    match (env, m.cost_per_hour) {
                        (None, None) => None,
                        (env, node) => {
                            Some(env.unwrap_or(0.0) + cql.nodes.unwrap_or(m.nodes) as f64 * node.unwrap_or(0.0))
                        }
                    }
                }
                (Some(crate::server::ServerSpec::Database(db)), spec) if spec.served_load().is_some() => {
                    match (env, db.cost_per_hour) {
                        (None, None) => None,
                        (env, server) => Some(env.unwrap_or(0.0) + server.unwrap_or(0.0)),
                    }
                }
                _ => env,
            }
        }
        /// The nodes of the managed database a CQL cell loads.
        fn served_nodes(suite: &Suite, c: &Cell) -> Option<usize> {
            match (suite.server(c.workload), &suite.workloads[c.workload].variants[c.variant].spec) {
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
                        twin: suite.twins[c.env],
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
            order: suite.order,
            seed: (suite.order == Order::Shuffled).then_some(self.seed),
            precision: suite.precision.clone(),
            rounds: self
                .rounds()
                .iter()
                .map(|round| {
                    round.iter().map(|block| block.iter().map(|c| self.cells[*c].id.clone()).collect()).collect()
                })
                .collect(),
        }
    }
}

/// A seed for a new result set's order: from the clock and the process, as no two runs should
/// share one (`--seed` gives one to replay).
pub fn fresh_seed() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let mixed = now.as_nanos() as u64 ^ (u64::from(std::process::id()) << 32);
    // Small enough to type back as --seed.
    Rng::new(mixed).next_u64() % 1_000_000_000
}

/// Orders each round's cells: as given (`Order::Fixed`) or shuffled. A shuffled round is, of
/// some random orders, the one that least repeats the (cell, cell before it) pairs the rounds
/// before had, so that over the rounds each cell follows the others about equally often rather
/// than, by chance, one of them mostly.
#[derive(Clone, Debug)]
pub struct Orderer {
    order: Order,
    rng: Rng,
    /// How often each cell has followed each other (None: it came first).
    followed: HashMap<(Option<usize>, usize), u32>,
    last: Option<usize>,
}

/// A round's blocks in the order they run, each its index and its cells in the order they run.
pub type RoundOrder = Vec<(usize, Vec<usize>)>;

/// Random orders a shuffled round chooses among.
const CANDIDATES: usize = 64;

impl Orderer {
    pub fn new(order: Order, seed: u64) -> Orderer {
        Orderer { order, rng: Rng::new(seed), followed: HashMap::new(), last: None }
    }

    /// Round `round`'s slots: `blocks` (each a list of cells; an empty one is left out) in the
    /// next order, each cell at repetition `rep(cell)`.
    pub fn round_slots(&mut self, blocks: &[Vec<usize>], round: u32, rep: impl Fn(usize) -> u32) -> Vec<Slot> {
        self.round(blocks)
            .into_iter()
            .flat_map(|(block, cells)| cells.into_iter().map(move |cell| (block, cell)))
            .map(|(block, cell)| Slot { cell, rep: rep(cell), round, block })
            .collect()
    }

    /// The next round's order: each block of cells with its index, the blocks and the cells
    /// inside each in order.
    pub fn round(&mut self, blocks: &[Vec<usize>]) -> RoundOrder {
        let given: RoundOrder = blocks.iter().cloned().enumerate().filter(|(_, cells)| !cells.is_empty()).collect();
        let chosen = match self.order {
            Order::Fixed => given,
            Order::Shuffled => {
                let mut best: Option<(u32, RoundOrder)> = None;
                for _ in 0..CANDIDATES {
                    let mut candidate = given.clone();
                    self.rng.shuffle(&mut candidate);
                    for (_, cells) in candidate.iter_mut() {
                        self.rng.shuffle(cells);
                    }
                    // A pair seen twice costs more to repeat than two seen once: no pair runs away.
                    let flat: Vec<usize> = candidate.iter().flat_map(|(_, cells)| cells.iter().copied()).collect();
                    let repeats = self
                        .pairs(&flat)
                        .map(|pair| 4u32.saturating_pow(self.followed.get(&pair).copied().unwrap_or(0)) - 1)
                        .sum();
                    if best.as_ref().is_none_or(|(fewest, _)| repeats < *fewest) {
                        best = Some((repeats, candidate));
                    }
                }
                best.map(|(_, order)| order).unwrap_or_default()
            }
        };
        let flat: Vec<usize> = chosen.iter().flat_map(|(_, cells)| cells.iter().copied()).collect();
        for pair in self.pairs(&flat).collect::<Vec<_>>() {
            *self.followed.entry(pair).or_default() += 1;
        }
        self.last = flat.last().copied().or(self.last);
        chosen
    }

    /// The cycles of a block run in slices: each of its `sandboxes` once per cycle, in an order
    /// drawn afresh each cycle (as given, for a fixed order).
    pub fn slice_cycles(&mut self, sandboxes: usize, cycles: u32) -> Vec<Vec<usize>> {
        (0..cycles)
            .map(|_| {
                let mut cycle: Vec<usize> = (0..sandboxes).collect();
                if self.order == Order::Shuffled {
                    self.rng.shuffle(&mut cycle);
                }
                cycle
            })
            .collect()
    }

    /// Each cell of `order` with the cell before it (the last round's last for the first).
    fn pairs<'a>(&self, order: &'a [usize]) -> impl Iterator<Item = (Option<usize>, usize)> + 'a {
        let last = self.last;
        order.iter().enumerate().map(move |(i, c)| (if i == 0 { last } else { Some(order[i - 1]) }, *c))
    }
}

/// The cells grouped by the baseline they are compared with, in plan order: a cell with no
/// baseline in the plan is a block of its own.
fn blocks_of(suite: &Suite, cells: &[Cell]) -> Vec<Vec<usize>> {
    let mut blocks: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let key = cells.iter().position(|b| suite.baseline.is_baseline_of(&b.labels, &cell.labels)).unwrap_or(i);
        match blocks.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => blocks.push((key, vec![i])),
        }
    }
    blocks.into_iter().map(|(_, members)| members).collect()
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
                    // A twin of the baseline env runs the cells its original runs.
                    let mut as_selected = labels.clone();
                    if suite.twins[ei] {
                        as_selected.env = suite.baseline.env.clone().unwrap_or_default();
                    }
                    if suite.cells.is_empty() || suite.cells.iter().any(|s| s.matches(&as_selected)) {
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

    /// `n` rounds of one block of `cells` cells.
    fn rounds(order: Order, seed: u64, cells: usize, n: usize) -> Vec<Vec<usize>> {
        let mut orderer = Orderer::new(order, seed);
        let all = vec![(0..cells).collect::<Vec<usize>>()];
        (0..n).map(|_| orderer.round(&all).concat_cells()).collect()
    }

    trait Flat {
        fn concat_cells(self) -> Vec<usize>;
    }

    impl Flat for RoundOrder {
        fn concat_cells(self) -> Vec<usize> {
            self.into_iter().flat_map(|(_, cells)| cells).collect()
        }
    }

    /// A block's cells run back to back; the blocks' order, and the cells' within each, vary
    /// from round to round.
    #[test]
    fn a_blocks_cells_run_together_in_a_shuffled_order() {
        let blocks = vec![vec![0, 1, 2], vec![3, 4]];
        let mut orderer = Orderer::new(Order::Shuffled, 3);
        let rounds: Vec<Vec<Slot>> = (1..=8).map(|r| orderer.round_slots(&blocks, r, |_| r)).collect();
        let mut first_blocks = std::collections::HashSet::new();
        let mut first_cells = std::collections::HashSet::new();
        for (i, round) in rounds.iter().enumerate() {
            assert_eq!(round.len(), 5);
            assert!(round.iter().all(|s| s.round == i as u32 + 1 && s.rep == i as u32 + 1));
            let switches = round.windows(2).filter(|w| w[0].block != w[1].block).count();
            assert_eq!(switches, 1, "round {}: a block is never split: {round:?}", i + 1);
            for slot in round {
                assert!(blocks[slot.block].contains(&slot.cell));
            }
            first_blocks.insert(round[0].block);
            first_cells.insert(round[0].cell);
        }
        assert_eq!(first_blocks.len(), 2, "either block may go first");
        assert!(first_cells.len() >= 3, "the cells inside a block are shuffled too: {first_cells:?}");
        let fixed = Orderer::new(Order::Fixed, 3).round_slots(&blocks, 1, |_| 1);
        assert_eq!(fixed.iter().map(|s| s.cell).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
        let some = Orderer::new(Order::Fixed, 3).round_slots(&[vec![], vec![4, 3]], 9, |c| c as u32);
        assert_eq!(some, [Slot { cell: 4, rep: 4, round: 9, block: 1 }, Slot { cell: 3, rep: 3, round: 9, block: 1 }]);
    }

    #[test]
    fn a_fixed_order_is_the_suites_and_a_shuffled_one_is_the_seeds() {
        assert!(rounds(Order::Fixed, 7, 4, 3).iter().all(|r| *r == [0, 1, 2, 3]));
        let a = rounds(Order::Shuffled, 7, 4, 6);
        assert_eq!(a, rounds(Order::Shuffled, 7, 4, 6), "the same seed replays the same order");
        assert_ne!(a, rounds(Order::Shuffled, 8, 4, 6), "another seed, another order");
        for round in &a {
            let mut sorted = round.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3], "each round runs every cell once");
        }
    }

    /// Over the rounds, no cell mostly follows one other: a carry-over from one cell then lands
    /// on a minority of another's runs, and its median stays its own.
    #[test]
    fn shuffled_rounds_spread_each_cells_predecessors() {
        for seed in 0..200 {
            let (cells, n) = (4, 6);
            let flat: Vec<usize> = rounds(Order::Shuffled, seed, cells, n).concat();
            for victim in 0..cells {
                for culprit in (0..cells).filter(|c| *c != victim) {
                    let after = flat.windows(2).filter(|w| w[0] == culprit && w[1] == victim).count();
                    assert!(after * 2 < n, "seed {seed}: cell {victim} followed {culprit} in {after} of {n} rounds");
                }
            }
        }
    }
}
