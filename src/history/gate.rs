//! `history gate`: each series' newest result set against its last accepted level, the segment
//! before the earliest change point no one has acknowledged (the whole earlier series where there
//! is none). An overhead that grew, or a capacity that fell, beyond the tolerance with its CI
//! outside it is a regression; a CI across the tolerance is inconclusive, with the runs that would
//! decide it.

use std::collections::BTreeMap;

use super::detect::{Level, Options};
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
    for cp in series::change_points(s, figure, options, acks) {
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
    // Worse is positive: an overhead in points above the level, a capacity in % below it.
    let sign = if figure == Figure::Overhead { 1.0 } else { -1.0 };
    let worse = |y: f64| sign * scale.change(level.mean, y);
    // A new result set strays from the level by the series' own spread between result sets, not
    // only by its runs' CI: the interval is the level's prediction of one more point.
    let spread = level.var.max(newest.se.powi(2));
    let half = 1.96 * (spread + level.se.powi(2)).sqrt();
    let (a, b) = (worse(newest.value - half), worse(newest.value + half));
    let (lo, hi, now) = (a.min(b), a.max(b), worse(newest.value));
    let unit = format!(" {}", figure.change_unit());
    let what = format!(
        "newest {} against {against} ({} over {} result sets): {}{unit} worse [{}, {}], tolerance {tolerance}{unit}",
        series::figure_text(figure, scale.from(newest.value), None, &s.unit),
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
        let hint = if newest.se.powi(2) < level.var {
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
