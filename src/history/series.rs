//! Series (one suite, cell and metric, over result sets), their change points, and what changed
//! at each: the component facts that held on one side and held otherwise on the other.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::detect::{self, Change, Obs, Options};
use super::entry::{Point, is_volatile};
use crate::compare::higher_is_better;
use figures::units;

/// Which figures of a series: the overhead against the same result set's baseline (a machine's
/// drift cancels out), or the cell's own value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    Overhead,
    Value,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::Overhead => "overhead",
            Figure::Value => "value",
        }
    }

    /// What a change of this figure is counted in.
    pub fn change_unit(self) -> &'static str {
        match self {
            Figure::Overhead => "points",
            Figure::Value => "%",
        }
    }
}

/// Where a series is judged: performance figures vary by factors (a run twice as slow is as far
/// from the level as one twice as fast), so values are judged as logarithms, and an overhead as
/// the logarithm of the ratio to its baseline; where a value can be 0 or less, as it is.
#[derive(Clone, Copy, Debug)]
pub enum Scale {
    Linear,
    Log,
    /// `sign` +1 where lower is better (the ratio is 1 + overhead), −1 where higher is.
    Overhead {
        sign: f64,
    },
}

impl Scale {
    pub fn to(self, x: f64) -> Option<f64> {
        let y = match self {
            Scale::Linear => x,
            Scale::Log => x.ln(),
            Scale::Overhead { sign } => sign * (1.0 + sign * x / 100.0).ln(),
        };
        y.is_finite().then_some(y)
    }

    pub fn from(self, y: f64) -> f64 {
        match self {
            Scale::Linear => y,
            Scale::Log => y.exp(),
            Scale::Overhead { sign } => sign * ((sign * y).exp() - 1.0) * 100.0,
        }
    }

    /// From level `y0` to `y1`, as a change is told: in % of a value, in points of an overhead.
    pub fn change(self, y0: f64, y1: f64) -> f64 {
        match self {
            Scale::Linear => (y1 - y0) / y0.abs() * 100.0,
            Scale::Log => ((y1 - y0).exp() - 1.0) * 100.0,
            Scale::Overhead { .. } => self.from(y1) - self.from(y0),
        }
    }
}

/// A series' figure point by point, on its scale.
pub struct Observed<'a> {
    pub scale: Scale,
    pub points: Vec<&'a Point>,
    pub obs: Vec<Obs>,
}

/// What `--suite`, `--cell` and `--metric` select (globs).
#[derive(Default)]
pub struct Filter {
    pub suite: Option<String>,
    pub cell: Option<String>,
    pub metric: Option<String>,
}

impl Filter {
    fn matches(&self, p: &Point) -> bool {
        let one = |pattern: &Option<String>, value: &str| {
            pattern.as_deref().is_none_or(|g| glob::Pattern::new(g).map_or(g == value, |g| g.matches(value)))
        };
        one(&self.suite, &p.suite) && one(&self.cell, &p.cell) && one(&self.metric, &p.metric)
    }
}

pub struct Series {
    pub suite: String,
    pub cell: String,
    pub metric: String,
    pub unit: String,
    pub headline: bool,
    pub labels: BTreeMap<String, String>,
    /// Oldest first.
    pub points: Vec<Point>,
}

impl Series {
    pub fn name(&self) -> String {
        format!("{} · {} · {}", self.suite, self.cell, self.metric)
    }

    /// The points that have `figure`, each as an observation on the scale the series is judged on.
    pub fn observed(&self, figure: Figure) -> Observed<'_> {
        let scale = match figure {
            Figure::Overhead => Scale::Overhead { sign: if higher_is_better(&self.unit) { -1.0 } else { 1.0 } },
            Figure::Value if self.points.iter().all(|p| p.median > 0.0 && p.ci.0 > 0.0) => Scale::Log,
            Figure::Value => Scale::Linear,
        };
        let mut observed = Observed { scale, points: Vec::new(), obs: Vec::new() };
        for p in &self.points {
            let (x, ci) = match figure {
                Figure::Value => (p.median, p.ci),
                Figure::Overhead => match (p.overhead, p.overhead_ci) {
                    (Some(o), Some(ci)) => (o, ci),
                    _ => continue,
                },
            };
            if let (Some(value), Some(lo), Some(hi)) = (scale.to(x), scale.to(ci.0), scale.to(ci.1)) {
                observed.points.push(p);
                observed.obs.push(Obs::from_interval(value, lo, hi, p.values.len()));
            }
        }
        observed
    }

    /// `--filter` words that select this series' cell in a rerun of its suite.
    pub fn selector(&self) -> String {
        self.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// The points grouped into series, each oldest first (`points` comes oldest first).
pub fn group(points: Vec<Point>, filter: &Filter) -> Vec<Series> {
    let mut by_key: BTreeMap<(String, String, String), Series> = BTreeMap::new();
    for p in points.into_iter().filter(|p| filter.matches(p)) {
        let series = by_key.entry((p.suite.clone(), p.cell.clone(), p.metric.clone())).or_insert_with(|| Series {
            suite: p.suite.clone(),
            cell: p.cell.clone(),
            metric: p.metric.clone(),
            unit: p.unit.clone(),
            headline: p.headline,
            labels: p.labels.clone(),
            points: Vec::new(),
        });
        series.headline |= p.headline;
        series.points.push(p);
    }
    by_key.into_values().collect()
}

/// A change point as `history analyze` reports it.
#[derive(Clone, Debug, Serialize)]
pub struct ChangePoint {
    pub id: String,
    pub suite: String,
    pub cell: String,
    pub metric: String,
    pub series: Figure,
    /// The first result set after the change (its path) and when it ran.
    pub result_set: String,
    pub time: String,
    pub index: usize,
    pub before: f64,
    pub after: f64,
    /// In % of the level before for a value, in points for an overhead.
    pub change_pct: f64,
    pub ci: (f64, f64),
    pub p_value: f64,
    pub changed: BTreeMap<String, (String, String)>,
    /// Why someone looked at it and let it be (`history ack`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acknowledged: Option<String>,
    #[serde(skip)]
    pub unit: String,
    #[serde(skip)]
    pub rerun: Option<String>,
}

/// The change points of one figure of a series.
pub fn change_points(
    series: &Series,
    figure: Figure,
    options: &Options,
    acks: &BTreeMap<String, (String, String)>,
) -> Vec<ChangePoint> {
    let Observed { scale, points, obs } = series.observed(figure);
    let components_changed: Vec<usize> =
        (1..points.len()).filter(|&i| !changed_facts(&points[i - 1..i], &points[i..=i]).is_empty()).collect();
    let changes = detect::change_points(
        &obs,
        options,
        &|c: &Change| scale.change(c.before.mean, c.after.mean),
        &components_changed,
    );
    let bounds: Vec<usize> = std::iter::once(0).chain(changes.iter().map(|c| c.index)).chain([obs.len()]).collect();
    changes
        .iter()
        .enumerate()
        .map(|(k, c)| {
            let at = points[c.index];
            let changed = changed_facts(&points[bounds[k]..c.index], &points[c.index..bounds[k + 2]]);
            let id = change_id(series, figure, &at.result_set);
            let before = c.before.mean;
            ChangePoint {
                acknowledged: acks.get(&id).map(|(why, _)| why.clone()),
                id,
                suite: series.suite.clone(),
                cell: series.cell.clone(),
                metric: series.metric.clone(),
                series: figure,
                result_set: at.path.clone(),
                time: at.time.clone(),
                index: c.index,
                before: scale.from(before),
                after: scale.from(c.after.mean),
                change_pct: scale.change(before, c.after.mean),
                ci: (scale.change(before, before + c.diff_ci.0), scale.change(before, before + c.diff_ci.1)),
                p_value: c.p_value,
                rerun: rerun(series, &changed),
                changed,
                unit: series.unit.clone(),
            }
        })
        .collect()
}

fn change_id(series: &Series, figure: Figure, result_set: &str) -> String {
    let key = format!("{}\n{}\n{}\n{}\n{}", series.suite, series.cell, series.metric, figure.name(), result_set);
    ring::digest::digest(&ring::digest::SHA256, key.as_bytes()).as_ref()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The facts that held one value on every point before and another on every point after: the
/// components that changed there. A fact that varies inside a side is not a component.
pub fn changed_facts(before: &[&Point], after: &[&Point]) -> BTreeMap<String, (String, String)> {
    let keys: BTreeSet<&String> = before.iter().chain(after).flat_map(|p| p.facts.keys()).collect();
    let held = |side: &[&Point], key: &str| -> Option<String> {
        let values: BTreeSet<&str> = side.iter().map(|p| p.facts.get(key).map_or("(none)", String::as_str)).collect();
        (values.len() == 1).then(|| values.into_iter().next().unwrap().to_string())
    };
    keys.into_iter()
        .filter(|k| !is_volatile(k) && !RESTATED.contains(&k.as_str()))
        .filter_map(|k| match (held(before, k), held(after, k)) {
            (Some(b), Some(a)) if a != b => Some((k.clone(), (b, a))),
            _ => None,
        })
        .collect()
}

/// "fact before → after; …", or what it means that nothing recorded changed.
pub fn changed_text(changed: &BTreeMap<String, (String, String)>) -> String {
    if changed.is_empty() {
        return "no recorded component changed".into();
    }
    changed.iter().map(|(k, (b, a))| format!("{k} {b} → {a}")).collect::<Vec<_>>().join("; ")
}

/// Facts that restate others (the runtime's command line is made of its settings): they change
/// with what they restate and are not components of their own.
const RESTATED: &[&str] = &["runtime.args"];

/// Where several components changed at once, the reruns that would tell them apart.
fn rerun(series: &Series, changed: &BTreeMap<String, (String, String)>) -> Option<String> {
    let components: Vec<&String> = changed.keys().filter(|k| !k.starts_with("host.machine.")).collect();
    if components.len() < 2 {
        return None;
    }
    Some(format!(
        "{} components changed together; {} rerun{} of `isobench run <{} suite> --filter {}`, each with one of {} back at its value before, would tell which moved it",
        components.len(),
        components.len() - 1,
        if components.len() > 2 { "s" } else { "" },
        series.suite,
        series.selector(),
        components.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
    ))
}

/// `value [lo, hi]` of a figure, as `show` and `analyze` print it.
pub fn figure_text(figure: Figure, value: f64, ci: Option<(f64, f64)>, unit: &str) -> String {
    let one = |v: f64| match figure {
        Figure::Overhead => format!("{} %", signed(v)),
        Figure::Value => units::sig3(v),
    };
    let unit = if figure == Figure::Value && !unit.is_empty() { format!(" {unit}") } else { String::new() };
    match ci {
        Some((lo, hi)) => format!("{}{unit} [{}, {}]", one(value), one(lo), one(hi)),
        None => format!("{}{unit}", one(value)),
    }
}

/// A change with its sign, to three figures.
pub fn signed(v: f64) -> String {
    format!("{}{}", if v >= 0.0 { "+" } else { "" }, units::sig3(v))
}

/// `history show`: each series, newest last, with what changed from the point before.
pub fn show(series: &[Series]) -> String {
    let mut out = String::new();
    for s in series {
        out.push_str(&format!("{} ({})\n", s.name(), s.unit));
        let mut previous: Option<&Point> = None;
        for p in &s.points {
            let changed = previous.map(|before| changed_facts(&[before], &[p])).filter(|c| !c.is_empty());
            let changed = changed.as_ref().map(changed_text).unwrap_or_default();
            let overhead = match (p.overhead, p.overhead_ci) {
                (Some(o), ci) => format!("  overhead {}", figure_text(Figure::Overhead, o, ci, "")),
                _ => String::new(),
            };
            out.push_str(&format!(
                "  {}  {}{overhead}{}\n",
                p.time,
                figure_text(Figure::Value, p.median, Some(p.ci), &s.unit),
                if changed.is_empty() { String::new() } else { format!("  · {changed}") }
            ));
            previous = Some(p);
        }
    }
    if out.is_empty() {
        out.push_str("no series in the history match\n");
    }
    out
}

/// `history analyze`'s text for one change point.
pub fn describe(cp: &ChangePoint) -> String {
    let unit = if cp.series == Figure::Value { cp.unit.as_str() } else { "" };
    let acknowledged = cp.acknowledged.as_ref().map(|why| format!(" — acknowledged: {why}")).unwrap_or_default();
    let change = format!(
        "{} {} [{}, {}]",
        signed(cp.change_pct),
        if cp.series == Figure::Value { "%" } else { "points of overhead" },
        signed(cp.ci.0),
        signed(cp.ci.1)
    );
    let mut out = format!(
        "change point {} in {} · {} · {} ({}){acknowledged}\n  at result set {} ({}, run {} of the series)\n  before {} → after {}: {change}, p = {:.2e}\n",
        cp.id,
        cp.suite,
        cp.cell,
        cp.metric,
        cp.series.name(),
        cp.result_set,
        cp.time,
        cp.index + 1,
        figure_text(cp.series, cp.before, None, unit),
        figure_text(cp.series, cp.after, None, unit),
        cp.p_value,
    );
    if cp.changed.is_empty() {
        out.push_str(
            "  what changed: no recorded component (the machine, the load, or something isobench does not record)\n",
        );
    } else {
        out.push_str("  what changed:\n");
        for (fact, (before, after)) in &cp.changed {
            out.push_str(&format!("    {fact}: {before} → {after}\n"));
        }
    }
    if let Some(rerun) = &cp.rerun {
        out.push_str(&format!("  {rerun}\n"));
    }
    out
}
