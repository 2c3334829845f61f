//! `kind = "syscall"`: what a sandbox adds to the operations a program's time is made of, each
//! timed by the agent itself (no tool to install): a plain system call (getpid by its raw
//! number: libc may cache it), clock_gettime (the vDSO's, where there is one), open+close and
//! stat of a file on the volume under test, a small file created, written and unlinked, an
//! anonymous mapping made, touched page by page and unmapped in chunks of 4 KiB to 1 MiB (the
//! page-fault path), a one-byte ping-pong over two pipes between two threads, and a TCP round
//! trip to a peer on the host over the sandbox's network path. Each probe runs in rounds and
//! reports the median round's nanoseconds per operation.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::{Kind, Output, ParseContext, RunContext, Spec, Workload};
use crate::store::Sample;
use crate::syntax::{Fields, SuiteError};
use figures::units;

pub const KIND: Kind =
    Kind { name: "syscall", list_keys: &["probes", "chunks"], parse, capacity: Err(super::NO_LATENCY) };

/// The probes, in the order they run.
pub const PROBES: &[&str] =
    &["getpid", "clock_gettime", "open_close", "stat", "create_write_unlink", "mmap", "pipe", "tcp"];

/// Rounds per probe: the median round is the figure, so one preempted round does not count.
const ROUNDS: u32 = 5;

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Syscall {
    pub probes: Vec<String>,
    /// How long each probe runs (its rounds together).
    pub time_ms: u64,
    /// How much memory the mmap probe maps, chunk by chunk, at most.
    pub mmap_size: u64,
    pub chunks: Vec<u64>,
    /// The TCP peer on the host, as the sandbox reaches it (set by the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<(Ipv4Addr, u16)>,
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let probes = f.str_list("probes")?.unwrap_or_else(|| PROBES.iter().map(|p| p.to_string()).collect());
    if let Some(unknown) = probes.iter().find(|p| !PROBES.contains(&p.as_str())) {
        return Err(f.error_at("probes", format!("no probe \"{unknown}\"; choose from {}", PROBES.join(", "))));
    }
    if probes.is_empty() {
        return Err(f.error_at("probes", format!("name at least one of {}", PROBES.join(", "))));
    }
    let time = f.duration("time")?.unwrap_or(Duration::from_secs(1));
    if time < Duration::from_millis(50) {
        return Err(f.error_at("time", "each probe needs at least 50ms"));
    }
    let mmap_size = f.size("mmap_size")?.unwrap_or(1 << 30);
    let chunks = match f.str_list("chunks")? {
        Some(list) => list
            .iter()
            .map(|c| units::parse_size(c).map_err(|e| f.error_at("chunks", e)))
            .collect::<Result<Vec<u64>, _>>()?,
        None => vec![4 << 10, 64 << 10, 1 << 20],
    };
    if let Some(bad) = chunks.iter().find(|c| **c < 4096 || **c % 4096 != 0 || **c > mmap_size) {
        return Err(
            f.error_at("chunks", format!("{bad}: each chunk is a whole number of 4 KiB pages, at most mmap_size"))
        );
    }
    f.finish()?;
    Ok(Spec::Syscall(Syscall { probes, time_ms: time.as_millis() as u64, mmap_size, chunks, peer: None }))
}

impl Syscall {
    fn has(&self, probe: &str) -> bool {
        self.probes.iter().any(|p| p == probe)
    }

    fn round(&self) -> Duration {
        Duration::from_millis(self.time_ms) / ROUNDS
    }

    /// The median round's ns per operation of `op`, run `batch` at a time until each round's
    /// time is up.
    fn timed(&self, batch: u64, mut op: impl FnMut() -> Result<()>) -> Result<f64> {
        let mut rounds = Vec::new();
        for _ in 0..ROUNDS {
            let (started, mut done) = (Instant::now(), 0u64);
            while started.elapsed() < self.round() {
                for _ in 0..batch {
                    op()?;
                }
                done += batch;
            }
            rounds.push(started.elapsed().as_nanos() as f64 / done as f64);
        }
        rounds.sort_by(f64::total_cmp);
        Ok(rounds[rounds.len() / 2])
    }
}

impl Workload for Syscall {
    fn programs(&self) -> Vec<&'static str> {
        Vec::new()
    }

    fn headline(&self) -> Vec<&'static str> {
        vec!["syscall_ns", "open_close_ns", "mmap_4k_ns", "pipe_rtt_ns", "tcp_rtt_ns"]
    }

    fn recorded(&self) -> Vec<String> {
        let fixed = ["syscall_ns", "clock_gettime_ns", "open_close_ns", "stat_ns", "create_write_unlink_ns"];
        let mmap = self.chunks.iter().map(|chunk| format!("mmap_{}_ns", units::fio_size(*chunk)));
        fixed.into_iter().map(String::from).chain(mmap).chain(["pipe_rtt_ns".into(), "tcp_rtt_ns".into()]).collect()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("syscall.probes".to_string(), self.probes.join(","))])
    }

    fn expected_duration(&self) -> Duration {
        Duration::from_millis(self.time_ms) * (self.probes.len() + self.chunks.len()) as u32
    }

    fn writes_volume(&self) -> bool {
        self.has("create_write_unlink")
    }

    fn needs_network(&self) -> bool {
        self.has("tcp")
    }

    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let file = ctx.data_dir.join(".isobench-syscall-probe");
        let mut ns = |metric: &str, value: f64| out.samples.push(Sample::new(metric, value, "ns"));
        if self.has("getpid") {
            ns(
                "syscall_ns",
                self.timed(1000, || {
                    // SAFETY: getpid takes no argument and cannot fail.
                    std::hint::black_box(unsafe { libc::syscall(libc::SYS_getpid) });
                    Ok(())
                })?,
            );
        }
        if self.has("clock_gettime") {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: ts is a valid timespec for the call to fill.
            ns(
                "clock_gettime_ns",
                self.timed(1000, || check(unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) }))?,
            );
        }
        if self.has("open_close") || self.has("stat") {
            std::fs::write(&file, b"isobench").with_context(|| format!("writing {}", file.display()))?;
            let path = c_path(&file)?;
            if self.has("open_close") {
                ns(
                    "open_close_ns",
                    self.timed(100, || {
                        // SAFETY: a valid C path; the descriptor is closed at once.
                        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
                        check(fd)?;
                        check(unsafe { libc::close(fd) })
                    })?,
                );
            }
            if self.has("stat") {
                // SAFETY: a valid C path and a stat buffer for the call to fill.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                ns("stat_ns", self.timed(100, || check(unsafe { libc::stat(path.as_ptr(), &mut st) }))?);
            }
            let _ = std::fs::remove_file(&file);
        }
        if self.has("create_write_unlink") {
            let path = c_path(&file)?;
            let block = [0x5au8; 4096];
            ns(
                "create_write_unlink_ns",
                self.timed(10, || {
                    // SAFETY: a valid C path and buffer; the descriptor is closed before the unlink.
                    let fd = unsafe {
                        libc::open(
                            path.as_ptr(),
                            libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC | libc::O_CLOEXEC,
                            0o600,
                        )
                    };
                    check(fd)?;
                    let written = unsafe { libc::write(fd, block.as_ptr().cast(), block.len()) };
                    check(unsafe { libc::close(fd) })?;
                    if written != block.len() as isize {
                        bail!("a 4 KiB write to {} wrote {written} bytes", file.display());
                    }
                    check(unsafe { libc::unlink(path.as_ptr()) })
                })?,
            );
        }
        if self.has("mmap") {
            for chunk in &self.chunks {
                let per_page = mmap_pages(*chunk, self.mmap_size, Duration::from_millis(self.time_ms))?;
                ns(&format!("mmap_{}_ns", units::fio_size(*chunk)), per_page);
            }
        }
        if self.has("pipe") {
            ns("pipe_rtt_ns", self.pipe_ping_pong()?);
        }
        if self.has("tcp") {
            match self.peer {
                Some((address, port)) => ns("tcp_rtt_ns", self.tcp_round_trips(address, port)?),
                None => out.notes.push("syscall: no network path to a peer here: the tcp probe did not run".into()),
            }
        }
        Ok(())
    }
}

fn check(result: i32) -> Result<()> {
    if result < 0 { Err(std::io::Error::last_os_error().into()) } else { Ok(()) }
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).context("a path with a NUL byte")
}

/// ns per 4 KiB page to map `chunk` bytes, write a byte to each page, and unmap them, over up
/// to `total` bytes or `limit` of time.
fn mmap_pages(chunk: u64, total: u64, limit: Duration) -> Result<f64> {
    let started = Instant::now();
    let mut pages = 0u64;
    while pages * 4096 < total && started.elapsed() < limit {
        // SAFETY: a fresh private anonymous mapping, written only inside its length, then unmapped.
        unsafe {
            let at = libc::mmap(
                std::ptr::null_mut(),
                chunk as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if at == libc::MAP_FAILED {
                bail!("mmap of {chunk} bytes: {}", std::io::Error::last_os_error());
            }
            let base = at.cast::<u8>();
            for page in 0..chunk / 4096 {
                std::ptr::write_volatile(base.add((page * 4096) as usize), 1);
            }
            check(libc::munmap(at, chunk as usize))?;
        }
        pages += chunk / 4096;
    }
    Ok(started.elapsed().as_nanos() as f64 / pages as f64)
}

impl Syscall {
    /// ns per round trip of one byte over two pipes, between this thread and another.
    fn pipe_ping_pong(&self) -> Result<f64> {
        let (mut ping_rx, mut ping_tx) = std::io::pipe()?;
        let (mut pong_rx, mut pong_tx) = std::io::pipe()?;
        let echo = std::thread::spawn(move || {
            let mut byte = [0u8];
            while ping_rx.read_exact(&mut byte).is_ok() {
                if pong_tx.write_all(&byte).is_err() {
                    break;
                }
            }
        });
        let mut byte = [0u8];
        let rtt = self.timed(100, || {
            ping_tx.write_all(&byte)?;
            pong_rx.read_exact(&mut byte)?;
            Ok(())
        });
        drop(ping_tx);
        let _ = echo.join();
        rtt
    }

    /// ns per round trip of one byte over TCP to the host's echo peer.
    fn tcp_round_trips(&self, address: Ipv4Addr, port: u16) -> Result<f64> {
        let mut stream = TcpStream::connect((address, port))
            .with_context(|| format!("connecting to the echo peer at {address}:{port}"))?;
        stream.set_nodelay(true)?;
        let mut byte = [7u8];
        self.timed(10, || {
            stream.write_all(&byte)?;
            stream.read_exact(&mut byte)?;
            Ok(())
        })
    }
}

/// The host's end of the tcp probe: echoes every byte back, on a thread of its own, until
/// dropped.
pub struct EchoPeer {
    pub port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl EchoPeer {
    pub fn start(address: Ipv4Addr) -> Result<EchoPeer> {
        let listener =
            TcpListener::bind((address, 0)).with_context(|| format!("listening for the tcp probe on {address}"))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        let _ = stream.set_nodelay(true);
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                        let mut buf = [0u8; 64];
                        loop {
                            match stream.read(&mut buf) {
                                Ok(0) => break,
                                Ok(n) if stream.write_all(&buf[..n]).is_ok() => {}
                                Err(e)
                                    if e.kind() == std::io::ErrorKind::WouldBlock
                                        && !stopped.load(Ordering::Relaxed) => {}
                                _ => break,
                            }
                        }
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(EchoPeer { port, stop, thread: Some(thread) })
    }
}

impl Drop for EchoPeer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_probe_measures_what_it_names_on_this_host() {
        let dir = tempfile::tempdir().unwrap();
        let peer = EchoPeer::start(Ipv4Addr::LOCALHOST).unwrap();
        let probe = Syscall {
            probes: PROBES.iter().map(|p| p.to_string()).collect(),
            time_ms: 100,
            mmap_size: 64 << 20,
            chunks: vec![4 << 10, 1 << 20],
            peer: Some((Ipv4Addr::LOCALHOST, peer.port)),
        };
        let mut out = Output::default();
        let ctx = RunContext { data_dir: dir.path(), raw: None, read_only: false, scratch_dir: dir.path() };
        probe.run(&ctx, &mut out).unwrap();
        let ns = |m: &str| out.samples.iter().find(|s| s.metric == m).unwrap_or_else(|| panic!("no {m}")).value;
        for m in [
            "syscall_ns",
            "clock_gettime_ns",
            "open_close_ns",
            "stat_ns",
            "create_write_unlink_ns",
            "pipe_rtt_ns",
            "tcp_rtt_ns",
        ] {
            assert!(ns(m) > 0.0 && ns(m) < 1e8, "{m}: {} ns", ns(m));
        }
        // Four system calls and a file's creation cost more than one system call; a page fault per
        // 4 KiB chunk costs more than faults amortised over a 1 MiB one's mapping.
        assert!(ns("create_write_unlink_ns") > ns("syscall_ns"));
        assert!(ns("mmap_4k_ns") > ns("mmap_1m_ns"), "{} vs {}", ns("mmap_4k_ns"), ns("mmap_1m_ns"));
        assert!(!dir.path().join(".isobench-syscall-probe").exists(), "the probe's file is gone");
    }
}
