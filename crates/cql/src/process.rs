//! The load generator's own processes: how a loader is started (by this binary, or by a program
//! that embeds the load generator and runs its processes its own way) and the CPU this process
//! used.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;

use anyhow::{Context, Result};

/// What a loader's stdin gets once it runs: "go" when every loader of the run is ready.
pub type StdinFeed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// A loader's process, ended.
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs a loader's command to its end: each stdout line told as it comes, stdin fed once it runs.
pub type RunLoader = fn(&mut Command, &mut (dyn FnMut(&str) + Send), Option<StdinFeed>) -> Result<Finished>;

/// How this binary starts its loaders: the arguments that make it the load generator, and how a
/// loader's process is run.
pub struct Launcher {
    /// How users call the load generator, in its messages: "isobench cql", "cql-stress".
    pub name: &'static str,
    /// `["cql"]` where the load generator is a subcommand of the binary; none in `cql-stress`.
    pub subcommand: &'static [&'static str],
    pub run: RunLoader,
}

static LAUNCHER: OnceLock<Launcher> = OnceLock::new();

/// Set by a program that embeds the load generator, before any load; the first call wins.
pub fn launched_by(launcher: Launcher) {
    let _ = LAUNCHER.set(launcher);
}

/// How this binary starts its loaders: as `cql-stress` unless a program said otherwise.
pub fn launcher() -> &'static Launcher {
    LAUNCHER.get_or_init(|| Launcher { name: "cql-stress", subcommand: &[], run: run_child })
}

/// A loader as a child of this process: in a process group of its own (a terminal's Ctrl-C is
/// this process's to handle), and killed if this process dies first.
fn run_child(cmd: &mut Command, on_line: &mut (dyn FnMut(&str) + Send), feed: Option<StdinFeed>) -> Result<Finished> {
    let parent = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: prctl, getppid and raise are async-signal-safe and touch only the child.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
    cmd.stdin(if feed.is_some() { Stdio::piped() } else { Stdio::null() });
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child =
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().with_context(|| format!("cannot start {program}"))?;
    if let (Some(mut stdin), Some(feed)) = (child.stdin.take(), feed) {
        // Detached: a loader that ends without reading must not hold the others up.
        thread::spawn(move || feed(&mut stdin));
    }
    let mut stderr = child.stderr.take().expect("stderr was piped");
    let errors = thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stderr.read_to_end(&mut bytes);
        String::from_utf8_lossy(&bytes).into_owned()
    });
    let mut stdout = String::new();
    for line in BufReader::new(child.stdout.take().expect("stdout was piped")).split(b'\n') {
        let Ok(line) = line else { break };
        let line = String::from_utf8_lossy(&line);
        on_line(line.trim_end());
        stdout.push_str(&line);
        stdout.push('\n');
    }
    let status = child.wait().with_context(|| format!("waiting for {program}"))?;
    Ok(Finished { status, stdout, stderr: errors.join().unwrap_or_default() })
}

/// The last `n` lines of `text` that are not blank.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The CPU time (user and system, seconds) this process has used so far.
pub fn own_cpu_seconds() -> f64 {
    // SAFETY: getrusage writes into the struct it is given, which lives on this stack.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}
