//! `isobench agent`: the side of isobench that runs inside the sandbox. It reads one request
//! (which workload, where the volume is), records where it is running, runs the workload and
//! prints one framed JSON report. The same framing works over a pipe, a container's stdout or a
//! VM's serial port, so an environment only has to start a process and carry bytes back.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::facts;
use crate::store::{AgentReport, Sample};
use crate::sys::Usage;
use crate::workload::{self, Unfit};

pub mod slices;
pub use slices::SLICE_DONE;

/// The line prefix that frames the report in whatever stream carries it back.
pub const RESULT_PREFIX: &str = "ISOBENCH-RESULT ";

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Request {
    pub workload: workload::Spec,
    /// The volume under test, as seen inside the environment.
    pub data_dir: PathBuf,
    /// A raw volume: the device or NBD export the workload uses, as seen inside the environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<crate::volume::RawTarget>,
    /// The volume must not be written (a device the suite did not call destructive).
    #[serde(default)]
    pub read_only: bool,
    /// Temporary files go here, off the volume under test.
    pub scratch_dir: PathBuf,
    /// Run this database server (loaded from the host) instead of the workload.
    #[serde(default)]
    pub serve: Option<crate::server::serve::Served>,
    /// Run the workload as the load of the database server at this address (a loader pod's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub against: Option<workload::served::Address>,
    /// Started together with other sandboxes: say `READY` on stderr once running, then wait
    /// for a "go" line on stdin before the workload starts.
    #[serde(default)]
    pub barrier: bool,
    /// Run the workload in this many slices (0: at once): say `READY` on stderr once running,
    /// then run one slice at each "go" line on stdin (see `slices`).
    #[serde(default)]
    pub slices: u32,
    /// Record what the workload's processes used (`sys.` samples; the suite's `collect`).
    #[serde(default = "collect_by_default")]
    pub collect: bool,
}

fn collect_by_default() -> bool {
    true
}

/// The line an agent started behind a barrier prints on stderr when it is up.
pub const READY: &str = "ISOBENCH-READY";

/// Runs a request and returns the report (never fails: failures are in the report).
pub fn execute(request: &Request) -> AgentReport {
    let mut report = AgentReport { facts: facts::sandbox_facts(Some(&request.data_dir)), ..Default::default() };
    let mut out = workload::Output::default();
    let ctx = workload::RunContext {
        data_dir: &request.data_dir,
        raw: request.raw.as_ref(),
        read_only: request.read_only,
        scratch_dir: &request.scratch_dir,
    };
    // Only gVisor is known to trap clock reads for a while (a VM under emulation may read its
    // clock slowly for good, and would wait for nothing).
    if facts::in_gvisor(&report.facts)
        && let Some(waited) = wait_for_a_cheap_clock()
    {
        let said = match waited > CLOCK_SETTLES_WITHIN {
            true => format!("not within {} s: every clock read traps", CLOCK_SETTLES_WITHIN.as_secs()),
            false => format!("{:.2} s", waited.as_secs_f64()),
        };
        report.setup.insert("agent.clock_ready_after".into(), said);
    }
    let before = Usage::own_and_children();
    let result = std::fs::create_dir_all(&request.scratch_dir)
        .with_context(|| format!("creating {}", request.scratch_dir.display()))
        .and_then(|_| match &request.serve {
            Some(serve) => crate::server::serve::serve(serve, &request.data_dir, &request.scratch_dir, &mut out),
            None => match &request.against {
                Some(at) => load_server(&request.workload, at, &ctx, &mut out),
                None => request.workload.workload().run(&ctx, &mut out),
            },
        });
    // A node that started on every CPU was moved to its own before it was measured: what it saw
    // then is what counts (gVisor's kernel keeps the count it booted with).
    if request.serve.is_some()
        && let Ok(n) = std::thread::available_parallelism()
    {
        report.facts.insert("cpus".into(), n.get().to_string());
    }
    if request.collect {
        let kernel = if facts::in_gvisor(&report.facts) { Kernel::Gvisor } else { Kernel::Linux };
        out.samples.extend(workload_usage(&Usage::own_and_children().since(&before), kernel));
    }
    if let Err(e) = result {
        report.unfit = e.downcast_ref::<Unfit>().is_some();
        report.error = Some(format!("{e:#}"));
    }
    report.samples = out.samples;
    report.series = out.series;
    report.raw = out.raw;
    report.notes = out.notes;
    report.steps = out.steps;
    report.code_maps = out.code_maps;
    report
}

/// The workload as a load of the server at `at`, its measured phase cued on stderr as a loader
/// pod's CQL load cues it (the orchestrator counts the database pod's CPU between the cues), and
/// what the server holds afterwards.
fn load_server(
    spec: &workload::Spec,
    at: &workload::served::Address,
    ctx: &workload::RunContext,
    out: &mut workload::Output,
) -> Result<()> {
    let Some(load) = spec.served_load() else {
        bail!("this workload does not load a database server: give a pgbench, oltp or redis-benchmark workload");
    };
    load.run_cued(at, ctx, out, &|| eprintln!("{}", workload::cql::measured_began()))?;
    eprintln!("{}", workload::cql::MEASURED_END_LINE);
    out.samples.push(load.held(at)?);
    Ok(())
}

/// A clock read that costs more than this is a trap into the sandbox's kernel, not the vDSO's.
const CHEAP_CLOCK: Duration = Duration::from_micros(1);

/// How long the workload may wait for the sandbox's clock to become cheap.
const CLOCK_SETTLES_WITHIN: Duration = Duration::from_secs(5);

/// Waits until reading the clock costs what it costs a running program, and says how long that
/// took, if it took any time. gVisor's vDSO answers clock_gettime only once its timekeeper has
/// published the clock's parameters, about a second after the sandbox starts; until then every
/// read traps (5 µs here). A workload that reads the clock per operation (sysbench's memory test,
/// three reads per block) would measure the sandbox's birth, not what a running program pays:
/// 64 KiB blocks ran 1.36 s at once against 0.42–0.63 s after a 1 s wait (0.48 s on the host).
fn wait_for_a_cheap_clock() -> Option<Duration> {
    const READS: u32 = 1000;
    let began = Instant::now();
    loop {
        let timed = Instant::now();
        for _ in 0..READS {
            std::hint::black_box(Instant::now());
        }
        let per_read = timed.elapsed() / READS;
        if per_read < CHEAP_CLOCK || began.elapsed() > CLOCK_SETTLES_WITHIN {
            return (began.elapsed() > Duration::from_millis(1)).then(|| began.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The kernel the workload's processes ran on.
#[derive(PartialEq)]
enum Kernel {
    Linux,
    /// gVisor counts its tasks' switches and faults in its own way (72 switches for 20 s of
    /// Cassandra): set against Linux's, they would only mislead.
    Gvisor,
}

/// What the workload's processes used, as the kernel that ran them counts it (a sandbox's own
/// kernel for gVisor and VMs): the agent and every process it started and waited for.
fn workload_usage(used: &Usage, kernel: Kernel) -> Vec<Sample> {
    let mut samples = vec![Sample::new("sys.cpu_workload", used.cpu_s, "s")];
    if kernel == Kernel::Linux {
        samples.extend([
            Sample::new("sys.context_switches", used.switches, "switches"),
            Sample::new("sys.page_faults", used.minor_faults, "faults"),
            Sample::new("sys.page_faults_major", used.major_faults, "faults"),
        ]);
    }
    samples
}

/// The `agent` subcommand: the request comes from a file, or from stdin with "-" (one line).
pub fn main(request_path: &str) -> Result<()> {
    let stdin = std::io::stdin();
    let text = if request_path == "-" {
        let mut s = String::new();
        stdin.lock().read_line(&mut s).context("reading the request from stdin")?;
        s
    } else {
        std::fs::read_to_string(request_path).with_context(|| format!("reading {request_path}"))?
    };
    let request: Request = serde_json::from_str(&text).context("the agent request is not valid")?;
    if request.slices > 0 {
        eprintln!("{READY}");
        let report = slices::run(&request, request.slices, &mut stdin.lock());
        println!("{}", frame(&report)?);
        return Ok(());
    }
    if request.barrier {
        eprintln!("{READY}");
        let mut go = String::new();
        stdin.lock().read_line(&mut go).context("waiting for the other sandboxes")?;
        if go.trim() != "go" {
            bail!("the sandboxes started with this one were called off before the workload began");
        }
    }
    let report = execute_reporting_panics(&request);
    println!("{}", frame(&report)?);
    Ok(())
}

/// As `execute`, with a panic (a bug in isobench: there should be none) reported as the run's
/// error by its message and place, not left for the orchestrator to guess from a backtrace.
fn execute_reporting_panics(request: &Request) -> AgentReport {
    let panicked: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let seen = panicked.clone();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let place = info.location().map_or(String::new(), |l| format!(" at {}:{}", l.file(), l.line()));
        eprintln!("the agent panicked{place}: {message}");
        *seen.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("{message}{place}"));
    }));
    match std::panic::catch_unwind(|| execute(request)) {
        Ok(report) => report,
        Err(_) => {
            let what = panicked.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
            AgentReport {
                error: Some(format!("the agent panicked: {what} (a bug in isobench; please report it)")),
                ..Default::default()
            }
        }
    }
}

pub fn frame(report: &AgentReport) -> Result<String> {
    Ok(format!("{RESULT_PREFIX}{}", serde_json::to_string(report)?))
}

/// Finds the framed report in what an environment carried back (the last one wins; anything
/// else in the stream, such as runtime warnings or console noise, is ignored).
pub fn parse_output(stream: &str) -> Option<AgentReport> {
    stream
        .lines()
        .rev()
        .find_map(|l| l.find(RESULT_PREFIX).map(|i| &l[i + RESULT_PREFIX.len()..]))
        .and_then(|json| serde_json::from_str(json.trim()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_survive_noise_around_the_frame() {
        let report = AgentReport { samples: vec![Sample::new("iops", 5.0, "op/s")], ..Default::default() };
        let stream = format!("warning: something\n[  1.23] console\n{}\ntrailing\n", frame(&report).unwrap());
        let parsed = parse_output(&stream).unwrap();
        assert_eq!(parsed.samples, report.samples);
        assert!(parse_output("no frame here").is_none());
    }
}
