//! A run cut in slices: the agent stays up through its block and runs one slice of the workload
//! at each "go" on stdin, saying on stderr when each is done, so that the runner can alternate
//! its slices with those of the block's other environments. What the disk does over seconds is
//! then shared by a slice and its partner, and cancels in their ratio.

use std::collections::BTreeMap;
use std::io::BufRead;

use super::Request;
use crate::store::{AgentReport, RawFile, Sample, Series};

/// The line an agent prints on stderr when slice N of its run is done: "ISOBENCH-SLICE-DONE N".
pub const SLICE_DONE: &str = "ISOBENCH-SLICE-DONE";

/// Runs up to `count` slices of `request`'s workload, one at each "go" line, and reports them as
/// one run. Fewer slices than `count` (stdin closed early, a slice failed) fail the run.
pub fn run(request: &Request, count: u32, stdin: &mut dyn BufRead) -> AgentReport {
    let Some(sliced) = request.workload.sliced() else {
        return failed("this workload cannot be run in slices");
    };
    let slice_s = sliced.length.as_secs_f64();
    let one = Request { workload: sliced.slice, slices: 0, barrier: false, ..request.clone() };
    let (mut reports, mut times) = (Vec::new(), Vec::new());
    while reports.len() < count as usize {
        let mut go = String::new();
        if !matches!(stdin.read_line(&mut go), Ok(n) if n > 0) || go.trim() != "go" {
            break;
        }
        let began = unix_now();
        let report = super::execute_reporting_panics(&one);
        times.push((began, unix_now()));
        eprintln!("{SLICE_DONE} {}", reports.len() + 1);
        let stop = report.error.is_some();
        reports.push(report);
        if stop {
            break;
        }
    }
    let mut run = combine(reports, count, slice_s);
    // When each slice ran, on the host's clock (a container's is the host's; the runner's
    // sandboxes that take slices are all containers or the host): the alternation, as it ran.
    let series = |metric: &str, at: fn(&(f64, f64)) -> f64| Series {
        metric: metric.into(),
        unit: "s".into(),
        points: times.iter().enumerate().map(|(i, t)| ((i + 1) as f64, at(t))).collect(),
    };
    run.series.extend([series("slices.began", |t| t.0), series("slices.ended", |t| t.1)]);
    run
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

fn failed(why: &str) -> AgentReport {
    AgentReport { error: Some(why.into()), ..Default::default() }
}

/// The run's report from its slices': every rate and latency the geometric mean of the slices'
/// (so that a run's ratio to its partner's is the mean of their slices' log-ratios), every
/// total (bytes, operations, CPU seconds, counts) their sum; the series end to end; each rate
/// also as a series of its slices, for the noise between them.
fn combine(reports: Vec<AgentReport>, count: u32, slice_s: f64) -> AgentReport {
    let ran = reports.len();
    let mut slices = reports.into_iter();
    let Some(mut run) = slices.next() else {
        return failed("the run was called off before its first slice");
    };
    let mut figures: Vec<(Sample, Vec<f64>)> = run.samples.drain(..).map(|s| (s.clone(), vec![s.value])).collect();
    let mut series: BTreeMap<(String, String), Vec<(f64, f64)>> = BTreeMap::new();
    let mut add_series = |list: Vec<Series>, offset: f64| {
        for s in list {
            let points = s.points.into_iter().map(|(t, v)| (t + offset, v));
            series.entry((s.metric, s.unit)).or_default().extend(points);
        }
    };
    add_series(std::mem::take(&mut run.series), 0.0);
    run.raw = run.raw.drain(..).map(|r| slice_raw(r, 1)).collect();
    for (i, slice) in slices.enumerate() {
        for sample in slice.samples {
            match figures.iter_mut().find(|(f, _)| f.metric == sample.metric) {
                Some((_, values)) => values.push(sample.value),
                None => figures.push((sample.clone(), vec![sample.value])),
            }
        }
        add_series(slice.series, (i + 1) as f64 * slice_s);
        run.raw.extend(slice.raw.into_iter().map(|r| slice_raw(r, i + 2)));
        for note in slice.notes {
            if !run.notes.contains(&note) {
                run.notes.push(note);
            }
        }
        run.setup.extend(slice.setup);
        if run.error.is_none() {
            run.error = slice.error.map(|e| format!("slice {} of {count}: {e}", i + 2));
        }
    }
    for (sample, values) in &figures {
        if sample.unit == "op/s" {
            let points = values.iter().enumerate().map(|(i, v)| ((i + 1) as f64, *v)).collect();
            series.insert((format!("slices.{}", sample.metric), sample.unit.clone()), points);
        }
    }
    run.samples = figures.into_iter().map(|(s, values)| Sample { value: combined(&s.unit, &values), ..s }).collect();
    run.series = series.into_iter().map(|((metric, unit), points)| Series { metric, unit, points }).collect();
    if run.error.is_none() && ran < count as usize {
        run.error = Some(format!("only {ran} of its {count} slices ran: the block called the rest off"));
    }
    run
}

/// One figure of a run from its slices' values.
fn combined(unit: &str, values: &[f64]) -> f64 {
    let n = values.len() as f64;
    if matches!(unit, "B" | "ops" | "s" | "switches" | "faults") {
        return values.iter().sum();
    }
    if values.iter().all(|v| *v > 0.0) {
        (values.iter().map(|v| v.ln()).sum::<f64>() / n).exp()
    } else {
        values.iter().sum::<f64>() / n
    }
}

fn slice_raw(raw: RawFile, slice: usize) -> RawFile {
    RawFile { name: format!("slice-{slice}.{}", raw.name), ..raw }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(iops: f64, cpu: f64) -> AgentReport {
        AgentReport {
            samples: vec![Sample::new("iops", iops, "op/s"), Sample::new("sys.cpu_workload", cpu, "s")],
            series: vec![Series { metric: "iops".into(), unit: "op/s".into(), points: vec![(1.0, iops)] }],
            ..Default::default()
        }
    }

    #[test]
    fn rates_are_the_slices_geometric_mean_and_totals_their_sum() {
        let run = combine(vec![slice(100.0, 1.0), slice(400.0, 2.0)], 2, 1.0);
        assert!(run.error.is_none());
        let value = |m: &str| run.samples.iter().find(|s| s.metric == m).unwrap().value;
        assert!((value("iops") - 200.0).abs() < 1e-9, "sqrt(100 × 400)");
        assert_eq!(value("sys.cpu_workload"), 3.0);
        let series = |m: &str| run.series.iter().find(|s| s.metric == m).unwrap().points.clone();
        assert_eq!(series("iops"), vec![(1.0, 100.0), (2.0, 400.0)], "end to end");
        assert_eq!(series("slices.iops"), vec![(1.0, 100.0), (2.0, 400.0)]);
    }

    #[test]
    fn a_run_short_of_its_slices_fails_and_says_so() {
        let run = combine(vec![slice(100.0, 1.0)], 3, 1.0);
        assert_eq!(run.error.as_deref(), Some("only 1 of its 3 slices ran: the block called the rest off"));
        let mut broken = slice(100.0, 1.0);
        broken.error = Some("fio died".into());
        let run = combine(vec![slice(100.0, 1.0), broken], 3, 1.0);
        assert_eq!(run.error.as_deref(), Some("slice 2 of 3: fio died"));
        assert!(combine(Vec::new(), 3, 1.0).error.is_some());
    }
}
