//! Capacity: the highest offered rate a cell sustains while a latency percentile stays under a
//! bound, the unit clusters are sized by. A search offers fixed rates in steps (each a measured
//! window after a short warm-up), ramps them geometrically from a low rate until one fails (or,
//! when the first fails, steps down a little), then bisects between the last pass and the first
//! fail to a stated resolution. A rate that failed before any passed is offered again once one
//! has: a node fresh from its start may fail any rate while it settles. What runs a step
//! is the workload's (a CQL load at `fixed=R/s`, fio at `rate_iops`); the search only decides.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use figures::units;

/// A step passes only when it achieved at least this share of the rate it was offered.
pub const MIN_ACHIEVED: f64 = 0.95;

/// How many ramp steps below its start a search goes when the start already fails.
pub const STEPS_DOWN: i32 = 2;

/// A client using this share of the cores it may use is the likely limit, not the server.
pub const CLIENT_CPU_SHARE: f64 = 0.9;

/// How a run's note starts when the load, not the environment, set the capacity's limit: the
/// report warns about every cell with one.
pub const CLIENT_LIMIT_NOTE: &str = "capacity limited by the load: ";

/// The latency bound: `percentile` of the operations within `latency_us`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub percentile: f64,
    pub latency_us: f64,
}

impl Bound {
    /// "p99", "p99.9", "p50".
    pub fn percentile_name(&self) -> String {
        format!("p{}", trim_float(self.percentile))
    }

    /// "p99 ≤ 10 ms": the bound as the suite wrote it, not rounded to three digits.
    pub fn text(&self) -> String {
        let latency = if self.latency_us >= 1000.0 {
            format!("{} ms", trim_float(self.latency_us / 1000.0))
        } else {
            format!("{} µs", trim_float(self.latency_us))
        };
        format!("{} ≤ {latency}", self.percentile_name())
    }
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// How one search goes: the bound, where it starts, how it grows, when it stops.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Plan {
    pub bound: Bound,
    /// The first rate offered (op/s).
    pub start: f64,
    /// Each ramp step offers this many times the last passing rate.
    pub growth: f64,
    /// The search stops once the first failing rate is within this share above the highest pass.
    pub resolution: f64,
    /// Each step runs this long before its window is measured.
    pub warmup: Duration,
    /// Each step's measured window.
    pub window: Duration,
    /// The most a search may take; past it, the highest pass so far is a lower bound.
    pub budget: Duration,
    /// No rate above this is offered (a ceiling the suite sets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
    /// A failed rate is offered this many times more before it counts as failed: one window's
    /// stall (a commit-log sync, a collector's pause, a neighbour) fails that window, not the rate.
    #[serde(default)]
    pub retries: u32,
}

impl Plan {
    /// How long one step takes, at least.
    pub fn step_time(&self) -> Duration {
        self.warmup + self.window
    }

    /// What the setup of a run records: the bound, then how the search went about it.
    pub fn describe(&self) -> String {
        format!(
            "{}; from {} ×{}, bisected to {}%, steps of {} warm-up + {} measured, a failed rate offered {} more {} (and again after the first pass when it failed before it), budget {}",
            self.bound.text(),
            units::human(self.start, "op/s"),
            trim_float(self.growth),
            trim_float(self.resolution * 100.0),
            seconds(self.warmup),
            seconds(self.window),
            self.retries,
            if self.retries == 1 { "time" } else { "times" },
            seconds(self.budget)
        )
    }
}

fn seconds(d: Duration) -> String {
    format!("{} s", trim_float(d.as_secs_f64()))
}

/// One step of a search: the rate offered, what it achieved and the latencies it saw.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Step {
    /// Operations per second offered (the schedule's rate).
    pub offered: f64,
    /// Operations per second completed in the measured window.
    pub achieved: f64,
    /// The bound's percentile of the latency measured from each operation's intended start
    /// (response time), where the engine schedules; of its service time otherwise. NaN (null
    /// in JSON) when no operation completed.
    #[serde(with = "measured")]
    pub latency_us: f64,
    #[serde(with = "measured")]
    pub p50_us: f64,
    #[serde(with = "measured")]
    pub p99_us: f64,
    #[serde(with = "measured")]
    pub p999_us: f64,
    /// The bound's percentile of the service time (from the actual start): against
    /// `latency_us`, how long operations waited behind the schedule.
    #[serde(with = "measured")]
    pub service_us: f64,
    /// The mean service time, for what the load's concurrency allows (Little's law).
    #[serde(with = "measured")]
    pub service_mean_us: f64,
    pub errors: u64,
    /// Cores the load generator used during the step, where it could be counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<f64>,
    pub pass: bool,
    /// Why it failed ("p99 31 ms > 10 ms"), empty when it passed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub why: String,
}

/// A figure that may not have been measured: NaN is null in JSON, which has no NaN.
mod measured {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        if v.is_finite() { s.serialize_f64(*v) } else { s.serialize_none() }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
    }
}

impl Step {
    /// Passes or fails the step against `bound`, saying why it failed.
    pub fn judge(&mut self, bound: &Bound) {
        let mut why = Vec::new();
        if self.errors > 0 {
            why.push(format!("{} errors", self.errors));
        }
        if self.achieved < MIN_ACHIEVED * self.offered {
            why.push(format!(
                "achieved {} of {} offered",
                units::human(self.achieved, "op/s"),
                units::human(self.offered, "op/s")
            ));
        }
        // A latency that was not measured (NaN) is no pass either.
        if self.latency_us.is_nan() || self.latency_us > bound.latency_us {
            why.push(format!(
                "{} {} > {}",
                bound.percentile_name(),
                units::human(self.latency_us, "us"),
                units::human(bound.latency_us, "us")
            ));
        }
        self.pass = why.is_empty();
        self.why = why.join(", ");
    }

    /// "offered 4k op/s, achieved 3.98k, p99 4.2 ms: pass" — a progress line.
    pub fn line(&self, bound: &Bound) -> String {
        format!(
            "offered {}, achieved {}, {} {}: {}",
            units::human(self.offered, "op/s"),
            units::human(self.achieved, "op/s"),
            bound.percentile_name(),
            units::human(self.latency_us, "us"),
            if self.pass { "pass".to_string() } else { format!("fail ({})", self.why) }
        )
    }
}

/// Why a search ended.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The first fail is within the resolution of the highest pass.
    Resolved,
    /// Every rate up to the suite's ceiling passed.
    Ceiling,
    /// The budget ran out first: the capacity is a lower bound.
    Budget,
    /// Every rate offered failed, down to `STEPS_DOWN` ramp steps below the start: no capacity.
    FailedAtStart,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The highest offered rate that passed.
    pub capacity: Option<f64>,
    /// The step that passed at that rate.
    pub at: Option<Step>,
    pub stop: Stop,
    /// When the load, not the environment, set the limit: what says so.
    pub client_limit: Option<String>,
}

impl Outcome {
    /// What a reader must know about how the search ended, when it is not a plain answer.
    pub fn note(&self, plan: &Plan, steps: usize) -> Option<String> {
        let at = self.capacity.map_or("—".into(), |c| units::human(c, "op/s"));
        match self.stop {
            Stop::Resolved => None,
            Stop::Ceiling => Some(format!(
                "capacity: every rate up to the ceiling ({}) kept {}: the capacity is at least {at}",
                units::human(plan.max.unwrap_or_default(), "op/s"),
                plan.bound.text()
            )),
            Stop::Budget => Some(format!(
                "capacity: the search's budget ({}) ran out after {steps} steps, before the {}% resolution: the capacity is at least {at}",
                seconds(plan.budget),
                trim_float(plan.resolution * 100.0)
            )),
            Stop::FailedAtStart => None,
        }
    }
}

/// A search in progress: ask `next_rate`, run a step at it, `record` the step, until
/// `next_rate` says there is nothing more to offer; then `outcome`.
pub struct Search {
    plan: Plan,
    /// Cores the load generator may use: near them, the client is the limit.
    client_cores: f64,
    /// Operations the load keeps in flight at most, where it has such a limit.
    in_flight: Option<u32>,
    steps: Vec<Step>,
    /// When the first rate was asked for: the budget counts from there, not from the set-up
    /// (connecting, a warm-up) before it.
    started: std::cell::Cell<Option<Instant>>,
}

impl Search {
    pub fn new(plan: Plan, client_cores: f64, in_flight: Option<u32>) -> Search {
        Search { plan, client_cores, in_flight, steps: Vec::new(), started: Default::default() }
    }

    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    pub fn into_steps(self) -> Vec<Step> {
        self.steps
    }

    /// The steps that judge the environment: from the first that passed on. A rate that failed
    /// before anything passed was offered to a node still settling (a fresh JVM's first half
    /// minute under gVisor fails any rate here), so the ramp offers it again rather than stop
    /// at it; with nothing passed yet, every step counts.
    fn counted(&self) -> &[Step] {
        let first_pass = self.steps.iter().position(|s| s.pass).unwrap_or(0);
        &self.steps[first_pass..]
    }

    /// The highest rate that passed and the lowest that failed above it: a rate passed when one of
    /// its steps did, and failed when all of its `1 + retries` steps did.
    fn bracket(&self) -> (Option<f64>, Option<f64>) {
        let pass = self.counted().iter().filter(|s| s.pass).map(|s| s.offered).fold(None, max);
        let fail = self
            .counted()
            .iter()
            .filter(|s| pass.is_none_or(|p| s.offered > p) && self.failed(s.offered))
            .map(|s| s.offered);
        (pass, fail.fold(None, |a: Option<f64>, b| Some(a.map_or(b, |a| a.min(b)))))
    }

    fn failed(&self, rate: f64) -> bool {
        let at = || self.counted().iter().filter(|s| s.offered == rate);
        !at().any(|s| s.pass) && at().count() > self.plan.retries as usize
    }

    /// The rate of the last step when it failed but has retries left.
    fn to_retry(&self) -> Option<f64> {
        let last = self.steps.last().filter(|s| !s.pass)?;
        (!self.failed(last.offered)).then_some(last.offered)
    }

    fn resolved(&self) -> bool {
        matches!(self.bracket(), (Some(pass), Some(fail)) if fail <= pass * (1.0 + self.plan.resolution))
    }

    /// Whether one more step would end past the budget.
    fn out_of_time(&self) -> bool {
        let started = self.started.get().unwrap_or_else(Instant::now);
        started.elapsed() + self.plan.step_time() > self.plan.budget
    }

    /// The next rate to offer, or None when the search is over.
    pub fn next_rate(&self) -> Option<f64> {
        if self.started.get().is_none() {
            self.started.set(Some(Instant::now()));
        }
        if self.steps.is_empty() {
            return Some(self.plan.start.round().max(1.0));
        }
        if self.resolved() || self.out_of_time() {
            return None;
        }
        if let Some(again) = self.to_retry() {
            return Some(again);
        }
        let next = match self.bracket() {
            // Every rate so far failed: the start was above the capacity; step down a little.
            (None, Some(fail)) if fail > self.floor() => (fail / self.plan.growth).round().max(1.0),
            (None, _) => return None,
            (Some(pass), None) => {
                let grown = (pass * self.plan.growth).round();
                match self.plan.max {
                    Some(max) if pass >= max => return None,
                    Some(max) => grown.min(max),
                    None => grown,
                }
            }
            (Some(pass), Some(fail)) => (pass * fail).sqrt().round(),
        };
        // Whole operations per second: a bracket too narrow to split is as resolved as it gets.
        let (pass, fail) = self.bracket();
        (pass.is_none_or(|p| next > p) && fail.is_none_or(|f| next < f)).then_some(next)
    }

    /// The lowest rate offered when the start fails: `STEPS_DOWN` ramp steps below it.
    fn floor(&self) -> f64 {
        (self.plan.start / self.plan.growth.powi(STEPS_DOWN)).round().max(1.0)
    }

    /// Records a step that ran at the rate `next_rate` gave, judging it against the bound.
    pub fn record(&mut self, mut step: Step) -> &Step {
        step.judge(&self.plan.bound);
        self.steps.push(step);
        self.steps.last().expect("just pushed")
    }

    pub fn outcome(&self) -> Outcome {
        let (pass, fail) = self.bracket();
        let at = pass.and_then(|p| self.steps.iter().find(|s| s.pass && s.offered == p)).cloned();
        let stop = match (pass, fail) {
            (None, _) => Stop::FailedAtStart,
            _ if self.resolved() => Stop::Resolved,
            (Some(p), None) if self.plan.max.is_some_and(|m| p >= m) => Stop::Ceiling,
            (Some(_), _) if self.out_of_time() => Stop::Budget,
            _ => Stop::Resolved,
        };
        let first_fail = fail.and_then(|f| self.counted().iter().find(|s| !s.pass && s.offered == f));
        Outcome { capacity: pass, at, stop, client_limit: first_fail.and_then(|s| self.client_limit(s)) }
    }

    /// Whether the step that failed first failed for want of client: its CPU near the cores it
    /// may use, or a rate it could not issue while the server answered within the bound.
    fn client_limit(&self, step: &Step) -> Option<String> {
        let bound = &self.plan.bound;
        if let Some(cpu) = step.client_cpu.filter(|c| *c >= CLIENT_CPU_SHARE * self.client_cores) {
            return Some(format!(
                "the load generator used {:.2} of the {} cores it may use at {}: the client, not the environment, set the limit",
                cpu,
                trim_float(self.client_cores),
                units::human(step.offered, "op/s")
            ));
        }
        let served_within = step.service_us <= bound.latency_us;
        if step.achieved >= MIN_ACHIEVED * step.offered || step.errors > 0 || !served_within {
            return None;
        }
        let short = format!(
            "at {} offered the load completed {} while the environment answered within {} ({} {})",
            units::human(step.offered, "op/s"),
            units::human(step.achieved, "op/s"),
            bound.text(),
            bound.percentile_name(),
            units::human(step.service_us, "us"),
        );
        // Little's law: what the operations the load keeps in flight allow at this service time.
        let allowed = self
            .in_flight
            .filter(|_| step.service_mean_us > 0.0)
            .map(|n| (n, f64::from(n) / step.service_mean_us * 1e6));
        match allowed {
            Some((n, most)) if most < step.offered => Some(format!(
                "{short}: {n} operations in flight at a mean service time of {} allow at most {}, so the load's concurrency, not the latency bound, set the limit",
                units::human(step.service_mean_us, "us"),
                units::human(most, "op/s")
            )),
            // A server answering well within the bound that still fell behind: the client did.
            _ if step.service_us <= bound.latency_us / 2.0 => {
                Some(format!("{short}: the client fell behind the schedule, not the environment"))
            }
            _ => None,
        }
    }
}

fn max(a: Option<f64>, b: f64) -> Option<f64> {
    Some(a.map_or(b, |a| a.max(b)))
}

/// What a search that failed at every rate it offered saw at the lowest, as an error.
pub fn failed_at_start(plan: &Plan, steps: &[Step]) -> String {
    match steps.iter().min_by(|a, b| a.offered.total_cmp(&b.offered)) {
        Some(s) => {
            let percentile = plan.bound.percentile_name();
            let saw = if s.why.contains(&percentile) {
                String::new()
            } else {
                format!("; {percentile} was {}", units::human(s.latency_us, "us"))
            };
            format!(
                "the capacity search failed at every rate down to {} ({}{saw}): lower capacity.start or loosen the bound",
                units::human(s.offered, "op/s"),
                s.why
            )
        }
        None => "the capacity search ran no step".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(start: f64) -> Plan {
        Plan {
            bound: Bound { percentile: 99.0, latency_us: 10_000.0 },
            start,
            growth: 2.0,
            resolution: 0.05,
            warmup: Duration::ZERO,
            window: Duration::ZERO,
            budget: Duration::from_secs(3600),
            max: None,
            retries: 0,
        }
    }

    /// A server of known capacity: latency grows as an M/M/1 queue's does towards `capacity`,
    /// and past it the backlog grows without bound (the latency of a long step).
    fn simulated(capacity: f64, rate: f64) -> Step {
        let service_us = 1e6 / capacity;
        let (achieved, latency_us) =
            if rate < capacity { (rate, service_us / (1.0 - rate / capacity) * 4.6) } else { (capacity, 1e7) };
        Step {
            offered: rate,
            achieved,
            latency_us,
            p50_us: latency_us / 4.6,
            p99_us: latency_us,
            p999_us: latency_us * 1.5,
            service_us: latency_us.min(1e5),
            service_mean_us: service_us,
            ..Step::default()
        }
    }

    fn run(search: &mut Search, mut step: impl FnMut(f64) -> Step) {
        while let Some(rate) = search.next_rate() {
            search.record(step(rate));
        }
    }

    #[test]
    fn the_search_finds_a_known_capacity_within_its_resolution_in_the_expected_steps() {
        // p99 = 4.6 × service / (1 − ρ) ≤ 10 ms at service 200 µs: ρ ≤ 0.908, i.e. 4540 op/s.
        let true_capacity = 5000.0 * (1.0 - 4.6 * 200.0 / 10_000.0);
        let mut search = Search::new(plan(100.0), 2.0, None);
        run(&mut search, |rate| simulated(5000.0, rate));
        let outcome = search.outcome();
        let found = outcome.capacity.unwrap();
        assert_eq!(outcome.stop, Stop::Resolved);
        assert!(found <= true_capacity && found >= true_capacity / 1.05, "found {found}, true {true_capacity}");
        // Ramp: 100, 200 … 3200 pass, 6400 fails (7 steps); bisection of [3200, 6400] to 5 %:
        // log2(ln 2 / ln 1.05) ≈ 3.8, so 4 more.
        let ramp = search.steps().iter().take_while(|s| s.pass).count() + 1;
        assert_eq!(ramp, 7, "{:?}", search.steps().iter().map(|s| s.offered).collect::<Vec<_>>());
        assert_eq!(search.steps().len() - ramp, 4);
        assert!(outcome.client_limit.is_none());
        let at = outcome.at.unwrap();
        assert!(at.pass && at.offered == found && at.latency_us <= 10_000.0);
    }

    #[test]
    fn a_failed_rate_is_offered_again_before_it_counts_so_one_stalled_window_does_not_halve_the_capacity() {
        let retrying = Plan { retries: 1, ..plan(1000.0) };
        // The third step stalls once; offered again, it passes.
        let search = stalled_once_at_step_3(retrying.clone());
        let offered: Vec<f64> = search.steps().iter().map(|s| s.offered).collect();
        assert_eq!(offered[..5], [1000.0, 2000.0, 4000.0, 4000.0, 8000.0], "{offered:?}");
        let found = search.outcome().capacity.unwrap();
        assert!(found >= 4000.0, "the stall did not set the capacity: {found} ({offered:?})");
        // A rate that fails every time it is offered counts as failed after its retry.
        assert_eq!(offered[5], 8000.0, "{offered:?}");
        assert_eq!(offered.iter().filter(|r| **r == 8000.0).count(), 2, "{offered:?}");
        assert!(retrying.describe().contains("a failed rate offered 1 more time"), "{}", retrying.describe());

        // Without retries, the same stall halves it.
        assert!(stalled_once_at_step_3(plan(1000.0)).outcome().capacity.unwrap() < 4000.0);
    }

    #[test]
    fn rates_that_failed_while_a_fresh_node_settled_are_offered_again_once_one_passed() {
        // A node whose first three windows fail at any rate (a fresh JVM settling), then serves
        // up to its capacity: the search must not stop at the rates it offered while settling.
        let retrying = Plan { retries: 1, ..plan(2000.0) };
        let mut search = Search::new(retrying, 2.0, None);
        let mut n = 0;
        run(&mut search, |rate| {
            n += 1;
            let step = simulated(5000.0, rate);
            if n <= 3 { Step { latency_us: 60_000.0, ..step } } else { step }
        });
        let offered: Vec<f64> = search.steps().iter().map(|s| s.offered).collect();
        assert_eq!(offered[..5], [2000.0, 2000.0, 1000.0, 1000.0, 2000.0], "{offered:?}");
        let true_capacity = 5000.0 * (1.0 - 4.6 * 200.0 / 10_000.0);
        let found = search.outcome().capacity.unwrap();
        assert!(found <= true_capacity && found >= true_capacity / 1.05, "found {found} ({offered:?})");
    }

    /// A search against a server of capacity 5000 whose third step stalls once (a window holding a
    /// collector's pause).
    fn stalled_once_at_step_3(plan: Plan) -> Search {
        let mut search = Search::new(plan, 2.0, None);
        let mut n = 0;
        run(&mut search, |rate| {
            n += 1;
            let step = simulated(5000.0, rate);
            if n == 3 { Step { latency_us: 80_000.0, ..step } } else { step }
        });
        search
    }

    #[test]
    fn a_start_above_the_capacity_steps_down_and_a_search_failing_throughout_says_what_it_saw() {
        let mut search = Search::new(plan(8000.0), 2.0, None);
        run(&mut search, |rate| simulated(5000.0, rate));
        let offered: Vec<f64> = search.steps().iter().map(|s| s.offered).collect();
        assert_eq!(offered[..3], [8000.0, 4000.0, 8000.0], "one step down, the start again, then the bisection");
        assert!(offered[3] > 4000.0 && offered[3] < 8000.0, "{offered:?}");
        assert!(search.outcome().capacity.is_some_and(|c| c >= 4000.0));

        let mut search = Search::new(plan(8000.0), 2.0, None);
        run(&mut search, |rate| simulated(500.0, rate));
        let offered: Vec<f64> = search.steps().iter().map(|s| s.offered).collect();
        assert_eq!(offered, [8000.0, 4000.0, 2000.0], "at most {STEPS_DOWN} steps below the start");
        let outcome = search.outcome();
        assert_eq!((outcome.capacity, outcome.stop), (None, Stop::FailedAtStart));
        let e = failed_at_start(search.plan(), search.steps());
        assert!(
            e.contains("down to 2.00k op/s") && e.contains("p99 10.0 s > 10.0 ms") && e.contains("capacity.start"),
            "{e}"
        );
    }

    #[test]
    fn a_ceiling_and_a_budget_end_the_search_with_a_lower_bound() {
        let mut capped = plan(100.0);
        capped.max = Some(1000.0);
        let mut search = Search::new(capped.clone(), 2.0, None);
        run(&mut search, |rate| simulated(1e6, rate));
        let offered: Vec<f64> = search.steps().iter().map(|s| s.offered).collect();
        assert_eq!(offered, [100.0, 200.0, 400.0, 800.0, 1000.0]);
        let outcome = search.outcome();
        assert_eq!((outcome.capacity, outcome.stop.clone()), (Some(1000.0), Stop::Ceiling));
        assert!(outcome.note(&capped, 5).unwrap().contains("at least 1.00k op/s"));

        let mut short = plan(100.0);
        short.budget = Duration::from_millis(30);
        short.window = Duration::from_millis(10);
        let mut search = Search::new(short.clone(), 2.0, None);
        run(&mut search, |rate| {
            std::thread::sleep(Duration::from_millis(10));
            simulated(1e6, rate)
        });
        let outcome = search.outcome();
        assert_eq!(outcome.stop, Stop::Budget);
        assert!(search.steps().len() <= 3, "{}", search.steps().len());
        assert!(outcome.note(&short, search.steps().len()).unwrap().contains("budget"));
    }

    #[test]
    fn a_client_that_cannot_issue_the_rate_is_named_as_the_limit() {
        // Eight operations in flight at 2 ms each: at most 4000 op/s, whatever the server.
        let mut search = Search::new(plan(1000.0), 2.0, Some(8));
        run(&mut search, |rate| Step {
            offered: rate,
            achieved: rate.min(4000.0),
            latency_us: 2000.0,
            p99_us: 2000.0,
            service_us: 2000.0,
            service_mean_us: 2000.0,
            client_cpu: Some(0.3),
            ..Step::default()
        });
        let outcome = search.outcome();
        let why = outcome.client_limit.unwrap();
        assert!(why.contains("8 operations in flight") && why.contains("at most 4.00k op/s"), "{why}");
        assert!(why.contains("the load's concurrency, not the latency bound, set the limit"), "{why}");
        // A step passes at 95 % of its offered rate, so the capacity is within 4000 / 0.95.
        let found = outcome.capacity.unwrap();
        assert!((4000.0..=4000.0 / MIN_ACHIEVED).contains(&found), "{found}");

        let mut search = Search::new(plan(1000.0), 2.0, None);
        run(&mut search, |rate| Step { client_cpu: Some(1.9), ..simulated(3000.0, rate) });
        assert!(search.outcome().client_limit.unwrap().contains("used 1.90 of the 2 cores"));

        // A server near its bound that falls behind is the environment's limit, not the client's.
        let mut search = Search::new(plan(1000.0), 2.0, Some(128));
        run(&mut search, |rate| Step {
            offered: rate,
            achieved: rate.min(4000.0),
            latency_us: if rate > 4000.0 { 60_000.0 } else { 5000.0 },
            service_us: if rate > 4000.0 { 15_000.0 } else { 3000.0 },
            service_mean_us: 3700.0,
            ..Step::default()
        });
        assert_eq!(search.outcome().client_limit, None);
    }

    #[test]
    fn steps_are_judged_on_errors_rate_and_latency() {
        let bound = Bound { percentile: 99.9, latency_us: 20_000.0 };
        assert_eq!(bound.text(), "p99.9 ≤ 20 ms");
        let mut s = Step { offered: 1000.0, achieved: 900.0, latency_us: 25_000.0, errors: 2, ..Step::default() };
        s.judge(&bound);
        assert!(!s.pass);
        assert_eq!(s.why, "2 errors, achieved 900 op/s of 1.00k op/s offered, p99.9 25.0 ms > 20.0 ms");
        let mut ok = Step { offered: 1000.0, achieved: 960.0, latency_us: 19_000.0, ..Step::default() };
        ok.judge(&bound);
        assert!(ok.pass && ok.why.is_empty());
        assert!(ok.line(&bound).ends_with(": pass"), "{}", ok.line(&bound));
        let mut nan = Step { latency_us: f64::NAN, ..ok };
        nan.judge(&bound);
        assert!(!nan.pass, "a latency that was not measured is no pass");
        let json = serde_json::to_string(&nan).unwrap();
        assert!(json.contains("\"latency_us\":null"), "{json}");
        let back: Step = serde_json::from_str(&json).unwrap();
        assert!(back.latency_us.is_nan() && back.p99_us == nan.p99_us);
    }
}
