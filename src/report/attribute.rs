//! Which part of a sandbox costs what: a server cell's extra CPU per operation against its
//! baseline, split into what the baseline's counts say the operation does (system calls and page
//! faults per operation, counted by perf on the baseline's processes, and one request and answer
//! over the network) times what each costs more in the sandbox (the suite's `syscall` workload,
//! measured in both environments), and the rest that these parts do not explain.
//!
//! The prices are micro-benchmark figures: a system call's is getpid's, a page fault's the
//! per-page cost of touching a fresh 1 MiB mapping, a round trip's the extra TCP round-trip time
//! beyond its own two system calls (its CPU where the path is busy, not idle waiting). The
//! workload's own calls may cost more or less than those; the unexplained rest says by how much
//! the sum misses.

use crate::compare::{Analysis, CellResult};
use crate::store::{CPU_PART, GVISOR, UNEXPLAINED};
use crate::sys::cpu_parts::Part as Sampled;
use figures::units;

/// One part of the increase.
pub struct Part {
    pub name: &'static str,
    /// CPU µs per operation.
    pub us: f64,
    /// How it was priced: "11.2 per operation on the baseline × 5.2 µs more each".
    pub how: String,
}

/// A cell's CPU per operation against its baseline's, by part.
pub struct Attribution {
    pub cell: String,
    pub baseline: String,
    /// CPU µs per operation, the baseline's and the cell's.
    pub baseline_us: f64,
    pub cell_us: f64,
    pub parts: Vec<Part>,
}

impl Attribution {
    pub fn increase(&self) -> f64 {
        self.cell_us - self.baseline_us
    }

    /// What the parts leave of the increase (negative where they overshoot it).
    pub fn rest(&self) -> f64 {
        self.increase() - self.parts.iter().map(|p| p.us).sum::<f64>()
    }

    /// The why's line: each part with its share of the increase, the rest, adding up to 100 %.
    pub fn line(&self) -> String {
        let increase = self.increase();
        let share = |us: f64| us / increase * 100.0;
        let mut items: Vec<String> =
            self.parts.iter().map(|p| format!("{} {} ({:.0}%: {})", p.name, us(p.us), share(p.us), p.how)).collect();
        items.push(format!("unexplained {} ({:.0}%)", us(self.rest()), share(self.rest())));
        format!("of the {} more CPU per operation: {}", us(increase), items.join(", "))
    }
}

fn us(value: f64) -> String {
    units::human(value, "us")
}

/// The metrics the baseline counts per operation.
const SYSCALLS_PER_OP: &str = "sys.host_syscalls_per_op";
const FAULTS_PER_OP: &str = "sys.host_page_faults_per_op";

/// The attribution of `cell` against `base`, where the baseline counted its calls, both
/// environments' `syscall` probes are in the analysis, and the CPU per operation grew.
pub fn attribute(analysis: &Analysis, cell: &CellResult, base: &CellResult) -> Option<Attribution> {
    let (cell_us, baseline_us) = (cell.median("sys.cpu_per_op")?, base.median("sys.cpu_per_op")?);
    if cell_us <= baseline_us {
        return None;
    }
    let syscalls = base.median(SYSCALLS_PER_OP)?;
    let extra = |metric: &str| {
        Some(probe(analysis, &cell.record.labels.env, metric)? - probe(analysis, &base.record.labels.env, metric)?)
    };
    let syscall_ns = extra("syscall_ns")?;
    let mut parts = vec![Part {
        name: "system calls",
        us: syscalls * syscall_ns / 1e3,
        how: format!("{} per operation on the baseline × {} more each", units::sig3(syscalls), ns(syscall_ns)),
    }];
    if let (Some(faults), Some(fault_ns)) = (base.median(FAULTS_PER_OP), extra("mmap_1m_ns")) {
        parts.push(Part {
            name: "page faults",
            us: faults * fault_ns / 1e3,
            how: format!("{} per operation on the baseline × {} more each", units::sig3(faults), ns(fault_ns)),
        });
    }
    // A round trip's own send and receive are system calls, priced above.
    if let Some(rtt_ns) = extra("tcp_rtt_ns").map(|rtt| rtt - 2.0 * syscall_ns) {
        parts.push(Part {
            name: "network",
            us: rtt_ns / 1e3,
            how: format!("one request and answer per operation × {} more per round trip", ns(rtt_ns)),
        });
    }
    // Named with the setting, as the why names them: one environment runs several workloads.
    let named = |c: &CellResult| format!("{} {}", c.name(), c.record.labels.setting());
    Some(Attribution { cell: named(cell), baseline: named(base), baseline_us, cell_us, parts })
}

/// CPU µs per operation by sampled part; the unexplained rest under `None`.
pub type PartsPerOp = Vec<(Option<Sampled>, f64)>;

/// A cell's CPU per operation by sampled part (`sys.cpu_part.*`): each part's share of the
/// sandbox's CPU in its runs (medians) times its CPU per operation.
pub fn sampled_per_op(cell: &CellResult) -> Option<PartsPerOp> {
    let per_op = cell.median("sys.cpu_per_op")?;
    let parts: PartsPerOp = cell
        .metrics
        .iter()
        .filter_map(|m| {
            let name = m.metric.strip_prefix(CPU_PART)?;
            let part = if name == UNEXPLAINED { None } else { Some(Sampled::from_name(name)?) };
            Some((part, m.summary.median))
        })
        .collect();
    let total: f64 = parts.iter().map(|(_, s)| s).sum();
    (total > 0.0).then(|| parts.into_iter().map(|(p, s)| (p, s / total * per_op)).collect())
}

/// The extra CPU per operation of `cell` against `base` as the sampled parts' growth, largest
/// first, the unexplained rest last: (part, µs per operation more), None for the rest.
pub fn sampled_growth(cell: &CellResult, base: &CellResult) -> Option<PartsPerOp> {
    let (mine, theirs) = (sampled_per_op(cell)?, sampled_per_op(base)?);
    let of = |parts: &[(Option<Sampled>, f64)], part: Option<Sampled>| {
        parts.iter().find(|(p, _)| *p == part).map_or(0.0, |(_, us)| *us)
    };
    let mut named: Vec<Option<Sampled>> = mine.iter().chain(&theirs).map(|(p, _)| *p).filter(Option::is_some).collect();
    named.sort();
    named.dedup();
    let mut growth: PartsPerOp = named.into_iter().map(|p| (p, of(&mine, p) - of(&theirs, p))).collect();
    growth.sort_by(|a, b| b.1.total_cmp(&a.1));
    growth.push((None, of(&mine, None) - of(&theirs, None)));
    Some(growth)
}

/// The why's line of the sampled parts: "×2.88, 1.45 ms more CPU per operation: network 31%
/// (450 µs), platform 22% (…), …, unexplained 9% (…)" where both sides were sampled and the
/// CPU per operation grew.
pub fn sampled_line(cell: &CellResult, base: &CellResult) -> Option<String> {
    let (cell_us, base_us) = (cell.median("sys.cpu_per_op")?, base.median("sys.cpu_per_op")?);
    let increase = cell_us - base_us;
    if increase <= 0.0 {
        return None;
    }
    let growth = sampled_growth(cell, base)?;
    let items: Vec<String> = growth
        .iter()
        // A part that moved by less than a percent of the increase is noise in the line.
        .filter(|(part, us)| part.is_none() || us.abs() >= increase * 0.01)
        .map(|(part, us)| {
            let name = part.map_or("unexplained", |p| p.name());
            let counted = part.and_then(|p| counted_for(cell, p)).map(|c| format!(" — {c}")).unwrap_or_default();
            format!("{name} {:.0}% ({}{counted})", us / increase * 100.0, units::human(*us, "us"))
        })
        .collect();
    Some(format!(
        "sampled by part, the {} more CPU per operation (×{:.2}): {}",
        us(increase),
        cell_us / base_us,
        items.join(", ")
    ))
}

/// What gVisor's own counters (`sys.gvisor.*`) say a part did per operation of `cell`: the
/// network's segments, the files' reads and opens.
fn counted_for(cell: &CellResult, part: Sampled) -> Option<String> {
    let ops = cell.median("ops").filter(|n| *n > 0.0)?;
    let per_op = |names: &[&str]| {
        let counts: Vec<f64> = names.iter().filter_map(|n| cell.median(&format!("{GVISOR}{n}"))).collect();
        (!counts.is_empty()).then(|| counts.iter().sum::<f64>() / ops)
    };
    match part {
        Sampled::Network => {
            let segments = per_op(&["netstack_tcp_segments_sent", "netstack_tcp_valid_segments_received"])?;
            let resent = per_op(&["netstack_tcp_retransmits"]).filter(|r| *r > 0.0);
            let resent = resent.map(|r| format!(", {} retransmitted", units::sig3(r))).unwrap_or_default();
            Some(format!("{} TCP segments per operation{resent}", units::sig3(segments)))
        }
        Sampled::Files => {
            let (reads, opens) = (per_op(&["fs_reads"])?, per_op(&["fs_opens"]).unwrap_or(0.0));
            Some(format!("{} file reads and {} opens per operation", units::sig3(reads), units::sig3(opens)))
        }
        _ => None,
    }
}

/// The why's line for `cell`: its attribution, or, where the baseline counted its calls but the
/// suite has no probes to price them, how to get one.
pub fn why_line(analysis: &Analysis, cell: &CellResult, base: &CellResult) -> Option<String> {
    if let Some(a) = attribute(analysis, cell, base) {
        return Some(a.line());
    }
    let per_op = base.median(SYSCALLS_PER_OP)?;
    let grew = cell.median("sys.cpu_per_op")? > base.median("sys.cpu_per_op")?;
    grew.then(|| {
        format!(
            "the baseline made {} system calls per operation; a `syscall` workload in the suite, run in {} and {}, would price them and split the CPU per operation by part",
            units::sig3(per_op),
            base.record.labels.env,
            cell.record.labels.env
        )
    })
}

fn ns(value: f64) -> String {
    units::human(value / 1e3, "us")
}

/// The median of `metric` in a cell of environment `env` that measured it (the suite's
/// `syscall` workload there).
fn probe(analysis: &Analysis, env: &str, metric: &str) -> Option<f64> {
    analysis.cells.iter().filter(|c| c.record.labels.env == env).find_map(|c| c.median(metric))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;
    use crate::store::Sample;

    #[test]
    fn the_parts_and_the_rest_add_up_to_the_increase() {
        // The baseline: 10 system calls and 2 page faults per operation, 50 µs of CPU each; the
        // sandbox: 130 µs. Its probes: a system call 5 µs more, a page fault 1 µs more, a round
        // trip 30 µs more (of which its two system calls are 10).
        let (analysis, _) = fixture::matrix(
            &["host", "runsc"],
            &["cassandra", "syscall"],
            |env, workload, _rep| {
                let sandbox = env == "runsc";
                match workload {
                    "syscall" => vec![
                        Sample::new("syscall_ns", if sandbox { 5100.0 } else { 100.0 }, "ns"),
                        Sample::new("mmap_1m_ns", if sandbox { 2000.0 } else { 1000.0 }, "ns"),
                        Sample::new("tcp_rtt_ns", if sandbox { 40_000.0 } else { 10_000.0 }, "ns"),
                    ],
                    _ => vec![
                        Sample::new("op_rate", if sandbox { 4000.0 } else { 9000.0 }, "op/s"),
                        Sample::new("sys.cpu_per_op", if sandbox { 130.0 } else { 50.0 }, "us"),
                        Sample::new(SYSCALLS_PER_OP, 10.0, "events"),
                        Sample::new(FAULTS_PER_OP, 2.0, "events"),
                    ],
                }
            },
            |_| Default::default(),
        );
        let cell =
            analysis.cells.iter().find(|c| c.record.labels.env == "runsc" && c.record.labels.workload == "cassandra");
        let cell = cell.unwrap();
        let base = &analysis.cells[cell.baseline.unwrap()];
        let a = attribute(&analysis, cell, base).expect("attributed");
        let parts: Vec<(&str, f64)> = a.parts.iter().map(|p| (p.name, p.us)).collect();
        assert_eq!(parts, [("system calls", 50.0), ("page faults", 2.0), ("network", 20.0)]);
        assert!((a.rest() - 8.0).abs() < 1e-9);
        let line = a.line();
        assert!(line.starts_with("of the 80.0 µs more CPU per operation: system calls 50.0 µs (62%"), "{line}");
        assert!(line.ends_with("unexplained 8.00 µs (10%)"), "{line}");
        // Without the sandbox's probes there is nothing to price the counts with.
        let (no_probe, _) = fixture::matrix(
            &["host", "runsc"],
            &["cassandra"],
            |env, _, _| {
                vec![
                    Sample::new("op_rate", 1.0, "op/s"),
                    Sample::new("sys.cpu_per_op", if env == "runsc" { 130.0 } else { 50.0 }, "us"),
                    Sample::new(SYSCALLS_PER_OP, 10.0, "events"),
                ]
            },
            |_| Default::default(),
        );
        let cell = &no_probe.cells[1];
        assert!(attribute(&no_probe, cell, &no_probe.cells[cell.baseline.unwrap()]).is_none());
    }

    #[test]
    fn the_sampled_parts_growth_adds_up_to_the_increase() {
        // The host: 50 µs per operation, app 4 s and host_kernel 1 s of its 5 s. The sandbox:
        // 130 µs, app 4, network 2, platform 3, unexplained 1 of its 10 s.
        let (analysis, _) = fixture::matrix(
            &["host", "runsc"],
            &["cassandra"],
            |env, _, _| {
                let part = |name: &str, s: f64| Sample::new(format!("{CPU_PART}{name}"), s, "s");
                let mut samples = vec![Sample::new("op_rate", 1.0, "op/s")];
                if env == "runsc" {
                    samples.extend([
                        Sample::new("sys.cpu_per_op", 130.0, "us"),
                        part("app", 4.0),
                        part("network", 2.0),
                        part("platform", 3.0),
                        part(UNEXPLAINED, 1.0),
                        Sample::new("ops", 1000.0, "ops"),
                        Sample::new(format!("{GVISOR}netstack_tcp_segments_sent"), 2100.0, "events"),
                        Sample::new(format!("{GVISOR}netstack_tcp_valid_segments_received"), 2000.0, "events"),
                    ]);
                } else {
                    samples.extend([
                        Sample::new("sys.cpu_per_op", 50.0, "us"),
                        part("app", 4.0),
                        part("host_kernel", 1.0),
                        part(UNEXPLAINED, 0.0),
                    ]);
                }
                samples
            },
            |_| Default::default(),
        );
        let cell = &analysis.cells[1];
        let base = &analysis.cells[cell.baseline.unwrap()];
        let growth = sampled_growth(cell, base).unwrap();
        let rounded: Vec<(&str, f64)> =
            growth.iter().map(|(p, us)| (p.map_or("unexplained", |p| p.name()), us.round())).collect();
        assert_eq!(
            rounded,
            [("platform", 39.0), ("network", 26.0), ("app", 12.0), ("host_kernel", -10.0), ("unexplained", 13.0)]
        );
        assert!((growth.iter().map(|(_, us)| us).sum::<f64>() - 80.0).abs() < 1e-9);
        let line = sampled_line(cell, base).unwrap();
        assert!(
            line.starts_with("sampled by part, the 80.0 µs more CPU per operation (×2.60): platform 49%"),
            "{line}"
        );
        assert!(line.ends_with("unexplained 16% (13.0 µs)"), "{line}");
        assert!(line.contains("network 32% (26.0 µs — 4.10 TCP segments per operation)"), "{line}");
        assert!(sampled_line(base, cell).is_none(), "no line where the CPU per operation fell");
    }
}
