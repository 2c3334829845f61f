//! Reports people read. Every format renders the same `Report` (analysis, bound checks,
//! warnings, host facts, runs); this module holds what the formats share.

pub mod attribute;
pub mod capacity;
pub mod explain;
pub mod export;
pub mod functions;
pub mod html;
mod machine;
pub mod markdown;
pub mod terminal;

pub use machine::{machine_line, order_line};

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::compare::{self, Analysis, BoundCheck, BoundVerdict, CellResult, Verdict, Warning};
use crate::store::{ResultSet, RunRecord};
use figures::units;

/// Everything a report shows, computed once.
pub struct Report {
    pub dir: PathBuf,
    pub analysis: Analysis,
    pub checks: Vec<BoundCheck>,
    pub warnings: Vec<Warning>,
    pub host: BTreeMap<String, String>,
    pub runs: Vec<RunRecord>,
    /// The history's trend charts of this result set's series (HTML), where its caller has them.
    pub history: String,
}

impl Report {
    pub fn load(set: &ResultSet) -> Result<Report> {
        let runs = set.runs()?;
        let analysis = compare::analyze(&set.plan()?, &runs);
        let host: BTreeMap<String, String> = set.read_json("host.json").unwrap_or_default();
        Ok(Report {
            dir: set.dir.clone(),
            checks: compare::check_bounds(&analysis),
            warnings: compare::warnings(&analysis, &host, &runs),
            analysis,
            host,
            runs,
            history: String::new(),
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

/// The answer a reader wants first: per environment and volume that is not a baseline, each
/// workload setting's first headline metric against its baseline, with the difference's 95 % CI.
pub struct VerdictLine {
    /// "runsc/ext4".
    pub subject: String,
    /// "fio rw=randread IOPS -38% [-41%, -35%]", or why the setting has no number.
    pub items: Vec<String>,
}

/// The verdict lines and what they are compared with ("host/ext4", or "each cell's baseline").
pub fn verdict(analysis: &Analysis) -> (Vec<VerdictLine>, String) {
    let mut lines: Vec<VerdictLine> = Vec::new();
    let mut baselines: Vec<String> = Vec::new();
    for cell in analysis.cells.iter().filter(|c| !c.is_baseline) {
        let setting = cell.record.labels.setting();
        let item = match status_text(cell) {
            Some(status) => format!("{setting}: {status}"),
            None => {
                let metric = cell.record.headline.iter().find_map(|m| cell.metric(m));
                let title = |metric: &str| match metric {
                    "capacity" => capacity::title(cell).unwrap_or_else(|| metric_title(metric)),
                    _ => metric_title(metric),
                };
                match metric.and_then(|m| Some((m, m.vs_baseline.as_ref()?))) {
                    Some((m, d)) if d.verdict == Verdict::TooFewRuns => {
                        format!("{setting} {} {} (too few runs for a verdict)", title(&m.metric), diff_text(d))
                    }
                    Some((m, d)) => {
                        format!("{setting} {} {} {}", title(&m.metric), diff_text(d), units::percent_interval(d.ci))
                    }
                    None => format!("{setting}: no baseline to compare with"),
                }
            }
        };
        if let Some(base) = cell.baseline.map(|b| analysis.cells[b].name())
            && !baselines.contains(&base)
        {
            baselines.push(base);
        }
        // Which build of the runtime and how it runs: two gVisors a year apart, or on two
        // platforms, differ more than most sandboxes.
        let platform = ["runtime.platform", "runtime.variant"]
            .iter()
            .filter_map(|k| {
                cell.setup
                    .get(*k)
                    .map(|v| if *k == "runtime.platform" { format!(", platform {v}") } else { format!(", {v}") })
            })
            .collect::<String>();
        let subject = match cell.setup.get("runtime.version").and_then(|v| v.lines().next()) {
            Some(version) if version != "unknown" => format!("{} ({version}{platform})", cell.name()),
            _ => cell.name(),
        };
        match lines.iter_mut().find(|l| l.subject == subject) {
            Some(line) => line.items.push(item),
            None => lines.push(VerdictLine { subject, items: vec![item] }),
        }
    }
    let against = match baselines.as_slice() {
        [one] => one.clone(),
        _ => "each cell's baseline".to_string(),
    };
    (lines, against)
}

/// How the judged cells' blocks ran where they ran in slices: which workloads, and the design,
/// so that a reader knows a run's figure is its slices' and the interval one over blocks.
fn slices_note(judged: &[&CellResult]) -> Option<String> {
    let mut sliced: Vec<(String, String)> = Vec::new();
    for cell in judged {
        let Some(design) = cell.setup.get(crate::store::SLICES_SETUP) else { continue };
        let workload = cell.record.labels.workload.clone();
        if !sliced.iter().any(|(w, _)| *w == workload) {
            sliced.push((workload, design.clone()));
        }
    }
    let unsliced: Vec<&&CellResult> =
        judged.iter().filter(|c| !c.setup.contains_key(crate::store::SLICES_SETUP)).collect();
    // Why a Cassandra started for each run is not sliced (docs/statistics.md); a user's own is
    // "external …", and the other databases have no JIT.
    let why = if unsliced.iter().any(|c| c.setup.get("server.kind").is_some_and(|k| k == "cassandra")) {
        ", a Cassandra node started for each run: its JIT compiles through a node's first minute and the sides' \
         ratio moves with it, so slices of servers that stayed up would each pair a later stage of that climb"
    } else {
        ""
    };
    let others = if unsliced.is_empty() {
        String::new()
    } else {
        format!("; the other workloads ran each cell's run at once, back to back in its block{why}")
    };
    (!sliced.is_empty()).then(|| {
        let each: Vec<String> = sliced.iter().map(|(w, design)| format!("{w}: {design}")).collect();
        format!(
            "Interleaved in slices, each run's figure the geometric mean of its slices and each block one pair ({}){others}.",
            each.join("; "),
        )
    })
}

/// What the verdict rests on, in sentences every format prints under it: how the differences
/// were estimated (paired by round, or not and why), the precision each reached against the
/// suite's goal, and how many false verdicts the A/A check gave.
pub fn verdict_notes(analysis: &Analysis) -> Vec<String> {
    let mut notes = Vec::new();
    let judged: Vec<(&CellResult, &str, &compare::Diff)> = analysis
        .cells
        .iter()
        .filter(|c| !c.is_baseline)
        .filter_map(|c| compare::precision::verdict_diff(c).map(|(m, d)| (c, m, d)))
        .collect();
    let unpaired: Vec<String> = judged
        .iter()
        .filter(|(_, _, d)| d.pairing == figures::stats::Pairing::Unpaired)
        .map(|(c, _, d)| format!("{} {} ({})", c.name(), c.record.labels.setting(), d.method_text()))
        .collect();
    let rounds = |ds: &mut dyn Iterator<Item = usize>| {
        let all: Vec<usize> = ds.collect();
        match (all.iter().min(), all.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => format!("{lo} rounds"),
            (Some(lo), Some(hi)) => format!("{lo}–{hi} rounds"),
            _ => String::new(),
        }
    };
    if !judged.is_empty() {
        let paired = judged.len() - unpaired.len();
        let mut text = match paired {
            0 => "No difference is paired by round".to_string(),
            _ if unpaired.is_empty() => format!(
                "Each difference is paired by round: each run against the baseline's run of its block ({})",
                rounds(&mut judged.iter().map(|(_, _, d)| d.n))
            ),
            _ => format!("{paired} of {} differences are paired by round", judged.len()),
        };
        if !unpaired.is_empty() {
            text.push_str(&format!("; unpaired (the two sides' runs as independent samples): {}", unpaired.join("; ")));
        }
        notes.push(text + ".");
        notes.extend(slices_note(&judged.iter().map(|(c, _, _)| *c).collect::<Vec<_>>()));
    }
    notes.extend(precision_note(analysis));
    let twins: Vec<&CellResult> = analysis.cells.iter().filter(|c| c.record.twin).collect();
    if !twins.is_empty() {
        let (mut called, mut compared) = (0, 0);
        for c in &twins {
            for m in c.metrics.iter().filter(|m| c.record.headline.contains(&m.metric)) {
                if let Some(d) = m.vs_baseline.as_ref().filter(|d| d.verdict != Verdict::TooFewRuns) {
                    compared += 1;
                    called += usize::from(matches!(d.verdict, Verdict::Faster | Verdict::Slower));
                }
            }
        }
        let names: Vec<String> = twins
            .iter()
            .map(|c| c.record.labels.env.clone())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        notes.push(match compared {
            0 => format!("A/A check ({}, the baseline's twin): no comparison had the runs for a verdict.", names.join(", ")),
            _ => format!(
                "A/A check ({}, the baseline's twin): {called} of {compared} headline comparisons called a difference ({:.0}%) where there is none; at 95% about 1 in 20 would be by chance.",
                names.join(", "),
                called as f64 / compared as f64 * 100.0
            ),
        });
    }
    notes
}

/// What each comparison reached against the suite's precision goal, and what a missed one would take.
fn precision_note(analysis: &Analysis) -> Option<String> {
    let goal = analysis.plan.precision.as_ref()?;
    let standings = compare::precision::standings(analysis, goal.half_width);
    let each: Vec<String> = standings
        .iter()
        .map(|s| {
            let c = &analysis.cells[s.cell];
            let mut text = format!("{} {} ±{}", c.name(), c.record.labels.setting(), units::sig3(s.half_width));
            text.push_str(&format!(" ({} rounds", s.rounds));
            if !s.met {
                let why = if s.rounds as u32 >= goal.max_rounds { "max_rounds reached" } else { "the budget ran out" };
                text.push_str(&format!(
                    "; missed by {} points: {why}",
                    if s.half_width.is_finite() { units::sig3(s.half_width - goal.half_width) } else { "all".into() }
                ));
                let takes = compare::precision::rounds_to_reach(s.half_width, s.rounds, goal.half_width);
                text.push_str(&match takes {
                    Some(m) => format!("; at this noise about {m} rounds would reach it"),
                    None if s.half_width.is_finite() => "; at this noise not within 1000 rounds".into(),
                    None => String::new(),
                });
            }
            text + ")"
        })
        .collect();
    let met = standings.iter().filter(|s| s.met).count();
    Some(format!(
        "Precision goal ±{}% (each difference's 95% CI half-width, in points): met by {met} of {}: {}.",
        goal.half_width,
        standings.len(),
        each.join(", ")
    ))
}

/// Warnings with one cause said once: the first in full, then the other cells it was seen in.
pub struct WarningGroup<'a> {
    pub first: &'a Warning,
    pub also: Vec<&'a str>,
}

pub fn grouped_warnings(warnings: &[Warning]) -> Vec<WarningGroup<'_>> {
    let mut groups: Vec<WarningGroup> = Vec::new();
    for w in warnings {
        match groups.iter_mut().find(|g| g.first.cause == w.cause) {
            Some(g) => g.also.push(&w.cell),
            None => groups.push(WarningGroup { first: w, also: Vec::new() }),
        }
    }
    groups
}

impl WarningGroup<'_> {
    /// "cell: message", and "(also in 3 more cells: a, b, c)" when it repeats.
    pub fn text(&self) -> String {
        let mut text = format!("{}: {}", self.first.cell, self.first.message);
        if !self.also.is_empty() {
            let n = self.also.len();
            text.push_str(&format!(
                " (the same in {n} more cell{}: {})",
                if n == 1 { "" } else { "s" },
                self.also.join(", ")
            ));
        }
        text
    }
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
        Some(e) => Some(format!("failed: {}", crate::store::error_headline(e))),
        None => Some("not run".into()),
    }
}

/// "-24%", "~-1.2%" when the 95 % CI of the difference includes zero, "-46%?" when either
/// side has too few runs for a CI to say anything.
pub fn diff_text(d: &compare::Diff) -> String {
    match d.verdict {
        Verdict::NoSignificantDifference => format!("~{}", units::signed_percent(d.pct)),
        Verdict::TooFewRuns => format!("{}?", units::signed_percent(d.pct)),
        Verdict::Faster | Verdict::Slower => units::signed_percent(d.pct),
    }
}

/// What the marks mean, as every format says it.
/// What every figure and difference is, as `compare` and `stats` make them: every format opens
/// with these words (a test holds them to the method).
pub const METHOD: &str = "each figure is the geometric mean of a cell's runs with a 95% t interval on their logarithms; \
     % difference = (cell − baseline) / baseline, its 95% t interval from each run's ratio to the baseline's run of its \
     block (paired), or from the two sides' runs apart (Welch) where a run lost its partner";

pub const MARKS: &str = "~ = within the noise: the 95% CI of the difference includes 0; ? = too few runs for a verdict (fewer than 3 on a side)";

/// "52.8k op/s (-24%)": the cell's figure and its difference from the baseline.
pub fn value_with_diff(cell: &CellResult, metric: &str) -> String {
    let Some(m) = cell.metric(metric) else {
        return "—".into();
    };
    let value = units::human(m.summary.center, &m.unit);
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

/// "52.8k op/s (-24% [-27%, -21%])": the cell's figure, its difference from the baseline and
/// the difference's 95 % CI.
pub fn value_with_diff_ci(cell: &CellResult, metric: &str) -> String {
    let Some(m) = cell.metric(metric) else {
        return status_text(cell).unwrap_or_else(|| "—".into());
    };
    let value = units::human(m.summary.center, &m.unit);
    match &m.vs_baseline {
        Some(d) => {
            format!("{value} ({} {})", diff_text(d), units::percent_interval(d.ci))
        }
        None if cell.is_baseline => format!("{value} (baseline)"),
        None => value,
    }
}

/// The published studies' tables: per workload, a row per setting and a column per
/// environment/volume, each holding the setting's first headline metric with its % against
/// the baseline and that difference's CI.
pub fn summary_tables(analysis: &Analysis) -> Vec<(String, Table)> {
    let mut workloads: Vec<&str> = Vec::new();
    for c in &analysis.cells {
        if !workloads.contains(&c.record.labels.workload.as_str()) {
            workloads.push(&c.record.labels.workload);
        }
    }
    workloads
        .into_iter()
        .map(|workload| {
            let groups: Vec<(String, Vec<&CellResult>)> = settings(analysis)
                .into_iter()
                .filter(|(_, cells)| cells[0].record.labels.workload == workload)
                .collect();
            let mut columns: Vec<String> = Vec::new();
            for c in groups.iter().flat_map(|(_, cells)| cells) {
                if !columns.contains(&c.name()) {
                    columns.push(c.name());
                }
            }
            let mut headers = vec!["Setting".to_string(), "Metric".to_string()];
            headers.extend(columns.iter().cloned());
            let rows = groups
                .iter()
                .map(|(setting, cells)| {
                    let metric = headline(cells).into_iter().next().unwrap_or_default();
                    let mut row = vec![setting.trim_start_matches(workload).trim().to_string(), metric_title(&metric)];
                    if row[0].is_empty() {
                        row[0] = workload.to_string();
                    }
                    row.extend(columns.iter().map(|col| {
                        cells
                            .iter()
                            .find(|c| c.name() == *col)
                            .map_or(String::new(), |c| value_with_diff_ci(c, &metric))
                    }));
                    row
                })
                .collect();
            (workload.to_string(), Table { headers, rows })
        })
        .collect()
}

/// Each cell's noise by source (`compare::noise`), with the lever that narrows its CI most.
pub fn noise_table(report: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = compare::noise::noise(&report.analysis, &report.runs)
        .iter()
        .map(|n| {
            let cell = &report.analysis.cells[n.cell];
            let pct = |v: f64| format!("{}%", units::sig3(v));
            vec![
                format!("{} {}", cell.name(), cell.record.labels.setting()),
                metric_title(&n.metric),
                n.within_run
                    .map_or("—".into(), |(window, run)| format!("{} a window → {} a run", pct(window), pct(run))),
                pct(n.between_runs),
                n.between_rounds.map_or("— (unpaired)".into(), pct),
                n.lever().to_string(),
            ]
        })
        .collect();
    let headers = ["cell", "metric", "within a run", "between runs", "between rounds", "what narrows the CI"]
        .map(String::from)
        .to_vec();
    (!rows.is_empty()).then_some(Table { headers, rows })
}

/// What the noise table's columns are, as every format says it.
pub const NOISE_NOTE: &str = "Each a coefficient of variation of the cell's headline metric. Within a run: the spread of its time series' windows, and what that adds to the run's figure; between rounds: the part a run shares with the baseline's run of its block, which pairing takes out of the difference; between runs: the rest.";

/// One row per density cell: how many sandboxes ran and failed, how fast they came up, the host
/// memory each took, and the spread of the first headline metric between them; and the failed
/// sandboxes by name.
/// The cost table: per priced cell and headline rate, $/hour, $/million operations and
/// $/month (the environment's price, plus a managed cluster's nodes for a CQL cell).
pub fn cost_table(report: &Report) -> Option<Table> {
    let mut rows = Vec::new();
    for c in report.analysis.cells.iter().filter(|c| c.runs_ok > 0) {
        let Some(per_hour) = c.record.cost_per_hour else {
            continue;
        };
        for m in c.metrics.iter().filter(|m| m.unit == "op/s" && c.record.headline.contains(&m.metric)) {
            let Some(per_million) = compare::cost_per_million(per_hour, m.summary.median) else {
                continue;
            };
            rows.push(vec![
                c.record.cell.clone(),
                m.metric.clone(),
                units::human(m.summary.median, &m.unit),
                format!("${per_hour:.2}"),
                format!("${per_million:.4}"),
                format!("${:.0}", per_hour * compare::HOURS_PER_MONTH),
            ]);
        }
    }
    let headers = ["cell", "metric", "median", "$/hour", "$/million operations", "$/month"].map(String::from).to_vec();
    (!rows.is_empty()).then_some(Table { headers, rows })
}

pub fn density_table(report: &Report) -> Option<(Table, Vec<String>)> {
    let cells: Vec<&CellResult> = report.analysis.cells.iter().filter(|c| c.record.density.is_some()).collect();
    if cells.is_empty() {
        return None;
    }
    let median = |c: &CellResult, m: &str| c.metric(m).map(|m| units::human(m.summary.median, &m.unit));
    let mut failures = Vec::new();
    let rows = cells
        .iter()
        .map(|c| {
            let runs: Vec<&RunRecord> = report.runs.iter().filter(|r| r.cell == c.record.cell).collect();
            let (ok, failed) = runs.iter().flat_map(|r| &r.sandboxes).fold((0, 0), |(ok, failed), s| {
                if s.status == crate::store::Status::Ok { (ok + 1, failed) } else { (ok, failed + 1) }
            });
            for run in &runs {
                for s in run.sandboxes.iter().filter(|s| s.status != crate::store::Status::Ok) {
                    let why = crate::store::error_headline(s.error.as_deref().unwrap_or(""));
                    failures.push(format!("{} #{}: sandbox {}: {why}", c.record.cell, run.rep, s.index));
                }
            }
            let metric = c.record.headline.first().cloned().unwrap_or_default();
            let spread: Vec<String> = ["min", "median", "max"]
                .iter()
                .map(|k| median(c, &format!("{metric}_sandbox_{k}")).unwrap_or_else(|| "—".into()))
                .collect();
            let starts: Vec<String> = ["p50", "p95", "max"]
                .iter()
                .map(|k| median(c, &format!("start_latency_{k}")).unwrap_or_else(|| "—".into()))
                .collect();
            vec![
                format!("{} {}", c.name(), c.record.labels.setting()),
                c.record.density.unwrap_or(0).to_string(),
                format!("{ok} ok, {failed} failed ({} runs)", runs.len()),
                starts.join(" / "),
                median(c, "sandbox_memory").unwrap_or_else(|| "—".into()),
                format!("{}: {}", metric_title(&metric), spread.join(" / ")),
            ]
        })
        .collect();
    let headers = [
        "Cell",
        "N",
        "Sandboxes",
        "Start p50 / p95 / max",
        "Host memory per sandbox (PSS)",
        "Per sandbox min / median / max",
    ]
    .map(String::from)
    .to_vec();
    Some((Table { headers, rows }, failures))
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

/// Result sets made in memory for the reports' unit tests.
#[cfg(test)]
pub(crate) mod fixture {
    use std::collections::BTreeMap;

    use crate::compare::{self, Analysis};
    use crate::store::{Baseline, CellRecord, Labels, PlanRecord, Repeat, RunRecord, Sample};

    /// A report of `analysis` and `runs` with no bound checked, no warning, no host facts and
    /// no history.
    pub fn report(dir: &str, (analysis, runs): (Analysis, Vec<RunRecord>)) -> super::Report {
        super::Report {
            dir: dir.into(),
            analysis,
            checks: vec![],
            warnings: vec![],
            host: BTreeMap::new(),
            runs,
            history: String::new(),
        }
    }

    /// Three runs each of a "host" cell (the baseline) and a "runc" cell of one CQL setting,
    /// with the samples `samples(env, rep)` gives and the setup `setup(env)` gives.
    pub fn analysis(
        samples: impl Fn(&str, u32) -> Vec<Sample>,
        setup: impl Fn(&str) -> BTreeMap<String, String>,
    ) -> (Analysis, Vec<RunRecord>) {
        matrix(&["host", "runc"], &["cql"], |env, _, rep| samples(env, rep), setup)
    }

    /// Three runs of each env × workload cell, the first env the baseline, with the samples
    /// `samples(env, workload, rep)` gives and the setup `setup(env)` gives.
    pub fn matrix(
        envs: &[&str],
        workloads: &[&str],
        samples: impl Fn(&str, &str, u32) -> Vec<Sample>,
        setup: impl Fn(&str) -> BTreeMap<String, String>,
    ) -> (Analysis, Vec<RunRecord>) {
        let labels = |env: &str, workload: &str| Labels {
            env: env.into(),
            volume: "disk".into(),
            workload: workload.into(),
            params: vec![],
        };
        let pairs: Vec<(&str, &str)> = workloads.iter().flat_map(|w| envs.iter().map(move |e| (*e, *w))).collect();
        let plan = PlanRecord {
            suite: "t".into(),
            baseline: Baseline { env: Some(envs[0].into()), volume: None, workloads: Default::default() },
            repeat: Repeat::fixed(3),
            cells: pairs
                .iter()
                .map(|(env, workload)| CellRecord::new(labels(env, workload), env, *env != envs[0], &["op_rate"]))
                .collect(),
            bounds: vec![],
            order: crate::store::Order::Fixed,
            seed: None,
            precision: None,
            rounds: vec![],
        };
        let run = |(env, workload): (&str, &str), rep: u32| RunRecord {
            seconds: 1.0,
            samples: samples(env, workload, rep),
            setup: setup(env),
            block: Some(crate::store::BlockId { round: rep, block: 0, session: "fixture".into() }),
            ..RunRecord::new(labels(env, workload), rep)
        };
        let runs: Vec<RunRecord> = (1..=3).flat_map(|rep| pairs.iter().map(move |p| run(*p, rep))).collect();
        (compare::analyze(&plan, &runs), runs)
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Sample;

    /// A host and a runc cell whose runs give op/s `host` and `runc` per repetition, each run's
    /// setup `setup`.
    fn report(setup: &[(&str, &str)]) -> super::Report {
        let rates = |env: &str| if env == "host" { [100.0, 200.0, 400.0] } else { [90.0, 180.0, 360.0] };
        let setup: std::collections::BTreeMap<String, String> =
            setup.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let analysis = super::fixture::analysis(
            |env, rep| vec![Sample::new("op_rate", rates(env)[rep as usize - 1], "op/s")],
            |_| setup.clone(),
        );
        super::fixture::report("/nonexistent", analysis)
    }

    /// Every format says what the figures are as `compare` makes them: geometric means and t
    /// intervals, differences paired by block; never the medians and bootstrap of an older method.
    #[test]
    fn every_format_names_the_method_the_figures_were_made_with() {
        let report = report(&[]);
        let host = report.analysis.cells.iter().find(|c| c.record.labels.env == "host").unwrap();
        let center = host.metric("op_rate").unwrap().summary.center;
        assert!((center - 200.0).abs() < 1e-6, "the figure is the geometric mean of 100, 200, 400, not {center}");
        let runc = report.analysis.cells.iter().find(|c| c.record.labels.env == "runc").unwrap();
        let d = runc.metric("op_rate").unwrap().vs_baseline.as_ref().unwrap();
        assert_eq!(d.pairing, figures::stats::Pairing::Paired, "the method says paired by block");
        assert!((d.pct + 10.0).abs() < 1e-6, "each run 10 % below its block's baseline: {}", d.pct);
        let html_method = figures::chart::escape(super::METHOD);
        for (format, text, method) in [
            ("terminal", super::terminal::render(&report), super::METHOD.to_string()),
            ("markdown", super::markdown::render(&report), super::METHOD.to_string()),
            ("html", super::html::render(&report), html_method),
        ] {
            assert!(text.contains(&method), "{format} names the method");
            for stale in ["bootstrap", "median of", "medians with"] {
                assert!(!text.to_lowercase().contains(stale), "{format} says \"{stale}\"");
            }
        }
    }

    #[test]
    fn runs_made_in_slices_are_said_to_be_so_in_every_format() {
        let design = "6 slices of 1000 ms, alternating between host, runc";
        let sliced = report(&[(crate::store::SLICES_SETUP, design)]);
        let notes = super::verdict_notes(&sliced.analysis).join(" ");
        assert!(notes.contains("Interleaved in slices") && notes.contains(design), "{notes}");
        for text in [super::terminal::render(&sliced), super::markdown::render(&sliced)] {
            assert!(text.contains("Interleaved in slices"), "{text}");
        }
        let plain = super::verdict_notes(&report(&[]).analysis).join(" ");
        assert!(!plain.contains("slices"), "{plain}");
    }

    /// Beside a sliced workload, a Cassandra started for each run is said to run whole, and why;
    /// a user's own cluster, never started by isobench, and a database with no JIT are not given
    /// that reason.
    #[test]
    fn a_served_cell_beside_slices_says_why_it_runs_whole() {
        fn runc(r: &super::Report) -> &crate::compare::CellResult {
            r.analysis.cells.iter().find(|c| c.record.labels.env == "runc").unwrap()
        }
        let sliced = report(&[(crate::store::SLICES_SETUP, "6 slices of 1000 ms")]);
        let note = |kind: &str| {
            let served = report(&[("server.kind", kind)]);
            super::slices_note(&[runc(&sliced), runc(&served)]).unwrap()
        };
        let managed = note("cassandra");
        assert!(managed.contains("a Cassandra node started for each run") && managed.contains("climb"), "{managed}");
        for kind in ["external (pods in the cluster)", "postgres"] {
            let other = note(kind);
            assert!(other.contains("back to back in its block") && !other.contains("climb"), "{kind}: {other}");
        }
    }
}
