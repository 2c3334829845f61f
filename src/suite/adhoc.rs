//! `isobench run --env host,runsc --fio rw=randread,randwrite bs=4k`: a suite from the command
//! line, the way people reach for hyperfine. The flags are written out as suite TOML, which is
//! then read like any suite file: the same validation and messages, and `--save` hands the user
//! the very file that ran, to grow into their own.

use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value, value};

/// The volume when none is named: a loop-device ext4, a disk as the workload would meet it.
pub const DEFAULT_VOLUME: &str = "ext4:2G";

/// The environments, volumes and workloads an ad-hoc run compares.
#[derive(Debug, Default)]
pub struct Adhoc {
    /// `--env` (one name each): host, podman, docker, vm, vm-ATTACH, or an OCI runtime (runc, crun, runsc, …).
    pub envs: Vec<String>,
    /// `--volume`: tmpfs[:SIZE], ext4[:SIZE], xfs[:SIZE] or dir:PATH.
    pub volumes: Vec<String>,
    /// `--fio`: KEY=VALUE settings of a fio workload; a comma makes a list (a matrix axis).
    pub fio: Vec<String>,
    /// `--cql`: a cassandra-stress command line run against Cassandra inside each environment.
    pub cql: Option<String>,
    /// `--baseline`: the environment the others are compared with (default: the first).
    pub baseline: Option<String>,
    /// `--capacity p99=10ms`: each workload searches the highest rate it sustains within it.
    pub capacity: Option<String>,
}

impl Adhoc {
    /// The suite these flags describe, as TOML.
    pub fn to_toml(&self) -> Result<String, String> {
        if self.fio.is_empty() && self.cql.is_none() {
            return Err(
                "say what to run: --fio KEY=VALUE … (e.g. --fio rw=randread bs=4k) and/or --cql \"write n=100000\""
                    .into(),
            );
        }
        let envs: Vec<&str> = self.envs.iter().map(|e| e.trim()).collect();
        if envs.is_empty() || envs.iter().any(|e| e.is_empty()) {
            return Err(format!("--env {}: an empty name; give names separated by commas", self.envs.join(",")));
        }
        let baseline = match &self.baseline {
            Some(b) if !envs.contains(&b.as_str()) => {
                return Err(format!("--baseline {b}: not one of --env ({})", envs.join(", ")));
            }
            Some(b) => b.clone(),
            None => envs[0].to_string(),
        };
        let volume_specs: Vec<&str> = if self.volumes.is_empty() {
            vec![DEFAULT_VOLUME]
        } else {
            self.volumes.iter().map(|v| v.trim()).collect()
        };
        let mut volumes = ArrayOfTables::new();
        let mut volume_names = Vec::new();
        for spec in volume_specs {
            let table = volume_table(spec, &volume_names)?;
            volume_names.push(table["name"].as_str().expect("named").to_string());
            volumes.push(table);
        }

        let mut doc = DocumentMut::new();
        doc["name"] = value("adhoc");
        doc["repeat"] = value(3);
        let mut base = InlineTable::new();
        base.insert("env", baseline.into());
        base.insert("volume", volume_names[0].clone().into());
        doc["baseline"] = value(base);
        if self.cql.is_some() {
            let mut servers = ArrayOfTables::new();
            let mut server = Table::new();
            server["kind"] = value("cassandra");
            servers.push(server);
            doc["server"] = Item::ArrayOfTables(servers);
        }
        let mut env_tables = ArrayOfTables::new();
        for name in &envs {
            env_tables.push(env_table(name, self.cql.is_some()));
        }
        doc["env"] = Item::ArrayOfTables(env_tables);
        doc["volume"] = Item::ArrayOfTables(volumes);
        let mut workloads = ArrayOfTables::new();
        if !self.fio.is_empty() {
            workloads.push(fio_table(&self.fio)?);
        }
        if let Some(args) = &self.cql {
            let mut t = Table::new();
            t["name"] = value("cassandra");
            t["kind"] = value("cql");
            t["args"] = value(args.as_str());
            workloads.push(t);
        }
        if let Some(text) = &self.capacity {
            let bound = capacity_table(text)?;
            for t in workloads.iter_mut() {
                t["capacity"] = value(bound.clone());
            }
        }
        doc["workload"] = Item::ArrayOfTables(workloads);
        Ok(doc.to_string())
    }

    /// The flags as a command line (a saved suite says what made it).
    pub fn command_line(&self) -> String {
        let mut words = vec!["isobench".to_string(), "run".to_string()];
        let mut flag = |name: &str, values: &[String]| {
            if !values.is_empty() {
                words.push(name.to_string());
                words.extend(values.iter().cloned());
            }
        };
        let listed = |items: &[String]| if items.is_empty() { vec![] } else { vec![items.join(",")] };
        flag("--env", &listed(&self.envs));
        flag("--volume", &listed(&self.volumes));
        flag("--fio", &self.fio);
        flag("--cql", self.cql.as_slice());
        flag("--baseline", self.baseline.as_slice());
        flag("--capacity", self.capacity.as_slice());
        words.iter().map(|w| quoted(w)).collect::<Vec<_>>().join(" ")
    }
}

/// A word as a shell needs it: as is when it is plain, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-.,:=/@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `p99=10ms` as a workload's `capacity = { percentile = 99, latency = "10ms" }` (the latency is
/// checked with the suite, where a wrong one is named).
fn capacity_table(text: &str) -> Result<InlineTable, String> {
    let wrong = || format!("--capacity {text}: write the percentile and the latency bound, e.g. --capacity p99=10ms");
    let (percentile, latency) = text.trim().split_once('=').ok_or_else(wrong)?;
    let percentile: f64 = percentile.trim().strip_prefix('p').and_then(|p| p.parse().ok()).ok_or_else(wrong)?;
    let mut t = InlineTable::new();
    t.insert("percentile", percentile.into());
    t.insert("latency", latency.trim().into());
    Ok(t)
}

/// An environment named as people name it: `host`, `podman`, `docker`, `vm` or `vm-ATTACH`
/// (9p, virtiofs, virtio-blk), or any other name as an OCI runtime. A database in a container
/// is reached over the container's own network, as its users reach it (gVisor's netstack).
fn env_table(name: &str, database: bool) -> Table {
    let mut t = Table::new();
    t["name"] = value(name);
    match name {
        "host" => t["kind"] = value("host"),
        "podman" | "docker" => t["kind"] = value(name),
        _ if name == "vm" || name.starts_with("vm-") => {
            t["kind"] = value("vm");
            if let Some(attach) = name.strip_prefix("vm-") {
                t["attach"] = value(attach);
            }
            if database {
                t["memory"] = value("3G");
            }
        }
        runtime => {
            t["kind"] = value("oci");
            t["runtime"] = value(runtime);
        }
    }
    t
}

/// `tmpfs[:SIZE]`, `ext4[:SIZE]`, `xfs[:SIZE]` or `dir:PATH`, named after its kind (and its
/// size or path's last part when the kind is given twice).
fn volume_table(spec: &str, taken: &[String]) -> Result<Table, String> {
    let (kind, arg) = match spec.split_once(':') {
        Some((k, a)) => (k, Some(a)),
        None => (spec, None),
    };
    let mut t = Table::new();
    t["name"] = value(""); // first in the table, named below
    let suffix = match (kind, arg) {
        ("tmpfs", size) => {
            t["kind"] = value("tmpfs");
            t["size"] = value(size.unwrap_or("2G"));
            size
        }
        ("ext4" | "xfs", size) => {
            t["kind"] = value("loop");
            t["fs"] = value(kind);
            t["size"] = value(size.unwrap_or("4G"));
            size
        }
        ("dir", Some(path)) if !path.is_empty() => {
            t["kind"] = value("dir");
            t["path"] = value(path);
            std::path::Path::new(path).file_name().and_then(|n| n.to_str())
        }
        _ => {
            return Err(format!(
                "--volume {spec}: use tmpfs[:SIZE], ext4[:SIZE], xfs[:SIZE] or dir:PATH, e.g. --volume ext4:2G,tmpfs:2G"
            ));
        }
    };
    let mut name = kind.to_string();
    if let Some(tail) = suffix.filter(|_| taken.contains(&name)) {
        let tail: String = tail.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        name = format!("{kind}-{tail}");
    }
    if taken.contains(&name) {
        return Err(format!("--volume {spec}: given twice"));
    }
    t["name"] = value(name);
    Ok(t)
}

/// fio's settings: `KEY=VALUE`, numbers and true/false as such, a comma-separated value as a
/// list (a matrix axis, or the list a list key such as `args` takes).
fn fio_table(settings: &[String]) -> Result<Table, String> {
    let mut t = Table::new();
    t["name"] = value("fio");
    t["kind"] = value("fio");
    for setting in settings {
        let Some((key, raw)) = setting.split_once('=') else {
            return Err(format!("--fio {setting}: expected KEY=VALUE, e.g. --fio rw=randread,randwrite bs=4k"));
        };
        let key = key.trim();
        if t.contains_key(key) {
            return Err(format!("--fio {setting}: {key} is given twice; list its values with commas instead"));
        }
        let items: Vec<&str> = raw.split(',').map(str::trim).collect();
        let item = if items.len() > 1 || crate::workload::fio::KIND.list_keys.contains(&key) {
            let mut list = Array::new();
            list.extend(items.iter().filter(|s| !s.is_empty()).map(|s| typed(s)));
            value(list)
        } else {
            Item::Value(typed(raw.trim()))
        };
        t[key] = item;
    }
    Ok(t)
}

fn typed(text: &str) -> Value {
    match text {
        "true" => true.into(),
        "false" => false.into(),
        _ => text.parse::<i64>().map(Value::from).unwrap_or_else(|_| text.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adhoc(envs: &str, volumes: &[&str], fio: &[&str]) -> Adhoc {
        Adhoc {
            envs: envs.split(',').map(str::to_string).collect(),
            volumes: volumes.iter().map(|s| s.to_string()).collect(),
            fio: fio.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn flags_become_tables_with_lists_and_types() {
        let text = adhoc("host,runsc,vm-9p", &["ext4:1G", "tmpfs", "ext4:2G"], &["rw=randread,write", "iodepth=8"])
            .to_toml()
            .unwrap();
        let a = adhoc("host,runsc,vm-9p", &["ext4:1G", "tmpfs", "ext4:2G"], &["rw=randread,write", "iodepth=8"]);
        assert_eq!(
            a.command_line(),
            "isobench run --env host,runsc,vm-9p --volume ext4:1G,tmpfs,ext4:2G --fio rw=randread,write iodepth=8"
        );
        assert!(text.contains("baseline = { env = \"host\", volume = \"ext4\" }"), "{text}");
        assert!(text.contains("name = \"runsc\"\nkind = \"oci\"\nruntime = \"runsc\"\n"), "{text}");
        assert!(text.contains("kind = \"vm\"\nattach = \"9p\""), "{text}");
        assert!(text.contains("name = \"ext4-2G\"\nkind = \"loop\"\nfs = \"ext4\"\nsize = \"2G\""), "{text}");
        assert!(text.contains("rw = [\"randread\", \"write\"]\niodepth = 8\n"), "{text}");
        assert!(!text.contains("[[server]]"), "no database without --cql");
    }

    #[test]
    fn a_database_gets_a_server_reached_over_each_sandboxs_own_network() {
        let a = Adhoc {
            envs: vec!["host".into(), "runsc".into()],
            cql: Some("write n=1000".into()),
            baseline: Some("runsc".into()),
            ..Default::default()
        };
        assert!(a.command_line().ends_with("--cql 'write n=1000' --baseline runsc"), "{}", a.command_line());
        let text = a.to_toml().unwrap();
        assert!(text.contains("[[server]]\nkind = \"cassandra\""), "{text}");
        assert!(text.contains("runtime = \"runsc\"\n") && !text.contains("network"), "{text}");
        assert!(text.contains("baseline = { env = \"runsc\", volume = \"ext4\" }"), "{text}");
        assert!(text.contains("kind = \"cql\"\nargs = \"write n=1000\""), "{text}");
    }

    #[test]
    fn bad_flags_say_which_and_how() {
        let e = |a: Adhoc| a.to_toml().unwrap_err();
        assert!(e(adhoc("host", &[], &[])).starts_with("say what to run: --fio"));
        assert!(e(adhoc("host", &["ext5:1G"], &["bs=4k"])).starts_with("--volume ext5:1G: use tmpfs[:SIZE]"));
        assert!(e(adhoc("host", &["tmpfs", "tmpfs"], &["bs=4k"])).contains("given twice"));
        assert!(e(adhoc("host", &[], &["bs"])).starts_with("--fio bs: expected KEY=VALUE"));
        assert!(e(adhoc("host,,runc", &[], &["bs=4k"])).contains("an empty name"));
        let mut a = adhoc("host,runc", &[], &["bs=4k"]);
        a.baseline = Some("runsc".into());
        assert_eq!(e(a), "--baseline runsc: not one of --env (host, runc)");
    }
}
