//! A block run in slices (a workload's `slice`): the block's environments all start on one
//! volume and stay up through the block, and the measured work is cut into short slices that
//! alternate between them, each cycle in a random order (randomized multiple interleaved trials,
//! Abedi & Brecht). What the disk does over seconds is then shared by a slice and its partners.
//! Each sandbox's run reports its slices combined (rates as their geometric mean), so that the
//! block's pairs are compared as every block's are, and the interval stays one over blocks.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use indicatif::ProgressBar;

use super::{Place, Runner, record_pins, unfit_volume};
use crate::agent::{READY, SLICE_DONE};
use crate::env::StartGate;
use crate::ledger::Resource;
use crate::plan::Slot;
use crate::store::{AgentReport, RunRecord, utc_now};
use crate::sys;
use crate::volume::{ProvisionContext, Provisioned};

/// How long a slice may take beyond its length (fio's start, a slow sandbox) before the block
/// is called off.
const SLICE_GRACE: Duration = Duration::from_secs(120);

/// Where each sandbox of the block stands.
#[derive(Default)]
struct State {
    ready: Vec<bool>,
    ended: Vec<bool>,
    /// Slices each sandbox was told to run, and those it said were done.
    granted: Vec<u32>,
    done: Vec<u32>,
    called_off: bool,
}

/// The turns of a block's sandboxes: one slice at a time, given by the runner.
struct Turns {
    state: Mutex<State>,
    changed: Condvar,
}

impl Turns {
    fn new(n: usize) -> Arc<Turns> {
        let state = State {
            ready: vec![false; n],
            ended: vec![false; n],
            granted: vec![0; n],
            done: vec![0; n],
            called_off: false,
        };
        Arc::new(Turns { state: Mutex::new(state), changed: Condvar::new() })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        f(&mut self.lock());
        self.changed.notify_all();
    }

    fn wait(&self, deadline: Instant, until: impl Fn(&State) -> bool) -> bool {
        sys::wait_on(&self.state, &self.changed, deadline, until)
    }

    /// Runs the slices: every sandbox up (or ended), then each cycle's sandboxes one slice each,
    /// in the cycle's order, each waited for. Whatever happens, every sandbox's stdin is let go.
    fn alternate(&self, cycles: &[Vec<usize>], slice: Duration) -> Result<(), String> {
        let outcome = self.alternate_until_done(cycles, slice);
        self.update(|s| s.called_off = true);
        outcome
    }

    fn alternate_until_done(&self, cycles: &[Vec<usize>], slice: Duration) -> Result<(), String> {
        let up = |s: &State| (0..s.ready.len()).all(|i| s.ready[i] || s.ended[i]);
        if !self.wait(Instant::now() + super::density::START_TIMEOUT, up) {
            return Err("the block's sandboxes did not all come up".into());
        }
        for cycle in cycles {
            for &i in cycle {
                let mut granted = 0;
                self.update(|s| {
                    if s.ready[i] && !s.ended[i] {
                        s.granted[i] += 1;
                    }
                    granted = s.granted[i];
                });
                let slice_done = |s: &State| s.done[i] >= granted || s.ended[i];
                if !self.wait(Instant::now() + slice + SLICE_GRACE, slice_done) {
                    return Err(format!("a slice did not end within {} s of its length", SLICE_GRACE.as_secs()));
                }
            }
        }
        Ok(())
    }
}

/// A block's volumes, each with its index among the suite's.
type BlockVolumes = Vec<(usize, Provisioned)>;

/// One sandbox's handle on the block's turns, passed to its environment as its start gate.
struct SliceGate {
    turns: Arc<Turns>,
    index: usize,
    count: u32,
}

impl StartGate for SliceGate {
    fn spawned(&self, _pid: u32) {}

    fn saw_line(&self, line: &str) {
        if line.contains(SLICE_DONE) {
            self.turns.update(|s| s.done[self.index] += 1);
        } else if line.contains(READY) {
            self.turns.update(|s| s.ready[self.index] = true);
        }
    }

    /// A "go" each time the sandbox's turn comes; stdin closes after its last, or when the
    /// block is called off.
    fn go(&self) -> sys::StdinFeed {
        let (turns, index, count) = (Arc::clone(&self.turns), self.index, self.count);
        Box::new(move |stdin| {
            for given in 1..=count {
                let mut state = turns.lock();
                while state.granted[index] < given && !state.called_off {
                    state = turns.changed.wait(state).unwrap_or_else(|p| p.into_inner());
                }
                if state.granted[index] < given {
                    return;
                }
                drop(state);
                if stdin.write_all(b"go\n").and_then(|_| stdin.flush()).is_err() {
                    return;
                }
            }
        })
    }

    fn slices(&self) -> u32 {
        self.count
    }
}

impl Runner<'_> {
    /// Runs the slots of one block together, in slices (see the module's comment), and stores
    /// each run. Slots that cannot run are stored as such and the rest run without them.
    pub(super) fn run_sliced(&mut self, slots: &[Slot], bar: &ProgressBar) -> Result<()> {
        let mut runnable = Vec::new();
        for &slot in slots {
            let mut record = self.new_record(slot);
            match self.not_runnable(slot, &mut record)? {
                true => self.store(slot, record, &[], bar)?,
                false => runnable.push(slot),
            }
        }
        if runnable.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = runnable.iter().map(|s| self.plan.cells[s.cell].id.clone()).collect();
        bar.set_message(format!("{} in slices", names.join(" · ")));
        let clock = Instant::now();
        let mut records: Vec<RunRecord> = runnable.iter().map(|s| self.new_record(*s)).collect();
        let settled = self.settle.as_ref().map(|s| s.wait(self.ledger.token())).transpose()?;
        let mark = self.ledger.mark();
        let attempts = self.attempt_sliced(&runnable, &mut records);
        let released = self.ledger.release_to(mark);
        let attempts = match attempts {
            Ok(reports) => reports,
            Err(e) if e.downcast_ref::<sys::Interrupted>().is_some() => return Err(e),
            Err(e) => runnable.iter().map(|_| Err(anyhow::anyhow!("{e:#}"))).collect(),
        };
        let seconds = clock.elapsed().as_secs_f64() / runnable.len() as f64;
        for ((slot, mut record), attempt) in runnable.iter().zip(records).zip(attempts) {
            let raw = self.take_report(*slot, &mut record, attempt)?;
            self.after_release(&mut record, settled.as_ref(), &released);
            record.ended = utc_now();
            record.seconds = seconds;
            self.store(*slot, record, &raw, bar)?;
        }
        Ok(())
    }

    /// Each volume of the block's slots, provisioned once (by its index in the suite) and its
    /// files written once, with what that writing was.
    fn provision_once(
        &self,
        slots: &[Slot],
        spec: &crate::workload::Spec,
        run_dir: &std::path::Path,
    ) -> Result<(BlockVolumes, Option<String>)> {
        let (mut volumes, mut preconditioned): (BlockVolumes, _) = (Vec::new(), None);
        for slot in slots {
            let index = self.plan.cells[slot.cell].volume;
            if volumes.iter().any(|(v, _)| *v == index) {
                continue;
            }
            let dir = run_dir.join(format!("volume-{index}"));
            std::fs::create_dir_all(&dir)?;
            let ctx = ProvisionContext { ledger: self.ledger, run_dir: &dir, block: false, speaks_nbd: false };
            let volume = self.suite.volumes[index].item.provision(ctx)?;
            let raw = volume.raw.then(|| crate::volume::RawTarget::Device(volume.path.clone()));
            let ctx = crate::workload::RunContext {
                data_dir: &volume.path,
                raw: raw.as_ref(),
                read_only: volume.read_only,
                scratch_dir: &dir,
            };
            preconditioned = spec.precondition(&ctx)?.or(preconditioned);
            volumes.push((index, volume));
        }
        Ok((volumes, preconditioned))
    }

    /// Provisions each volume of the block once, starts every slot's sandbox on it, runs the
    /// slices and returns each sandbox's report, in the slots' order.
    fn attempt_sliced(&mut self, slots: &[Slot], records: &mut [RunRecord]) -> Result<Vec<Result<AgentReport>>> {
        self.runs_started += 1;
        let run_dir = self.workdir.join("run").join(format!("{}-{}", self.ledger.token(), self.runs_started));
        self.ledger.record(Resource::Dir { path: run_dir.clone() })?;
        std::fs::create_dir_all(&run_dir)?;
        let first = &self.plan.cells[slots[0].cell];
        let block_spec = &self.suite.workloads[first.workload].variants[first.variant].spec;
        let sliced = block_spec.sliced().expect("a sliced block's workload runs in slices");
        let (volumes, preconditioned) = self.provision_once(slots, block_spec, &run_dir)?;
        let turns = Turns::new(slots.len());
        let cycles = self.orderer.slice_cycles(slots.len(), sliced.count);
        let envs: Vec<&str> =
            slots.iter().map(|s| self.suite.envs[self.plan.cells[s.cell].env].name.as_str()).collect();
        let design = format!(
            "{} slices of {} ms, alternating between {} (up through the block on one volume), in a random order each cycle",
            sliced.count,
            sliced.length.as_millis(),
            envs.join(", ")
        );
        let mut places = Vec::new();
        for (i, (slot, record)) in slots.iter().zip(records.iter_mut()).enumerate() {
            let cell = &self.plan.cells[slot.cell];
            let volume = &volumes.iter().find(|(v, _)| *v == cell.volume).expect("provisioned above").1;
            let spec = &self.suite.workloads[cell.workload].variants[cell.variant].spec;
            let pins = self.suite.pins(cell.env, cell.workload, spec);
            record_pins(record, &pins, false);
            record.setup.extend(volume.facts.clone());
            let disk = sys::disk_behind(&volume.path).unwrap_or_else(|| "none: memory or a network's".into());
            record.setup.insert("volume.disk".into(), disk);
            record.setup.insert(crate::store::SLICES_SETUP.into(), design.clone());
            if let Some(said) = &preconditioned {
                record.setup.insert("slices.precondition".into(), said.clone());
            }
            let dir = run_dir.join(format!("sandbox-{i}"));
            self.ledger.record(Resource::Dir { path: dir.clone() })?;
            std::fs::create_dir_all(&dir)?;
            let unfit = unfit_volume(volume, spec.workload(), &self.suite.volumes[cell.volume].name, false);
            let gate = SliceGate { turns: Arc::clone(&turns), index: i, count: sliced.count };
            places.push((cell.env, pins, volume, spec, dir, gate, unfit));
        }
        let reports = std::thread::scope(|scope| {
            let handles: Vec<_> = places
                .iter()
                .map(|(env, pins, volume, spec, dir, gate, unfit)| {
                    let place = Place {
                        env: self.suite.envs[*env].item.as_ref(),
                        attach: None,
                        ledger: self.ledger,
                        workdir: &self.workdir,
                        collect: self.suite.collect,
                        // One sampler of the whole machine cannot tell the block's sandboxes apart.
                        attribute: false,
                        pins,
                    };
                    let turns = &turns;
                    scope.spawn(move || {
                        let report = match unfit {
                            Some(why) => {
                                Ok(AgentReport { error: Some(why.clone()), unfit: true, ..Default::default() })
                            }
                            None => place.run(spec, volume, dir, Some(gate), None),
                        };
                        turns.update(|s| s.ended[gate.index] = true);
                        report
                    })
                })
                .collect();
            let alternated = turns.alternate(&cycles, sliced.length);
            let reports: Vec<Result<AgentReport>> = handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a sandbox's thread panicked"))))
                .collect();
            (alternated, reports)
        });
        if sys::interrupted() {
            return Err(sys::Interrupted.into());
        }
        let (alternated, mut reports) = reports;
        if let Err(why) = alternated {
            for report in reports.iter_mut().flatten().filter(|r| r.error.is_none()) {
                report.error = Some(format!("the block was called off: {why}"));
            }
        }
        Ok(reports)
    }
}
