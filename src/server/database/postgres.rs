//! PostgreSQL from Debian's `postgresql` package: a cluster made by `initdb` in the server's
//! directory on the volume, run as the package's `postgres` user (the server refuses root),
//! fsync and synchronous commit on unless the suite's durability says `async`.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, anyhow};

use super::{DbServe, Engine, installed, tool};

pub struct Postgres;

/// Where Debian puts the server's programs (`/usr/lib/postgresql/15/bin`), newest version first.
fn bin_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| entries.flatten().map(|e| e.path().join("bin").to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.split('/').nth(4).and_then(|v| v.parse::<u32>().ok())));
    dirs
}

fn program(name: &str) -> Result<PathBuf> {
    let dirs = bin_dirs();
    let dirs: Vec<&str> = dirs.iter().map(String::as_str).collect();
    installed(name, &dirs, "postgresql")
}

/// The package's `postgres` user and group, whom the server and its files belong to.
fn owner() -> Result<(u32, u32)> {
    let user = nix::unistd::User::from_name("postgres")?
        .ok_or_else(|| anyhow!("there is no user \"postgres\": `apt-get install postgresql` makes it"))?;
    Ok((user.uid.as_raw(), user.gid.as_raw()))
}

fn as_owner(cmd: &mut Command) -> Result<&mut Command> {
    let (uid, gid) = owner()?;
    Ok(cmd.uid(uid).gid(gid))
}

/// The directory of the server's socket, which only its tools use.
fn socket_dir(scratch: &Path) -> PathBuf {
    scratch.join("postgres-socket")
}

fn chown_tree(dir: &Path, uid: u32, gid: u32) -> Result<()> {
    std::os::unix::fs::chown(dir, Some(uid), Some(gid))
        .with_context(|| format!("giving {} to postgres", dir.display()))?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            chown_tree(&path, uid, gid)?;
        } else {
            std::os::unix::fs::lchown(&path, Some(uid), Some(gid))?;
        }
    }
    Ok(())
}

impl Engine for Postgres {
    fn name(&self) -> &'static str {
        "PostgreSQL"
    }

    fn default_port(&self) -> u16 {
        5432
    }

    fn program(&self) -> Result<PathBuf> {
        program("postgres")
    }

    fn settings(&self) -> Result<Vec<String>> {
        let listed = tool(Command::new(self.program()?).arg("--describe-config"), "postgres --describe-config")?;
        Ok(listed.lines().filter_map(|l| l.split('\t').next()).map(String::from).collect())
    }

    fn prepare(&self, _s: &DbServe, data: &Path, scratch: &Path) -> Result<()> {
        let (uid, gid) = owner()?;
        let socket = socket_dir(scratch);
        std::fs::create_dir_all(&socket)?;
        chown_tree(&socket, uid, gid)?;
        chown_tree(data, uid, gid)?;
        if data.join("PG_VERSION").exists() {
            return Ok(());
        }
        let mut initdb = Command::new(program("initdb")?);
        initdb.args(["--username=postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-instructions"]);
        tool(as_owner(initdb.arg("-D").arg(data))?, "initdb")?;
        // Clients come over the environment's network, from the host or a sandbox's peer: a
        // server made for one run, listening only there.
        let hba = data.join("pg_hba.conf");
        let mut rules = std::fs::read_to_string(&hba)?;
        rules.push_str("host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n");
        std::fs::write(&hba, rules)?;
        Ok(())
    }

    fn command(&self, s: &DbServe, data: &Path, scratch: &Path) -> Result<Command> {
        let mb = |bytes: u64| format!("{}MB", bytes >> 20);
        let mut settings = vec![
            ("listen_addresses".to_string(), s.listen.clone()),
            ("port".into(), s.port.to_string()),
            ("unix_socket_directories".into(), socket_dir(scratch).to_string_lossy().into_owned()),
            ("logging_collector".into(), "off".into()),
            // PostgreSQL's own guidance: a quarter of the memory for its buffers, the rest the
            // page cache's, which the planner is told of.
            ("shared_buffers".into(), mb(s.memory / 4)),
            ("effective_cache_size".into(), mb(s.memory * 3 / 4)),
            ("maintenance_work_mem".into(), mb((s.memory / 16).max(64 << 20))),
        ];
        settings.extend(s.settings.iter().cloned());
        let mut cmd = Command::new(self.program()?);
        cmd.arg("-D").arg(data);
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        as_owner(&mut cmd)?;
        Ok(cmd)
    }

    fn answers(&self, s: &DbServe, _scratch: &Path) -> bool {
        let Ok(isready) = program("pg_isready") else { return false };
        Command::new(isready)
            .args(["-q", "-t", "1", "-h", &s.listen, "-p", &s.port.to_string()])
            .status()
            .is_ok_and(|status| status.success())
    }

    fn for_clients(&self, s: &DbServe, _scratch: &Path) -> Result<()> {
        // sysbench's pgsql driver connects to a database of its own.
        let mut psql = Command::new(installed("psql", &[], "postgresql-client")?);
        psql.args(["-q", "-h", &s.listen, "-p", &s.port.to_string(), "-U", "postgres", "-c", "CREATE DATABASE sbtest"]);
        tool(&mut psql, "creating the database sbtest").map(|_| ())
    }

    fn stop_signal(&self) -> nix::sys::signal::Signal {
        // Fast shutdown: a smart one (SIGTERM) waits for every client to leave.
        nix::sys::signal::Signal::SIGINT
    }

    fn version(&self) -> String {
        self.program()
            .ok()
            .and_then(|p| Command::new(p).arg("--version").output().ok())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().trim_start_matches("postgres (PostgreSQL) ").to_string())
            .unwrap_or_default()
    }

    fn start_phases(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("server_start_listening", "listening on IPv4 address"),
            ("server_start_recovered", "database system is ready to accept connections"),
        ]
    }

    fn durable(&self, durability: &str) -> Vec<(String, String)> {
        let commit = if durability == "async" { "off" } else { "on" };
        vec![("fsync".into(), "on".into()), ("synchronous_commit".into(), commit.into())]
    }

    fn durabilities(&self) -> &'static [&'static str] {
        &["commit", "async"]
    }
}
