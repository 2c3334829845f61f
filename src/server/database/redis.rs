//! Redis from Debian's `redis-server` package: every write appended to its file on the volume
//! and fsynced as the suite's durability says (Redis's own `appendfsync`: every second by
//! default), no snapshots, at most the memory it is given.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{DbServe, Engine, installed, tool};

pub struct Redis;

/// Asks the server at `address` for `PING`; its first line of answer.
fn ping(address: &str) -> Option<String> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(b"PING\r\n").ok()?;
    let mut answer = [0u8; 64];
    let n = stream.read(&mut answer).ok()?;
    Some(String::from_utf8_lossy(&answer[..n]).lines().next().unwrap_or_default().to_string())
}

impl Engine for Redis {
    fn name(&self) -> &'static str {
        "Redis"
    }

    fn default_port(&self) -> u16 {
        6379
    }

    fn program(&self) -> Result<PathBuf> {
        installed("redis-server", &[], "redis-server")
    }

    /// The server itself says which settings it has: one started on a socket of its own for the
    /// question, `CONFIG GET *` asked there.
    fn settings(&self) -> Result<Vec<String>> {
        let dir = std::env::temp_dir().join(format!("isobench-redis-settings-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("redis.sock");
        let mut server = Command::new(self.program()?)
            .args(["--port", "0", "--save", "", "--appendonly", "no", "--unixsocket"])
            .arg(&socket)
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .spawn()?;
        let cli = installed("redis-cli", &[], "redis-tools")?;
        let mut asked = Err(anyhow::anyhow!("redis-server did not answer on its socket"));
        for _ in 0..100 {
            if socket.exists() {
                asked = tool(Command::new(&cli).arg("-s").arg(&socket).args(["CONFIG", "GET", "*"]), "redis-cli");
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = server.kill();
        let _ = server.wait();
        let _ = std::fs::remove_dir_all(&dir);
        // Names and values alternate.
        Ok(asked?.lines().step_by(2).map(String::from).collect())
    }

    fn prepare(&self, _s: &DbServe, _data: &Path, _scratch: &Path) -> Result<()> {
        Ok(())
    }

    fn command(&self, s: &DbServe, data: &Path, _scratch: &Path) -> Result<Command> {
        let mut cmd = Command::new(self.program()?);
        let memory = s.memory.to_string();
        let port = s.port.to_string();
        let own = [
            ("bind", s.listen.as_str()),
            ("port", &port),
            ("protected-mode", "no"),
            ("daemonize", "no"),
            ("logfile", ""),
            ("save", ""),
            ("maxmemory", &memory),
            ("maxmemory-policy", "noeviction"),
        ];
        cmd.arg("--dir").arg(data);
        for (name, value) in
            own.iter().map(|(n, v)| (*n, *v)).chain(s.settings.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        {
            cmd.arg(format!("--{name}")).arg(value);
        }
        Ok(cmd)
    }

    fn answers(&self, s: &DbServe, _scratch: &Path) -> bool {
        // While it loads its append-only file it answers -LOADING.
        ping(&format!("{}:{}", s.listen, s.port)).is_some_and(|a| a == "+PONG")
    }

    fn version(&self) -> String {
        let said = self.program().ok().and_then(|p| Command::new(p).arg("--version").output().ok());
        let text = said.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        text.split_whitespace().find_map(|w| w.strip_prefix("v=")).unwrap_or_default().to_string()
    }

    fn start_phases(&self) -> &'static [(&'static str, &'static str)] {
        &[("server_start_loaded", "Ready to accept connections")]
    }

    fn durable(&self, durability: &str) -> Vec<(String, String)> {
        vec![("appendonly".into(), "yes".into()), ("appendfsync".into(), durability.into())]
    }

    fn durabilities(&self) -> &'static [&'static str] {
        &["everysec", "always", "no"]
    }
}
