//! Whether a cell's figures carry what the run before it left behind (its processes' tail, its
//! writeback, its caches). The runs' start times give each run the one before it; two kinds of
//! evidence name that cell:
//! - runs that began on a machine that had not settled within the settle's limits, mostly right
//!   after one cell (in any order: under a fixed one the same cell precedes every round);
//! - a cell whose figures differ by the cell run before it, beyond what its runs relabelled at
//!   random give: a permutation test on the predecessor as a factor (with a shuffled order,
//!   where each cell follows several others).

use std::collections::BTreeMap;

use super::Warning;
use crate::store::{RunRecord, Status, UNSETTLED_SETUP};
use figures::stats::{self, Rng};

/// A permutation p-value at or below this names a predecessor (the cells of a suite are many
/// tests at once: a loose threshold would name one by chance in every large suite)…
const SIGNIFICANT: f64 = 0.01;
/// … when its runs' median also differs from the others' by at least this much.
const MIN_EFFECT: f64 = 0.05;
const PERMUTATIONS: usize = 4000;

/// Each run with the cell of the run that began just before it in the same result set: None for
/// the first, and where the two began within the same recorded instant (result sets older than
/// millisecond times), whose order is not known.
pub fn predecessors(runs: &[RunRecord]) -> Vec<(&RunRecord, Option<&str>)> {
    let mut ran: Vec<&RunRecord> =
        runs.iter().filter(|r| r.status != Status::Skipped && !r.started.is_empty()).collect();
    ran.sort_by(|a, b| a.started.cmp(&b.started));
    (0..ran.len())
        .map(|i| {
            let before = i.checked_sub(1).map(|j| ran[j]);
            let known = before.filter(|b| b.started != ran[i].started && b.origin == ran[i].origin);
            (ran[i], known.map(|b| b.cell.as_str()))
        })
        .collect()
}

/// The carry-over warnings of a result set's runs; `headline` gives each cell's metric to test.
pub fn warnings(runs: &[RunRecord], headline: &dyn Fn(&str) -> Option<String>) -> Vec<Warning> {
    let pairs = predecessors(runs);
    let mut out = unsettled_after(&pairs);
    let mut cells: Vec<&str> = pairs.iter().map(|(r, _)| r.cell.as_str()).collect();
    cells.sort_unstable();
    cells.dedup();
    for cell in cells {
        let Some(metric) = headline(cell) else { continue };
        let runs: Vec<(f64, &str)> = pairs
            .iter()
            .filter(|(r, _)| r.cell == cell && r.status == Status::Ok)
            .filter_map(|(r, before)| {
                let value = r.samples.iter().find(|s| s.metric == metric)?.value;
                Some((value, before.unwrap_or("(none: the first run)")))
            })
            .collect();
        if let Some(message) = depends_on_predecessor(&runs, &metric) {
            out.push(Warning { cell: cell.to_string(), cause: "carry-over", message });
        }
    }
    out
}

/// Cells whose runs most often began on an unsettled machine right after one other cell, where
/// the runs after the others did not: a warning on each run's cell, naming that one.
fn unsettled_after(pairs: &[(&RunRecord, Option<&str>)]) -> Vec<Warning> {
    // Per cell run before: (runs after it, of which unsettled).
    let mut after: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (run, before) in pairs {
        if let Some(before) = before {
            let entry = after.entry(before).or_default();
            entry.0 += 1;
            entry.1 += usize::from(run.setup.contains_key(UNSETTLED_SETUP));
        }
    }
    let total = after.values().fold((0, 0), |(n, u), (a, b)| (n + a, u + b));
    let culprits: Vec<&str> = after
        .iter()
        .filter(|(_, (n, unsettled))| {
            let (others_n, others_unsettled) = (total.0 - n, total.1 - unsettled);
            let rate = *unsettled as f64 / *n as f64;
            let others_rate = if others_n == 0 { 0.0 } else { others_unsettled as f64 / others_n as f64 };
            *unsettled >= 2 && rate > 0.5 && others_rate < rate / 2.0
        })
        .map(|(cell, _)| *cell)
        .collect();
    let mut out: Vec<Warning> = Vec::new();
    for culprit in culprits {
        let mut victims: BTreeMap<&str, (usize, usize, &str)> = BTreeMap::new();
        for (run, _) in pairs.iter().filter(|(_, b)| *b == Some(culprit)) {
            let entry = victims.entry(run.cell.as_str()).or_insert((0, 0, ""));
            entry.0 += 1;
            if let Some(what) = run.setup.get(UNSETTLED_SETUP) {
                entry.1 += 1;
                entry.2 = what;
            }
        }
        let (n, unsettled) = after[culprit];
        for (victim, (_, hit, what)) in victims.into_iter().filter(|(_, (_, hit, _))| *hit > 0) {
            out.push(Warning {
                cell: victim.to_string(),
                cause: "carry-over",
                message: format!(
                    "{hit} of its runs began right after {culprit} on a machine that had not settled ({what}); {unsettled} of the {n} runs after {culprit} did, against {} of the {} after other cells: its figures may carry what {culprit} leaves behind",
                    total.1 - unsettled,
                    total.0 - n
                ),
            });
        }
    }
    out
}

/// Whether the cell's values group by the cell run before each beyond chance: the between-group
/// sum of squares of their logarithms against PERMUTATIONS random relabellings. Names the
/// predecessor whose runs differ most from the others'.
fn depends_on_predecessor(runs: &[(f64, &str)], metric: &str) -> Option<String> {
    if runs.len() < 4 || runs.iter().any(|(v, _)| v.is_nan() || *v <= 0.0) {
        return None;
    }
    let mut names: Vec<&str> = runs.iter().map(|(_, p)| *p).collect();
    names.sort_unstable();
    names.dedup();
    let groups: Vec<usize> = runs.iter().map(|(_, p)| names.iter().position(|n| n == p).expect("listed")).collect();
    if names.len() < 2 || names.len() == runs.len() {
        return None;
    }
    let logs: Vec<f64> = runs.iter().map(|(v, _)| v.ln()).collect();
    let observed = between_groups(&logs, &groups, names.len());
    let mut rng = Rng::seeded(&logs);
    let mut shuffled = groups.clone();
    let at_least = (0..PERMUTATIONS)
        .filter(|_| {
            rng.shuffle(&mut shuffled);
            between_groups(&logs, &shuffled, names.len()) >= observed - 1e-12
        })
        .count();
    let p = (1 + at_least) as f64 / (1 + PERMUTATIONS) as f64;
    if p > SIGNIFICANT {
        return None;
    }
    let values = |inside: bool, g: usize| -> Vec<f64> {
        runs.iter().zip(&groups).filter(|(_, k)| (**k == g) == inside).map(|((v, _), _)| *v).collect()
    };
    // The predecessor that adds most to the groups' spread: its runs' share of it.
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let weight = |g: usize| {
        let mine: Vec<f64> = logs.iter().zip(&groups).filter(|(_, k)| **k == g).map(|(v, _)| *v).collect();
        mine.len() as f64 * (mine.iter().sum::<f64>() / mine.len() as f64 - mean).powi(2)
    };
    let g = (0..names.len()).max_by(|a, b| weight(*a).total_cmp(&weight(*b)))?;
    let effect = stats::median(&values(true, g)) / stats::median(&values(false, g)) - 1.0;
    (effect.abs() >= MIN_EFFECT).then(|| {
        let (mine, rest) = (values(true, g), values(false, g));
        format!(
            "{metric} depends on the cell run before it (permutation test, p = {p:.3}): median {} in the {} run(s) right after {}, {} in the {} others ({:+.0}%): what that cell leaves behind reaches this one",
            crate::store::format_value(stats::median(&mine)),
            mine.len(),
            names[g],
            crate::store::format_value(stats::median(&rest)),
            rest.len(),
            effect * 100.0
        )
    })
}

/// Σ n_g (mean_g − mean)²: how far apart the groups' means are.
fn between_groups(values: &[f64], groups: &[usize], n_groups: usize) -> f64 {
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let mut sums = vec![(0.0, 0usize); n_groups];
    for (v, g) in values.iter().zip(groups) {
        sums[*g].0 += v;
        sums[*g].1 += 1;
    }
    sums.iter().filter(|(_, n)| *n > 0).map(|(s, n)| *n as f64 * (s / *n as f64 - mean).powi(2)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Labels, Sample};

    fn run(cell: &str, second: usize, value: f64, unsettled: bool) -> RunRecord {
        let labels = Labels { env: cell.into(), volume: "v".into(), workload: "w".into(), params: vec![] };
        let mut r = RunRecord::new(labels, 1);
        r.cell = cell.into();
        r.started = format!("2026-11-28T10:{:02}:{:02}.000Z", second / 60, second % 60);
        r.samples = vec![Sample::new("rate", value, "op/s")];
        if unsettled {
            r.setup.insert(UNSETTLED_SETUP.into(), "after 1.0 s the CPUs were still 50% busy".into());
        }
        r
    }

    /// Rounds of cells "a" (which leaves the machine busy), "b" (slowed after it) and "c", "d";
    /// `order` gives each round's order.
    fn rounds(orders: &[&str]) -> Vec<RunRecord> {
        let mut out: Vec<RunRecord> = Vec::new();
        for order in orders {
            for cell in order.chars().map(|c| c.to_string()) {
                let after_a = out.last().is_some_and(|r| r.cell == "a");
                let slowed = cell == "b" && after_a;
                let noise = 1.0 + 0.01 * ((out.len() * 7) % 5) as f64;
                out.push(run(&cell, out.len(), if slowed { 60.0 } else { 100.0 * noise }, after_a));
            }
        }
        out
    }

    fn headline(_: &str) -> Option<String> {
        Some("rate".into())
    }

    #[test]
    fn a_fixed_order_is_flagged_by_the_unsettled_runs_after_the_culprit() {
        let w = warnings(&rounds(&["abcd"; 5]), &headline);
        let b: Vec<&Warning> = w.iter().filter(|w| w.cell == "b").collect();
        assert_eq!(b.len(), 1, "{w:?}");
        assert!(
            b[0].message.starts_with("5 of its runs began right after a on a machine that had not settled"),
            "{}",
            b[0].message
        );
        assert!(w.iter().all(|w| w.cell == "b"), "only the cell after a: {w:?}");
    }

    #[test]
    fn a_shuffled_order_shows_the_predecessor_as_a_factor() {
        let orders = ["abcd", "cabd", "dcab", "bdca", "acdb", "cdab", "dbac", "cbda", "abdc", "bacd", "dacb", "cdba"];
        let w = warnings(&rounds(&orders), &headline);
        let factor: Vec<&Warning> = w.iter().filter(|w| w.message.contains("permutation test")).collect();
        assert_eq!(factor.len(), 1, "{w:?}");
        assert_eq!(factor[0].cell, "b");
        assert!(factor[0].message.contains("right after a, "), "{}", factor[0].message);
    }

    #[test]
    fn runs_without_a_carry_over_are_not_flagged() {
        let orders = ["abcd", "cabd", "dcab", "bdca", "acdb", "cdab", "dbac", "cbda", "abdc", "bacd"];
        let mut runs = rounds(&orders);
        for r in &mut runs {
            r.samples[0].value = 100.0 + (r.started.len() % 3) as f64;
            r.setup.clear();
        }
        assert_eq!(warnings(&runs, &headline), Vec::<Warning>::new());
        // A machine busy throughout is noise, not one cell's carry-over.
        for r in &mut runs {
            r.setup.insert(UNSETTLED_SETUP.into(), "busy".into());
        }
        assert_eq!(warnings(&runs, &headline), Vec::<Warning>::new());
    }

    #[test]
    fn runs_that_began_in_the_same_second_have_no_known_predecessor() {
        let mut runs = vec![run("a", 0, 1.0, false), run("b", 0, 1.0, false), run("c", 1, 1.0, false)];
        runs.iter_mut().for_each(|r| r.started = r.started.replace(".000", ""));
        let known: Vec<Option<&str>> = predecessors(&runs).into_iter().map(|(_, b)| b).collect();
        assert_eq!(known.iter().filter(|b| b.is_some()).count(), 1, "{known:?}");
    }
}
