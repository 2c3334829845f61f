//! `history gate`: each series' level now against its last accepted level, the segment before the
//! earliest change point no one has acknowledged (the whole earlier series where there is none).
//! The level now is the newest result set's, or, after a change no one has acknowledged, that of
//! every result set since the last change: a step the series has shown in several result sets is
//! judged on all of them, not on its newest alone (one noisy set would leave it undecided). An
//! overhead that grew, or a capacity that fell, beyond the tolerance with its CI outside it is a
//! regression; a CI across the tolerance is inconclusive, with the runs that would decide it.

use std::collections::BTreeMap;

use super::detect::{self, Level, Options};
use super::series::{self, Figure, Series};
use crate::report::export::{InconclusivePolicy, xml};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Regressed,
    Inconclusive,
    /// One result set so far: the next is gated against it.
    New,
}

impl Verdict {
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Regressed => "REGRESSED",
            Verdict::Inconclusive => "inconclusive",
            Verdict::New => "new",
        }
    }
}

pub struct Judged {
    pub series: String,
    pub figure: Figure,
    pub verdict: Verdict,
    pub detail: String,
}

/// The series a gate judges: the headline metrics' overheads and the capacities.
fn gated(series: &Series) -> Option<Figure> {
    if series.metric == "capacity" {
        Some(Figure::Value)
    } else if series.headline && series.points.iter().any(|p| p.overhead.is_some()) {
        Some(Figure::Overhead)
    } else {
        None
    }
}

pub fn gate(
    all: &[Series],
    tolerance: f64,
    options: &Options,
    acks: &BTreeMap<String, (String, String)>,
) -> Vec<Judged> {
    all.iter().filter_map(|s| Some(judge(s, gated(s)?, tolerance, options, acks))).collect()
}

fn judge(
    s: &Series,
    figure: Figure,
    tolerance: f64,
    options: &Options,
    acks: &BTreeMap<String, (String, String)>,
) -> Judged {
    let judged = |verdict, detail: String| Judged { series: s.name(), figure, verdict, detail };
    let observed = s.observed(figure);
    let scale = observed.scale;
    let Some((newest, earlier)) = observed.obs.split_last() else {
        return judged(Verdict::New, "no point has this figure yet".into());
    };
    let newest_point = observed.points[earlier.len()];
    if earlier.is_empty() {
        return judged(Verdict::New, format!("first result set of the series ({})", newest_point.path));
    }
    let (mut start, mut end) = (0, earlier.len());
    let mut against = "the whole series before it".to_string();
    let changes = series::change_points(s, figure, options, acks);
    for cp in &changes {
        if cp.acknowledged.is_some() {
            start = cp.index;
            against = format!("the level after acknowledged change point {}", cp.id);
        } else {
            end = cp.index.min(earlier.len());
            against =
                format!("the level before change point {} (not acknowledged: `isobench history ack {}`)", cp.id, cp.id);
            break;
        }
    }
    let level = Level::of(&earlier[start..end]);
    // The level now: since the last change after the accepted level, else the newest set's.
    let last_change = changes.last().filter(|cp| cp.index >= end && cp.index < observed.obs.len());
    let since = last_change.map_or(earlier.len(), |cp| cp.index);
    let now_level = Level::of(&observed.obs[since..]);
    // Worse is positive: an overhead in points above the level, a capacity in % below it.
    let sign = if figure == Figure::Overhead { 1.0 } else { -1.0 };
    let worse = |y: f64| sign * scale.change(level.mean, y);
    // A result set strays from the level by the series' own spread between result sets, not only
    // by its runs' CI: the interval is the level's prediction of the mean of that many more sets.
    // The spread is the whole series' too: three sets since a change, two of them alike by
    // chance, made an unpinned sandbox's fourth (+35 %, within what its sets before had varied)
    // a regression.
    let spread = level.var.max(now_level.var).max(detect::noise(&observed.obs).powi(2));
    let half = 1.96 * (spread / now_level.n as f64 + level.se.powi(2)).sqrt();
    let (a, b) = (worse(now_level.mean - half), worse(now_level.mean + half));
    let (lo, hi, now) = (a.min(b), a.max(b), worse(now_level.mean));
    let unit = format!(" {}", figure.change_unit());
    let which = match last_change {
        Some(cp) if now_level.n > 1 => format!("the {} result sets since change point {}", now_level.n, cp.id),
        _ => "newest".into(),
    };
    let what = format!(
        "{which} {} against {against} ({} over {} result sets): {}{unit} worse [{}, {}], tolerance {tolerance}{unit}",
        series::figure_text(figure, scale.from(now_level.mean), None, &s.unit),
        series::figure_text(figure, scale.from(level.mean), None, &s.unit),
        end - start,
        series::signed(now),
        series::signed(lo),
        series::signed(hi),
    );
    if lo > tolerance {
        judged(Verdict::Regressed, what)
    } else if hi <= tolerance {
        judged(Verdict::Pass, what)
    } else {
        // The half-width that would put the CI clear of the tolerance, on the series' scale.
        let room = half * (now - tolerance).abs() / ((hi - lo) / 2.0).max(f64::MIN_POSITIVE);
        let newest_se_needed = ((room / 1.96).powi(2) - level.se.powi(2)).max(0.0).sqrt();
        let runs = newest_point.values.len().max(1) as f64;
        let hint = if now_level.n > 1 {
            "more result sets at the level since the change would decide".into()
        } else if newest.se.powi(2) < level.var {
            "its result sets vary by more than a run's CI: more result sets would decide".into()
        } else if newest_se_needed > 0.0 && newest.se > 0.0 {
            let more = (runs * (newest.se / newest_se_needed).powi(2) - runs).ceil().max(1.0);
            format!("about {more} more runs of the cell in the next result set would decide")
        } else {
            "the accepted level itself is too loose: more result sets at it would decide".into()
        };
        judged(Verdict::Inconclusive, format!("{what}; {hint}"))
    }
}

/// `gate`'s exit code: 1 when a series regressed, else 2 when one is inconclusive (and the policy
/// reports it), else 0.
pub fn exit_code(judged: &[Judged], policy: InconclusivePolicy) -> u8 {
    let any = |v| judged.iter().any(|j| j.verdict == v);
    if any(Verdict::Regressed) || (any(Verdict::Inconclusive) && policy == InconclusivePolicy::Fail) {
        1
    } else if any(Verdict::Inconclusive) && policy == InconclusivePolicy::Report {
        2
    } else {
        0
    }
}

/// JUnit XML: a test case per gated series.
pub fn junit(judged: &[Judged], policy: InconclusivePolicy) -> String {
    let (mut failures, mut errors, mut cases) = (0, 0, String::new());
    for j in judged {
        let body = match (j.verdict, policy) {
            (Verdict::Pass | Verdict::New, _) | (Verdict::Inconclusive, InconclusivePolicy::Pass) => String::new(),
            (Verdict::Regressed, _) | (Verdict::Inconclusive, InconclusivePolicy::Fail) => {
                failures += 1;
                format!("<failure message=\"{}\" type=\"{}\"/>", xml(&j.detail), j.verdict.text())
            }
            (Verdict::Inconclusive, InconclusivePolicy::Report) => {
                errors += 1;
                format!("<error message=\"{}\" type=\"inconclusive\"/>", xml(&j.detail))
            }
        };
        cases.push_str(&format!(
            "    <testcase classname=\"history.{}\" name=\"{}\">{body}</testcase>\n",
            j.figure.name(),
            xml(&j.series)
        ));
    }
    let n = judged.len();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"isobench history\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"history gate\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n{cases}  </testsuite>\n</testsuites>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A series of result sets of `overheads` (points, with their CI's half-width).
    fn series(overheads: &[(f64, f64)]) -> Series {
        let points = overheads
            .iter()
            .enumerate()
            .map(|(k, (overhead, half))| {
                serde_json::from_value(serde_json::json!({
                    "cell": "gv.t.sc", "metric": "syscall_ns", "unit": "ns", "labels": {}, "headline": true,
                    "values": [100.0 + overhead, 100.0 + overhead, 100.0 + overhead],
                    "median": 100.0 + overhead, "ci": [100.0 + overhead - half, 100.0 + overhead + half],
                    "overhead": overhead, "overhead_ci": [overhead - half, overhead + half],
                    "baseline": "host.t.sc", "facts": {}, "result_set": format!("set-{k}"), "path": format!("set-{k}"),
                }))
                .unwrap()
            })
            .collect();
        Series {
            suite: "s".into(),
            cell: "gv.t.sc".into(),
            metric: "syscall_ns".into(),
            unit: "ns".into(),
            headline: true,
            labels: BTreeMap::new(),
            points,
        }
    }

    fn verdict(overheads: &[(f64, f64)]) -> Judged {
        gate(&[series(overheads)], 5.0, &Options::default(), &BTreeMap::new()).remove(0)
    }

    #[test]
    fn a_step_is_judged_on_every_result_set_since_it_so_one_noisy_set_does_not_undecide_it() {
        let before = [(100.0, 8.0), (104.0, 8.0), (97.0, 8.0), (101.0, 8.0)];
        // Three sets of the step agree; the newest's runs spread so widely that alone it proves
        // nothing.
        let after = [(300.0, 10.0), (310.0, 10.0), (295.0, 10.0), (305.0, 400.0)];
        let judged = verdict(&[&before[..], &after[..]].concat());
        assert_eq!(judged.verdict, Verdict::Regressed, "{}", judged.detail);
        assert!(judged.detail.contains("the 4 result sets since change point"), "{}", judged.detail);
        // The newest set alone, right after the step (no change point yet): undecided.
        let judged = verdict(&[&before[..], &after[3..]].concat());
        assert_eq!(judged.verdict, Verdict::Inconclusive, "{}", judged.detail);
        assert!(judged.detail.starts_with("newest"), "{}", judged.detail);
    }

    /// An unpinned runsc's getpid overhead (here, 2026-12-04): systrap, then ptrace, whose sets
    /// vary by a third; the step acknowledged, the newest set, +35 % above the two before it and
    /// within the series' spread, is no regression.
    #[test]
    fn a_set_within_the_series_spread_is_no_regression_after_an_acknowledged_step() {
        let s = series(&[
            (6104.0, 5154.0),
            (3241.0, 2957.0),
            (3250.0, 1424.0),
            (2585.0, 711.0),
            (10763.0, 2651.0),
            (9551.0, 1124.0),
            (9572.0, 609.0),
            (12999.0, 243.0),
        ]);
        let found = series::change_points(&s, Figure::Overhead, &Options::default(), &BTreeMap::new());
        assert_eq!(found.iter().map(|c| c.index).collect::<Vec<_>>(), [4]);
        let acks = BTreeMap::from([(found[0].id.clone(), ("ptrace on purpose".to_string(), String::new()))]);
        let judged = gate(&[s], 5.0, &Options::default(), &acks).remove(0);
        assert_ne!(judged.verdict, Verdict::Regressed, "{}", judged.detail);
    }

    #[test]
    fn a_regression_fixed_since_passes_on_the_level_after_the_fix() {
        let judged = verdict(&[
            (100.0, 2.0),
            (102.0, 2.0),
            (99.0, 2.0),
            (101.0, 2.0),
            (300.0, 10.0),
            (310.0, 10.0),
            (295.0, 10.0),
            (100.0, 2.0),
            (101.0, 2.0),
            (99.0, 2.0),
        ]);
        assert_eq!(judged.verdict, Verdict::Pass, "{}", judged.detail);
        assert!(judged.detail.contains("the 3 result sets since change point"), "{}", judged.detail);
    }
}
