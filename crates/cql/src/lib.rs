//! The CQL load generator: cassandra-stress's command lines, data and output, on the ScyllaDB
//! Rust driver. `cql-stress <cassandra-stress arguments>` and `cql-stress merge a.hdr …` (as
//! `isobench cql` inside isobench, which embeds it).

pub mod capacity;
pub mod consistency;
pub mod data;
pub mod dist;
pub mod engine;
pub mod failover;
pub mod graph;
pub mod hdrlog;
pub mod loaders;
pub mod metrics;
pub mod output;
pub mod process;
pub mod profile;
pub mod random;
pub mod schema;
pub mod settings;
pub mod stress;
pub mod tls;
pub mod users;
pub mod vars;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};

use self::output::Out;
use self::settings::{ArgError, Settings};
use self::stress::Report;

const USAGE: &str = "\
Usage: PROGRAM <command> [options]      (cassandra-stress's syntax)
       PROGRAM merge <a.hdr> <b.hdr> …  (one summary of several loaders' HDR logs)

Commands: write (insert), read, mixed ratio(read=1,write=1), counter_write, counter_read,
          user profile=FILE.yaml[,FILE.yaml] ops(insert=1,QUERY=2 | SPEC.insert=1,…) [clustering=DIST];
          each with n=N | duration=Ns|m|h | err<0.02, cl=, no-warmup, truncate=
Options:  -rate threads=N [throttle=R/s | fixed=R/s] | auto threads>=A threads<=B
          -pop seq=A..B | dist=uniform|gaussian|exp|extreme|fixed(...)
          -schema keyspace= replication(strategy=,factor=) compaction(strategy=,…) compression=
          -col n=FIXED(k) size=DIST   -mode user= password= compression=lz4 connectionsPerHost=
                                        requestTimeout=12s heartbeat=1s|off heartbeatTimeout=5s
                                        tcpKeepalive=5s|off failover=on|off speculate=DELAY|off
          -transport truststore=FILE truststore-password= [keystore=FILE keystore-password=]
                     [ssl-protocol=TLSv1.2|TLSv1.3 ssl-ciphers=A,B]  (JKS, PKCS12 or PEM)
          -node a,b,c   -port native=N   -log interval=Ns hdrfile= file=   -errors ignore retries=N
          -graph file= revision= title= op=
          -validate                (user: check every row a query reads against the rows written)
          -insert partitions=DIST batchtype=LOGGED|UNLOGGED|COUNTER select-ratio=DIST/N  (user)
          -loaders N [dir=PATH]   (N loader processes, -pop seq= and n= split into N slices;
                                 their HDR logs merged, kept in dir= if given)
Example:  PROGRAM write n=1M -rate threads=64 -node 127.0.0.1
";

/// How users call the load generator here: "cql-stress", or "isobench cql" within isobench.
pub fn program() -> &'static str {
    process::launcher().name
}

/// The command line as shown in reports and graphs: secrets replaced by REDACTED.
pub fn redacted(args: &[String]) -> String {
    settings::tokens(args)
        .into_iter()
        .map(|t| match t.to_ascii_lowercase().find("password=") {
            Some(at) => format!("{}password=REDACTED", &t[..at]),
            None => t,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with the value of every `password=` in it replaced by REDACTED: for messages that
/// quote a command line's tokens back (an option in the wrong group, say).
pub fn redact_passwords(text: &str) -> String {
    const KEY: &str = "password=";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.to_ascii_lowercase().find(KEY) {
        let value_start = at + KEY.len();
        out.push_str(&rest[..value_start]);
        out.push_str("REDACTED");
        let value = &rest[value_start..];
        let end = value.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ')')).unwrap_or(value.len());
        rest = &value[end..];
    }
    out.push_str(rest);
    out
}

/// Parses, runs and reports a cassandra-stress command line; the exit code.
pub fn main(args: &[String]) -> i32 {
    match args.first().map(String::as_str) {
        None | Some("help" | "-h" | "--help") => {
            print!("{}", USAGE.replace("PROGRAM", program()));
            return if args.is_empty() { 1 } else { 0 };
        }
        Some("merge") => {
            let paths: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
            return match hdrlog::merge(&paths) {
                Ok(text) => {
                    print!("{text}");
                    0
                }
                Err(e) => {
                    eprintln!("{} merge: {e:#}", program());
                    1
                }
            };
        }
        _ => {}
    }
    match loaders::take(&settings::tokens(args)) {
        Ok((Some(loaders), rest)) => return run_loaders(&rest, &loaders),
        Ok((None, _)) => {}
        Err(e) => {
            eprint!("{e}");
            return 1;
        }
    }
    let settings = match settings::parse(args) {
        Ok(s) => s,
        Err(e @ ArgError::Ignored(_)) => {
            print!("{e}");
            return 1;
        }
        Err(e) => {
            eprint!("{e}");
            eprintln!("Run `{} help` for the syntax.", program());
            return 1;
        }
    };
    match run(settings, &redacted(args), true, Pauses::AsCassandraStress) {
        Ok(report) if report.success => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("{e:#}");
            1
        }
    }
}

/// A loader's timeouts, retries and speculative executions, where it had any (its `client,` rows
/// are in its log).
fn client_totals(output: &str) -> String {
    failover::totals(&failover::rows(output)).map_or(String::new(), |t| {
        format!("  {} timeouts  {} retries  {} speculative", t.timeouts, t.retries, t.speculative)
    })
}

/// `-loaders N`: N loader processes, each with its share of the population; prints each one's
/// command line, then the Results of their merged HDR logs and each loader's rate and errors.
fn run_loaders(tokens: &[String], how: &loaders::Loaders) -> i32 {
    let commands = match loaders::split(tokens, how.count) {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return 1;
        }
    };
    for (i, command) in commands.iter().enumerate() {
        println!("loader {}: {} {}", i + 1, program(), redacted(command));
    }
    let dir = how
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join(format!("cql-stress-loaders-{}", std::process::id())));
    let outcome = loaders::run(&commands, &dir, &|| {}).and_then(|ran| {
        let hdrs: Vec<PathBuf> = ran.iter().filter(|l| l.hdr.exists()).map(|l| l.hdr.clone()).collect();
        if hdrs.is_empty()
            && let Some(failed) = loaders::first_failure(&ran)
        {
            anyhow::bail!("no loader began its load; {failed}");
        }
        Ok((hdrlog::merge(&hdrs)?, ran))
    });
    match outcome {
        Ok((merged, ran)) => {
            print!("\n{merged}");
            println!("Total errors              : {:>10}", ran.iter().map(|l| l.errors).sum::<u64>());
            println!("\nPer loader:");
            for (i, l) in ran.iter().enumerate() {
                println!(
                    "loader {:>2}: {:>10.0} op/s  {:>12} operations  {:>6} errors{}{}",
                    i + 1,
                    l.op_rate,
                    l.operations,
                    l.errors,
                    client_totals(&l.output),
                    if l.success { "" } else { "  FAILED" }
                );
            }
            let failed: Vec<&loaders::Loader> = ran.iter().filter(|l| !l.success).collect();
            for l in &failed {
                eprintln!("{}: {}", l.command, process::tail_lines(&l.output, 5));
            }
            if how.dir.is_none() {
                let _ = std::fs::remove_dir_all(&dir);
            }
            i32::from(!failed.is_empty())
        }
        Err(e) => {
            eprintln!("{} -loaders: {e:#} (the loaders' logs are in {})", program(), dir.display());
            1
        }
    }
}

/// One runtime thread per 128 operations in flight, at most one per core: a single thread
/// drives 128 in-flight requests with the least CPU per operation (no work stealing, no
/// cross-thread wake-ups), and more threads only pay off when one core cannot keep up.
fn runtime_threads(in_flight: u32) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    (in_flight as usize).div_ceil(128).clamp(1, cores)
}

/// The async runtime a load of `in_flight` operations runs on (`ISOBENCH_CQL_WORKERS` threads
/// when set).
fn runtime(in_flight: u32) -> Result<tokio::runtime::Runtime> {
    let workers = std::env::var("ISOBENCH_CQL_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| runtime_threads(in_flight));
    let mut builder = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(workers);
        b
    };
    builder.enable_all().build().context("starting the async runtime")
}

/// A capacity search in this process: `threads` tasks per step against the settings' nodes,
/// `on_step` told of each step as it ends (see `stress::capacity`).
pub fn capacity(
    settings: Settings,
    threads: u32,
    search: &mut crate::capacity::Search,
    on_step: &mut (dyn FnMut(&crate::capacity::Step) + Send),
) -> Result<()> {
    for w in &settings.warnings {
        eprintln!("WARNING: {w}");
    }
    let runtime = runtime(threads)?;
    let result = runtime.block_on(stress::capacity(Arc::new(settings), threads, search, on_step));
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    result
}

/// How a run paces itself around its schema.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Pauses {
    /// cassandra-stress's sleeps: a second per node after making the schema, two before the load.
    AsCassandraStress,
    /// None: a suite's phases run back to back (the driver has waited for the nodes to agree on
    /// the schema), and the measured phase begins with its load rather than with a sleep.
    None,
}

/// Runs parsed settings to the end (printing cassandra-stress's output when `print`), writes the
/// graph if asked, and returns what was measured.
pub fn run(settings: Settings, command_line: &str, print: bool, pauses: Pauses) -> Result<Report> {
    for w in &settings.warnings {
        eprintln!("WARNING: {w}");
    }
    let file = match &settings.log.file {
        Some(path) => Some(
            std::fs::File::create(path).with_context(|| format!("-log file={}: cannot create it", path.display()))?,
        ),
        None => None,
    };
    let mut out = if print { Out::new(file) } else { Out::quiet() };
    let settings = Arc::new(settings);
    let runtime = runtime(settings.rate.threads.unwrap_or(settings.rate.max_threads))?;
    let report = runtime.block_on(stress::stress(settings.clone(), &mut out, pauses));
    // The session's background tasks end with the runtime; nothing may outlive the run.
    runtime.shutdown_timeout(std::time::Duration::from_secs(2));
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            out.line("FAILURE");
            return Err(e);
        }
    };
    if let Some(g) = &settings.graph {
        for r in &report.runs {
            let revision = if report.runs.len() > 1 {
                format!("{} ({} threads)", g.revision, r.threads)
            } else {
                g.revision.clone()
            };
            graph::Graph::append(
                &g.file,
                g.title.as_deref(),
                graph::Revision {
                    revision,
                    command: command_line.to_string(),
                    op: g.op.clone().map(|o| o.to_ascii_uppercase()).unwrap_or_else(|| "total".into()),
                    intervals: r.intervals.clone(),
                    summary: r.summary(),
                },
            )?;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_the_command_line_shown() {
        let args: Vec<String> =
            "write n=1 -mode native cql3 user=u password = s3cret".split(' ').map(str::to_string).collect();
        let shown = redacted(&args);
        assert_eq!(shown, "write n=1 -mode native cql3 user=u password=REDACTED");
        assert_eq!(
            redact_passwords("\"PassWord=s3cret\" is not an option of -rate; also password=x,y"),
            "\"PassWord=REDACTED\" is not an option of -rate; also password=REDACTED,y"
        );
    }
}
