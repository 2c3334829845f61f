//! Why a cell differs from its baseline, in words, from the `sys.` figures its runs recorded:
//! the CPU the runtime's own processes burned (or a pod's, runtime and all), the CPU per operation, the device I/O the
//! workload's writes became, and context switches or page faults that moved, named with the
//! runtime's build. Only for cells whose headline difference is outside the noise.

use crate::compare::{self, Analysis, CellResult, Verdict};
use crate::store::RUNTIME_BY;
use figures::units;

pub struct Explanation {
    pub cell: String,
    pub lines: Vec<String>,
}

/// A counter that changed by at least this factor against the baseline is worth a line.
const MOVED_BY: f64 = 2.0;

/// Instructions per cycle move little: a tenth is a different machine behaviour (exits to a
/// hypervisor, cache-hostile copies).
const IPC_MOVED_BY: f64 = 0.1;

/// Said of a cell whose difference is shown with `?`: its why is what its runs recorded, not a
/// verdict.
pub const TOO_FEW_RUNS: &str = "(?: too few runs for a verdict)";

/// The why of every cell whose difference is shown outside the noise, or shown with `?` (too few
/// runs for a verdict, marked so): a why wherever a difference is shown.
pub fn explain(analysis: &Analysis) -> Vec<Explanation> {
    analysis
        .cells
        .iter()
        .filter(|c| !c.is_baseline)
        .filter_map(|cell| {
            let verdict = compare::precision::verdict_diff(cell)?.1.verdict;
            if verdict == Verdict::NoSignificantDifference {
                return None;
            }
            let lines = why_lines(analysis, cell, &analysis.cells[cell.baseline?]);
            // Named with its setting: one sandbox runs several workloads' cells, and settings of each.
            let mut name = format!("{} {}", cell.name(), cell.record.labels.setting());
            if verdict == Verdict::TooFewRuns {
                name = format!("{name} {TOO_FEW_RUNS}");
            }
            (!lines.is_empty()).then_some(Explanation { cell: name, lines })
        })
        .collect()
}

/// What a cell's runs' figures say against its baseline's, in words.
pub fn why_lines(analysis: &Analysis, cell: &CellResult, base: &CellResult) -> Vec<String> {
    let mut lines = lines(cell, base);
    lines.extend(super::attribute::sampled_line(cell, base));
    if let Some(growth) = super::attribute::sampled_growth(cell, base) {
        let parts: Vec<(&str, f64)> = growth.iter().filter_map(|(p, us)| Some((p.as_ref()?.name(), *us))).collect();
        lines.extend(super::functions::line(cell, base, &parts));
    }
    lines.extend(super::attribute::why_line(analysis, cell, base));
    lines
}

/// The runtime's processes' shares of its CPU, largest first: ` (runsc-sandbox 81%, runsc-gofer 15%)`.
fn by_process(cell: &CellResult) -> String {
    let mut shares: Vec<(&str, f64)> =
        cell.metrics.iter().filter_map(|m| Some((m.metric.strip_prefix(RUNTIME_BY)?, m.summary.median))).collect();
    let total: f64 = shares.iter().map(|(_, cpu)| cpu).sum();
    if total <= 0.0 {
        return String::new();
    }
    shares.sort_by(|a, b| b.1.total_cmp(&a.1));
    // Result sets from before names fell back to comm hold an empty one.
    let named: Vec<String> = shares
        .iter()
        .map(|(name, cpu)| format!("{} {:.0}%", if name.is_empty() { "unnamed" } else { name }, cpu / total * 100.0))
        .collect();
    format!(" ({})", named.join(", "))
}

fn lines(cell: &CellResult, base: &CellResult) -> Vec<String> {
    let mut out = cpu_lines(cell, base, &runtime_name(cell));
    out.extend(system_lines(cell, base));
    out
}

/// The runtime as its runs name it: its name and version (and platform), a pod's RuntimeClass
/// handler and node runtime, a VM's QEMU and accelerator, else the environment's kind.
fn runtime_name(cell: &CellResult) -> String {
    match (cell.setup.get("runtime.name"), cell.setup.get("runtime.version")) {
        (Some(name), Some(version)) => {
            let platform = cell.setup.get("runtime.platform").map(|p| format!(", platform {p}")).unwrap_or_default();
            format!("{name} ({}{platform})", version.lines().next().unwrap_or_default())
        }
        // A pod's: its RuntimeClass's handler and its node's runtime (`containerd://2.1.5`).
        (Some(name), None) => {
            let handler = cell.setup.get("k8s.runtime_handler").map(|h| format!("handler {h}"));
            let node = cell.setup.get("k8s.node_runtime").and_then(|r| r.split(',').next()).map(str::to_string);
            let build: Vec<String> = handler.into_iter().chain(node).collect();
            if build.is_empty() { name.clone() } else { format!("{name} ({})", build.join(" on ")) }
        }
        _ => match (cell.setup.get("vm.qemu"), cell.setup.get("vm.accel")) {
            (Some(qemu), Some(accel)) => format!("{qemu} ({accel})"),
            _ => cell.setup.get("env.kind").cloned().unwrap_or_else(|| "the environment".into()),
        },
    }
}

/// Where the CPU went: the runtime's own processes against the sandbox's, or the pods' and
/// the loaders', and the CPU per operation.
fn cpu_lines(cell: &CellResult, base: &CellResult, runtime: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let (Some(own), Some(host)) = (cell.median("sys.cpu_runtime"), cell.median("sys.cpu_host")) {
        let against = base.median("sys.cpu_runtime").unwrap_or(0.0);
        let share = if host > 0.0 { own / host * 100.0 } else { 0.0 };
        let per_ops = cell
            .median("ops")
            .filter(|n| *n > 0.0)
            .map(|n| format!(", {} per 100k operations", cpu(own / n * 1e5)))
            .unwrap_or_default();
        out.push(format!(
            "{runtime}: its own processes used {} per run{per_ops}{}, {share:.0}% of the {} the host spent on the sandbox (the baseline's: {})",
            cpu(own),
            by_process(cell),
            cpu(host),
            cpu(against)
        ));
    }
    if cell.median("sys.cpu_runtime").is_none()
        && cell.median("sys.cpu_workload").is_some()
        && base.median("sys.cpu_runtime").is_some()
    {
        out.push(format!(
            "{runtime}: its own CPU is not known, since some of its processes were not counted (see the runs' notes)"
        ));
    }
    // Pods, as their kubelets count them: the runtime's processes are inside each pod's figure.
    if cell.median("sys.cpu_host").is_none()
        && let (Some(pods), Some(loaders)) = (cell.median("sys.cpu_measured"), cell.median("sys.cpu_loaders"))
    {
        let baseline = |metric: &str| base.median(metric).map(cpu).unwrap_or_else(|| "not counted".into());
        out.push(format!(
            "{runtime}: the database's pods used {} in the measured phase (the baseline's: {}), the loaders' pods {} (the baseline's: {})",
            cpu(pods),
            baseline("sys.cpu_measured"),
            cpu(loaders),
            baseline("sys.cpu_loaders")
        ));
    }
    if let (Some(per_op), Some(base_per_op)) = (cell.median("sys.cpu_per_op"), base.median("sys.cpu_per_op")) {
        out.push(format!(
            "CPU per operation: {} against {} ({})",
            units::human(per_op, "us"),
            units::human(base_per_op, "us"),
            times(per_op, base_per_op)
        ));
    }
    out
}

/// What the volume, the device and the machine's counters say moved.
fn system_lines(cell: &CellResult, base: &CellResult) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(own) = cell.median("sys.cpu_volume") {
        let against = base.median("sys.cpu_volume").unwrap_or(0.0);
        if against <= 0.0 || moved(own, against) {
            out.push(format!(
                "the volume's daemons (nbdkit, qemu-storage-daemon) used {} per run (the baseline's: {})",
                cpu(own),
                cpu(against)
            ));
        }
    }
    if let Some(ratio) = cell.median("sys.device_write_ratio").filter(|r| *r < compare::ABSORBED_BELOW) {
        let device = cell.setup.get("sys.device").map(String::as_str).unwrap_or("the volume's device");
        out.push(format!(
            "{device} saw {:.0}% of the bytes the workload wrote: {} absorbed them",
            ratio * 100.0,
            compare::absorbing_cache(cell)
        ));
    }
    for (metric, what) in [
        ("sys.context_switches", "context switches"),
        ("sys.page_faults", "page faults"),
        ("sys.page_faults_major", "major page faults"),
        ("sys.device_busy", "the device's busy time"),
        ("sys.perf.context_switches", "context switches of the whole machine"),
        ("sys.perf.cpu_migrations", "CPU migrations of the whole machine"),
        ("sys.perf.cache_misses", "cache misses of the whole machine"),
    ] {
        // Absent where the sandbox's kernel counts in its own way (gVisor's switches and
        // faults), 0 where it does not count at all.
        if let (Some(v), Some(b)) = (cell.median(metric), base.median(metric))
            && b > 0.0
            && v > 0.0
            && moved(v, b)
        {
            out.push(format!("{what}: {} the baseline's", times(v, b)));
        }
    }
    if let (Some(ipc), Some(base_ipc)) = (cell.median("sys.perf.ipc"), base.median("sys.perf.ipc"))
        && (ipc / base_ipc - 1.0).abs() >= IPC_MOVED_BY
    {
        out.push(format!(
            "the machine's CPUs did {} instructions per cycle against {} ({})",
            units::sig3(ipc),
            units::sig3(base_ipc),
            times(ipc, base_ipc)
        ));
    }
    out
}

/// Whether `value` is at least `MOVED_BY` times `base`, or at most its `MOVED_BY`th.
fn moved(value: f64, base: f64) -> bool {
    value / base >= MOVED_BY || value / base <= 1.0 / MOVED_BY
}

fn cpu(seconds: f64) -> String {
    format!("{} CPU-s", units::sig3(seconds))
}

fn times(value: f64, base: f64) -> String {
    if base <= 0.0 {
        return "no baseline figure".into();
    }
    format!("×{}", units::sig3(value / base))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;
    use crate::store::Sample;

    #[test]
    fn a_cell_outside_the_noise_is_explained_by_what_moved_and_a_cell_within_it_is_not() {
        let samples = |slower: f64| {
            move |env: &str, rep: u32| -> Vec<Sample> {
                let sandbox = env != "host";
                let rate = if sandbox { 1000.0 * slower } else { 1000.0 } + rep as f64;
                let (host_cpu, runtime) = if sandbox { (5.1, 3.1) } else { (2.05, 0.05) };
                let mut s = vec![
                    Sample::new("op_rate", rate, "op/s"),
                    Sample::new("ops", rate * 10.0, "ops"),
                    Sample::new("sys.cpu_workload", 2.0, "s"),
                    Sample::new("sys.cpu_host", host_cpu, "s"),
                    Sample::new("sys.cpu_runtime", runtime, "s"),
                    Sample::new("sys.cpu_per_op", host_cpu / (rate * 10.0) * 1e6, "us"),
                    Sample::new("sys.context_switches", if sandbox { 5000.0 } else { 1000.0 }, "switches"),
                    Sample::new("sys.page_faults", 300.0, "faults"),
                    Sample::new("sys.cpu_volume", if sandbox { 1.5 } else { 0.5 }, "s"),
                    Sample::new("sys.perf.cpu_migrations", 40.0, "events"),
                    Sample::new("sys.perf.ipc", if sandbox { 0.9 } else { 1.5 }, crate::store::IPC_UNIT),
                ];
                if sandbox {
                    s.push(Sample::new("sys.device_write_ratio", 0.04, "x"));
                    for (name, cpu) in [("runsc-sandbox", 2.5), ("runsc-gofer", 0.5), ("runsc", 0.1)] {
                        s.push(Sample::new(format!("{RUNTIME_BY}{name}"), cpu, "s"));
                    }
                }
                s
            }
        };
        let setup = |env: &str| {
            let mut s = std::collections::BTreeMap::new();
            if env != "host" {
                for (k, v) in [
                    ("runtime.name", "runsc"),
                    ("runtime.version", "runsc version release-20260901.0\nspec: 1.2"),
                    ("runtime.platform", "systrap"),
                    ("sys.device", "loop3 (7:3)"),
                ] {
                    s.insert(k.to_string(), v.to_string());
                }
            }
            s
        };
        let (slow, _) = fixture::analysis(samples(0.6), setup);
        let explained = explain(&slow);
        assert_eq!(explained.len(), 1, "only the sandbox is explained");
        let lines = &explained[0].lines;
        assert_eq!(
            lines[0],
            "runsc (runsc version release-20260901.0, platform systrap): its own processes used 3.10 CPU-s per run, 51.5 CPU-s per 100k operations (runsc-sandbox 81%, runsc-gofer 16%, runsc 3%), 61% of the 5.10 CPU-s the host spent on the sandbox (the baseline's: 0.050 CPU-s)"
        );
        assert!(lines[1].starts_with("CPU per operation: 847 µs against 205 µs (×4.14)"), "{}", lines[1]);
        assert_eq!(
            lines[2],
            "the volume's daemons (nbdkit, qemu-storage-daemon) used 1.50 CPU-s per run (the baseline's: 0.500 CPU-s)"
        );
        assert_eq!(
            lines[3],
            "loop3 (7:3) saw 4% of the bytes the workload wrote: gVisor's own page cache absorbed them"
        );
        assert_eq!(lines[4], "context switches: ×5.00 the baseline's");
        assert_eq!(lines[5], "the machine's CPUs did 0.900 instructions per cycle against 1.50 (×0.600)");
        assert_eq!(lines.len(), 6, "page faults and migrations did not move: {lines:?}");

        // gVisor's systrap stubs leave the tree: the host's count is dropped, and the why says so.
        let uncounted = |env: &str, rep: u32| -> Vec<Sample> {
            let mut s = samples(0.6)(env, rep);
            if env != "host" {
                s.retain(|x| !matches!(x.metric.as_str(), "sys.cpu_host" | "sys.cpu_runtime" | "sys.cpu_per_op"));
            }
            s
        };
        let (unknown, _) = fixture::analysis(uncounted, setup);
        let lines = &explain(&unknown)[0].lines;
        assert!(
            lines[0].ends_with(
                "its own CPU is not known, since some of its processes were not counted (see the runs' notes)"
            ),
            "{lines:?}"
        );

        let (same, _) = fixture::analysis(samples(1.0), setup);
        assert!(explain(&same).is_empty(), "a cell within the noise needs no why");
    }

    #[test]
    fn a_pods_runtime_is_named_by_its_handler_and_its_nodes_runtime() {
        let samples = |env: &str, rep: u32| {
            let (rate, per_op) = if env == "host" { (1000.0, 100.0) } else { (500.0, 300.0) };
            vec![Sample::new("op_rate", rate + rep as f64, "op/s"), Sample::new("sys.cpu_per_op", per_op, "us")]
        };
        let setup = |env: &str| {
            let pod = [
                ("runtime.name", "gvisor"),
                ("k8s.runtime_handler", "runsc"),
                ("k8s.node_runtime", "containerd://2.1.5, kubelet v1.34.4, kernel 6.1.0"),
            ];
            let pod = if env == "host" { &[][..] } else { &pod[..] };
            pod.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let (analysis, _) = fixture::analysis(samples, setup);
        let lines = &explain(&analysis)[0].lines;
        assert_eq!(lines[0], "CPU per operation: 300 µs against 100 µs (×3.00)");
        // The kubelets' count of the database's and the loaders' pods in the measured phase.
        let counted = |env: &str, rep: u32| {
            let mut s = samples(env, rep);
            let (pods, loaders) = if env == "host" { (20.0, 9.5) } else { (30.0, 5.0) };
            s.extend([Sample::new("sys.cpu_measured", pods, "s"), Sample::new("sys.cpu_loaders", loaders, "s")]);
            s
        };
        let (analysis, _) = fixture::analysis(counted, setup);
        let lines = &explain(&analysis)[0].lines;
        assert_eq!(
            lines[0],
            "gvisor (handler runsc on containerd://2.1.5): the database's pods used 30.0 CPU-s in the measured phase (the baseline's: 20.0 CPU-s), the loaders' pods 5.00 CPU-s (the baseline's: 9.50 CPU-s)"
        );
        assert_eq!(lines[1], "CPU per operation: 300 µs against 100 µs (×3.00)");
        let mut cpu = samples("runc", 1);
        cpu.extend([Sample::new("sys.cpu_host", 2.0, "s"), Sample::new("sys.cpu_runtime", 1.0, "s")]);
        let (analysis, _) =
            fixture::analysis(|env, rep| if env == "host" { samples(env, rep) } else { cpu.clone() }, setup);
        let lines = &explain(&analysis)[0].lines;
        assert!(
            lines[0].starts_with("gvisor (handler runsc on containerd://2.1.5): its own processes used"),
            "{lines:?}"
        );
    }
}
