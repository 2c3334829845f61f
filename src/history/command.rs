//! `isobench history …`, and what `isobench run` and `merge` do with the history.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};

use super::detect::Options;
use super::series::{self, ChangePoint, Filter, Series};
use super::{History, Location, Recorded, gate, trend};
use crate::report::export::InconclusivePolicy;

#[derive(Subcommand)]
pub enum Action {
    /// Each series (suite, cell, metric), newest last: time, value, overhead with its CI, and the
    /// component facts that changed from the result set before.
    Show {
        #[command(flatten)]
        filter: FilterArgs,
    },
    /// Find change points in each series of overheads and of values, and what changed at each.
    Analyze {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        detection: DetectionArgs,
        /// Print {"change_points": [...]} as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Each series' newest result set against its last accepted level: exit 0 when nothing
    /// regressed, 1 when an overhead or a capacity got worse beyond the tolerance, 2 when
    /// inconclusive.
    Gate {
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        detection: DetectionArgs,
        /// How much worse is still accepted: points of overhead, or % of a capacity.
        #[arg(long, default_value = "5%")]
        tolerance: String,
        /// Also write the verdicts as JUnit XML, one test case per series.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// What an inconclusive series counts as: report (exit 2), pass or fail.
        #[arg(long, default_value = "report", value_parser = ["report", "pass", "fail"])]
        inconclusive: String,
    },
    /// Mark a change point as looked at: the level after it becomes the accepted one.
    Ack {
        /// Its id, as `history analyze` prints it.
        id: String,
        #[arg(long, required = true)]
        why: String,
        /// As the `analyze` that found it was given them.
        #[command(flatten)]
        detection: DetectionArgs,
    },
    /// Add result sets (a result set, a directory of them, or a `history export` file); what is
    /// there already is skipped.
    Import {
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// The whole history as JSON lines, for `history import` into another store.
    Export {
        #[arg(long, default_value = "jsonl", value_parser = ["jsonl"])]
        format: String,
        /// Write here rather than to standard output.
        #[arg(short = 'o', long = "out")]
        out: Option<PathBuf>,
    },
    /// Write the trend charts as a self-contained HTML page.
    Report {
        #[arg(long, required = true, value_name = "FILE")]
        html: PathBuf,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        detection: DetectionArgs,
    },
}

#[derive(Args)]
pub struct FilterArgs {
    /// Only this suite (a glob).
    #[arg(long)]
    suite: Option<String>,
    /// Only cells whose id matches (a glob: 'runsc.*').
    #[arg(long)]
    cell: Option<String>,
    /// Only this metric (a glob).
    #[arg(long)]
    metric: Option<String>,
}

#[derive(Args)]
pub struct DetectionArgs {
    /// The largest p-value of a change point's t-test.
    #[arg(long, default_value_t = 0.01)]
    max_p: f64,
    /// The smallest change reported: % of a value, points of an overhead.
    #[arg(long, default_value_t = 0.0)]
    min_change: f64,
    /// Result sets each side of a change at least.
    #[arg(long, default_value_t = 3)]
    min_segment: usize,
}

impl DetectionArgs {
    fn options(&self) -> Result<Options> {
        if !(self.max_p > 0.0 && self.max_p < 1.0) {
            bail!("--max-p {}: a p-value between 0 and 1, e.g. 0.001", self.max_p);
        }
        if !(self.min_change >= 0.0 && self.min_change.is_finite()) {
            bail!("--min-change {}: a change of 0 or more", self.min_change);
        }
        if self.min_segment == 0 {
            bail!("--min-segment 0: at least 1 result set a side");
        }
        Ok(Options { max_p: self.max_p, min_change: self.min_change, min_segment: self.min_segment })
    }
}

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter { suite: self.suite.clone(), cell: self.cell.clone(), metric: self.metric.clone() }
    }
}

fn series_of(history: &mut History, filter: &FilterArgs) -> Result<Vec<Series>> {
    Ok(series::group(history.points()?, &filter.filter()))
}

/// Every change point of every series the filter selects, overheads first.
fn all_change_points(all: &[Series], options: &Options, acks: &BTreeMap<String, (String, String)>) -> Vec<ChangePoint> {
    let mut out = Vec::new();
    for s in all {
        for figure in [series::Figure::Overhead, series::Figure::Value] {
            out.extend(series::change_points(s, figure, options, acks));
        }
    }
    out
}

pub fn main(action: Action) -> Result<ExitCode> {
    let mut history = History::open_default()?;
    match action {
        Action::Show { filter } => print!("{}", series::show(&series_of(&mut history, &filter)?)),
        Action::Analyze { filter, detection, json } => {
            let (options, acks) = (detection.options()?, history.acks()?);
            let points = all_change_points(&series_of(&mut history, &filter)?, &options, &acks);
            if json {
                println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "change_points": points }))?);
            } else if points.is_empty() {
                println!("no change points in {}", history.location.describe());
            } else {
                for cp in &points {
                    println!("{}", series::describe(cp));
                }
            }
        }
        Action::Gate { filter, detection, tolerance, junit, inconclusive } => {
            let tolerance = parse_tolerance(&tolerance)?;
            let policy = match inconclusive.as_str() {
                "pass" => InconclusivePolicy::Pass,
                "fail" => InconclusivePolicy::Fail,
                _ => InconclusivePolicy::Report,
            };
            let (options, acks) = (detection.options()?, history.acks()?);
            let judged = gate::gate(&series_of(&mut history, &filter)?, tolerance, &options, &acks);
            if let Some(path) = junit {
                crate::sys::write_atomic(&path, gate::junit(&judged, policy).as_bytes())
                    .with_context(|| format!("--junit {}", path.display()))?;
            }
            for j in &judged {
                println!("{:<13} {} ({}): {}", j.verdict.text(), j.series, j.figure.name(), j.detail);
            }
            if judged.is_empty() {
                println!(
                    "no series to gate in {}: record result sets with `isobench run` or `isobench history import`",
                    history.location.describe()
                );
            }
            return Ok(ExitCode::from(gate::exit_code(&judged, policy)));
        }
        Action::Ack { id, why, detection } => {
            let (options, acks) = (detection.options()?, history.acks()?);
            let all = series::group(history.points()?, &Filter::default());
            let known = all_change_points(&all, &options, &acks);
            let Some(cp) = known.iter().find(|c| c.id == id) else {
                bail!(
                    "no change point {id} in {}: `isobench history analyze` lists their ids",
                    history.location.describe()
                );
            };
            history.ack(&id, &why)?;
            println!("acknowledged {id} ({} · {} · {}): {why}", cp.suite, cp.cell, cp.metric);
        }
        Action::Import { paths } => {
            for path in &paths {
                import(&mut history, path)?;
            }
        }
        Action::Export { format: _, out } => {
            let text = history.export()?;
            match out {
                Some(path) => crate::sys::write_atomic(&path, text.as_bytes())
                    .with_context(|| format!("--out {}", path.display()))?,
                None => {
                    use std::io::Write;
                    // A reader that stops early (`| head`) is not an error of the export.
                    match std::io::stdout().write_all(text.as_bytes()) {
                        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
                        other => other?,
                    }
                }
            }
        }
        Action::Report { html, filter, detection } => {
            let (options, acks) = (detection.options()?, history.acks()?);
            let all = series_of(&mut history, &filter)?;
            let page = trend::page(&all, &options, &acks, &history.location.describe());
            crate::sys::write_atomic(&html, page.as_bytes()).with_context(|| format!("--html {}", html.display()))?;
            println!("wrote {}", html.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// "5%" or "5": points of overhead, or % of a capacity.
fn parse_tolerance(text: &str) -> Result<f64> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(t) if t.is_finite() && t >= 0.0 => Ok(t),
        _ => bail!("--tolerance {text}: a percentage of 0 or more, e.g. 5%"),
    }
}

fn import(history: &mut History, path: &Path) -> Result<()> {
    if path.is_file() {
        let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let (added, there) = history.import_lines(&text, &path.display().to_string())?;
        println!("{}: {added} result sets added, {there} already in the history", path.display());
        return Ok(());
    }
    let sets: Vec<PathBuf> = if path.join("runs").is_dir() {
        vec![path.to_path_buf()]
    } else {
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| {
                format!("{}: neither a result set, a directory of them, nor an export file", path.display())
            })?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join("runs").is_dir())
            .collect();
        found.sort();
        if found.is_empty() {
            bail!("{} holds no result set (a directory with runs/ and plan.json)", path.display());
        }
        found
    };
    for set in sets {
        match history.record(&set)? {
            Recorded::Added { points } => println!("{}: added ({points} points)", set.display()),
            Recorded::AlreadyThere => println!("{}: already in the history", set.display()),
        }
    }
    Ok(())
}

/// Before a run's first cell: the history it will be recorded in, or why it cannot be (said
/// once; the run goes on without it).
pub fn before_run(skip: bool) -> Option<History> {
    if skip {
        return None;
    }
    match Location::from_env().and_then(|l| History::open(&l)) {
        Ok(history) => Some(history),
        Err(e) => {
            eprintln!(
                "isobench: warning: the run will not be kept in the history: {}",
                crate::secrets::scrub(&format!("{e:#}"))
            );
            None
        }
    }
}

/// After a run or a merge: the result set into the history, or how to add it later.
pub fn after_run(history: Option<History>, dir: &Path, skipped: bool) {
    let later = format!("add it later with `isobench history import {}`", dir.display());
    let Some(checked) = history else {
        if !skipped {
            eprintln!("isobench: the result set is not in the history; {later}");
        }
        return;
    };
    // Opened again: a server may have closed a connection that idled through a long run.
    let location = checked.location.clone();
    drop(checked);
    match History::open(&location).and_then(|mut history| history.record(dir)) {
        Ok(Recorded::Added { .. }) => println!("history:    {}", location.describe()),
        Ok(Recorded::AlreadyThere) => println!("history:    its runs are already in {}", location.describe()),
        Err(e) => eprintln!(
            "isobench: warning: recording the result set in the history failed: {}; {later}",
            crate::secrets::scrub(&format!("{e:#}"))
        ),
    }
}

/// The section a result set's report.html shows: its own series, where the history has two or
/// more result sets of them.
pub fn report_section(dir: &Path) -> String {
    let Ok(location) = Location::from_env() else { return String::new() };
    // Reading a history that is not there would create it: a report alone never does.
    if let Location::Sqlite(path) = &location
        && !path.exists()
    {
        return String::new();
    }
    let Ok(mut history) = History::open(&location) else { return String::new() };
    let (Ok(points), Ok(acks), Ok(plan)) =
        (history.points(), history.acks(), crate::store::ResultSet::open(dir).and_then(|s| s.plan()))
    else {
        return String::new();
    };
    let cells: Vec<String> = plan.cells.iter().map(|c| c.cell.clone()).collect();
    let headline: Vec<(String, String)> =
        plan.cells.iter().flat_map(|c| c.headline.iter().map(|m| (c.cell.clone(), m.clone()))).collect();
    let own: Vec<Series> = series::group(points, &Filter { suite: Some(plan.suite.clone()), ..Filter::default() })
        .into_iter()
        .filter(|s| cells.contains(&s.cell) && headline.contains(&(s.cell.clone(), s.metric.clone())))
        .collect();
    trend::sections(&own, &Options::default(), &acks)
}
