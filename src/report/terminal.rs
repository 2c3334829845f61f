//! The table `isobench run` ends with: one block per workload setting, one row per cell, the
//! headline metrics' medians with their difference from the baseline.

use super::{Table, headline, metric_title, settings, status_text, value_with_diff};
use crate::compare::{Analysis, BoundCheck};
use crate::units;

pub fn render(analysis: &Analysis, checks: &[BoundCheck]) -> String {
    let mut out = String::new();
    for (setting, cells) in settings(analysis) {
        out.push_str(&format!("\n{setting}\n"));
        let metrics = headline(&cells);
        let mut headers = vec!["env/volume".to_string(), "runs".to_string()];
        headers.extend(metrics.iter().map(|m| metric_title(m)));
        let rows = cells
            .iter()
            .map(|c| {
                let name = if c.is_baseline {
                    format!("{} (baseline)", c.name())
                } else {
                    c.name()
                };
                let mut row = vec![name, runs_text(c.runs_ok, c.runs_failed)];
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
                    c.errors[0].lines().next().unwrap_or("")
                ));
            }
            for note in &c.notes {
                out.push_str(&format!("  note ({}): {note}\n", c.name()));
            }
        }
    }
    let failed: Vec<&BoundCheck> = checks.iter().filter(|c| !c.passed).collect();
    if !checks.is_empty() {
        out.push_str(&format!(
            "\nbounds: {} of {} checks passed\n",
            checks.len() - failed.len(),
            checks.len()
        ));
        for c in failed {
            out.push_str(&format!(
                "  FAIL {}: {} overhead {} exceeds {}\n",
                c.cell,
                c.bound.metric,
                units::signed_percent(c.overhead_pct),
                units::signed_percent(c.bound.max_overhead_pct)
            ));
        }
    }
    out
}

pub fn runs_text(ok: usize, failed: usize) -> String {
    if failed == 0 {
        ok.to_string()
    } else {
        format!("{ok} (+{failed} failed)")
    }
}
