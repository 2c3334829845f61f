//! Letting the machine settle before a run, so that no run pays for the one before it: that
//! run's processes gone, the dirty pages it left written back, and the CPUs idle for a moment.
//! Each part has a time limit; what did not settle within it is said, never waited out forever.

use std::time::{Duration, Instant};

use anyhow::Result;

use super::{TOKEN_VAR, pids_whose_env, sleep};

/// How long and how far to wait. The suite's `settle`.
#[derive(Clone, Debug, PartialEq)]
pub struct Settle {
    /// Each part's limit.
    pub timeout: Duration,
    /// The machine's CPUs count as idle at or below this share busy (0–1) over one window; at 1
    /// they are not looked at.
    pub cpu_busy: f64,
    /// The machine is shared (`SHARED_MACHINE_VAR`): only the run before's processes are waited
    /// for.
    pub shared: bool,
}

impl Default for Settle {
    fn default() -> Self {
        Settle { timeout: Duration::from_secs(5), cpu_busy: 0.10, shared: false }
    }
}

/// Set to 1 where the machine is shared (tests or CI jobs side by side): its CPUs are never idle
/// and its dirty pages are its neighbours' too, which a sync would flush under their feet, so
/// the settle waits only for the run before's own processes; each run records that.
pub const SHARED_MACHINE_VAR: &str = "ISOBENCH_SHARED_MACHINE";

impl Settle {
    /// This settle as the environment has it: its own processes only on a shared machine.
    pub fn from_environment(mut self) -> Settle {
        self.shared = std::env::var(SHARED_MACHINE_VAR).is_ok_and(|v| v == "1");
        self
    }
}

/// What a settle found and how long it waited.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settled {
    /// Seconds waited for something that was not settled at the first look (0: nothing was).
    pub waited_s: f64,
    /// The CPUs' busy share (0–1) in the last window looked at.
    pub cpu_busy: f64,
    /// What was still unsettled when its limit was hit, in words.
    pub unsettled: Vec<String>,
}

/// Dirty and writeback pages below this are "near zero": a journal's or a log's few pages.
const DIRTY_NEAR_ZERO_KIB: u64 = 16 << 10;
/// One look at the CPUs: short enough to cost little, long enough to see a busy core.
const CPU_WINDOW: Duration = Duration::from_millis(200);

impl Settle {
    /// Waits for the machine to settle after the processes marked with tokens starting with
    /// `token_prefix` (the previous run's). Errs only when the user interrupts.
    pub fn wait(&self, token_prefix: &str) -> Result<Settled> {
        let mut settled = Settled::default();
        self.processes_gone(&mut settled, token_prefix)?;
        if !self.shared {
            self.written_back(&mut settled)?;
            self.cpus_idle(&mut settled)?;
        }
        Ok(settled)
    }

    /// No process marked with a token starting with `token_prefix` left.
    fn processes_gone(&self, settled: &mut Settled, token_prefix: &str) -> Result<()> {
        let needle = format!("{TOKEN_VAR}={token_prefix}");
        self.part(settled, || {
            let pids = pids_whose_env(|kv| kv.starts_with(needle.as_bytes()));
            pids.is_empty().then_some(()).ok_or_else(|| {
                let names: Vec<String> = pids.iter().take(3).map(|p| format!("{p} ({})", comm(*p))).collect();
                format!("{} process(es) of the run before still ran: {}", pids.len(), names.join(", "))
            })
        })
    }

    /// The kernel's dirty and writeback pages near zero, synced where they are not.
    fn written_back(&self, settled: &mut Settled) -> Result<()> {
        let mut syncing: Option<std::thread::JoinHandle<()>> = None;
        self.part(settled, || {
            let dirty = meminfo_kib("Dirty") + meminfo_kib("Writeback");
            if dirty <= DIRTY_NEAR_ZERO_KIB {
                return Ok(());
            }
            // sync(2) cannot be interrupted or bounded: it runs aside while the counters are watched.
            if syncing.as_ref().is_none_or(|s| s.is_finished()) {
                // SAFETY: sync(2) takes no arguments and cannot fail.
                syncing = Some(std::thread::spawn(|| unsafe { libc::sync() }));
            }
            Err(format!("{} MiB of dirty pages were still to be written back", dirty >> 10))
        })
    }

    /// The machine's CPUs at most `cpu_busy` busy over one window (not looked at from 100 %).
    fn cpus_idle(&self, settled: &mut Settled) -> Result<()> {
        if self.cpu_busy >= 1.0 {
            return Ok(());
        }
        let (mut cpu, mut busy) = (CpuTimes::now(), 0.0);
        self.part(settled, || {
            sleep(CPU_WINDOW).map_err(|_| String::new())?;
            let now = CpuTimes::now();
            busy = now.busy_since(&cpu);
            cpu = now;
            (busy <= self.cpu_busy).then_some(()).ok_or_else(|| {
                format!(
                    "the CPUs were still {:.0}% busy, idle being {:.0}% or less",
                    busy * 100.0,
                    self.cpu_busy * 100.0
                )
            })
        })?;
        settled.cpu_busy = busy;
        Ok(())
    }

    /// Looks until `settled_now` says so or the limit is hit, adding the wait beyond the first
    /// look and, at the limit, what was still unsettled.
    fn part(&self, settled: &mut Settled, mut settled_now: impl FnMut() -> Result<(), String>) -> Result<()> {
        let began = Instant::now();
        let mut first = true;
        loop {
            match settled_now() {
                Ok(()) => break,
                Err(_) if super::interrupted() => return Err(super::Interrupted.into()),
                Err(why) if began.elapsed() >= self.timeout => {
                    settled.unsettled.push(format!("after {:.1} s {why}", self.timeout.as_secs_f64()));
                    break;
                }
                Err(_) if first => first = false,
                Err(_) => {}
            }
            sleep(Duration::from_millis(50))?;
        }
        if !first {
            settled.waited_s += began.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

fn comm(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|c| c.trim().to_string()).unwrap_or_default()
}

fn meminfo_kib(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The machine's CPU time so far, from /proc/stat's first line, in clock ticks.
struct CpuTimes {
    busy: u64,
    total: u64,
}

impl CpuTimes {
    fn now() -> CpuTimes {
        let fields = super::machine_cpu_ticks();
        // user nice system idle iowait irq softirq steal: time stolen by the hypervisor is
        // neither this machine's work nor anything a wait here could change.
        let at = |i: usize| fields.get(i).copied().unwrap_or(0);
        let busy = at(0) + at(1) + at(2) + at(5) + at(6);
        CpuTimes { busy, total: busy + at(3) + at(4) }
    }

    fn busy_since(&self, before: &CpuTimes) -> f64 {
        let total = self.total.saturating_sub(before.total);
        if total == 0 { 0.0 } else { self.busy.saturating_sub(before.busy) as f64 / total as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_of_the_run_before_is_waited_for_and_named_at_the_limit() {
        let token = format!("settle-test-{}", std::process::id());
        let mut child =
            std::process::Command::new("sleep").arg("30").env(TOKEN_VAR, format!("{token}-p1")).spawn().unwrap();
        // Until its exec, the child has this process's environment.
        let marked = format!("{TOKEN_VAR}={token}");
        while pids_whose_env(|kv| kv.starts_with(marked.as_bytes())).is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        let settle = Settle { timeout: Duration::from_millis(300), cpu_busy: 1.0, shared: false };
        let mut found = Settled::default();
        settle.processes_gone(&mut found, &token).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(found.unsettled.len(), 1, "{found:?}");
        assert!(
            found.unsettled[0].contains("process(es) of the run before still ran")
                && found.unsettled[0].contains("(sleep)")
        );
        assert!(found.waited_s >= 0.3, "{found:?}");
        let mut clean = Settled::default();
        settle.processes_gone(&mut clean, &token).unwrap();
        assert!(clean.unsettled.is_empty() && clean.waited_s == 0.0, "nothing left to wait for: {clean:?}");
    }
}
