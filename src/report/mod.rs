//! Reports people read. Every format starts from the same `compare::Analysis`; this module
//! holds what they share: grouping cells by workload setting and a plain table model.

pub mod markdown;
pub mod terminal;

use crate::compare::{Analysis, CellResult};
use crate::units;

/// Cells grouped by workload setting (workload + parameters), in plan order.
pub fn settings(analysis: &Analysis) -> Vec<(String, Vec<&CellResult>)> {
    let mut groups: Vec<(String, Vec<&CellResult>)> = Vec::new();
    for cell in &analysis.cells {
        let setting = cell.record.labels.setting();
        match groups.iter_mut().find(|(s, _)| *s == setting) {
            Some((_, cells)) => cells.push(cell),
            None => groups.push((setting, vec![cell])),
        }
    }
    groups
}

/// The headline metrics that at least one of `cells` measured.
pub fn headline(cells: &[&CellResult]) -> Vec<String> {
    let Some(first) = cells.first() else {
        return Vec::new();
    };
    first
        .record
        .headline
        .iter()
        .filter(|m| cells.iter().any(|c| c.metric(m).is_some()))
        .cloned()
        .collect()
}

/// "read_clat_p99" → "read clat p99"; "iops" → "IOPS".
pub fn metric_title(metric: &str) -> String {
    match metric {
        "iops" => "IOPS".into(),
        "bw" => "bandwidth".into(),
        m => m
            .replace('_', " ")
            .replace(" iops", " IOPS")
            .replace(" bw", " bandwidth"),
    }
}

/// What a cell shows instead of numbers when it has none.
pub fn status_text(cell: &CellResult) -> Option<String> {
    if cell.runs_ok > 0 {
        return None;
    }
    if let Some(why) = &cell.skipped {
        return Some(format!("skipped: {why}"));
    }
    match cell.errors.first() {
        Some(e) => Some(format!("failed: {}", e.lines().next().unwrap_or(e))),
        None => Some("not run".into()),
    }
}

/// "52.8k op/s (-24%)": the median, and its difference from the baseline.
pub fn value_with_diff(cell: &CellResult, metric: &str) -> String {
    let Some(m) = cell.metric(metric) else {
        return "—".into();
    };
    let value = units::human(m.summary.median, &m.unit);
    match &m.vs_baseline {
        Some(d) => format!("{value} ({})", units::signed_percent(d.pct)),
        None => value,
    }
}

/// A table of text: a header row and body rows.
pub struct Table {
    pub headers: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Columns padded to their widest entry, two spaces apart.
    pub fn to_text(&self, indent: &str) -> String {
        let columns = self.headers.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([self.headers[i].chars().count()])
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..columns).map(width).collect();
        let line = |cells: &[String]| {
            let mut s = indent.to_string();
            for (i, c) in cells.iter().enumerate() {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(widths[i] - c.chars().count() + 2));
                }
            }
            s.trim_end().to_string()
        };
        let mut out = line(&self.headers);
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }

    pub fn to_markdown(&self) -> String {
        let esc = |c: &String| c.replace('|', "\\|").replace('\n', " ");
        let mut out = format!(
            "| {} |\n",
            self.headers.iter().map(esc).collect::<Vec<_>>().join(" | ")
        );
        out.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for row in &self.rows {
            out.push_str(&format!(
                "| {} |\n",
                row.iter().map(esc).collect::<Vec<_>>().join(" | ")
            ));
        }
        out
    }
}
