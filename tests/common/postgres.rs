//! A PostgreSQL server of a test's own: Debian's binaries, a cluster made in the test's scratch
//! directory, on a free port of loopback, password login required; stopped when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Missing, missing};

pub struct Postgres {
    server: Child,
    data: PathBuf,
    bin: PathBuf,
    pub port: u16,
    pub user: &'static str,
    pub password: &'static str,
}

/// The newest installed PostgreSQL's bin directory.
fn bin_dir() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir("/usr/lib/postgresql").ok()?.filter_map(|e| Some(e.ok()?.path().join("bin"))).collect();
    dirs.sort();
    dirs.into_iter().rev().find(|d| d.join("initdb").exists())
}

pub fn unable() -> Option<Missing> {
    super::need_root("PostgreSQL runs as its postgres user").or_else(|| {
        bin_dir()
            .is_none()
            .then(|| missing("postgresql", "PostgreSQL is not installed (scripts/setup.sh installs postgresql)"))
    })
}

fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("runuser");
    c.args(["-u", "postgres", "--"]).arg(program);
    c
}

impl Postgres {
    /// A new cluster under `dir` (made readable to the postgres user), started and accepting
    /// password logins on 127.0.0.1.
    pub fn start(dir: &Path) -> Postgres {
        Postgres::launch(dir, None)
    }

    /// As [`Postgres::start`], but its TCP logins only over TLS, with a certificate for
    /// 127.0.0.1 signed by a CA of its own: the server and that CA's PEM file.
    pub fn start_tls(dir: &Path) -> (Postgres, PathBuf) {
        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls).unwrap();
        let openssl = |command: &str| {
            let args: Vec<&str> = command.split_whitespace().collect();
            let o = Command::new("openssl").args(&args).current_dir(&tls).output().unwrap();
            assert!(o.status.success(), "openssl {command}: {}", String::from_utf8_lossy(&o.stderr));
        };
        let key = "-newkey rsa:2048 -nodes";
        openssl(&format!("req -x509 {key} -days 2 -subj /CN=isobench-test-CA -keyout ca.key -out ca.pem"));
        openssl(&format!("req {key} -subj /CN=127.0.0.1 -keyout server.key -out server.csr"));
        std::fs::write(tls.join("ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").unwrap();
        openssl(
            "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ext -out server.pem",
        );
        let pg = Postgres::launch(dir, Some(&tls));
        (pg, tls.join("ca.pem"))
    }

    fn launch(dir: &Path, tls: Option<&Path>) -> Postgres {
        let bin = bin_dir().expect("checked by unable()");
        let data = dir.join("pgdata");
        std::fs::create_dir_all(&data).unwrap();
        let pwfile = dir.join("pgpass");
        let password = "hist-Secret-42";
        std::fs::write(&pwfile, password).unwrap();
        for path in [dir, data.as_path(), pwfile.as_path()] {
            Command::new("chown").args(["postgres:postgres"]).arg(path).status().unwrap();
        }
        // The scratch directory's parents must let the postgres user through.
        let mut up = dir.parent();
        while let Some(p) = up.filter(|p| p.starts_with("/var/tmp") || p.starts_with("/tmp")) {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode | 0o111)).unwrap();
            up = p.parent();
        }
        let init = as_postgres(&bin.join("initdb"))
            .args(["-D"])
            .arg(&data)
            .args(["-U", "isobench", "--auth=scram-sha-256", "--pwfile"])
            .arg(&pwfile)
            .output()
            .unwrap();
        assert!(init.status.success(), "initdb: {}", String::from_utf8_lossy(&init.stderr));
        let mut settings = vec!["listen_addresses=127.0.0.1".to_string()];
        if let Some(tls) = tls {
            for file in ["server.key", "server.pem"] {
                Command::new("chown").args(["postgres:postgres"]).arg(tls.join(file)).status().unwrap();
            }
            Command::new("chmod").arg("600").arg(tls.join("server.key")).status().unwrap();
            settings.push("ssl=on".into());
            settings.push(format!("ssl_cert_file={}", tls.join("server.pem").display()));
            settings.push(format!("ssl_key_file={}", tls.join("server.key").display()));
            // TCP logins over TLS alone: a plain one finds no line of pg_hba.conf.
            let hba = data.join("pg_hba.conf");
            let lines = std::fs::read_to_string(&hba).unwrap();
            let only_tls: String = lines.lines().map(|l| l.replacen("host ", "hostssl ", 1) + "\n").collect();
            std::fs::write(&hba, only_tls).unwrap();
        }
        let port = isobench::sys::free_port().unwrap();
        let server = as_postgres(&bin.join("postgres"))
            .arg("-D")
            .arg(&data)
            .args(["-p", &port.to_string()])
            .args(settings.iter().flat_map(|s| ["-c", s.as_str()]))
            .arg("-k")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pg = Postgres { server, data, bin, port, user: "isobench", password };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(started.elapsed() < Duration::from_secs(60), "PostgreSQL did not listen on {port} within 60 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Listening comes before accepting logins: wait until a login works.
        let ready = Instant::now();
        while pg.socket_config().connect(postgres::NoTls).is_err() {
            assert!(ready.elapsed() < Duration::from_secs(60), "PostgreSQL refused logins for 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }
        pg
    }

    /// Through the cluster's socket, which takes a login without TLS.
    fn socket_config(&self) -> postgres::Config {
        let mut socket = postgres::Config::new();
        socket.host_path(&self.data).port(self.port).user(self.user).password(self.password).dbname("postgres");
        socket
    }

    /// A client of the test's own, as an outside reader counts what isobench wrote.
    pub fn socket(&self) -> postgres::Client {
        self.socket_config().connect(postgres::NoTls).unwrap()
    }

    pub fn url(&self) -> String {
        format!("postgres://{}:{}@127.0.0.1:{}/postgres", self.user, self.password, self.port)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        // A fast shutdown: sessions are ended, the server and its children exit.
        let _ =
            as_postgres(&self.bin.join("pg_ctl")).arg("stop").arg("-D").arg(&self.data).args(["-m", "fast"]).output();
        let _ = self.server.wait();
    }
}
