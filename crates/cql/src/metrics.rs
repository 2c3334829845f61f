//! What cassandra-stress measures per interval and per run: three HDR histograms per operation
//! type (service time from start to end; response time from the intended start, which counts
//! the time an operation waited behind a stall; wait time between the two), partition, row and
//! error counts, and the uncertainty of the row rate that `err<` runs stop on.

use std::collections::BTreeMap;
use std::sync::Mutex;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Nanoseconds since the run's epoch.
pub type Nanos = u64;

fn histogram() -> Histogram<u64> {
    Histogram::new(3).expect("3 significant digits is valid")
}

/// Records `value`, growing the histogram as needed (saturating_record would clamp instead).
fn record(h: &mut Histogram<u64>, value: u64) {
    if h.record(value).is_err() {
        h.saturating_record(value);
    }
}

/// One operation's timing and result.
#[derive(Clone, Copy, Debug)]
pub struct Measurement {
    /// When the rate schedule meant it to start (None without `fixed=`/`throttle=`).
    pub intended: Option<Nanos>,
    pub started: Nanos,
    pub ended: Nanos,
    pub partitions: u64,
    pub rows: u64,
    pub error: bool,
}

/// Measurements over a span of time: cassandra-stress's TimingInterval.
#[derive(Clone, Debug)]
pub struct Interval {
    pub response: Histogram<u64>,
    pub service: Histogram<u64>,
    pub wait: Histogram<u64>,
    pub start: Nanos,
    pub end: Nanos,
    pub partitions: u64,
    pub rows: u64,
    pub errors: u64,
    /// `fixed=`: latency is response time (from the intended start) when there is any.
    pub fixed: bool,
}

impl Interval {
    pub fn new(fixed: bool) -> Interval {
        Interval {
            response: histogram(),
            service: histogram(),
            wait: histogram(),
            start: Nanos::MAX,
            end: 0,
            partitions: 0,
            rows: 0,
            errors: 0,
            fixed,
        }
    }

    pub fn record(&mut self, m: &Measurement) {
        self.partitions += m.partitions;
        self.rows += m.rows;
        self.errors += m.error as u64;
        if let Some(intended) = m.intended {
            record(&mut self.response, m.ended.saturating_sub(intended));
            record(&mut self.wait, m.started.saturating_sub(intended));
        }
        record(&mut self.service, m.ended.saturating_sub(m.started));
    }

    pub fn add(&mut self, other: &Interval) {
        self.start = self.start.min(other.start);
        self.end = self.end.max(other.end);
        self.partitions += other.partitions;
        self.rows += other.rows;
        self.errors += other.errors;
        for (mine, theirs) in
            [(&mut self.response, &other.response), (&mut self.service, &other.service), (&mut self.wait, &other.wait)]
        {
            if !theirs.is_empty() {
                mine.add(theirs).expect("auto-resizing histograms accept any value");
            }
        }
    }

    pub fn reset(&mut self) {
        self.response.reset();
        self.service.reset();
        self.wait.reset();
        (self.start, self.end) = (Nanos::MAX, 0);
        (self.partitions, self.rows, self.errors) = (0, 0, 0);
    }

    /// The histogram cassandra-stress reports: response time under `fixed=`, service time
    /// otherwise (and when nothing was scheduled).
    pub fn latency(&self) -> &Histogram<u64> {
        if self.fixed && !self.response.is_empty() { &self.response } else { &self.service }
    }

    pub fn operations(&self) -> u64 {
        self.latency().len()
    }

    fn seconds(&self) -> f64 {
        self.end as f64 * 1e-9 - self.start as f64 * 1e-9
    }

    pub fn op_rate(&self) -> f64 {
        self.operations() as f64 / self.seconds()
    }

    pub fn partition_rate(&self) -> f64 {
        self.partitions as f64 / self.seconds()
    }

    pub fn row_rate(&self) -> f64 {
        self.rows as f64 / self.seconds()
    }

    /// The row rate over the interval less its longest operation: what the `err<` stop uses.
    pub fn adjusted_row_rate(&self) -> f64 {
        self.rows as f64 / ((self.end as f64 - (self.start as f64 + self.latency().max() as f64)) * 1e-9)
    }

    pub fn mean_ms(&self) -> f64 {
        self.latency().mean() * 1e-6
    }

    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        self.latency().value_at_percentile(percentile) as f64 * 1e-6
    }

    pub fn max_ms(&self) -> f64 {
        self.latency().max() as f64 * 1e-6
    }

    pub fn run_time_ms(&self) -> u64 {
        self.end.saturating_sub(self.start) / 1_000_000
    }
}

/// The figures of an interval or a run, as printed and as graphed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Seconds since the run started (the end of the interval; the whole run for a summary).
    pub time: f64,
    pub op_rate: f64,
    pub partition_rate: f64,
    pub row_rate: f64,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub operations: u64,
    pub partitions: u64,
    pub errors: u64,
}

impl Figures {
    pub fn of(interval: &Interval, time: f64) -> Figures {
        // JSON has no NaN: an empty interval's latencies are zero, its rates too.
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        Figures {
            time,
            op_rate: finite(interval.op_rate()),
            partition_rate: finite(interval.partition_rate()),
            row_rate: finite(interval.row_rate()),
            mean_ms: finite(interval.mean_ms()),
            median_ms: interval.percentile_ms(50.0),
            p95_ms: interval.percentile_ms(95.0),
            p99_ms: interval.percentile_ms(99.0),
            p999_ms: interval.percentile_ms(99.9),
            max_ms: interval.max_ms(),
            operations: interval.operations(),
            partitions: interval.partitions,
            errors: interval.errors,
        }
    }
}

/// Per-operation-type intervals, ordered by name as cassandra-stress prints them.
pub type ByOp = BTreeMap<&'static str, Interval>;

/// Where workers record: a few shards so that hundreds of tasks on a handful of threads rarely
/// contend, and the reporter merges a handful of histograms per interval, not one per task.
pub struct Recorder {
    shards: Vec<Mutex<ByOp>>,
    fixed: bool,
}

impl Recorder {
    pub fn new(shards: usize, fixed: bool) -> Recorder {
        Recorder { shards: (0..shards.max(1)).map(|_| Mutex::new(ByOp::new())).collect(), fixed }
    }

    pub fn record(&self, shard: usize, op: &'static str, m: &Measurement) {
        let mut by_op = self.shards[shard % self.shards.len()].lock().unwrap_or_else(|e| e.into_inner());
        by_op.entry(op).or_insert_with(|| Interval::new(self.fixed)).record(m);
    }

    /// Takes what each shard recorded so far, leaving in its place one of `spares` (emptied
    /// maps whose histograms keep their memory) or a new map: a swap under each lock, so that
    /// the load's tasks never wait for the merge.
    pub fn take(&self, spares: &mut Vec<ByOp>) -> Vec<ByOp> {
        self.shards
            .iter()
            .map(|shard| {
                let spare = spares.pop().unwrap_or_default();
                std::mem::replace(&mut *shard.lock().unwrap_or_else(|e| e.into_inner()), spare)
            })
            .collect()
    }
}

/// Adds the operations in `taken` (shards' maps) to `into` and empties them for reuse.
pub fn merge_and_empty(taken: &mut [ByOp], into: &mut ByOp, fixed: bool) {
    for by_op in taken {
        for (op, interval) in by_op.iter_mut() {
            if interval.service.is_empty() && interval.errors == 0 {
                continue;
            }
            into.entry(op).or_insert_with(|| Interval::new(fixed)).add(interval);
            interval.reset();
        }
    }
}

/// The relative standard error of a series of measurements (cassandra-stress's Uncertainty:
/// population standard deviation over √n, over the mean).
#[derive(Clone, Debug, Default)]
pub struct Uncertainty {
    n: u32,
    sum: f64,
    sum_squares: f64,
    value: f64,
}

impl Uncertainty {
    /// `err<target`'s end: below `target` after at least `min` measurements, or `max` of them.
    pub fn reached(&self, target: f64, min: u32, max: u32) -> bool {
        (self.value() < target && self.measurements() >= min) || self.measurements() >= max
    }

    pub fn update(&mut self, x: f64) {
        self.n += 1;
        self.sum += x;
        self.sum_squares += x * x;
        let mean = self.sum / self.n as f64;
        let stdev = (self.sum_squares / self.n as f64 - mean * mean).sqrt();
        self.value = stdev / (self.n as f64).sqrt() / mean;
    }

    pub fn value(&self) -> f64 {
        self.value
    }

    pub fn measurements(&self) -> u32 {
        self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(intended: Option<Nanos>, started: Nanos, ended: Nanos) -> Measurement {
        Measurement { intended, started, ended, partitions: 1, rows: 1, error: false }
    }

    #[test]
    fn fixed_rate_reports_response_time_and_others_service_time() {
        let mut fixed = Interval::new(true);
        fixed.record(&op(Some(0), 400_000_000, 401_000_000));
        assert!((fixed.max_ms() - 401.0).abs() < 0.5, "from the intended start: {}", fixed.max_ms());
        let mut throttled = Interval::new(false);
        throttled.record(&op(Some(0), 400_000_000, 401_000_000));
        assert!((throttled.max_ms() - 1.0).abs() < 0.01, "service time: {}", throttled.max_ms());
        assert_eq!(throttled.response.len(), 1, "the response series is kept for the HDR log");
    }

    #[test]
    fn rates_divide_by_the_interval() {
        let r = Recorder::new(2, false);
        for i in 0..10 {
            r.record(i, "WRITE", &op(None, i as u64, i as u64 + 1000));
        }
        let (mut by_op, mut spares) = (ByOp::new(), Vec::new());
        let mut taken = r.take(&mut spares);
        merge_and_empty(&mut taken, &mut by_op, false);
        let w = by_op.get_mut("WRITE").unwrap();
        (w.start, w.end) = (0, 2_000_000_000);
        assert_eq!((w.operations(), w.op_rate(), w.row_rate()), (10, 5.0, 5.0));
        let mut again = ByOp::new();
        merge_and_empty(&mut r.take(&mut taken), &mut again, false);
        assert!(again.is_empty(), "the shards start again empty, reusing the maps taken before");
        assert!(taken.is_empty(), "every spare went back into a shard");
    }

    #[test]
    fn uncertainty_is_the_relative_standard_error() {
        let mut u = Uncertainty::default();
        for x in [10.0, 12.0, 8.0, 10.0] {
            u.update(x);
        }
        // mean 10, population stdev √2, n 4: √2 / 2 / 10
        assert!((u.value() - 2f64.sqrt() / 2.0 / 10.0).abs() < 1e-12);
    }
}
