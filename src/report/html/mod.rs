//! `report.html`: one self-contained file that opens offline. Overhead heatmaps, bar charts with
//! CI whiskers, latency percentile profiles, per-run time series, the environments' facts side
//! by side (differences from the baseline highlighted) and links to the raw files.

use std::collections::BTreeSet;
use std::fmt::Write;

mod charts;
mod density;
mod heatmap;

use super::{
    Analysis, Report, Table, diff_text, headline, metric_title, runs_text, settings, status_text, summary_tables,
};
use crate::compare::{self, CellResult};
use charts::setting_charts;
use density::density;
use figures::chart::style::STYLE;
use figures::chart::{self, escape as h};
use figures::units::{self, human};
use heatmap::heatmaps;

pub fn render(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = header(report);
    out.push_str(&verdict(analysis));
    out.push_str(&why(analysis));
    if let Some(table) = super::noise_table(report) {
        let _ = write!(
            out,
            "<h2 id=\"noise\">Noise by source</h2><p class=\"meta\">{}</p>{}",
            h(super::NOISE_NOTE),
            plain_table(&table)
        );
    }
    out.push_str(&warnings(report));
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
    if !report.history.is_empty() {
        let _ = write!(
            out,
            "<h2 id=\"history\">History</h2><p class=\"meta\">This result set's headline series as the history keeps them (`isobench history`).</p>{}",
            report.history
        );
    }
    out.push_str(&facts(report));
    out.push_str(&cost(report));
    out.push_str(&raw_links(report));
    out.push_str("<p class=\"meta\">Written by isobench. Every number was measured; missing ones say why.</p></main></body></html>\n");
    out
}

/// The page's head, title, method, machine and the links to its sections.
fn header(report: &Report) -> String {
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
         {}; {}</p>",
        h(&plan.suite),
        h(&plan.baseline.describe()),
        h(&plan.repeat.to_string()),
        h(super::METHOD),
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
    out
}

/// Each setting's first headline metric against the baseline, and the notes on how it was judged.
fn verdict(analysis: &Analysis) -> String {
    let mut out = String::new();
    let (lines, against) = super::verdict(analysis);
    if !lines.is_empty() {
        let _ = write!(
            out,
            "<section class=\"verdict\"><h2 id=\"verdict\">Verdict</h2><p class=\"meta\">Against {}: each setting's first headline metric, difference [95&nbsp;% CI]; {}.</p><ul>",
            h(&against),
            h(super::MARKS)
        );
        for line in &lines {
            let items: Vec<String> = line.items.iter().map(|i| format!("<span>{}</span>", h(i))).collect();
            let _ = write!(out, "<li><b>{}</b> {}</li>", h(&line.subject), items.join(" · "));
        }
        out.push_str("</ul>");
        for note in super::verdict_notes(analysis) {
            let _ = write!(out, "<p class=\"meta\">{}</p>", h(&note));
        }
        out.push_str("</section>");
    }
    out
}

/// What the runs' system figures say for each cell outside the noise.
fn why(analysis: &Analysis) -> String {
    let mut out = String::new();
    let explanations = super::explain::explain(analysis);
    if !explanations.is_empty() {
        out.push_str("<h2 id=\"why\">Why</h2><p class=\"meta\">For each cell outside the noise (and each with too few runs for a verdict, marked ?), what its runs' <code>sys.</code> figures say against its baseline's.</p><ul>");
        for e in &explanations {
            let lines: Vec<String> = e.lines.iter().map(|l| h(l)).collect();
            let _ = write!(out, "<li><b>{}</b>: {}</li>", h(&e.cell), lines.join("; "));
        }
        out.push_str("</ul>");
        out.push_str(&cost_by_part(analysis));
        out.push_str(&sampled_by_part(analysis));
    }
    out
}

fn warnings(report: &Report) -> String {
    let mut out = String::new();
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

/// CPU per operation by sampled part: one stacked bar per cell whose runs were sampled, the
/// baselines' among them, so that each sandbox's parts stand beside its baseline's.
fn sampled_by_part(analysis: &compare::Analysis) -> String {
    let sampled: Vec<(String, super::attribute::PartsPerOp)> = analysis
        .cells
        .iter()
        .filter_map(|c| {
            Some((format!("{} {}", c.name(), c.record.labels.setting()), super::attribute::sampled_per_op(c)?))
        })
        .collect();
    if sampled.is_empty() {
        return String::new();
    }
    let name = |p: &Option<crate::sys::cpu_parts::Part>| p.map_or("unexplained", |p| p.name()).to_string();
    // The parts some cell spent CPU in (every run records every part, most at 0).
    let mut parts: Vec<Option<crate::sys::cpu_parts::Part>> =
        sampled.iter().flat_map(|(_, ps)| ps.iter().filter(|(_, us)| *us > 0.0).map(|(p, _)| *p)).collect();
    // The named parts in their order, the unexplained rest last.
    parts.sort_by_key(|p| p.map_or(usize::MAX, |p| p as usize));
    parts.dedup();
    let rows = sampled
        .iter()
        .map(|(label, ps)| chart::Stack {
            label: label.clone(),
            segments: parts
                .iter()
                .map(|p| (name(p), ps.iter().find(|(q, _)| q == p).map_or(0.0, |(_, us)| *us)))
                .collect(),
        })
        .collect();
    let svg = chart::stacked_bar_chart(&chart::StackedChart {
        title: "CPU per operation, sampled by part".into(),
        unit: "us".into(),
        parts: parts.iter().map(name).collect(),
        rows,
    });
    format!(
        "<div class=\"charts\">{svg}</div><p class=\"meta\">Each cell's CPU per operation split by where its samples fell (<code>perf record</code> on the CPU clock over the measured phase, each sample resolved to a part by its process and call chain): the workload's own code, gVisor's platform, system calls, network stack, files, memory and Go runtime, a VM's vCPUs and devices, the host kernel's time, and what the samples leave unexplained.</p>"
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
        "<h2 id=\"summary\">Summary</h2><p class=\"meta\">Per workload, each setting's first headline metric: the geometric mean of its runs (% against the baseline [95% CI]).</p>",
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
            "<tr><td>{}</td><td>{}</td><td class=\"num\">≤ {}</td><td class=\"num\">{} {}</td><td class=\"{}\">{}</td></tr>",
            h(&c.cell),
            h(&c.bound.metric),
            units::signed_percent(c.bound.max_overhead_pct),
            units::signed_percent(c.overhead_pct),
            units::percent_interval(c.overhead_ci),
            c.verdict.text().to_lowercase(),
            c.verdict.text()
        );
    }
    out.push_str("</table>");
    out
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
                        .map(|d| format!("<br>{} {}", h(&diff_text(d)), units::percent_interval(d.ci)))
                        .unwrap_or_default();
                    let _ = write!(
                        out,
                        "<td class=\"num\" title=\"95% CI {}; CV {:.1}%\">{}{diff}</td>",
                        h(&units::value_interval(s.ci, &m.unit)),
                        s.cv_pct,
                        h(&human(s.center, &m.unit))
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
    use super::charts::percentile_families;
    use super::*;
    use crate::store::{RunRecord, Sample};

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
        let report = crate::report::fixture::report("/nonexistent", analysis());
        let page = render(&report);
        let runc = report.analysis.cells.iter().find(|c| c.record.labels.env == "runc").unwrap();
        let d = runc.metric("op_rate").and_then(|m| m.vs_baseline.as_ref()).unwrap();
        assert!(d.pct < -19.0 && d.pct > -21.0, "runc's rate is 20 % below the host's, not {}", d.pct);
        assert!(page.contains(&h(&diff_text(d))), "the heat map shows {}", diff_text(d));
        assert!(page.contains(&h(&units::percent_interval(d.ci))));
        assert!(page.contains("<svg"), "charts are drawn into the page");
        for outside in ["<script", "<link", "src=\"http", "@import"] {
            assert!(!page.contains(outside), "the page opens offline: no {outside}");
        }
    }
}
