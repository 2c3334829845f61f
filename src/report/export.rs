//! Machine-readable reports: `report.json` (everything the analysis computed), `summary.csv`
//! (one row per cell and metric) and JUnit XML (one test case per bound and cell, for CI systems).

use serde_json::{Value, json};

use super::{Report, attribute, explain};
use crate::compare::{self, Analysis, BoundVerdict, CellResult, MetricResult, Verdict};
use crate::store::csv_field;

fn pair(p: Option<(f64, f64)>) -> Value {
    p.map_or(Value::Null, |(lo, hi)| json!([finite(lo), finite(hi)]))
}

/// JSON has no NaN: a figure that does not exist is null.
fn finite(v: f64) -> Value {
    if v.is_finite() { json!(v) } else { Value::Null }
}

fn metric_json(m: &MetricResult) -> Value {
    let s = &m.summary;
    json!({
        "metric": m.metric, "unit": m.unit, "n": s.n, "center": s.center, "median": s.median, "mean": s.mean,
        "stddev": s.stddev, "cv_pct": s.cv_pct, "min": s.min, "max": s.max, "ci": pair(s.ci),
        "values": m.values,
        "vs_baseline": m.vs_baseline.as_ref().map(|d| json!({
            "baseline_center": d.baseline_center, "ratio": d.ratio, "pct": d.pct, "ci": pair(d.ci),
            "overhead_pct": d.overhead_pct, "overhead_ci": pair(d.overhead_ci), "p_value": d.p_value,
            "verdict": d.verdict.text(), "pairing": d.pairing.name(), "n": d.n,
            "unpaired_because": d.unpaired_because,
        })),
    })
}

/// A compared cell's why: its extra CPU per operation, the sampled parts' shares of it, every
/// function that grew, largest first (each with its part and the cell's thread that spent most
/// of it), and the why's lines in words. Every one, not the first few: under gVisor the JVM's
/// interpreter is spread over dozens of methods of a sample or two each (the demo's read: the
/// first 30 functions made 40 % of the app part's growth, its 64 Java methods 83 %), and what a
/// reader downstream adds up should be all the runs kept (each run's functions of at least
/// 0.1 % of its samples, 200 at most).
fn why_json(analysis: &Analysis, cell: &CellResult, base: &CellResult) -> Value {
    let per_op = cell.median("sys.cpu_per_op").zip(base.median("sys.cpu_per_op"));
    let extra = per_op.map(|(mine, theirs)| mine - theirs);
    let parts = extra.filter(|e| *e > 0.0).and_then(|e| Some((e, attribute::sampled_growth(cell, base)?)));
    let parts: Vec<Value> = parts
        .into_iter()
        .flat_map(|(extra, growth)| {
            growth.into_iter().map(move |(part, us)| {
                json!({ "part": part.map_or("unexplained", |p| p.name()), "us": finite(us), "share": finite(us / extra) })
            })
        })
        .collect();
    let verdict = compare::precision::verdict_diff(cell).map(|(_, d)| d.verdict);
    json!({
        "extra_cpu_per_op_us": extra.map(finite),
        "parts": parts,
        "functions": super::functions::grown(cell, base)
            .into_iter()
            .filter(|g| g.us > 0.0)
            .map(|g| json!({ "part": g.part, "thread": g.thread, "function": g.function, "us": finite(g.us) }))
            .collect::<Vec<Value>>(),
        "lines": explain::why_lines(analysis, cell, base),
        "too_few_runs": verdict == Some(Verdict::TooFewRuns),
    })
}

pub fn json(report: &Report) -> String {
    let a = &report.analysis;
    let doc = json!({
        "suite": a.plan.suite,
        "baseline": a.plan.baseline,
        "repeat": a.plan.repeat,
        "host": report.host,
        "cells": a.cells.iter().map(|c| json!({
            "cell": c.record.cell, "labels": c.record.labels, "baseline": c.is_baseline,
            "compared_with": c.baseline.filter(|_| !c.is_baseline).map(|b| &a.cells[b].record.cell),
            "headline": c.record.headline, "twin": c.record.twin,
            "runs_ok": c.runs_ok, "runs_failed": c.runs_failed, "skipped": c.skipped,
            "errors": c.errors, "notes": c.notes, "cost_per_hour": c.record.cost_per_hour,
            "target": c.record.target, "nodes": c.record.nodes,
            "metrics": c.metrics.iter().map(metric_json).collect::<Vec<_>>(),
            "why": c.baseline.filter(|_| !c.is_baseline).map(|b| why_json(a, c, &a.cells[b])),
            "steps": report.runs.iter()
                .filter(|r| r.cell == c.record.cell && !r.steps.is_empty())
                .map(|r| json!({ "rep": r.rep, "steps": r.steps }))
                .collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "bounds": report.checks.iter().map(|c| json!({
            "cell": c.cell, "metric": c.bound.metric, "max_overhead_pct": c.bound.max_overhead_pct,
            "overhead_pct": finite(c.overhead_pct), "overhead_ci": pair(c.overhead_ci), "verdict": c.verdict.text(),
        })).collect::<Vec<_>>(),
        "warnings": report.warnings.iter().map(|w| json!({ "cell": w.cell, "cause": w.cause, "message": w.message })).collect::<Vec<_>>(),
    });
    serde_json::to_string_pretty(&doc).expect("JSON values serialise") + "\n"
}

pub fn csv(report: &Report) -> String {
    let mut out = String::from(
        "cell,env,volume,workload,params,metric,unit,n,center,ci_low,ci_high,cv_pct,diff_pct,diff_ci_low,diff_ci_high,p_value,verdict,pairing\n",
    );
    let num = |v: f64| {
        if v.is_finite() { format!("{v}") } else { String::new() }
    };
    for c in &report.analysis.cells {
        for m in &c.metrics {
            let s = &m.summary;
            let d = m.vs_baseline.as_ref();
            let fields = [
                c.record.cell.clone(),
                c.record.labels.env.clone(),
                c.record.labels.volume.clone(),
                c.record.labels.workload.clone(),
                c.record.labels.params_text(),
                m.metric.clone(),
                m.unit.clone(),
                s.n.to_string(),
                num(s.center),
                s.ci.map(|c| num(c.0)).unwrap_or_default(),
                s.ci.map(|c| num(c.1)).unwrap_or_default(),
                num(s.cv_pct),
                d.map(|d| num(d.pct)).unwrap_or_default(),
                d.and_then(|d| d.ci).map(|c| num(c.0)).unwrap_or_default(),
                d.and_then(|d| d.ci).map(|c| num(c.1)).unwrap_or_default(),
                d.map(|d| num(d.p_value)).unwrap_or_default(),
                d.map(|d| d.verdict.text().to_string()).unwrap_or_default(),
                d.map(|d| d.pairing.name().to_string()).unwrap_or_default(),
            ];
            out.push_str(&fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
            out.push('\n');
        }
    }
    out
}

/// What an inconclusive bound counts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InconclusivePolicy {
    /// Reported as an error (and `check` exits 2).
    Report,
    Pass,
    Fail,
}

pub fn xml(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&apos;")
}

/// JUnit XML: one test case per bound and cell; failures for bounds exceeded (and, by policy,
/// inconclusive ones), errors for cells without a measurement or left inconclusive.
pub fn junit(report: &Report, policy: InconclusivePolicy) -> String {
    let mut cases = String::new();
    let (mut failures, mut errors) = (0, 0);
    for c in &report.checks {
        let detail = format!(
            "{} overhead {:+.1}% ({}) against a bound of {:.1}%",
            c.bound.metric,
            c.overhead_pct,
            figures::units::percent_interval_words(c.overhead_ci),
            c.bound.max_overhead_pct
        );
        let body = match (c.verdict, policy) {
            (BoundVerdict::Pass, _) | (BoundVerdict::Inconclusive, InconclusivePolicy::Pass) => String::new(),
            (BoundVerdict::Fail, _) | (BoundVerdict::Inconclusive, InconclusivePolicy::Fail) => {
                failures += 1;
                format!("<failure message=\"{}\" type=\"{}\"/>", xml(&detail), c.verdict.text())
            }
            (BoundVerdict::Inconclusive, InconclusivePolicy::Report) => {
                errors += 1;
                format!("<error message=\"{}\" type=\"inconclusive\"/>", xml(&format!("inconclusive: {detail}")))
            }
            (BoundVerdict::Missing, _) => {
                errors += 1;
                format!(
                    "<error message=\"{}\" type=\"missing\"/>",
                    xml(&format!("no {} measurement: the cell failed or was skipped", c.bound.metric))
                )
            }
        };
        cases.push_str(&format!(
            "    <testcase classname=\"{}.{}\" name=\"{}\">{body}</testcase>\n",
            xml(&report.analysis.plan.suite),
            xml(&c.bound.metric),
            xml(&c.cell)
        ));
    }
    let n = report.checks.len();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"isobench\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n  <testsuite name=\"{}\" tests=\"{n}\" failures=\"{failures}\" errors=\"{errors}\">\n{cases}  </testsuite>\n</testsuites>\n",
        xml(&report.analysis.plan.suite)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare;
    use crate::report::fixture;
    use crate::store::{CPU_PART, FunctionCpu, Sample, UNEXPLAINED};

    /// With two runs a side (too few for a verdict) the why is still printed, marked so, and
    /// report.json carries it: the extra CPU per operation and the sampled parts' shares of it.
    #[test]
    fn report_json_carries_the_why_and_too_few_runs_still_get_one() {
        let (analysis, runs) = fixture::matrix(
            &["host", "runsc"],
            &["cassandra"],
            |env, _, _| {
                let part = |name: &str, s: f64| Sample::new(format!("{CPU_PART}{name}"), s, "s");
                let (per_op, rate) = if env == "runsc" { (130.0, 400.0) } else { (50.0, 1000.0) };
                let mut samples =
                    vec![Sample::new("op_rate", rate, "op/s"), Sample::new("sys.cpu_per_op", per_op, "us")];
                samples.extend(if env == "runsc" {
                    [part("app", 6.0), part("network", 1.0), part("platform", 2.0), part(UNEXPLAINED, 1.0)]
                } else {
                    [part("app", 4.0), part("host_kernel", 1.0), part("network", 0.0), part(UNEXPLAINED, 0.0)]
                });
                samples
            },
            |_| Default::default(),
        );
        let mut runs: Vec<_> = runs.into_iter().filter(|r| r.rep < 3).collect();
        let function = |part: &str, thread: &str, function: &str, share: f64| FunctionCpu {
            part: part.into(),
            thread: thread.into(),
            function: function.into(),
            share,
        };
        for run in &mut runs {
            run.functions = match run.labels.env.as_str() {
                "runsc" => vec![
                    function("app", "ReadStage", "void Foo.spin()", 0.4),
                    function("app", "exe", "Interpreter", 0.2),
                    function("platform", "exe", "[unknown] in memfd:runsc-memory (deleted)", 0.2),
                ],
                _ => vec![
                    function("app", "ReadStage-1", "void Foo.spin()", 0.4),
                    function("app", "GC", "Interpreter", 0.4),
                ],
            };
        }
        let report = fixture::report("d", (compare::analyze(&analysis.plan, &runs), runs));
        let doc: Value = serde_json::from_str(&json(&report)).unwrap();
        assert!(doc["cells"][0]["why"].is_null(), "the baseline has none");
        let why = &doc["cells"][1]["why"];
        assert_eq!(why["extra_cpu_per_op_us"], 80.0);
        assert_eq!(why["too_few_runs"], true);
        let parts = why["parts"].as_array().unwrap();
        assert_eq!(parts[0]["part"], "app");
        // Each function's share of the sampled CPU times the CPU per operation, less the
        // baseline's: 0.4 × 130 − 0.4 × 50 µs.
        let functions = why["functions"].as_array().unwrap();
        assert_eq!(functions[0]["function"], "void Foo.spin()");
        assert_eq!((functions[0]["part"].as_str(), functions[0]["thread"].as_str()), (Some("app"), Some("ReadStage")));
        assert!((functions[0]["us"].as_f64().unwrap() - 32.0).abs() < 1e-9, "{functions:?}");
        assert!(functions.iter().all(|f| f["us"].as_f64().unwrap() > 0.0), "only what grew: {functions:?}");
        let lines = why["lines"].as_array().unwrap();
        let named = lines.iter().filter_map(|l| l.as_str()).find(|l| l.starts_with("the functions that grew most"));
        let named = named.expect("a line of the functions");
        assert!(
            named.contains(
                "in app: void Foo.spin() +32.0 µs (ReadStage), Interpreter (bytecode not compiled yet) +6.00 µs (exe) — together 100% of its growth"
            ),
            "{named}"
        );
        assert!(named.contains("20.0% of the sampled CPU named by no symbol or map"), "{named}");
        let shares: f64 = parts.iter().map(|p| p["share"].as_f64().unwrap()).sum();
        assert!((shares - 1.0).abs() < 1e-9, "the parts and the rest make the whole increase: {parts:?}");
        assert!(why["lines"].as_array().unwrap().iter().any(|l| l.as_str().unwrap().starts_with("sampled by part")));
        let printed = super::super::terminal::render(&report);
        assert!(printed.contains(explain::TOO_FEW_RUNS), "{printed}");
    }
}
