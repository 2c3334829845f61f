//! `report.html`: one self-contained file that opens offline. Overhead heatmaps, bar charts with
//! CI whiskers, latency percentile profiles, per-run time series, the environments' facts side
//! by side (differences from the baseline highlighted) and links to the raw files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use super::{
    Report, Table, density_table, diff_text, headline, metric_title, runs_text, settings, status_text, summary_tables,
};
use crate::chart::style::STYLE;
use crate::chart::{self, BASELINE_COLOUR, Bar, BarChart, Line, LineChart, colour, escape as h};
use crate::compare::{self, CellResult, Verdict};
use crate::units::{self, human};

pub fn render(report: &Report) -> String {
    let analysis = &report.analysis;
    let plan = &analysis.plan;
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>isobench: {}</title><style>{STYLE}</style></head><body><main>",
        h(&plan.suite)
    );
    let _ = write!(
        out,
        "<h1>isobench report: {}</h1><p class=\"meta\">Baseline: {} · repetitions: {} · \
         medians with 95&nbsp;% bootstrap CIs; % difference = (cell − baseline) / baseline; {}</p>",
        h(&plan.suite),
        h(&plan.baseline.describe()),
        h(&plan.repeat.to_string()),
        h(super::MARKS)
    );
    let host: Vec<String> = ["os", "kernel.release", "cpu.model", "cpus", "isobench.version", "isobench.git"]
        .iter()
        .filter_map(|k| report.host.get(*k).map(|v| format!("{k}: {}", h(v))))
        .collect();
    let _ = write!(out, "<p class=\"meta\">Host: {}</p>", host.join(" · "));
    if let Some(machine) = super::machine_line(&report.host) {
        let _ = write!(out, "<p class=\"meta\">Machine: {} · {}</p>", h(&machine), h(&super::order_line(plan)));
    }
    let capacity_link =
        if super::capacity::table(report).is_some() { "<a href=\"#capacity\">capacity</a>" } else { "" };
    out.push_str("<nav><a href=\"#summary\">summary</a>");
    out.push_str(capacity_link);
    out.push_str("<a href=\"#heatmap\">overheads</a><a href=\"#settings\">settings</a><a href=\"#facts\">environments</a><a href=\"#raw\">raw files</a></nav>");
    let (lines, against) = super::verdict(analysis);
    if !lines.is_empty() {
        let _ = write!(
            out,
            "<section class=\"verdict\"><h2 id=\"verdict\">Verdict</h2><p class=\"meta\">Against {}: each setting's first headline metric, median difference [95&nbsp;% CI]; {}.</p><ul>",
            h(&against),
            h(super::MARKS)
        );
        for line in &lines {
            let items: Vec<String> = line.items.iter().map(|i| format!("<span>{}</span>", h(i))).collect();
            let _ = write!(out, "<li><b>{}</b> {}</li>", h(&line.subject), items.join(" · "));
        }
        out.push_str("</ul></section>");
    }
    let explanations = super::explain::explain(analysis);
    if !explanations.is_empty() {
        out.push_str("<h2 id=\"why\">Why</h2><p class=\"meta\">For each cell outside the noise, what its runs' <code>sys.</code> figures say against its baseline's.</p><ul>");
        for e in &explanations {
            let lines: Vec<String> = e.lines.iter().map(|l| h(l)).collect();
            let _ = write!(out, "<li><b>{}</b>: {}</li>", h(&e.cell), lines.join("; "));
        }
        out.push_str("</ul>");
        out.push_str(&cost_by_part(analysis));
    }
    if !report.warnings.is_empty() {
        let groups = super::grouped_warnings(&report.warnings);
        let _ = write!(out, "<h2 id=\"warnings\">Warnings ({})</h2>", report.warnings.len());
        for group in &groups {
            let _ = write!(out, "<div class=\"warn\"><b>{}</b>: {}", h(&group.first.cell), h(&group.first.message));
            if !group.also.is_empty() {
                let _ = write!(
                    out,
                    "<details><summary>the same in {} more</summary>{}</details>",
                    group.also.len(),
                    h(&group.also.join(", "))
                );
            }
            out.push_str("</div>");
        }
    }
    out.push_str(&summary(report));
    out.push_str(&capacity(report));
    out.push_str(&density(report));
    out.push_str(&heatmaps(report));
    out.push_str(&bounds(report));
    out.push_str("<h2 id=\"settings\">Per workload setting</h2>");
    for (setting, cells) in settings(analysis) {
        let _ = write!(out, "<h3>{}</h3>", h(&setting));
        out.push_str(&setting_charts(report, &cells));
        out.push_str(&setting_table(report, &cells));
    }
    out.push_str(&facts(report));
    out.push_str(&cost(report));
    out.push_str(&raw_links(report));
    out.push_str("<p class=\"meta\">Written by isobench. Every number was measured; missing ones say why.</p></main></body></html>\n");
    out
}

/// CPU per operation by part, one stacked bar per attributed cell under its baseline's.
fn cost_by_part(analysis: &compare::Analysis) -> String {
    let attributed: Vec<_> = analysis
        .cells
        .iter()
        .filter(|c| !c.is_baseline)
        .filter_map(|c| super::attribute::attribute(analysis, c, &analysis.cells[c.baseline?]))
        .collect();
    let Some(first) = attributed.first() else { return String::new() };
    let mut parts = vec!["the baseline's".to_string()];
    for a in &attributed {
        for p in &a.parts {
            if !parts.iter().any(|n| n == p.name) {
                parts.push(p.name.into());
            }
        }
    }
    parts.push("unexplained".into());
    let mut rows = vec![chart::Stack {
        label: first.baseline.clone(),
        segments: vec![("the baseline's".into(), first.baseline_us)],
    }];
    for a in &attributed {
        // A part priced below nothing (a probe that came out cheaper in the sandbox) is drawn as
        // nothing, so that the bar still ends at the cell's CPU per operation.
        let mut segments = vec![("the baseline's".to_string(), a.baseline_us)];
        segments.extend(a.parts.iter().map(|p| (p.name.to_string(), p.us.max(0.0))));
        let drawn: f64 = a.parts.iter().map(|p| p.us.max(0.0)).sum();
        segments.push(("unexplained".into(), a.increase() - drawn));
        rows.push(chart::Stack { label: a.cell.clone(), segments });
    }
    let svg = chart::stacked_bar_chart(&chart::StackedChart {
        title: "CPU per operation by part".into(),
        unit: "us".into(),
        parts,
        rows,
    });
    format!(
        "<div class=\"charts\">{svg}</div><p class=\"meta\">The baseline's CPU per operation, then what the sandbox adds: the baseline's system calls, page faults and round trips per operation, each priced at what the suite's <code>syscall</code> workload measured it to cost more in the sandbox, and the rest they do not explain.</p>"
    )
}

/// A table of text as HTML.
fn plain_table(table: &Table) -> String {
    let mut out = String::from("<table><tr>");
    for header in &table.headers {
        let _ = write!(out, "<th>{}</th>", h(header));
    }
    out.push_str("</tr>");
    for row in &table.rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{}</td>", h(cell));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

/// The studies' tables: per workload, each setting's first headline metric per environment.
fn summary(report: &Report) -> String {
    let mut out = String::from(
        "<h2 id=\"summary\">Summary</h2><p class=\"meta\">Per workload, each setting's first headline metric: median (% against the baseline [95% CI]).</p>",
    );
    for (workload, table) in summary_tables(&report.analysis) {
        let _ = write!(out, "<h3>{}</h3>{}", h(&workload), plain_table(&table));
    }
    out
}

/// Capacity: the table, the nodes and money a target needs, and each setting's
/// latency–throughput chart.
fn capacity(report: &Report) -> String {
    let Some(table) = super::capacity::table(report) else { return String::new() };
    let mut out = format!(
        "<h2 id=\"capacity\">Capacity</h2><p class=\"meta\">The highest offered rate each cell sustained with its latency percentile within the bound, median [95% CI] over the runs; the chart draws the steps of each cell's median run.</p>{}",
        plain_table(&table)
    );
    if let Some((table, notes)) = super::capacity::nodes_and_money(report) {
        let _ = write!(out, "<h3>Nodes and money</h3>{}", plain_table(&table));
        for note in notes {
            let _ = write!(out, "<p class=\"meta\">{}</p>", h(&note));
        }
    }
    out.push_str("<div class=\"charts\">");
    for (_, cells) in settings(&report.analysis) {
        out.push_str(&super::capacity::chart(report, &cells));
    }
    out.push_str("</div>");
    out
}

/// Sandboxes started together: the table, the failures by name, each metric against N per
/// environment, and the spread between the sandboxes of each cell.
fn density(report: &Report) -> String {
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
            // A line per environment/volume and setting other than N, through its cells' N.
            let mut lines: Vec<Line> = Vec::new();
            for c in &mine {
                let Some(m) = c.metric(&metric) else { continue };
                let others: Vec<String> = c
                    .record
                    .labels
                    .params
                    .iter()
                    .filter(|(k, _)| k != "density")
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
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
                continue;
            }
            for line in &mut lines {
                line.points.sort_by(|a, b| a.0.total_cmp(&b.0));
            }
            let unit = mine.iter().find_map(|c| c.metric(&metric)).map(|m| m.unit.clone()).unwrap_or_default();
            out.push_str(&chart::line_chart(&LineChart {
                title: format!("{workload}: {} against sandboxes at once", metric_title(&metric)),
                unit,
                x_label: "sandboxes at once (N)".into(),
                x_categories: Vec::new(),
                lines,
                log_y: false,
                log_x: false,
                rules: Vec::new(),
                marks: Vec::new(),
            }));
        }
    }
    out.push_str("</div><details><summary>each sandbox's figure, per cell (first run)</summary><div class=\"charts\">");
    for c in &cells {
        let metric = c.record.headline.first().cloned().unwrap_or_default();
        let Some(run) = report.runs.iter().find(|r| r.cell == c.record.cell && !r.sandboxes.is_empty()) else {
            continue;
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
        out.push_str(&chart::bar_chart(&BarChart {
            title: format!("{} {}: {} per sandbox", c.name(), c.record.labels.setting(), metric_title(&metric)),
            unit: unit.unwrap_or_default(),
            bars,
        }));
    }
    out.push_str("</div></details>");
    out
}

/// Background for an overhead: white at 0, red when worse, blue when better, grey when the
/// difference is within the noise.
fn heat_colour(d: &compare::Diff) -> (String, &'static str) {
    if matches!(d.verdict, Verdict::NoSignificantDifference | Verdict::TooFewRuns) {
        return ("#eeeeee".into(), "#222");
    }
    let t = (d.overhead_pct.abs() / 60.0).clamp(0.12, 1.0);
    let (r, g, b) = if d.overhead_pct > 0.0 { (178.0, 24.0, 43.0) } else { (33.0, 102.0, 172.0) };
    let mix = |c: f64| (247.0 + (c - 247.0) * t).round() as u8;
    (format!("#{:02x}{:02x}{:02x}", mix(r), mix(g), mix(b)), if t > 0.55 { "#fff" } else { "#222" })
}

/// One table per headline metric that is a rate or a mean latency: rows are workload settings,
/// columns the environment/volume pairs; each cell coloured by its overhead, CI in the label.
fn heatmaps(report: &Report) -> String {
    let analysis = &report.analysis;
    let groups = settings(analysis);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for c in &analysis.cells {
        let p = (c.record.labels.env.clone(), c.record.labels.volume.clone());
        if !pairs.contains(&p) {
            pairs.push(p);
        }
    }
    let mut metrics: Vec<String> = Vec::new();
    for (_, cells) in &groups {
        for m in headline(cells) {
            if !metrics.contains(&m) {
                metrics.push(m);
            }
        }
    }
    let primary: Vec<&String> =
        metrics.iter().enumerate().filter(|(i, m)| *i == 0 || m.ends_with("_mean")).map(|(_, m)| m).collect();
    let mut out = String::from(
        "<h2 id=\"heatmap\">Overhead against the baseline</h2><p class=\"meta\">Red: worse than the baseline, blue: better, grey: within the noise. Hover for the CI and p-value.</p>",
    );
    for metric in &metrics {
        let mut table =
            format!("<table class=\"heat\" data-metric=\"{}\"><tr><th>{}</th>", h(metric), h(&metric_title(metric)));
        for (env, volume) in &pairs {
            let _ = write!(table, "<th>{}<br><span class=\"muted\">{}</span></th>", h(env), h(volume));
        }
        table.push_str("</tr>");
        let mut any = false;
        for (setting, cells) in &groups {
            if !cells.iter().any(|c| c.metric(metric).is_some()) {
                continue;
            }
            any = true;
            let _ = write!(table, "<tr><th>{}</th>", h(setting));
            for (env, volume) in &pairs {
                let cell = cells.iter().find(|c| &c.record.labels.env == env && &c.record.labels.volume == volume);
                table.push_str(&heat_cell(cell.copied(), metric));
            }
            table.push_str("</tr>");
        }
        table.push_str("</table>");
        if !any {
            continue;
        }
        if primary.contains(&metric) {
            out.push_str(&table);
        } else {
            let _ = write!(out, "<details><summary>{}</summary>{table}</details>", h(&metric_title(metric)));
        }
    }
    out
}

fn heat_cell(cell: Option<&CellResult>, metric: &str) -> String {
    let Some(cell) = cell else {
        return "<td class=\"v muted\">—</td>".into();
    };
    if let Some(status) = status_text(cell) {
        return format!(
            "<td class=\"v muted\" title=\"{}\">{}</td>",
            h(&status),
            if cell.skipped.is_some() { "skipped" } else { "failed" }
        );
    }
    let Some(m) = cell.metric(metric) else {
        return "<td class=\"v muted\">—</td>".into();
    };
    match &m.vs_baseline {
        None if cell.is_baseline => format!(
            "<td class=\"v\" title=\"baseline: {}\">baseline<small>{}</small></td>",
            h(&human(m.summary.median, &m.unit)),
            h(&human(m.summary.median, &m.unit))
        ),
        None => "<td class=\"v muted\">no baseline</td>".into(),
        Some(d) => {
            let (bg, fg) = heat_colour(d);
            format!(
                "<td class=\"v\" style=\"background:{bg};color:{fg}\" title=\"{tip}\">{pct}<small>[{lo}, {hi}]</small></td>",
                tip = h(&format!(
                    "{}: median {} against {}; {} {}; 95% CI [{}, {}]; p = {:.3}; n = {}",
                    cell.name(),
                    human(m.summary.median, &m.unit),
                    human(d.baseline_median, &m.unit),
                    units::signed_percent(d.pct),
                    d.verdict.text(),
                    units::signed_percent(d.ci.0),
                    units::signed_percent(d.ci.1),
                    d.p_value,
                    m.summary.n
                )),
                pct = h(&diff_text(d)),
                lo = h(&units::signed_percent(d.ci.0)),
                hi = h(&units::signed_percent(d.ci.1)),
            )
        }
    }
}

fn bounds(report: &Report) -> String {
    if report.checks.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h2 id=\"bounds\">Bounds</h2><p class=\"meta\">Pass: the whole CI of the overhead is within the bound; fail: the whole CI is beyond it; otherwise inconclusive.</p><table><tr><th>cell</th><th>metric</th><th>max overhead</th><th>overhead [95% CI]</th><th>verdict</th></tr>",
    );
    for c in &report.checks {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">≤ {}</td><td class=\"num\">{} [{}, {}]</td><td class=\"{}\">{}</td></tr>",
            h(&c.cell),
            h(&c.bound.metric),
            units::signed_percent(c.bound.max_overhead_pct),
            units::signed_percent(c.overhead_pct),
            units::signed_percent(c.overhead_ci.0),
            units::signed_percent(c.overhead_ci.1),
            c.verdict.text().to_lowercase(),
            c.verdict.text()
        );
    }
    out.push_str("</table>");
    out
}

/// A cell's colour in every chart of its setting.
fn cell_colour(cells: &[&CellResult], cell: &CellResult) -> &'static str {
    if cell.is_baseline {
        return BASELINE_COLOUR;
    }
    let index = cells.iter().filter(|c| !c.is_baseline).position(|c| c.record.cell == cell.record.cell).unwrap_or(0);
    colour(index)
}

/// Bars per headline metric, the latency percentile profile, and the time series of one setting.
fn setting_charts(report: &Report, cells: &[&CellResult]) -> String {
    let mut out = String::from("<div class=\"charts\">");
    for metric in headline(cells) {
        let unit = cells.iter().find_map(|c| c.metric(&metric)).map(|m| m.unit.clone()).unwrap_or_default();
        let bars = cells
            .iter()
            .filter_map(|c| {
                let m = c.metric(&metric)?;
                let s = &m.summary;
                let note = m.vs_baseline.as_ref().map(diff_text).unwrap_or_default();
                Some(Bar {
                    label: c.name(),
                    value: s.median,
                    ci: (s.n > 1).then_some(s.ci),
                    colour: cell_colour(cells, c),
                    tooltip: format!(
                        "{}: median {} (95% CI {} – {}), n = {}{}",
                        c.name(),
                        human(s.median, &m.unit),
                        human(s.ci.0, &m.unit),
                        human(s.ci.1, &m.unit),
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
        out.push_str(&chart::bar_chart(&BarChart { title: metric_title(&metric), unit, bars }));
    }
    for (prefix, points) in percentile_families(cells) {
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
        out.push_str(&chart::line_chart(&LineChart {
            title: format!("{} percentiles (median of runs)", metric_title(&prefix)),
            unit,
            x_label: "percentile".into(),
            x_categories: points.iter().map(|(label, _)| label.clone()).collect(),
            lines,
            log_y: true,
            log_x: false,
            rules: Vec::new(),
            marks: Vec::new(),
        }));
    }
    let series_names: BTreeSet<(String, String)> = report
        .runs
        .iter()
        .filter(|r| cells.iter().any(|c| c.record.cell == r.cell))
        .flat_map(|r| r.series.iter().map(|s| (s.metric.clone(), s.unit.clone())))
        .collect();
    for (name, unit) in series_names {
        let lines: Vec<Line> = cells
            .iter()
            .filter_map(|c| {
                let run = report
                    .runs
                    .iter()
                    .find(|r| r.cell == c.record.cell && r.series.iter().any(|s| s.metric == name))?;
                let s = run.series.iter().find(|s| s.metric == name)?;
                Some(Line {
                    name: format!("{} #{}", c.name(), run.rep),
                    points: s.points.clone(),
                    colour: cell_colour(cells, c),
                    dashed: c.is_baseline,
                })
            })
            .collect();
        if lines.iter().any(|l| l.points.len() > 1) {
            out.push_str(&chart::line_chart(&LineChart {
                title: format!("{} over time (one run per cell)", metric_title(&name)),
                unit,
                x_label: "seconds".into(),
                x_categories: Vec::new(),
                lines,
                log_y: false,
                log_x: false,
                rules: Vec::new(),
                marks: Vec::new(),
            }));
        }
    }
    out.push_str("</div>");
    out
}

/// Metrics named `<prefix>_p<N>` (plus `<prefix>_max`), grouped by prefix in percentile order.
fn percentile_families(cells: &[&CellResult]) -> Vec<(String, Vec<(String, String)>)> {
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

fn setting_table(report: &Report, cells: &[&CellResult]) -> String {
    let metrics = headline(cells);
    let mut out = String::from("<table><tr><th>cell</th><th>runs</th>");
    for m in &metrics {
        let _ = write!(out, "<th>{}</th>", h(&metric_title(m)));
    }
    out.push_str("</tr>");
    for c in cells {
        let name = if c.is_baseline { format!("{} (baseline)", c.name()) } else { c.name() };
        let _ = write!(out, "<tr><td>{}</td><td>{}</td>", h(&name), h(&runs_text(&report.analysis, c)));
        if let Some(status) = status_text(c) {
            let _ = write!(out, "<td colspan=\"{}\">{}</td></tr>", metrics.len().max(1), h(&status));
            continue;
        }
        for metric in &metrics {
            match c.metric(metric) {
                Some(m) => {
                    let s = &m.summary;
                    let diff = m
                        .vs_baseline
                        .as_ref()
                        .map(|d| {
                            format!(
                                "<br>{} [{}, {}]",
                                h(&diff_text(d)),
                                units::signed_percent(d.ci.0),
                                units::signed_percent(d.ci.1)
                            )
                        })
                        .unwrap_or_default();
                    let _ = write!(
                        out,
                        "<td class=\"num\" title=\"95% CI {} – {}; CV {:.1}%\">{}{diff}</td>",
                        h(&human(s.ci.0, &m.unit)),
                        h(&human(s.ci.1, &m.unit)),
                        s.cv_pct,
                        h(&human(s.median, &m.unit))
                    );
                }
                None => out.push_str("<td class=\"muted\">—</td>"),
            }
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    for c in cells {
        for note in &c.notes {
            let _ = write!(out, "<div class=\"warn\"><b>{}</b>: {}</div>", h(&c.name()), h(note));
        }
    }
    out
}

/// The environments' setup and the facts their agents saw, one column per env/volume pair;
/// values that differ from the baseline's are highlighted.
fn facts(report: &Report) -> String {
    let mut columns: Vec<&CellResult> = Vec::new();
    for c in report.analysis.cells.iter().filter(|c| c.runs_ok > 0) {
        if !columns
            .iter()
            .any(|o| o.record.labels.env == c.record.labels.env && o.record.labels.volume == c.record.labels.volume)
        {
            columns.push(c);
        }
    }
    if columns.is_empty() {
        return String::new();
    }
    let plan_baseline = &report.analysis.plan.baseline;
    // Each column's baseline column: same rule as the numbers, ignoring the workload setting.
    let baseline_of = |c: &CellResult| {
        let own = plan_baseline.of(&c.record.labels.workload);
        let env = own.env.as_ref().unwrap_or(&c.record.labels.env);
        let volume = own.volume.as_ref().unwrap_or(&c.record.labels.volume);
        columns.iter().position(|b| b.record.labels.env == *env && b.record.labels.volume == *volume)
    };
    let value = |c: &CellResult, key: &str| c.setup.get(key).or_else(|| c.facts.get(key)).cloned();
    let keys: BTreeSet<String> = columns.iter().flat_map(|c| c.setup.keys().chain(c.facts.keys()).cloned()).collect();
    let mut out = String::from(
        "<h2 id=\"facts\">Environments side by side</h2><p class=\"meta\">What each environment and volume was, and what the agent saw inside it (from each pair's first successful run). Highlighted: different from the baseline.</p><table><tr><th>fact</th>",
    );
    for c in &columns {
        let _ = write!(out, "<th>{}</th>", h(&c.name()));
    }
    out.push_str("</tr>");
    for key in &keys {
        let _ = write!(out, "<tr><th>{}</th>", h(key));
        for c in &columns {
            let v = value(c, key);
            let base = baseline_of(c).map(|b| value(columns[b], key));
            let class = if !c.is_baseline && base.is_some_and(|b| b != v) { " class=\"diff\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", h(v.as_deref().unwrap_or("—")));
        }
        out.push_str("</tr>");
    }
    out.push_str("</table>");
    out
}

fn cost(report: &Report) -> String {
    let Some(table) = super::cost_table(report) else { return String::new() };
    let mut rows = String::new();
    for row in &table.rows {
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td>{}</tr>",
            h(&row[0]),
            h(&row[1]),
            row[2..].iter().map(|v| format!("<td class=\"num\">{}</td>", h(v))).collect::<String>()
        );
    }
    format!(
        "<h2 id=\"cost\">Cost</h2><table><tr><th>cell</th><th>metric</th><th>median</th><th>$/hour</th><th>$/million operations</th><th>$/month</th></tr>{rows}</table>"
    )
}

fn raw_links(report: &Report) -> String {
    let mut out = String::from(
        "<h2 id=\"raw\">Raw files</h2><details><summary>Every run's record and the tools' own output</summary><table><tr><th>cell</th><th>run</th><th>status</th><th>files</th></tr>",
    );
    for run in &report.runs {
        let record = format!("runs/{}/{}.json", run.cell, run.rep);
        let mut links = format!("<a href=\"{}\">run record</a>", h(&record));
        for raw in &run.raw {
            let name = raw.rsplit('/').next().unwrap_or(raw);
            let _ = write!(links, " · <a href=\"{}\">{}</a>", h(raw), h(name));
        }
        let status = match run.status {
            crate::store::Status::Ok => "ok".to_string(),
            _ => format!("{:?}: {}", run.status, crate::store::error_headline(run.error.as_deref().unwrap_or("")))
                .to_lowercase(),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{links}</td></tr>",
            h(&run.cell),
            run.rep,
            h(&status)
        );
    }
    out.push_str("</table></details>");
    out
}

/// Renders `html` to a PNG with headless Chromium (Debian's `chromium`): the top of the report,
/// `width` px wide (1280 for people to glance at; the tests also look at a phone's 390).
pub fn screenshot(html: &std::path::Path, png: &std::path::Path, width: u32) -> anyhow::Result<()> {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|b| crate::sys::find_program(b))
        .ok_or_else(|| anyhow::anyhow!("no Chromium to render the report with (apt-get install chromium)"))?;
    let profile = tempfile_dir()?;
    let finished = crate::sys::run(
        std::process::Command::new(browser).args(headless_args(&profile)).args([
            "--hide-scrollbars",
            &format!("--window-size={width},2400"),
            &format!("--screenshot={}", png.display()),
            &format!("file://{}", std::fs::canonicalize(html)?.display()),
        ]),
        crate::sys::Options { timeout: Some(std::time::Duration::from_secs(90)), ..Default::default() },
    );
    let _ = std::fs::remove_dir_all(&profile);
    let finished = finished?;
    if !finished.status.success() || !png.exists() {
        anyhow::bail!("chromium could not render {} ({}): {}", html.display(), finished.status, finished.tail(5));
    }
    Ok(())
}

/// Flags for a quiet headless Chromium on a machine without network: no first-run, sync,
/// component updates or background requests (each would try to reach Google's hosts).
pub fn headless_args(profile: &std::path::Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect()
}

fn tempfile_dir() -> anyhow::Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("isobench-chromium-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Diff;
    use crate::store::{RunRecord, Sample};

    fn diff(overhead_pct: f64, verdict: Verdict) -> Diff {
        Diff {
            baseline_median: 100.0,
            ratio: 1.0 - overhead_pct / 100.0,
            pct: -overhead_pct,
            ci: (-overhead_pct - 2.0, -overhead_pct + 2.0),
            overhead_pct,
            overhead_ci: (overhead_pct - 2.0, overhead_pct + 2.0),
            p_value: 0.01,
            verdict,
        }
    }

    #[test]
    fn heat_is_grey_within_the_noise_red_when_worse_blue_when_better_and_deeper_the_larger() {
        for verdict in [Verdict::NoSignificantDifference, Verdict::TooFewRuns] {
            assert_eq!(heat_colour(&diff(45.0, verdict)).0, "#eeeeee", "{verdict:?} is no colour");
        }
        assert_eq!(heat_colour(&diff(60.0, Verdict::Slower)), ("#b2182b".into(), "#fff"), "saturated red");
        assert_eq!(heat_colour(&diff(-3.0, Verdict::Faster)), ("#dde6ee".into(), "#222"), "the palest blue");
        let green = |pct: f64| u8::from_str_radix(&heat_colour(&diff(pct, Verdict::Slower)).0[3..5], 16).unwrap();
        assert!(green(40.0) < green(20.0), "a larger overhead is a deeper red");
    }

    fn analysis() -> (compare::Analysis, Vec<RunRecord>) {
        super::super::fixture::analysis(
            |env, rep| {
                let rate = if env == "host" { 1000.0 } else { 800.0 } + rep as f64;
                [("op_rate", rate, "op/s"), ("latency_p99", 9e6 / rate, "us"), ("latency_p50", 1e6 / rate, "us")]
                    .into_iter()
                    .chain([("latency_p999", 20e6 / rate, "us"), ("latency_max", 50e6 / rate, "us")])
                    .chain([("queue_p5", 1.0, "us")])
                    .map(|(metric, value, unit)| Sample::new(metric, value, unit))
                    .collect()
            },
            |_| Default::default(),
        )
    }

    #[test]
    fn percentile_profiles_are_the_metrics_of_one_prefix_in_percentile_order_then_max() {
        let (analysis, _) = analysis();
        let cells: Vec<&CellResult> = analysis.cells.iter().collect();
        let families = percentile_families(&cells);
        let labels: Vec<(&str, Vec<&str>)> = families
            .iter()
            .map(|(prefix, points)| (prefix.as_str(), points.iter().map(|(l, _)| l.as_str()).collect()))
            .collect();
        assert_eq!(labels, [("latency", vec!["p50", "p99", "p999", "max"])], "queue_p5 alone is no profile");
    }

    #[test]
    fn the_page_shows_each_cells_overhead_with_its_ci_and_needs_nothing_from_outside() {
        let (analysis, runs) = analysis();
        let report = Report {
            dir: std::path::PathBuf::from("/nonexistent"),
            analysis,
            checks: vec![],
            warnings: vec![],
            host: BTreeMap::new(),
            runs,
        };
        let page = render(&report);
        let runc = report.analysis.cells.iter().find(|c| c.record.labels.env == "runc").unwrap();
        let d = runc.metric("op_rate").and_then(|m| m.vs_baseline.as_ref()).unwrap();
        assert!(d.pct < -19.0 && d.pct > -21.0, "runc's rate is 20 % below the host's, not {}", d.pct);
        assert!(page.contains(&h(&diff_text(d))), "the heat map shows {}", diff_text(d));
        assert!(page.contains(&h(&format!("[{}, {}]", units::signed_percent(d.ci.0), units::signed_percent(d.ci.1)))));
        assert!(page.contains("<svg"), "charts are drawn into the page");
        for outside in ["<script", "<link", "src=\"http", "@import"] {
            assert!(!page.contains(outside), "the page opens offline: no {outside}");
        }
    }
}
