//! Capacity at a latency bound: a search of known answer on a storage node whose delay caps the
//! rate (one 4k read at a time, 2 ms each, cannot exceed 500 IOPS) and whose bandwidth does;
//! Cassandra under the host and runc searched step by step with coordinated omission corrected;
//! the report's tables and chart; and the suite mistakes refused before anything runs.

mod common;

use std::path::Path;

use common::{Missing, Scratch, alone, chromium, load_in_chromium, need_program, need_root, run_record, samples, text};

fn load(text: &str) -> Result<isobench::suite::Suite, String> {
    isobench::suite::Suite::from_text("suite.toml", text, Path::new("."), &[]).map_err(|e| e.to_string())
}

const SUITE: &str = r#"
name = "c"
baseline = { env = "host" }

[[env]]
name = "host"
kind = "host"

[[volume]]
name = "tmpfs"
kind = "tmpfs"

[[workload]]
name = "fio"
kind = "fio"
rw = "randread"
capacity = { percentile = 99, latency = "10ms" }
"#;

fn error(text: &str) -> String {
    load(text).err().expect("the suite should be refused")
}

fn refused(from: &str, to: &str) -> String {
    assert!(SUITE.contains(from), "test bug: {from:?}");
    load(&SUITE.replacen(from, to, 1)).err().expect("the suite should be refused")
}

#[test]
fn a_capacity_bound_that_cannot_work_is_refused_before_any_run() {
    let s = load(SUITE).unwrap();
    let plan = s.workloads[0].variants[0].spec.workload().capacity().cloned().unwrap();
    assert_eq!(plan.bound.text(), "p99 ≤ 10 ms");
    assert_eq!(s.workloads[0].headline(0), ["capacity"]);
    let bound = r#"capacity = { percentile = 99, latency = "10ms" }"#;
    for (to, says) in [
        (r#"capacity = { percentile = 99, latency = "fast" }"#, r#"key "latency": "fast" is not a duration"#),
        (r#"capacity = { percentile = 100, latency = "10ms" }"#, "must be above 0 and below 100"),
        (r#"capacity = { percentile = 0, latency = "10ms" }"#, "must be above 0 and below 100"),
        (r#"capacity = { percentile = 99 }"#, r#"the key "latency" is required"#),
        (r#"capacity = { latency = "10ms", growth = 1 }"#, "must be more than 1"),
        (r#"capacity = { latency = "10ms", window = "100ms" }"#, "at least 1s"),
        (r#"capacity = { latency = "10ms", colour = "red" }"#, r#"workload "fio" capacity: key "colour": unknown key"#),
        (&format!("{bound}\ntarget = \"lots\""), r#""lots" is not a rate"#),
        (&format!("{bound}\nruntime = \"10s\""), "set capacity.window and capacity.warmup instead of runtime"),
        (&format!("{bound}\nargs = [\"--rate_iops=500\"]"), "--rate_iops=500: a capacity search sets the rate"),
        (&format!("{bound}\ndensity = 4"), "cannot be combined with density"),
    ] {
        let e = refused(bound, to);
        assert!(e.starts_with("suite.toml:"), "the file and line are named: {e}");
        assert!(e.contains(says), "{to}: {e}");
    }
    let cpu = SUITE.replace("rw = \"randread\"\n", "").replace("kind = \"fio\"", "kind = \"cpu\"");
    assert!(error(&cpu).contains("a cpu workload has no latency per operation to bound"));
    let no_capacity = SUITE.replace(bound, "target = \"5k op/s\"");
    assert!(error(&no_capacity).contains("nodes are counted from a measured capacity"));
    let on_suite = SUITE.replace("baseline =", "target = \"20k op/s\"\nbaseline =");
    assert_eq!(load(&on_suite).unwrap().workloads[0].target, Some(20_000.0));
    let cql = |args: &str| {
        format!(
            "name = \"c\"\nbaseline = {{ env = \"host\" }}\n[[env]]\nname = \"host\"\nkind = \"host\"\n[[volume]]\nname = \"t\"\nkind = \"tmpfs\"\n[[server]]\nkind = \"cassandra\"\n[[workload]]\nname = \"db\"\nkind = \"cql\"\nargs = \"{args}\"\n{bound}\n"
        )
    };
    assert!(load(&cql("write -rate threads=32")).is_ok());
    assert!(
        error(&cql("write -rate threads=32 fixed=1000/s")).contains("fixed=1000/s: a capacity search sets the rate")
    );
    assert!(error(&cql("write -rate threads=32 throttle=1000/s")).contains("throttle=1000/s"));
    assert!(error(&cql("write n=100000")).contains("n=100000: a capacity search runs timed steps"));
    assert!(error(&cql("write duration=30s")).contains("duration=30s"));
}

fn unable_fio() -> Option<Missing> {
    need_root("NBD exports and loop devices")
        .or_else(|| need_program("fio", "fio"))
        .or_else(|| need_program("nbdkit", "nbdkit"))
}

fn sample(run: &serde_json::Value, metric: &str) -> f64 {
    let found = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == metric);
    found.unwrap_or_else(|| panic!("no {metric}: {run:#}"))["value"].as_f64().unwrap()
}

#[test]
fn a_storage_nodes_delay_and_bandwidth_set_the_capacity_fio_finds() {
    skip_if!(unable_fio());
    // The known answer's 1 s windows need the cores to themselves (with the Cassandra search
    // beside it, this search once found 293 IOPS, not 350–500).
    let _alone = alone();
    let sb = Scratch::new();
    let suite = r#"
name = "known"
repeat = 1
baseline = { env = "host", volume = "far" }

[[env]]
name = "host"
kind = "host"

[[volume]]
name = "far"
kind = "nbd"
size = "64M"
latency = "2ms"

[[volume]]
name = "narrow"
kind = "nbd"
size = "64M"
bandwidth = "4Mbit"
# nbdkit's rate filter lets a client burst for 2 s after an idle spell unless told: short
# steps above the bandwidth would pass on the burst.
burst = "100ms"

[[workload]]
name = "fio"
kind = "fio"
rw = "randread"
bs = "4k"
iodepth = 1
size = "32M"
# No failed rate is offered again: alone, the delay's and the filter's steps do not flake (three
# runs took the same 12 steps, 27.6 s; with retries and from 40 op/s to 5 %: 21 steps, 48 s).
capacity = { percentile = 99, latency = "20ms", start = 100, resolution = "10%", retries = 0, warmup = "500ms", window = "1s", budget = "90s" }
"#;
    let (o, out) = sb.run_suite(suite, &[]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("capacity step 1: offered 100 op/s"), "each step is on the progress line: {said}");
    let far = run_record(&out, "host.far.fio", 1);
    let narrow = run_record(&out, "host.narrow.fio", 1);
    let (c_far, c_narrow) = (sample(&far, "capacity"), sample(&narrow, "capacity"));
    let offered = |run: &serde_json::Value| -> Vec<f64> {
        run["steps"].as_array().unwrap().iter().map(|s| s["offered"].as_f64().unwrap()).collect()
    };
    eprintln!("2 ms away, one read at a time: capacity {c_far:.0} IOPS (steps {:?})", offered(&far));
    eprintln!("4 Mbit/s of 4k reads (122 IOPS): capacity {c_narrow:.0} IOPS (steps {:?})", offered(&narrow));
    // One 4k read at a time, each at least 2 ms: at most 500 a second.
    assert!((350.0..=500.0).contains(&c_far), "capacity {c_far} IOPS at QD1 and 2 ms");
    // 122 IOPS on the wire; nbdkit's filter lets a little more through in a short window (134
    // IOPS in 1 s, 126 in 3 s measured by fio alone here), and a step passes at 95 % of its rate.
    let wire = 4e6 / 8.0 / 4096.0;
    assert!(c_narrow <= wire * 1.25 && c_narrow >= wire * 0.8, "capacity {c_narrow} IOPS at {wire:.0} on the wire");
    // The delay, not the bound, set the limit at QD1: the run says the load's concurrency did.
    let notes = far["notes"].to_string();
    assert!(notes.contains("capacity limited by the load") && notes.contains("1 operations in flight"), "{notes}");
    // Every step is in samples.csv.
    let rows = samples(&out);
    let steps = far["steps"].as_array().unwrap().len();
    for figure in ["offered", "achieved", "p99", "pass"] {
        let name = format!("step.{steps}.{figure}");
        assert!(rows.iter().any(|r| r[0] == "host.far.fio" && r[6] == name), "{name} in samples.csv");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Capacity") && report.contains("capacity at p99 ≤ 20 ms"), "{report}");
    sb.assert_nothing_left();
}

fn unable_cql() -> Option<Missing> {
    need_root("mounts and containers").or_else(common::cassandra::unavailable).or_else(|| need_program("runc", "runc"))
}

#[test]
fn cassandra_capacity_is_searched_at_fixed_rates_under_the_host_and_runc() {
    skip_if!(unable_cql());
    // A latency bound needs the machine: beside another test's JVMs (a ring, a database pod)
    // the p99 of 125 op/s on runc was 16-160 ms and the search ended at 125 op/s.
    let _alone = alone();
    // The search's path is what this test proves (fixed rates, a failed and a passed step,
    // the wait behind the schedule, the report); the known-answer test above proves that it
    // converges. So the search is short: ×4 a step, 5-6 steps within 14 s, the third (8k op/s)
    // failing on any machine of this kind, the capacity perhaps a lower bound (×2 to 10 % took
    // 12-13 steps, 40 s a cell).
    let sb = Scratch::new();
    let suite = r#"
name = "cap"
repeat = 1
baseline = { env = "host" }
target = "20k op/s"
cells = ["loaders=1", "env=host"]

[[server]]
kind = "cassandra"
heap = "768M"
quick_jit = true

[[env]]
name = "host"
kind = "host"
cost_per_hour = 0.40

[[env]]
name = "runc"
kind = "oci"
runtime = "runc"
network = "host"
cost_per_hour = 0.40

[[volume]]
name = "data"
kind = "tmpfs"
size = "1G"

[[workload]]
name = "db"
kind = "cql"
args = "write -rate threads=32"
loaders = [1, 2]
capacity = { percentile = 99, latency = "20ms", start = 500, growth = 4, warmup = "1s", window = "1s", resolution = "25%", budget = "14s" }
"#;
    let (o, out) = sb.run_suite(suite, &[]);
    let said = text(&o);
    assert!(o.status.success(), "{said}");
    for cell in ["host.data.db.loaders=1", "runc.data.db.loaders=1", "host.data.db.loaders=2"] {
        let run = run_record(&out, cell, 1);
        assert_eq!(run["status"], "ok", "{run:#}");
        let capacity = sample(&run, "capacity");
        let steps = run["steps"].as_array().unwrap();
        eprintln!(
            "{cell}: capacity {capacity:.0} op/s in {} steps: {}",
            steps.len(),
            steps
                .iter()
                .map(|s| format!(
                    "{}→{:.0} p99 {:.1} ms",
                    s["offered"],
                    s["achieved"].as_f64().unwrap(),
                    s["latency_us"].as_f64().unwrap_or(f64::NAN) / 1e3
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        assert!(capacity >= 500.0, "{cell}: {capacity}");
        // A retried rate has a failed step before the one that passed.
        let passed = steps.iter().find(|s| s["offered"].as_f64() == Some(capacity) && s["pass"] == true).unwrap();
        assert_eq!(passed["pass"], true);
        assert!(passed["latency_us"].as_f64().unwrap() <= 20_000.0);
        // Coordinated omission is corrected, not hidden: past the capacity, operations wait
        // behind the schedule, and the response time counts the wait the service time does not.
        let over = steps
            .iter()
            .filter(|s| s["pass"] == false)
            .max_by(|a, b| a["offered"].as_f64().unwrap().total_cmp(&b["offered"].as_f64().unwrap()));
        let over = over.unwrap_or_else(|| panic!("{cell}: no step failed: {steps:?}"));
        let (response, service) = (over["latency_us"].as_f64().unwrap(), over["service_us"].as_f64().unwrap());
        assert!(
            response > service,
            "{cell} overloaded at {}: response p99 {response} µs, service p99 {service} µs",
            over["offered"]
        );
        assert!(over["client_cpu"].as_f64().unwrap() > 0.0, "the client's CPU is recorded per step");
    }
    assert!(said.contains("capacity step 1: offered 500 op/s"), "{said}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for expected in ["## Capacity", "## Nodes and money", "capacity at p99 ≤ 20 ms", "20.0k op/s", "/month"] {
        assert!(report.contains(expected), "{expected}: {report}");
    }
    if let Some(browser) = chromium() {
        let (dom, errors) = load_in_chromium(&browser, &out.join("report.html"), 1280);
        assert!(errors.is_empty(), "console errors: {errors:?}");
        assert!(dom.contains("latency against throughput"), "the capacity chart is drawn");
        assert!(dom.contains("class=\"mark\"") && dom.contains(">bound "), "the capacity and the bound are marked");
        let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capacity-report.png");
        isobench::report::html::screenshot(&out.join("report.html"), &png, 1280).unwrap();
        eprintln!("screenshot: {}", png.display());
    } else {
        common::skip_part(
            "chart",
            &common::missing("chromium", "chromium is not installed (scripts/setup.sh installs it)"),
        );
    }
    sb.assert_nothing_left();
}
