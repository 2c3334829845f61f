//! Disk I/O with the real fio. Either from parameters (rw, bs, iodepth …) or from the user's own
//! job file, run as-is. Results come from fio's `json+` output, whose latency histograms let
//! percentiles be computed exactly across jobs.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde::{Deserialize, Serialize};

use super::{CapacityDefaults, Kind, Output, ParseContext, RunContext, Spec, Unfit, Workload, parse_capacity};
use crate::store::{RawFile, Sample};
use crate::syntax::{Fields, SuiteError};
use crate::sys;
use crate::volume::RawTarget;
use cql_stress::capacity::{Plan, Search};
use figures::units;

mod output;

pub use output::samples_from_json;
use output::{Combine, capacity_step, series_from_log};

pub const KIND: Kind = Kind { name: "fio", list_keys: &["args", "series"], parse, capacity: Ok(()) };

/// The per-second series fio can log. Latency is off by default: its log costs fio a clock read
/// per I/O and log, measured at ~11 % of a CPU-bound job's IOPS (bench/fio-overhead.sh); the
/// IOPS log is sampled, not per I/O, and costs nothing measurable.
const SERIES: &[&str] = &["iops", "clat"];

const RW_MODES: &[&str] =
    &["read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite"];
const ENGINES: &[&str] = &[
    "sync",
    "psync",
    "vsync",
    "pvsync",
    "pvsync2",
    "libaio",
    "io_uring",
    "posixaio",
    "mmap",
    "splice",
    "null",
    "nbd",
    "sg",
    "net",
    "netsplice",
    "e4defrag",
    "falloc",
    "filecreate",
    "filestat",
    "filedelete",
];

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Fio {
    pub job: Job,
    /// Extra command-line options for fio, passed as given.
    pub args: Vec<String>,
    /// Environment variables for fio (job files read them as `${NAME}`).
    pub env: Vec<(String, String)>,
    /// Which per-second series to log (see `SERIES`).
    #[serde(default = "default_series")]
    pub series: Vec<String>,
    /// Search the highest rate (`rate_iops`) whose completion latency stays within a bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<Plan>,
    /// `warmup = "keep"`: the rates include the run's warm-up, where by default the seconds of
    /// the IOPS series that show one are left out of `iops` and `bw`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keep_warmup: bool,
    /// `slice = "1s"`: a run's `runtime` is cut into slices this long, which alternate with the
    /// slices of the other environments of its block while every one of them stays up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slice_ms: Option<u64>,
}

/// The shortest slice: fio starts, opens its file and reaches its rate within a few hundred
/// milliseconds, which a shorter slice would measure more than the I/O.
pub const MIN_SLICE: Duration = Duration::from_millis(500);

/// fio's options that set or cap a rate: a capacity search sets the rate itself.
const RATE_OPTIONS: &[&str] =
    &["--rate=", "--rate_min=", "--rate_iops=", "--rate_iops_min=", "--rate_process=", "--latency_target="];

/// Where a fio capacity search starts and how long its steps are.
const CAPACITY: CapacityDefaults =
    CapacityDefaults { start: 100.0, warmup: Duration::from_secs(1), window: Duration::from_secs(5) };

fn default_series() -> Vec<String> {
    vec!["iops".into()]
}

#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "snake_case")]
pub enum Job {
    Options(Options),
    /// A job file's text, embedded so it needs no path inside the sandbox.
    File {
        name: String,
        text: String,
        timeout_s: u64,
    },
}

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Options {
    pub rw: String,
    pub bs: u64,
    pub iodepth: u64,
    pub numjobs: u64,
    /// The working set across all jobs (each job gets its own file of size/numjobs).
    pub size: u64,
    pub runtime_ms: u64,
    pub ramp_time_ms: u64,
    pub direct: bool,
    pub ioengine: String,
    pub rwmixread: Option<u64>,
    pub fsync: Option<u64>,
}

fn parse(f: &mut Fields, ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let args = f.str_list("args")?.unwrap_or_default();
    let env = f.str_map("env")?.unwrap_or_default();
    let series = f.str_list("series")?.unwrap_or_else(default_series);
    if let Some(unknown) = series.iter().find(|s| !SERIES.contains(&s.as_str())) {
        return Err(f.error_at(
            "series",
            format!("fio logs no per-second series {unknown:?}; choose from {SERIES:?}, or [] for none"),
        ));
    }
    let capacity = parse_capacity(f, CAPACITY)?;
    if capacity.is_some() {
        if let Some(option) = args.iter().find(|a| RATE_OPTIONS.iter().any(|r| a.starts_with(r))) {
            return Err(f.error_at(
                "args",
                format!("{option}: a capacity search sets the rate of each step itself; remove it from args"),
            ));
        }
        for key in ["runtime", "ramp_time", "jobfile"] {
            if f.node(key).is_some() {
                let why = if key == "jobfile" {
                    "a capacity search runs fio's options (rw, bs, iodepth …), not a job file".to_string()
                } else {
                    format!(
                        "a capacity search times its own steps: set capacity.window and capacity.warmup instead of {key}"
                    )
                };
                return Err(f.error_at(key, why));
            }
        }
    }
    let keep_warmup = f.choice("warmup", &["cut", "keep"])?.as_deref() == Some("keep");
    let slice = f.duration("slice")?;
    let job = match f.str("jobfile")? {
        Some(path) => parse_job_file(f, ctx, &path)?,
        None => Job::Options(parse_options(f)?),
    };
    let slice_ms = match slice {
        Some(slice) => Some(check_slice(f, slice, &job, capacity.is_some())?),
        None => None,
    };
    f.finish()?;
    Ok(Spec::Fio(Fio { job, args, env, series, capacity, keep_warmup, slice_ms }))
}

/// A slice fio can measure, within a run it can cut: at least `MIN_SLICE`, at least two of
/// them in the runtime, and a run that is fio's options (whose runtime isobench sets).
fn check_slice(f: &Fields, slice: Duration, job: &Job, capacity: bool) -> Result<u64, SuiteError> {
    let o = match job {
        Job::Options(o) if !capacity => o,
        Job::Options(_) => {
            return Err(f.error_at("slice", "a capacity search times its own steps; remove slice or capacity"));
        }
        Job::File { .. } => {
            return Err(f.error_at(
                "slice",
                "a job file's runtime is its own; give fio's options (rw, bs, runtime …) to run in slices",
            ));
        }
    };
    if slice < MIN_SLICE {
        return Err(f.error_at(
            "slice",
            format!(
                "{} is too short for fio to measure (its start and first I/O would dominate it); use slice = \"{}ms\" or longer",
                units::duration_text(slice),
                MIN_SLICE.as_millis()
            ),
        ));
    }
    let slice_ms = slice.as_millis() as u64;
    if o.runtime_ms < 2 * slice_ms {
        return Err(f.error_at(
            "slice",
            format!(
                "runtime = \"{}\" holds fewer than two slices of {}; raise runtime or shorten slice",
                units::duration_text(Duration::from_millis(o.runtime_ms)),
                units::duration_text(slice)
            ),
        ));
    }
    if o.ramp_time_ms > 0 {
        return Err(f.error_at(
            "ramp_time",
            "slices run back to back in sandboxes that stay up, so a ramp before each would be wasted; remove ramp_time (the block's first slices warm the volume for all)",
        ));
    }
    Ok(slice_ms)
}

fn parse_job_file(f: &mut Fields, ctx: &ParseContext, path: &str) -> Result<Job, SuiteError> {
    let full = ctx.resolve(path);
    let text = std::fs::read_to_string(&full)
        .map_err(|e| f.error_at("jobfile", format!("cannot read {}: {e}", full.display())))?;
    let timeout = f.timeout("timeout")?.unwrap_or(Duration::from_secs(3600));
    Ok(Job::File {
        name: full.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "job.fio".into()),
        text,
        timeout_s: timeout.as_secs().max(1),
    })
}

fn parse_options(f: &mut Fields) -> Result<Options, SuiteError> {
    let rw = f.choice("rw", RW_MODES)?.unwrap_or_else(|| "randread".into());
    let bs = f.size("bs")?.unwrap_or(4096);
    let iodepth = f.count("iodepth")?.unwrap_or(1);
    let numjobs = f.count("numjobs")?.unwrap_or(1);
    let size = f.size("size")?.unwrap_or(1 << 30);
    let runtime = f.duration("runtime")?.unwrap_or(Duration::from_secs(10));
    let ramp_time = f.duration("ramp_time")?.unwrap_or_default();
    let direct = f.bool("direct")?.unwrap_or(false);
    let ioengine = f.choice("ioengine", ENGINES)?.unwrap_or_else(|| "psync".into());
    let rwmixread = f.uint("rwmixread")?;
    if rwmixread.is_some_and(|r| r > 100) {
        return Err(f.error_at("rwmixread", "must be a percentage from 0 to 100"));
    }
    let fsync = f.uint("fsync")?;
    if runtime.is_zero() {
        return Err(f.error_at("runtime", "must be more than zero"));
    }
    if size / numjobs < bs {
        return Err(f.error_at(
            "size",
            format!(
                "{} split over {numjobs} jobs leaves less than one block of {} per job; raise size or lower numjobs",
                units::fio_size(size),
                units::fio_size(bs)
            ),
        ));
    }
    Ok(Options {
        rw,
        bs,
        iodepth,
        numjobs,
        size,
        runtime_ms: runtime.as_millis() as u64,
        ramp_time_ms: ramp_time.as_millis() as u64,
        direct,
        ioengine,
        rwmixread,
        fsync,
    })
}

impl Options {
    /// Each job's file size: the working set split evenly, in whole blocks.
    fn per_job_size(&self) -> u64 {
        self.size / self.numjobs / self.bs * self.bs
    }

    /// fio's options on `target`: in a directory, each job its own file of its share of the
    /// working set; on a raw device, every job over the same first `size` bytes of it. `timing`
    /// replaces the suite's runtime and ramp time (a capacity step's).
    fn args(&self, target: &Target, timing: Option<(Duration, Duration)>) -> Vec<String> {
        let (runtime_ms, ramp_time_ms) = match timing {
            Some((window, warmup)) => (window.as_millis() as u64, warmup.as_millis() as u64),
            None => (self.runtime_ms, self.ramp_time_ms),
        };
        let whole = |size: u64| self.size.min(size) / self.bs * self.bs;
        let (place, size) = match target {
            Target::Dir(dir) => (format!("--directory={}", dir.display()), self.per_job_size()),
            Target::Device { path, size } => (format!("--filename={}", path.display()), whole(*size)),
            Target::Nbd(export) => (format!("--uri={}", export.uri()), whole(export.size)),
        };
        // An NBD export is fio's nbd engine's to reach (libnbd), whatever the suite's engine;
        // the engine comes before its own options (--uri).
        let engine = if matches!(target, Target::Nbd(_)) { "nbd" } else { &self.ioengine };
        let mut a = vec![
            "--name=isobench".to_string(),
            format!("--ioengine={engine}"),
            place,
            format!("--rw={}", self.rw),
            format!("--bs={}", units::fio_size(self.bs)),
            format!("--iodepth={}", self.iodepth),
            format!("--numjobs={}", self.numjobs),
            format!("--size={}", units::fio_size(size)),
            format!("--runtime={runtime_ms}ms"),
            "--time_based".into(),
            format!("--direct={}", u8::from(self.direct)),
            "--group_reporting".into(),
        ];
        if ramp_time_ms > 0 {
            a.push(format!("--ramp_time={ramp_time_ms}ms"));
        }
        if let Some(r) = self.rwmixread {
            a.push(format!("--rwmixread={r}"));
        }
        if let Some(n) = self.fsync {
            a.push(format!("--fsync={n}"));
        }
        a
    }

    /// `rate_iops` for `rate` operations per second across the jobs: per job, and for a mix of
    /// reads and writes split by its ratio (a single value would cap each direction at it).
    fn rate_iops(&self, rate: f64) -> String {
        let per_job = rate / self.numjobs as f64;
        let mixed = matches!(self.rw.as_str(), "rw" | "readwrite" | "randrw");
        if mixed {
            let read = self.rwmixread.unwrap_or(50) as f64 / 100.0;
            format!("--rate_iops={:.0},{:.0}", (per_job * read).max(1.0), (per_job * (1.0 - read)).max(1.0))
        } else {
            format!("--rate_iops={:.0}", per_job.max(1.0))
        }
    }
}

/// Where fio does its I/O.
enum Target<'a> {
    Dir(&'a Path),
    Device { path: &'a Path, size: u64 },
    Nbd(&'a crate::volume::NbdExport),
}

impl Fio {
    /// Writes every file the job will use once, end to end, and makes it durable: a block's
    /// slices then all measure a file in the state its later I/O finds it in, not the first
    /// writes into a fresh one, which are slower for seconds (ext4 converts each unwritten extent,
    /// a sparse loop file allocates each block) and would rise under the first slices only.
    /// Says what it wrote; nothing where the job's I/O is not files in a directory.
    pub fn precondition(&self, ctx: &RunContext) -> Result<Option<String>> {
        let Job::Options(o) = &self.job else { return Ok(None) };
        if ctx.raw.is_some() || ctx.read_only {
            return Ok(None);
        }
        let began = std::time::Instant::now();
        let size = o.per_job_size();
        let mut cmd = self.command(ctx);
        cmd.args([
            "--name=isobench".to_string(),
            format!("--directory={}", ctx.data_dir.display()),
            "--rw=write".into(),
            "--bs=1M".into(),
            format!("--numjobs={}", o.numjobs),
            format!("--size={}", units::fio_size(size)),
            "--end_fsync=1".into(),
        ]);
        let expected = Duration::from_secs(1 + o.size / (50 << 20));
        self.run_fio(&mut cmd, &ctx.scratch_dir.join("precondition.json"), expected)
            .context("writing the job's files once before the block's slices")?;
        Ok(Some(format!(
            "the job's {} written once before the block's first slice ({:.1} s)",
            units::fio_size(o.size),
            began.elapsed().as_secs_f64()
        )))
    }

    /// One slice of a run cut in slices: this job for one slice's time, and how many slices make
    /// the run. A slice reads fio's clock through clock_gettime unless `args` name a clock source:
    /// fio's default (the CPU's TSC) is calibrated at every start, 65 ms here, which a run pays
    /// once but a run in slices once a slice (13 % of a half-second slice's time); the vDSO's
    /// clock needs no calibration, and its read is tens of nanoseconds against an I/O's µs.
    pub fn sliced(&self) -> Option<(Fio, u32, Duration)> {
        let (slice_ms, Job::Options(o)) = (self.slice_ms?, &self.job) else { return None };
        let count = (o.runtime_ms / slice_ms) as u32;
        let job = Job::Options(Options { runtime_ms: slice_ms, ..o.clone() });
        let mut args = self.args.clone();
        if !args.iter().any(|a| a.starts_with("--clocksource")) {
            args.push("--clocksource=clock_gettime".into());
        }
        Some((Fio { job, args, slice_ms: None, ..self.clone() }, count, Duration::from_millis(slice_ms)))
    }
}

impl Workload for Fio {
    fn programs(&self) -> Vec<&'static str> {
        vec!["fio"]
    }

    fn headline(&self) -> Vec<&'static str> {
        if self.capacity.is_some() {
            return vec!["capacity"];
        }
        vec!["iops", "bw", "read_clat_mean", "read_clat_p99", "write_clat_mean", "write_clat_p99"]
    }

    fn recorded(&self) -> Vec<String> {
        let mut all: Vec<String> = ["iops", "bw", "ops", "cpu_usr", "cpu_sys"].map(String::from).into();
        for direction in ["read", "write", "trim"] {
            for figure in
                ["bytes", "iops", "bw", "clat_mean", "clat_p50", "clat_p95", "clat_p99", "clat_p99.9", "clat_max"]
            {
                all.push(format!("{direction}_{figure}"));
            }
        }
        all
    }

    fn describe(&self) -> BTreeMap<String, String> {
        match &self.job {
            Job::Options(o) => {
                let mut setup = BTreeMap::from([
                    ("fio.rw".into(), o.rw.clone()),
                    ("fio.direct".into(), o.direct.to_string()),
                    ("fio.size".into(), o.size.to_string()),
                    ("fio.ioengine".into(), o.ioengine.clone()),
                ]);
                if let Some(n) = o.fsync {
                    setup.insert("fio.fsync".into(), n.to_string());
                }
                if let Some(ms) = self.slice_ms {
                    setup.insert("fio.slice".into(), units::duration_text(Duration::from_millis(ms)));
                }
                if let Some(plan) = &self.capacity {
                    setup.insert("capacity.bound".into(), plan.bound.text());
                    setup.insert("capacity.search".into(), plan.describe());
                    setup.insert("capacity.latency".into(), "completion latency (fio's clat at rate_iops)".into());
                }
                setup
            }
            Job::File { name, .. } => BTreeMap::from([("fio.jobfile".into(), name.clone())]),
        }
    }

    fn expected_duration(&self) -> Duration {
        if let Some(plan) = &self.capacity {
            return super::capacity_duration(plan);
        }
        match &self.job {
            // Laying out the files is not timed by fio but takes time; allow for ~200 MB/s.
            Job::Options(o) => {
                Duration::from_millis(o.runtime_ms + o.ramp_time_ms) + Duration::from_secs(1 + o.size / (200 << 20))
            }
            Job::File { timeout_s, .. } => Duration::from_secs(*timeout_s),
        }
    }

    fn capacity(&self) -> Option<&Plan> {
        self.capacity.as_ref()
    }

    fn writes_volume(&self) -> bool {
        match &self.job {
            Job::Options(o) => !matches!(o.rw.as_str(), "read" | "randread"),
            // A job file says what it does; fio's --readonly refuses its writes.
            Job::File { .. } => true,
        }
    }

    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()> {
        if let (Some(plan), Job::Options(o)) = (&self.capacity, &self.job) {
            return self.search(plan, o, ctx, out);
        }
        let output_file = ctx.scratch_dir.join("fio.json");
        let mut cmd = self.command(ctx);
        match &self.job {
            Job::Options(o) => {
                let target = target(o, ctx, out)?;
                cmd.args(o.args(&target, None));
            }
            Job::File { name, text, .. } => {
                let job_path = ctx.scratch_dir.join(name);
                std::fs::write(&job_path, text).with_context(|| format!("writing {}", job_path.display()))?;
                out.raw.push(RawFile { name: name.clone(), content: text.clone() });
                cmd.arg(&job_path);
            }
        }
        // Per-second logs (all jobs in one file) give the run's time series.
        let log_prefix = ctx.scratch_dir.join("isobench");
        let logs = |name: &str| self.series.iter().any(|s| s == name);
        if logs("iops") {
            cmd.arg(format!("--write_iops_log={}", log_prefix.display()));
        }
        if logs("clat") {
            cmd.arg(format!("--write_lat_log={}", log_prefix.display()));
        }
        if !self.series.is_empty() {
            cmd.args(["--log_avg_msec=1000", "--per_job_logs=0"]);
        }
        let finished = self.run_fio(&mut cmd, &output_file, self.expected_duration())?;
        out.samples.extend(samples_from_json(&finished.json)?);
        let log = |kind: &str| {
            std::fs::read_to_string(ctx.scratch_dir.join(format!("isobench_{kind}.log"))).unwrap_or_default()
        };
        out.series.extend(series_from_log(&log("iops"), "iops", "op/s", Combine::Sum));
        out.series.extend(series_from_log(&log("clat"), "clat_mean", "us", Combine::Mean));
        if logs("iops") && !self.keep_warmup {
            leave_out_warmup(&mut out.samples, &out.series);
        }
        out.raw.push(RawFile { name: "fio.json".into(), content: finished.json });
        if !finished.stderr.trim().is_empty() {
            out.raw.push(RawFile { name: "fio.stderr".into(), content: finished.stderr });
        }
        Ok(())
    }
}

/// The run's `iops` and `bw` without its warm-up: the seconds at the start of its IOPS series
/// (every direction's summed) that `stats::warmup_windows` finds, with `warmup_s` saying how long
/// that was (0 where none showed; nothing where the series is too short to tell). The latencies
/// stay fio's own, of the whole run: its per-second log has no percentiles.
fn leave_out_warmup(samples: &mut Vec<Sample>, series: &[crate::store::Series]) {
    let mut total: std::collections::BTreeMap<u64, f64> = Default::default();
    for s in series.iter().filter(|s| s.metric.ends_with("_iops")) {
        for (t, v) in &s.points {
            *total.entry(t.to_bits()).or_default() += v;
        }
    }
    let points: Vec<(f64, f64)> = total.into_iter().map(|(t, v)| (f64::from_bits(t), v)).collect();
    if points.len() < figures::stats::MIN_WINDOWS_FOR_WARMUP {
        return;
    }
    let rates: Vec<f64> = points.iter().map(|(_, v)| *v).collect();
    let cut = figures::stats::warmup_windows(&rates);
    let warmup_s = if cut == 0 { 0.0 } else { points[cut - 1].0 };
    samples.push(Sample::new("warmup_s", warmup_s, "s"));
    if cut == 0 {
        return;
    }
    let mean = |r: &[f64]| r.iter().sum::<f64>() / r.len() as f64;
    let factor = mean(&rates[cut..]) / mean(&rates);
    for s in samples.iter_mut().filter(|s| s.metric == "iops" || s.metric == "bw") {
        s.value *= factor;
    }
}

/// What one fio invocation left: its JSON report and what it said on stderr.
struct Ran {
    json: String,
    stderr: String,
}

impl Fio {
    /// fio, started in the volume with the variables job files read and the volume's limits.
    fn command(&self, ctx: &RunContext) -> Command {
        let mut cmd = Command::new("fio");
        cmd.current_dir(ctx.data_dir).env("ISOBENCH_DATA", ctx.data_dir);
        match ctx.raw {
            Some(RawTarget::Device(device)) => {
                cmd.env("ISOBENCH_DATA", device).env("ISOBENCH_DEVICE", device);
            }
            Some(RawTarget::Nbd(export)) => {
                cmd.env("ISOBENCH_NBD_URI", export.uri());
            }
            None => {}
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        if ctx.read_only {
            cmd.arg("--readonly");
        }
        cmd
    }

    /// Runs fio to its JSON report in `output_file`, failing with what it said when it failed.
    fn run_fio(&self, cmd: &mut Command, output_file: &Path, expected: Duration) -> Result<Ran> {
        cmd.args(&self.args).arg("--output-format=json+").arg(format!("--output={}", output_file.display()));
        let timeout = expected * 3 + Duration::from_secs(120);
        let finished = sys::run(cmd, sys::Options { timeout: Some(timeout), ..Default::default() })?;
        let json = std::fs::read_to_string(output_file).unwrap_or_default();
        if !finished.status.success() {
            // fio says why on stderr, on stdout or, with --output, in that file; it may say
            // nothing at all (a signal), and then that is what the reason says.
            let said = [finished.tail(15), sys::tail_lines(&json, 15)].into_iter().find(|t| !t.trim().is_empty());
            bail!(
                "fio failed ({}): {}",
                finished.status,
                said.map_or("it printed nothing on stdout or stderr and wrote no output".into(), |s| format!("\n{s}"))
            );
        }
        if json.trim().is_empty() {
            bail!("fio exited 0 but wrote no results to {}:\n{}", output_file.display(), finished.tail(15));
        }
        Ok(Ran { json, stderr: finished.stderr })
    }

    /// The capacity search: fio at `rate_iops` in steps, each a warm-up run then the measured
    /// window's run, judged on its completion latency, its achieved IOPS and its errors. Two
    /// runs rather than `ramp_time`: fio 3.33 records no latency at all for a rate-limited job
    /// with a ramp time.
    fn search(&self, plan: &Plan, o: &Options, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let target = target(o, ctx, out)?;
        let cores = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let in_flight = u32::try_from(o.iodepth * o.numjobs).ok();
        let mut search = Search::new(plan.clone(), cores, in_flight);
        let run_at = |rate: f64, length: Duration, output_file: &Path| {
            let mut cmd = self.command(ctx);
            cmd.args(o.args(&target, Some((length, Duration::ZERO)))).arg(o.rate_iops(rate));
            self.run_fio(&mut cmd, output_file, length + Duration::from_secs(5))
        };
        while let Some(rate) = search.next_rate() {
            let n = search.steps().len() + 1;
            let before = (sys::Usage::children(), std::time::Instant::now());
            if !plan.warmup.is_zero() {
                run_at(rate, plan.warmup, &ctx.scratch_dir.join("fio-warmup.json"))?;
            }
            let ran = run_at(rate, plan.window, &ctx.scratch_dir.join(format!("fio-step-{n}.json")))?;
            let seconds = before.1.elapsed().as_secs_f64();
            let mut step = capacity_step(&ran.json, plan.bound.percentile)?;
            step.offered = rate;
            step.client_cpu = Some(sys::Usage::children().since(&before.0).cpu_s / seconds);
            let step = search.record(step);
            sys::progress::say(&format!("capacity step {n}: {}", step.line(&plan.bound)));
            out.raw.push(RawFile { name: format!("fio-step-{n}.json"), content: ran.json });
        }
        super::capacity_output(&search, out)
    }
}

/// Where fio does its I/O on this run's volume, checked: the device's size, the NBD export,
/// O_DIRECT and the free space of a directory.
fn target<'a>(o: &Options, ctx: &'a RunContext, out: &mut Output) -> Result<Target<'a>> {
    Ok(match ctx.raw {
        Some(RawTarget::Device(path)) => {
            let size = crate::volume::block::device_size(path)?;
            if size < o.bs {
                return Err(Unfit(format!("the device {} is smaller than one block", path.display())).into());
            }
            Target::Device { path, size }
        }
        Some(RawTarget::Nbd(export)) => {
            if o.ioengine != "nbd" {
                out.notes.push(format!(
                    "fio reached {} with its nbd engine (libnbd): ioengine = {} does not apply to an NBD export",
                    export.uri(),
                    o.ioengine
                ));
            }
            Target::Nbd(export)
        }
        None => {
            if o.direct {
                check_direct_io(ctx.data_dir)?;
            }
            check_free_space(ctx.data_dir, o.size)?;
            Target::Dir(ctx.data_dir)
        }
    })
}

/// Stops a cell asking for O_DIRECT on a filesystem that refuses it, before fio starts.
pub fn check_direct_io(dir: &Path) -> Result<()> {
    let probe = dir.join(".isobench-odirect-probe");
    let result = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .and_then(|f| {
            // An aligned write: some filesystems accept the flag at open and fail at I/O.
            let layout = std::alloc::Layout::from_size_align(4096, 4096).expect("valid layout");
            // SAFETY: the buffer is allocated, zeroed, used only here and freed below.
            let buf = unsafe { std::alloc::alloc_zeroed(layout) };
            let written = unsafe { libc::pwrite(std::os::fd::AsRawFd::as_raw_fd(&f), buf.cast(), 4096, 0) };
            let err = std::io::Error::last_os_error();
            unsafe { std::alloc::dealloc(buf, layout) };
            if written == 4096 { Ok(()) } else { Err(err) }
        });
    let _ = std::fs::remove_file(&probe);
    match result {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Err(Unfit(format!(
            "direct = true, but the filesystem at {} ({}) rejects O_DIRECT; set direct = false for this volume or use another one",
            dir.display(),
            crate::facts::fs_type(dir)
        ))
        .into()),
        Err(e) => Err(anyhow!("probing O_DIRECT in {}: {e}", dir.display())),
    }
}

fn check_free_space(dir: &Path, needed: u64) -> Result<()> {
    let stat = nix::sys::statvfs::statvfs(dir).with_context(|| format!("statvfs {}", dir.display()))?;
    let free = stat.blocks_available() as u64 * stat.fragment_size() as u64;
    // Files fio laid out earlier in this directory are reused, so count them as available.
    let existing: u64 =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum()).unwrap_or(0);
    if free + existing < needed {
        return Err(Unfit(format!(
            "fio needs {} for its files but the volume at {} has {} free; lower the workload's size or give the volume more",
            units::human(needed as f64, "B"),
            dir.display(),
            units::human(free as f64, "B")
        ))
        .into());
    }
    Ok(())
}

/// fio's version string ("fio-3.33"), if fio is installed.
pub fn version() -> Option<String> {
    sys::command_output("fio", &["--version"]).ok().map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Series;

    /// A run whose first three seconds climb has them left out of its rates; a steady one keeps
    /// its rate; a short one is not judged.
    #[test]
    fn a_warmup_in_the_iops_series_is_left_out_of_the_rates() {
        let rates = |series: Vec<f64>| -> Vec<Sample> {
            let points: Vec<(f64, f64)> = series.iter().enumerate().map(|(i, v)| ((i + 1) as f64, *v)).collect();
            let whole = series.iter().sum::<f64>() / series.len() as f64;
            let mut samples = vec![Sample::new("iops", whole, "op/s"), Sample::new("bw", whole * 4096.0, "B/s")];
            leave_out_warmup(&mut samples, &[Series { metric: "write_iops".into(), unit: "op/s".into(), points }]);
            samples
        };
        let get = |s: &[Sample], m: &str| s.iter().find(|x| x.metric == m).map(|x| x.value);
        let climbing = rates(vec![
            500.0, 800.0, 1100.0, 1400.0, 1410.0, 1395.0, 1405.0, 1400.0, 1398.0, 1402.0, 1404.0, 1396.0, 1401.0,
            1399.0,
        ]);
        // The cut is past the climb, never inside it (where past it, among steady seconds, the
        // search may choose more of them than the climb: it barely moves the rate).
        assert!((3.0..=7.0).contains(&get(&climbing, "warmup_s").unwrap()), "{climbing:?}");
        assert!((get(&climbing, "iops").unwrap() - 1401.0).abs() < 5.0, "{climbing:?}");
        assert!((get(&climbing, "bw").unwrap() / get(&climbing, "iops").unwrap() - 4096.0).abs() < 1e-6);
        // A steady run may lose a second or so to the search, which barely moves its rate.
        let steady =
            rates(vec![1400.0, 1410.0, 1395.0, 1405.0, 1400.0, 1398.0, 1402.0, 1401.0, 1404.0, 1396.0, 1401.0, 1399.0]);
        assert!(get(&steady, "warmup_s").is_some());
        assert!((get(&steady, "iops").unwrap() / 1400.9 - 1.0).abs() < 0.005, "{steady:?}");
        let short = rates(vec![500.0, 1400.0, 1400.0]);
        assert_eq!((get(&short, "warmup_s"), get(&short, "iops")), (None, Some(1100.0)));
    }

    /// A slice reads the vDSO's clock, which fio need not calibrate at each slice's start, unless
    /// the suite's own options chose a clock source; the run keeps its options as given.
    #[test]
    fn a_slice_reads_the_clock_fio_need_not_calibrate_unless_args_choose_one() {
        let fio = |args: &[&str]| Fio {
            job: Job::Options(Options {
                rw: "randwrite".into(),
                bs: 4096,
                iodepth: 1,
                numjobs: 1,
                size: 256 << 20,
                runtime_ms: 4000,
                ramp_time_ms: 0,
                direct: false,
                ioengine: "psync".into(),
                rwmixread: None,
                fsync: Some(1),
            }),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: Vec::new(),
            series: Vec::new(),
            capacity: None,
            keep_warmup: false,
            slice_ms: Some(500),
        };
        let (slice, count, length) = fio(&[]).sliced().unwrap();
        assert_eq!((count, length), (8, Duration::from_millis(500)));
        assert_eq!(slice.args, ["--clocksource=clock_gettime"]);
        assert_eq!(fio(&["--clocksource=cpu"]).sliced().unwrap().0.args, ["--clocksource=cpu"]);
        assert!(fio(&[]).args.is_empty(), "the run itself is left as the suite gave it");
    }
}
