//! Where a cell's noise comes from, so that a reader sees which lever helps: within a run (the
//! spread of its own time series, which a longer run averages away), between runs (which more
//! rounds average away), and between rounds: the part a run shares with the baseline's run of
//! its block, which pairing by round takes out of the difference.

use super::{Analysis, CellResult, MetricResult, pairs};
use crate::store::{RunRecord, Series, Status};
use figures::stats;

/// One cell's headline metric, its noise by source, each a coefficient of variation in percent.
pub struct Noise {
    /// Index of the cell in `Analysis::cells`.
    pub cell: usize,
    pub metric: String,
    /// The spread of a run's windows (fio's seconds, the load's intervals), the median over the
    /// runs, and what it adds to a run's figure (divided by √windows: the windows average).
    pub within_run: Option<(f64, f64)>,
    /// The runs' spread around what their rounds shared with the baseline's.
    pub between_runs: f64,
    /// The part shared with the baseline's run of the same round; `None` where no run pairs.
    pub between_rounds: Option<f64>,
}

impl Noise {
    /// Which lever narrows this cell's CI most.
    pub fn lever(&self) -> &'static str {
        let runs = self.between_runs.powi(2);
        match (self.within_run, self.between_rounds) {
            (Some((_, per_run)), _) if per_run.powi(2) > runs / 2.0 => {
                "longer runs: most of the runs' spread is their own windows'"
            }
            (_, Some(rounds)) if rounds.powi(2) > runs => {
                "pairing, as done: most of the spread is the round's, shared with the baseline's run"
            }
            _ => "more rounds: the runs differ more than their windows or their rounds explain",
        }
    }
}

/// The noise of every cell with three runs or more of its first headline metric.
pub fn noise(analysis: &Analysis, runs: &[RunRecord]) -> Vec<Noise> {
    analysis
        .cells
        .iter()
        .enumerate()
        .filter_map(|(i, cell)| {
            let m = cell.record.headline.iter().find_map(|m| cell.metric(m))?;
            if m.values.len() < 3 || m.values.iter().any(|v| *v <= 0.0) {
                return None;
            }
            let logs: Vec<f64> = m.values.iter().map(|v| v.ln()).collect();
            let total = stats::mean_sd(&logs).1.powi(2);
            let shared = shared_with_partners(analysis, i, m);
            let between_runs = (total - shared.unwrap_or(0.0)).max(0.0);
            Some(Noise {
                cell: i,
                metric: m.metric.clone(),
                within_run: within_run(cell, &m.metric, runs),
                between_runs: cv(between_runs),
                between_rounds: shared.map(cv),
            })
        })
        .collect()
}

/// The percent CV of a log-normal quantity whose logarithm has variance `var`.
fn cv(var: f64) -> f64 {
    (var.exp() - 1.0).max(0.0).sqrt() * 100.0
}

/// The covariance of the logarithms of this cell's runs with its partners' in the same blocks:
/// with its baseline, or for a baseline with each cell compared with it (averaged).
fn shared_with_partners(analysis: &Analysis, index: usize, m: &MetricResult) -> Option<f64> {
    let cell = &analysis.cells[index];
    let partners: Vec<&MetricResult> = if cell.is_baseline {
        analysis
            .cells
            .iter()
            .enumerate()
            .filter(|(j, c)| *j != index && c.baseline == Some(index))
            .filter_map(|(_, c)| c.metric(&m.metric))
            .collect()
    } else {
        cell.baseline.and_then(|b| analysis.cells[b].metric(&m.metric)).into_iter().collect()
    };
    let covariances: Vec<f64> = partners
        .iter()
        .filter_map(|p| {
            // The pairs of whichever side has its every run paired.
            let paired = if cell.is_baseline { pairs(p, m).ok()? } else { pairs(m, p).ok()? };
            if paired.len() < 3 || paired.iter().any(|(a, b)| *a <= 0.0 || *b <= 0.0) {
                return None;
            }
            let (a, b): (Vec<f64>, Vec<f64>) = paired.iter().map(|(a, b)| (a.ln(), b.ln())).unzip();
            let (ma, mb) = (stats::mean_sd(&a).0, stats::mean_sd(&b).0);
            let n = a.len() as f64;
            Some(a.iter().zip(&b).map(|(x, y)| (x - ma) * (y - mb)).sum::<f64>() / (n - 1.0))
        })
        .collect();
    (!covariances.is_empty()).then(|| (covariances.iter().sum::<f64>() / covariances.len() as f64).max(0.0))
}

/// The spread of the windows of `metric`'s series within each run, and what it adds to the run's
/// figure: medians over the runs that have the series. Only the windows the figure is made of
/// count: not a warm-up the run left out (`warmup_s`), nor a last window cut short by the run's end.
fn within_run(cell: &CellResult, metric: &str, runs: &[RunRecord]) -> Option<(f64, f64)> {
    let mut spreads = Vec::new();
    let mut per_run = Vec::new();
    for run in runs.iter().filter(|r| r.cell == cell.record.cell && r.status == Status::Ok) {
        let Some(series) = series_of(&run.series, metric) else { continue };
        let warmup = run.samples.iter().find(|s| s.metric == "warmup_s").map_or(0.0, |s| s.value);
        let windows: Vec<f64> = full_windows(&series.points)
            .filter(|(end, _)| *end > warmup)
            .map(|(_, v)| v)
            .filter(|v| *v > 0.0)
            .map(f64::ln)
            .collect();
        if windows.len() < 3 {
            continue;
        }
        let spread = cv(stats::mean_sd(&windows).1.powi(2));
        spreads.push(spread);
        per_run.push(spread / (windows.len() as f64).sqrt());
    }
    (!spreads.is_empty()).then(|| (stats::median(&spreads), stats::median(&per_run)))
}

/// The points of a series (each at its window's end) whose window is at least half the usual
/// length: a run's last window, cut short by its end, holds a few operations at an odd rate.
fn full_windows(points: &[(f64, f64)]) -> impl Iterator<Item = (f64, f64)> + '_ {
    let lengths: Vec<f64> = points.iter().scan(0.0, |last, (t, _)| Some(t - std::mem::replace(last, *t))).collect();
    let usual = stats::median(&lengths);
    points.iter().zip(lengths).filter(move |(_, length)| *length >= usual / 2.0).map(|(p, _)| *p)
}

/// The series of a run that is `metric` over time: the one of that name, or the one direction
/// of it (fio's `write_iops` for `iops` in a write-only job).
pub fn series_of<'a>(series: &'a [Series], metric: &str) -> Option<&'a Series> {
    series.iter().find(|s| s.metric == metric).or_else(|| {
        let suffix = format!("_{metric}");
        let mut matching = series.iter().filter(|s| s.metric.ends_with(&suffix));
        match (matching.next(), matching.next()) {
            (Some(one), None) => Some(one),
            _ => None,
        }
    })
}
