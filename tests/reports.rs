//! Reports of a real result set: the HTML page in headless Chromium, JUnit XML for CI systems,
//! JSON/CSV exports, adaptive repetition with real fio, and compare/merge of result sets.

mod common;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::{Missing, Scratch, chromium, load_in_chromium, need_program, need_root, run_record, text};

fn unable() -> Option<Missing> {
    need_root("mounts and loop devices").or_else(|| need_program("fio", "fio"))
}

fn suite(repeat: &str, extra: &str) -> String {
    format!(
        r#"
name = "reports"
repeat = {repeat}
baseline = {{ env = "host", volume = "tmpfs" }}

[[env]]
name = "host"
kind = "host"
cost_per_hour = 0.50

[[volume]]
name = "tmpfs"
kind = "tmpfs"
size = "256M"

[[volume]]
name = "ext4"
kind = "loop"
fs = "ext4"
size = "256M"

[[workload]]
name = "fio"
kind = "fio"
rw = ["randread", "write"]
size = "32M"
# 2 s: in two fresh clones' `make test` (2026-11-29) a 1-s run starved by the other lane flipped
# a round's ext4/tmpfs ratio, and the "slower" verdicts these tests read went inconclusive.
runtime = "2s"
direct = true
ioengine = "libaio"
iodepth = 4

[[bound]]
metric = "iops"
max_overhead = "1000%"

[[bound]]
metric = "iops"
max_overhead = "1%"
cells = "volume=ext4"
{extra}
"#
    )
}

static SET: OnceLock<Option<(Scratch, PathBuf)>> = OnceLock::new();

/// The shared result set's directory goes when the test binary exits: a static is never
/// dropped, and every `make test` left one behind under /var/tmp.
extern "C" fn remove_shared() {
    if let Some(Some((sb, _))) = SET.get() {
        let _ = std::fs::remove_dir_all(sb.path());
    }
}

/// One real result set (3 runs of 4 cells), made once for the tests of this file.
fn shared() -> Option<&'static (Scratch, PathBuf)> {
    SET.get_or_init(|| {
        unable().is_none().then(|| {
            // SAFETY: registers a plain function, run once at exit.
            unsafe { libc::atexit(remove_shared) };
            let sb = Scratch::new();
            let (o, out) = sb.run_suite(&suite("3", ""), &[]);
            assert!(o.status.success(), "{}", text(&o));
            (sb, out)
        })
    })
    .as_ref()
}

#[test]
fn the_html_report_renders_in_chromium_without_console_errors() {
    skip_if!(unable());
    let Some(browser) = chromium() else {
        skip_if!(true, "chromium", "chromium is not installed (scripts/setup.sh installs it)");
        return;
    };
    let (sb, out) = shared().unwrap();
    let o = sb.run(&["report", out.to_str().unwrap(), "--png"]);
    assert!(o.status.success(), "{}", text(&o));
    let png = std::fs::read(out.join("report.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 20_000, "a real screenshot");
    // The detector is real: a page with a script error is caught.
    let broken = sb.write("broken.html", "<html><body><script>notDefinedAnywhere();</script></body></html>");
    let (_, errors) = load_in_chromium(&browser, &broken, 1280);
    assert!(errors.iter().any(|e| e.contains("notDefinedAnywhere")), "console errors are seen: {errors:?}");
    let (dom, errors) = load_in_chromium(&browser, &out.join("report.html"), 1280);
    assert!(errors.is_empty(), "console errors: {errors:?}");
    assert!(dom.contains("<table class=\"heat\" data-metric=\"iops\">"), "the heatmap is there");
    assert!(dom.matches("<svg").count() >= 4, "charts are there");
    assert!(dom.contains("host/ext4") && dom.contains("FAIL"), "cells and bound verdicts");
    for fetch in ["src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!dom.contains(fetch), "nothing is fetched from the network ({fetch})");
    }
    let verdict = dom.find("id=\"verdict\"").expect("a verdict section");
    assert!(verdict < dom.find("id=\"summary\"").unwrap(), "the verdict comes before the detail");
}

#[test]
fn the_html_report_fits_a_phone_and_a_desktop() {
    skip_if!(unable());
    let Some(browser) = chromium() else {
        skip_if!(true, "chromium", "chromium is not installed (scripts/setup.sh installs it)");
        return;
    };
    let (sb, out) = shared().unwrap();
    // The page measures itself: how wide its content is against the window it was given.
    let page = common::self_measuring(sb, &out.join("report.html"), "measured.html");
    for width in [390, 1280] {
        // Kept after the test (target/tmp) for a person to look at.
        let png = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("report-{width}px.png"));
        isobench::report::html::screenshot(&out.join("report.html"), &png, width).unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 10_000, "a real screenshot at {width} px");
        let (dom, _) = load_in_chromium(&browser, &page, width);
        let (content, window) =
            common::fit(&dom).unwrap_or_else(|| panic!("the page did not measure itself at {width} px"));
        assert!(
            content <= window,
            "at {width} px the page is {content} px wide: something does not fit (see {})",
            png.display()
        );
    }
    eprintln!("screenshots: {}/report-{{390,1280}}px.png", env!("CARGO_TARGET_TMPDIR"));
}

#[test]
fn check_writes_valid_junit_and_exits_by_the_verdicts() {
    skip_if!(unable());
    let (sb, out) = shared().unwrap();
    let junit = sb.path().join("junit.xml");
    let o = sb.run(&["check", out.to_str().unwrap(), "--junit", junit.to_str().unwrap()]);
    let xml = std::fs::read_to_string(&junit).unwrap();
    let doc = roxmltree::Document::parse(&xml).expect("valid XML");
    let root = doc.root_element();
    assert_eq!(root.tag_name().name(), "testsuites");
    let cases: Vec<_> = doc.descendants().filter(|n| n.has_tag_name("testcase")).collect();
    // Bound 1 applies to the 2 non-baseline cells, bound 2 to the same 2 (volume=ext4).
    assert_eq!(cases.len(), 4);
    assert_eq!(root.attribute("tests"), Some("4"));
    // Each case says its verdict as the interval in its message has it: a failure where the whole
    // CI lies beyond the bound, an error where it straddles it. ext4 is many times slower than
    // tmpfs, so neither of its 1 % checks passes; whether each fails or is inconclusive is the
    // three rounds' to say (beside the Kubernetes test the write's interval once came out at -87 %
    // to +99.9 %, 2026-12-07), and the file must say it as it is.
    let (mut failures, mut errors) = (0, 0);
    for case in &cases {
        let Some(verdict) = case.first_element_child() else { continue };
        assert!(case.attribute("name").unwrap().starts_with("host.ext4."), "only the 1% bound's cells: {xml}");
        let message = verdict.attribute("message").unwrap();
        let (low, high, bound) = interval_and_bound(message);
        match verdict.tag_name().name() {
            "failure" => {
                failures += 1;
                assert!(low > bound, "a failure's CI lies beyond its bound: {message}");
            }
            "error" => {
                errors += 1;
                assert!(low <= bound && bound < high, "an error's CI straddles its bound: {message}");
            }
            other => panic!("<{other}> in {xml}"),
        }
    }
    assert_eq!(failures + errors, 2, "neither of ext4's 1% checks passes: {xml}");
    assert_eq!(root.attribute("failures"), Some(failures.to_string().as_str()), "{xml}");
    assert_eq!(root.attribute("errors"), Some(errors.to_string().as_str()), "{xml}");
    // 1 when a bound fails, else 2 when one is inconclusive.
    assert_eq!(o.status.code(), Some(if failures > 0 { 1 } else { 2 }), "{xml}{}", text(&o));
    let suite = cases[0].parent().unwrap();
    assert_eq!(suite.tag_name().name(), "testsuite");
    assert_eq!(suite.attribute("name"), Some("reports"));
}

/// The CI and the bound a JUnit verdict's message gives, in %:
/// "iops overhead +89.2% (95% CI +48.6% to +97.7%) against a bound of 1.0%".
fn interval_and_bound(message: &str) -> (f64, f64, f64) {
    let number = |s: &str| s.trim().trim_end_matches(['%', ')']).parse::<f64>().unwrap_or_else(|_| panic!("{message}"));
    let interval = message.split("95% CI ").nth(1).and_then(|rest| rest.split(')').next()).expect(message);
    let (low, high) = interval.split_once(" to ").expect(message);
    let bound = message.rsplit("a bound of ").next().expect(message);
    (number(low), number(high), number(bound))
}

#[test]
fn json_and_csv_exports_carry_the_statistics() {
    skip_if!(unable());
    let (sb, out) = shared().unwrap();
    let o = sb.run(&["report", out.to_str().unwrap(), "--format", "json", "--format", "csv"]);
    assert!(o.status.success(), "{}", text(&o));
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let cells = doc["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    let ext4 = cells.iter().find(|c| c["cell"] == "host.ext4.fio.rw=randread").unwrap();
    let iops = ext4["metrics"].as_array().unwrap().iter().find(|m| m["metric"] == "iops").unwrap();
    let (lo, hi, center) =
        (iops["ci"][0].as_f64().unwrap(), iops["ci"][1].as_f64().unwrap(), iops["center"].as_f64().unwrap());
    assert!(lo <= center && center <= hi && iops["n"] == 3);
    let vs = &iops["vs_baseline"];
    assert_eq!(vs["pairing"], "paired", "each run of a round against the baseline's of its block");
    // ext4 reads at about a twelfth of tmpfs's rate, yet three rounds beside the Kubernetes test
    // once gave a write interval of -87 % to +100 %: the verdict is held to its own interval.
    let (diff_lo, diff_hi) = (vs["ci"][0].as_f64().unwrap(), vs["ci"][1].as_f64().unwrap());
    let verdict = if diff_hi < 0.0 { "slower" } else { "no significant difference" };
    assert!(diff_lo < 0.0, "ext4 is never faster than tmpfs: {vs}");
    assert_eq!(vs["verdict"], verdict, "{vs}");
    assert!(vs["p_value"].as_f64().unwrap() <= 1.0);
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(csv.starts_with("cell,env,volume,workload,params,metric,unit,n,center,ci_low,ci_high,cv_pct,diff_pct,diff_ci_low,diff_ci_high,p_value,verdict,pairing\n"));
    assert!(csv.lines().any(|l| {
        l.starts_with("host.ext4.fio.rw=randread,host,ext4,fio,rw=randread,iops,op/s,3,")
            && l.ends_with(&format!(",{verdict},paired"))
    }));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Cost") && md.contains("$0.50"), "cost per hour gives $ per million operations");
    // The verdict: first in report.md, last in the terminal, with the CI of the difference ("~"
    // where it holds 0).
    let mark = if verdict == "slower" { "" } else { "~" };
    let verdict = regex::Regex::new(&format!(
        r"host/ext4\*?\*?:? +fio rw=randread IOPS {mark}-[\d.]+% \[-[\d.]+%, [-+]?[\d.]+%\] · fio rw=write IOPS"
    ))
    .unwrap();
    assert!(md.find("## Verdict").unwrap() < md.find("## Summary").unwrap(), "{md}");
    assert!(verdict.is_match(&md), "{md}");
    let terminal = text(&o);
    let tail: Vec<&str> = terminal.lines().rev().take_while(|l| !l.starts_with("verdict against host/tmpfs")).collect();
    assert!(tail.iter().any(|l| verdict.is_match(l)), "the terminal output ends with the verdict: {terminal}");
}

#[test]
fn adaptive_repetition_stops_at_the_target_or_at_the_maximum() {
    skip_if!(unable());
    // An unreachable target: every cell runs to the maximum.
    let sb = Scratch::new();
    let (o, out) =
        sb.run_suite(&suite("{ min = 2, max = 4, target_ci = \"0.0001%\" }", ""), &["--filter", "rw=randread"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(iops_by_rep(&out, "host.tmpfs.fio.rw=randread").len(), 4);
    assert_eq!(iops_by_rep(&out, "host.ext4.fio.rw=randread").len(), 4);
    assert!(text(&o).contains("> ±0.0001% target"), "the table says the target was missed: {}", text(&o));
    // A generous target: the minimum suffices where two runs agree within 3.3× (at two runs the t
    // interval has one degree of freedom, t = 12.7, and ±100000 % is missed only that far apart).
    // Beside the Kubernetes test's pods, two 2-s runs of a cell once were (CI, 2026-12-07), and a
    // third round rightly ran. So the counts are checked against the rule and the values the
    // runs measured, not against a spread this machine cannot promise.
    let sb = Scratch::new();
    let (o, out) =
        sb.run_suite(&suite("{ min = 2, max = 4, target_ci = \"100000%\" }", ""), &["--filter", "rw=randread"]);
    assert!(o.status.success(), "{}", text(&o));
    let (tmpfs, ext4) =
        (iops_by_rep(&out, "host.tmpfs.fio.rw=randread"), iops_by_rep(&out, "host.ext4.fio.rw=randread"));
    assert_eq!(
        (tmpfs.len(), ext4.len()),
        rounds_by_the_rule(&tmpfs, &ext4, 100000.0, 2, 4),
        "tmpfs {tmpfs:?}, ext4 {ext4:?}: {}",
        text(&o)
    );
}

/// Each run's IOPS, in the order the runs were made; every run must have succeeded.
fn iops_by_rep(out: &Path, cell: &str) -> Vec<f64> {
    let runs = std::fs::read_dir(out.join("runs").join(cell)).unwrap().count() as u32;
    (1..=runs)
        .map(|rep| {
            let run = run_record(out, cell, rep);
            assert_eq!(run["status"], "ok", "{run}");
            run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "iops").unwrap()["value"]
                .as_f64()
                .unwrap()
        })
        .collect()
}

/// The runs each cell gets from adaptive repetition, given the values its runs measured in
/// order: from `min`, another round while a cell's CI is wider than `target` (± %) and it is
/// short of `max`; the baseline (tmpfs) runs in each round ext4 needs, to pair with it.
fn rounds_by_the_rule(tmpfs: &[f64], ext4: &[f64], target: f64, min: usize, max: usize) -> (usize, usize) {
    let wide = |values: &[f64], n: usize| {
        n < max
            && figures::stats::summarize(&values[..n.min(values.len())]).is_none_or(|s| s.ci_half_width_pct() > target)
    };
    let (mut t, mut e) = (min, min);
    loop {
        match (wide(tmpfs, t), wide(ext4, e)) {
            (_, true) => (t, e) = (t + 1, e + 1),
            (true, false) => t += 1,
            (false, false) => return (t, e),
        }
    }
}

#[test]
fn compare_and_merge_result_sets() {
    skip_if!(unable());
    let (_, a) = shared().unwrap();
    let sb = Scratch::new();
    let (o, b) = sb.run_suite(&suite("2", ""), &["--filter", "rw=write"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = sb.run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("B vs A [95% CI]") && t.contains("host.ext4.fio.rw=write"), "{t}");
    assert!(t.contains("only in A: host.tmpfs.fio.rw=randread"), "{t}");
    let merged = sb.path().join("merged");
    let o = sb.run(&["merge", a.to_str().unwrap(), b.to_str().unwrap(), "-o", merged.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let runs = |cell: &str| std::fs::read_dir(merged.join("runs").join(cell)).unwrap().count();
    assert_eq!(runs("host.ext4.fio.rw=write"), 3 + 2, "A's runs and B's, renumbered");
    assert_eq!(runs("host.ext4.fio.rw=randread"), 3);
    let fifth: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(merged.join("runs/host.ext4.fio.rw=write/5.json")).unwrap())
            .unwrap();
    assert!(fifth["origin"].as_str().unwrap().contains(&format!("{} run 2", b.display())), "{}", fifth["origin"]);
    assert!(merged.join(fifth["raw"][0].as_str().unwrap()).exists(), "raw files travel with their runs");
    assert!(merged.join("report.html").exists());
    let other = sb.write("other.toml", &suite("1", "").replace("name = \"reports\"", "name = \"other\""));
    let (o, c) = {
        let out = sb.path().join("other-out");
        (
            sb.run(&[
                "run",
                other.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--filter",
                "rw=write,volume=tmpfs",
            ]),
            out,
        )
    };
    assert!(o.status.success(), "{}", text(&o));
    let o = sb.run(&["merge", a.to_str().unwrap(), c.to_str().unwrap(), "-o", sb.path().join("m2").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("only result sets of one suite merge"), "{}", text(&o));
}
