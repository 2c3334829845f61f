//! The density section: sandboxes started together, each metric against N per environment,
//! and the spread between the sandboxes of each cell.

use std::fmt::Write;

use super::plain_table;
use crate::compare::CellResult;
use crate::report::{Report, density_table, metric_title};
use figures::chart::{self, BASELINE_COLOUR, Bar, BarChart, Line, LineChart, escape as h};

/// The table, the failures by name, each metric against N per environment, and each cell's
/// sandboxes side by side.
pub(super) fn density(report: &Report) -> String {
    let Some((table, failures)) = density_table(report) else {
        return String::new();
    };
    let mut out = String::from(
        "<h2 id=\"density\">Density</h2><p class=\"meta\">Sandboxes started together behind a barrier. Start: from creating a sandbox to its agent being up; host memory: the PSS of its processes while all were up, before the workload began. Medians over the runs.</p>",
    );
    out.push_str(&plain_table(&table));
    for f in &failures {
        let _ = write!(out, "<div class=\"warn\"><b>failed</b>: {}</div>", h(f));
    }
    let cells: Vec<&CellResult> = report.analysis.cells.iter().filter(|c| c.record.density.is_some()).collect();
    let mut workloads: Vec<&str> = Vec::new();
    for c in &cells {
        if !workloads.contains(&c.record.labels.workload.as_str()) {
            workloads.push(&c.record.labels.workload);
        }
    }
    out.push_str("<div class=\"charts\">");
    for workload in workloads {
        let mine: Vec<&CellResult> = cells.iter().copied().filter(|c| c.record.labels.workload == workload).collect();
        let headline = &mine[0].record.headline;
        let latency = headline.iter().find(|m| m.contains("lat") || m.contains("time")).cloned();
        let metrics = headline
            .first()
            .cloned()
            .into_iter()
            .chain(latency)
            .chain(["start_latency_p50".into(), "sandbox_memory".into()]);
        for metric in metrics {
            out.push_str(&against_n(workload, &mine, &metric));
        }
    }
    out.push_str("</div><details><summary>each sandbox's figure, per cell (first run)</summary><div class=\"charts\">");
    for c in &cells {
        out.push_str(&per_sandbox(report, c));
    }
    out.push_str("</div></details>");
    out
}

/// `metric` against N: a line per environment/volume and setting other than N, through its
/// cells' N; nothing when no line has two points.
fn against_n(workload: &str, cells: &[&CellResult], metric: &str) -> String {
    let mut lines: Vec<Line> = Vec::new();
    for c in cells {
        let Some(m) = c.metric(metric) else { continue };
        let others: Vec<String> =
            c.record.labels.params.iter().filter(|(k, _)| k != "density").map(|(k, v)| format!("{k}={v}")).collect();
        let name = format!("{} {}", c.name(), others.join(" ")).trim().to_string();
        let point = (c.record.density.unwrap_or(1) as f64, m.summary.median);
        match lines.iter_mut().find(|l| l.name == name) {
            Some(line) => line.points.push(point),
            None => {
                let (colour, dashed) = (chart::colour(lines.len()), c.is_baseline);
                lines.push(Line { name, points: vec![point], colour, dashed })
            }
        }
    }
    if !lines.iter().any(|l| l.points.len() > 1) {
        return String::new();
    }
    for line in &mut lines {
        line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let unit = cells.iter().find_map(|c| c.metric(metric)).map(|m| m.unit.clone()).unwrap_or_default();
    chart::line_chart(&LineChart::plain(
        format!("{workload}: {} against sandboxes at once", metric_title(metric)),
        unit,
        "sandboxes at once (N)",
        lines,
    ))
}

/// The cell's first run: each sandbox's headline figure, a failed one greyed with its error.
fn per_sandbox(report: &Report, c: &CellResult) -> String {
    let metric = c.record.headline.first().cloned().unwrap_or_default();
    let Some(run) = report.runs.iter().find(|r| r.cell == c.record.cell && !r.sandboxes.is_empty()) else {
        return String::new();
    };
    let bars: Vec<Bar> = run
        .sandboxes
        .iter()
        .map(|s| {
            let sample = s.samples.iter().find(|x| x.metric == metric);
            Bar {
                label: format!("sandbox {}", s.index),
                value: sample.map_or(0.0, |x| x.value),
                ci: None,
                colour: if sample.is_some() { chart::colour(0) } else { BASELINE_COLOUR },
                note: if sample.is_some() { String::new() } else { "failed".into() },
                tooltip: s.error.clone().unwrap_or_default(),
            }
        })
        .collect();
    let unit = run.sandboxes.iter().flat_map(|s| &s.samples).find(|x| x.metric == metric).map(|x| x.unit.clone());
    chart::bar_chart(&BarChart {
        title: format!("{} {}: {} per sandbox", c.name(), c.record.labels.setting(), metric_title(&metric)),
        unit: unit.unwrap_or_default(),
        bars,
    })
}
