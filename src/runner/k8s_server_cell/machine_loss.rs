//! What a lost machine did to the load: the loaders' rate and errors each second of the
//! measured phase (from their own interval tables), and whether every second the machine was
//! down still had operations at the workload's consistency.

use std::collections::BTreeMap;
use std::time::Duration;

use super::fault::MachineLoss;
use crate::cql::output::total_rows;
use crate::store::{AgentReport, Sample};

/// Records the machine, when the API server saw it gone, and the load around its loss.
pub(super) fn record(report: &mut AgentReport, at: Duration, machine: &MachineLoss) {
    let setup = &mut report.setup;
    setup.insert("fault.machine".into(), machine.name.clone());
    setup.insert("fault.not_ready_s".into(), format!("{:.1}", machine.not_ready.as_secs_f64()));
    setup.insert("fault.down_s".into(), format!("{:.1}", machine.down.as_secs_f64()));
    let seconds =
        per_second(report.raw.iter().filter(|r| r.name.starts_with("run-loader-")).map(|r| r.content.as_str()));
    if seconds.is_empty() {
        report.notes.push("fault: the loaders printed no interval rows: the load around the loss is not known".into());
        return;
    }
    let (from, to) = (at.as_secs_f64(), (at + machine.down).as_secs_f64());
    let listed: Vec<String> = seconds.iter().map(|(s, (rate, errors))| format!("{s}: {rate:.0} ({errors})")).collect();
    setup.insert(
        "fault.per_second".into(),
        format!(
            "op/s (errors) each second of the measured phase, the machine down from {from:.1} s to {to:.1} s: {}",
            listed.join(" · ")
        ),
    );
    // Whole seconds inside the loss (second s ends s seconds in); the last one the loaders
    // printed bounds them: a second after the load's end is not the ring's. A second without a
    // row is one in which no loader closed an interval: every thread waited on a request.
    let last = seconds.keys().next_back().copied().unwrap_or(0);
    let down: Vec<(f64, u64)> = ((from.ceil() as i64 + 1)..=(to.floor() as i64).min(last))
        .map(|s| seconds.get(&s).copied().unwrap_or_default())
        .collect();
    let silent = down.iter().filter(|(rate, _)| *rate == 0.0).count();
    let errors: u64 = down.iter().map(|(_, e)| e).sum();
    report.samples.push(Sample::new("fault_errors_down", errors as f64, "errors"));
    let kept = match (down.len(), silent) {
        (0, _) => "unknown: the load ended before a whole second of the loss".to_string(),
        (n, 0) => format!("yes: each of the {n} whole seconds the machine was down had operations ({errors} errors)"),
        (n, k) => format!(
            "no: {k} of the {n} whole seconds the machine was down had no operation (a second without an interval row counts as none; {errors} errors)"
        ),
    };
    setup.insert("fault.kept_serving".into(), kept);
}

/// The loaders' rows summed by the second they ended in (the second from the start of each
/// loader's measured phase): the rate, and the errors.
fn per_second<'a>(outputs: impl Iterator<Item = &'a str>) -> BTreeMap<i64, (f64, u64)> {
    let mut seconds: BTreeMap<i64, (f64, u64)> = BTreeMap::new();
    for output in outputs {
        for row in total_rows(output) {
            let second = seconds.entry(row.time.round() as i64).or_default();
            second.0 += if row.op_rate.is_finite() { row.op_rate } else { 0.0 };
            second.1 += row.errors;
        }
    }
    seconds
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(time: f64, rate: f64, errors: u64) -> String {
        format!(
            "total,          1234,{rate:>8},     500,     500,     1.0,     0.9,     2.0,     3.0,     4.0,     5.0,{time:>7.1},  0.01234,{errors:>7},      0,       0,       0,       0,       0"
        )
    }

    #[test]
    fn the_seconds_of_a_loss_are_judged_from_every_loaders_rows() {
        let one: String =
            [row(1.0, 100.0, 0), row(2.0, 100.0, 0), row(3.0, 0.0, 4), row(4.0, 50.0, 1), row(5.0, 90.0, 0)].join("\n");
        let two: String = [row(1.0, 100.0, 0), row(2.0, 100.0, 0), row(3.0, 10.0, 2), row(4.0, 60.0, 0)].join("\n");
        let seconds = per_second([one.as_str(), two.as_str()].into_iter());
        assert_eq!(seconds[&3], (10.0, 6));
        assert_eq!(seconds[&5], (90.0, 0));
        let loss =
            MachineLoss { name: "node-2".into(), not_ready: Duration::from_secs(1), down: Duration::from_secs(2) };
        let mut report = AgentReport::default();
        report.raw.push(crate::store::RawFile { name: "run-loader-1.log".into(), content: one });
        report.raw.push(crate::store::RawFile { name: "run-loader-2.log".into(), content: two });
        record(&mut report, Duration::from_millis(1500), &loss);
        let kept = &report.setup["fault.kept_serving"];
        assert!(kept.starts_with("yes: each of the 1 whole seconds") && kept.contains("(6 errors)"), "{kept}");
        assert!(report.setup["fault.per_second"].contains("3: 10 (6)"), "{:?}", report.setup);
        assert_eq!(report.setup["fault.not_ready_s"], "1.0");
        // Seconds 3 and 4 inside a loss from 2 s to 4.5 s: 4 has its rows, 3 none at all.
        let mut stalled = AgentReport::default();
        let rows: String = [row(1.0, 100.0, 0), row(2.0, 100.0, 0), row(4.0, 5.0, 0), row(6.0, 90.0, 0)].join("\n");
        stalled.raw.push(crate::store::RawFile { name: "run-loader-1.log".into(), content: rows });
        let loss = MachineLoss { down: Duration::from_millis(2500), ..loss };
        record(&mut stalled, Duration::from_secs(2), &loss);
        let kept = &stalled.setup["fault.kept_serving"];
        assert!(kept.starts_with("no: 1 of the 2 whole seconds"), "{kept}");
    }
}
