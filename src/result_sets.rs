//! Working with several result sets: `isobench compare A B` (a saved baseline against a new
//! run, cell by cell, with the same statistics as within one set) and `isobench merge`
//! (re-runs of failed or noisy cells joined to the set they belong to).

use std::collections::HashSet;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::compare::{self, Analysis};
use crate::report::{Table, metric_title};
use crate::store::{RawFile, ResultSet, RunRecord, Status};
use figures::units;

fn analysis(set: &ResultSet) -> Result<Analysis> {
    Ok(compare::analyze(&set.plan()?, &set.runs()?))
}

/// The table of `isobench compare A B`: every cell both sets measured, B against A.
pub fn compare_sets(a: &ResultSet, b: &ResultSet, metrics: &[String]) -> Result<String> {
    let (old, new) = (analysis(a)?, analysis(b)?);
    let mut rows = Vec::new();
    let mut only_b = Vec::new();
    for cell in new.cells.iter().filter(|c| c.runs_ok > 0) {
        let Some(before) = old.cells.iter().find(|c| c.record.cell == cell.record.cell && c.runs_ok > 0) else {
            only_b.push(cell.record.cell.clone());
            continue;
        };
        let wanted: Vec<String> = if metrics.is_empty() { cell.record.headline.clone() } else { metrics.to_vec() };
        for metric in wanted {
            let (Some(m_new), Some(m_old)) = (cell.metric(&metric), before.metric(&metric)) else {
                continue;
            };
            let Some(d) = compare::diff(m_new, m_old) else {
                continue;
            };
            rows.push(vec![
                cell.record.cell.clone(),
                metric_title(&metric),
                format!("{} (n={})", units::human(m_old.summary.center, &m_old.unit), m_old.summary.n),
                format!("{} (n={})", units::human(m_new.summary.center, &m_new.unit), m_new.summary.n),
                format!("{} {}", units::signed_percent(d.pct), units::percent_interval(d.ci)),
                format!("{:.3}", d.p_value),
                d.verdict.text().to_string(),
            ]);
        }
    }
    if rows.is_empty() {
        bail!("{} and {} have no measured cell in common", a.dir.display(), b.dir.display());
    }
    let headers = ["cell", "metric", "A", "B", "B vs A [95% CI]", "p", "verdict"].map(String::from).to_vec();
    let mut out = format!("A: {}\nB: {}\n{}\n\n", a.dir.display(), b.dir.display(), machines(a, b));
    out.push_str(&Table { headers, rows }.to_text(""));
    let only_a: Vec<&str> = old
        .cells
        .iter()
        .filter(|c| c.runs_ok > 0 && !new.cells.iter().any(|n| n.record.cell == c.record.cell && n.runs_ok > 0))
        .map(|c| c.record.cell.as_str())
        .collect();
    if !only_a.is_empty() {
        out.push_str(&format!("\nonly in A: {}\n", only_a.join(", ")));
    }
    if !only_b.is_empty() {
        out.push_str(&format!("only in B: {}\n", only_b.join(", ")));
    }
    Ok(out)
}

/// Whether A and B were measured on the same kind of machine, and what else of it changed.
fn machines(a: &ResultSet, b: &ResultSet) -> String {
    let facts = |set: &ResultSet| set.read_json::<crate::facts::Facts>("host.json").unwrap_or_default();
    let (fa, fb) = (facts(a), facts(b));
    match crate::facts::machine_kind_difference(&fa, &fb) {
        None => "machines: not recorded in both (result sets from before isobench recorded them)".into(),
        Some((true, differs)) if differs.is_empty() => format!(
            "machines: the same kind ({}), nothing of it changed",
            crate::report::machine_line(&fb).unwrap_or_default()
        ),
        Some((true, differs)) => format!(
            "machines: the same kind ({}); changed between them: {}",
            crate::report::machine_line(&fb).unwrap_or_default(),
            differs.join("; ")
        ),
        Some((false, differs)) => format!(
            "machines: of different kinds ({}): a difference below may be the machine's, not the change's",
            differs.join("; ")
        ),
    }
}

/// Joins result sets of one suite into a new one at `out`. Runs are renumbered per cell (the
/// first set's first) and keep the set they came from in `origin`. A failed or skipped run is
/// kept only for a cell that no set measured successfully.
pub fn merge(sets: &[ResultSet], out: &Path) -> Result<ResultSet> {
    let first = &sets[0];
    let mut plan = first.plan()?;
    let mut all: Vec<(&ResultSet, RunRecord)> = Vec::new();
    for set in sets {
        let other = set.plan()?;
        if other.suite != plan.suite {
            bail!(
                "{} is from suite \"{}\", {} from \"{}\": only result sets of one suite merge",
                set.dir.display(),
                other.suite,
                first.dir.display(),
                plan.suite
            );
        }
        for cell in other.cells {
            if !plan.cells.iter().any(|c| c.cell == cell.cell) {
                plan.cells.push(cell);
            }
        }
        all.extend(set.runs()?.into_iter().map(|r| (set, r)));
    }
    let measured: HashSet<String> =
        all.iter().filter(|(_, r)| r.status == Status::Ok).map(|(_, r)| r.cell.clone()).collect();
    let merged = ResultSet::create(out)?;
    for name in ["suite.toml", "host.json"] {
        if let Ok(bytes) = std::fs::read(first.dir.join(name)) {
            merged.write(name, &bytes)?;
        }
    }
    merged.write_json("plan.json", &plan)?;
    for cell in &plan.cells {
        let mut rep = 0;
        for (set, run) in all.iter().filter(|(_, r)| r.cell == cell.cell) {
            if run.status != Status::Ok && measured.contains(&run.cell) {
                continue;
            }
            rep += 1;
            let raw = run
                .raw
                .iter()
                .map(|path| {
                    let content = std::fs::read_to_string(set.dir.join(path))
                        .with_context(|| format!("reading {}", set.dir.join(path).display()))?;
                    Ok(RawFile { name: path.rsplit('/').next().unwrap_or(path).to_string(), content })
                })
                .collect::<Result<Vec<_>>>()?;
            let mut copy = run.clone();
            copy.rep = rep;
            copy.raw.clear();
            copy.origin.get_or_insert_with(|| format!("{} run {}", set.dir.display(), run.rep));
            merged.write_run(&mut copy, &raw)?;
        }
    }
    Ok(merged)
}
