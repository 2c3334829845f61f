//! Whether the comparisons are as precise as a suite asked (`precision = "±5%"`): each cell's
//! verdict (its first headline metric against its baseline), its 95 % CI's half-width in
//! percentage points against the target. The runner asks it which cells need another round; the
//! reports say what each comparison reached and in how many rounds.

use figures::stats::student_t_quantile;

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

/// Past this many rounds an estimate says only "more than".
const MAX_ROUNDS_ESTIMATED: usize = 1000;

/// The rounds after which a difference whose 95 % CI is `half_width` points wide at `rounds`
/// would reach `target` at the same noise: the half-width goes as t(m − 1) / √m. `None` beyond
/// [`MAX_ROUNDS_ESTIMATED`] or without an interval to start from.
pub fn rounds_to_reach(half_width: f64, rounds: usize, target: f64) -> Option<usize> {
    if !(half_width.is_finite() && half_width > 0.0 && rounds >= 2 && target > 0.0) {
        return None;
    }
    if half_width <= target {
        return Some(rounds);
    }
    let scale = |m: usize| student_t_quantile(0.05, (m - 1) as f64) / (m as f64).sqrt();
    let needed = target / half_width * scale(rounds);
    (rounds + 1..=MAX_ROUNDS_ESTIMATED).find(|&m| scale(m) <= needed)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// At the same noise the half-width falls as t/√m: from ±10 at 3 rounds, ±5 takes 5, not 12
    /// (the t quantile falls from 4.30 at two degrees of freedom to 2.78 at four); a goal met or
    /// out of reach says so.
    #[test]
    fn the_rounds_a_goal_takes_follow_the_t_intervals_width() {
        let m = rounds_to_reach(10.0, 3, 5.0).unwrap();
        let width =
            |m: usize| 10.0 / (4.303 / 3f64.sqrt()) * student_t_quantile(0.05, (m - 1) as f64) / (m as f64).sqrt();
        assert!(width(m) <= 5.0 && width(m - 1) > 5.0, "{m} rounds: ±{:.2}, one fewer ±{:.2}", width(m), width(m - 1));
        assert_eq!(m, 5);
        assert_eq!(rounds_to_reach(18.7, 3, 5.0), Some(12), "the demo's runc fio-random of 12-02");
        assert_eq!(rounds_to_reach(4.0, 3, 5.0), Some(3));
        assert_eq!(rounds_to_reach(1000.0, 3, 1.0), None);
        assert_eq!(rounds_to_reach(f64::INFINITY, 3, 5.0), None);
    }
}
