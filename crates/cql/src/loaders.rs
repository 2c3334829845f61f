//! `-loaders N`: one cassandra-stress command cut into N loaders, as cluster studies run it from N
//! machines. `-pop seq=A..B` (a write's default population included) becomes N contiguous,
//! disjoint slices whose union is the range, and `n=` is split alike; a distribution keeps its
//! shape and each loader draws from its own seed. Each loader is a process of its own writing an
//! HDR log; the result is merged from those logs, never from averaged percentiles.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use anyhow::{Context, Result, anyhow};

use super::failover::{self, ClientRow};
use super::hdrlog;
use super::settings::{self, ArgError, Population};
use crate::process::{self, StdinFeed};
use crate::vars::{KEYSTORE_PASSWORD_VAR, PASSWORD_VAR, SEED_VAR, TRUSTSTORE_PASSWORD_VAR};

/// The command-line options a loader gets in its environment instead.
const SECRETS: [(&str, &str); 3] = [
    ("password=", PASSWORD_VAR),
    ("truststore-password=", TRUSTSTORE_PASSWORD_VAR),
    ("keystore-password=", KEYSTORE_PASSWORD_VAR),
];

/// The environment variable that makes a loader say [`READY_LINE`] once connected and prepared,
/// then wait for "go" on its stdin before its load: the loaders of one run measure one window.
pub const START_TOGETHER_VAR: &str = "ISOBENCH_CQL_START_TOGETHER";
pub const READY_LINE: &str = "Connected and prepared; waiting for the other loaders.";
/// How a loader ends when another ended before it was ready.
pub const CALLED_OFF: &str = "called off before the load: another loader of this run ended before it was ready";

/// `-loaders N [dir=PATH]` taken out of a command line's tokens.
#[derive(Debug, PartialEq)]
pub struct Loaders {
    pub count: u32,
    /// Where each loader's HDR log and output are kept; without it they go when merged.
    pub dir: Option<PathBuf>,
}

/// `-loaders` taken out of a command line's tokens, if there, and the rest.
pub fn take(tokens: &[String]) -> Result<(Option<Loaders>, Vec<String>), ArgError> {
    let Some(at) = tokens.iter().position(|t| t.eq_ignore_ascii_case("-loaders")) else {
        return Ok((None, tokens.to_vec()));
    };
    let end = tokens[at + 1..].iter().position(|t| t.starts_with('-')).map_or(tokens.len(), |i| at + 1 + i);
    let (mut count, mut dir) = (None, None);
    for item in &tokens[at + 1..end] {
        match (item.strip_prefix("dir="), item.parse::<u32>()) {
            (Some(path), _) => dir = Some(PathBuf::from(path)),
            (None, Ok(n)) if n >= 1 => count = Some(n),
            _ => return Err(ArgError::Invalid(format!("-loaders: unknown \"{item}\"; write -loaders N [dir=PATH]\n"))),
        }
    }
    let count = count
        .ok_or_else(|| ArgError::Invalid("-loaders needs a count of loader processes, e.g. -loaders 4\n".into()))?;
    let rest = tokens[..at].iter().chain(&tokens[end..]).cloned().collect();
    Ok((Some(Loaders { count, dir }), rest))
}

/// Each loader's command line, in order: its slice of the population and of `n=`.
pub fn split(tokens: &[String], loaders: u32) -> Result<Vec<Vec<String>>, ArgError> {
    split_with(tokens, loaders, &std::collections::BTreeMap::new())
}

/// As [`split`], with profiles that are not files here (see [`settings::parse_with`]).
pub fn split_with(
    tokens: &[String],
    loaders: u32,
    profiles: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<Vec<String>>, ArgError> {
    let settings = settings::parse_with(tokens, profiles)?;
    if settings.log.hdrfile.is_some() {
        return Err(ArgError::Invalid("-loaders writes one HDR log per loader itself; leave out -log hdrfile=".into()));
    }
    let n = i128::from(loaders);
    let count = settings.command.count();
    if let Some(count) = count
        && (count as i128) < n
    {
        return Err(ArgError::Invalid(format!("n={count} cannot be split between {loaders} loaders")));
    }
    let slices = match settings.population {
        Population::Sequence { start, end, .. } => {
            let len = i128::from(end) - i128::from(start) + 1;
            if len < n {
                return Err(ArgError::Invalid(format!(
                    "-pop seq={start}..{end} has fewer keys than the {loaders} loaders"
                )));
            }
            let at = |i: i128| (i128::from(start) + len * i / n) as i64;
            Some((0..n).map(|i| (at(i), at(i + 1) - 1)).collect::<Vec<_>>())
        }
        Population::Distribution(_) => None,
    };
    Ok((0..n)
        .map(|i| {
            let mut own = tokens.to_vec();
            if let Some(count) = count {
                let share = (count as i128 * (i + 1) / n - count as i128 * i / n) as u64;
                set(&mut own, None, "n=", &share.to_string());
            }
            if let Some(slices) = &slices {
                let (a, b) = slices[i as usize];
                set(&mut own, Some("-pop"), "seq=", &format!("{a}..{b}"));
            }
            own
        })
        .collect())
}

/// Sets `key` (like "n=" or "seq=") in the command's parameters (`group` None) or in an option's,
/// adding the option when the line has none.
pub fn set(tokens: &mut Vec<String>, group: Option<&str>, key: &str, value: &str) {
    let item = format!("{key}{value}");
    let start = match group {
        None => Some(1),
        Some(g) => tokens.iter().position(|t| t.eq_ignore_ascii_case(g)).map(|i| i + 1),
    };
    let Some(start) = start else {
        tokens.extend([group.expect("an option").to_string(), item]);
        return;
    };
    let end = tokens[start..].iter().position(|t| t.starts_with('-')).map_or(tokens.len(), |i| start + i);
    match (start..end).find(|&i| tokens[i].to_ascii_lowercase().starts_with(key)) {
        Some(i) => tokens[i] = item,
        None => tokens.insert(end, item),
    }
}

/// One loader's run.
pub struct Loader {
    /// Its command line, passwords redacted.
    pub command: String,
    pub hdr: PathBuf,
    pub output: String,
    pub success: bool,
    pub operations: u64,
    pub op_rate: f64,
    pub errors: u64,
}

/// Runs the loaders as processes of this binary at once, each writing its HDR log and its
/// output into `dir`; returns when all have ended. `running` is called once, when every loader
/// is past its set-up (connected, schema made) and has begun its load: a fault timed from the
/// measured phase must not hit a loader still making the schema on a slow machine.
pub fn run(commands: &[Vec<String>], dir: &Path, running: &(dyn Fn() + Sync)) -> Result<Vec<Loader>> {
    run_with(commands, dir, &[], running)
}

/// As [`run`], each loader with the variables `env` in its environment too.
pub fn run_with(
    commands: &[Vec<String>],
    dir: &Path,
    env: &[(&str, String)],
    running: &(dyn Fn() + Sync),
) -> Result<Vec<Loader>> {
    let exe = std::env::current_exe().context("finding this program's own binary")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let line = StartLine::new(commands.len());
    let begun = AtomicUsize::new(0);
    let on_running = || {
        if begun.fetch_add(1, Ordering::SeqCst) + 1 == commands.len() {
            running();
        }
    };
    let outcomes: Vec<Result<Loader>> = std::thread::scope(|scope| {
        let handles: Vec<_> = commands
            .iter()
            .enumerate()
            .map(|(i, command)| {
                let (exe, on_running, line) = (&exe, &on_running, &line);
                scope.spawn(move || run_one(exe, i + 1, command, dir, env, Some(line), on_running))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("a loader's thread panicked")))).collect()
    });
    outcomes.into_iter().collect()
}

/// Runs loader number `index` (1-based: its seed) alone, in this process's place: one pod of an
/// Indexed Job. `running` is called when it is past its set-up and has begun its load.
pub fn run_single(index: usize, command: &[String], dir: &Path, running: &(dyn Fn() + Sync)) -> Result<Loader> {
    let exe = std::env::current_exe().context("finding this program's own binary")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    run_one(&exe, index, command, dir, &[], None, running)
}

/// The loaders of one run start their load together. Each starts as soon as it can, but its own
/// start (a process, a connection, the schema, the statements) takes a varying time on a busy
/// machine, and another's start costs the server and the CPU: a loader already measuring would
/// count that as its latency, and their windows, merged, would span more than any of them ran.
struct StartLine {
    state: Arc<(Mutex<Arrivals>, Condvar)>,
}

#[derive(Default)]
struct Arrivals {
    expected: usize,
    ready: usize,
    /// Loaders that ended before they were ready: the others are called off, not waited for.
    gone: usize,
}

impl StartLine {
    fn new(expected: usize) -> StartLine {
        StartLine { state: Arc::new((Mutex::new(Arrivals { expected, ..Default::default() }), Condvar::new())) }
    }

    fn update(&self, change: impl FnOnce(&mut Arrivals)) {
        let (lock, changed) = &*self.state;
        change(&mut lock.lock().unwrap_or_else(|p| p.into_inner()));
        changed.notify_all();
    }

    /// What a loader's stdin gets once every loader has arrived: "go", or nothing when one of
    /// them ended instead.
    fn go(&self) -> StdinFeed {
        let state = Arc::clone(&self.state);
        Box::new(move |stdin| {
            let (lock, changed) = &*state;
            let mut arrivals = lock.lock().unwrap_or_else(|p| p.into_inner());
            while arrivals.ready + arrivals.gone < arrivals.expected {
                arrivals = changed.wait(arrivals).unwrap_or_else(|p| p.into_inner());
            }
            if arrivals.gone == 0 {
                let _ = stdin.write_all(b"go\n");
            }
        })
    }
}

fn run_one(
    exe: &Path,
    index: usize,
    command: &[String],
    dir: &Path,
    env: &[(&str, String)],
    start_line: Option<&StartLine>,
    running: &(dyn Fn() + Sync),
) -> Result<Loader> {
    let hdr = dir.join(format!("loader-{index}.hdr"));
    let mut args = command.to_vec();
    set(&mut args, Some("-log"), "hdrfile=", &hdr.display().to_string());
    let mut cmd = Command::new(exe);
    args.retain(|t| match SECRETS.iter().find_map(|(key, var)| Some((t.strip_prefix(key)?, var))) {
        Some((secret, var)) => {
            cmd.env(var, secret);
            false
        }
        None => true,
    });
    let launcher = process::launcher();
    cmd.args(launcher.subcommand).args(&args).env(SEED_VAR, index.to_string()).envs(env.iter().map(|(k, v)| (k, v)));
    if start_line.is_some() {
        cmd.env(START_TOGETHER_VAR, "1");
    }
    let (mut said_running, mut said_ready) = (false, false);
    let mut on_line = |line: &str| {
        if !said_ready && line == READY_LINE {
            said_ready = true;
            start_line.inspect(|s| s.update(|a| a.ready += 1));
        }
        // cassandra-stress's "Running WRITE with 8 threads …" opens each run of the load.
        if !said_running && line.starts_with("Running ") {
            said_running = true;
            running();
        }
    };
    let finished = (launcher.run)(&mut cmd, &mut on_line, start_line.map(StartLine::go));
    if let Some(line) = start_line
        && !said_ready
    {
        line.update(|a| a.gone += 1);
    }
    let finished = finished?;
    let output = format!("{}{}", finished.stdout, finished.stderr);
    std::fs::write(dir.join(format!("loader-{index}.log")), &output)?;
    Ok(Loader::read(super::redacted(command), hdr, output, finished.status.success()))
}

impl Loader {
    /// Why a failed loader failed, in one line: its last (its error, when it could say one; its
    /// whole output is in its log).
    pub fn reason(&self) -> String {
        process::tail_lines(&self.output, 1).trim().to_string()
    }

    /// A loader's outcome from its HDR log and its output (here, or carried back from a pod).
    pub fn read(command: String, hdr: PathBuf, output: String, success: bool) -> Loader {
        let (operations, op_rate) = match hdrlog::series(std::slice::from_ref(&hdr), "st") {
            Ok(all) => (all.histogram.len(), all.rate()),
            Err(_) => (0, 0.0),
        };
        Loader { command, hdr, success, errors: total_errors(&output), output, operations, op_rate }
    }
}

/// The loaders' results as one: operations and rate over the span of all their logs, and the
/// latency histogram (`series` "st" for service time, "rt" for response time) of every loader's
/// values together.
pub struct Merged {
    pub op_rate: f64,
    pub latency: hdrhistogram::Histogram<u64>,
    pub errors: u64,
    /// Each loader's command line, rate and errors, in order.
    pub each: Vec<Each>,
    /// Every loader's `client,` rows (each over its own intervals): what the clients did besides
    /// getting answers.
    pub client: Vec<ClientRow>,
    /// What went wrong, when a loader failed.
    pub failed: Option<String>,
}

pub struct Each {
    pub command: String,
    pub op_rate: f64,
    pub errors: u64,
}

pub fn merge(loaders: &[Loader], series: &str) -> Result<Merged> {
    let failed = first_failure(loaders);
    let logs: Vec<PathBuf> = loaders.iter().filter(|l| l.hdr.exists()).map(|l| l.hdr.clone()).collect();
    // A loader that failed before it measured leaves an empty log: its own reason is the one.
    let all = hdrlog::series(&logs, series).map_err(|e| failed.as_ref().map_or(e, |f| anyhow!("{f}")))?;
    let each =
        loaders.iter().map(|l| Each { command: l.command.clone(), op_rate: l.op_rate, errors: l.errors }).collect();
    Ok(Merged {
        op_rate: all.rate(),
        latency: all.histogram,
        errors: loaders.iter().map(|l| l.errors).sum(),
        each,
        client: loaders.iter().flat_map(|l| failover::rows(&l.output)).collect(),
        failed,
    })
}

/// "loader K failed: why" of the first loader that failed on its own, rather than one that it
/// called off.
pub fn first_failure(loaders: &[Loader]) -> Option<String> {
    loaders
        .iter()
        .enumerate()
        .filter(|(_, l)| !l.success)
        .min_by_key(|(_, l)| l.reason().contains(CALLED_OFF))
        .map(|(i, l)| format!("loader {} failed: {}", i + 1, l.reason()))
}

/// The "Total errors" figure of a loader's Results block.
fn total_errors(output: &str) -> u64 {
    output
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("Total errors"))
        .and_then(|rest| rest.trim_start_matches([' ', ':']).split_whitespace().next())
        .and_then(|n| n.replace(',', "").parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        settings::tokens(&[text.to_string()])
    }

    fn lines(text: &str, n: u32) -> Vec<String> {
        split(&words(text), n).unwrap().iter().map(|t| t.join(" ")).collect()
    }

    #[test]
    fn a_sequence_is_cut_into_contiguous_slices_whose_union_is_the_range() {
        // The study's form: 10 loaders, each n = its slice.
        let l = lines("write n=7000000000 cl=QUORUM -pop seq=1..7000000000 -rate threads=100", 10);
        assert_eq!(l[0], "write n=700000000 cl=QUORUM -pop seq=1..700000000 -rate threads=100");
        assert_eq!(l[1], "write n=700000000 cl=QUORUM -pop seq=700000001..1400000000 -rate threads=100");
        assert_eq!(l[9], "write n=700000000 cl=QUORUM -pop seq=6300000001..7000000000 -rate threads=100");
        // Uneven: 10 keys, 3 loaders; the slices tile the range and the counts sum to n.
        let l = lines("write n=10 -pop seq=1..10 no-wrap", 3);
        assert_eq!(
            l,
            ["write n=3 -pop seq=1..3 no-wrap", "write n=3 -pop seq=4..6 no-wrap", "write n=4 -pop seq=7..10 no-wrap"]
        );
    }

    #[test]
    fn a_writes_default_population_is_split_too() {
        assert_eq!(
            lines("write n=100 -rate threads=4", 2),
            ["write n=50 -rate threads=4 -pop seq=1..50", "write n=50 -rate threads=4 -pop seq=51..100"]
        );
    }

    #[test]
    fn a_distribution_is_kept_and_a_duration_is_not_split() {
        let text = "read duration=240m cl=QUORUM -pop dist=gaussian(1..7000000000,3500000000,1100000000)";
        let l = lines(text, 20);
        assert_eq!(l.len(), 20);
        assert!(l.iter().all(|line| *line == words(text).join(" ")), "{l:?}");
    }

    #[test]
    fn impossible_splits_and_own_hdr_logs_are_refused() {
        assert!(split(&words("write n=3"), 4).unwrap_err().to_string().contains("cannot be split between 4"));
        assert!(split(&words("write n=10 -pop seq=1..2"), 4).unwrap_err().to_string().contains("fewer keys"));
        assert!(split(&words("write n=10 -log hdrfile=x.hdr"), 2).unwrap_err().to_string().contains("hdrfile"));
        assert!(take(&words("write n=10 -loaders")).is_err());
        let (n, rest) = take(&words("write n=10 -loaders 4 dir=/tmp/l -rate threads=2")).unwrap();
        assert_eq!(n, Some(Loaders { count: 4, dir: Some("/tmp/l".into()) }));
        assert_eq!(rest.join(" "), "write n=10 -rate threads=2");
    }

    #[test]
    fn loaders_whose_windows_start_apart_are_each_rated_over_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let epoch = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        h.record_n(1_000_000, 100).unwrap();
        let ran: Vec<Loader> = [0, 500]
            .iter()
            .enumerate()
            .map(|(i, late_ms)| {
                let hdr = dir.path().join(format!("{i}.hdr"));
                let at = epoch + std::time::Duration::from_millis(*late_ms);
                let mut log = hdrlog::HdrLog::create(&hdr, at, false).unwrap();
                log.write("WRITE-st", 0, 1_000_000_000, &h).unwrap();
                log.flush().unwrap();
                Loader::read(String::new(), hdr, String::new(), true)
            })
            .collect();
        assert_eq!(merge(&ran, "st").unwrap().op_rate.round(), 133.0, "200 operations over 1.5 s");
        assert_eq!(ran.iter().map(|l| l.op_rate).sum::<f64>().round(), 200.0, "100 op/s each");
    }

    #[test]
    fn the_error_count_is_read_from_the_results_block() {
        assert_eq!(total_errors("Op rate : 1 op/s\nTotal errors              :      1,234 [WRITE: 1,234]\n"), 1234);
        assert_eq!(total_errors("no results"), 0);
    }

    #[test]
    fn loaders_go_once_all_are_ready_and_are_called_off_when_one_ended_first() {
        let line = StartLine::new(2);
        let feed = |line: &StartLine| {
            let go = line.go();
            move || {
                let mut written = Vec::new();
                go(&mut written);
                written
            }
        };
        let waiting = std::thread::spawn(feed(&line));
        line.update(|a| a.ready += 1);
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(!waiting.is_finished(), "one of two is ready: no go yet");
        line.update(|a| a.ready += 1);
        assert_eq!(waiting.join().unwrap(), b"go\n");

        let line = StartLine::new(2);
        line.update(|a| a.ready += 1);
        line.update(|a| a.gone += 1);
        assert!(feed(&line)().is_empty(), "the one ready is called off, not kept waiting");
    }

    #[test]
    fn a_failed_run_names_the_loader_that_failed_not_one_it_called_off() {
        let dir = tempfile::tempdir().unwrap();
        let ended = |i: usize, last: &str| {
            Loader::read(String::new(), dir.path().join(format!("{i}.hdr")), format!("…\n{last}\n"), false)
        };
        let ran = [ended(1, CALLED_OFF), ended(2, "cannot connect to 127.0.0.1:1: connection refused")];
        let failed = merge(&ran, "st").unwrap().failed.unwrap();
        assert_eq!(failed, "loader 2 failed: cannot connect to 127.0.0.1:1: connection refused");
    }

    #[test]
    fn the_loaders_client_rows_are_kept_together() {
        let dir = tempfile::tempdir().unwrap();
        let hdr = dir.path().join("1.hdr");
        let mut log = hdrlog::HdrLog::create(&hdr, std::time::SystemTime::now(), false).unwrap();
        let mut h = hdrhistogram::Histogram::<u64>::new(3).unwrap();
        h.record(1_000_000).unwrap();
        log.write("WRITE-st", 0, 1_000_000_000, &h).unwrap();
        log.flush().unwrap();
        let output = |timeouts: u64| {
            let row = ClientRow { time: 1.0, timeouts, retries: 2, ..Default::default() };
            format!("{}\n{}\n", failover::HEADER, failover::line(&row))
        };
        let ran = [
            Loader::read(String::new(), hdr.clone(), output(3), true),
            Loader::read(String::new(), dir.path().join("2.hdr"), output(4), true),
        ];
        let client = merge(&ran, "st").unwrap().client;
        assert_eq!(client.iter().map(|r| r.timeouts).sum::<u64>(), 7, "{client:?}");
        assert_eq!(client.iter().map(|r| r.retries).sum::<u64>(), 4);
    }
}
