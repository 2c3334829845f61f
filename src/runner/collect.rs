//! Where the time went, from the host's side of one sandbox: the CPU of every process that
//! hosted it (the runtime, QEMU, gVisor's sentry and gofer, and the workload they ran), set
//! against the CPU the workload's own kernel counted inside (`sys.cpu_workload`, from the
//! agent); and the I/O of the device under the volume, set against what the workload did.

use crate::store::{AgentReport, Sample};
use crate::sys::{DiskCounters, Usage, device_name, device_under};
use crate::volume::Provisioned;

/// Below this share of the workload's own CPU, the host's count missed some of the sandbox's
/// processes (the two kernels' clocks differ by a little, not by this much).
const HOST_SAW_AT_LEAST: f64 = 0.9;

/// Counters read as a sandbox starts; `finish` adds the differences to its report.
pub struct HostCounters {
    /// None when other processes' CPU would be mixed in (sandboxes started together) or the
    /// sandbox's processes are not isobench's children.
    usage: Option<Usage>,
    device: Option<((u32, u32), DiskCounters)>,
}

impl HostCounters {
    /// `alone`: no other sandbox of isobench's runs meanwhile; `reaped`: the environment's
    /// processes are isobench's children (`Environment::reaps_sandbox`).
    pub fn start(volume: &Provisioned, alone: bool, reaped: bool) -> HostCounters {
        let device = device_under(&volume.path).and_then(|d| Some((d, DiskCounters::read(d)?)));
        HostCounters { usage: (alone && reaped).then(Usage::children), device }
    }

    pub fn finish(self, report: &mut AgentReport) {
        let value = |metric: &str| report.samples.iter().find(|s| s.metric == metric).map(|s| s.value);
        let workload = value("sys.cpu_workload");
        let mut samples = Vec::new();
        let mut host = self.usage.map(|before| Usage::children().since(&before).cpu_s);
        if let (Some(seen), Some(own)) = (host, workload)
            && seen < own * HOST_SAW_AT_LEAST
        {
            // Processes that left isobench's tree (gVisor's systrap stubs, which run the
            // workload's own code) took their CPU with them: the host's count is short.
            report.notes.push(format!(
                "the host counted {seen:.2} CPU-s for the sandbox's processes, less than the {own:.2} CPU-s the workload's own kernel counted: some of them were not isobench's children, so the runtime's share of the CPU is not known"
            ));
            host = None;
        }
        if let Some(host) = host {
            samples.push(Sample::new("sys.cpu_host", host, "s"));
            if let Some(workload) = workload {
                samples.push(Sample::new("sys.cpu_runtime", (host - workload).max(0.0), "s"));
            }
        }
        // Of everything that hosted the sandbox: the workload's own CPU alone would hide the
        // runtime's.
        if let Some(ops) = value("ops").filter(|n| *n > 0.0)
            && let Some(cpu) = host
        {
            samples.push(Sample::new("sys.cpu_per_op", cpu / ops * 1e6, "us"));
        }
        if let Some((device, before)) = self.device
            && let Some(after) = DiskCounters::read(device)
        {
            let io = after.since(&before);
            let name = device_name(device).unwrap_or_else(|| "?".into());
            report.setup.insert("sys.device".into(), format!("{name} ({}:{})", device.0, device.1));
            samples.push(Sample::new("sys.device_read_bytes", io.read_bytes as f64, "B"));
            samples.push(Sample::new("sys.device_write_bytes", io.write_bytes as f64, "B"));
            samples.push(Sample::new("sys.device_busy", io.busy_ms as f64 / 1000.0, "s"));
            if let Some(written) = value("write_bytes").filter(|b| *b > 0.0) {
                samples.push(Sample::new("sys.device_write_ratio", io.write_bytes as f64 / written, "x"));
            }
        }
        report.samples.extend(samples);
    }
}
