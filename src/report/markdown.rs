//! `report.md`: the verdict per environment first; then per workload setting, each headline metric of each cell with its median and
//! 95 % CI, min–max, runs and % difference from the baseline (with its CI and a verdict); then
//! warnings, bounds, cost, failures and every metric measured.

use super::{
    Report, Table, density_table, diff_text, headline, metric_title, runs_text, settings, status_text, summary_tables,
};
use figures::units::{self, human};

fn ci(ci: Option<(f64, f64)>, unit: &str) -> String {
    format!("[{}]", units::value_interval(ci, unit))
}

fn pct_ci(ci: Option<(f64, f64)>) -> String {
    units::percent_interval(ci)
}

pub fn render(report: &Report) -> String {
    [
        header(report),
        verdict_why_and_warnings(report),
        summary_capacity_and_density(report),
        setting_tables(report),
        bounds(report),
        cost_section(report),
        failed_and_skipped(report),
        all_metrics(report),
    ]
    .concat()
}

/// The title, what the figures are, the host, the machine and the order.
fn header(report: &Report) -> String {
    let analysis = &report.analysis;
    let plan = &analysis.plan;
    let mut out = format!("# isobench report: {}\n\n", plan.suite);
    out.push_str(&format!(
        "Baseline: {}. Method: {}; {}. \
         Repetitions: {}.\n\n",
        plan.baseline.describe(),
        super::METHOD,
        super::MARKS,
        plan.repeat
    ));

    let host_line: Vec<String> =
        ["os", "kernel.release", "cpu.model", "cpus", "fio.version", "isobench.version", "isobench.git"]
            .iter()
            .filter_map(|k| report.host.get(*k).map(|v| format!("{k}: {v}")))
            .collect();
    if !host_line.is_empty() {
        out.push_str(&format!("Host: {}\n", host_line.join(" · ")));
    }
    if let Some(machine) = super::machine_line(&report.host) {
        out.push_str(&format!("\nMachine: {machine}\n"));
    }
    out.push_str(&format!("\n{}\n", super::order_line(plan)));
    out
}

/// The verdict per setting, the why of each cell outside the noise, and the warnings.
fn verdict_why_and_warnings(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    let (lines, against) = super::verdict(analysis);
    if !lines.is_empty() {
        out.push_str(&format!(
            "\n## Verdict\n\nAgainst {against}: each setting's first headline metric, difference [95% CI].\n\n"
        ));
        for line in &lines {
            out.push_str(&format!("- **{}**: {}\n", line.subject, line.items.join(" · ")));
        }
        for note in super::verdict_notes(analysis) {
            out.push_str(&format!("\n{note}\n"));
        }
    }
    let explanations = super::explain::explain(analysis);
    if !explanations.is_empty() {
        out.push_str("\n## Why\n\nFor each cell outside the noise (and each with too few runs for a verdict, marked `?`), what its runs' `sys.` figures say against its baseline's.\n\n");
        for e in &explanations {
            out.push_str(&format!("- **{}**: {}\n", e.cell, e.lines.join("; ")));
        }
    }
    if let Some(table) = super::noise_table(report) {
        out.push_str(&format!("\n## Noise by source\n\n{}\n\n{}", super::NOISE_NOTE, table.to_markdown()));
    }
    if !report.warnings.is_empty() {
        out.push_str("\n## Warnings\n\n");
        for group in super::grouped_warnings(&report.warnings) {
            out.push_str(&format!("- {}\n", group.text()));
        }
    }
    out
}

/// The summary per workload, and the capacity, money and density sections where the runs have them.
fn summary_capacity_and_density(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    out.push_str("\n## Summary\n\nPer workload, each setting's first headline metric: the geometric mean of its runs (% against the baseline [95% CI]).\n");
    for (workload, table) in summary_tables(analysis) {
        out.push_str(&format!("\n### {workload}\n\n{}", table.to_markdown()));
    }
    if let Some(table) = super::capacity::table(report) {
        out.push_str("\n## Capacity\n\nThe highest offered rate each cell sustained with its latency percentile within the bound (every step of the search is in samples.csv), median [95% CI] over the runs.\n\n");
        out.push_str(&table.to_markdown());
    }
    if let Some((table, notes)) = super::capacity::nodes_and_money(report) {
        out.push_str("\n## Nodes and money\n\n");
        out.push_str(&table.to_markdown());
        for note in notes {
            out.push_str(&format!("\n{note}\n"));
        }
    }
    if let Some((table, failures)) = density_table(report) {
        out.push_str("\n## Density\n\nSandboxes started together behind a barrier. Start: from creating a sandbox to its agent being up; host memory: the PSS of its processes (runtime, QEMU, gVisor's sentry and gofer) while all were up, before the workload began; per sandbox: the spread between them (a starved one is the minimum). Medians over the runs.\n\n");
        out.push_str(&table.to_markdown());
        if !failures.is_empty() {
            out.push_str("\nFailed sandboxes:\n\n");
            for f in failures {
                out.push_str(&format!("- {f}\n"));
            }
        }
    }
    out
}

/// One table per setting: each cell's headline metrics against its baseline, and its notes.
fn setting_tables(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    for (setting, cells) in settings(analysis) {
        out.push_str(&format!("\n## {setting}\n\n"));
        let headers = [
            "Cell",
            "Runs",
            "Metric",
            "Geometric mean [95% CI]",
            "Min–max",
            "Baseline",
            "% difference [95% CI]",
            "Verdict",
        ]
        .map(String::from)
        .to_vec();
        let mut rows = Vec::new();
        for c in &cells {
            let name = if c.is_baseline { format!("{} (baseline)", c.name()) } else { c.name() };
            if let Some(status) = status_text(c) {
                rows.push(vec![
                    name,
                    runs_text(analysis, c),
                    "—".into(),
                    status,
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
                continue;
            }
            for metric in headline(&cells) {
                let Some(m) = c.metric(&metric) else { continue };
                let s = &m.summary;
                let (baseline, diff, verdict) = match &m.vs_baseline {
                    Some(d) => (
                        human(d.baseline_center, &m.unit),
                        format!("{} {}", diff_text(d), pct_ci(d.ci)),
                        d.verdict.text().to_string(),
                    ),
                    None if c.is_baseline => ("—".into(), "baseline".into(), String::new()),
                    None => ("—".into(), "no baseline".into(), String::new()),
                };
                rows.push(vec![
                    name.clone(),
                    runs_text(analysis, c),
                    metric_title(&metric),
                    format!("{} {}", human(s.center, &m.unit), ci(s.ci, &m.unit)),
                    format!("{} – {}", human(s.min, &m.unit), human(s.max, &m.unit)),
                    baseline,
                    diff,
                    verdict,
                ]);
            }
        }
        out.push_str(&Table { headers, rows }.to_markdown());
        for c in &cells {
            for note in &c.notes {
                out.push_str(&format!("\n> Note ({}): {note}\n", c.name()));
            }
        }
    }
    out
}

/// The bounds' verdicts, where the suite has bounds.
fn bounds(report: &Report) -> String {
    let mut out = String::new();
    if !report.checks.is_empty() {
        out.push_str("\n## Bounds\n\nA cell passes when the whole 95 % CI of its overhead is within the bound, fails when the whole CI is beyond it, and is inconclusive otherwise.\n\n");
        let rows = report
            .checks
            .iter()
            .map(|c| {
                vec![
                    c.cell.clone(),
                    c.bound.metric.clone(),
                    format!("≤ {}", units::signed_percent(c.bound.max_overhead_pct)),
                    format!("{} {}", units::signed_percent(c.overhead_pct), pct_ci(c.overhead_ci)),
                    c.verdict.text().into(),
                ]
            })
            .collect();
        let headers = ["Cell", "Metric", "Max overhead", "Overhead [95% CI]", "Verdict"].map(String::from).to_vec();
        out.push_str(&Table { headers, rows }.to_markdown());
    }
    out
}

/// The cells that failed or were skipped, and why.
fn failed_and_skipped(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    let troubled: Vec<_> = analysis.cells.iter().filter(|c| !c.errors.is_empty() || c.skipped.is_some()).collect();
    if !troubled.is_empty() {
        out.push_str("\n## Failed and skipped cells\n\n");
        for c in troubled {
            if let Some(why) = &c.skipped {
                out.push_str(&format!("- `{}` skipped: {why}\n", c.record.cell));
            }
            for e in &c.errors {
                out.push_str(&format!(
                    "- `{}` failed ({} of {} runs):\n\n  ```\n  {}\n  ```\n",
                    c.record.cell,
                    c.runs_failed,
                    c.runs_failed + c.runs_ok,
                    e.replace('\n', "\n  ")
                ));
            }
        }
    }
    out
}

/// Every metric of every cell that ran.
fn all_metrics(report: &Report) -> String {
    let analysis = &report.analysis;
    let mut out = String::new();
    out.push_str("\n## All metrics\n\n");
    let headers = ["Cell", "Metric", "Geometric mean [95% CI]", "Min–max", "CV", "Runs", "% difference [95% CI]", "p"]
        .map(String::from)
        .to_vec();
    let mut rows = Vec::new();
    for c in analysis.cells.iter().filter(|c| c.runs_ok > 0) {
        for m in &c.metrics {
            let s = &m.summary;
            rows.push(vec![
                c.record.cell.clone(),
                m.metric.clone(),
                format!("{} {}", human(s.center, &m.unit), ci(s.ci, &m.unit)),
                format!("{} – {}", human(s.min, &m.unit), human(s.max, &m.unit)),
                format!("{:.1}%", s.cv_pct),
                s.n.to_string(),
                m.vs_baseline.as_ref().map(|d| format!("{} {}", diff_text(d), pct_ci(d.ci))).unwrap_or_default(),
                m.vs_baseline.as_ref().map(|d| format!("{:.3}", d.p_value)).unwrap_or_default(),
            ]);
        }
    }
    out.push_str(&Table { headers, rows }.to_markdown());
    out
}

fn cost_section(report: &Report) -> String {
    super::cost_table(report).map_or_else(String::new, |table| format!("\n## Cost\n\n{}", table.to_markdown()))
}
