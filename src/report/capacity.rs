//! Capacity in the reports: what each cell sustains within its latency bound against its
//! baseline, the nodes and money a target load then needs (and the isolation tax: the extra
//! nodes and dollars against the baseline), and the latency–throughput chart of the steps.

use super::{Report, Table, diff_text};
use crate::compare::{CellResult, HOURS_PER_MONTH};
use crate::store::{RunRecord, Status};
use cql_stress::capacity::Step;
use figures::chart::{self, Line, LineChart, Mark, Rule};
use figures::units::{self, human};

/// "capacity at p99 ≤ 10 ms": the metric's title where the cell's bound is known.
pub fn title(cell: &CellResult) -> Option<String> {
    cell.record.workload_setup.get("capacity.bound").map(|bound| format!("capacity at {bound}"))
}

/// The cells that searched a capacity.
fn searched(report: &Report) -> impl Iterator<Item = &CellResult> {
    report.analysis.cells.iter().filter(|c| c.record.workload_setup.contains_key("capacity.bound"))
}

/// Per capacity cell: the bound, the capacity's median with its CI, its difference from the
/// baseline, the latency at it, the steps a search took and how the searches ended.
pub fn table(report: &Report) -> Option<Table> {
    let rows: Vec<Vec<String>> = searched(report)
        .map(|c| {
            let bound = c.record.workload_setup.get("capacity.bound").cloned().unwrap_or_default();
            let mut row = vec![c.name(), c.record.labels.setting(), bound];
            let Some(m) = c.metric("capacity") else {
                row.push(super::status_text(c).unwrap_or_else(|| "no capacity".into()));
                row.extend(["", "", "", ""].map(String::from));
                return row;
            };
            let s = &m.summary;
            row.push(format!("{} [{}]", human(s.center, &m.unit), units::value_interval(s.ci, &m.unit)));
            row.push(match &m.vs_baseline {
                Some(d) => format!("{} {}", diff_text(d), units::percent_interval(d.ci)),
                None if c.is_baseline => "baseline".into(),
                None => "—".into(),
            });
            row.push(c.metric("capacity_latency").map_or("—".into(), |l| human(l.summary.median, &l.unit)));
            row.push(c.median("capacity_steps").map_or("—".into(), |n| format!("{n:.0}")));
            row.push(ended(c));
            row
        })
        .collect();
    let headers =
        ["Cell", "Setting", "Bound", "Capacity [95% CI]", "vs baseline [95% CI]", "Latency there", "Steps", "Ended"]
            .map(String::from)
            .to_vec();
    (!rows.is_empty()).then_some(Table { headers, rows })
}

/// How a cell's searches ended, from its runs' notes: resolved, a lower bound, or limited by
/// the load rather than the environment.
fn ended(cell: &CellResult) -> String {
    let mut said = Vec::new();
    if cell.notes.iter().any(|n| n.starts_with(cql_stress::capacity::CLIENT_LIMIT_NOTE)) {
        said.push("the load set the limit");
    }
    if cell.notes.iter().any(|n| n.contains("the capacity is at least")) {
        said.push("a lower bound");
    }
    if said.is_empty() { "resolved".into() } else { said.join("; ") }
}

/// The nodes a target needs at a capacity per node, rounded up.
fn nodes_for(target: f64, per_node: f64) -> Option<u64> {
    (per_node > 0.0).then(|| (target / per_node).ceil() as u64)
}

/// One cell's sizing: nodes (median, and the range the capacity's CI gives) and $/hour per node.
struct Sizing {
    nodes: u64,
    range: (u64, u64),
    per_node_hour: Option<f64>,
}

fn sizing(cell: &CellResult) -> Option<Sizing> {
    let target = cell.record.target?;
    let capacity = cell.metric("capacity")?;
    let ring = cell.record.nodes.unwrap_or(1) as f64;
    let per_node = |c: f64| c / ring;
    let s = &capacity.summary;
    Some(Sizing {
        nodes: nodes_for(target, per_node(s.center))?,
        // Without a CI the range is unknown upward: as many nodes as a capacity near 0 needs.
        range: match s.ci {
            Some((lo, hi)) => (nodes_for(target, per_node(hi))?, nodes_for(target, per_node(lo)).unwrap_or(u64::MAX)),
            None => (nodes_for(target, per_node(s.center))?, u64::MAX),
        },
        per_node_hour: cell.record.cost_per_hour.map(|c| c / ring),
    })
}

fn dollars(v: f64) -> String {
    if v >= 100.0 { format!("${}", units::group_digits(v.round() as i64)) } else { format!("${v:.2}") }
}

fn range_text(range: (u64, u64)) -> String {
    match range {
        (a, b) if a == b => String::new(),
        (a, u64::MAX) => format!(" ({a} or more)"),
        (a, b) => format!(" ({a}–{b})"),
    }
}

/// The nodes and money a target load needs in each capacity cell, and the isolation tax
/// against its baseline; with the notes that say how they were counted.
pub fn nodes_and_money(report: &Report) -> Option<(Table, Vec<String>)> {
    let cells: Vec<&CellResult> = searched(report).filter(|c| c.record.target.is_some()).collect();
    if cells.is_empty() {
        return None;
    }
    let mut rows = Vec::new();
    for c in &cells {
        let target = c.record.target.unwrap_or_default();
        let mut row = vec![c.name(), c.record.labels.setting(), human(target, "op/s")];
        let Some(size) = sizing(c) else {
            row.push(super::status_text(c).unwrap_or_else(|| "no capacity".into()));
            row.extend(["", "", "", ""].map(String::from));
            rows.push(row);
            continue;
        };
        let capacity = c.median("capacity").unwrap_or(0.0) / c.record.nodes.unwrap_or(1) as f64;
        row.push(human(capacity, "op/s"));
        row.push(format!("{}{}", size.nodes, range_text(size.range)));
        let hour = size.per_node_hour.map(|p| p * size.nodes as f64);
        row.push(hour.map_or("— (no cost_per_hour)".into(), |h| {
            format!("{}/h · {}/month", dollars(h), dollars(h * HOURS_PER_MONTH))
        }));
        let base = c.baseline.filter(|_| !c.is_baseline).map(|b| &report.analysis.cells[b]).and_then(sizing);
        row.push(match base {
            None if c.is_baseline => "baseline".into(),
            None => "—".into(),
            Some(base) => tax(&size, &base),
        });
        rows.push(row);
    }
    let headers = ["Cell", "Setting", "Target", "Capacity per node", "Nodes (CI range)", "Cost", "Isolation tax"]
        .map(String::from)
        .to_vec();
    let mut notes = vec![
        "Nodes = ⌈target ÷ capacity per node⌉; the range in brackets is what the ends of the capacity's 95% CI give. A node costs its environment's cost_per_hour (with a managed database, plus its per-node price); a month is 730 hours.".to_string(),
    ];
    if cells.iter().any(|c| c.record.nodes.is_some_and(|n| n > 1)) {
        notes.push("A ring of N nodes counts as N nodes of capacity ÷ N each: linear scaling of the measured ring, assumed, not measured beyond its size.".into());
    }
    Some((Table { headers, rows }, notes))
}

/// "+3 nodes (+2 to +5), +$420/month": the extra nodes against the baseline's (the range from the
/// cell's CI against the baseline's median), and what they cost a month.
fn tax(size: &Sizing, base: &Sizing) -> String {
    let extra = size.nodes as i64 - base.nodes as i64;
    let plural = if extra.abs() == 1 { "" } else { "s" };
    let low = size.range.0 as i64 - base.nodes as i64;
    let range = match size.range.1 {
        u64::MAX => format!(" ({low:+} or more)"),
        high if high == size.range.0 => String::new(),
        high => format!(" ({low:+} to {:+})", high as i64 - base.nodes as i64),
    };
    let nodes = format!("{extra:+} node{plural}{range}");
    match size.per_node_hour {
        Some(price) => {
            let month = dollars(extra.unsigned_abs() as f64 * price * HOURS_PER_MONTH);
            format!("{nodes}, {}{month}/month", if extra < 0 { "-" } else { "+" })
        }
        None => nodes,
    }
}

/// One step per rate offered, by rate: the one that decided it (a retried rate's pass, else its
/// last fail), so that a stalled window offered again does not fold the curve back on itself.
fn deciding_steps(steps: &[Step]) -> Vec<&Step> {
    let mut steps: Vec<&Step> = steps.iter().collect();
    steps.sort_by(|a, b| a.offered.total_cmp(&b.offered).then(a.pass.cmp(&b.pass)));
    steps.dedup_by(|later, earlier| {
        let same = later.offered == earlier.offered;
        if same {
            *earlier = *later;
        }
        same
    });
    steps
}

/// The run whose capacity is its cell's median (or nearest it): the steps the chart draws.
fn median_run<'a>(report: &'a Report, cell: &CellResult) -> Option<&'a RunRecord> {
    let median = cell.median("capacity")?;
    let capacity = |r: &RunRecord| r.samples.iter().find(|s| s.metric == "capacity").map(|s| s.value);
    report
        .runs
        .iter()
        .filter(|r| r.cell == cell.record.cell && r.status == Status::Ok && !r.steps.is_empty())
        .filter_map(|r| Some((r, (capacity(r)? - median).abs())))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(r, _)| r)
}

/// The latency–throughput chart of one workload setting's cells: the achieved rate of each
/// step against its latency at the bound's percentile (log scale), a line per environment,
/// the bound across, and each capacity marked. Empty when no cell searched.
pub fn chart(report: &Report, cells: &[&CellResult]) -> String {
    let mut lines = Vec::new();
    let mut marks = Vec::new();
    let mut bound = None;
    for (i, c) in cells.iter().enumerate() {
        let Some(run) = median_run(report, c) else { continue };
        let colour = if c.is_baseline { chart::BASELINE_COLOUR } else { chart::colour(i) };
        let steps = deciding_steps(&run.steps);
        let name = format!("{} #{}", c.name(), run.rep);
        lines.push(Line {
            name: name.clone(),
            points: steps.iter().map(|s| (s.achieved, s.latency_us)).collect(),
            colour,
            dashed: c.is_baseline,
        });
        if let Some(at) = steps.iter().filter(|s| s.pass).max_by(|a, b| a.offered.total_cmp(&b.offered)) {
            let label = format!("{}: {}", name, human(at.offered, "op/s"));
            marks.push(Mark { x: at.achieved, y: at.latency_us, colour, label });
        }
        bound = bound.or_else(|| c.record.workload_setup.get("capacity.bound").cloned());
    }
    if lines.is_empty() {
        return String::new();
    }
    let limit = bound_latency(cells);
    let percentile = bound.as_deref().and_then(|b| b.split_whitespace().next()).unwrap_or("latency").to_string();
    chart::line_chart(&LineChart {
        title: format!("{percentile} latency against throughput ({})", bound.unwrap_or_default()),
        unit: "us".into(),
        x_label: "achieved rate (op/s); ● = the capacity: the highest rate within the bound".into(),
        x_categories: Vec::new(),
        lines,
        log_y: true,
        log_x: true,
        rules: limit.map(|l| Rule { y: l, label: "bound".into() }).into_iter().collect(),
        marks,
        bands: Vec::new(),
    })
}

/// The bound's latency in µs, as the cells' setup records it ("p99 ≤ 10 ms").
fn bound_latency(cells: &[&CellResult]) -> Option<f64> {
    let text = cells.iter().find_map(|c| c.record.workload_setup.get("capacity.bound"))?;
    let (_, latency) = text.split_once('≤')?;
    let latency = latency.trim().replace(' ', "").replace('µ', "u");
    units::parse_duration(&latency).ok().map(|d| d.as_secs_f64() * 1e6)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::store::Sample;

    /// Three runs of a host and a runc cell with these capacities, sized for 20k op/s.
    fn report(host: [f64; 3], runc: [f64; 3], price: Option<f64>) -> Report {
        let capacity = |env: &str, rep: u32| {
            let values = if env == "host" { host } else { runc };
            vec![Sample::new("capacity", values[rep as usize - 1], "op/s")]
        };
        let (mut analysis, runs) = crate::report::fixture::analysis(capacity, |_| BTreeMap::new());
        for c in &mut analysis.cells {
            c.record.workload_setup.insert("capacity.bound".into(), "p99 ≤ 10 ms".into());
            c.record.target = Some(20_000.0);
            c.record.cost_per_hour = price;
        }
        crate::report::fixture::report("r", (analysis, runs))
    }

    #[test]
    fn nodes_are_the_target_over_the_capacity_rounded_up_and_the_tax_is_against_the_baseline() {
        let r = report([10_100.0, 10_200.0, 10_000.0], [4_050.0, 4_150.0, 3_950.0], Some(0.2));
        let (table, notes) = nodes_and_money(&r).unwrap();
        let host = &table.rows[0];
        assert_eq!((host[4].as_str(), host[6].as_str()), ("2 (2–3)", "baseline"));
        assert_eq!(host[5], "$0.40/h · $292/month");
        let runc = &table.rows[1];
        assert_eq!(runc[4], "5 (5–6)", "20k ÷ 4k, and ÷ the CI's ends");
        assert_eq!(runc[6], "+3 nodes (+3 to +4), +$438/month", "3 × $0.20 × 730 h");
        assert!(notes[0].contains("⌈target ÷ capacity per node⌉"));
        assert_eq!(title(&r.analysis.cells[1]).unwrap(), "capacity at p99 ≤ 10 ms");
        let (table, _) = nodes_and_money(&report([10_000.0; 3], [4_000.0; 3], None)).unwrap();
        assert_eq!(table.rows[1][5], "— (no cost_per_hour)");
        assert_eq!(table.rows[1][6], "+3 nodes");
    }

    #[test]
    fn the_curve_has_one_point_per_rate_the_step_that_decided_it() {
        let step = |offered: f64, latency_us: f64, pass: bool| Step { offered, latency_us, pass, ..Step::default() };
        let steps = [
            step(1000.0, 2000.0, true),
            step(2000.0, 90_000.0, false),
            step(2000.0, 3000.0, true),
            step(4000.0, 50_000.0, false),
            step(4000.0, 70_000.0, false),
            step(2800.0, 4000.0, true),
        ];
        let points: Vec<(f64, f64)> = deciding_steps(&steps).iter().map(|s| (s.offered, s.latency_us)).collect();
        assert_eq!(points, [(1000.0, 2000.0), (2000.0, 3000.0), (2800.0, 4000.0), (4000.0, 70_000.0)]);
    }
}
