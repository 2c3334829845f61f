//! Suite validation (one test per kind of error), matrix expansion, overrides and filters.

mod common;

use std::path::Path;

use isobench::plan::Plan;
use isobench::store::Selector;
use isobench::suite::Suite;

const BASE: &str = r#"
name = "t"
repeat = 2
baseline = { env = "host", volume = "tmpfs" }

[[env]]
name = "host"
kind = "host"

[[volume]]
name = "tmpfs"
kind = "tmpfs"
size = "2G"

[[volume]]
name = "ext4"
kind = "loop"
fs = "ext4"
size = "4G"

[[workload]]
name = "fio"
kind = "fio"
rw = ["randread", "randwrite", "read", "write"]
bs = "4k"
iodepth = 8
numjobs = [1, 4]
size = "1G"
runtime = "10s"
direct = true
ioengine = "libaio"

[[bound]]
metric = "iops"
max_overhead = "10%"
"#;

fn load(text: &str) -> Result<Suite, String> {
    load_with(text, &[])
}

fn load_with(text: &str, overrides: &[&str]) -> Result<Suite, String> {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Suite::from_text("suite.toml", text, Path::new("."), &overrides).map_err(|e| e.to_string())
}

/// The 1-based line of `BASE` where `needle` first appears.
fn line(needle: &str) -> usize {
    BASE[..BASE.find(needle).expect("needle in BASE")].matches('\n').count() + 1
}

/// The error for `BASE` with `from` replaced by `to`.
fn error_with(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "test bug: {from:?} is not in the base suite");
    load(&BASE.replacen(from, to, 1)).err().expect("the suite should be rejected")
}

#[test]
fn the_issue_example_is_valid() {
    let s = load(BASE).unwrap();
    assert_eq!(s.name, "t");
    assert_eq!(s.repeat, isobench::store::Repeat::fixed(2));
    assert_eq!(s.envs.len(), 1);
    assert_eq!(s.volumes.len(), 2);
    assert_eq!(s.bounds[0].max_overhead_pct, 10.0);
}

#[test]
fn unknown_key_names_file_line_key_and_allowed_keys() {
    let e = error_with("iodepth = 8", "iodeph = 8");
    assert!(
        e.starts_with(&format!(
            "suite.toml:{}: workload \"fio\": key \"iodeph\": unknown key; allowed keys are: ",
            line("iodepth")
        )),
        "{e}"
    );
    assert!(e.contains("iodepth") && e.contains("numjobs"), "{e}");
}

#[test]
fn unknown_top_level_key() {
    let e = load(&format!("repeats = 3\n{BASE}")).err().expect("rejected");
    assert!(e.starts_with("suite.toml:1: the suite: key \"repeats\": unknown key; allowed keys are: aa, attribute, baseline, bound, budget, cells, collect, cost, cpu_idle, env, max_rounds, name, order, precision, repeat, server, settle, split_cpus, target, volume, workload"), "{e}");
}

#[test]
fn bad_size() {
    let e = error_with("size = \"2G\"", "size = \"2Q\"");
    assert_eq!(
        e,
        format!(
            "suite.toml:{}: volume \"tmpfs\": key \"size\": \"2Q\" has an unknown unit \"Q\"; use k, M, G or T (powers of 1024)",
            line("size = \"2G\"")
        )
    );
}

#[test]
fn a_zero_size_is_refused_as_a_string_or_a_number() {
    for zero in ["bs = \"0\"", "bs = 0", "bs = \"0k\""] {
        let e = error_with("bs = \"4k\"", zero);
        assert!(
            e.starts_with(&format!(
                "suite.toml:{}: workload \"fio\": key \"bs\": must be more than 0 bytes",
                line("bs =")
            )),
            "{zero}: {e}"
        );
    }
}

#[test]
fn a_bound_that_would_judge_nothing_is_named_before_any_run() {
    let idle = |from: &str, to: &str| {
        let s = load(&BASE.replacen(from, to, 1)).unwrap();
        Plan::new(&s, &[], 0).unwrap().idle_bounds(&s)
    };
    assert!(idle("", "").is_empty(), "iops is fio's");
    for recorded in ["read_clat_p99", "write_iops", "sys.cpu_workload", "server_startup"] {
        assert!(idle("metric = \"iops\"", &format!("metric = \"{recorded}\"")).is_empty(), "{recorded}");
    }
    let typo = idle("metric = \"iops\"", "metric = \"nosuch\"");
    assert_eq!(typo.len(), 1);
    assert!(
        typo[0].starts_with("[[bound]] on \"nosuch\": no workload of the cells it selects records \"nosuch\""),
        "{}",
        typo[0]
    );
    assert!(typo[0].contains("they record: bw, cpu_sys,") && typo[0].contains("read_clat_p99"), "{}", typo[0]);
    let nowhere = idle("max_overhead = \"10%\"", "max_overhead = \"10%\"\ncells = \"env=nope\"");
    assert_eq!(nowhere.len(), 1);
    assert!(
        nowhere[0].starts_with("[[bound]] on \"iops\" with cells = \"env=nope\" selects no cell but baselines")
            && nowhere[0].contains("host.ext4.fio."),
        "{}",
        nowhere[0]
    );
    let baselines_only = idle("max_overhead = \"10%\"", "max_overhead = \"10%\"\ncells = \"volume=tmpfs\"");
    assert!(baselines_only[0].contains("selects no cell but baselines"), "{baselines_only:?}");
}

#[test]
fn bad_duration() {
    let e = error_with("runtime = \"10s\"", "runtime = \"10 sec\"");
    assert!(
        e.starts_with(&format!(
            "suite.toml:{}: workload \"fio\": key \"runtime\": \"10 sec\" has an unknown unit \"sec\"",
            line("runtime")
        )),
        "{e}"
    );
}

#[test]
fn wrong_type() {
    let e = error_with("iodepth = 8", "iodepth = \"eight\"");
    assert_eq!(
        e,
        format!(
            "suite.toml:{}: workload \"fio\": key \"iodepth\": expected a whole number, found a string",
            line("iodepth")
        )
    );
}

#[test]
fn unknown_kind_lists_the_allowed_kinds() {
    let e = error_with("kind = \"loop\"", "kind = \"lvm\"");
    assert_eq!(
        e,
        format!(
            "suite.toml:{}: volume \"ext4\": key \"kind\": unknown kind \"lvm\"; allowed kinds are: dir, tmpfs, loop, block, nbd, mirror, nvmeof, pvc",
            line("kind = \"loop\"")
        )
    );
}

#[test]
fn bad_choice_lists_the_allowed_values() {
    let e = error_with("fs = \"ext4\"", "fs = \"ext3\"");
    assert_eq!(
        e,
        format!(
            "suite.toml:{}: volume \"ext4\": key \"fs\": \"ext3\" is not allowed; use one of: ext4, xfs",
            line("fs = ")
        )
    );
    let e = error_with("\"randwrite\",", "\"randwirte\",");
    assert!(e.contains("key \"rw\": \"randwirte\" is not allowed; use one of: read, write, randread"), "{e}");
}

#[test]
fn baseline_that_names_nothing() {
    let e = error_with("volume = \"tmpfs\" }", "volume = \"nvme\" }");
    assert_eq!(
        e,
        "suite.toml:4: baseline: key \"volume\": names no [[volume]]: \"nvme\"; the suite's volumes are: tmpfs, ext4"
    );
    let e = error_with("{ env = \"host\"", "{ env = \"kata\"");
    assert!(e.contains("names no [[env]]: \"kata\"; the suite's environments are: host"), "{e}");
}

#[test]
fn missing_required_key() {
    let e = error_with("baseline = { env = \"host\", volume = \"tmpfs\" }", "");
    assert!(e.contains("the key \"baseline\" is required"), "{e}");
    let e = error_with("metric = \"iops\"\n", "");
    assert!(e.contains("[[bound]]: the key \"metric\" is required"), "{e}");
}

#[test]
fn duplicate_names() {
    let e = error_with("name = \"ext4\"", "name = \"tmpfs\"");
    assert!(e.contains("two [[volume]] tables are named \"tmpfs\""), "{e}");
}

#[test]
fn empty_axis() {
    let e = error_with("numjobs = [1, 4]", "numjobs = []");
    assert!(e.contains("key \"numjobs\": an empty list gives the matrix no cells"), "{e}");
}

#[test]
fn invalid_toml_points_at_the_line() {
    let e = error_with("iodepth = 8", "iodepth = = 8");
    assert!(e.starts_with(&format!("suite.toml:{}: not valid TOML", line("iodepth"))), "{e}");
}

#[test]
fn bad_percent_in_bound() {
    let e = error_with("max_overhead = \"10%\"", "max_overhead = \"10\"");
    assert!(e.contains("key \"max_overhead\": \"10\" is not a percentage"), "{e}");
}

#[test]
fn matrix_is_env_by_volume_by_list_valued_parameters() {
    let s = load(BASE).unwrap();
    let plan = Plan::new(&s, &[], 0).unwrap();
    assert_eq!(plan.cells.len(), 2 * 4 * 2);
    assert_eq!(plan.runs.len(), 16 * 2);
    let first = &plan.cells[0];
    assert_eq!(first.id, "host.tmpfs.fio.rw=randread.numjobs=1");
    assert_eq!(first.labels.params, vec![("rw".into(), "randread".into()), ("numjobs".into(), "1".into())]);
    // Round-robin: every cell's first repetition before any second one.
    assert!(plan.runs[..16].iter().all(|r| r.rep == 1));
    assert!(plan.runs[16..].iter().all(|r| r.rep == 2));
    let ids: std::collections::HashSet<_> = plan.cells.iter().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 16, "cell ids are unique");
}

#[test]
fn overrides_replace_values_and_are_named_in_errors() {
    let s = load_with(BASE, &["workload.fio.runtime=3s", "repeat=5", "workload.fio.rw=read"]).unwrap();
    assert_eq!(s.repeat, isobench::store::Repeat::fixed(5));
    assert_eq!(Plan::new(&s, &[], 0).unwrap().cells.len(), 2 * 2);
    assert!(s.resolved.contains("runtime = \"3s\""), "{}", s.resolved);
    let e = load_with(BASE, &["workload.fio.runtime=3 parsecs"]).err().expect("rejected");
    assert!(
        e.starts_with("suite.toml (from --set workload.fio.runtime=3 parsecs): workload \"fio\": key \"runtime\""),
        "{e}"
    );
    let e = load_with(BASE, &["workload.fi.runtime=3s"]).err().expect("rejected");
    assert!(e.contains("the suite has no workload named \"fi\"; it has: fio"), "{e}");
    let e = load_with(BASE, &["runtime"]).err().expect("rejected");
    assert!(e.contains("write overrides as key=value"), "{e}");
}

#[test]
fn filters_select_cells_and_keep_their_baselines() {
    let s = load(BASE).unwrap();
    let sel = |t: &str| Selector::parse(t).unwrap();
    let plan = Plan::new(&s, &[sel("volume=ext4,rw=rand*,numjobs=1")], 0).unwrap();
    let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "host.tmpfs.fio.rw=randread.numjobs=1",
            "host.ext4.fio.rw=randread.numjobs=1",
            "host.tmpfs.fio.rw=randwrite.numjobs=1",
            "host.ext4.fio.rw=randwrite.numjobs=1"
        ]
    );
    assert_eq!(plan.added_baselines.len(), 2);
    let e = Plan::new(&s, &[sel("rwx=read")], 0).err().unwrap();
    assert!(e.contains("no cell has a label named rwx"), "{e}");
    let e = Plan::new(&s, &[sel("env=kata")], 0).err().unwrap();
    assert!(e.contains("selects no cell"), "{e}");
    assert!(Selector::parse("env").is_err());
}

#[test]
fn job_file_environment_is_a_matrix_axis() {
    let dir = common::Scratch::new();
    dir.write("job.fio", "[global]\nsize=16m\n[j]\nrw=${FIO_RW}\n");
    let text = BASE.replace(
        "rw = [\"randread\", \"randwrite\", \"read\", \"write\"]\nbs = \"4k\"\niodepth = 8\nnumjobs = [1, 4]\nsize = \"1G\"\nruntime = \"10s\"\ndirect = true\nioengine = \"libaio\"\n",
        "jobfile = \"job.fio\"\nenv = { FIO_RW = [\"read\", \"randread\"], OTHER = \"x\" }\n",
    );
    let s = Suite::from_text("suite.toml", &text, dir.path(), &[]).unwrap();
    let plan = Plan::new(&s, &[], 0).unwrap();
    assert_eq!(plan.cells.len(), 2 * 2);
    assert_eq!(plan.cells[0].labels.params, vec![("FIO_RW".into(), "read".into())]);
    let e = Suite::from_text("suite.toml", &text.replace("job.fio", "missing.fio"), dir.path(), &[])
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("key \"jobfile\": cannot read"), "{e}");
}

#[test]
fn adaptive_repeat_is_a_table_with_a_target() {
    let s = load(&BASE.replace("repeat = 2", "repeat = { min = 3, max = 15, target_ci = \"2%\" }")).unwrap();
    assert!(s.repeat.is_adaptive());
    assert_eq!((s.repeat.min, s.repeat.max, s.repeat.target_ci_pct), (3, 15, Some(2.0)));
    assert_eq!(Plan::new(&s, &[], 0).unwrap().runs.len(), 16 * 3, "the first rounds are the minimum");
    let e = error_with("repeat = 2", "repeat = { min = 3, max = 15 }");
    assert!(e.contains("an adaptive repeat needs \"target_ci\""), "{e}");
    let e = error_with("repeat = 2", "repeat = { min = 5, max = 3, target_ci = \"2%\" }");
    assert!(e.contains("repeat: key \"max\": must be at least min (5)"), "{e}");
    let e = error_with("repeat = 2", "repeat = { min = 3, max = 5, target = \"2%\" }");
    assert!(e.contains("repeat: key \"target\": unknown key"), "{e}");
}

/// `precision` asks for rounds until every comparison is that narrow; what no number of rounds
/// can reach, or a limit on nothing, is refused before any run, naming the key and the fix.
#[test]
fn a_precision_goal_is_a_half_width_with_its_limits() {
    let with = |keys: &str| BASE.replacen("repeat = 2\n", &format!("repeat = 2\n{keys}\n"), 1);
    let s = load(&with("precision = \"±5%\"\nbudget = \"3m\"")).unwrap();
    let p = s.precision.unwrap();
    assert_eq!((p.half_width, p.budget_s), (5.0, Some(180.0)));
    let s = load(&with("precision = \"2.5%\"\nmax_rounds = 12")).unwrap();
    assert_eq!((s.precision.as_ref().unwrap().half_width, s.precision.as_ref().unwrap().max_rounds), (2.5, 12));
    let s = load_with(BASE, &["precision=±4%"]).unwrap();
    assert_eq!(s.precision.unwrap().max_rounds, isobench::suite::DEFAULT_MAX_ROUNDS, "no limit given: the default");
    for (keys, said) in [
        ("precision = \"0%\"", "asks for no uncertainty at all"),
        ("precision = \"±0%\"", "asks for no uncertainty at all"),
        ("precision = \"-5%\"", "is negative"),
        ("precision = \"±-5%\"", "is negative"),
        ("precision = \"five\"", "is not a percentage"),
        ("precision = \"5\"", "is not a percentage"),
        ("precision = 5", "expected a string"),
        ("precision = \"±5%\"\nbudget = \"0s\"", "key \"budget\": is a time limit: it must be more than 0"),
        ("precision = \"±5%\"\nbudget = 0", "key \"budget\": is a time limit: it must be more than 0"),
        ("precision = \"±5%\"\nmax_rounds = 0", "key \"max_rounds\": must be at least 1"),
        ("precision = \"±5%\"\nmax_rounds = 1", "key \"max_rounds\": must be at least repeat (2)"),
        ("budget = \"10m\"", "key \"budget\": limits the rounds a precision goal runs"),
    ] {
        let e = load(&with(keys)).err().unwrap_or_else(|| panic!("{keys} was accepted"));
        assert!(e.contains(said), "{keys}: {e}");
        if keys.starts_with("precision = \"") && !keys.contains('\n') {
            assert!(e.contains("key \"precision\"") && e.contains("e.g. precision = \"±5%\""), "{keys}: {e}");
            assert!(e.starts_with(&format!("suite.toml:{}:", line("repeat = 2") + 1)), "{keys}: {e}");
        }
    }
    let e = load_with(BASE, &["precision=0%"]).err().unwrap();
    assert!(e.contains("(from --set precision=0%)"), "{e}");
    let adaptive = BASE.replace("repeat = 2", "repeat = { min = 3, max = 15, target_ci = \"2%\" }\nprecision = \"5%\"");
    assert!(load(&adaptive).err().unwrap().contains("keep one"));
}

/// `aa = true` twins the baseline environment; a twin written out is found as one too, and its
/// cells are the ones `cells` gives the original.
#[test]
fn an_aa_check_twins_the_baseline_env() {
    let with = |keys: &str| BASE.replacen("repeat = 2\n", &format!("repeat = 2\n{keys}\n"), 1);
    let suite = load(&with("aa = true\ncells = [\"volume=tmpfs,rw=randread\"]")).unwrap();
    let names: Vec<&str> = suite.envs.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["host", "host-aa"]);
    assert_eq!(suite.twins, [false, true]);
    let plan = Plan::new(&suite, &[], 0).unwrap();
    let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 4, "numjobs 1 and 4, on host and its twin: {ids:?}");
    assert_eq!(plan.blocks.len(), 2, "each setting's cells run as one block: {:?}", plan.blocks);
    let record = plan.record(&suite);
    assert!(record.cells.iter().all(|c| c.twin == (c.labels.env == "host-aa")));
    let s = load_with(BASE, &["aa=true"]).unwrap();
    assert_eq!(s.twins, [false, true]);
    let written = BASE.replacen("[[volume]]", "[[env]]\nname = \"other-host\"\nkind = \"host\"\n\n[[volume]]", 1);
    assert_eq!(load(&written).unwrap().twins, [false, true], "a twin written out is a twin");
    let e = load(&with("aa = \"yes\"")).err().unwrap();
    assert!(e.contains("key \"aa\": expected true or false"), "{e}");
    let e =
        load(&BASE.replace(
            "baseline = { env = \"host\", volume = \"tmpfs\" }",
            "baseline = { volume = \"tmpfs\" }\naa = true",
        ))
        .err()
        .unwrap();
    assert!(e.contains("twins the baseline environment, and the baseline names none"), "{e}");
    let e = load(&with("aa = true").replacen(
        "[[volume]]",
        "[[env]]\nname = \"host-aa\"\nkind = \"host\"\n\n[[volume]]",
        1,
    ))
    .err()
    .unwrap();
    assert!(e.contains("adds an env named \"host-aa\", and the suite has one"), "{e}");
}

#[test]
fn cost_per_hour_on_an_env_or_in_a_cost_table() {
    let s = load(&BASE.replace("kind = \"host\"", "kind = \"host\"\ncost_per_hour = 4.32")).unwrap();
    assert_eq!(s.envs[0].cost_per_hour, Some(4.32));
    let s = load(&format!("{BASE}\n[cost]\nhost = 1.5\n")).unwrap();
    assert_eq!(s.envs[0].cost_per_hour, Some(1.5));
    let e = load(&format!("{BASE}\n[cost]\nkata = 1.5\n")).err().unwrap();
    assert!(e.contains("key \"cost\": names no [[env]]: \"kata\""), "{e}");
    let e = error_with("kind = \"host\"", "kind = \"host\"\ncost_per_hour = \"cheap\"");
    assert!(e.contains("key \"cost_per_hour\": expected a number"), "{e}");
}

#[test]
fn a_baseline_naming_only_the_env_compares_each_volume_with_itself() {
    let s = load(&BASE.replace("baseline = { env = \"host\", volume = \"tmpfs\" }", "baseline = { env = \"host\" }"))
        .unwrap();
    assert_eq!(s.baseline.volume, None);
    // Filtering to one volume keeps the host cells of that volume, not tmpfs's.
    let text = BASE.replace("baseline = { env = \"host\", volume = \"tmpfs\" }", "baseline = { env = \"host\" }")
        + "\n[[env]]\nname = \"runc\"\nkind = \"oci\"\nruntime = \"runc\"\n";
    let s = load(&text).unwrap();
    let plan = Plan::new(&s, &[Selector::parse("env=runc,volume=ext4,rw=read,numjobs=1").unwrap()], 0).unwrap();
    let ids: Vec<&str> = plan.cells.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["host.ext4.fio.rw=read.numjobs=1", "runc.ext4.fio.rw=read.numjobs=1"]);
    let e = error_with("baseline = { env = \"host\", volume = \"tmpfs\" }", "baseline = { }");
    assert!(e.contains("name the baseline env, volume or both"), "{e}");
}

const CQL: &str = "\n[[workload]]\nname = \"db\"\nkind = \"cql\"\nargs = \"read n=1000 -rate threads=8\"\n";

#[test]
fn a_server_is_validated_and_its_password_never_stored() {
    let external =
        "\n[[server]]\nkind = \"external\"\nnodes = [\"10.0.1.25\"]\nuser = \"bench\"\npassword = \"s3cret\"\n";
    let suite = load(&format!("{BASE}{CQL}{external}")).unwrap();
    assert!(matches!(suite.servers.first().map(|s| &s.spec), Some(isobench::server::ServerSpec::External(_))));
    assert!(!suite.resolved.contains("s3cret") && suite.resolved.contains("REDACTED"), "{}", suite.resolved);
    let in_args = CQL.replace("threads=8", "threads=8 -mode user=u password=hunter2");
    assert!(!load(&format!("{BASE}{in_args}")).unwrap().resolved.contains("hunter2"));
    let e = load(&format!("{BASE}{CQL}\n[[server]]\nkind = \"external\"\n")).err().expect("rejected");
    assert!(e.contains("nodes") && e.contains("10.0.1.25"), "{e}");
    let e = load(&format!("{BASE}{CQL}\n[[server]]\nkind = \"scylla\"\n")).err().expect("rejected");
    assert!(e.contains("allowed kinds are: cassandra, postgres, mariadb, redis, external"), "{e}");
    let e =
        load(&format!("{BASE}{CQL}\n[[server]]\nkind = \"cassandra\"\nheap_size = \"1G\"\n")).err().expect("rejected");
    assert!(e.contains("heap_size"), "{e}");
    let e =
        load(&format!("{BASE}\n[[workload]]\nname = \"db\"\nkind = \"cql\"\nargs = \"read n=1000 -rate thread=8\"\n"))
            .err()
            .expect("rejected");
    assert!(e.contains("args"), "a bad cassandra-stress line is named by key: {e}");
}

#[test]
fn an_operators_database_is_named_by_selector_and_a_fault_needs_pods_to_delete() {
    let by_pods = "\n[[server]]\nkind = \"external\"\nservice = \"cassandra\"\nselector = \"app=cassandra\"\nkill_node = 2\nkill_after = \"10s\"\n";
    let suite = load(&format!("{BASE}{CQL}{by_pods}")).unwrap();
    let Some(isobench::server::ServerSpec::External(server)) = suite.servers.first().map(|s| &s.spec) else {
        panic!("an external server")
    };
    let pods = server.pods.as_ref().unwrap();
    assert_eq!((pods.service.as_deref(), pods.selector.as_str()), (Some("cassandra"), "app=cassandra"));
    assert_eq!(server.kill.as_ref().map(|k| k.node), Some(2));
    let e = load(&format!("{BASE}{CQL}\n[[server]]\nkind = \"external\"\nservice = \"cassandra\"\n"))
        .err()
        .expect("rejected");
    assert!(e.contains("service") && e.contains("selector"), "{e}");
    let e = load(&format!(
        "{BASE}{CQL}\n[[server]]\nkind = \"external\"\nnodes = [\"10.0.0.1\"]\nkill_node = 1\nkill_after = \"5s\"\n"
    ))
    .err()
    .expect("rejected");
    assert!(e.contains("kill_node") && e.contains("selector"), "{e}");
    // A workload's `nodes` list is an axis: one cell per cluster size.
    let sizes = CQL.replace("kind = \"cql\"\n", "kind = \"cql\"\nnodes = [1, 3]\n");
    let suite = load(&format!("{BASE}{sizes}\n[[server]]\nkind = \"cassandra\"\n")).unwrap();
    let db = suite.workloads.iter().find(|w| w.name == "db").unwrap();
    assert_eq!(db.variants.len(), 2);
}

#[test]
fn a_value_marked_secret_is_used_as_given_and_stored_redacted() {
    let external = "\n[[server]]\nkind = \"external\"\nnodes = [{ value = \"10.9.8.7\", secret = true }]\nuser = { value = \"svc-benchmarks\", secret = true }\npassword = \"pw\"\nport = { value = 9142, secret = false }\n";
    let args = CQL.replace("threads=8", "threads=8 -mode user=svc-benchmarks");
    let suite = load(&format!("{BASE}{args}{external}")).unwrap();
    let Some(isobench::server::ServerSpec::External(server)) = suite.servers.first().map(|s| &s.spec) else {
        panic!("an external server")
    };
    let server = &server.target;
    assert_eq!(server.nodes, ["10.9.8.7"]);
    assert_eq!(server.user.as_deref(), Some("svc-benchmarks"));
    assert_eq!(server.port, 9142, "secret = false is the plain value");
    for secret in ["10.9.8.7", "svc-benchmarks"] {
        assert!(!suite.resolved.contains(secret), "{}", suite.resolved);
    }
    assert!(suite.resolved.contains("user=REDACTED"), "inside other values too: {}", suite.resolved);
    assert_eq!(
        isobench::secrets::scrub("connecting to 10.9.8.7 as svc-benchmarks"),
        "connecting to REDACTED as REDACTED"
    );
    let e =
        load(&format!("{BASE}{CQL}{}", external.replace("secret = true", "secret = \"yes\""))).err().expect("rejected");
    assert!(e.contains("secret must be true or false"), "{e}");
    let e = load(&format!("{BASE}{CQL}{}", external.replace("{ value = \"svc-benchmarks\"", "{ value = [\"a\"]")))
        .err()
        .expect("rejected");
    assert!(e.contains("a secret is a string or a number"), "{e}");
}

#[test]
fn cells_keep_only_the_pairings_asked_for_and_the_baseline() {
    let with = |cells: &str| BASE.replacen("repeat = 2\n", &format!("repeat = 2\ncells = {cells}\n"), 1);
    let suite = load(&format!("{}{CQL}", with(r#"["workload=fio", "workload=db,volume=tmpfs"]"#))).unwrap();
    let plan = Plan::new(&suite, &[], 0).unwrap();
    assert_eq!(plan.cells.len(), 16 + 1, "fio on both volumes, the database on tmpfs only");
    let suite = load(&with(r#"["volume=ext4"]"#)).unwrap();
    let e = Plan::new(&suite, &[], 0).err().expect("rejected");
    assert!(e.contains("leaves out the baseline"), "{e}");
}

#[test]
fn block_volumes_name_their_storage_and_ask_before_destroying() {
    let block = |keys: &str| {
        BASE.replace("kind = \"loop\"\nfs = \"ext4\"\nsize = \"4G\"", &format!("kind = \"block\"\n{keys}"))
    };
    let e = load(&block("fs = \"ext4\"")).err().expect("the suite should be rejected");
    assert!(e.contains("name the storage: device = \"/dev/…\""), "{e}");
    let e = load(&block("device = \"/etc/hostname\"")).err().expect("the suite should be rejected");
    assert!(e.contains("key \"device\": /etc/hostname is not a block device"), "{e}");
    let e = load(&block("backing = \"file\"\nsize = \"1G\"\nmount_options = \"noatime\""))
        .err()
        .expect("the suite should be rejected");
    assert!(e.contains("key \"mount_options\": applies to a filesystem"), "{e}");
    let e =
        load(&block("backing = \"file\"\nsize = \"4M\"\npartitions = 8")).err().expect("the suite should be rejected");
    assert!(e.contains("leaves less than 1 MiB each"), "{e}");
    assert!(load(&block("backing = \"file\"\nsize = \"1G\"\npartitions = 4\nfs = \"xfs\"")).is_ok());
}

#[test]
fn new_workload_kinds_check_their_keys() {
    let workload = |table: &str| {
        let start = BASE.find("[[workload]]").unwrap();
        let end = BASE.find("[[bound]]").unwrap();
        format!("{}[[workload]]\nname = \"w\"\n{table}\n\n{}", &BASE[..start], &BASE[end..])
    };
    let e =
        load(&workload("kind = \"cpu\"\nevents = 1000\ntime = \"5s\"")).err().expect("the suite should be rejected");
    assert!(e.contains("give either events"), "{e}");
    let e = load(&workload("kind = \"memory\"\noper = \"copy\"")).err().expect("the suite should be rejected");
    assert!(e.contains("\"copy\" is not allowed; use one of: read, write"), "{e}");
    let e = load(&workload("kind = \"network\"\nbitrate = \"fast\"")).err().expect("the suite should be rejected");
    assert!(e.contains("key \"bitrate\": \"fast\" is not a rate"), "{e}");
    let e = load(&workload("kind = \"network\"\nprotocol = \"sctp\"")).err().expect("the suite should be rejected");
    assert!(e.contains("use one of: tcp, udp"), "{e}");
    let e = load(&workload("kind = \"cpu\"\ndensity = 0")).err().expect("the suite should be rejected");
    assert!(e.contains("key \"density\": must be at least 1"), "{e}");
    let suite = load(&workload("kind = \"cpu\"\ndensity = [1, 10, 50]")).unwrap();
    let plan = Plan::new(&suite, &[], 0).unwrap();
    let densities: Vec<Option<usize>> =
        plan.cells.iter().filter(|c| c.volume == 0).map(|c| suite.workloads[0].variants[c.variant].density).collect();
    assert_eq!(densities, [Some(1), Some(10), Some(50)], "a list of densities is a matrix axis");
    assert_eq!(plan.cells[0].labels.params, [("density".to_string(), "1".to_string())]);
}

#[test]
fn fio_series_are_a_list_of_known_logs() {
    let e = error_with("direct = true", "direct = true\nseries = [\"iops\", \"bw\"]");
    assert!(e.contains("fio logs no per-second series \"bw\"; choose from [\"iops\", \"clat\"]"), "{e}");
    let suite = load(&BASE.replacen("direct = true", "direct = true\nseries = []", 1)).unwrap();
    let plan = Plan::new(&suite, &[], 0).unwrap();
    assert_eq!(
        plan.cells.len(),
        load(BASE).map(|s| Plan::new(&s, &[], 0).unwrap().cells.len()).unwrap(),
        "not an axis"
    );
}

#[test]
fn a_workload_may_name_its_own_baseline() {
    let own = BASE.replacen("ioengine = \"libaio\"", "ioengine = \"libaio\"\nbaseline = { volume = \"ext4\" }", 1);
    let s = load(&own).unwrap();
    assert_eq!(s.baseline.of("fio").volume.as_deref(), Some("ext4"));
    assert_eq!(s.baseline.volume.as_deref(), Some("tmpfs"), "the suite's baseline stays for other workloads");
    let e = error_with("ioengine = \"libaio\"", "ioengine = \"libaio\"\nbaseline = { volume = \"nvme\" }");
    assert!(e.contains("key \"volume\": names no [[volume]]: \"nvme\"; the suite's volumes are: tmpfs, ext4"), "{e}");
}

#[test]
fn every_example_loads_and_plans() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let suite = Suite::load(&path, &[]).unwrap_or_else(|e| panic!("{e}"));
            Plan::new(&suite, &[], 0).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} examples");
}

const CLUSTER: &str = "\n[[server]]\nkind = \"cassandra\"\nnodes = 3\n";

#[test]
fn a_cluster_fault_names_a_node_it_has_and_both_keys() {
    let with = |extra: &str| load(&format!("{BASE}{CLUSTER}{extra}"));
    let e = with("kill_node = 4\nkill_after = \"5s\"").err().expect("refused");
    assert!(e.contains("kill_node") && e.contains("node 4 does not exist: nodes are 1 to 3"), "{e}");
    let e = with("kill_node = 2").err().expect("refused");
    assert!(e.contains("a fault needs both: kill_node = 3, kill_after = \"20s\""), "{e}");
    let e = with("cost_per_hour = -1").err().expect("refused");
    assert!(e.contains("cost_per_hour") && e.contains("must not be negative"), "{e}");
    let s = load_with(&format!("{BASE}{CLUSTER}"), &["server.kill_node=3", "server.kill_after=20s"]).unwrap();
    let Some(isobench::server::ServerSpec::Managed(m)) = s.servers.first().map(|s| &s.spec) else {
        panic!("a managed server")
    };
    assert_eq!((m.nodes, m.kill.as_ref().map(|k| (k.node, k.after.as_secs()))), (3, Some((3, 20))));
    let e = load_with(BASE, &["server.nodes=3"]).err().expect("refused");
    assert!(e.contains("the suite has no [[server]] table"), "{e}");
}

/// `kill = "machine"` is refused before any run where no machine can be stopped: an env that is
/// not k8s, a k8s env without both commands, and the commands' own mistakes.
#[test]
fn a_machine_loss_needs_k8s_envs_that_can_stop_a_machine() {
    let fault = "kill_node = 2\nkill_after = \"5s\"\nkill = \"machine\"\n";
    let e = load(&format!("{BASE}{CLUSTER}{fault}")).err().expect("refused on the host");
    assert!(e.contains("env \"host\"") && e.contains("kill = \"machine\" stops a Kubernetes node"), "{e}");
    let k8s = |keys: &str, server: &str| {
        let suite = BASE.replace("kind = \"host\"\n", &format!("kind = \"k8s\"\n{keys}"));
        load(&format!("{suite}{CLUSTER}{server}"))
    };
    let e = k8s("", fault).err().expect("refused without commands");
    assert!(e.contains("machine_stop") && e.contains("scripts/k8s-local.sh stop-node DIR {machine}"), "{e}");
    let e = k8s("machine_stop = \"halt {machine}\"\n", fault).err().expect("refused with one command");
    assert!(e.contains("machine_start") && e.contains("give both"), "{e}");
    let e = k8s("machine_stop = \"halt\"\nmachine_start = \"boot {machine}\"\n", fault).err().expect("refused");
    assert!(e.contains("\"halt\" does not name the machine"), "{e}");
    let commands = "machine_stop = \"halt {machine}\"\nmachine_start = \"boot {machine}\"\n";
    let s = k8s(commands, &format!("{fault}machine_down = \"30s\"\n")).unwrap_or_else(|e| panic!("{e}"));
    let Some(isobench::server::ServerSpec::Managed(m)) = s.servers.first().map(|s| &s.spec) else {
        panic!("a managed server")
    };
    let down = Some(std::time::Duration::from_secs(30));
    assert_eq!(m.kill.as_ref().map(|k| k.what), Some(isobench::server::Lost::Machine { down }));
    let e = k8s(commands, "kill_node = 2\nkill_after = \"5s\"\nmachine_down = \"30s\"\n").err().expect("refused");
    assert!(e.contains("machine_down") && e.contains("only with kill = \"machine\""), "{e}");
    let e = k8s(commands, "kill = \"machine\"\n").err().expect("refused without a fault");
    assert!(e.contains("give the fault too"), "{e}");
    let e = k8s(commands, "kill_node = 2\nkill_after = \"5s\"\nkill = \"node\"\n").err().expect("refused");
    assert!(e.contains("kill") && e.contains("machine"), "{e}");
    let e = k8s("loaders_apart = \"always\"\n", "").err().expect("refused");
    assert!(e.contains("loaders_apart") && e.contains("required"), "{e}");
}

#[test]
fn gvisors_knobs_are_env_keys_checked_against_its_own_flag_listing() {
    let suite = |runtime: &str, knobs: &str| {
        format!(
            "name = \"g\"\nbaseline = {{ env = \"g\" }}\n[[env]]\nname = \"g\"\nkind = \"oci\"\nruntime = \"{runtime}\"\n{knobs}\n[[volume]]\nname = \"t\"\nkind = \"tmpfs\"\n[[workload]]\nname = \"c\"\nkind = \"cpu\"\n"
        )
    };
    let e = load(&suite("runc", "directfs = false")).err().expect("rejected");
    assert!(e.contains("key \"directfs\": is one of gVisor's knobs; runtime \"runc\" is not runsc"), "{e}");
    if isobench::env::oci::Runtime::resolve("runsc").path.is_none() {
        common::skip_part("runsc", &common::missing("runsc", "runsc is not installed (scripts/setup.sh builds it)"));
        return;
    }
    let e = load(&suite("runsc", "platform = \"bogus\"")).err().expect("rejected");
    assert!(e.contains("\"bogus\" is not a platform this runsc knows; its help says: specifies which platform"), "{e}");
    let s = load(&suite("runsc", "platform = \"ptrace\"\ndirectfs = false\noverlay = \"root:memory\"")).unwrap();
    let setup = s.envs[0].item.describe();
    assert_eq!(setup["runtime.platform"], "ptrace");
    assert_eq!(setup["runtime.variant"], "directfs false, overlay2 root:memory");
}

/// A suite whose CQL workload loads a database isobench starts, beside a fio workload.
fn served(extra_top: &str, host: &str) -> String {
    BASE.replace("repeat = 2\n", &format!("repeat = 2\n{extra_top}\n"))
        .replace("kind = \"host\"\n", &format!("kind = \"host\"\n{host}\n"))
        + "\n[[server]]\nkind = \"cassandra\"\n\n[[workload]]\nname = \"db\"\nkind = \"cql\"\nargs = \"write n=1000\"\n"
}

#[test]
fn cpus_are_split_between_the_database_and_the_load_generator_only_where_both_run_here() {
    use isobench::sys::CpuSet;
    let available = CpuSet::available();
    let Some((lower, upper)) = available.halves() else {
        common::skip(&common::missing("cpus", "a machine of one CPU cannot be split"));
        return;
    };
    let s = load(&served("split_cpus = true", "")).unwrap();
    let (fio, db) = (&s.workloads[0].variants[0].spec, &s.workloads[1].variants[0].spec);
    let pins = s.pins(0, 1, db);
    assert_eq!(
        (pins.sandbox, pins.loader),
        (Some(upper.clone()), Some(lower.clone())),
        "the upper half to the database"
    );
    assert_eq!(s.pins(0, 0, fio), Default::default(), "a cell without a load generator of its own keeps the machine");
    let first = available.cpus().next().unwrap();
    let own = load(&served("", &format!("cpuset = \"{upper}\"\nloader_cpuset = {first}"))).unwrap();
    assert_eq!(own.pins(0, 1, db).loader, Some(CpuSet::from_cpus([first])), "a bare number is one CPU");
    assert_eq!(own.pins(0, 0, fio).sandbox, Some(upper.clone()), "an env's own cpuset pins all its cells");
    assert_eq!(own.pins(0, 0, fio).loader, None);

    let beyond = available.cpus().last().unwrap() + 1;
    let e = load(&served("", &format!("cpuset = \"{beyond}\""))).err().unwrap();
    assert!(
        e.contains(&format!(
            "key \"cpuset\": \"{beyond}\" names CPUs this machine does not give isobench: it may use CPUs {available}"
        )),
        "{e}"
    );
    let e = load(&served("", &format!("cpuset = \"{available}\"\nloader_cpuset = \"{upper}\""))).err().unwrap();
    assert!(e.contains(&format!("key \"loader_cpuset\": shares CPU(s) {upper} with cpuset")), "{e}");
    let e = load(&served("", "cpuset = \"1-\"")).err().unwrap();
    assert!(e.contains("key \"cpuset\": \"1-\" is not a list of CPUs"), "{e}");
    let e = load(&BASE.replace("kind = \"host\"\n", &format!("kind = \"host\"\nloader_cpuset = \"{lower}\"\n")))
        .err()
        .unwrap();
    assert!(e.contains("key \"loader_cpuset\": only a cell whose database isobench starts"), "{e}");
    let e = load(&BASE.replace("repeat = 2\n", "repeat = 2\nsplit_cpus = true\n")).err().unwrap();
    assert!(e.contains("key \"split_cpus\": it splits the CPUs of a cell whose database isobench starts"), "{e}");
    let e = load(&served("split_cpus = true", &format!("cpuset = \"{upper}\""))).err().unwrap();
    assert!(e.contains("key \"split_cpus\": env \"host\" sets its own cpuset or loader_cpuset"), "{e}");
    let k8s = served("", "").replace("kind = \"host\"\n", "kind = \"k8s\"\ncpuset = \"0\"\n");
    let e = load(&k8s).err().unwrap();
    assert!(e.contains("key \"cpuset\": a cluster's kubelet places a pod's processes"), "{e}");
}

#[test]
fn the_order_and_the_settle_are_checked() {
    let s = load(BASE).unwrap();
    assert_eq!(s.order, isobench::store::Order::Shuffled, "shuffled unless the suite says otherwise");
    assert_eq!(s.settle, Some(isobench::sys::Settle::default()));
    let s = load(&BASE.replace("repeat = 2\n", "repeat = 2\norder = \"fixed\"\nsettle = false\n")).unwrap();
    assert_eq!((s.order, s.settle), (isobench::store::Order::Fixed, None));
    let e = error_with("repeat = 2\n", "repeat = 2\norder = \"random\"\n");
    assert!(e.contains("key \"order\": \"random\" is not allowed; use one of: shuffled, fixed"), "{e}");
    let e = error_with("repeat = 2\n", "repeat = 2\nsettle = { timeout = \"0s\" }\n");
    assert!(e.contains("key \"timeout\": must be more than 0; to start each run at once, write settle = false"), "{e}");
    let e = error_with("repeat = 2\n", "repeat = 2\nsettle = { cpu_busy = \"0%\" }\n");
    assert!(e.contains("key \"cpu_busy\": must be more than 0% and at most 100%"), "{e}");
    let e = error_with("repeat = 2\n", "repeat = 2\nsettle = \"yes\"\n");
    assert!(e.contains("key \"settle\": expected true, false or a table"), "{e}");
    let e = error_with("repeat = 2\n", "repeat = 2\nsettle = { wait = \"1s\" }\n");
    assert!(e.contains("key \"wait\": unknown key; allowed keys are: cpu_busy, timeout"), "{e}");
}

/// `slice`: a run cut into slices that alternate between a block's environments. A slice fio
/// cannot measure, a run that holds fewer than two, or slicing what cannot be sliced is refused
/// at the key, saying the fix.
#[test]
fn slices_fio_cannot_measure_or_cut_are_refused_at_the_key() {
    let sliced = |slice: &str| error_with("runtime = \"10s\"", &format!("runtime = \"10s\"\nslice = \"{slice}\""));
    let e = sliced("100ms");
    assert!(e.contains("key \"slice\"") && e.contains("too short for fio to measure") && e.contains("500ms"), "{e}");
    let e = sliced("6s");
    assert!(e.contains("key \"slice\"") && e.contains("fewer than two slices") && e.contains("raise runtime"), "{e}");
    let e = error_with("runtime = \"10s\"", "runtime = \"10s\"\nslice = \"1s\"\nramp_time = \"1s\"");
    assert!(e.contains("key \"ramp_time\"") && e.contains("remove ramp_time"), "{e}");
    let e = error_with("runtime = \"10s\"", "runtime = \"10s\"\nslice = \"1s\"\ndensity = 2");
    assert!(e.contains("key \"slice\"") && e.contains("remove slice or density"), "{e}");
    let ok = load(&BASE.replacen("runtime = \"10s\"", "runtime = \"10s\"\nslice = \"1s\"", 1)).unwrap();
    let sliced = ok.workloads[0].variants[0].spec.sliced().expect("runs in slices");
    assert_eq!((sliced.count, sliced.length), (10, std::time::Duration::from_secs(1)));
}

/// An environment whose sandbox cannot stay up between slices at isobench's word is refused
/// for a sliced workload before any run, naming the workload, the env and the fix.
#[test]
fn slices_in_an_environment_that_cannot_stay_up_are_refused_before_any_run() {
    let text = BASE.replacen("runtime = \"10s\"", "runtime = \"10s\"\nslice = \"1s\"", 1).replacen(
        "[[volume]]",
        "[[env]]\nname = \"vm\"\nkind = \"vm\"\nmemory = \"2G\"\n\n[[volume]]",
        1,
    );
    let s = load(&text).unwrap();
    let plan = Plan::new(&s, &[], 0).unwrap();
    let refused = isobench::runner::refusals(&s, &plan);
    assert_eq!(refused.len(), 1, "{refused:#?}");
    let (why, cells) = &refused[0];
    assert!(why.contains("workload \"fio\" runs in slices") && why.contains("env \"vm\""), "{why}");
    assert!(why.contains("remove slice") && why.contains("host, oci or podman"), "{why}");
    assert!(cells.iter().all(|c| c.starts_with("vm.")), "only the vm's cells: {cells:?}");
}

/// A suite of PostgreSQL, MariaDB and Redis, each loaded by its users' tool.
fn databases(extra: &str) -> String {
    BASE.to_string()
        + r#"
[[server]]
name = "pg"
kind = "postgres"
memory = "512M"

[[server]]
name = "maria"
kind = "mariadb"

[[server]]
name = "cache"
kind = "redis"
durability = "always"

[[workload]]
name = "tpcb"
kind = "pgbench"
load = "-i -s 2"
args = "-c 4 -j 2 -T 10"

[[workload]]
name = "sysbench"
kind = "oltp"
server = "maria"
args = "oltp_read_write --tables=2 --table-size=1000 --threads=4 --time=10"

[[workload]]
name = "redis"
kind = "redis-benchmark"
args = "-t set,get -n 10000 -c 20"
"# + extra
}

#[test]
fn database_servers_and_their_loads_are_checked_before_any_run() {
    for (program, package) in
        [("pgbench", "postgresql"), ("redis-server", "redis-server"), ("mariadbd", "mariadb-server")]
    {
        let found = isobench::sys::find_program(program).is_some()
            || std::path::Path::new("/usr/sbin").join(program).exists()
            || std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|mut d| d.next().is_some());
        if !found {
            common::skip(&common::missing("databases", format!("{program} is not installed ({package})")));
            return;
        }
    }
    let s = load(&databases("")).unwrap();
    let kind_of = |w: usize| s.server(w).map(|spec| spec.kind());
    // fio loads no server; pgbench finds the only postgres; oltp the one it names; redis its kind.
    assert_eq!(
        [kind_of(0), kind_of(1), kind_of(2), kind_of(3)],
        [None, Some("postgres"), Some("mariadb"), Some("redis")]
    );
    let refused = |from: &str, to: &str| load(&databases("").replacen(from, to, 1)).err().expect("refused");
    let e = refused("memory = \"512M\"", "memory = \"512M\"\nsettings = { shared_bufers = \"128MB\" }");
    assert!(e.contains("key \"settings\"") && e.contains("\"shared_bufers\"") && e.contains("shared_buffers"), "{e}");
    let e = refused("durability = \"always\"", "durability = \"always\"\nsettings = { appendfsyncc = \"no\" }");
    assert!(e.contains("Redis has no setting \"appendfsyncc\""), "{e}");
    let e = refused("memory = \"512M\"", "heap = \"1G\"");
    assert!(e.contains("key \"heap\": unknown key"), "{e}");
    let e = refused("-c 4 -j 2 -T 10", "-c 0 -T 10");
    assert!(e.contains("key \"args\": -c 0"), "{e}");
    let e = refused("-c 4 -j 2 -T 10", "-c 4 -T 0");
    assert!(e.contains("key \"args\": -T 0"), "{e}");
    let e = refused("-c 4 -j 2 -T 10", "-c 4 -T 10 -f missing.sql");
    assert!(e.contains("-f missing.sql: cannot read"), "{e}");
    let e = refused("-c 4 -j 2 -T 10", "-c 4 -T 10 --no-such-option");
    assert!(e.contains("pgbench refuses it"), "{e}");
    let e = refused("--threads=4 --time=10", "--threads=4 --time=10 --warmup-time=2");
    assert!(e.contains("sysbench refuses it: invalid option: --warmup-time=2"), "{e}");
    let e = refused("-t set,get", "-t set,gett");
    assert!(e.contains("no test \"gett\""), "{e}");
    let e = refused("server = \"maria\"", "server = \"mysql\"");
    assert!(e.contains("key \"server\": the suite has no [[server]] named \"mysql\" (it has pg, maria, cache)"), "{e}");
    let e = refused("server = \"maria\"", "server = \"cache\"");
    assert!(e.contains("it is of kind \"redis\", and a oltp workload loads \"mariadb\" or \"postgres\""), "{e}");
    let e = refused("name = \"maria\"\n", "");
    assert!(e.contains("names each"), "{e}");
    // Without its server: pgbench says which kind to add.
    let e = load(&databases("").replacen("kind = \"postgres\"", "kind = \"redis\"", 1)).err().unwrap();
    assert!(e.contains("add [[server]] kind = \"postgres\""), "{e}");
    // oltp could load PostgreSQL or MariaDB: with both and no name, it must say which.
    let e = refused("server = \"maria\"\n", "");
    assert!(e.contains("name one, server = \"pg\""), "{e}");
    // --set reaches a named server.
    let s = load_with(&databases(""), &["server.pg.memory=2G"]).unwrap();
    let Some(isobench::server::ServerSpec::Database(db)) = s.server(1) else { panic!("postgres") };
    assert_eq!(db.memory, 2 << 30);
}
