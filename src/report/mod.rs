//! Reports people read. Every format renders the same `Report` (analysis, bound checks,
//! warnings, host facts, runs); this module holds what the formats share.

pub mod chart;
pub mod export;
pub mod html;
pub mod markdown;
pub mod terminal;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::compare::{self, Analysis, BoundCheck, BoundVerdict, CellResult, Verdict, Warning};
use crate::store::{ResultSet, RunRecord};
use crate::units;

/// Everything a report shows, computed once.
pub struct Report {
    pub dir: PathBuf,
    pub analysis: Analysis,
    pub checks: Vec<BoundCheck>,
    pub warnings: Vec<Warning>,
    pub host: BTreeMap<String, String>,
    pub runs: Vec<RunRecord>,
}

impl Report {
    pub fn load(set: &ResultSet) -> Result<Report> {
        let runs = set.runs()?;
        let analysis = compare::analyze(&set.plan()?, &runs);
        let host: BTreeMap<String, String> = set.read_json("host.json").unwrap_or_default();
        Ok(Report {
            dir: set.dir.clone(),
            checks: compare::check_bounds(&analysis),
            warnings: compare::warnings(&analysis, &host),
            analysis,
            host,
            runs,
        })
    }

    pub fn count(&self, verdict: BoundVerdict) -> usize {
        self.checks.iter().filter(|c| c.verdict == verdict).count()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Md,
    Html,
    Json,
    Csv,
}

impl Format {
    pub fn parse(text: &str) -> Result<Format> {
        Ok(match text {
            "md" | "markdown" => Format::Md,
            "html" => Format::Html,
            "json" => Format::Json,
            "csv" => Format::Csv,
            other => bail!("--format {other}: use md, html, json or csv"),
        })
    }

    pub fn file_name(self) -> &'static str {
        match self {
            Format::Md => "report.md",
            Format::Html => "report.html",
            Format::Json => "report.json",
            Format::Csv => "summary.csv",
        }
    }
}

/// Writes the report in each format into the result set; returns the files written.
pub fn write(set: &ResultSet, report: &Report, formats: &[Format]) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for format in formats {
        let text = match format {
            Format::Md => markdown::render(report),
            Format::Html => html::render(report),
            Format::Json => export::json(report),
            Format::Csv => export::csv(report),
        };
        set.write(format.file_name(), text.as_bytes())?;
        written.push(set.dir.join(format.file_name()));
    }
    Ok(written)
}

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
    first.record.headline.iter().filter(|m| cells.iter().any(|c| c.metric(m).is_some())).cloned().collect()
}

/// "read_clat_p99" → "read clat p99"; "iops" → "IOPS".
pub fn metric_title(metric: &str) -> String {
    match metric {
        "iops" => "IOPS".into(),
        "bw" => "bandwidth".into(),
        m => m.replace('_', " ").replace(" iops", " IOPS").replace(" bw", " bandwidth"),
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

/// "-24%", or "~-1.2%" when the 95 % CI of the difference includes zero.
pub fn diff_text(d: &compare::Diff) -> String {
    let mark = if d.verdict == Verdict::NoSignificantDifference { "~" } else { "" };
    format!("{mark}{}", units::signed_percent(d.pct))
}

/// "52.8k op/s (-24%)": the median and its difference from the baseline.
pub fn value_with_diff(cell: &CellResult, metric: &str) -> String {
    let Some(m) = cell.metric(metric) else {
        return "—".into();
    };
    let value = units::human(m.summary.median, &m.unit);
    match &m.vs_baseline {
        Some(d) => format!("{value} ({})", diff_text(d)),
        None => value,
    }
}

/// How many runs a cell had, and for adaptive repetition whether it met the CI target.
pub fn runs_text(analysis: &Analysis, cell: &CellResult) -> String {
    let mut text = cell.runs_ok.to_string();
    if cell.runs_failed > 0 {
        text.push_str(&format!(" (+{} failed)", cell.runs_failed));
    }
    if let Some(t) = compare::target_status(analysis, cell) {
        let target = analysis.plan.repeat.target_ci_pct.unwrap_or_default();
        if t.met {
            text.push_str(&format!(" ±{:.1}%", t.half_width_pct));
        } else {
            text.push_str(&format!(" ±{:.1}% > ±{target}% target", t.half_width_pct));
        }
    }
    text
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
                    s.push_str(&" ".repeat(widths.get(i).copied().unwrap_or(0).saturating_sub(c.chars().count()) + 2));
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
        let mut out = format!("| {} |\n", self.headers.iter().map(esc).collect::<Vec<_>>().join(" | "));
        out.push_str(&format!("|{}\n", "---|".repeat(self.headers.len())));
        for row in &self.rows {
            out.push_str(&format!("| {} |\n", row.iter().map(esc).collect::<Vec<_>>().join(" | ")));
        }
        out
    }
}
