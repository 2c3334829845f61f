//! The sequence of a cassandra-stress invocation: settings, connection, schema, warm-up, the run
//! (or the series of runs over thread counts), interval lines while it goes, the summary after,
//! END or FAILURE.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Result, bail};
use scylla::client::session::Session;
use scylla::statement::prepared::PreparedStatement;

use super::engine::{self, Load, Work};
use super::failover::{self, ClientEvents, ClientRow};
use super::hdrlog::HdrLog;
use super::metrics::{ByOp, Figures, Interval, Nanos, Uncertainty, merge_and_empty};
use super::output::{self, Out};
use super::settings::{Settings, Stop, Truncate};
use super::users::Users;
use crate::capacity::{Search, Step};

/// One run at one thread count.
pub struct RunResult {
    pub threads: u32,
    pub total: Interval,
    pub by_op: ByOp,
    /// The graphed series: `-graph op=`'s operation, or the total.
    pub intervals: Vec<Figures>,
    pub uncertainty: Uncertainty,
    pub success: bool,
    pub interrupted: bool,
    /// The first `EARLY_WINDOWS` measured windows' totals, and the rest's sum: what a run's
    /// figures without its warm-up are made of.
    early: Vec<Interval>,
    rest: Interval,
    /// What the client did each interval (`failover::ClientRow`).
    pub client: Vec<ClientRow>,
}

/// Windows a run keeps apart for its warm-up to be cut from it: a warm-up is looked for in the
/// first half of a run, so at one window a second, in runs of up to eight minutes.
const EARLY_WINDOWS: usize = 240;

/// A run's figures from its steady state on: its warm-up (`stats::warmup_windows`) left out.
pub struct Steady {
    /// Seconds of the measured phase left out as its warm-up.
    pub warmup_s: f64,
    pub summary: Figures,
}

impl RunResult {
    pub fn summary(&self) -> Figures {
        Figures::of(&self.total, self.total.run_time_ms() as f64 / 1000.0)
    }

    /// The summary without the run's warm-up, found from its windows' rates (the last window,
    /// cut short by the run's end, left out of the search). The whole run where no warm-up shows.
    pub fn steady(&self) -> Steady {
        let whole = Steady { warmup_s: 0.0, summary: self.summary() };
        let rates: Vec<f64> = self.intervals.iter().map(|f| f.op_rate).collect();
        let full = rates.len().saturating_sub(1);
        let cut = figures::stats::warmup_windows(&rates[..full]).min(self.early.len());
        if cut == 0 {
            return whole;
        }
        let mut kept = self.rest.clone();
        for window in &self.early[cut..] {
            kept.add(window);
        }
        let warmup_s = (kept.start.saturating_sub(self.early[0].start)) as f64 / 1e9;
        Steady { warmup_s, summary: Figures::of(&kept, kept.run_time_ms() as f64 / 1000.0) }
    }
}

/// Everything an invocation did.
pub struct Report {
    pub success: bool,
    pub runs: Vec<RunResult>,
}

struct Context {
    session: Arc<Session>,
    events: Arc<ClientEvents>,
    statements: Arc<Vec<PreparedStatement>>,
    user: Option<Arc<Users>>,
    settings: Arc<Settings>,
    epoch: Instant,
    hdr: Option<HdrLog>,
    runs: u64,
}

/// The Results block, then what the client did where it did anything but get answers.
fn print_results(out: &mut Out, r: &RunResult) {
    out.text(&output::results(&r.total, &r.by_op));
    if failover::eventful(&r.client) {
        out.line(failover::HEADER);
        for row in &r.client {
            out.line(&failover::line(row));
        }
    }
}

/// The shards measurements are recorded into: a few per runtime thread.
fn shards() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()) * 4
}

fn description(settings: &Settings) -> String {
    if settings.command.is_mixed() {
        let c = &settings.command;
        format!("[{}]", c.ops.iter().map(|(op, _)| c.op_name(*op)).collect::<Vec<_>>().join(", "))
    } else {
        settings.command.op_name(settings.command.ops[0].0).to_string()
    }
}

fn stop_text(settings: &Settings, count: Option<u64>) -> String {
    match (&settings.command.stop, count) {
        (_, Some(n)) => format!("for {n} iteration"),
        (Stop::Duration(d, unit), None) => {
            let per = match *unit {
                "minutes" => 60,
                "hours" => 3600,
                _ => 1,
            };
            format!("{} {unit}", d.as_secs() / per)
        }
        (Stop::Uncertainty { target, .. }, None) => format!("until stderr of mean < {target}"),
        (Stop::Count(_), None) => unreachable!("counts are passed"),
    }
}

/// Whether a run without a count is done by `elapsed` ns: its duration is over (by more than half
/// an interval, so that the last interval is whole) or its uncertainty is reached.
fn has_done_its_work(settings: &Settings, count: Option<u64>, elapsed: u64, interval: u64, u: &Uncertainty) -> bool {
    match (&settings.command.stop, count) {
        (Stop::Duration(d, _), None) => elapsed > d.as_nanos() as u64 + interval / 2,
        (Stop::Uncertainty { target, min, max }, None) => u.reached(*target, *min, *max),
        _ => false,
    }
}

/// A run's intervals as they close: the one open, the run's totals, the HDR log. Closing one
/// merges a second's histograms several times over, which takes milliseconds: it runs on a
/// thread beside the load's, as on the load's own thread (one, at most 128 operations in
/// flight) it held back the operations due meanwhile: 10-40 ms added to one operation a second,
/// which set the p99 of a low fixed rate.
struct Tally {
    fixed: bool,
    warmup: bool,
    measured_from: Nanos,
    start: Nanos,
    /// `-graph op=`'s operation, upper case.
    graph_op: Option<String>,
    current: ByOp,
    current_total: Interval,
    r: RunResult,
    hdr: Option<HdrLog>,
    /// The shards' maps taken at the last close, emptied, for the recorder to take back.
    spares: Vec<ByOp>,
}

impl Tally {
    /// A run of `threads` tasks that starts at `start`, measured from `measured_from`.
    fn new(
        threads: u32,
        settings: &Settings,
        warmup: bool,
        (start, measured_from): (Nanos, Nanos),
        hdr: Option<HdrLog>,
    ) -> Tally {
        let fixed = settings.rate.fixed.is_some();
        let graph_op = settings.graph.as_ref().and_then(|g| g.op.as_deref()).map(str::to_ascii_uppercase);
        let r = RunResult {
            threads,
            total: Interval::new(fixed),
            by_op: ByOp::new(),
            intervals: Vec::new(),
            uncertainty: Uncertainty::default(),
            success: true,
            interrupted: false,
            early: Vec::new(),
            rest: Interval::new(fixed),
            client: Vec::new(),
        };
        let (current, current_total, spares) = (ByOp::new(), Interval::new(fixed), Vec::new());
        Tally { fixed, warmup, measured_from, start, graph_op, current, current_total, r, hdr, spares }
    }

    /// Adds what the shards recorded to the interval ending at `end`, `length` long, closes it,
    /// and returns the lines it prints.
    fn close(&mut self, mut recorded: Vec<ByOp>, end: Nanos, length: Nanos) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        merge_and_empty(&mut recorded, &mut self.current, self.fixed);
        self.spares.extend(recorded);
        let measured = end > self.measured_from;
        for (op, i) in self.current.iter_mut() {
            (i.start, i.end) = (end - length, end);
            if measured {
                self.r.by_op.entry(op).or_insert_with(|| Interval::new(self.fixed)).add(i);
            }
            self.current_total.add(i);
        }
        (self.current_total.start, self.current_total.end) = (end - length, end);
        if measured {
            self.r.total.add(&self.current_total);
            self.r.uncertainty.update(self.current_total.adjusted_row_rate());
            match self.r.early.len() < EARLY_WINDOWS {
                true => self.r.early.push(self.current_total.clone()),
                false => self.r.rest.add(&self.current_total),
            }
        }
        if self.current_total.operations() != 0 && !self.warmup && measured {
            let u = self.r.uncertainty.value();
            if self.current.len() > 1 {
                for (op, i) in &self.current {
                    lines.push(output::row("", op, i, &self.r.by_op[op], u));
                }
            }
            if let Some(hdr) = &mut self.hdr {
                for (op, i) in &self.current {
                    hdr.write(&format!("{op}-st"), i.start, i.end, &i.service)?;
                    hdr.write(&format!("{op}-rt"), i.start, i.end, &i.response)?;
                    hdr.write(&format!("{op}-wt"), i.start, i.end, &i.wait)?;
                }
                hdr.flush()?;
            }
            lines.push(output::row("", "total", &self.current_total, &self.r.total, u));
        }
        if measured {
            let graphed = self.graph_op.as_deref().and_then(|op| self.current.get(op));
            let at = (end - self.start) as f64 / 1e9;
            self.r.intervals.push(Figures::of(graphed.unwrap_or(&self.current_total), at));
        }
        for i in self.current.values_mut() {
            i.reset();
        }
        self.current_total.reset();
        Ok(lines)
    }
}

impl Context {
    /// One run of `threads` tasks. `count` limits it to that many operations (warm-up, `n=`).
    /// The intervals of its first `settle` are run but not measured (a capacity step's warm-up).
    async fn run(
        &mut self,
        threads: u32,
        count: Option<u64>,
        out: &mut Out,
        warmup: bool,
        settle: Duration,
    ) -> Result<RunResult> {
        let settings = self.settings.clone();
        out.line(&format!("Running {} with {threads} threads {}", description(&settings), stop_text(&settings, count)));
        let work = match count {
            Some(n) => Work::Count(n),
            None => Work::Open,
        };
        self.runs += 1;
        let load = Load::new(
            self.session.clone(),
            self.events.clone(),
            self.statements.clone(),
            self.user.clone(),
            settings.clone(),
            self.epoch,
            work,
            shards(),
            warmup,
            !warmup,
        );
        out.line(&output::header(""));
        load.start();
        let start = load.now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..threads as usize {
            tasks.spawn(load.clone().task(i, engine::task_seed(self.runs * 1000 + i as u64)));
        }
        let interval = (settings.log.interval.as_nanos() as u64).max(1_000_000);
        let measured_from = start + settle.as_nanos() as u64;
        let mut tally = Tally::new(threads, &settings, warmup, (start, measured_from), self.hdr.take());
        let (mut last, mut next) = (start, start + interval);
        let done = async {
            while let Some(joined) = tasks.join_next().await {
                if let Err(e) = joined {
                    eprintln!("a load task ended abnormally: {e}");
                }
            }
        };
        tokio::pin!(done);
        let ctrl_c = tokio::signal::ctrl_c();
        tokio::pin!(ctrl_c);
        loop {
            let wake = tokio::time::Instant::from_std(self.epoch + Duration::from_nanos(next));
            let finished = tokio::select! {
                _ = &mut done => true,
                _ = tokio::time::sleep_until(wake) => false,
                _ = &mut ctrl_c, if !tally.r.interrupted => {
                    eprintln!("Interrupted: finishing the operations in flight, then the summary.");
                    tally.r.interrupted = true;
                    load.stop();
                    continue;
                }
            };
            let (end, length) = if finished { (load.now(), load.now() - last) } else { (next, interval) };
            let recorded = load.recorder.take(&mut tally.spares);
            tally.r.client.push(self.events.take((end - start) as f64 / 1e9, &self.session));
            let closed = tokio::task::spawn_blocking(move || {
                let lines = tally.close(recorded, end, length);
                (tally, lines)
            })
            .await;
            let lines;
            (tally, lines) = closed.map_err(|e| anyhow::anyhow!("an interval's tally panicked: {e}"))?;
            for line in lines? {
                out.line(&line);
            }
            if finished {
                break;
            }
            (last, next) = (next, next + interval);
            if has_done_its_work(&settings, count, next - start, interval, &tally.r.uncertainty) {
                load.stop();
            }
        }
        self.hdr = tally.hdr;
        let mut r = tally.r;
        r.success = !load.failed() && !r.interrupted;
        if !warmup {
            print_results(out, &r);
        }
        Ok(r)
    }

    /// cassandra-stress's thread-count series: 4, 104 … (+100 to 500, ×1.2 to 1500, ×1.1 after)
    /// up to `threads<=`; with `auto`, until three runs bring no improvement.
    async fn run_series(&mut self, out: &mut Out) -> Result<(bool, Vec<RunResult>)> {
        let settings = self.settings.clone();
        let target = match settings.command.stop {
            Stop::Uncertainty { target, .. } => {
                out.line("WARNING: uncertainty mode (err<) results in uneven workload between thread runs, so should be used for high level analysis only");
                target
            }
            _ => -1.0,
        };
        let mut results: Vec<RunResult> = Vec::new();
        let (mut previous, mut threads) = (0u32, settings.rate.min_threads.max(1));
        loop {
            out.line("");
            out.line(&format!("Running with {threads} threadCount"));
            if settings.command.truncate == Truncate::Always {
                engine::truncate(&self.session, &settings).await?;
            }
            let r = self.run(threads, settings.command.count(), out, false, Duration::ZERO).await?;
            let (ok, interrupted) = (r.success, r.interrupted);
            results.push(r);
            if !ok {
                return Ok((false, results));
            }
            if previous > 0 {
                out.line(&format!(
                    "Improvement over {previous} threadCount: {}%",
                    output::java_float(100.0 * average_improvement(&results, 1), 0, false)
                ));
            }
            if interrupted {
                break;
            }
            previous = threads;
            threads = if threads < 500 {
                threads + 100
            } else if threads < 1500 {
                (threads as f64 * 1.2) as u32
            } else {
                (threads as f64 * 1.1) as u32
            };
            if threads > settings.rate.max_threads {
                break;
            }
            if settings.command.updates() {
                out.line("Sleeping for 15s");
                tokio::time::sleep(Duration::from_secs(15)).await;
            }
            let improving =
                |count: usize, min: f64| results.len() < count + 1 || average_improvement(&results, count) >= min;
            if settings.rate.auto && !(improving(3, 0.0) && improving(5, target)) {
                break;
            }
        }
        let ids: Vec<String> = results.iter().map(|r| format!("{} threadCount", r.threads)).collect();
        let width = ids.iter().map(String::len).max().unwrap_or(2);
        out.line(&output::header(&format!("{:>width$}, ", "id")));
        for (id, r) in ids.iter().zip(&results) {
            let prefix = format!("{id:>width$}, ");
            for (op, i) in &r.by_op {
                out.line(&output::row(&prefix, op, i, i, r.uncertainty.value()));
            }
            out.line(&output::row(&prefix, "total", &r.total, &r.total, r.uncertainty.value()));
        }
        Ok((true, results))
    }
}

fn average_improvement(results: &[RunResult], count: usize) -> f64 {
    let n = results.len();
    let mut sum = 0.0;
    for i in n - count..n {
        let (previous, current) = (results[i - 1].total.op_rate(), results[i].total.op_rate());
        sum += (current - previous) / previous;
    }
    sum / count as f64
}

/// The environment variable that makes a loader process one capacity step of several loaders:
/// the first milliseconds it gives of its run are not measured (the step's warm-up), and it
/// skips cassandra-stress's pauses after the schema (which the search made before its steps).
pub const STEP_VAR: &str = "ISOBENCH_CQL_STEP_SETTLE_MS";

/// The unmeasured start of a step run as loader processes, when this process is one.
fn step_settle() -> Option<Duration> {
    std::env::var(STEP_VAR).ok().and_then(|v| v.parse().ok()).map(Duration::from_millis)
}

/// Waits for the "go" of the process that started this loader with others (see `loaders`).
async fn wait_for_go() -> Result<()> {
    let said = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    if said.trim() != "go" {
        bail!("{}", super::loaders::CALLED_OFF);
    }
    Ok(())
}

/// Connects, makes the schema and prepares the statements; None for `n=0`, which stops there.
/// `pause`: cassandra-stress's sleeps after the schema (a capacity search's steps need none: the
/// driver already waited for the nodes to agree on it).
async fn open(settings: &Arc<Settings>, out: &mut Out, pause: bool) -> Result<Option<Context>> {
    if !settings.log.no_settings {
        out.text(&settings.dump());
    }
    let session = Arc::new(engine::connect(settings).await?);
    out.text(&engine::describe(&session, settings).await);
    engine::create_schema(&session, settings).await?;
    if pause {
        out.line(&format!("Created keyspaces. Sleeping {}s for propagation.", settings.nodes.len()));
        tokio::time::sleep(Duration::from_secs(settings.nodes.len() as u64)).await;
    }
    if settings.command.count() == Some(0) {
        out.line("N=0: SCHEMA CREATED, NOTHING ELSE DONE.");
        return Ok(None);
    }
    if pause {
        out.line("Sleeping 2s...");
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let events = Arc::new(ClientEvents::default());
    let statements = Arc::new(engine::prepare(&session, settings, &events).await?);
    let user = engine::prepare_user(&session, settings, &events).await?;
    for note in user.as_ref().map(|u| u.validation_notes()).unwrap_or_default() {
        out.line(&format!("WARNING: {note}"));
    }
    // The wall clock and the monotonic one read together: the log's times are the wall time at
    // the epoch plus monotonic offsets, so anything between the two readings stamps every
    // interval that much early. The log's creation was there, and on a busy machine a loader's
    // first interval came out 17 ms before the last loader was even prepared.
    let (wall, epoch) = (SystemTime::now(), Instant::now());
    let hdr = match &settings.log.hdrfile {
        Some(path) => Some(HdrLog::create(path, wall, settings.rate.fixed.is_some())?),
        None => None,
    };
    Ok(Some(Context { session, events, statements, user, settings: settings.clone(), epoch, hdr, runs: 0 }))
}

/// Runs a parsed command line to the end. Errors before the load starts (connection, schema)
/// are returned; failures during it are in the report.
pub async fn stress(settings: Arc<Settings>, out: &mut Out, pauses: super::Pauses) -> Result<Report> {
    let step = step_settle();
    let pause = pauses == super::Pauses::AsCassandraStress && step.is_none();
    let Some(mut ctx) = open(&settings, out, pause).await? else {
        return Ok(Report { success: true, runs: Vec::new() });
    };
    if std::env::var_os(super::loaders::START_TOGETHER_VAR).is_some() {
        out.line(super::loaders::READY_LINE);
        wait_for_go().await?;
    }
    if !settings.command.no_warmup {
        warm_up(&mut ctx, out).await?;
    }
    let threads = settings.rate.threads;
    if settings.command.truncate == Truncate::Once
        || (threads.is_some() && settings.command.truncate == Truncate::Always)
    {
        engine::truncate(&ctx.session, &settings).await?;
    }
    let (success, runs) = match threads {
        None => {
            out.line("Thread count was not specified");
            ctx.run_series(out).await?
        }
        Some(t) => {
            let r = ctx.run(t, settings.command.count(), out, false, step.unwrap_or_default()).await?;
            (r.success, vec![r])
        }
    };
    if let Some(hdr) = &mut ctx.hdr {
        hdr.flush()?;
    }
    out.line(if success { "END" } else { "FAILURE" });
    Ok(Report { success, runs })
}

/// A capacity search in one session: cassandra-stress's warm-up first (unless `no-warmup`: a
/// node fresh from its start answers its first operations slowly while its JIT compiles, which
/// would fail the lowest rate), then each step `threads` tasks at the offered rate (`fixed=R/s`,
/// latency from each operation's intended start) for the plan's warm-up, then its window.
pub async fn capacity(
    settings: Arc<Settings>,
    threads: u32,
    search: &mut Search,
    on_step: &mut (dyn FnMut(&Step) + Send),
) -> Result<()> {
    let mut out = Out::quiet();
    let Some(mut ctx) = open(&settings, &mut out, false).await? else {
        bail!("n=0 makes the schema only: a capacity search needs a load");
    };
    if !settings.command.no_warmup {
        warm_up(&mut ctx, &mut out).await?;
    }
    let plan = search.plan().clone();
    let run_for = plan.step_time();
    while let Some(rate) = search.next_rate() {
        let mut step = (*settings).clone();
        step.rate.fixed = Some(rate as u64);
        step.rate.throttle = None;
        step.command.stop = Stop::Duration(run_for, "seconds");
        ctx.settings = Arc::new(step);
        let before = (crate::process::own_cpu_seconds(), Instant::now());
        let r = ctx.run(threads, None, &mut out, false, plan.warmup).await?;
        let cpu = (crate::process::own_cpu_seconds() - before.0) / before.1.elapsed().as_secs_f64();
        let t = &r.total;
        let achieved = if t.operations() == 0 { 0.0 } else { t.op_rate() };
        let step = step_of(t.latency(), &t.service, achieved, t.errors, plan.bound.percentile);
        on_step(search.record(Step { offered: rate, client_cpu: Some(cpu), ..step }));
    }
    Ok(())
}

/// A capacity step's figures from its measured window's histograms (ns): response times (from
/// the intended start), against which service times show the wait behind the schedule.
pub fn step_of(
    response: &hdrhistogram::Histogram<u64>,
    service: &hdrhistogram::Histogram<u64>,
    achieved: f64,
    errors: u64,
    percentile: f64,
) -> Step {
    let us = |h: &hdrhistogram::Histogram<u64>, p: f64| {
        if h.is_empty() { f64::NAN } else { h.value_at_percentile(p) as f64 / 1000.0 }
    };
    Step {
        achieved,
        latency_us: us(response, percentile),
        p50_us: us(response, 50.0),
        p99_us: us(response, 99.0),
        p999_us: us(response, 99.9),
        service_us: us(service, percentile),
        service_mean_us: service.mean() / 1000.0,
        errors,
        ..Step::default()
    }
}

/// cassandra-stress's warm-up: each operation type alone, 25% of n (at most 50,000) per node,
/// at most 100 threads, nothing printed but the announcement.
async fn warm_up(ctx: &mut Context, out: &mut Out) -> Result<()> {
    let iterations = engine::warmup_iterations(&ctx.settings);
    if iterations == 0 {
        return Ok(());
    }
    let full = ctx.settings.clone();
    let all_statements = ctx.statements.clone();
    let threads = full.rate.threads.unwrap_or(full.rate.max_threads).clamp(1, 100);
    for (i, (op, _)) in full.command.ops.iter().enumerate() {
        let name = full.command.op_name(*op);
        out.line(&format!("Warming up {name} with {iterations} iterations..."));
        let mut single = (*full).clone();
        single.command.ops = vec![(*op, 1.0)];
        if single.command.profiles.is_empty() {
            single.command.word = name.to_ascii_lowercase();
        }
        single.graph = None;
        ctx.settings = Arc::new(single);
        ctx.statements = Arc::new(all_statements.get(i).cloned().into_iter().collect());
        let hdr = ctx.hdr.take();
        let r = ctx.run(threads, Some(iterations), &mut Out::quiet(), true, Duration::ZERO).await;
        ctx.hdr = hdr;
        if !r?.success {
            (ctx.settings, ctx.statements) = (full, all_statements);
            bail!("Failed to execute warmup");
        }
    }
    (ctx.settings, ctx.statements) = (full, all_statements);
    Ok(())
}
