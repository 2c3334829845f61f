//! Running child processes the way a benchmark harness must: each in its own process group (so
//! Ctrl-C reaches isobench first and teardown stays orderly), marked with a token in its
//! environment (so `isobench cleanup` can find it after isobench itself was killed), killed if
//! isobench dies, bounded by a timeout, and stoppable when the user interrupts.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// The environment variable that marks every process isobench starts.
pub const TOKEN_VAR: &str = "ISOBENCH_TOKEN";

static INTERRUPTED: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Catches SIGINT, SIGTERM and SIGHUP: the first one sets a flag that long waits poll, so the
/// current run stops and everything it created is torn down; isobench then exits.
pub fn install_interrupt_handler() -> Result<()> {
    let flag = INTERRUPTED.get_or_init(|| Arc::new(AtomicBool::new(false)));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP] {
        signal_hook::flag::register(signal, Arc::clone(flag)).context("installing the signal handler")?;
    }
    Ok(())
}

pub fn interrupted() -> bool {
    INTERRUPTED.get().is_some_and(|f| f.load(Ordering::Relaxed))
}

/// The error returned when the user interrupted a wait.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Sleeps in small steps, returning early with `Interrupted` when the user interrupts.
pub fn sleep(d: Duration) -> Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if interrupted() {
            return Err(Interrupted.into());
        }
        thread::sleep((end - Instant::now()).min(Duration::from_millis(50)));
    }
    Ok(())
}

/// What a finished child left behind.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    /// The last `n` lines of stderr, or of stdout when stderr is empty: what to show in an error.
    pub fn tail(&self, n: usize) -> String {
        let text = if self.stderr.trim().is_empty() { &self.stdout } else { &self.stderr };
        tail_lines(text, n)
    }

    /// What a failed system command said: its first line (where mkfs and friends say why,
    /// before their usage text) and its last lines.
    pub fn summary(&self) -> String {
        let text = if self.stderr.trim().is_empty() { &self.stdout } else { &self.stderr };
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        if lines.len() <= 5 {
            return lines.join("\n");
        }
        format!("{}\n…\n{}", lines[0], lines[lines.len() - 3..].join("\n"))
    }
}

pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// How to run a child.
#[derive(Default)]
pub struct Options<'a> {
    /// Marks the child (and what it starts) for `cleanup`.
    pub token: Option<&'a str>,
    pub stdin: Option<Vec<u8>>,
    /// Killed (whole process group) after this long.
    pub timeout: Option<Duration>,
    /// Called with each line of stdout as it arrives (a VM's console: the boot marker's time).
    pub on_stdout_line: Option<&'a mut (dyn FnMut(&str) + Send)>,
    /// Called with each line of stderr as it arrives (an agent saying it is ready).
    pub on_stderr_line: Option<&'a mut (dyn FnMut(&str) + Send)>,
    /// Called with the child's pid as soon as it started.
    pub on_spawn: Option<&'a mut (dyn FnMut(u32) + Send)>,
    /// Keeps stdin open after `stdin` was written, until this returns; what it writes meanwhile
    /// reaches the child as it is written, then stdin closes (sandboxes started together wait
    /// for their "go"; a sandbox that runs in slices waits for each slice's).
    pub stdin_then: Option<StdinFeed>,
    /// Keep running when the user interrupts: for the short, bounded commands of teardown,
    /// which must finish precisely because the user interrupted.
    pub ignore_interrupt: bool,
}

/// Writes to a child's stdin while it runs; a failed write means the child is gone.
pub type StdinFeed = Box<dyn FnOnce(&mut dyn Write) + Send>;

/// Prepares `cmd` to start as a leader of its own process group, marked with `token`, and to be
/// killed if isobench dies.
pub fn prepare(cmd: &mut Command, token: Option<&str>) {
    if let Some(token) = token {
        cmd.env(TOKEN_VAR, token);
    }
    cmd.process_group(0);
    let isobench = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and raise are async-signal-safe and touch only the calling (child)
    // process.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // Killed between the fork and the prctl, isobench sends no signal: a `perf record`
            // started as a SIGKILL came outlived the run and its cleanup (tests/network_volumes.rs).
            if libc::getppid() != isobench {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// Waits for a background child from a thread of its own, so that it does not linger as a
/// zombie once whatever stops it (its token's release) has killed it.
pub fn reap_in_background(mut child: Child) {
    thread::spawn(move || {
        let _ = child.wait();
    });
}

/// Runs `cmd` to completion under `opts`, capturing its output.
pub fn run(cmd: &mut Command, mut opts: Options) -> Result<Finished> {
    prepare(cmd, opts.token);
    let program = cmd.get_program().to_string_lossy().into_owned();
    let feeds_stdin = opts.stdin.is_some() || opts.stdin_then.is_some();
    cmd.stdin(if feeds_stdin { Stdio::piped() } else { Stdio::null() });
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().with_context(|| format!("cannot start {program}"))?;
    if let Some(on_spawn) = opts.on_spawn.take() {
        on_spawn(child.id());
    }
    let stdout = child.stdout.take().expect("stdout was piped");
    let stderr = child.stderr.take().expect("stderr was piped");
    if let Some(mut stdin) = child.stdin.take() {
        let (first, then) = (opts.stdin.take(), opts.stdin_then.take());
        // Detached: a child that exits without reading, or whose "go" never comes, must not
        // hold the run up; a write to its closed pipe then just fails.
        thread::spawn(move || {
            if let Some(input) = first
                && stdin.write_all(&input).is_err()
            {
                return;
            }
            if let Some(feed) = then {
                feed(&mut stdin);
            }
        });
    }
    thread::scope(|scope| {
        let on_line = opts.on_stdout_line.take();
        let out = scope.spawn(move || read_lines(stdout, on_line));
        let on_err_line = opts.on_stderr_line.take();
        let err = scope.spawn(move || read_lines(stderr, on_err_line));
        let status = wait(&mut child, opts.timeout, &program, !opts.ignore_interrupt);
        let stdout = out.join().unwrap_or_default();
        let stderr = err.join().unwrap_or_default();
        let status = status.map_err(|e| match e.downcast_ref::<TimedOut>() {
            Some(_) => anyhow!(
                "{program} did not finish within {:?}; it was killed. Last output:\n{}{}",
                opts.timeout.unwrap_or_default(),
                tail_lines(&stdout, 15),
                if stderr.trim().is_empty() {
                    String::new()
                } else {
                    format!("\nand on stderr:\n{}", tail_lines(&stderr, 5))
                }
            ),
            None => e,
        })?;
        Ok(Finished { status, stdout, stderr, elapsed: started.elapsed() })
    })
}

#[derive(Debug)]
struct TimedOut;

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("timed out")
    }
}

impl std::error::Error for TimedOut {}

/// Waits for `child`, killing its process group on timeout, or on interrupt if `interruptible`.
pub fn wait(child: &mut Child, timeout: Option<Duration>, program: &str, interruptible: bool) -> Result<ExitStatus> {
    let deadline = timeout.map(|t| Instant::now() + t);
    // Short commands are caught within milliseconds; a long one (the workload itself) is looked
    // at five times a second, so that the waiting costs the measured processes nothing.
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(status) = child.try_wait().with_context(|| format!("waiting for {program}"))? {
            return Ok(status);
        }
        if interruptible && interrupted() {
            stop_group(child);
            return Err(Interrupted.into());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop_group(child);
            return Err(TimedOut.into());
        }
        thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

/// SIGTERM to the child's process group, SIGKILL after a grace period, then reaps the child.
pub fn stop_group(child: &mut Child) {
    let pgid = child.id() as i32;
    signal_group(pgid, libc::SIGTERM);
    let grace = Instant::now() + Duration::from_secs(5);
    while Instant::now() < grace {
        if let Ok(Some(_)) = child.try_wait() {
            signal_group(pgid, libc::SIGKILL);
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    signal_group(pgid, libc::SIGKILL);
    let _ = child.wait();
}

fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

fn read_lines(r: impl Read, mut on_line: Option<&mut (dyn FnMut(&str) + Send)>) -> String {
    use std::io::BufRead;
    let mut reader = std::io::BufReader::new(r);
    let (mut all, mut line) = (String::new(), Vec::new());
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if let Some(f) = on_line.as_mut() {
                    f(text.trim_end());
                }
                all.push_str(&text);
            }
        }
    }
    all
}

/// Runs a short system command (mount, losetup, mkfs …) and returns its stdout; a failure
/// becomes an error that quotes the command and what it printed. These commands are bounded by
/// a timeout and finish even after an interrupt: teardown is made of them.
pub fn command_output(program: &str, args: &[&str]) -> Result<String> {
    let options = Options { timeout: Some(Duration::from_secs(300)), ignore_interrupt: true, ..Default::default() };
    let finished = run(Command::new(program).args(args), options)?;
    if !finished.status.success() {
        bail!("`{} {}` failed ({}): {}", program, args.join(" "), finished.status, finished.summary());
    }
    Ok(finished.stdout)
}

/// Whether an executable of this name is on PATH (or is this path).
pub fn find_program(name: &str) -> Option<std::path::PathBuf> {
    if name.contains('/') {
        let p = std::path::PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| is_executable(p))
}

fn is_executable(p: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Kills every process whose environment carries `TOKEN_VAR=token`; returns how many.
/// This is how a killed run's children are found again: pids are reused, tokens are not.
pub fn kill_by_token(token: &str) -> usize {
    let needle = format!("{TOKEN_VAR}={token}");
    let mut killed = 0;
    for _round in 0..50 {
        let pids = pids_with_env(&needle);
        if pids.is_empty() {
            break;
        }
        for pid in &pids {
            // SAFETY: kill(2) on a pid we just found; a race with its exit only yields ESRCH.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        killed += pids.len();
        thread::sleep(Duration::from_millis(100));
    }
    killed
}

/// Pids (other than our own) whose environment holds exactly `entry` ("NAME=value").
pub fn pids_with_env(entry: &str) -> Vec<i32> {
    pids_whose_env(|kv| kv == entry.as_bytes())
}

/// Pids (other than our own) whose environment has an entry ("NAME=value") that `matches`.
pub fn pids_whose_env(matches: impl Fn(&[u8]) -> bool) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|env| env.split(|b| *b == 0).any(&matches))
        })
        .collect()
}

/// A process's /proc/PID/stat, its fields numbered as proc(5) numbers them.
pub struct ProcStat {
    /// Fields 3 (the state) on: those after the command's name, which may hold spaces and
    /// parentheses, and so is read past, to its last ')'.
    after_name: Vec<String>,
}

impl ProcStat {
    pub fn read(pid: i32) -> Option<ProcStat> {
        ProcStat::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    fn parse(stat: &str) -> Option<ProcStat> {
        Some(ProcStat { after_name: stat.rsplit_once(')')?.1.split_whitespace().map(String::from).collect() })
    }

    /// Field `n` (3 or more), parsed.
    pub fn field<T: std::str::FromStr>(&self, n: usize) -> Option<T> {
        self.after_name.get(n.checked_sub(3)?)?.parse().ok()
    }

    /// Whether the process still runs (is not a zombie).
    pub fn alive(&self) -> bool {
        self.after_name.first().is_some_and(|state| state != "Z" && state != "X")
    }

    pub fn parent(&self) -> Option<i32> {
        self.field(4)
    }

    /// Its own user and system time, in clock ticks (its reaped children's not added).
    pub fn cpu_ticks(&self) -> Option<u64> {
        Some(self.field::<u64>(14)? + self.field::<u64>(15)?)
    }

    /// Clock ticks from boot to its start: with the boot, what tells it from a later process
    /// that got its pid.
    pub fn start_ticks(&self) -> Option<u64> {
        self.field(22)
    }
}

/// Whether `pid` is a live process (not a zombie).
pub fn pid_alive(pid: i32) -> bool {
    ProcStat::read(pid).is_some_and(|stat| stat.alive())
}

/// Why this cannot be done, when isobench does not run as root (mounts, namespaces, devices).
pub fn needs_root() -> Option<String> {
    (!nix::unistd::geteuid().is_root()).then(|| "needs root (run isobench as root)".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_read_past_a_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560 300 0 0 0 250 50 0 0 20 0 3 0 123456 1000 200";
        let stat = ProcStat::parse(stat).unwrap();
        assert!(stat.alive());
        assert_eq!(stat.parent(), Some(17));
        assert_eq!(stat.cpu_ticks(), Some(300));
        assert_eq!(stat.start_ticks(), Some(123456));
        assert_eq!(stat.field::<u64>(2), None, "the name is not a field here");
        assert!(!ProcStat::parse("9 (zombie) Z 1 9").unwrap().alive());
        let me = ProcStat::read(std::process::id() as i32).unwrap();
        assert_eq!(me.parent(), Some(nix::unistd::getppid().as_raw()));
    }

    #[test]
    fn captures_output_and_status() {
        let f = run(Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]), Options::default()).unwrap();
        assert_eq!(f.stdout, "out\n");
        assert_eq!(f.stderr, "err\n");
        assert_eq!(f.status.code(), Some(3));
    }

    #[test]
    fn timeout_kills_the_whole_group() {
        let token = format!("test-timeout-{}", std::process::id());
        let started = Instant::now();
        let err = run(
            Command::new("sh").args(["-c", "sleep 30 & sleep 30"]),
            Options { token: Some(&token), timeout: Some(Duration::from_millis(300)), ..Default::default() },
        )
        .unwrap_err();
        assert!(err.to_string().contains("did not finish within"), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        thread::sleep(Duration::from_millis(200));
        assert!(pids_with_env(&format!("{TOKEN_VAR}={token}")).is_empty(), "the background sleep survived");
    }

    #[test]
    fn kill_by_token_finds_detached_processes() {
        let token = format!("test-token-{}", std::process::id());
        let mut cmd = Command::new("setsid");
        cmd.args(["sleep", "30"]).env(TOKEN_VAR, &token);
        let mut child = cmd.spawn().unwrap();
        thread::sleep(Duration::from_millis(100));
        assert_eq!(kill_by_token(&token), 1);
        assert!(!child.wait().unwrap().success());
    }
}
