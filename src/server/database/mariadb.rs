//! MariaDB from Debian's `mariadb-server` package: a data directory made by
//! `mariadb-install-db` on the volume, InnoDB's log flushed at each commit
//! (`innodb_flush_log_at_trx_commit = 1`) unless the suite's durability says `async`, and a user
//! `isobench` with a database `sbtest` for sysbench's clients.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;

use super::{DbServe, Engine, installed, tool};

pub struct Mariadb;

fn socket(scratch: &Path) -> PathBuf {
    scratch.join("mariadb.sock")
}

/// A setting's name as the server lists it (`innodb-buffer-pool-size`); users write either form.
fn dashed(name: &str) -> String {
    name.replace('_', "-")
}

impl Engine for Mariadb {
    fn name(&self) -> &'static str {
        "MariaDB"
    }

    fn default_port(&self) -> u16 {
        3306
    }

    fn program(&self) -> Result<PathBuf> {
        installed("mariadbd", &["/usr/sbin"], "mariadb-server")
    }

    fn settings(&self) -> Result<Vec<String>> {
        let help =
            tool(Command::new(self.program()?).args(["--no-defaults", "--verbose", "--help"]), "mariadbd --help")?;
        let table = help.split_once("-------").map_or("", |(_, rest)| rest);
        let names = table.lines().filter_map(|l| l.split_whitespace().next()).filter(|n| !n.starts_with('-'));
        // Both spellings: the list's and the configuration file's.
        Ok(names.flat_map(|n| [n.to_string(), n.replace('-', "_")]).collect())
    }

    fn prepare(&self, _s: &DbServe, data: &Path, _scratch: &Path) -> Result<()> {
        if data.join("mysql").exists() {
            return Ok(());
        }
        let mut install = Command::new(installed("mariadb-install-db", &["/usr/bin"], "mariadb-server")?);
        install.arg("--no-defaults").arg(format!("--datadir={}", data.display())).args([
            "--user=root",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
        ]);
        tool(&mut install, "mariadb-install-db").map(|_| ())
    }

    fn command(&self, s: &DbServe, data: &Path, scratch: &Path) -> Result<Command> {
        let mut cmd = Command::new(self.program()?);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket(scratch).display()))
            .arg(format!("--pid-file={}", scratch.join("mariadb.pid").display()))
            .args(["--user=root", "--skip-name-resolve"])
            .arg(format!("--bind-address={}", s.listen))
            .arg(format!("--port={}", s.port))
            // Half the memory for InnoDB's buffer pool: the usual start for a server of its own.
            .arg(format!("--innodb-buffer-pool-size={}", s.memory / 2));
        for (name, value) in &s.settings {
            cmd.arg(format!("--{}={value}", dashed(name)));
        }
        Ok(cmd)
    }

    fn answers(&self, s: &DbServe, _scratch: &Path) -> bool {
        // The server speaks first: its greeting (protocol version 10 after the packet's header),
        // or an error packet (0xff) to an address no account may connect from yet (before
        // `for_clients` makes one): either way it accepts connections.
        let Ok(mut stream) = TcpStream::connect((s.listen.as_str(), s.port)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut first = [0u8; 5];
        stream.read_exact(&mut first).is_ok() && (first[4] == 10 || first[4] == 0xff)
    }

    fn for_clients(&self, _s: &DbServe, scratch: &Path) -> Result<()> {
        let mut client = Command::new(installed("mariadb", &[], "mariadb-client")?);
        client.arg("--no-defaults").arg(format!("--socket={}", socket(scratch).display())).args([
            "-uroot",
            "-e",
            "CREATE DATABASE IF NOT EXISTS sbtest; CREATE USER IF NOT EXISTS 'isobench'@'%'; GRANT ALL ON *.* TO 'isobench'@'%'",
        ]);
        tool(&mut client, "making MariaDB's user isobench and database sbtest").map(|_| ())
    }

    fn version(&self) -> String {
        let said = self.program().ok().and_then(|p| Command::new(p).arg("--version").output().ok());
        let text = said.map(|o| String::from_utf8_lossy(&o.stdout).into_owned()).unwrap_or_default();
        text.split_whitespace().find(|w| w.contains("MariaDB")).unwrap_or_default().trim_end_matches(',').to_string()
    }

    fn start_phases(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("server_start_innodb", "InnoDB: Buffer pool(s) load completed"),
            ("server_start_listening", "ready for connections"),
        ]
    }

    fn durable(&self, durability: &str) -> Vec<(String, String)> {
        let flush = if durability == "async" { "2" } else { "1" };
        vec![("innodb_flush_log_at_trx_commit".into(), flush.into())]
    }

    fn durabilities(&self) -> &'static [&'static str] {
        &["commit", "async"]
    }
}
