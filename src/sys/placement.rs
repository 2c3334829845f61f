//! Where a sandbox ran against where its disk interrupts: an I/O completes on the CPU that
//! takes its disk's interrupt, and a process waiting on that same CPU is woken without a trip to
//! the other. On a 2-core machine whose disk interrupts one CPU, fsynced 4k writes pinned there
//! ran 15 % faster than on the other (bench/fio-levels.sh), so a run's level depends on where the
//! scheduler happened to put it; this says where it did.

use std::path::{Path, PathBuf};

use super::{CpuGroup, disk_dir_behind};

/// The disk's interrupt counts and the sandbox's CPU per CPU, read as the sandbox starts.
pub struct Placement {
    irqs: Vec<u32>,
    interrupts: Vec<u64>,
    cpu: Vec<f64>,
}

impl Placement {
    /// Reads both, where both can be read: the disk behind `path` interrupts through MSI lines
    /// of its own (virtio, NVMe), and `group` counts CPU per CPU.
    pub fn start(path: &Path, group: &CpuGroup) -> Option<Placement> {
        let irqs = disk_irqs(&disk_dir_behind(path)?);
        let interrupts = interrupts_per_cpu(&std::fs::read_to_string("/proc/interrupts").ok()?, &irqs)?;
        Some(Placement { irqs, interrupts, cpu: group.cpu_s_per_cpu()? })
    }

    /// The share (0–1) of the sandbox's CPU time since `start` that ran on the CPUs that took
    /// the disk's interrupts meanwhile, each CPU weighted by its share of them. None without
    /// interrupts or CPU time.
    pub fn finish(self, group: &CpuGroup) -> Option<f64> {
        let now = interrupts_per_cpu(&std::fs::read_to_string("/proc/interrupts").ok()?, &self.irqs)?;
        let cpu = group.cpu_s_per_cpu()?;
        let interrupts: Vec<f64> = now.iter().zip(&self.interrupts).map(|(n, b)| n.saturating_sub(*b) as f64).collect();
        let used: Vec<f64> = cpu.iter().zip(&self.cpu).map(|(n, b)| (n - b).max(0.0)).collect();
        share_on_interrupting_cpus(&interrupts, &used)
    }
}

fn share_on_interrupting_cpus(interrupts: &[f64], used: &[f64]) -> Option<f64> {
    let (all_interrupts, all_used) = (interrupts.iter().sum::<f64>(), used.iter().sum::<f64>());
    (all_interrupts > 0.0 && all_used > 0.0)
        .then(|| interrupts.iter().zip(used).map(|(i, u)| i / all_interrupts * u).sum::<f64>() / all_used)
}

/// The MSI interrupt lines of the device under a disk's sysfs directory (its PCI function's
/// `msi_irqs`, found up its device path); none for a disk without them (a loop, a SCSI disk
/// behind a shared line).
fn disk_irqs(disk: &Path) -> Vec<u32> {
    let mut at: Option<PathBuf> = std::fs::canonicalize(disk.join("device")).ok();
    while let Some(dir) = at {
        if let Ok(entries) = std::fs::read_dir(dir.join("msi_irqs")) {
            return entries.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
        }
        at = dir.parent().filter(|p| p.starts_with("/sys/devices")).map(Path::to_path_buf);
    }
    Vec::new()
}

/// The counts per CPU of `irqs`, summed, from /proc/interrupts' text. None where none is listed.
fn interrupts_per_cpu(text: &str, irqs: &[u32]) -> Option<Vec<u64>> {
    let cpus = text.lines().next()?.split_whitespace().count();
    let mut sum = vec![0u64; cpus];
    let mut found = false;
    for line in text.lines().skip(1) {
        let mut fields = line.split_whitespace();
        let Some(irq) = fields.next().and_then(|f| f.trim_end_matches(':').parse::<u32>().ok()) else { continue };
        if !irqs.contains(&irq) {
            continue;
        }
        found = true;
        for (total, count) in sum.iter_mut().zip(fields.take(cpus)) {
            *total += count.parse::<u64>().unwrap_or(0);
        }
    }
    found.then_some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERRUPTS: &str = "           CPU0       CPU1       
 35:          0          1 PCI-MSIX-0000:00:02.0   0-edge      virtio1-config
 36:         10    9491596 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0
 38:          0      27161 PCI-MSIX-0000:00:03.0   0-edge      virtio2-input.0
NMI:          0          0   Non-maskable interrupts
";

    #[test]
    fn the_disks_lines_are_summed_per_cpu() {
        assert_eq!(interrupts_per_cpu(INTERRUPTS, &[35, 36]), Some(vec![10, 9491597]));
        assert_eq!(interrupts_per_cpu(INTERRUPTS, &[99]), None);
    }

    #[test]
    fn the_share_weights_each_cpus_time_by_its_share_of_the_interrupts() {
        // Every interrupt on CPU 1; three quarters of the sandbox's time there.
        assert_eq!(share_on_interrupting_cpus(&[0.0, 100.0], &[1.0, 3.0]), Some(0.75));
        // Split evenly: wherever the sandbox ran, half.
        assert_eq!(share_on_interrupting_cpus(&[50.0, 50.0], &[4.0, 0.0]), Some(0.5));
        assert_eq!(share_on_interrupting_cpus(&[0.0, 0.0], &[1.0, 1.0]), None);
    }
}
