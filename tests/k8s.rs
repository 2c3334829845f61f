//! The k8s environment against a real Kubernetes: etcd, kube-apiserver, controller-manager,
//! scheduler and kubelet (built from the Go module proxy by scripts/setup.sh) with containerd,
//! started on 127.0.0.1 by scripts/k8s-local.sh. fio runs in real pods of the runtime classes
//! runc and gvisor on a statically provisioned storage class; an Indexed Job of 4 loader pods
//! loads the host's Cassandra; a run killed with SIGKILL leaves objects that `isobench cleanup`
//! deletes.
//!
//! One cluster serves the whole binary (it takes ~30 s to start), so the tests run in one
//! function, in order.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{Sandbox, ok, run_record, text};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Api, ListParams};

/// The suites' volume: a claim of the local cluster's storage class.
const CLAIM: &str = "[[volume]]\nname = \"local\"\nkind = \"pvc\"\nstorage_class = \"isobench-local\"\nsize = \"1G\"\n";

/// fsynced 4k random writes for `runtime`.
fn fio(runtime: &str) -> String {
    format!(
        "[[workload]]\nname = \"fio\"\nkind = \"fio\"\nrw = \"randwrite\"\nbs = \"4k\"\nsize = \"64M\"\nruntime = \"{runtime}\"\nfsync = 16\n"
    )
}

const KUBE_DIR: &str = "/usr/local/lib/isobench/k8s-v1.34.4";

/// The cluster, stopped (pods, containerd's shims, mounts and all) when dropped.
struct LocalCluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    /// The cluster's own directory, apart from the test's sandbox: the kubelet's mounts there
    /// are the cluster's, not leftovers of isobench's.
    _home: tempfile::TempDir,
}

impl LocalCluster {
    fn start(sb: &Sandbox) -> Result<LocalCluster, String> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let image = sb.path().join("isobench-image.tar");
        // The pod image is made of the binary under test.
        let bin = Path::new(env!("CARGO_BIN_EXE_isobench"));
        let made = Command::new(root.join("scripts/k8s-image.sh"))
            .args(["--bin", bin.to_str().unwrap(), image.to_str().unwrap()])
            .output()
            .unwrap();
        if !made.status.success() {
            return Err(format!("the image was not made: {}", text(&made)));
        }
        let home = tempfile::Builder::new().prefix("isobench-k8s-").tempdir_in("/var/tmp").unwrap();
        let dir = home.path().join("cluster");
        let started = Instant::now();
        let up = Command::new(root.join("scripts/k8s-local.sh"))
            .args(["up", dir.to_str().unwrap(), image.to_str().unwrap()])
            .output()
            .unwrap();
        let cluster = LocalCluster { kubeconfig: dir.join("kubeconfig"), dir, _home: home };
        if !up.status.success() {
            return Err(format!("the cluster did not start: {}", text(&up)));
        }
        eprintln!("local Kubernetes ready after {:.1} s", started.elapsed().as_secs_f64());
        Ok(cluster)
    }

    /// Objects isobench made that are still in the cluster (by its managed-by label).
    fn isobench_objects(&self) -> Vec<String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let cluster = isobench::env::k8s::api::Cluster {
                kubeconfig: Some(self.kubeconfig.clone()),
                context: None,
                namespace: "default".into(),
            };
            let client = cluster.client().await.unwrap();
            let list = ListParams::default().labels("app.kubernetes.io/managed-by=isobench");
            let mut left = Vec::new();
            let names = |kind: &str, items: Vec<Option<String>>| -> Vec<String> {
                items.into_iter().map(|n| format!("{kind} {}", n.unwrap_or_default())).collect()
            };
            let jobs: Api<Job> = Api::default_namespaced(client.clone());
            left.extend(names(
                "Job",
                jobs.list(&list).await.unwrap().items.into_iter().map(|o| o.metadata.name).collect(),
            ));
            let pods: Api<Pod> = Api::default_namespaced(client.clone());
            left.extend(names(
                "Pod",
                pods.list(&list).await.unwrap().items.into_iter().map(|o| o.metadata.name).collect(),
            ));
            let secrets: Api<Secret> = Api::default_namespaced(client.clone());
            left.extend(names(
                "Secret",
                secrets.list(&list).await.unwrap().items.into_iter().map(|o| o.metadata.name).collect(),
            ));
            let claims: Api<PersistentVolumeClaim> = Api::default_namespaced(client);
            left.extend(names(
                "PersistentVolumeClaim",
                claims.list(&list).await.unwrap().items.into_iter().map(|o| o.metadata.name).collect(),
            ));
            left
        })
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let down = Command::new(root.join("scripts/k8s-local.sh")).args(["down", self.dir.to_str().unwrap()]).output();
        if let Some(o) = down.ok().filter(|o| !o.status.success()) {
            eprintln!("k8s-local.sh down failed: {}", text(&o));
        }
    }
}

fn unavailable() -> Option<String> {
    if !common::is_root() {
        return Some("needs root (kubelet, containerd)".into());
    }
    if !Path::new(KUBE_DIR).join("kubelet").exists() {
        return Some(format!("{KUBE_DIR} has no kubelet (scripts/setup.sh test builds Kubernetes from the Go proxy)"));
    }
    // scripts/k8s-local.sh runs the containerd built beside the kubelet, not one on PATH.
    if !Path::new(KUBE_DIR).join("containerd").exists() {
        return Some(format!("{KUBE_DIR} has no containerd (scripts/setup.sh test builds it from the Go proxy)"));
    }
    None
}

fn host_kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap().trim().to_string()
}

#[test]
fn pods_of_real_runtime_classes_run_fio_and_loaders_and_leave_nothing() {
    if let Some(why) = unavailable() {
        return eprintln!("SKIP: {why}");
    }
    let sb = Sandbox::new();
    let overcommit = || std::fs::read_to_string("/proc/sys/vm/overcommit_memory").unwrap();
    let before = overcommit();
    let cluster = match LocalCluster::start(&sb) {
        Ok(c) => c,
        Err(why) => panic!("{why}"),
    };
    let gvisor = Path::new("/usr/local/lib/isobench/bin/containerd-shim-runsc-v1").exists();

    fio_in_runc_and_gvisor_pods(&sb, &cluster, gvisor);
    indexed_loaders_fill_the_hosts_cassandra(&sb, &cluster);
    a_killed_run_is_cleaned_up_by_label(&sb, &cluster);
    drop(cluster);
    assert_eq!(overcommit(), before, "the kubelet's kernel tunables are put back when the cluster stops");
}

fn fio_in_runc_and_gvisor_pods(sb: &Sandbox, cluster: &LocalCluster, gvisor: bool) {
    let kubeconfig = cluster.kubeconfig.display();
    let gvisor_env = if gvisor {
        format!(
            "[[env]]\nname = \"gvisor\"\nkind = \"k8s\"\nkubeconfig = \"{kubeconfig}\"\nruntime_class = \"gvisor\"\n"
        )
    } else {
        eprintln!("SKIP (part): no gVisor containerd shim, so no gvisor RuntimeClass");
        String::new()
    };
    let suite = format!(
        r#"
name = "k8s"
repeat = 1
baseline = {{ env = "runc" }}

[[env]]
name = "runc"
kind = "k8s"
kubeconfig = "{kubeconfig}"
runtime_class = "runc"
resources = {{ cpu = "1", memory = "1G" }}

{gvisor_env}
[[env]]
name = "missing"
kind = "k8s"
kubeconfig = "{kubeconfig}"
runtime_class = "no-such-class"

{CLAIM}
{fio}"#,
        fio = fio("2s"),
    );
    let (o, out) = sb.run_suite(&suite, &[]);
    let all = text(&o);
    let runc = run_record(&out, "runc.local.fio", 1);
    assert_eq!(runc["status"], "ok", "{all}\n{runc}");
    assert_eq!(runc["facts"]["kernel.release"], host_kernel(), "a runc pod runs on the host's kernel");
    assert_eq!(runc["setup"]["k8s.runtime_class"], "runc");
    assert_eq!(runc["setup"]["k8s.node"], "localhost");
    assert!(runc["setup"]["volume.pv"].as_str().unwrap().starts_with("isobench-local-"), "{runc}");
    let iops = runc["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "iops").unwrap();
    assert!(iops["value"].as_f64().unwrap() > 0.0, "{iops}");
    let notes = runc["notes"].as_array().cloned().unwrap_or_default();
    assert!(
        notes.iter().all(|n| !n.as_str().unwrap().contains("was not applied")),
        "the pod's limits apply: {notes:?}"
    );

    if gvisor {
        let gv = run_record(&out, "gvisor.local.fio", 1);
        assert_eq!(gv["status"], "ok", "{all}\n{gv}");
        assert_eq!(gv["setup"]["k8s.runtime_class"], "gvisor");
        assert_ne!(gv["facts"]["kernel.release"], host_kernel(), "gVisor reports its own kernel");
        assert!(gv["facts"]["dmesg.first"].as_str().unwrap_or_default().contains("gVisor"), "{}", gv["facts"]);
    }

    let missing = run_record(&out, "missing.local.fio", 1);
    assert_eq!(missing["status"], "failed");
    let error = missing["error"].as_str().unwrap();
    assert!(error.contains(r#"RuntimeClass "no-such-class" not found"#), "the API server's own words: {error}");

    assert_eq!(cluster.isobench_objects(), Vec::<String>::new(), "objects left after the run");
    sb.assert_clean();
}

fn indexed_loaders_fill_the_hosts_cassandra(sb: &Sandbox, cluster: &LocalCluster) {
    let node = match common::cassandra::shared() {
        Ok(n) => n,
        Err(why) => return eprintln!("SKIP (part): no Cassandra: {why}"),
    };
    let suite = format!(
        r#"
name = "k8s-loaders"
repeat = 1
baseline = {{ env = "runc" }}

[[server]]
kind = "external"
nodes = ["127.0.0.1"]
port = {port}

[[env]]
name = "runc"
kind = "k8s"
kubeconfig = "{kubeconfig}"
runtime_class = "runc"
host_network = true

{CLAIM}
[[workload]]
name = "write"
kind = "cql"
loaders = 4
args = "write n=4000 no-warmup -schema keyspace=k8s_loaders -rate threads=4"
"#,
        port = node.port,
        kubeconfig = cluster.kubeconfig.display()
    );
    let (o, out) = sb.run_suite(&suite, &[]);
    let all = text(&o);
    let run = run_record(&out, "runc.local.write", 1);
    assert_eq!(run["status"], "ok", "{all}\n{run}");
    assert_eq!(run["setup"]["k8s.pods"], "4", "{run}");
    let value = |m: &str| {
        run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == m).unwrap()["value"].as_f64().unwrap()
    };
    assert_eq!(value("loaders"), 4.0);
    assert_eq!(value("errors"), 0.0);
    for i in 1..=4 {
        assert!(value(&format!("loader_{i}_op_rate")) > 0.0, "loader {i} did nothing");
    }
    // Each pod wrote its own slice: the four slices together are every key, once.
    assert_eq!(common::cassandra::count_at_quorum("127.0.0.1", node.port, "k8s_loaders.standard1"), 4000);
    assert_eq!(cluster.isobench_objects(), Vec::<String>::new(), "objects left after the run");
}

fn a_killed_run_is_cleaned_up_by_label(sb: &Sandbox, cluster: &LocalCluster) {
    let suite = format!(
        r#"
name = "k8s-killed"
repeat = 1
baseline = {{ env = "runc" }}

[[env]]
name = "runc"
kind = "k8s"
kubeconfig = "{kubeconfig}"
runtime_class = "runc"

{CLAIM}
{fio}"#,
        kubeconfig = cluster.kubeconfig.display(),
        fio = fio("120s"),
    );
    let (run, _) = sb.start_suite(&suite, &[]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen = cluster.isobench_objects();
        if seen.iter().any(|o| o.starts_with("Pod ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert!(seen.iter().any(|o| o.starts_with("Job ")), "the run made no Job: {seen:?}");
    let cleaned = sb.kill_then_cleanup(run);
    let said = ok(&cleaned);
    assert!(said.contains("Kubernetes objects labelled isobench.dev/name="), "{said}");
    assert_eq!(cluster.isobench_objects(), Vec::<String>::new(), "objects left after cleanup");
    let again = ok(&sb.run(&["cleanup"]));
    assert!(again.contains("nothing to clean up"), "{again}");
    // The cluster's bearer token (in the kubeconfig the suites name) reaches no file of the runs
    // (result sets, work directory, state files) and nothing cleanup said.
    let token = std::fs::read_to_string(cluster.dir.join("token")).unwrap();
    let token = token.trim();
    let holding = Command::new("grep").args(["-rlaF", token]).arg(sb.path()).output().unwrap();
    assert!(holding.stdout.is_empty(), "files holding the token: {}", String::from_utf8_lossy(&holding.stdout));
    assert!(!said.contains(token) && !again.contains(token));
}

#[test]
fn render_prints_each_runs_objects_with_secrets_redacted() {
    let sb = Sandbox::new();
    let suite = sb.write(
        "k.toml",
        r#"
name = "render"
baseline = { env = "gvisor" }

[[server]]
kind = "external"
nodes = ["10.0.1.25"]
user = "bench"
password = "s3cr3t-render-pw"

[[env]]
name = "gvisor"
kind = "k8s"
kubeconfig = "/nonexistent/kubeconfig"
runtime_class = "gvisor"
resources = { cpu = "500m", memory = "1G" }
node_selector = { "disktype" = "nvme" }

[[volume]]
name = "claim"
kind = "pvc"
storage_class = "fast"
size = "2G"
volume_mode = "Block"

[[workload]]
name = "cql"
kind = "cql"
loaders = 3
args = "write n=3000 -mode native cql3 user=bench password=s3cr3t-render-pw"
"#,
    );
    let yaml = ok(&sb.run(&["k8s", "render", suite.to_str().unwrap()]));
    assert!(!yaml.contains("s3cr3t-render-pw"), "{yaml}");
    assert!(yaml.contains("REDACTED"), "{yaml}");
    for expected in [
        "kind: Secret",
        "kind: Job",
        "completionMode: Indexed",
        "completions: 3",
        "runtimeClassName: gvisor",
        "disktype: nvme",
        "cpu: 500m",
        "isobench.dev/run",
    ] {
        assert!(yaml.contains(expected), "{expected} missing from:\n{yaml}");
    }
    // Loaders never mount the claim, so there is none to apply.
    assert!(!yaml.contains("kind: PersistentVolumeClaim"), "{yaml}");

    // A claim is applied for other workloads; a bad runtime class name is refused up front.
    let fio = std::fs::read_to_string(&suite).unwrap().replace(
        "[[workload]]\nname = \"cql\"\nkind = \"cql\"\nloaders = 3\n",
        "[[workload]]\nname = \"fio\"\nkind = \"fio\"\nrw = \"randread\"\n[[workload]]\nname = \"cql\"\nkind = \"cql\"\n",
    );
    let suite = sb.write("k2.toml", &fio);
    let yaml = ok(&sb.run(&["k8s", "render", suite.to_str().unwrap()]));
    assert!(yaml.contains("kind: PersistentVolumeClaim") && yaml.contains("volumeMode: Block"), "{yaml}");
    assert!(yaml.contains("devicePath: /dev/isobench-data"), "{yaml}");
    let bad = sb.run(&["k8s", "render", suite.to_str().unwrap(), "--set", "env.gvisor.runtime_class=gVisor"]);
    assert!(!bad.status.success());
    assert!(
        text(&bad).contains("runtime_class") && text(&bad).contains("not a valid Kubernetes name"),
        "{}",
        text(&bad)
    );
}
