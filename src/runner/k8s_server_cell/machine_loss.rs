//! What a lost machine did to the load, judged from the database's side: the loaders' rate and
//! errors each second of the measured phase (from their interval tables), and, from their
//! `client,` rows, who served in each second of the loss — the requests the surviving replicas
//! answered, the attempts the lost coordinator never answered, and what the client itself did
//! (its timeouts, retries, speculative executions, and when it stopped sending to that node).

use std::collections::BTreeMap;
use std::time::Duration;

use super::fault::MachineLoss;
use crate::store::{AgentReport, Sample};
use cql_stress::failover::{self, ClientRow};
use cql_stress::output::total_rows;

/// A second of the loss kept serving when its rate was at least this share of the rate before.
pub(super) const KEPT: f64 = 0.30;
/// The load is back when a second within `BACK_WITHIN` of the pod's Ready has this share.
pub(super) const BACK: f64 = 0.80;
pub(super) const BACK_WITHIN: f64 = 10.0;

/// A database pod's garbage collection in the measured phase: from when (seconds into the phase)
/// and for how long (seconds), as its node logged it.
pub(super) struct Pause {
    pub pod: String,
    pub from: f64,
    pub took: f64,
}

/// Records the machine, when the API server saw it gone, and the load around its loss; `lost`
/// is the address the struck pod had, `pauses` the database's garbage collections in the phase
/// (None where no pod's log could be read).
pub(super) fn record(
    report: &mut AgentReport,
    at: Duration,
    machine: &MachineLoss,
    lost: Option<&str>,
    pauses: Option<&[Pause]>,
) {
    let setup = &mut report.setup;
    setup.insert("fault.machine".into(), machine.name.clone());
    setup.insert("fault.not_ready_s".into(), format!("{:.1}", machine.not_ready.as_secs_f64()));
    setup.insert("fault.down_s".into(), format!("{:.1}", machine.down.as_secs_f64()));
    let loaders: Vec<&str> =
        report.raw.iter().filter(|r| r.name.starts_with("run-loader-")).map(|r| r.content.as_str()).collect();
    let seconds = per_second(loaders.iter().copied());
    if seconds.is_empty() {
        report.notes.push("fault: the loaders printed no interval rows: the load around the loss is not known".into());
        return;
    }
    let client = client_per_second(loaders.iter().copied());
    let ready = machine.ready.map(|r| r.as_secs_f64());
    let (from, to) = (at.as_secs_f64(), (at + machine.down).as_secs_f64());
    let listed: Vec<String> =
        seconds.iter().map(|(s, second)| format!("{s}: {:.0} ({})", second.rate, second.errors)).collect();
    let pod_ready = ready.map_or(String::new(), |r| format!(", its pod Ready again at {r:.1} s"));
    setup.insert(
        "fault.per_second".into(),
        format!(
            "op/s (errors) each second of the measured phase, the machine down from {from:.1} s to {to:.1} s{pod_ready}: {}",
            listed.join(" · ")
        ),
    );
    let listed: Option<Vec<String>> = pauses
        .map(|all| all.iter().map(|p| format!("{} {:.0} ms from {:.1} s", p.pod, p.took * 1e3, p.from)).collect());
    let said = match listed {
        None => "unknown: no database pod's log could be read (the notes say why)".to_string(),
        Some(listed) if listed.is_empty() => "none of 200 ms or more".into(),
        Some(listed) => listed.join(" · "),
    };
    setup.insert("fault.gc_pauses".into(), said);
    let pauses = pauses.unwrap_or_default();
    let judged = judge(&seconds, &client, (from, ready.unwrap_or(to)), ready, lost, pauses);
    report.samples.push(Sample::new("fault_errors_down", judged.errors as f64, "errors"));
    if let Some(share) = judged.lowest_share {
        report.samples.push(Sample::new("fault_lowest_share", share * 100.0, "%"));
    }
    setup.insert("fault.kept_serving".into(), judged.kept);
    setup.insert("fault.recovered".into(), judged.recovered);
    if let Some(who) = judged.who {
        setup.insert("fault.who_served".into(), who);
    }
}

/// The verdicts of [`judge`].
struct Judged {
    kept: String,
    recovered: String,
    who: Option<String>,
    errors: u64,
    lowest_share: Option<f64>,
}

/// Whole seconds inside the loss (second s ends s seconds in), from the stop until the pod is
/// Ready again (or the machine's start, where the load ended first); the last one the loaders
/// printed bounds them: a second after the load's end is not the ring's. A second without a row
/// is one in which no loader closed an interval: every thread waited on a request.
fn judge(
    seconds: &BTreeMap<i64, Second>,
    client: &BTreeMap<i64, ClientRow>,
    (from, to): (f64, f64),
    ready: Option<f64>,
    lost: Option<&str>,
    pauses: &[Pause],
) -> Judged {
    let last = seconds.keys().next_back().copied().unwrap_or(0);
    let before: Vec<f64> = seconds.range(2..=(from.floor() as i64)).map(|(_, second)| second.rate).collect();
    let rate_before = (!before.is_empty()).then(|| before.iter().sum::<f64>() / before.len() as f64);
    let loss: Vec<i64> = ((from.ceil() as i64 + 1)..=(to.floor() as i64).min(last)).collect();
    let second = |s: &i64| seconds.get(s).copied().unwrap_or_default();
    let errors: u64 = loss.iter().map(|s| second(s).errors).sum();
    let who = who_served(client, &loss, from, lost);
    let Some(before) = rate_before.filter(|r| *r > 0.0) else {
        let kept = "unknown: no whole second of load before the loss to set it against".to_string();
        return Judged { kept, recovered: "unknown".into(), who, errors, lowest_share: None };
    };
    let shares: Vec<(i64, f64)> = loss.iter().map(|s| (*s, second(s).rate / before)).collect();
    let lowest = shares.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    let short: Vec<i64> = shares.iter().filter(|(_, share)| *share < KEPT).map(|(s, _)| *s).collect();
    let n = loss.len();
    let kept = match (lowest, short.len()) {
        (None, _) => "unknown: the load ended before a whole second of the loss".to_string(),
        (Some((s, share)), 0) => format!(
            "yes: each of the {n} whole seconds of the loss served at least {:.0}% of the {before:.0} op/s before it (the lowest {:.0}%, second {s}; {errors} errors)",
            KEPT * 100.0,
            share * 100.0
        ),
        (Some(_), k) => format!(
            "no: {k} of the {n} whole seconds of the loss served less than {:.0}% of the {before:.0} op/s before it (seconds {}; a second without an interval row counts as none; {errors} errors). {}",
            KEPT * 100.0,
            short.iter().map(i64::to_string).collect::<Vec<_>>().join(", "),
            short
                .iter()
                .take(3)
                .map(|s| in_second(*s, second(s), client.get(s), lost, pauses))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    };
    let recovered = match ready {
        None => "unknown: the pod was not Ready again before the load ended".to_string(),
        Some(r) => {
            let within = (r.ceil() as i64 + 1)..=((r + BACK_WITHIN).floor() as i64);
            let back = within.clone().find(|s| second(s).rate / before >= BACK);
            match back {
                Some(s) => format!(
                    "yes: second {s}, {:.1} s after the pod was Ready, served {:.0}% of the rate before the loss",
                    s as f64 - r,
                    second(&s).rate / before * 100.0
                ),
                None if *within.end() > last => {
                    format!("unknown: the load ended within {BACK_WITHIN:.0} s of the pod's Ready")
                }
                None => format!(
                    "no: no second within {BACK_WITHIN:.0} s of the pod's Ready served {:.0}% of the rate before the loss",
                    BACK * 100.0
                ),
            }
        }
    };
    Judged { kept, recovered, who, errors, lowest_share: lowest.map(|(_, share)| share) }
}

/// What the client saw in one second: its requests' latency, each node's attempts started and
/// answered, and the database's garbage collections in it, so that a short second says whether
/// the requests waited on the lost node or on the survivors, and why.
fn in_second(s: i64, second: Second, client: Option<&ClientRow>, lost: Option<&str>, pauses: &[Pause]) -> String {
    // Second s is the interval that ended s seconds in.
    let within = pauses.iter().filter(|p| p.from < s as f64 && p.from + p.took > (s - 1) as f64);
    let collected: Vec<String> = within
        .map(|p| format!("{} collected garbage for {:.0} ms from {:.1} s", p.pod, p.took * 1e3, p.from))
        .collect();
    let collected = if collected.is_empty() { String::new() } else { format!(" {}.", collected.join(", ")) };
    if second.rate == 0.0 {
        return format!("Second {s}: no request ended.{collected}");
    }
    let latency = format!(
        "Second {s}: {:.0} op/s, its requests took {:.0} ms on average, the slowest {:.0} ms",
        second.rate, second.mean_ms, second.max_ms
    );
    let Some(client) = client else { return format!("{latency}.{collected}") };
    let nodes: Vec<String> = client
        .nodes
        .iter()
        .map(|n| {
            let which = if is_lost(lost, &n.node) { " (the lost one)" } else { "" };
            format!("{}{which} {}/{}", n.node, n.started, n.answered)
        })
        .collect();
    format!(
        "{latency}; attempts started/answered: {}; {} speculative executions, {} retries.{collected}",
        nodes.join(", "),
        client.speculative,
        client.retries
    )
}

/// Whether `node` (address:port) is the lost pod's address.
fn is_lost(lost: Option<&str>, node: &str) -> bool {
    lost.is_some_and(|ip| node.strip_prefix(ip).is_some_and(|p| p.starts_with(':')))
}

/// Who served the loss's seconds, from the client's rows: the surviving replicas' answers, the
/// lost coordinator's unanswered and failed attempts, and the client's own timeouts, retries,
/// speculative executions and the second it stopped sending to the lost node.
fn who_served(client: &BTreeMap<i64, ClientRow>, loss: &[i64], from: f64, lost: Option<&str>) -> Option<String> {
    let rows: Vec<&ClientRow> = loss.iter().filter_map(|s| client.get(s)).collect();
    if rows.is_empty() {
        return None;
    }
    let is_lost = |node: &str| is_lost(lost, node);
    let (mut survivors, mut unanswered, mut failed) = (0, 0, 0);
    for row in &rows {
        for n in &row.nodes {
            if is_lost(&n.node) {
                unanswered += n.started.saturating_sub(n.answered + n.failed);
                failed += n.failed;
            } else {
                survivors += n.answered;
            }
        }
    }
    let sum = |f: fn(&ClientRow) -> u64| rows.iter().map(|r| f(r)).sum::<u64>();
    let (timeouts, retries, speculative) = (sum(|r| r.timeouts), sum(|r| r.retries), sum(|r| r.speculative));
    // Where the loss began: from the stop's own second (the first whole one may be late).
    let noticed = client
        .range((from.floor() as i64)..)
        .find(|(_, r)| r.nodes.iter().any(|n| n.unconnected && is_lost(&n.node)))
        .map(|(s, _)| *s as f64 - from);
    let noticed = match noticed {
        Some(after) => format!("stopped sending to it {after:.0} s after the stop (its connections closed)"),
        None => "kept its connections to it open throughout".to_string(),
    };
    let lost = lost.unwrap_or("unknown");
    Some(format!(
        "in the {} whole seconds of the loss: the surviving replicas answered {survivors} requests; the lost coordinator ({lost}) left {unanswered} attempts unanswered and {failed} failed; the client timed out {timeouts} requests, retried {retries}, sent {speculative} speculative executions, and {noticed}",
        rows.len()
    ))
}

/// One second of the loaders' rows summed: the rate, the errors, and the requests' latency
/// (the mean weighed by each loader's rate, and the slowest).
#[derive(Clone, Copy, Debug, Default)]
struct Second {
    rate: f64,
    errors: u64,
    mean_ms: f64,
    max_ms: f64,
}

/// The loaders' rows summed by the second they ended in (the second from the start of each
/// loader's measured phase).
fn per_second<'a>(outputs: impl Iterator<Item = &'a str>) -> BTreeMap<i64, Second> {
    let mut seconds: BTreeMap<i64, Second> = BTreeMap::new();
    for output in outputs {
        for row in total_rows(output) {
            let second = seconds.entry(row.time.round() as i64).or_default();
            let rate = if row.op_rate.is_finite() { row.op_rate } else { 0.0 };
            if rate > 0.0 && row.mean_ms.is_finite() {
                second.mean_ms = (second.mean_ms * second.rate + row.mean_ms * rate) / (second.rate + rate);
            }
            second.rate += rate;
            second.errors += row.errors;
            second.max_ms = second.max_ms.max(if row.max_ms.is_finite() { row.max_ms } else { 0.0 });
        }
    }
    seconds
}

/// The loaders' `client,` rows summed by second, node by node.
fn client_per_second<'a>(outputs: impl Iterator<Item = &'a str>) -> BTreeMap<i64, ClientRow> {
    let mut seconds: BTreeMap<i64, ClientRow> = BTreeMap::new();
    for output in outputs {
        for row in failover::rows(output) {
            let second = row.time.round() as i64;
            let sum = seconds.entry(second).or_insert_with(|| ClientRow { time: second as f64, ..Default::default() });
            sum.timeouts += row.timeouts;
            sum.retries += row.retries;
            sum.speculative += row.speculative;
            for node in row.nodes {
                match sum.nodes.iter_mut().find(|n| n.node == node.node) {
                    Some(n) => {
                        n.started += node.started;
                        n.answered += node.answered;
                        n.failed += node.failed;
                        n.unconnected |= node.unconnected;
                    }
                    None => sum.nodes.push(node),
                }
            }
        }
    }
    seconds
}

#[cfg(test)]
mod tests {
    use super::*;
    use cql_stress::failover::NodeCounts;

    fn row(time: f64, rate: f64, errors: u64) -> String {
        format!(
            "total,          1234,{rate:>8},     500,     500,     1.0,     0.9,     2.0,     3.0,     4.0,     5.0,{time:>7.1},  0.01234,{errors:>7},      0,       0,       0,       0,       0"
        )
    }

    fn client(time: f64, lost: (u64, u64, bool), survivor: u64, timeouts: u64) -> String {
        let node = |node: &str, started, answered, failed, unconnected| NodeCounts {
            node: node.into(),
            started,
            answered,
            failed,
            unconnected,
        };
        failover::line(&ClientRow {
            time,
            timeouts,
            retries: timeouts,
            speculative: 0,
            nodes: vec![
                node("10.0.0.2:9042", lost.0, lost.1, 0, lost.2),
                node("10.0.0.3:9042", survivor, survivor, 0, false),
            ],
        })
    }

    fn loss(down_ms: u64, ready_s: Option<f64>) -> MachineLoss {
        MachineLoss {
            name: "node-2".into(),
            not_ready: Duration::from_secs(1),
            down: Duration::from_millis(down_ms),
            ready: ready_s.map(Duration::from_secs_f64),
        }
    }

    fn loader(rates: &[f64], errors_at_4: u64) -> String {
        let rows = rates.iter().enumerate().map(|(i, r)| row(i as f64 + 1.0, *r, if i == 3 { errors_at_4 } else { 0 }));
        rows.collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn the_seconds_of_a_loss_are_judged_against_the_rate_before_it_from_every_loader() {
        let mut report = AgentReport::default();
        for (name, content) in [
            ("run-loader-1.log", loader(&[100.0, 100.0, 100.0, 40.0, 60.0, 90.0, 100.0, 100.0], 0)),
            ("run-loader-2.log", loader(&[100.0, 100.0, 100.0, 20.0, 0.0, 90.0, 90.0, 100.0], 2)),
        ] {
            report.raw.push(crate::store::RawFile { name: name.into(), content });
        }
        // Down from 2.5 s, Ready at 5.5 s: seconds 4 and 5 are the loss, against second 2's 200.
        record(&mut report, Duration::from_millis(2500), &loss(1000, Some(5.5)), Some("10.0.0.2"), Some(&[]));
        let kept = &report.setup["fault.kept_serving"];
        assert!(
            kept.starts_with("yes: each of the 2 whole seconds") && kept.contains("the lowest 30%, second 4; 2 errors"),
            "{kept}"
        );
        let recovered = &report.setup["fault.recovered"];
        assert!(recovered.starts_with("yes: second 7, 1.5 s after the pod was Ready, served 95%"), "{recovered}");
        assert!(report.setup["fault.per_second"].contains("4: 60 (2)"), "{:?}", report.setup);
        assert_eq!(report.setup["fault.gc_pauses"], "none of 200 ms or more");
        assert!(report.setup["fault.per_second"].contains("its pod Ready again at 5.5 s"));
        assert_eq!(report.setup["fault.not_ready_s"], "1.0");
        // A second without a row is no second served.
        let mut stalled = AgentReport::default();
        let rows: String = [row(1.0, 100.0, 0), row(2.0, 100.0, 0), row(4.0, 5.0, 0), row(6.0, 90.0, 0)].join("\n");
        stalled.raw.push(crate::store::RawFile { name: "run-loader-1.log".into(), content: rows });
        record(&mut stalled, Duration::from_secs(2), &loss(2500, None), None, None);
        let kept = &stalled.setup["fault.kept_serving"];
        assert!(kept.starts_with("no: 2 of the 2 whole seconds") && kept.contains("seconds 3, 4;"), "{kept}");
        assert!(stalled.setup["fault.recovered"].starts_with("unknown: the pod was not Ready"));
        assert!(stalled.setup["fault.gc_pauses"].starts_with("unknown: no database pod's log"));
    }

    #[test]
    fn who_served_a_loss_is_said_from_the_clients_rows() {
        let lines = [
            row(1.0, 100.0, 0),
            row(2.0, 100.0, 0),
            row(3.0, 40.0, 0),
            row(4.0, 10.0, 0),
            row(5.0, 70.0, 0),
            client(4.0, (30, 2, false), 8, 0),
            client(5.0, (0, 0, true), 70, 6),
        ]
        .join("\n");
        let mut report = AgentReport::default();
        report.raw.push(crate::store::RawFile { name: "run-loader-1.log".into(), content: lines });
        // Down from 2.9 s, Ready at 5.2 s: seconds 4 and 5.
        // The survivor's node collected garbage for 700 ms across seconds 3 and 4, and once before.
        let pauses =
            [Pause { pod: "db-2".into(), from: 3.6, took: 0.7 }, Pause { pod: "db-2".into(), from: 0.5, took: 0.2 }];
        record(&mut report, Duration::from_millis(2900), &loss(1900, Some(5.2)), Some("10.0.0.2"), Some(&pauses));
        let who = &report.setup["fault.who_served"];
        assert!(
            who.contains("the surviving replicas answered 78 requests")
                && who.contains("the lost coordinator (10.0.0.2) left 28 attempts unanswered")
                && who.contains("timed out 6 requests, retried 6")
                && who.contains("stopped sending to it 2 s after the stop"),
            "{who}"
        );
        assert_eq!(report.setup["fault.gc_pauses"], "db-2 700 ms from 3.6 s · db-2 200 ms from 0.5 s");
        let kept = &report.setup["fault.kept_serving"];
        assert!(kept.starts_with("no: 1 of the 2"), "{kept}");
        // The short second says where its requests waited: here on the lost coordinator.
        assert!(
            kept.ends_with(
                "Second 4: 10 op/s, its requests took 1 ms on average, the slowest 5 ms; attempts started/answered: 10.0.0.2:9042 (the lost one) 30/2, 10.0.0.3:9042 8/8; 0 speculative executions, 0 retries. db-2 collected garbage for 700 ms from 3.6 s."
            ),
            "{kept}"
        );
    }
}
