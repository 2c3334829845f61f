//! What makes a cell's numbers doubtful, said next to them: noisy repetitions, a sandbox that
//! beat the bare host (with the cause, where the runs' own figures show one), what the run before
//! left behind, a cache that took the I/O, a sandbox that looks like the host.

use std::collections::BTreeMap;

use super::*;

/// Something that makes a cell's numbers doubtful, said next to them.
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    pub cell: String,
    /// What kind of doubt this is: warnings with the same cause are grouped in reports.
    pub cause: &'static str,
    pub message: String,
}

/// Above this coefficient of variation a cell's repetitions disagree too much to trust a small
/// difference.
pub const CV_LIMIT_PCT: f64 = 5.0;

/// `host` is what isobench saw of the machine itself (host.json); `runs` are the result set's,
/// whose order shows what each run followed.
pub fn warnings(analysis: &Analysis, host: &BTreeMap<String, String>, runs: &[RunRecord]) -> Vec<Warning> {
    let headline = |id: &str| {
        let cell = analysis.cells.iter().find(|c| c.record.cell == id)?;
        cell.record.headline.iter().find(|m| cell.metric(m).is_some()).cloned()
    };
    let carried = carryover::warnings(runs, &headline);
    let mut out = Vec::new();
    let repeat_metric = analysis.plan.repeat.metric.as_deref();
    for cell in analysis.cells.iter().filter(|c| c.runs_ok > 0) {
        let mut warn = |cause, message| out.push(Warning { cell: cell.record.cell.clone(), cause, message });
        if let Some(m) = cell.target_metric(repeat_metric)
            && m.summary.n > 1
            && m.summary.cv_pct > CV_LIMIT_PCT
        {
            warn(
                "noisy",
                format!(
                    "{} varies {:.1}% (CV) across {} runs, above {CV_LIMIT_PCT}%: the machine was noisy or the runs are too short",
                    m.metric, m.summary.cv_pct, m.summary.n
                ),
            );
        }
        if cell.record.sandbox
            && let Some(base) = cell.baseline.map(|b| &analysis.cells[b])
            && !base.record.sandbox
        {
            for m in cell.metrics.iter().filter(|m| cell.record.headline.contains(&m.metric)) {
                if let Some(d) = &m.vs_baseline
                    && d.verdict == Verdict::Faster
                    && let Some((lo, hi)) = d.overhead_ci
                {
                    let carry = carried.iter().any(|w| w.cell == cell.record.cell || w.cell == base.record.cell);
                    warn(
                        "beats-host",
                        format!(
                            "{} is {:.1}% better than on the bare host (95% CI {:.1}% to {:.1}% better), beyond the noise: a sandbox should not beat the host; {}",
                            m.metric,
                            -d.overhead_pct,
                            -hi,
                            -lo,
                            beats_host_cause(cell, base, carry, host)
                        ),
                    );
                    break;
                }
            }
        }
        if let Some(w) = page_cache_warning(cell) {
            warn("page-cache", w);
        }
        if let Some(limit) = cell.notes.iter().find_map(|n| n.strip_prefix(cql_stress::capacity::CLIENT_LIMIT_NOTE)) {
            warn("client-limit", format!("the capacity measures the load generator, not this environment: {limit}"));
        }
        if let Some(w) = absorbed_writes_warning(cell) {
            warn("absorbed-writes", w);
        }
        if cell.record.sandbox
            && let Some(why) = crate::proof::looks_like_host(&cell.facts, host)
        {
            warn("looks-like-host", format!("env \"{}\" is a sandbox, but {why}", cell.record.labels.env));
        }
    }
    out.extend(carried);
    out
}

/// Points of `sys.cpu_on_disk_irq_cpus` by which a sandbox must have sat more on its disk's
/// interrupt CPUs than the host for that to count as a cause (a run's share moves by about 20
/// points from run to run on its own).
const PLACEMENT_POINTS: f64 = 15.0;

/// Where a synced write's time went, against the host's, where the runs timed the flushes apart
/// from the writes' system calls (fio's `fsync`) and the two sides' differ by more than 5 %.
fn time_per_write(cell: &CellResult, base: &CellResult) -> Option<String> {
    let both = |metric: &str| cell.median(metric).zip(base.median(metric));
    let (sync, host_sync) = both(crate::store::SYNC_LATENCY)?;
    let (write, host_write) = both("write_clat_mean")?;
    if (sync + write - host_sync - host_write).abs() < 0.05 * (host_sync + host_write) {
        return None;
    }
    let part = if (host_sync - sync).abs() >= (host_write - write).abs() {
        FLUSHES
    } else {
        "the write system calls, not the flushes"
    };
    Some(format!(
        "its flushes (fsync) took {sync:.0} µs against the host's {host_sync:.0} µs, its writes {write:.1} µs against {host_write:.1} µs: the time per write differs in {part}"
    ))
}

const FLUSHES: &str = "the flushes the device completed, not the system calls";

/// Where the machine's CPUs halt when idle (a cpuidle driver and no request that they poll, or no
/// driver at all, where the kernel's default idle halts), what that does to a flush's time.
fn halting_cpus(host: &BTreeMap<String, String>) -> Option<String> {
    const WAKE: &str = "a flush's completion waits for a halted CPU to wake, which side found its CPUs halted more often moves the result";
    match host.get("cpu.idle_driver").map(String::as_str) {
        // Not recorded: the machine's idling is not known.
        None => None,
        Some("none") => Some(format!(
            "and the CPUs here halt when idle (no cpuidle driver, so `cpu_idle = \"poll\"` cannot keep them polling): {WAKE}; more rounds narrow it (docs/statistics.md)"
        )),
        Some(_) if crate::sys::cpu_idle::held_polling(host) => None,
        Some(driver) => Some(format!(
            "and the CPUs here halt when idle (cpuidle {driver}): {WAKE}, and `cpu_idle = \"poll\"` measures both with the CPUs polling (docs/statistics.md)"
        )),
    }
}

/// Why a sandbox beat the host, as far as the figures its runs and the host's recorded show it;
/// where they show nothing, that the cause is unknown. `carry`: a carry-over was found on
/// either side; `host`: the machine's facts.
fn beats_host_cause(cell: &CellResult, base: &CellResult, carry: bool, host: &BTreeMap<String, String>) -> String {
    let mut seen = Vec::new();
    let direct = cell.record.workload_setup.get("fio.direct").is_some_and(|v| v == "true");
    if direct && cell.setup.get("runtime.ignores_o_direct").is_some_and(|v| v == "true") {
        seen.push(
            "this runtime opened the files without O_DIRECT, so its \"direct\" I/O went through its page cache"
                .to_string(),
        );
    }
    // A share of the workload's bytes that reached the device, against the host's.
    let share = |c: &CellResult, device: &str, workload: &str| Some(c.median(device)? / c.median(workload)?);
    let shares = |device, workload| share(cell, device, workload).zip(share(base, device, workload));
    if let Some((mine, host)) = shares("sys.device_write_bytes", "write_bytes").filter(|(m, h)| *m < 0.8 * h) {
        seen.push(format!(
            "its device took {:.0}% of the bytes written, the host's {:.0}%: a cache acknowledged the rest",
            mine * 100.0,
            host * 100.0
        ));
    }
    if let Some((mine, host)) = shares("sys.device_read_bytes", "read_bytes").filter(|(m, h)| *m < 0.8 * h) {
        seen.push(format!(
            "its device gave {:.0}% of the bytes read, the host's {:.0}%: the rest came from a cache",
            mine * 100.0,
            host * 100.0
        ));
    }
    if let Some(split) = time_per_write(cell, base) {
        if split.ends_with(FLUSHES)
            && let Some(halting) = halting_cpus(host)
        {
            seen.push(format!("{split}, {halting}"));
        } else {
            seen.push(split);
        }
    }
    if carry {
        seen.push(
            "its runs or the host's carry what the cell run before left behind (see the carry-over warning)".into(),
        );
    }
    let placed = |c: &CellResult| c.median(crate::store::DISK_IRQ_CPU_SHARE);
    if let (Some(mine), Some(host)) = (placed(cell), placed(base))
        && mine > host + PLACEMENT_POINTS
    {
        seen.push(format!(
            "its processes ran {mine:.0}% of their CPU time on the CPUs that took the disk's interrupts, the host's {host:.0}%: an I/O completes sooner for a process waiting on the CPU it interrupts (give both the same cpuset to compare the storage path alone)"
        ));
    }
    let settle = |c: &CellResult| c.median(crate::store::SETTLE_METRIC);
    if let (Some(mine), Some(host)) = (settle(cell), settle(base))
        && host > mine + 1.0
    {
        seen.push(format!("the host's runs waited {host:.1} s for the machine to settle, this cell's {mine:.1} s"));
    }
    if seen.is_empty() {
        return "the cause is unknown: the figures the runs recorded (the device's bytes, the time of a write's flush and of its system call, where the processes ran against the disk's interrupts, the wait to settle, the cells run before) show none".into();
    }
    format!("the figures the runs recorded show: {}", seen.join("; "))
}

/// Buffered I/O over a working set that fits in the page cache measures memory, not storage.
fn page_cache_warning(cell: &CellResult) -> Option<String> {
    let setup = &cell.record.workload_setup;
    if setup.get("fio.direct")? != "false" {
        return None;
    }
    // Writes each followed by an fsync reach the volume, cache or not.
    let writes_only = setup.get("fio.rw").is_some_and(|rw| matches!(rw.as_str(), "write" | "randwrite"));
    if writes_only && setup.get("fio.fsync").is_some_and(|n| n != "0") {
        return None;
    }
    let size: f64 = setup.get("fio.size")?.parse().ok()?;
    let memory_kib: f64 =
        cell.facts.get("memory.limit_kib").or_else(|| cell.facts.get("mem_total_kib"))?.parse().ok()?;
    let memory = memory_kib * 1024.0;
    (size < 2.0 * memory).then(|| {
        format!(
            "buffered I/O over a {} working set with {} of memory in the environment (less than 2×): the page cache can hold it, so this measures memory more than storage",
            units::human(size, "B"),
            units::human(memory, "B")
        )
    })
}

/// Below this share of the workload's written bytes reaching the device, a cache absorbed them.
pub const ABSORBED_BELOW: f64 = 0.5;

/// What took the writes a cell's device did not see.
pub fn absorbing_cache(cell: &CellResult) -> &'static str {
    if cell.setup.get("runtime.name").is_some_and(|r| r.contains("runsc")) {
        "gVisor's own page cache"
    } else {
        "a cache between the workload and the device"
    }
}

/// A storage benchmark whose writes did not reach the device under the volume: the device's own
/// counters (`sys.device_write_ratio`) say a cache took them.
fn absorbed_writes_warning(cell: &CellResult) -> Option<String> {
    let ratio = cell.median("sys.device_write_ratio")?;
    let device = cell.setup.get("sys.device").map(String::as_str).unwrap_or("the volume's device");
    (ratio < ABSORBED_BELOW).then(|| {
        format!(
            "{device} saw {:.0}% of the bytes the workload wrote: {} absorbed them, so this measures the cache more than the storage",
            ratio * 100.0,
            absorbing_cache(cell)
        )
    })
}
