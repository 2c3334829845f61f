//! Event counters over one run, as `perf stat` counts them. The machine's own (`-a`): the
//! kernel's software events (context switches, CPU migrations, page faults) of every process,
//! and the CPU's hardware events (cycles, instructions, cache and branch misses) where the
//! machine exposes its PMU (a VM's guest often has none); whole-machine counts, the only ones
//! that see every process a sandbox hides its work in, and meaningful for a run only while it
//! runs alone. And a server's (`-p`): the system calls and page faults of its processes and the
//! threads they start, which say what a sandbox that intercepts them has to pay per operation.
//! perf counts in the kernel and is read once, when it stops.

use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

/// The events asked for; perf reports those this machine cannot count as `<not supported>`.
const EVENTS: &[&str] =
    &["context-switches", "cpu-migrations", "page-faults", "cycles", "instructions", "cache-misses", "branch-misses"];

/// The events a sandbox's interception is priced by; `raw_syscalls:sys_enter` fires for each
/// system call the host's kernel enters (not for one a seccomp filter traps, as gVisor's does).
pub const SYSCALLS: &str = "raw_syscalls:sys_enter";
const PROCESS_EVENTS: &[&str] = &[SYSCALLS, "page-faults"];

/// `perf stat` running until `finish`.
pub struct PerfStat {
    child: Option<Child>,
}

/// A run that failed before `finish` stops its perf too.
impl Drop for PerfStat {
    fn drop(&mut self) {
        if let Some(child) = self.child.take() {
            let _ = interrupt(child);
        }
    }
}

/// Interrupts perf, which then prints its counts, and waits for them.
pub(super) fn interrupt(child: Child) -> Result<std::process::Output> {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    Ok(child.wait_with_output()?)
}

/// What perf counted, and what it could not.
#[derive(Debug, Default, PartialEq)]
pub struct PerfCounts {
    /// (event, count), in `EVENTS`' order.
    pub counted: Vec<(String, f64)>,
    pub not_supported: Vec<String>,
}

impl PerfCounts {
    pub fn get(&self, event: &str) -> Option<f64> {
        self.counted.iter().find(|(e, _)| e == event).map(|(_, n)| *n)
    }

    /// What perf can count on this machine: the machine's events over a `true`, counted or not
    /// supported (a VM's guest without a virtual PMU counts no hardware event).
    pub fn of_this_machine() -> Result<PerfCounts> {
        // The counts on stdout (a pipe here), where the project's command runner reads them.
        let args = ["stat", "--field-separator", ",", "--output", "/dev/stdout", "--event", &EVENTS.join(","), "true"];
        Ok(parse(&super::command_output("perf", &args)?))
    }
}

impl PerfStat {
    /// Starts counting the whole machine. Fails where perf is not installed.
    pub fn machine() -> Result<PerfStat> {
        Self::spawn(&["--all-cpus", "--event", &EVENTS.join(",")])
    }

    /// Starts counting the system calls and page faults of `pids`, the threads they have and
    /// those they start.
    pub fn processes(pids: &[i32]) -> Result<PerfStat> {
        if pids.is_empty() {
            bail!("no process to count");
        }
        let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
        Self::spawn(&["--pid", &pids.join(","), "--event", &PROCESS_EVENTS.join(",")])
    }

    fn spawn(args: &[&str]) -> Result<PerfStat> {
        let mut cmd = Command::new("perf");
        // The counts go to stderr, with perf's complaints, when it stops.
        cmd.args(["stat", "--field-separator", ","])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // perf counts until it is interrupted: in a group of its own, so that only `finish`
        // does, and killed if isobench dies first.
        super::prepare(&mut cmd, None);
        let child = cmd.spawn().context("cannot start perf (Debian's linux-perf package)")?;
        Ok(PerfStat { child: Some(child) })
    }

    /// Stops perf and reads its counts.
    pub fn finish(mut self) -> Result<PerfCounts> {
        let out = interrupt(self.child.take().expect("perf runs until finish"))?;
        let said = String::from_utf8_lossy(&out.stderr);
        let counts = parse(&said);
        if counts.counted.is_empty() && counts.not_supported.is_empty() {
            let said: Vec<&str> = said.lines().map(str::trim).filter(|l| !l.is_empty()).take(2).collect();
            let said = if said.is_empty() { "it printed nothing".into() } else { said.join(" ") };
            bail!("perf stat counted nothing ({}): {said}", out.status);
        }
        Ok(counts)
    }
}

/// `perf stat -x,`'s lines: `count,unit,event,running time,share of it counted,…`; comments
/// start with '#'. A count perf had to multiplex (share below 100) is its estimate for the
/// whole time.
fn parse(text: &str) -> PerfCounts {
    let mut counts = PerfCounts::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let fields: Vec<&str> = line.split(',').collect();
        let (Some(count), Some(event)) = (fields.first(), fields.get(2)) else { continue };
        if event.is_empty() {
            continue;
        }
        match count.parse::<f64>() {
            Ok(n) => counts.counted.push((event.to_string(), n)),
            Err(_) if count.contains("not supported") => counts.not_supported.push(event.to_string()),
            // `<not counted>`: the event could be counted but was not, this time.
            Err(_) => {}
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_read_and_the_events_the_machine_lacks_are_named() {
        let text = "# started on Thu Nov 26 03:56:45 2026\n\n27943,,context-switches,2229904583,100.00,,\n20528,,page-faults,2229903151,100.00,,\n<not supported>,,cycles,0,100.00,,\n<not counted>,,instructions,0,0.00,,\n812345.5,,cache-misses,1000,50.00,,\n";
        let counts = parse(text);
        assert_eq!(counts.get("context-switches"), Some(27943.0));
        assert_eq!(counts.get("page-faults"), Some(20528.0));
        assert_eq!(counts.get("cache-misses"), Some(812345.5));
        assert_eq!(counts.get("instructions"), None);
        assert_eq!(counts.not_supported, ["cycles"]);
        assert_eq!(parse(""), PerfCounts::default());
    }
}
