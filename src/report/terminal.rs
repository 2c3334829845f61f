//! The table `isobench run` ends with: one block per workload setting, one row per cell, the
//! headline metrics' medians with their difference from the baseline; then warnings, bounds and,
//! last, the verdict per environment.

use super::{Report, Table, headline, metric_title, runs_text, settings, status_text, value_with_diff};
use crate::compare::BoundVerdict;
use figures::units;

pub fn render(report: &Report) -> String {
    [
        setting_tables(report),
        capacity_cost_and_density(report),
        warnings(report),
        bounds(report),
        why(report),
        measured_and_verdict(report),
    ]
    .concat()
}

/// One table per setting: each cell's headline metrics against its baseline, its failures and notes.
fn setting_tables(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    for (setting, cells) in settings(analysis) {
        out.push_str(&format!("\n{setting}\n"));
        let metrics = headline(&cells);
        let mut headers = vec!["env/volume".to_string(), "runs".to_string()];
        headers.extend(metrics.iter().map(|m| metric_title(m)));
        let rows = cells
            .iter()
            .map(|c| {
                let name = if c.is_baseline { format!("{} (baseline)", c.name()) } else { c.name() };
                let mut row = vec![name, runs_text(analysis, c)];
                match status_text(c) {
                    Some(status) => row.push(status),
                    None => row.extend(metrics.iter().map(|m| value_with_diff(c, m))),
                }
                row
            })
            .collect();
        out.push_str(&Table { headers, rows }.to_text("  "));
        for c in &cells {
            if c.runs_ok > 0 && !c.errors.is_empty() {
                out.push_str(&format!(
                    "  {}: {} run(s) failed: {}\n",
                    c.name(),
                    c.runs_failed,
                    crate::store::error_headline(&c.errors[0])
                ));
            }
            for note in &c.notes {
                out.push_str(&format!("  note ({}): {note}\n", c.name()));
            }
        }
    }
    out
}

/// What the marks mean, then the capacity, money, cost and density tables where the runs have them.
fn capacity_cost_and_density(report: &Report) -> String {
    let mut out = String::new();
    out.push_str(&format!("\n({}; {})\n", super::METHOD, super::MARKS));
    if let Some(table) = super::capacity::table(report) {
        out.push_str("\ncapacity (the highest offered rate each cell sustained within its latency bound):\n");
        out.push_str(&table.to_text("  "));
    }
    if let Some((table, notes)) = super::capacity::nodes_and_money(report) {
        out.push_str("\nnodes and money for the target load:\n");
        out.push_str(&table.to_text("  "));
        for note in notes {
            out.push_str(&format!("  {note}\n"));
        }
    }
    if let Some(table) = super::cost_table(report) {
        out.push_str("\ncost:\n");
        out.push_str(&table.to_text("  "));
    }
    if let Some((table, failures)) = super::density_table(report) {
        out.push_str("\nsandboxes started together (density):\n");
        out.push_str(&table.to_text("  "));
        for f in failures {
            out.push_str(&format!("  FAILED {f}\n"));
        }
    }
    out
}

/// The warnings, grouped by cause; then where the noise came from.
fn warnings(report: &Report) -> String {
    let mut out = String::new();
    if let Some(table) = super::noise_table(report) {
        out.push_str("\nnoise by source (CV of each cell's headline metric):\n");
        out.push_str(&table.to_text("  "));
    }
    if !report.warnings.is_empty() {
        out.push_str(&format!("\nwarnings ({}):\n", report.warnings.len()));
        for group in super::grouped_warnings(&report.warnings) {
            out.push_str(&format!("  {}\n", group.text()));
        }
    }
    out
}

/// The bounds' counts and every check that did not pass.
fn bounds(report: &Report) -> String {
    let mut out = String::new();
    if !report.checks.is_empty() {
        out.push_str(&format!(
            "\nbounds: {} pass, {} fail, {} inconclusive\n",
            report.count(BoundVerdict::Pass),
            report.count(BoundVerdict::Fail),
            report.count(BoundVerdict::Inconclusive)
        ));
        for c in report.checks.iter().filter(|c| c.verdict != BoundVerdict::Pass) {
            if c.cell == crate::compare::NO_CELL {
                out.push_str(&format!("  {}: the bound on {} judged no cell\n", c.verdict.text(), c.bound.metric));
                continue;
            }
            out.push_str(&format!(
                "  {} {}: {} overhead {} ({}) against ≤ {}\n",
                c.verdict.text(),
                c.cell,
                c.bound.metric,
                units::signed_percent(c.overhead_pct),
                units::percent_interval_words(c.overhead_ci),
                units::signed_percent(c.bound.max_overhead_pct)
            ));
        }
    }
    out
}

/// The why of each cell outside the noise, and of each with too few runs for a verdict.
fn why(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    let explanations = super::explain::explain(analysis);
    if !explanations.is_empty() {
        out.push_str("\nwhy (from the sys. figures the runs recorded):\n");
        for e in &explanations {
            out.push_str(&format!("  {}\n", e.cell));
            for line in &e.lines {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    out
}

/// Last, where the eye lands when the run ends: where it was measured, and the answer.
fn measured_and_verdict(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    out.push('\n');
    if let Some(machine) = super::machine_line(&report.host) {
        out.push_str(&format!("measured on: {machine}\n"));
    }
    out.push_str(&format!("{}\n", super::order_line(&analysis.plan)));
    let (lines, against) = super::verdict(analysis);
    if !lines.is_empty() {
        out.push_str(&format!("\nverdict against {against} (difference [95% CI]; {}):\n", super::MARKS));
        let width = lines.iter().map(|l| l.subject.chars().count()).max().unwrap_or(0);
        for line in &lines {
            out.push_str(&format!("  {:width$}  {}\n", line.subject, line.items.join(" · ")));
        }
        for note in super::verdict_notes(analysis) {
            out.push_str(&format!("  {note}\n"));
        }
    }
    out
}
