//! `report.md`: per workload setting, each headline metric of each cell with its median,
//! min–max, number of runs and % difference against the baseline; then bounds, failures and
//! every metric measured.

use std::collections::BTreeMap;

use super::{Table, headline, metric_title, settings, status_text};
use crate::compare::{Analysis, BoundCheck};
use crate::units::{self, human};

pub fn render(
    analysis: &Analysis,
    checks: &[BoundCheck],
    host: &BTreeMap<String, String>,
) -> String {
    let plan = &analysis.plan;
    let mut out = format!("# isobench report: {}\n\n", plan.suite);
    out.push_str(&format!(
        "Baseline: env **{}**, volume **{}**. Medians over the runs of each cell; \
         \"% difference\" is (cell − baseline) / baseline of the medians.\n\n",
        plan.baseline_env, plan.baseline_volume
    ));
    let host_line: Vec<String> = [
        "os",
        "kernel.release",
        "cpu.model",
        "cpus",
        "fio.version",
        "isobench.version",
    ]
    .iter()
    .filter_map(|k| host.get(*k).map(|v| format!("{k}: {v}")))
    .collect();
    if !host_line.is_empty() {
        out.push_str(&format!("Host: {}\n", host_line.join(" · ")));
    }
    for (setting, cells) in settings(analysis) {
        out.push_str(&format!("\n## {setting}\n\n"));
        let headers = [
            "Cell",
            "Metric",
            "Median",
            "Min–max",
            "Runs",
            "Baseline",
            "% difference",
        ]
        .map(String::from)
        .to_vec();
        let mut rows = Vec::new();
        for c in &cells {
            let name = if c.is_baseline {
                format!("{} (baseline)", c.name())
            } else {
                c.name()
            };
            if let Some(status) = status_text(c) {
                rows.push(vec![
                    name,
                    "—".into(),
                    status,
                    String::new(),
                    "0".into(),
                    String::new(),
                    String::new(),
                ]);
                continue;
            }
            for metric in headline(&cells) {
                let Some(m) = c.metric(&metric) else { continue };
                let (baseline, diff) = match &m.vs_baseline {
                    Some(d) => (
                        human(d.baseline_median, &m.unit),
                        units::signed_percent(d.pct),
                    ),
                    None if c.is_baseline => ("—".into(), "baseline".into()),
                    None => ("—".into(), "no baseline".into()),
                };
                rows.push(vec![
                    name.clone(),
                    metric_title(&metric),
                    human(m.summary.median, &m.unit),
                    format!(
                        "{} – {}",
                        human(m.summary.min, &m.unit),
                        human(m.summary.max, &m.unit)
                    ),
                    m.summary.n.to_string(),
                    baseline,
                    diff,
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
    if !checks.is_empty() {
        out.push_str("\n## Bounds\n\n");
        let rows = checks
            .iter()
            .map(|c| {
                vec![
                    c.cell.clone(),
                    c.bound.metric.clone(),
                    format!("≤ {}", units::signed_percent(c.bound.max_overhead_pct)),
                    units::signed_percent(c.overhead_pct),
                    if c.passed {
                        "pass".into()
                    } else {
                        "**FAIL**".into()
                    },
                ]
            })
            .collect();
        let headers = ["Cell", "Metric", "Max overhead", "Overhead", "Verdict"]
            .map(String::from)
            .to_vec();
        out.push_str(&Table { headers, rows }.to_markdown());
    }
    let troubled: Vec<_> = analysis
        .cells
        .iter()
        .filter(|c| !c.errors.is_empty() || c.skipped.is_some())
        .collect();
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
    out.push_str("\n## All metrics\n\n");
    let headers = [
        "Cell",
        "Metric",
        "Median",
        "Min–max",
        "CV",
        "Runs",
        "% difference",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for c in analysis.cells.iter().filter(|c| c.runs_ok > 0) {
        for m in &c.metrics {
            rows.push(vec![
                c.record.cell.clone(),
                m.metric.clone(),
                human(m.summary.median, &m.unit),
                format!(
                    "{} – {}",
                    human(m.summary.min, &m.unit),
                    human(m.summary.max, &m.unit)
                ),
                format!("{:.1}%", m.summary.cv_pct),
                m.summary.n.to_string(),
                m.vs_baseline
                    .as_ref()
                    .map(|d| units::signed_percent(d.pct))
                    .unwrap_or_default(),
            ]);
        }
    }
    out.push_str(&Table { headers, rows }.to_markdown());
    out
}
