//! Verdicts end to end, on real runs with a known answer: the baseline against its own twin
//! (`--aa`: no difference), a runc sandbox whose CPU quota is 90 % of its twin's on a CPU-bound
//! workload (a planted −10 %), and the rounds a precision goal asks for.

mod common;

use common::{Missing, Scratch, need_program, need_root, run_record, text};

fn unable() -> Option<Missing> {
    need_root("containers").or_else(|| need_program("sysbench", "sysbench"))
}

/// sysbench's CPU loop, one thread: the host and its twin on one workload, runc with a whole CPU
/// and with 90 % of one on another, each pair compared within itself.
fn suite(extra: &str) -> String {
    format!(
        r#"
name = "verdicts"
repeat = 6
baseline = {{ env = "host", volume = "tmpfs" }}
cells = ["workload=cpu,env=host", "workload=planted,env=runc*"]
{extra}

[[env]]
name = "host"
kind = "host"

[[env]]
name = "runc"
kind = "oci"
runtime = "runc"
cpus = 1.0

[[env]]
name = "runc-slow"
kind = "oci"
runtime = "runc"
cpus = 0.9

[[volume]]
name = "tmpfs"
kind = "tmpfs"
size = "64M"

[[workload]]
name = "cpu"
kind = "cpu"
time = "1s"

[[workload]]
name = "planted"
kind = "cpu"
time = "1s"
baseline = {{ env = "runc", volume = "tmpfs" }}
"#
    )
}

fn verdict<'a>(report: &'a serde_json::Value, cell: &str) -> &'a serde_json::Value {
    let cell =
        report["cells"].as_array().unwrap().iter().find(|c| c["cell"] == cell).unwrap_or_else(|| panic!("{cell}"));
    let metric = cell["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "events_per_s").unwrap();
    &metric["vs_baseline"]
}

/// The twin's difference is no difference, the planted one is found where it was planted, both
/// paired by round, and the report counts the A/A check's false verdicts.
#[test]
fn the_baseline_against_its_twin_and_a_planted_slowdown() {
    skip_if!(unable());
    skip_if!(isobench::env::oci::Runtime::resolve("runc").path.is_none(), "runc", "runc is not installed");
    // It measures: beside the other lane's tests a CPU quota binds no more than their load does
    // (the planted -10 % read as -0.7 % [-15 %, +17 %] there).
    let _alone = common::alone();
    let sb = Scratch::new();
    let (out, dir) = sb.run_suite(&suite(""), &["--aa"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let json = sb.isobench().args(["report", dir.to_str().unwrap(), "--format", "json"]).output().unwrap();
    assert!(json.status.success(), "{}", text(&json));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("report.json")).unwrap()).unwrap();
    let twin = verdict(&report, "host-aa.tmpfs.cpu");
    let planted = verdict(&report, "runc-slow.tmpfs.planted");
    eprintln!("A/A: {twin}\nplanted -10 %: {planted}");
    for d in [twin, planted] {
        assert_eq!((d["pairing"].as_str(), d["n"].as_u64()), (Some("paired"), Some(6)), "{d}");
    }
    // Each interval is the one its rounds imply, recomputed here from the run records. How wide that
    // is, is the machine's noise that minute, not the method's: a 1-s loop's runs vary 2-3 % here on
    // most days (the twin's interval ±1.3 to ±2.4 points), but in one fresh clone, on a day the alone
    // tests took 9-60 % longer, the twin's rounds differed by 8.6 % (SD) and its interval was ±9
    // points, as honest as the others. The twin's estimate stays within three of a quiet day's
    // standard errors (about 2 points) of the truth.
    let pct = |d: &serde_json::Value| d["pct"].as_f64().unwrap();
    for (cell, baseline, d) in
        [("host-aa.tmpfs.cpu", "host.tmpfs.cpu", twin), ("runc-slow.tmpfs.planted", "runc.tmpfs.planted", planted)]
    {
        let (rounds, recomputed) = paired_t_interval(&dir, baseline, cell, 6);
        let reported = [pct(d), d["ci"][0].as_f64().unwrap(), d["ci"][1].as_f64().unwrap()];
        let same = reported.iter().zip(recomputed).all(|(r, c)| (r - c).abs() < 0.01);
        assert!(same, "{cell}: reported {reported:?}, from its rounds {recomputed:?} ({rounds})");
    }
    assert!(pct(twin).abs() < 6.0, "the twin is the baseline: {twin}");
    assert_eq!(planted["verdict"], "slower", "{planted}");
    assert!((-16.0..=-4.0).contains(&pct(planted)), "90 % of a CPU is -10 %: {planted}");
    assert!(said.contains("A/A check (host-aa, the baseline's twin):"), "{said}");
    assert!(said.contains("headline comparisons called a difference"), "{said}");
    assert!(said.contains("Each difference is paired by round"), "{said}");
    sb.assert_nothing_left();
}

/// The difference of `cell` from `baseline` in `events_per_s` as the runs give it, paired by
/// round over its first `rounds` rounds: the geometric mean of the rounds' ratios and its 95 % t
/// interval, in %; and the rounds' values, for a failure's message.
fn paired_t_interval(dir: &std::path::Path, baseline: &str, cell: &str, rounds: u32) -> (String, [f64; 3]) {
    let by_round = |cell: &str| -> std::collections::BTreeMap<u64, f64> {
        (1..=rounds)
            .map(|rep| run_record(dir, cell, rep))
            .map(|r| {
                let samples = r["samples"].as_array().unwrap();
                let value = samples.iter().find(|s| s["metric"] == "events_per_s").unwrap()["value"].as_f64();
                (r["block"]["round"].as_u64().unwrap(), value.unwrap())
            })
            .collect()
    };
    let (base, other) = (by_round(baseline), by_round(cell));
    let logs: Vec<f64> = base.iter().map(|(round, b)| (other[round] / b).ln()).collect();
    assert_eq!(logs.len(), rounds as usize);
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    // Student's t for 95 % and 2 to 5 degrees of freedom, from the tables.
    let t = [4.3027, 3.1824, 2.7764, 2.5706][rounds as usize - 3];
    let half = t * sd / n.sqrt();
    let pct = |l: f64| (l.exp() - 1.0) * 100.0;
    (format!("{baseline} {base:?}, {cell} {other:?}"), [pct(mean), pct(mean - half), pct(mean + half)])
}

/// Rounds go on while a comparison is wider than the goal, for its cells and their baselines
/// only, up to `max_rounds`; the report says what each reached and why it stopped.
#[test]
fn a_precision_goal_runs_rounds_until_the_comparisons_are_narrow_or_the_rounds_run_out() {
    skip_if!(unable());
    skip_if!(isobench::env::oci::Runtime::resolve("runc").path.is_none(), "runc", "runc is not installed");
    let sb = Scratch::new();
    // No noise is below 0.001 %: every round up to the limit runs, for every cell.
    let unreachable = suite("precision = \"±0.001%\"\nmax_rounds = 5").replace("repeat = 6", "repeat = 3");
    let (out, dir) = sb.run_suite(&unreachable, &[]);
    let said = text(&out);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}");
    for cell in ["runc.tmpfs.planted", "runc-slow.tmpfs.planted"] {
        let rounds: Vec<u64> =
            (1..=5).map(|rep| run_record(&dir, cell, rep)["block"]["round"].as_u64().unwrap()).collect();
        assert_eq!(rounds, [1, 2, 3, 4, 5], "{cell}");
    }
    assert!(!dir.join("runs/runc.tmpfs.planted/6.json").exists());
    // The host's cell is compared with nothing: it sat the extra rounds out.
    assert!(!dir.join("runs/host.tmpfs.cpu/4.json").exists());
    assert!(said.contains("round 4: 1 comparison(s) wider than ±0.001%"), "{said}");
    assert!(said.contains("Precision goal ±0.001%"), "{said}");
    assert!(said.contains("(5 rounds; missed by") && said.contains("max_rounds reached"), "{said}");
    // A goal the first rounds meet: no round more. Whether they meet it is the machine's noise
    // that minute: a quiet one gives ±1 to ±5 points, three busy loops and a disk's load beside
    // it ±92, and CI's other lane is heavier (CI failed here once; its message was cut from the
    // log). The rounds follow from the width the first three reached, recomputed from their runs.
    let (out, dir) = sb.run_suite(&suite("precision = \"±400%\"").replace("repeat = 6", "repeat = 3"), &[]);
    let said = text(&out);
    eprintln!("{said}");
    assert!(out.status.success(), "{said}");
    let (rounds, [_, lo, hi]) = paired_t_interval(&dir, "runc.tmpfs.planted", "runc-slow.tmpfs.planted", 3);
    let fourth = dir.join("runs/runc-slow.tmpfs.planted/4.json").exists();
    let half = (hi - lo) / 2.0;
    if half <= 400.0 {
        assert!(!fourth && said.contains("met by 1 of 1"), "±{half:.1} at 3 rounds ({rounds}): {said}");
    } else {
        eprintln!("the first three rounds were ±{half:.1} points wide ({rounds}): the goal asked for more");
        assert!(fourth && said.contains("round 4: 1 comparison(s) wider than ±400%"), "{said}");
    }
    sb.assert_nothing_left();
}
