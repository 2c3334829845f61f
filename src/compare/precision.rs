//! Whether the comparisons are as precise as a suite asked (`precision = "±5%"`): each cell's
//! verdict (its first headline metric against its baseline), its 95 % CI's half-width in
//! percentage points against the target. The runner asks it which cells need another round; the
//! reports say what each comparison reached and in how many rounds.

use super::{Analysis, CellResult, Diff};

/// One comparison against the target.
pub struct Standing {
    /// Index of the cell in `Analysis::cells`.
    pub cell: usize,
    pub metric: String,
    /// Half the width of the difference's 95 % CI, in percentage points (infinite without one).
    pub half_width: f64,
    /// Rounds the difference rests on: pairs, or the smaller side's runs.
    pub rounds: usize,
    pub met: bool,
}

/// The metric a cell's verdict is about and its difference from the baseline.
pub fn verdict_diff(cell: &CellResult) -> Option<(&str, &Diff)> {
    let m = cell.record.headline.iter().find_map(|m| cell.metric(m))?;
    Some((m.metric.as_str(), m.vs_baseline.as_ref()?))
}

/// Every comparison of the analysis against a half-width of `target` points. A cell with no
/// difference to judge (it or its baseline measured nothing) has no standing: more rounds of a
/// failing cell would only fail again.
pub fn standings(analysis: &Analysis, target: f64) -> Vec<Standing> {
    analysis
        .cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_baseline)
        .filter_map(|(i, c)| {
            let (metric, d) = verdict_diff(c)?;
            let half_width = d.half_width();
            Some(Standing { cell: i, metric: metric.to_string(), half_width, rounds: d.n, met: half_width <= target })
        })
        .collect()
}
