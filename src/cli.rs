//! The command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};

use crate::compare::BoundVerdict;
use crate::facts;
use crate::ledger::{self, Ledger};
use crate::plan::Plan;
use crate::report::{self, Format, Report, export::InconclusivePolicy};
use crate::runner::Runner;
use crate::store::Selector;
use crate::store::{ResultSet, utc_stamp};
use crate::suite::Suite;
use crate::sys::{self, Interrupted};

#[derive(Parser)]
#[command(name = "isobench", version, about = "What does this sandbox and this storage stack cost my workload?")]
struct Cli {
    /// Where isobench keeps its state files, mount points and volume images.
    #[arg(long, global = true, env = "ISOBENCH_WORKDIR", default_value = "/var/lib/isobench")]
    workdir: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a suite: expand its matrix, run every cell, write a result set and a report. Exits 0
    /// when every run worked (or its cell was skipped), 3 when a run failed (each named, with its
    /// reason), 1 on an error that stopped it, 130 when interrupted.
    Run(RunArgs),
    /// Print a result set's table again and write its reports (report.md and report.html by default).
    Report {
        dir: PathBuf,
        /// md, html, json or csv (repeatable).
        #[arg(long, value_name = "FORMAT")]
        format: Vec<String>,
        /// Also render report.html to report.png with headless Chromium.
        #[arg(long)]
        png: bool,
    },
    /// Check a result set against its bounds: exit 1 if a cell exceeds one (or has no
    /// measurement), 2 if some are inconclusive.
    Check {
        dir: PathBuf,
        /// Also write the verdicts as JUnit XML, one test case per bound and cell.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
        /// What an inconclusive bound counts as: report (exit 2), pass or fail.
        #[arg(long, default_value = "report", value_parser = ["report", "pass", "fail"])]
        inconclusive: String,
    },
    /// Compare two result sets cell by cell: a saved baseline A against a new run B.
    Compare {
        a: PathBuf,
        b: PathBuf,
        /// Only these metrics (repeatable; default: each cell's headline metrics).
        #[arg(long)]
        metric: Vec<String>,
    },
    /// Combine result sets of the same suite (re-runs of failed or noisy cells) into a new one.
    Merge {
        #[arg(required = true, num_args = 2..)]
        sets: Vec<PathBuf>,
        #[arg(short = 'o', long = "out")]
        out: PathBuf,
        /// Do not keep the merged result set in the history.
        #[arg(long)]
        no_history: bool,
    },
    /// What this machine can run, and why what it cannot is missing, with the command that brings it.
    Doctor {
        /// One JSON object per line of the table.
        #[arg(long)]
        json: bool,
    },
    /// Remove what killed runs left behind: mounts, loop devices, processes, files.
    Cleanup,
    /// Start, stop or list database servers isobench runs (Cassandra from Maven Central).
    Server {
        #[command(subcommand)]
        action: ServerAction,
    },
    /// Load a CQL database with cassandra-stress's command line (`isobench cql help`), or
    /// merge HDR logs (`isobench cql merge a.hdr b.hdr`).
    #[command(disable_help_flag = true)]
    Cql {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<String>,
    },
    /// Every result set kept over time: series, change points and what changed at them, a gate
    /// for CI (the history is $ISOBENCH_HISTORY: a file, or postgres://…).
    History {
        #[command(subcommand)]
        action: crate::history::command::Action,
    },
    /// Kubernetes: `render SUITE` prints the objects its k8s cells would apply.
    K8s {
        #[command(subcommand)]
        action: K8sAction,
    },
    /// (internal) Run a workload inside an environment and print one framed JSON report.
    #[command(hide = true)]
    Agent {
        #[arg(long, default_value = "-")]
        request: String,
    },
}

#[derive(Subcommand)]
enum K8sAction {
    /// Print the Secret, PersistentVolumeClaim and Job each k8s cell's run applies, as YAML.
    Render {
        suite: PathBuf,
        /// Override a suite value, as for `run` (repeatable).
        #[arg(long = "set", value_name = "KEY=VALUE")]
        overrides: Vec<String>,
    },
    /// (internal) Inside a database pod: run its node, or answer the orchestrator.
    #[command(hide = true)]
    Db {
        #[arg(long, default_value = crate::server::in_pod::SPEC_PATH)]
        spec: PathBuf,
        #[command(subcommand)]
        action: crate::server::in_pod::DbAction,
    },
}

#[derive(Subcommand)]
enum ServerAction {
    /// Fetch (once, into ~/.cache/isobench) and start a node; returns when it answers CQL.
    Start {
        /// cassandra
        kind: String,
        /// Its data, commit log, configuration and logs (default: <workdir>/cassandra-<port>).
        #[arg(long)]
        data: Option<PathBuf>,
        /// The JVM heap.
        #[arg(long, default_value = "1G")]
        heap: String,
        /// The CQL port (on 127.0.0.1).
        #[arg(long, default_value_t = 9042)]
        port: u16,
        /// The cassandra-all version on Maven Central.
        #[arg(long, env = "ISOBENCH_CASSANDRA_VERSION", default_value = crate::server::cassandra::DEFAULT_VERSION)]
        version: String,
        /// C1 JIT only: starts in half the time, runs at half the speed (for tests, not measurements).
        #[arg(long)]
        quick_jit: bool,
        /// Nodes in one ring, node k on 127.0.0.k (data in <data>/node<k>); returns when every
        /// node sees every node Up and Normal.
        #[arg(long, default_value_t = 1)]
        nodes: usize,
        /// Clients must connect with TLS (client_encryption_options); the node's certificate,
        /// for `isobench cql … -transport truststore=`, is <data>/conf/node-cert.pem.
        #[arg(long)]
        tls: bool,
    },
    /// Stop nodes (SIGTERM, SIGKILL after 45 s): those on --port, or all.
    Stop {
        /// cassandra
        kind: String,
        #[arg(long)]
        port: Option<u16>,
    },
    /// The nodes isobench started, and whether they answer CQL.
    Status,
    /// Fetch a server's distribution into the cache (once), without starting it.
    Fetch {
        /// cassandra
        kind: String,
        #[arg(long, env = "ISOBENCH_CASSANDRA_VERSION", default_value = crate::server::cassandra::DEFAULT_VERSION)]
        version: String,
    },
}

#[derive(Args)]
struct RunArgs {
    /// The suite file (TOML); or build one from --env and --fio/--cql.
    #[arg(required_unless_present = "env", conflicts_with = "env")]
    suite: Option<PathBuf>,
    /// Without a suite file: the environments to compare, the first the baseline (host, runc,
    /// crun, runsc, podman, vm, vm-virtio-blk …).
    #[arg(long, value_delimiter = ',', value_name = "ENV,...")]
    env: Vec<String>,
    /// Without a suite file: the volumes (tmpfs[:SIZE], ext4[:SIZE], xfs[:SIZE], dir:PATH;
    /// default ext4:2G).
    #[arg(long, value_delimiter = ',', value_name = "VOLUME,...", requires = "env")]
    volume: Vec<String>,
    /// Without a suite file: fio settings, a comma making a matrix axis: --fio rw=randread,randwrite bs=4k.
    #[arg(long, num_args = 1.., value_name = "KEY=VALUE", requires = "env")]
    fio: Vec<String>,
    /// Without a suite file: a cassandra-stress command run against Cassandra in each environment.
    #[arg(long, value_name = "COMMAND", requires = "env")]
    cql: Option<String>,
    /// Without a suite file: the environment the others are compared with (default: the first).
    #[arg(long, value_name = "ENV", requires = "env")]
    baseline: Option<String>,
    /// Without a suite file: search each cell's capacity, the highest rate it sustains with a
    /// latency percentile within a bound: --capacity p99=10ms.
    #[arg(long, value_name = "pNN=LATENCY", requires = "env")]
    capacity: Option<String>,
    /// Write the suite built from --env … to this file, to edit and run again.
    #[arg(long, value_name = "FILE", requires = "env")]
    save: Option<PathBuf>,
    /// Override a suite value: --set workload.fio.runtime=3s, --set repeat=5.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
    /// Run rounds until every comparison's 95% CI is within ±this (--set precision=…): "±5%".
    #[arg(long, value_name = "±PERCENT", allow_hyphen_values = true)]
    precision: Option<String>,
    /// Add an A/A check: a twin of the baseline env, compared with it like any cell
    /// (--set aa=true); the report counts its false verdicts.
    #[arg(long)]
    aa: bool,
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
    /// The seed the rounds' shuffled order is drawn from (a result set records its own), to
    /// replay an order.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Run the cells this machine can run and record the others as skipped; without it, a suite
    /// some of whose cells lack a tool or a runtime here stops before the first run, saying what.
    #[arg(long)]
    allow_skips: bool,
    /// Do not keep the result set in the history ($ISOBENCH_HISTORY).
    #[arg(long)]
    no_history: bool,
}

pub fn main() -> ExitCode {
    crate::kinds::register();
    crate::workload::cql::launch_loaders_as_isobench();
    let cli = Cli::parse();
    match dispatch(cli) {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<Interrupted>().is_some() => {
            eprintln!("isobench: interrupted");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("isobench: error: {}", crate::secrets::scrub(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

fn dispatch(cli: Cli) -> Result<ExitCode> {
    // The load generator and the agent need no state directory: they may run as any user, and
    // the agent inside a sandbox whose root is read-only.
    let command = match cli.command {
        Command::Cql { args } => return Ok(ExitCode::from(cql_stress::main(&args) as u8)),
        Command::Agent { request } => {
            crate::agent::main(&request)?;
            return Ok(ExitCode::SUCCESS);
        }
        Command::K8s { action: K8sAction::Db { spec, action } } => {
            crate::server::in_pod::answer(&spec, action)?;
            return Ok(ExitCode::SUCCESS);
        }
        other => other,
    };
    // Mount points are compared with /proc/self/mountinfo, which holds absolute, resolved paths.
    std::fs::create_dir_all(&cli.workdir).map_err(|e| anyhow::anyhow!("--workdir {}: {e}", cli.workdir.display()))?;
    let workdir = std::fs::canonicalize(&cli.workdir)?;
    match command {
        Command::Run(args) => run(&workdir, args),
        Command::Report { dir, format, png } => {
            let set = ResultSet::open(&dir)?;
            let formats = if format.is_empty() {
                vec![Format::Md, Format::Html]
            } else {
                format.iter().map(|f| Format::parse(f)).collect::<Result<Vec<_>>>()?
            };
            let mut report = Report::load(&set)?;
            report.history = crate::history::command::report_section(&set.dir);
            print!("{}", report::terminal::render(&report));
            for path in report::write(&set, &report, &formats)? {
                println!("wrote {}", path.display());
            }
            if png {
                let html = set.dir.join(Format::Html.file_name());
                if !html.exists() {
                    report::write(&set, &report, &[Format::Html])?;
                }
                let png = set.dir.join("report.png");
                report::html::screenshot(&html, &png, 1280)?;
                println!("wrote {}", png.display());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Check { dir, junit, inconclusive } => check(&dir, junit.as_deref(), &inconclusive),
        Command::Compare { a, b, metric } => {
            print!("{}", crate::result_sets::compare_sets(&ResultSet::open(&a)?, &ResultSet::open(&b)?, &metric)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::History { action } => crate::history::command::main(action),
        Command::Merge { sets, out, no_history } => {
            let sets = sets.iter().map(|d| ResultSet::open(d)).collect::<Result<Vec<_>>>()?;
            let history = crate::history::command::before_run(no_history);
            let merged = crate::result_sets::merge(&sets, &out)?;
            crate::history::command::after_run(history, &merged.dir, no_history);
            let mut report = Report::load(&merged)?;
            report.history = crate::history::command::report_section(&merged.dir);
            report::write(&merged, &report, &[Format::Md, Format::Html])?;
            print!("{}", report::terminal::render(&report));
            println!("\nmerged result set: {}", merged.dir.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor { json } => {
            sys::install_interrupt_handler()?;
            let checks = crate::doctor::checks(&workdir);
            print!("{}", if json { crate::doctor::render_json(&checks) } else { crate::doctor::render(&checks) });
            Ok(ExitCode::SUCCESS)
        }
        Command::Cleanup => cleanup(&workdir),
        Command::Cql { .. } | Command::Agent { .. } | Command::K8s { action: K8sAction::Db { .. } } => {
            unreachable!("handled above")
        }
        Command::Server { action } => server(&workdir, action),
        Command::K8s { action: K8sAction::Render { suite, overrides } } => {
            let suite = Suite::load(&suite, &overrides)?;
            let plan = Plan::new(&suite, &[], 0).map_err(anyhow::Error::msg)?;
            print!("{}", crate::runner::k8s_render::render_suite(&suite, &plan)?);
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The suite `--env`, `--volume`, `--fio` and `--cql` describe, read like a file (and saved with
/// `--save`).
fn adhoc_suite(args: &RunArgs) -> Result<Suite> {
    let adhoc = crate::suite::adhoc::Adhoc {
        envs: args.env.clone(),
        volumes: args.volume.clone(),
        fio: args.fio.clone(),
        cql: args.cql.clone(),
        baseline: args.baseline.clone(),
        capacity: args.capacity.clone(),
    };
    let text = adhoc.to_toml().map_err(anyhow::Error::msg)?;
    let cwd = std::env::current_dir()?;
    // Line numbers would point into a file the user has not seen: the key names the flag.
    let suite = Suite::from_text("command line", &text, &cwd, &args.overrides).map_err(|mut e| {
        if matches!(e.origin, crate::syntax::Origin::Line(_)) {
            e.origin = crate::syntax::Origin::Default;
        }
        e
    })?;
    if let Some(path) = &args.save {
        // What runs, --set values included, under the command that made it.
        let made_by = args.overrides.iter().fold(adhoc.command_line(), |line, o| format!("{line} --set {o}"));
        let header =
            format!("# Made by: {made_by}\n# A suite file like any other: edit it, run it with `isobench run FILE`.\n");
        std::fs::write(path, header + &suite.resolved).with_context(|| format!("--save {}", path.display()))?;
        eprintln!("isobench: wrote the suite to {}", path.display());
    }
    Ok(suite)
}

fn run(workdir: &Path, mut args: RunArgs) -> Result<ExitCode> {
    args.overrides.extend(args.precision.iter().map(|p| format!("precision={p}")));
    if args.aa {
        args.overrides.push("aa=true".into());
    }
    let suite = match &args.suite {
        Some(path) => Suite::load(path, &args.overrides)?,
        None => adhoc_suite(&args)?,
    };
    let selectors = args
        .filter
        .iter()
        .map(|f| Selector::parse(f).map_err(|e| anyhow::anyhow!("--filter {f}: {e}")))
        .collect::<Result<Vec<_>>>()?;
    let resumed = args.resume.as_deref().map(ResultSet::open).transpose()?;
    let seed = order_seed(args.seed, resumed.as_ref())?;
    let plan = Plan::new(&suite, &selectors, seed).map_err(anyhow::Error::msg)?;
    refuse_what_cannot_run(&suite, &plan, !selectors.is_empty())?;
    for id in &plan.added_baselines {
        eprintln!("isobench: also running {id}: the filter left out the baseline the selected cells are compared with");
    }
    if args.dry_run {
        print!("{}", crate::secrets::scrub(&describe_plan(&suite, &plan)));
        return Ok(ExitCode::SUCCESS);
    }
    refuse_what_is_missing(&suite, &plan, args.allow_skips)?;
    let history = crate::history::command::before_run(args.no_history);
    // Taken before the host's facts are written, which record it (and whether it is honoured);
    // dropped when the run ends.
    if suite.cpu_idle_poll
        && let Some(why) = sys::cpu_idle::poll_unavailable()
    {
        eprintln!(
            "isobench: cpu_idle = \"poll\" changes nothing here: {why}; the runs go on with the CPUs as they idle"
        );
    }
    let _polling =
        suite.cpu_idle_poll.then(sys::cpu_idle::hold_poll).transpose().context(
            "cpu_idle = \"poll\" needs the kernel's PM QoS request (run isobench as root, or remove cpu_idle)",
        )?;
    let set = match resumed {
        Some(set) => {
            let stored = std::fs::read_to_string(set.dir.join("suite.toml")).unwrap_or_default();
            if stored != suite.resolved {
                bail!(
                    "{} was made from a different suite (or different --set values); resume it with the same suite and overrides",
                    set.dir.display()
                );
            }
            set
        }
        None => {
            let dir =
                args.out.unwrap_or_else(|| PathBuf::from("results").join(format!("{}-{}", utc_stamp(), suite.name)));
            let set = ResultSet::create(&dir)?;
            set.write("suite.toml", suite.resolved.as_bytes())?;
            set.write_json("host.json", &facts::host_facts())?;
            set
        }
    };
    set.write_json("plan.json", &plan.record(&suite))?;
    sys::install_interrupt_handler()?;
    let ledger = Ledger::open(workdir)?;
    crate::env::install_agent(&ledger, workdir)?;
    let outcome = Runner::new(&suite, &plan, &set, &ledger, workdir.to_path_buf()).run_all();
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
            // An ad-hoc run resumes from the copy of its suite that the result set keeps.
            let suite_file = args.suite.clone().unwrap_or_else(|| set.dir.join("suite.toml"));
            eprintln!("isobench: continue with: isobench run {} --resume {}", suite_file.display(), set.dir.display());
            return Ok(ExitCode::from(130));
        }
        other => other?,
    }
    if closed.is_err() {
        return Ok(ExitCode::FAILURE);
    }
    crate::history::command::after_run(history, &set.dir, args.no_history);
    report_run(&set)
}

/// The seed the rounds' order is drawn from: `--seed`, else the resumed result set's, else a
/// fresh one.
fn order_seed(given: Option<u64>, resumed: Option<&ResultSet>) -> Result<u64> {
    let kept = resumed.and_then(|set| set.plan().ok()).and_then(|plan| plan.seed);
    match (given, kept) {
        (Some(given), Some(kept)) if given != kept => bail!(
            "--seed {given}: {} ran its rounds in the order of seed {kept}; resume it without --seed",
            resumed.map(|s| s.dir.display().to_string()).unwrap_or_default()
        ),
        (Some(seed), _) | (None, Some(seed)) => Ok(seed),
        (None, None) => Ok(crate::plan::fresh_seed()),
    }
}

/// Stops before any run when cells cannot run as the suite says, whatever the machine: too many
/// sandboxes for its memory, a cluster larger than it holds, a combination that cannot work.
fn refuse_what_cannot_run(suite: &Suite, plan: &Plan, filtered: bool) -> Result<()> {
    crate::runner::density::check(suite, plan).map_err(anyhow::Error::msg)?;
    // The largest cluster a cell runs on this machine (a database in a cluster's pods takes the
    // cluster's memory, not this machine's).
    let local = plan
        .cells
        .iter()
        .filter(|c| suite.envs[c.env].item.as_k8s().is_none())
        .filter_map(|c| match (suite.server(c.workload), &suite.workloads[c.workload].variants[c.variant].spec) {
            (Some(crate::server::ServerSpec::Managed(managed)), crate::workload::Spec::Cql(cql)) => {
                Some((cql.nodes.unwrap_or(managed.nodes), managed))
            }
            _ => None,
        })
        .max_by_key(|(nodes, _)| *nodes);
    if let Some((nodes, managed)) = local {
        let available = crate::facts::meminfo_kib("MemAvailable").map(|k| k * 1024);
        crate::server::cluster::check_memory(nodes, &managed.heap, available)
            .map_err(|e| anyhow::anyhow!("{}: [[server]]: {e}", suite.file))?;
    }
    // Over the whole matrix: a filter that keeps only baselines is a choice, not a typo (its
    // result set's check then fails the bounds that judged nothing).
    let idle = match filtered {
        true => Plan::new(suite, &[], plan.seed).map_err(anyhow::Error::msg)?.idle_bounds(suite),
        false => plan.idle_bounds(suite),
    };
    if !idle.is_empty() {
        bail!(
            "{}: bounds that would judge nothing:\n  {}\nfix the metric or the cells of each",
            suite.file,
            idle.join("\n  ")
        );
    }
    let refused = crate::runner::refusals(suite, plan);
    if !refused.is_empty() {
        let mut said = format!("{}: cells that cannot run as the suite says:\n", suite.file);
        for (why, cells) in &refused {
            said += &format!("  {why}\n    {}\n", cells.join(", "));
        }
        bail!("{}change the suite, or leave these cells out with cells = [...]", said);
    }
    Ok(())
}

/// Stops before any run when some cells lack a tool or a runtime here, unless `--allow-skips`.
fn refuse_what_is_missing(suite: &Suite, plan: &Plan, allow_skips: bool) -> Result<()> {
    let missing = crate::runner::missing_here(suite, plan);
    if missing.is_empty() || allow_skips {
        return Ok(());
    }
    let stopped: std::collections::BTreeSet<&String> = missing.iter().flat_map(|(_, cells)| cells).collect();
    let mut said =
        format!("{}: {} of {} cells cannot run on this machine:\n", suite.file, stopped.len(), plan.cells.len());
    for (why, cells) in &missing {
        said += &format!("  {why}\n    {}\n", cells.join(", "));
    }
    said += "`scripts/setup.sh test` (as root) installs every tool and runtime isobench's kinds use; what no package gives (KVM, a Docker engine, Kata, a cluster) stays missing: run again with --allow-skips to run the other cells and record these as skipped";
    bail!("{said}");
}

/// The report of a finished run: written, printed, and the exit code its runs earned.
fn report_run(set: &ResultSet) -> Result<ExitCode> {
    let mut report = Report::load(set)?;
    report.history = crate::history::command::report_section(&set.dir);
    report::write(set, &report, &[Format::Md, Format::Html])?;
    print!("{}", crate::secrets::scrub(&report::terminal::render(&report)));
    println!(
        "\nresult set: {}\nreport:     {} (and report.html)",
        set.dir.display(),
        set.dir.join("report.md").display()
    );
    if report.analysis.cells.iter().all(|c| c.runs_ok == 0) {
        eprintln!("isobench: no cell produced a result");
        return Ok(ExitCode::FAILURE);
    }
    let failed: Vec<_> = set.runs()?.into_iter().filter(|r| r.status == crate::store::Status::Failed).collect();
    if !failed.is_empty() {
        eprintln!("isobench: {} of the runs failed:", failed.len());
        for run in &failed {
            let why = run.error.as_deref().unwrap_or("(no reason recorded)");
            eprintln!("  {} #{}: {}", run.cell, run.rep, crate::secrets::scrub(&crate::store::error_headline(why)));
        }
        return Ok(ExitCode::from(RUN_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// `isobench run`'s exit code when it completed but some run failed (1 is an error that stopped
/// it, 130 an interrupt; `isobench check` judges bounds with 0, 1 and 2).
pub const RUN_FAILED: u8 = 3;

fn describe_plan(suite: &Suite, plan: &Plan) -> String {
    let mut out = format!(
        "suite {}: {} cells × {} repetitions: {} runs{}\n",
        suite.name,
        plan.cells.len(),
        suite.repeat,
        plan.runs.len(),
        if suite.repeat.is_adaptive() { " first, then more where the CI is still wide" } else { "" }
    );
    let mut expected = std::time::Duration::ZERO;
    for (i, cell) in plan.cells.iter().enumerate() {
        let env = &suite.envs[cell.env];
        let volume = &suite.volumes[cell.volume];
        let workload = suite.workloads[cell.workload].variants[cell.variant].spec.workload();
        expected += workload.expected_duration() * suite.repeat.min;
        match crate::runner::skip_reason(env, volume) {
            Some(why) => out.push_str(&format!("  {:>3}  {}  (will be skipped: {why})\n", i + 1, cell.id)),
            None => out.push_str(&format!("  {:>3}  {}\n", i + 1, cell.id)),
        }
    }
    out.push_str(&match suite.order {
        crate::store::Order::Fixed => "order: fixed, every round as the suite lists the cells:\n".to_string(),
        crate::store::Order::Shuffled => {
            format!("order: shuffled from seed {} (--seed {} replays it), round by round:\n", plan.seed, plan.seed)
        }
    });
    out.push_str("  (a block [ ] holds the cells compared with one baseline, run back to back; each is paired with the baseline's run of its block)\n");
    for (i, round) in plan.rounds().iter().enumerate() {
        let blocks: Vec<String> = round
            .iter()
            .map(|block| format!("[{}]", block.iter().map(|c| (c + 1).to_string()).collect::<Vec<_>>().join(" ")))
            .collect();
        out.push_str(&format!("  round {}: {}\n", i + 1, blocks.join(" ")));
    }
    if let Some(p) = &suite.precision {
        out.push_str(&format!(
            "then rounds of the cells whose comparison's 95% CI is wider than ±{}% (with their baselines), up to {} rounds{}\n",
            p.half_width,
            p.max_rounds,
            p.budget_s.map_or(String::new(), |s| format!(" or {s:.0} s of runs"))
        ));
    }
    out.push_str(&format!("expected at least {:.0} s\n", expected.as_secs_f64()));
    out
}

fn check(dir: &Path, junit: Option<&Path>, inconclusive: &str) -> Result<ExitCode> {
    let set = ResultSet::open(dir)?;
    let report = Report::load(&set)?;
    let policy = match inconclusive {
        "pass" => InconclusivePolicy::Pass,
        "fail" => InconclusivePolicy::Fail,
        _ => InconclusivePolicy::Report,
    };
    if let Some(path) = junit {
        crate::sys::write_atomic(path, report::export::junit(&report, policy).as_bytes())?;
    }
    if report.analysis.plan.bounds.is_empty() {
        println!("the suite has no [[bound]]; nothing to check");
        return Ok(ExitCode::SUCCESS);
    }
    for c in &report.checks {
        if c.cell == crate::compare::NO_CELL {
            let within = c.bound.cells.as_deref().map_or(String::new(), |s| format!(" (cells = \"{s}\")"));
            println!(
                "{:<14} the bound on {}{within} judged no cell: no cell it selects recorded the metric",
                c.verdict.text(),
                c.bound.metric
            );
            continue;
        }
        println!(
            "{:<14} {}  {} overhead {:+.1}% ({}), bound {:.1}%",
            c.verdict.text(),
            c.cell,
            c.bound.metric,
            c.overhead_pct,
            figures::units::percent_interval_words(c.overhead_ci),
            c.bound.max_overhead_pct
        );
    }
    let (pass, fail, open, missing) = (
        report.count(BoundVerdict::Pass),
        report.count(BoundVerdict::Fail),
        report.count(BoundVerdict::Inconclusive),
        report.count(BoundVerdict::Missing),
    );
    println!("{pass} pass, {fail} fail, {open} inconclusive, {missing} without a measurement");
    let code = if fail + missing > 0 || (open > 0 && policy == InconclusivePolicy::Fail) {
        1
    } else if open > 0 && policy == InconclusivePolicy::Report {
        2
    } else {
        0
    };
    Ok(ExitCode::from(code))
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
    Ok(if report.failed.is_empty() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn server(workdir: &Path, action: ServerAction) -> Result<ExitCode> {
    use crate::server;
    match action {
        ServerAction::Start { kind, data, heap, port, version, quick_jit, nodes, tls } => {
            let options = server::StartOptions { data, heap, port, version, quick_jit, nodes, tls };
            let cluster = server::start(workdir, &kind, &options)?;
            for node in &cluster.nodes {
                println!(
                    "Cassandra {} answers CQL on {}:{} after {:.1} s (pid {}, data {}, log {})",
                    node.release_version,
                    node.config.address,
                    node.config.native_port,
                    node.ready_after.as_secs_f64(),
                    node.pid,
                    node.config.data.display(),
                    node.config.log().display()
                );
                if node.config.tls {
                    println!(
                        "Clients connect with TLS only: isobench cql … -transport truststore={}",
                        node.config.certificate().display()
                    );
                }
            }
            if let Some(ring) = cluster.ring_after {
                println!(
                    "{} nodes form one ring (every node sees all Up and Normal) {:.1} s after the first started",
                    cluster.nodes.len(),
                    ring.as_secs_f64()
                );
            }
        }
        ServerAction::Stop { kind, port } => {
            let stopped = server::stop(workdir, &kind, port)?;
            if stopped.is_empty() {
                println!(
                    "no Cassandra isobench started is recorded{}",
                    port.map(|p| format!(" on port {p}")).unwrap_or_default()
                );
            }
            for (node, took) in stopped {
                println!(
                    "stopped Cassandra on {}:{} (pid {}) in {:.1} s",
                    node.config.address,
                    node.config.native_port,
                    node.pid,
                    took.as_secs_f64()
                );
            }
        }
        ServerAction::Fetch { kind, version } => {
            let dist = server::fetch(&kind, &version)?;
            println!("Cassandra {version} is in {}", dist.lib().display());
        }
        ServerAction::Status => {
            let nodes = server::status(workdir)?;
            if nodes.is_empty() {
                println!("no servers started by isobench");
            }
            let mut all_up = true;
            for (node, answer) in nodes {
                match answer {
                    Ok(version) => println!(
                        "cassandra {version} on {}:{}: up (pid {}, data {})",
                        node.config.address,
                        node.config.native_port,
                        node.pid,
                        node.config.data.display()
                    ),
                    Err(e) => {
                        all_up = false;
                        println!("cassandra on {}:{}: {e:#}", node.config.address, node.config.native_port);
                    }
                }
            }
            if !all_up {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
