//! Machine-readable reports: `report.json` (everything the analysis computed), `summary.csv`
//! (one row per cell and metric) and JUnit XML (one test case per bound and cell, for CI systems).

use serde_json::{Value, json};

use super::Report;
use crate::compare::{BoundVerdict, MetricResult};
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
