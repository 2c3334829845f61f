//! One setting's charts: a bar chart per headline metric with CI whiskers, the latency
//! percentile profiles, and the time series of one run per cell.

use std::collections::{BTreeMap, BTreeSet};

use crate::compare::CellResult;
use crate::report::{Report, diff_text, headline, metric_title};
use figures::chart::{self, BASELINE_COLOUR, Bar, BarChart, Line, LineChart, colour};
use figures::units::{self, human};

/// A cell's colour in every chart of its setting.
fn cell_colour(cells: &[&CellResult], cell: &CellResult) -> &'static str {
    if cell.is_baseline {
        return BASELINE_COLOUR;
    }
    let index = cells.iter().filter(|c| !c.is_baseline).position(|c| c.record.cell == cell.record.cell).unwrap_or(0);
    colour(index)
}

/// Bars per headline metric, the latency percentile profile, and the time series of one setting.
pub(super) fn setting_charts(report: &Report, cells: &[&CellResult]) -> String {
    let mut out = String::from("<div class=\"charts\">");
    for metric in headline(cells) {
        out.push_str(&headline_bars(cells, &metric));
    }
    for (prefix, points) in percentile_families(cells) {
        out.push_str(&percentile_profile(cells, &prefix, &points));
    }
    let series_names: BTreeSet<(String, String)> = report
        .runs
        .iter()
        .filter(|r| cells.iter().any(|c| c.record.cell == r.cell))
        .flat_map(|r| r.series.iter().map(|s| (s.metric.clone(), s.unit.clone())))
        .collect();
    for (name, unit) in series_names {
        out.push_str(&time_series(report, cells, &name, unit));
    }
    out.push_str("</div>");
    out
}

/// Each cell's median of `metric` with its CI, and its difference from the baseline.
fn headline_bars(cells: &[&CellResult], metric: &str) -> String {
    let unit = cells.iter().find_map(|c| c.metric(metric)).map(|m| m.unit.clone()).unwrap_or_default();
    let bars = cells
        .iter()
        .filter_map(|c| {
            let m = c.metric(metric)?;
            let s = &m.summary;
            let note = m.vs_baseline.as_ref().map(diff_text).unwrap_or_default();
            Some(Bar {
                label: c.name(),
                value: s.center,
                ci: s.ci,
                colour: cell_colour(cells, c),
                tooltip: format!(
                    "{}: {} (95% CI {}), n = {}{}",
                    c.name(),
                    human(s.center, &m.unit),
                    units::value_interval(s.ci, &m.unit),
                    s.n,
                    m.vs_baseline
                        .as_ref()
                        .map(|d| format!(", {} vs baseline ({})", units::signed_percent(d.pct), d.verdict.text()))
                        .unwrap_or_default()
                ),
                note,
            })
        })
        .collect();
    chart::bar_chart(&BarChart { title: metric_title(metric), unit, bars })
}

/// A line per cell through its medians of one family's percentiles, on a log axis.
fn percentile_profile(cells: &[&CellResult], prefix: &str, points: &[(String, String)]) -> String {
    let lines = cells
        .iter()
        .filter_map(|c| {
            let values: Vec<(f64, f64)> =
                points.iter().enumerate().filter_map(|(k, (_, name))| Some((k as f64, c.median(name)?))).collect();
            (!values.is_empty()).then(|| Line {
                name: c.name(),
                points: values,
                colour: cell_colour(cells, c),
                dashed: c.is_baseline,
            })
        })
        .collect();
    let unit = points
        .iter()
        .find_map(|(_, name)| cells.iter().find_map(|c| c.metric(name)))
        .map_or_else(|| "us".to_string(), |m| m.unit.clone());
    chart::line_chart(&LineChart {
        x_categories: points.iter().map(|(label, _)| label.clone()).collect(),
        log_y: true,
        ..LineChart::plain(format!("{} percentiles (median of runs)", metric_title(prefix)), unit, "percentile", lines)
    })
}

/// The series `name` of the first run of each cell that has it; nothing when no line has two
/// points.
fn time_series(report: &Report, cells: &[&CellResult], name: &str, unit: String) -> String {
    let lines: Vec<Line> = cells
        .iter()
        .filter_map(|c| {
            let run =
                report.runs.iter().find(|r| r.cell == c.record.cell && r.series.iter().any(|s| s.metric == name))?;
            let s = run.series.iter().find(|s| s.metric == name)?;
            Some(Line {
                name: format!("{} #{}", c.name(), run.rep),
                points: s.points.clone(),
                colour: cell_colour(cells, c),
                dashed: c.is_baseline,
            })
        })
        .collect();
    if !lines.iter().any(|l| l.points.len() > 1) {
        return String::new();
    }
    chart::line_chart(&LineChart::plain(
        format!("{} over time (one run per cell)", metric_title(name)),
        unit,
        "seconds",
        lines,
    ))
}

/// Metrics named `<prefix>_p<N>` (plus `<prefix>_max`), grouped by prefix in percentile order.
pub(super) fn percentile_families(cells: &[&CellResult]) -> Vec<(String, Vec<(String, String)>)> {
    let mut families: BTreeMap<String, Vec<(f64, String, String)>> = BTreeMap::new();
    for c in cells {
        for m in &c.metrics {
            let Some((prefix, p)) = m.metric.rsplit_once("_p") else {
                continue;
            };
            let Ok(value) = p.parse::<f64>() else {
                continue;
            };
            let list = families.entry(prefix.to_string()).or_default();
            if !list.iter().any(|(_, _, name)| name == &m.metric) {
                list.push((value, format!("p{p}"), m.metric.clone()));
            }
        }
    }
    families
        .into_iter()
        .filter(|(_, list)| list.len() >= 2)
        .map(|(prefix, mut list)| {
            list.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut points: Vec<(String, String)> = list.into_iter().map(|(_, label, name)| (label, name)).collect();
            let max = format!("{prefix}_max");
            if cells.iter().any(|c| c.metric(&max).is_some()) {
                points.push(("max".into(), max));
            }
            (prefix, points)
        })
        .collect()
}
