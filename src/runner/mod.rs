//! Executes a plan: for each run, provision the volume, launch the agent through the
//! environment, store what came back, and release everything the run created — whatever
//! happened in between.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};

mod collect;
pub mod db_cell;
pub mod density;
mod interleave;
pub mod k8s_render;
pub mod k8s_server_cell;
mod measured;
mod place;
mod served;
pub mod server_cell;

pub use place::Place;

use crate::ledger::{Ledger, Resource};
use crate::plan::{Plan, Slot};
use crate::proof;
use crate::server::ServerSpec;
use crate::store::{BlockId, RawFile, ResultSet, RunRecord, Status, utc_now};
use crate::suite::Suite;
use crate::sys::{self, Interrupted};
use crate::volume::ProvisionContext;
use crate::workload::{Spec, Workload};
use figures::units;

pub struct Runner<'a> {
    pub suite: &'a Suite,
    pub plan: &'a Plan,
    pub set: &'a ResultSet,
    pub ledger: &'a Ledger,
    /// Where run directories (mount points, images, bundles) are made.
    pub workdir: PathBuf,
    /// Cells found unable to work (e.g. O_DIRECT refused), with the reason.
    unfit: HashMap<usize, String>,
    /// Each environment's preflight, once: `Some(reason)` when it cannot start anything.
    preflights: HashMap<usize, Option<String>>,
    /// What isobench sees of the host itself: a sandbox run must look different.
    host_facts: crate::facts::Facts,
    runs_started: u32,
    /// Orders the adaptive rounds, going on from the plan's.
    orderer: crate::plan::Orderer,
    /// The wait before each run: the suite's, as the environment allows it.
    settle: Option<sys::Settle>,
}

impl<'a> Runner<'a> {
    pub fn new(suite: &'a Suite, plan: &'a Plan, set: &'a ResultSet, ledger: &'a Ledger, workdir: PathBuf) -> Self {
        Runner {
            suite,
            plan,
            set,
            ledger,
            workdir,
            unfit: HashMap::new(),
            preflights: HashMap::new(),
            host_facts: crate::facts::sandbox_facts(None),
            runs_started: 0,
            orderer: plan.orderer.clone(),
            settle: suite.settle.clone().map(sys::Settle::from_environment),
        }
    }

    /// Runs every slot of the plan that the result set does not have yet, then further rounds
    /// while some comparison is wider than the suite's precision (or, for adaptive repetition,
    /// some cell's own CI than its target): each of those cells with its baseline, in their
    /// blocks, until every one is precise or the rounds or the budget run out.
    pub fn run_all(&mut self) -> Result<()> {
        let clock = Instant::now();
        let bar = ProgressBar::new(self.plan.runs.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} run {pos}/{len} · ETA {eta} · {msg}")
                .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        // What a run says while it goes (a capacity search's steps), under the cell it is in.
        let progress = bar.clone();
        sys::progress::set_sink(move |line| say(&progress, format!("  {} · {line}", progress.message())));
        self.run_slots(&self.plan.runs.clone(), &bar)?;
        loop {
            let (round, why) = self.next_round(clock.elapsed())?;
            if round.is_empty() {
                if let Some(why) = why {
                    say(&bar, why);
                }
                break;
            }
            bar.inc_length(round.len() as u64);
            say(&bar, why.unwrap_or_default());
            self.run_slots(&round, &bar)?;
        }
        bar.finish_and_clear();
        Ok(())
    }

    /// Runs `slots` in order; the slots of a block whose workload runs in slices run together.
    fn run_slots(&mut self, slots: &[Slot], bar: &ProgressBar) -> Result<()> {
        let mut i = 0;
        while i < slots.len() {
            let first = slots[i];
            let together = match self.sliced(first.cell) {
                true => slots[i..]
                    .iter()
                    .take_while(|s| s.round == first.round && s.block == first.block && self.sliced(s.cell))
                    .count(),
                false => 1,
            };
            let slots = &slots[i..i + together];
            let todo: Vec<Slot> = slots.iter().copied().filter(|s| !self.done(*s, bar)).collect();
            if !todo.is_empty() && sys::interrupted() {
                bar.abandon();
                return Err(Interrupted.into());
            }
            match (self.sliced(first.cell), todo.as_slice()) {
                (_, []) => {}
                (true, _) => self.run_sliced(&todo, bar)?,
                (false, [slot]) => {
                    let cell = &self.plan.cells[slot.cell];
                    bar.set_message(format!("{} #{}", cell.id, slot.rep));
                    let (record, raw) = self.run_one(*slot)?;
                    self.store(*slot, record, &raw, bar)?;
                }
                (false, _) => unreachable!("one slot at a time outside slices"),
            }
            i += together;
        }
        Ok(())
    }

    /// Whether `cell`'s workload runs in slices that alternate with its block's other cells'.
    fn sliced(&self, cell: usize) -> bool {
        let cell = &self.plan.cells[cell];
        self.suite.workloads[cell.workload].variants[cell.variant].spec.sliced().is_some()
    }

    /// Whether the result set has `slot`'s run already (a resumed run): then it counts as done.
    fn done(&self, slot: Slot, bar: &ProgressBar) -> bool {
        let done = self.set.has_run(&self.plan.cells[slot.cell].id, slot.rep);
        if done {
            bar.inc(1);
        }
        done
    }

    /// Writes `slot`'s run into the result set, in its block, and says it on the progress line.
    fn store(&self, slot: Slot, mut record: RunRecord, raw: &[RawFile], bar: &ProgressBar) -> Result<()> {
        let cell = &self.plan.cells[slot.cell];
        record.block =
            Some(BlockId { round: slot.round, block: slot.block as u32, session: self.ledger.token().into() });
        self.set.write_run(&mut record, raw)?;
        let headline = self.suite.workloads[cell.workload].headline(cell.variant);
        say(bar, progress_line(bar.position() + 1, bar.length().unwrap_or(0), &record, &headline));
        bar.inc(1);
        Ok(())
    }

    /// The next round after the planned ones, and what it is for (or, when there is none, why
    /// the rounds stop where something was still short of its target): the cells that need
    /// another run, each with its baseline so that the runs pair, in blocks.
    fn next_round(&mut self, elapsed: Duration) -> Result<(Vec<Slot>, Option<String>)> {
        let runs = self.set.runs()?;
        let round =
            runs.iter().filter_map(|r| r.block.as_ref().map(|b| b.round)).max().unwrap_or(0).max(self.suite.repeat.min)
                + 1;
        let (mut wanted, mut said) = match &self.suite.precision {
            Some(precision) => {
                let wide = self.imprecise(&runs, precision.half_width);
                let widest = wide.iter().map(|(_, w)| *w).fold(0.0, f64::max);
                let said = format!(
                    "{} comparison(s) wider than ±{}% (the widest ±{} points)",
                    wide.len(),
                    precision.half_width,
                    units::sig3(widest)
                );
                (wide, said)
            }
            None => {
                let short = self.short_of_target(&runs);
                let said = format!(
                    "adaptive repetition: {} cell(s) need another run for a ±{}% CI",
                    short.len(),
                    self.suite.repeat.target_ci_pct.unwrap_or_default()
                );
                (short.into_iter().map(|cell| (cell, 0.0)).collect(), said)
            }
        };
        if wanted.is_empty() {
            return Ok((Vec::new(), None));
        }
        if let Some(precision) = &self.suite.precision {
            let still = |what: String| {
                format!("precision: {} comparison(s) still wider than ±{}%{what}", wanted.len(), precision.half_width)
            };
            if round > precision.max_rounds {
                return Ok((Vec::new(), Some(still(format!(" after max_rounds = {}", precision.max_rounds)))));
            }
            if let Some(budget) = precision.budget_s {
                let left = budget - elapsed.as_secs_f64();
                let cost = |cell: usize, taken: &[usize]| self.round_cost(&runs, cell, taken);
                let affordable = affordable(&wanted, precision.half_width, left, cost);
                if affordable.is_empty() {
                    let cheapest = wanted.iter().map(|(c, _)| self.round_cost(&runs, *c, &[])).fold(f64::MAX, f64::min);
                    return Ok((
                        Vec::new(),
                        Some(still(format!(
                            "; another round of even the cheapest (about {cheapest:.0} s) would overrun the budget ({budget:.0} s, {:.0} s spent)",
                            elapsed.as_secs_f64()
                        ))),
                    ));
                }
                if affordable.len() < wanted.len() {
                    said += &format!(
                        "; {} of them within the {left:.0} s the budget has left, those furthest from ±{}% per second of runs",
                        affordable.len(),
                        precision.half_width
                    );
                }
                wanted.retain(|(c, _)| affordable.contains(c));
            }
        }
        let wanted: Vec<usize> = wanted.into_iter().map(|(cell, _)| cell).collect();
        // Each wanted cell's block with the wanted cells and the block's baseline.
        let blocks: Vec<Vec<usize>> = self
            .plan
            .blocks
            .iter()
            .map(|block| {
                if !block.iter().any(|c| wanted.contains(c)) {
                    return Vec::new();
                }
                block.iter().copied().filter(|c| wanted.contains(c) || self.is_baseline(*c)).collect()
            })
            .collect();
        let rep = |cell: usize| {
            runs.iter().filter(|r| r.cell == self.plan.cells[cell].id).map(|r| r.rep).max().unwrap_or(0) + 1
        };
        let slots = self.orderer.round_slots(&blocks, round, rep);
        Ok((slots, Some(format!("round {round}: {said}"))))
    }

    fn is_baseline(&self, cell: usize) -> bool {
        self.suite.baseline.contains(&self.plan.cells[cell].labels)
    }

    /// What another run of `cell` costs in seconds: its own run, and its block's baseline's
    /// unless a cell of that block among `taken` brings the baseline already.
    fn round_cost(&self, runs: &[RunRecord], cell: usize, taken: &[usize]) -> f64 {
        let block = self.plan.blocks.iter().find(|b| b.contains(&cell));
        let shared = block.is_some_and(|b| b.iter().any(|c| taken.contains(c)));
        let baseline = block.and_then(|b| b.iter().copied().find(|c| self.is_baseline(*c) && *c != cell));
        let cells: Vec<usize> = std::iter::once(cell).chain(baseline.filter(|_| !shared)).collect();
        self.expected_seconds(runs, &cells)
    }

    /// The cells whose comparison with the baseline is wider than ±`target` points, each with
    /// its half-width.
    fn imprecise(&self, runs: &[RunRecord], target: f64) -> Vec<(usize, f64)> {
        let analysis = crate::compare::analyze(&self.plan.record(self.suite), runs);
        crate::compare::precision::standings(&analysis, target)
            .into_iter()
            .filter(|s| !s.met)
            .filter_map(|s| {
                let id = &analysis.cells[s.cell].record.cell;
                let i = self.plan.cells.iter().position(|c| c.id == *id)?;
                (!self.unfit.contains_key(&i)).then_some((i, s.half_width))
            })
            .collect()
    }

    /// For adaptive repetition: the cells whose own CI is still wider than the target.
    fn short_of_target(&self, runs: &[RunRecord]) -> Vec<usize> {
        let repeat = &self.suite.repeat;
        if !repeat.is_adaptive() {
            return Vec::new();
        }
        let mut short = Vec::new();
        for (i, cell) in self.plan.cells.iter().enumerate() {
            let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.cell == cell.id).collect();
            if mine.iter().any(|r| r.status == Status::Skipped) || self.unfit.contains_key(&i) {
                continue;
            }
            let headline = self.suite.workloads[cell.workload].headline(cell.variant);
            let metric = repeat.metric.clone().or_else(|| {
                headline
                    .iter()
                    .find(|m| mine.iter().any(|r| r.samples.iter().any(|s| s.metric == **m)))
                    .map(|m| m.to_string())
            });
            let values: Vec<f64> = mine
                .iter()
                .filter(|r| r.status == Status::Ok)
                .filter_map(|r| r.samples.iter().find(|s| Some(&s.metric) == metric.as_ref()).map(|s| s.value))
                .collect();
            if repeat.needs_another_run(mine.len() as u32, &values) {
                short.push(i);
            }
        }
        short
    }

    /// What a run of each of `cells` should take, from what their runs took so far (a cell with none
    /// counts as the mean run).
    fn expected_seconds(&self, runs: &[RunRecord], cells: &[usize]) -> f64 {
        let mean = |it: Vec<f64>| (!it.is_empty()).then(|| it.iter().sum::<f64>() / it.len() as f64);
        let overall = mean(runs.iter().map(|r| r.seconds).collect()).unwrap_or(0.0);
        cells
            .iter()
            .map(|c| {
                let id = &self.plan.cells[*c].id;
                mean(runs.iter().filter(|r| r.cell == *id).map(|r| r.seconds).collect()).unwrap_or(overall)
            })
            .sum()
    }

    /// One run. Errors only for an interrupt or a broken ledger; a failed run is a record.
    fn run_one(&mut self, slot: Slot) -> Result<(RunRecord, Vec<RawFile>)> {
        let clock = Instant::now();
        let mut record = self.new_record(slot);
        let mut raw = Vec::new();
        if !self.not_runnable(slot, &mut record)? {
            let settled = self.settle.as_ref().map(|s| s.wait(self.ledger.token())).transpose()?;
            let mark = self.ledger.mark();
            let attempt = self.attempt(slot, &mut record);
            let released = self.ledger.release_to(mark);
            raw = self.take_report(slot, &mut record, attempt)?;
            self.after_release(&mut record, settled.as_ref(), &released);
        }
        record.ended = utc_now();
        record.seconds = clock.elapsed().as_secs_f64();
        Ok((record, raw))
    }

    /// A record for `slot`'s run, starting now, with its environment's setup.
    fn new_record(&self, slot: Slot) -> RunRecord {
        let cell = &self.plan.cells[slot.cell];
        let setup = self.suite.envs[cell.env].item.describe();
        RunRecord { started: utc_now(), setup, ..RunRecord::new(cell.labels.clone(), slot.rep) }
    }

    /// Whether `slot`'s run cannot start (skipped on this machine, unfit, its environment's
    /// preflight failed), said in `record`.
    fn not_runnable(&mut self, slot: Slot, record: &mut RunRecord) -> Result<bool> {
        let cell = &self.plan.cells[slot.cell];
        let env = &self.suite.envs[cell.env];
        let volume = &self.suite.volumes[cell.volume];
        if let Some(why) = skip_reason(env, volume) {
            record.status = Status::Skipped;
            record.error = Some(why);
        } else if let Some(why) = self.unfit.get(&slot.cell) {
            record.status = Status::Failed;
            record.error = Some(format!("not run: an earlier repetition found that {why}"));
        } else if let Some(why) = self.preflight(cell.env)? {
            record.status = Status::Failed;
            record.error = Some(format!("env \"{}\": {why}", env.name));
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    /// What the agent reported, or why there is no report, into `record`: a sandbox that looks
    /// like the host, an error or no samples fail the run. Returns its raw files.
    fn take_report(
        &mut self,
        slot: Slot,
        record: &mut RunRecord,
        attempt: Result<crate::store::AgentReport>,
    ) -> Result<Vec<RawFile>> {
        let env = &self.suite.envs[self.plan.cells[slot.cell].env];
        let mut raw = Vec::new();
        match attempt {
            Ok(report) => {
                record.facts = report.facts;
                record.setup.extend(report.setup);
                record.notes.extend(report.notes);
                record.samples = report.samples;
                record.series = report.series;
                record.steps = report.steps;
                record.functions = report.functions;
                raw = report.raw;
                let sandbox_at_home =
                    env.item.is_sandbox().then(|| proof::looks_like_host(&record.facts, &self.host_facts));
                if let Some(Some(why)) = sandbox_at_home {
                    // A benchmark of the wrong runtime is worse than none.
                    record.status = Status::Failed;
                    record.error = Some(format!("env \"{}\" is a sandbox, but {why}", env.name));
                } else if let Some(e) = report.error {
                    record.status = Status::Failed;
                    if report.unfit {
                        self.unfit.insert(slot.cell, e.clone());
                    }
                    record.error = Some(e);
                } else if record.samples.is_empty() {
                    record.status = Status::Failed;
                    record.error = Some("the workload reported no samples".into());
                }
            }
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
            Err(e) => {
                record.status = Status::Failed;
                record.error = Some(format!("{e:#}"));
            }
        }
        if let Some(cpus) = record.facts.get("cpus") {
            record.setup.insert("limit.cpus_seen".into(), cpus.clone());
        }
        Ok(raw)
    }

    /// The settle before the run, and a teardown that failed, into `record`.
    fn after_release(&self, record: &mut RunRecord, settled: Option<&sys::Settled>, released: &Result<()>) {
        if let (Some(settle), Some(settled)) = (&self.settle, settled) {
            record_settle(record, settle, settled);
        }
        if let Err(e) = released {
            // The numbers stand, but the machine is not clean: say so loudly.
            let msg = format!("teardown failed: {e:#}; run `isobench cleanup`");
            eprintln!("isobench: warning: {}", crate::secrets::scrub(&msg));
            record.notes.push(msg);
        }
    }

    /// The environment's preflight (e.g. a runtime starting `/bin/true`), run once and
    /// remembered; `Some(reason)` when it failed.
    fn preflight(&mut self, env: usize) -> Result<Option<String>> {
        if let Some(known) = self.preflights.get(&env) {
            return Ok(known.clone());
        }
        let run_dir = self.workdir.join("run").join(format!("{}-preflight-{env}", self.ledger.token()));
        let mark = self.ledger.mark();
        self.ledger.record(Resource::Dir { path: run_dir.clone() })?;
        std::fs::create_dir_all(&run_dir)?;
        let outcome = self.suite.envs[env].item.preflight(self.ledger, &run_dir, &self.workdir);
        self.ledger.release_to(mark)?;
        let verdict = match outcome {
            Ok(()) => None,
            Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
            Err(e) => Some(format!("{e:#}")),
        };
        self.preflights.insert(env, verdict.clone());
        Ok(verdict)
    }

    fn attempt(&mut self, slot: Slot, record: &mut RunRecord) -> Result<crate::store::AgentReport> {
        let cell = &self.plan.cells[slot.cell];
        let env = &self.suite.envs[cell.env].item;
        let variant = &self.suite.workloads[cell.workload].variants[cell.variant];
        let spec = &variant.spec;
        self.runs_started += 1;
        let run_dir = self.workdir.join("run").join(format!("{}-{}", self.ledger.token(), self.runs_started));
        self.ledger.record(Resource::Dir { path: run_dir.clone() })?;
        std::fs::create_dir_all(&run_dir)?;
        let volume_entry = &self.suite.volumes[cell.volume];
        let attach = volume_entry.attach.as_ref();
        let pins = self.suite.pins(cell.env, cell.workload, spec);
        if !env.mounts_claims() {
            record_pins(record, &pins, self.suite.serves(cell.workload, spec));
        }
        let place = Place {
            env: env.as_ref(),
            attach,
            ledger: self.ledger,
            workdir: &self.workdir,
            collect: self.suite.collect,
            attribute: self.suite.attribute,
            pins: &pins,
        };
        let ctx = ProvisionContext {
            ledger: self.ledger,
            run_dir: &run_dir,
            block: place.wants_block(),
            speaks_nbd: env.speaks_nbd(),
        };
        let volumes = match variant.density {
            Some(n) => volume_entry.item.provision_many(ctx, n)?,
            None => vec![volume_entry.item.provision(ctx)?],
        };
        let volume = &volumes[0];
        record.setup.extend(volume.facts.clone());
        if !env.mounts_claims() {
            let disk = sys::disk_behind(&volume.path).unwrap_or_else(|| "none: memory or a network's".into());
            record.setup.insert("volume.disk".into(), disk);
        }
        if record.setup.get("runtime.ignores_o_direct").is_some_and(|v| v == "true")
            && spec.workload().describe().get("fio.direct").is_some_and(|v| v == "true")
        {
            record.notes.push(
                "this runtime opens files without O_DIRECT: direct = true is buffered here, so compare with buffered host I/O"
                    .into(),
            );
        }
        let served = self.suite.serves(cell.workload, spec);
        if let Some(why) = unfit_volume(volume, spec.workload(), &volume_entry.name, served) {
            return Ok(crate::store::AgentReport { error: Some(why), unfit: true, ..Default::default() });
        }
        let mut spec = spec.clone();
        if let (Some(ServerSpec::External(external)), Spec::Cql(cql)) = (self.suite.server(cell.workload), &mut spec) {
            cql.target = Some(external.target.clone());
        }
        if variant.density.is_some() {
            let (report, sandboxes) = crate::runner::density::run(&place, &spec, &volumes, &run_dir)?;
            record.sandboxes = sandboxes;
            return Ok(report);
        }
        if let (Some(ServerSpec::Database(db)), Some(load)) = (self.suite.server(cell.workload), spec.served_load()) {
            if let Some(k8s) = env.as_k8s() {
                let ledger = self.ledger;
                return crate::runner::k8s_server_cell::db_pod::run(
                    k8s, db, &spec, load, volume, &run_dir, ledger, record,
                );
            }
            let env_name = &self.suite.envs[cell.env].name;
            return crate::runner::db_cell::run(&place, env_name, db, &spec, load, volume, &run_dir, record);
        }
        if let (Some(ServerSpec::Managed(managed)), Spec::Cql(cql)) = (self.suite.server(cell.workload), &spec) {
            let managed = &match managed.with_nodes(cql.nodes) {
                Ok(m) => m,
                Err(why) => {
                    return Ok(crate::store::AgentReport { error: Some(why), unfit: true, ..Default::default() });
                }
            };
            if let Some(k8s) = env.as_k8s() {
                return crate::runner::k8s_server_cell::run(k8s, managed, cql, volume, &run_dir, self.ledger, record);
            }
            let env_name = &self.suite.envs[cell.env].name;
            return crate::runner::server_cell::run(&place, env_name, managed, cql, volume, &run_dir, record);
        }
        if let (Some(ServerSpec::External(external)), Spec::Cql(cql)) = (self.suite.server(cell.workload), &spec)
            && let Some(pods) = &external.pods
        {
            let Some(k8s) = env.as_k8s() else {
                let why = "the server names pods (selector = …), which only a k8s environment reaches";
                return Ok(crate::store::AgentReport { error: Some(why.into()), unfit: true, ..Default::default() });
            };
            return crate::runner::k8s_server_cell::run_external(k8s, external, pods, cql, &run_dir, self.ledger);
        }
        place.run(&spec, volume, &run_dir, None, None)
    }
}

/// Of the comparisons short of the goal (each cell with its half-width), those one more round
/// can afford within `left` seconds: taken in order of how far each is from the goal per second
/// of runs it costs, each while it still fits. `cost(cell, taken)`: what its runs cost, with the
/// cells taken before it already in the round (which may bring its baseline).
fn affordable(wide: &[(usize, f64)], goal: f64, left: f64, cost: impl Fn(usize, &[usize]) -> f64) -> Vec<usize> {
    let mut ranked: Vec<(usize, f64)> =
        wide.iter().map(|(cell, half)| (*cell, (half - goal) / cost(*cell, &[]).max(1e-3))).collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (mut taken, mut spent) = (Vec::new(), 0.0);
    for (cell, _) in ranked {
        let cost = cost(cell, &taken);
        if spent + cost <= left {
            spent += cost;
            taken.push(cell);
        }
    }
    taken
}

/// The CPUs a run's sandbox and its load generator may use, in the host's numbering: those the
/// cell pins them to, else all of isobench's.
fn record_pins(record: &mut RunRecord, pins: &crate::suite::CpuPins, served: bool) {
    let all = sys::CpuSet::available();
    record.setup.insert("limit.cpuset".into(), pins.sandbox.as_ref().unwrap_or(&all).to_string());
    if served {
        record.setup.insert("loader.cpuset".into(), pins.loader.as_ref().unwrap_or(&all).to_string());
    }
}

/// How long the machine took to settle before the run, and what had not settled by the limit.
fn record_settle(record: &mut RunRecord, settle: &sys::Settle, settled: &sys::Settled) {
    record.samples.push(crate::store::Sample::new(crate::store::SETTLE_METRIC, settled.waited_s, "s"));
    let within = format!("within {:.1} s", settle.timeout.as_secs_f64());
    let said = match settle.cpu_busy {
        _ if settle.shared => format!(
            "processes gone {within}; writeback and CPUs not waited for (a shared machine: {}=1)",
            sys::SHARED_MACHINE_VAR
        ),
        busy if busy < 1.0 => {
            format!("processes gone, writeback near zero, CPUs at most {:.0}% busy; each {within}", busy * 100.0)
        }
        _ => format!("processes gone, writeback near zero, CPUs not waited for (cpu_busy = 100%); each {within}"),
    };
    record.setup.insert("settle".into(), said);
    if !settled.unsettled.is_empty() {
        let what = settled.unsettled.join("; ");
        record.notes.push(format!("the machine had not settled when this run began: {what}"));
        record.setup.insert(crate::store::UNSETTLED_SETUP.into(), what);
    }
}

/// Why a cell of `env` on `volume` cannot run on this machine at all: the environment or the
/// volume is missing something, or the environment cannot take a raw device.
pub fn skip_reason(
    env: &crate::suite::Named<Box<dyn crate::env::Environment>>,
    volume: &crate::suite::Named<Box<dyn crate::volume::Volume>>,
) -> Option<String> {
    let env_why = env.item.unavailable().or_else(|| volume.item.raw().then(|| env.item.no_raw_devices()).flatten());
    let claim_why = match (env.item.mounts_claims(), volume.item.claim().is_some()) {
        (true, false) => Some(format!(
            "env \"{}\" runs pods on a cluster's nodes, which cannot mount volume \"{}\" of this host: give it a kind = \"pvc\" volume",
            env.name, volume.name
        )),
        (false, true) => Some(format!(
            "volume \"{}\" is a PersistentVolumeClaim, which only a k8s environment's pods can mount",
            volume.name
        )),
        _ => None,
    };
    if claim_why.is_some() {
        return claim_why;
    }
    env_why
        .map(|why| format!("env \"{}\": {why}", env.name))
        .or_else(|| volume.item.unavailable().map(|why| format!("volume \"{}\": {why}", volume.name)))
}

/// What this machine lacks for the plan's cells: each reason (an environment or volume that
/// cannot run here, a program a workload needs on the host's root) with the cells it stops.
pub fn missing_here(suite: &Suite, plan: &Plan) -> Vec<(String, Vec<String>)> {
    let mut missing: Vec<(String, Vec<String>)> = Vec::new();
    for cell in &plan.cells {
        let env = &suite.envs[cell.env];
        let volume = &suite.volumes[cell.volume];
        let workload = suite.workloads[cell.workload].variants[cell.variant].spec.workload();
        let mut reasons: Vec<String> = Vec::new();
        reasons.extend(env.item.unavailable().map(|why| format!("env \"{}\": {why}", env.name)));
        reasons.extend(volume.item.unavailable().map(|why| format!("volume \"{}\": {why}", volume.name)));
        // Pods bring their programs in their image; every other sandbox runs the host's.
        if !env.item.mounts_claims() {
            for program in workload.programs().into_iter().filter(|p| sys::find_program(p).is_none()) {
                reasons.push(format!("{program} is not installed (scripts/setup.sh installs it)"));
            }
        }
        for reason in reasons {
            match missing.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, cells)) => cells.push(cell.id.clone()),
                None => missing.push((reason, vec![cell.id.clone()])),
            }
        }
    }
    missing
}

/// The cells that can never run as the suite says (a combination that cannot work, whatever the
/// machine): each reason with the cells it stops. A suite error, before any run.
pub fn refusals(suite: &Suite, plan: &Plan) -> Vec<(String, Vec<String>)> {
    let mut refused: Vec<(String, Vec<String>)> = Vec::new();
    let mut refuse = |why: String, cell: &str| match refused.iter_mut().find(|(r, _)| *r == why) {
        Some((_, cells)) => cells.push(cell.to_string()),
        None => refused.push((why, vec![cell.to_string()])),
    };
    for cell in &plan.cells {
        let env = &suite.envs[cell.env];
        let workload = &suite.workloads[cell.workload];
        if workload.variants[cell.variant].spec.sliced().is_some() && !env.item.takes_slices() {
            refuse(
                format!(
                    "workload \"{}\" runs in slices (slice = …), and env \"{}\" cannot stay up between them at isobench's word: remove slice, or run the workload in host, oci or podman environments only (cells = [...])",
                    workload.name, env.name
                ),
                &cell.id,
            );
        }
    }
    for cell in &plan.cells {
        if let Some(ServerSpec::Database(_)) = suite.server(cell.workload) {
            let spec = &suite.workloads[cell.workload].variants[cell.variant].spec;
            let (env, volume) = (&suite.envs[cell.env], &suite.volumes[cell.volume]);
            let why = match volume.item.raw() {
                true => Some(format!(
                    "volume \"{}\" is a raw device (fs = \"none\"); a database needs a filesystem",
                    volume.name
                )),
                false => db_cell::refusal(env.item.as_ref(), &env.name),
            };
            if let (Some(why), true) = (why, spec.served_load().is_some()) {
                refuse(why, &cell.id);
            }
        }
    }
    for cell in &plan.cells {
        let Some(ServerSpec::Managed(managed)) = suite.server(cell.workload) else { continue };
        let Spec::Cql(cql) = &suite.workloads[cell.workload].variants[cell.variant].spec else { continue };
        let env = &suite.envs[cell.env];
        let volume = &suite.volumes[cell.volume];
        let why = match managed.with_nodes(cql.nodes) {
            Err(why) => Some(why),
            Ok(_) if volume.item.raw() => Some(format!(
                "volume \"{}\" is a raw device (fs = \"none\"); a database needs a filesystem",
                volume.name
            )),
            Ok(managed) => server_cell::refusal(env.item.as_ref(), &env.name, &managed),
        };
        if let Some(why) = why {
            refuse(why, &cell.id);
        }
    }
    refused
}

/// Why a workload cannot run on this volume at all (every repetition would fail the same way).
fn unfit_volume(
    volume: &crate::volume::Provisioned,
    workload: &dyn Workload,
    name: &str,
    served: bool,
) -> Option<String> {
    if volume.read_only && workload.writes_volume() {
        return Some(format!(
            "volume \"{name}\" is a device the suite did not call destructive, and this workload writes to it; set destructive = true on the volume if what is on {} may be destroyed",
            volume.path.display()
        ));
    }
    if volume.raw && served {
        return Some(format!("volume \"{name}\" is a raw device (fs = \"none\"); a database needs a filesystem"));
    }
    None
}

/// A line above the progress bar; plain stderr when there is no terminal to draw the bar on
/// (CI logs), where indicatif would swallow it.
fn say(bar: &ProgressBar, line: String) {
    let line = crate::secrets::scrub(&line).into_owned();
    if bar.is_hidden() {
        eprintln!("{line}");
    } else {
        bar.println(line);
    }
}

/// "[3/9] host.tmp.cpu #1  total_time 0.571 s  events_per_s 3.50k events/s  (1.5 s)": the
/// cell's first three headline metrics.
fn progress_line(i: u64, total: u64, r: &RunRecord, headline: &[String]) -> String {
    let head = format!("[{i}/{total}] {} #{}", r.cell, r.rep);
    match r.status {
        Status::Ok => {
            let shown: Vec<String> = headline
                .iter()
                .filter_map(|m| r.samples.iter().find(|s| s.metric == *m))
                .take(3)
                .map(|s| format!("{} {}", s.metric, units::human(s.value, &s.unit)))
                .collect();
            format!("{head}  {}  ({:.1} s)", shown.join("  "), r.seconds)
        }
        Status::Failed => format!("{head}  FAILED: {}", crate::store::error_headline(r.error.as_deref().unwrap_or(""))),
        Status::Skipped => format!("{head}  skipped: {}", r.error.as_deref().unwrap_or("")),
    }
}

#[cfg(test)]
mod tests {
    use super::affordable;

    /// Cell 1 is 7 points from the goal for a 10-s run and its baseline's 5 s (0.47 a second),
    /// cell 2 4 points for 2 s and 5 (0.57), cell 3 1 point for 20 s and 5; a cell taken before
    /// brings the baseline of its block (cells 1 and 2 share one).
    fn cost(cell: usize, taken: &[usize]) -> f64 {
        let own = [0.0, 10.0, 2.0, 20.0][cell];
        let shared = matches!(cell, 1 | 2) && taken.iter().any(|t| matches!(t, 1 | 2));
        own + if shared { 0.0 } else { 5.0 }
    }

    #[test]
    fn a_round_takes_the_comparisons_furthest_from_the_goal_per_second_that_fit() {
        let wide = [(1, 12.0), (2, 9.0), (3, 6.0)];
        // All fit: all are taken, the shared baseline counted once (7 + 10 + 25 s).
        assert_eq!(affordable(&wide, 5.0, 100.0, cost), vec![2, 1, 3]);
        // 20 s: cell 2 (7 s), then cell 1 for its own 10 s; cell 3's 25 s no longer fit.
        assert_eq!(affordable(&wide, 5.0, 20.0, cost), vec![2, 1]);
        // 8 s: cell 2 alone; cell 1 would bring the round to 17.
        assert_eq!(affordable(&wide, 5.0, 8.0, cost), vec![2]);
        assert!(affordable(&wide, 5.0, 5.0, cost).is_empty(), "not even the cheapest fits");
    }
}
