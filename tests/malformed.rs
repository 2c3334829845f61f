//! Every key of every kind given malformed values (zero, negative, huge, empty, wrong type), as a
//! user would write them, through `isobench run --dry-run`: each must get one clear error that
//! names the file and the key before any run, or be a value the key takes on purpose (listed
//! below with why); never a panic. The keys are not listed here: each table's own error for an
//! unknown key names the keys its kind reads, so a new key is swept as soon as it exists.

mod common;

use std::collections::BTreeMap;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::Scratch;

/// The values every key is given.
const VALUES: &[(&str, &str)] = &[
    ("zero", "0"),
    ("negative", "-1"),
    ("a negative fraction", "-0.5"),
    ("huge", "9223372036854775807"),
    ("a huge string", "\"99999999999999999999\""),
    ("empty", "\"\""),
    ("a boolean", "true"),
    ("a table", "{}"),
    ("a list of numbers", "[1, 2]"),
];

/// (table, or "*" for every table; key; the value's name; why): values of the list a key takes
/// on purpose. Besides these, `true` where the key is a boolean (it refuses 0), and a list of
/// numbers in a workload (a matrix axis, each value checked as the key's).
const TAKEN_ON_PURPOSE: &[(&str, &str, &str, &str)] = &[
    ("*", "cost_per_hour", "zero", "a machine already paid for"),
    ("*", "cost_per_hour", "huge", "a price is the user's to set"),
    ("*", "cpuset", "zero", "CPU 0, written as a bare CPU number"),
    ("*", "latency", "zero", "no latency added, as when the key is left out"),
    (
        "*",
        "mount_options",
        "a huge string",
        "passed to mount as written: mount refuses what it does not know when the volume is made",
    ),
    ("the suite", "cost", "a table", "an empty table: every key at its default"),
    ("the suite", "settle", "a table", "an empty table: every key at its default"),
    ("env k8s", "node_selector", "a table", "no node selector, as when the key is left out"),
    ("env k8s", "resources", "a table", "no requests or limits, as when the key is left out"),
    ("env oci", "runtime", "a huge string", "a program's name: one not installed is refused before any run, naming it"),
    ("env k8s", "kubeconfig", "a huge string", "a path: one that does not exist is refused before any run, naming it"),
    ("env k8s", "context", "a huge string", "a name the kubeconfig resolves when the run starts"),
    ("env k8s", "namespace", "a huge string", "a valid namespace name; the cluster says whether it exists"),
    ("env k8s", "image", "a huge string", "an image reference the cluster's runtime pulls"),
    ("env k8s", "runtime_class", "a huge string", "a valid RuntimeClass name; the cluster says whether it exists"),
    (
        "env k8s",
        "loader_runtime_class",
        "a huge string",
        "a valid RuntimeClass name; the cluster says whether it exists",
    ),
    ("volume pvc", "storage_class", "a huge string", "a valid StorageClass name; the cluster says whether it exists"),
    ("server cassandra", "image", "a huge string", "an image reference the cluster's runtime pulls"),
    (
        "server cassandra",
        "version",
        "a huge string",
        "a version to fetch from Maven Central, which says whether it has it",
    ),
    ("server external", "selector", "a huge string", "a label selector the cluster matches"),
    ("workload fio", "fsync", "zero", "fio's own default: no fsync"),
    ("workload fio", "ramp_time", "zero", "no ramp, as when the key is left out"),
    ("workload fio", "rwmixread", "zero", "a mix of writes only"),
    ("workload fio's capacity", "retries", "zero", "a rate that fails is not offered again"),
    ("workload fio's capacity", "warmup", "zero", "steps measured from their first second"),
    ("workload memory", "time", "zero", "sysbench's own meaning: no time limit, total_size ends the test"),
];

/// A table under test inside a whole suite: the suite's text before it, its header and minimal
/// lines, and the text after it.
struct Case {
    label: &'static str,
    before: String,
    header: &'static str,
    lines: Vec<&'static str>,
    after: String,
    /// The keys, where the table's error for an unknown key does not list them.
    keys: &'static [&'static str],
}

const HOST: &str = "[[env]]\nname = \"host\"\nkind = \"host\"\n";
const TMPFS: &str = "[[volume]]\nname = \"tmpfs\"\nkind = \"tmpfs\"\nsize = \"1G\"\n";
const FIO: &str = "[[workload]]\nname = \"fio\"\nkind = \"fio\"\nsize = \"64M\"\nruntime = \"2s\"\n";
const TOP: &str = "name = \"t\"\nbaseline = { env = \"host\", volume = \"tmpfs\" }\n";

impl Case {
    fn text(&self, key: Option<(&str, &str)>) -> String {
        let mut table = format!("{}\n", self.header);
        for line in &self.lines {
            let own = line.split('=').next().unwrap_or_default().trim();
            if key.is_none_or(|(k, _)| k != own) {
                table.push_str(line);
                table.push('\n');
            }
        }
        if let Some((key, value)) = key {
            table.push_str(&format!("{key} = {value}\n"));
        }
        format!("{}\n{table}\n{}", self.before, self.after)
    }
}

/// A suite with the env, volume or workload `table` beside the host, tmpfs and fio ones.
fn section(label: &'static str, header: &'static str, lines: Vec<&'static str>, extra: &str) -> Case {
    let others = match header {
        "[[env]]" => format!("{TMPFS}\n{FIO}"),
        "[[volume]]" => format!("{HOST}\n{TMPFS}\n{FIO}"),
        "[[workload]]" => format!("{HOST}\n{TMPFS}"),
        _ => format!("{HOST}\n{TMPFS}\n{FIO}"),
    };
    let before = match header {
        "[[env]]" => format!("{TOP}\n{extra}\n{HOST}"),
        _ => format!("{TOP}\n{extra}\n{others}"),
    };
    let after = if header == "[[env]]" { others } else { String::new() };
    Case { label, before, header, lines, after, keys: &[] }
}

fn cases() -> Vec<Case> {
    let server = "[[server]]\nkind = \"cassandra\"\n";
    let k8s = "[[env]]\nname = \"pods\"\nkind = \"k8s\"\nruntime_class = \"runc\"\n";
    vec![
        Case {
            label: "the suite",
            before: String::new(),
            header: "",
            lines: vec!["name = \"t\"", "baseline = { env = \"host\", volume = \"tmpfs\" }"],
            after: format!("{HOST}\n{TMPFS}\n{FIO}"),
            keys: &[],
        },
        section(
            "[[bound]]",
            "[[bound]]",
            vec!["metric = \"iops\"", "max_overhead = \"10%\""],
            "[[volume]]\nname = \"m2\"\nkind = \"tmpfs\"\nsize = \"1G\"\n",
        ),
        section("env host", "[[env]]", vec!["name = \"h2\"", "kind = \"host\""], ""),
        section("env oci", "[[env]]", vec!["name = \"c\"", "kind = \"oci\"", "runtime = \"runc\""], ""),
        section("env vm", "[[env]]", vec!["name = \"v\"", "kind = \"vm\""], ""),
        section("env k8s", "[[env]]", vec!["name = \"p\"", "kind = \"k8s\"", "runtime_class = \"runc\""], ""),
        section("volume dir", "[[volume]]", vec!["name = \"d\"", "kind = \"dir\"", "path = \"/var/tmp\""], ""),
        section("volume tmpfs", "[[volume]]", vec!["name = \"m\"", "kind = \"tmpfs\"", "size = \"1G\""], ""),
        section(
            "volume loop",
            "[[volume]]",
            vec!["name = \"l\"", "kind = \"loop\"", "fs = \"ext4\"", "size = \"1G\""],
            "",
        ),
        section(
            "volume block",
            "[[volume]]",
            vec!["name = \"b\"", "kind = \"block\"", "backing = \"file\"", "size = \"1G\""],
            "",
        ),
        section("volume nbd", "[[volume]]", vec!["name = \"n\"", "kind = \"nbd\"", "size = \"1G\""], ""),
        section("volume mirror", "[[volume]]", vec!["name = \"r\"", "kind = \"mirror\"", "size = \"1G\""], ""),
        section(
            "volume nvmeof",
            "[[volume]]",
            vec!["name = \"o\"", "kind = \"nvmeof\"", "target = \"kernel\"", "size = \"1G\""],
            "",
        ),
        section(
            "volume pvc",
            "[[volume]]",
            vec!["name = \"c\"", "kind = \"pvc\"", "storage_class = \"standard\"", "size = \"1G\""],
            k8s,
        ),
        section("workload fio", "[[workload]]", vec!["name = \"f\"", "kind = \"fio\"", "size = \"64M\""], ""),
        section(
            "workload cql",
            "[[workload]]",
            vec!["name = \"q\"", "kind = \"cql\"", "args = \"write n=100\""],
            server,
        ),
        section("workload cpu", "[[workload]]", vec!["name = \"u\"", "kind = \"cpu\""], ""),
        section("workload memory", "[[workload]]", vec!["name = \"y\"", "kind = \"memory\""], ""),
        section("workload network", "[[workload]]", vec!["name = \"w\"", "kind = \"network\""], ""),
        section("workload syscall", "[[workload]]", vec!["name = \"s\"", "kind = \"syscall\""], ""),
        // Tables inside tables: TOML's [a.b] is the last [[a]]'s b.
        Case {
            label: "the suite's repeat",
            before: TOP.into(),
            header: "[repeat]",
            lines: vec!["min = 3", "max = 5", "target_ci = \"5%\""],
            after: format!("{HOST}\n{TMPFS}\n{FIO}"),
            keys: &[],
        },
        Case {
            label: "the suite's settle",
            before: TOP.into(),
            header: "[settle]",
            lines: vec![],
            after: format!("{HOST}\n{TMPFS}\n{FIO}"),
            keys: &[],
        },
        Case {
            label: "workload fio's capacity",
            // A search times its own steps: no runtime.
            before: format!("{TOP}\n{HOST}\n{TMPFS}\n[[workload]]\nname = \"fio\"\nkind = \"fio\"\nsize = \"64M\"\n"),
            header: "[workload.capacity]",
            lines: vec!["percentile = 99", "latency = \"10ms\""],
            after: String::new(),
            keys: &[],
        },
        Case {
            label: "env k8s's resources",
            before: format!("{TOP}\n{HOST}\n[[env]]\nname = \"p\"\nkind = \"k8s\"\n"),
            header: "[env.resources]",
            lines: vec![],
            after: format!("{TMPFS}\n{FIO}"),
            // A table of quantities, each checked as Kubernetes reads it.
            keys: &["cpu", "memory"],
        },
        Case {
            label: "server cassandra",
            before: format!(
                "{TOP}\n{HOST}\n{TMPFS}\n[[workload]]\nname = \"q\"\nkind = \"cql\"\nargs = \"write n=100\"\n"
            ),
            header: "[[server]]",
            lines: vec!["kind = \"cassandra\""],
            after: String::new(),
            keys: &[],
        },
        Case {
            label: "server external",
            before: format!(
                "{TOP}\n{HOST}\n{TMPFS}\n[[workload]]\nname = \"q\"\nkind = \"cql\"\nargs = \"write n=100\"\n"
            ),
            header: "[[server]]",
            lines: vec!["kind = \"external\"", "nodes = [\"127.0.0.1\"]"],
            after: String::new(),
            keys: &[],
        },
    ]
}

/// `isobench run --dry-run` on `text`; None when it had not ended after `DRY_RUN_LIMIT`.
fn dry_run(sb: &Scratch, text: &str) -> Option<Output> {
    let path = sb.write("suite.toml", text);
    let mut child = sb
        .isobench()
        .args(["run", path.to_str().unwrap(), "--dry-run"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("isobench starts");
    let deadline = Instant::now() + DRY_RUN_LIMIT;
    while child.try_wait().expect("waits").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Some(child.wait_with_output().expect("its output"))
}

/// A dry run takes 30 ms here; one that takes seconds expands something the value made huge.
const DRY_RUN_LIMIT: Duration = Duration::from_secs(5);

/// The keys a table's unknown-key error names.
fn keys_of(sb: &Scratch, case: &Case) -> Vec<String> {
    if !case.keys.is_empty() {
        return case.keys.iter().map(|k| k.to_string()).collect();
    }
    let o = dry_run(sb, &case.text(Some(("zz_probe", "1")))).expect("a dry run ends");
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    let listed = err.split("allowed keys are: ").nth(1).unwrap_or_else(|| {
        panic!("{}: its minimal table should only lack the probe key:\n{}\n{err}", case.label, case.text(None))
    });
    // The suite's own sections are tables of tables, each swept as a case of its own.
    let sections = ["name", "kind", "env", "volume", "workload", "bound", "server"];
    listed.trim().split(", ").filter(|k| !sections.contains(k)).map(String::from).collect()
}

#[test]
fn every_key_of_every_kind_refuses_malformed_values_before_any_run() {
    let sb = Scratch::new();
    let (mut tried, mut refused) = (0, 0);
    let mut taken: Vec<String> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let mut keys_per_table = BTreeMap::new();
    for case in cases() {
        let o = dry_run(&sb, &case.text(None)).expect("a dry run ends");
        if !o.status.success() {
            failures.push(format!(
                "{}: the minimal suite does not run dry:\n{}\n{}",
                case.label,
                case.text(None),
                common::text(&o)
            ));
            continue;
        }
        let keys = keys_of(&sb, &case);
        keys_per_table.insert(case.label, keys.len());
        for key in &keys {
            for (what, value) in VALUES {
                tried += 1;
                let said = format!("{} {key} = {value} ({what})", case.label);
                let Some(o) = dry_run(&sb, &case.text(Some((key, value)))) else {
                    failures.push(format!("{said}: the dry run had not ended after {DRY_RUN_LIMIT:?}"));
                    continue;
                };
                let err = String::from_utf8_lossy(&o.stderr);
                if err.contains("panicked") || o.status.code() == Some(101) {
                    failures.push(format!("{said}: PANIC\n{err}"));
                } else if o.status.success() {
                    let listed = TAKEN_ON_PURPOSE
                        .iter()
                        .any(|(t, k, v, _)| (*t == "*" || *t == case.label) && k == key && v == what);
                    let axis = *what == "a list of numbers" && case.label.starts_with("workload");
                    let boolean = *what == "a boolean"
                        && dry_run(&sb, &case.text(Some((key, "0")))).is_some_and(|o| !o.status.success());
                    if listed || axis || boolean {
                        taken.push(said);
                    } else {
                        failures.push(format!("{said}: accepted"));
                    }
                } else if !(err.contains("suite.toml") && err.contains(key.as_str())) {
                    failures.push(format!("{said}: the error names neither the file nor the key: {err}"));
                } else {
                    refused += 1;
                }
            }
        }
    }
    eprintln!(
        "malformed values: {tried} tried over {} keys of {} tables ({keys_per_table:?}): {refused} refused before any run naming the file and key, {} taken on purpose",
        keys_per_table.values().sum::<usize>(),
        keys_per_table.len(),
        taken.len()
    );
    assert!(failures.is_empty(), "{} of {tried}:\n{}", failures.len(), failures.join("\n"));
}
