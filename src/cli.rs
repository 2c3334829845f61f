//! The command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::{Parser, Subcommand};

use crate::compare;
use crate::facts;
use crate::ledger::{self, Ledger};
use crate::plan::{Plan, Selector};
use crate::process::{self, Interrupted};
use crate::report;
use crate::runner::Runner;
use crate::store::{ResultSet, utc_stamp};
use crate::suite::Suite;

#[derive(Parser)]
#[command(
    name = "isobench",
    version,
    about = "What does this sandbox and this storage stack cost my workload?"
)]
struct Cli {
    /// Where isobench keeps its state files, mount points and volume images.
    #[arg(
        long,
        global = true,
        env = "ISOBENCH_WORKDIR",
        default_value = "/var/lib/isobench"
    )]
    workdir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a suite: expand its matrix, run every cell, write a result set and a report.
    Run {
        /// The suite file (TOML).
        suite: PathBuf,
        /// Override a suite value: --set workload.fio.runtime=3s, --set repeat=5.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
        /// Run only the cells whose labels match, e.g. --filter env=host,rw=randread (repeatable).
        #[arg(long, value_name = "LABEL=GLOB,...")]
        filter: Vec<String>,
        /// The result set directory (default: results/<UTC timestamp>-<suite name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Continue an interrupted result set, skipping the runs it already has.
        #[arg(long, conflicts_with = "out")]
        resume: Option<PathBuf>,
        /// Print the matrix and the run order, run nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print a result set's table again and rewrite its report.md.
    Report { dir: PathBuf },
    /// Check a result set against its suite's bounds: exit 1 if any cell exceeds one.
    Check { dir: PathBuf },
    /// What this machine can run, and why what it cannot is missing.
    Doctor,
    /// Remove what killed runs left behind: mounts, loop devices, processes, files.
    Cleanup,
    /// (internal) Run a workload inside an environment and print one framed JSON report.
    #[command(hide = true)]
    Agent {
        #[arg(long, default_value = "-")]
        request: String,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            eprintln!("isobench: interrupted");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("isobench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    // Mount points are compared with /proc/self/mountinfo, which holds absolute, resolved paths.
    std::fs::create_dir_all(&cli.workdir)
        .map_err(|e| anyhow::anyhow!("--workdir {}: {e}", cli.workdir.display()))?;
    let workdir = std::fs::canonicalize(&cli.workdir)?;
    match cli.command {
        Command::Run {
            suite,
            overrides,
            filter,
            out,
            resume,
            dry_run,
        } => run(&workdir, &suite, &overrides, &filter, out, resume, dry_run),
        Command::Report { dir } => {
            let set = ResultSet::open(&dir)?;
            print!("{}", write_report(&set)?.0);
            println!("\nreport: {}", dir.join("report.md").display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { dir } => check(&dir),
        Command::Doctor => {
            print!("{}", crate::doctor::render(&crate::doctor::checks()));
            Ok(ExitCode::SUCCESS)
        }
        Command::Cleanup => cleanup(&workdir),
        Command::Agent { request } => {
            crate::agent::main(&request)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn run(
    workdir: &Path,
    suite_path: &Path,
    overrides: &[String],
    filters: &[String],
    out: Option<PathBuf>,
    resume: Option<PathBuf>,
    dry_run: bool,
) -> Result<ExitCode> {
    let suite = Suite::load(suite_path, overrides)?;
    let selectors = filters
        .iter()
        .map(|f| Selector::parse(f).map_err(|e| anyhow::anyhow!("--filter {f}: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let plan = Plan::new(&suite, &selectors).map_err(anyhow::Error::msg)?;
    for id in &plan.added_baselines {
        eprintln!(
            "isobench: also running {id}: the filter left out the baseline the selected cells are compared with"
        );
    }
    if dry_run {
        print!("{}", describe_plan(&suite, &plan));
        return Ok(ExitCode::SUCCESS);
    }
    let plan_record = plan.record(&suite);
    let set = match &resume {
        Some(dir) => {
            let set = ResultSet::open(dir)?;
            let stored = std::fs::read_to_string(dir.join("suite.toml")).unwrap_or_default();
            if stored != suite.resolved {
                bail!(
                    "{} was made from a different suite (or different --set values); resume it with the same suite and overrides",
                    dir.display()
                );
            }
            set
        }
        None => {
            let dir = out.unwrap_or_else(|| {
                PathBuf::from("results").join(format!("{}-{}", utc_stamp(), suite.name))
            });
            let set = ResultSet::create(&dir)?;
            set.write("suite.toml", suite.resolved.as_bytes())?;
            set.write_json("host.json", &facts::host_facts())?;
            set
        }
    };
    set.write_json("plan.json", &plan_record)?;
    process::install_interrupt_handler()?;
    let mut ledger = Ledger::open(workdir)?;
    let outcome = Runner::new(&suite, &plan, &set, &mut ledger, workdir.to_path_buf()).run_all();
    let closed = ledger.close();
    if let Err(e) = &closed {
        // Said even when the run was interrupted: a leftover mount must never go unmentioned.
        eprintln!(
            "isobench: error: removing what the runs created failed: {e:#}\nisobench: run `isobench cleanup` to retry"
        );
    }
    match outcome {
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            if closed.is_ok() {
                eprintln!("isobench: interrupted; everything the runs created was removed");
            }
            eprintln!(
                "isobench: continue with: isobench run {} --resume {}",
                suite_path.display(),
                set.dir.display()
            );
            return Ok(ExitCode::from(130));
        }
        other => other?,
    }
    if closed.is_err() {
        return Ok(ExitCode::FAILURE);
    }
    let (table, analysis) = write_report(&set)?;
    print!("{table}");
    println!(
        "\nresult set: {}\nreport:     {}",
        set.dir.display(),
        set.dir.join("report.md").display()
    );
    if analysis.cells.iter().all(|c| c.runs_ok == 0) {
        eprintln!("isobench: no cell produced a result");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn describe_plan(suite: &Suite, plan: &Plan) -> String {
    let mut out = format!(
        "suite {}: {} cells × {} repetitions = {} runs\n",
        suite.name,
        plan.cells.len(),
        suite.repeat,
        plan.runs.len()
    );
    let mut expected = std::time::Duration::ZERO;
    for cell in &plan.cells {
        let env = &suite.envs[cell.env];
        let volume = &suite.volumes[cell.volume];
        let workload = suite.workloads[cell.workload].variants[cell.variant]
            .spec
            .workload();
        expected += workload.expected_duration() * suite.repeat;
        let why = env.item.unavailable().or_else(|| volume.item.unavailable());
        match why {
            Some(w) => out.push_str(&format!("  {}  (will be skipped: {w})\n", cell.id)),
            None => out.push_str(&format!("  {}\n", cell.id)),
        }
    }
    out.push_str(&format!(
        "order: round-robin, repetition 1 of every cell first; expected at least {:.0} s\n",
        expected.as_secs_f64()
    ));
    out
}

/// Analyses a result set, writes report.md, returns the terminal table.
fn write_report(set: &ResultSet) -> Result<(String, compare::Analysis)> {
    let plan = set.plan()?;
    let runs = set.runs()?;
    let analysis = compare::analyze(&plan, &runs);
    let checks = compare::check_bounds(&analysis);
    let host = set.read_json("host.json").unwrap_or_default();
    set.write(
        "report.md",
        report::markdown::render(&analysis, &checks, &host).as_bytes(),
    )?;
    Ok((report::terminal::render(&analysis, &checks), analysis))
}

fn check(dir: &Path) -> Result<ExitCode> {
    let set = ResultSet::open(dir)?;
    let analysis = compare::analyze(&set.plan()?, &set.runs()?);
    let checks = compare::check_bounds(&analysis);
    if analysis.plan.bounds.is_empty() {
        println!("the suite has no [[bound]]; nothing to check");
        return Ok(ExitCode::SUCCESS);
    }
    let mut failed = 0;
    for c in &checks {
        let verdict = if c.passed { "pass" } else { "FAIL" };
        failed += usize::from(!c.passed);
        println!(
            "{verdict}  {}  {} overhead {:+.1}% (bound {:.1}%)",
            c.cell, c.bound.metric, c.overhead_pct, c.bound.max_overhead_pct
        );
    }
    if checks.is_empty() {
        println!("no cell has a baseline comparison for the bounded metrics");
    }
    println!(
        "{} of {} checks passed",
        checks.len() - failed,
        checks.len()
    );
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn cleanup(workdir: &Path) -> Result<ExitCode> {
    let report = ledger::cleanup(workdir)?;
    for r in &report.released {
        println!("removed {r}");
    }
    for pid in &report.still_running {
        println!("left alone: isobench process {pid} is still running");
    }
    for f in &report.failed {
        eprintln!("isobench: could not remove {f}");
    }
    if report.released.is_empty() && report.failed.is_empty() {
        println!("nothing to clean up");
    }
    Ok(if report.failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
