//! `isobench doctor`: what this machine can run, and why what it cannot is missing. Every check
//! does the real thing where that is cheap (find a free loop device, ask fio for its engines).

use std::path::Path;
use std::time::Instant;

use crate::ledger::{Ledger, Resource};
use crate::report::Table;
use crate::syntax;
use crate::sys::{self, find_program};

pub struct Check {
    pub area: &'static str,
    pub name: String,
    /// `Ok(detail)` when usable, `Err(why not)` when not.
    pub status: Result<String, String>,
}

/// Every check; runtimes are tried for real with containers made under `workdir`.
pub fn checks(workdir: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let mut add = |area, name: &str, status| out.push(Check { area, name: name.to_string(), status });
    add("env", "host", Ok(kernel()));
    add("volume", "dir", Ok("any existing directory".into()));
    add("volume", "tmpfs", root().map(|_| "mount -t tmpfs".into()));
    for fs in ["ext4", "xfs"] {
        add("volume", &format!("loop ({fs})"), root().and_then(|_| loop_fs(fs)));
    }
    add(
        "volume",
        "block (raw device, slices)",
        root().and_then(|_| loop_fs("ext4")).map(|_| "losetup --offset --sizelimit".into()),
    );
    add("volume", "nbd, mirror (nbdkit, qemu-storage-daemon)", network_volumes());
    add("volume", "nbd access: kernel NBD client", kernel_nbd());
    add("volume", "nbd access: FUSE export + loop", fuse());
    add(
        "volume",
        "nvmeof (remote target)",
        crate::volume::nvmeof::unavailable(false).map_or(Ok("nvme-cli, nvme-tcp".into()), Err),
    );
    add(
        "volume",
        "nvmeof (kernel nvmet target)",
        crate::volume::nvmeof::unavailable(true).map_or(Ok("nvmet-tcp".into()), Err),
    );
    add("workload", "fio", fio());
    for (tool, package) in [("sysbench", "sysbench"), ("iperf3", "iperf3")] {
        add("tool", tool, version_of(tool, package));
    }
    out.extend(runtime_checks(workdir));
    add_kubernetes(&mut out);
    out
}

/// Whether the kubeconfig a k8s env would use by default reaches an API server.
fn add_kubernetes(out: &mut Vec<Check>) {
    use crate::env::k8s::api::block_on;
    use crate::ledger::KubeCluster;
    let cluster = KubeCluster { namespace: "default".into(), ..Default::default() };
    let status = match cluster.missing() {
        Some(why) => Err(why),
        None => block_on(async {
            let client = cluster.client().await?;
            cluster.check(&client).await
        })
        .and_then(|r| r)
        .map(|version| format!("API server {version} ({})", cluster.kubeconfig_path().unwrap_or_default().display()))
        .map_err(|e| format!("{e:#}")),
    };
    out.push(Check { area: "env", name: "k8s (default kubeconfig)".into(), status });
}

/// The sandboxes isobench knows, each as a suite would write it.
const SANDBOXES: &[(&str, &str)] = &[
    ("runc", "kind = \"oci\"\nruntime = \"runc\""),
    ("crun", "kind = \"oci\"\nruntime = \"crun\""),
    ("runsc (systrap)", "kind = \"oci\"\nruntime = \"runsc\"\nruntime_args = [\"--platform=systrap\"]"),
    ("runsc (ptrace)", "kind = \"oci\"\nruntime = \"runsc\"\nruntime_args = [\"--platform=ptrace\"]"),
    ("/usr/bin/runsc (Debian)", "kind = \"oci\"\nruntime = \"/usr/bin/runsc\"\nruntime_args = [\"--platform=ptrace\"]"),
    ("kata-runtime", "kind = \"oci\"\nruntime = \"kata-runtime\""),
    ("podman (runc)", "kind = \"podman\"\nruntime = \"runc\""),
    ("podman (crun)", "kind = \"podman\"\nruntime = \"crun\""),
    ("podman (runsc)", "kind = \"podman\"\nruntime = \"runsc\""),
    ("docker", "kind = \"docker\"\nimage = \"debian:12\""),
];

/// Each sandbox: its version, and whether it really runs `/bin/true` here.
fn runtime_checks(workdir: &Path) -> Vec<Check> {
    let ledger = match Ledger::open(workdir) {
        Ok(l) => l,
        Err(e) => return vec![Check { area: "runtime", name: "all".into(), status: Err(format!("{e:#}")) }],
    };
    let mut checks: Vec<Check> = SANDBOXES
        .iter()
        .map(|(name, text)| Check {
            area: "runtime",
            name: name.to_string(),
            status: try_sandbox(&ledger, workdir, name, text),
        })
        .collect();
    checks.extend(network_checks(&ledger));
    let _ = ledger.close();
    checks
}

/// The sandboxes' network paths, each made and removed for real.
fn network_checks(ledger: &Ledger) -> Vec<Check> {
    let try_path = |make: fn(&Ledger) -> anyhow::Result<crate::net::NetPath>| {
        let mark = ledger.mark();
        let made = make(ledger);
        let released = ledger.release_to(mark);
        match (made, released) {
            (Ok(path), Ok(())) => Ok(path.describe().remove("net.path").unwrap_or_default()),
            (Err(e), _) => Err(format!("{e:#}")),
            (_, Err(e)) => Err(format!("teardown failed: {e:#}")),
        }
    };
    let vhost = if Path::new("/dev/vhost-net").exists() {
        Ok("/dev/vhost-net: VMs' taps use vhost-net".to_string())
    } else {
        Err("no /dev/vhost-net: VMs use QEMU's user-mode network unless net = \"tap\" (then without vhost)".into())
    };
    vec![
        Check {
            area: "network",
            name: "namespace + veth (containers)".into(),
            status: try_path(crate::net::namespace),
        },
        Check { area: "network", name: "tap (VMs)".into(), status: try_path(crate::net::tap) },
        Check { area: "network", name: "vhost-net".into(), status: vhost },
    ]
}

fn try_sandbox(ledger: &Ledger, workdir: &Path, name: &str, text: &str) -> Result<String, String> {
    if name.starts_with('/') && !Path::new(name.split(' ').next().unwrap_or(name)).exists() {
        return Err("not installed".into());
    }
    let table = syntax::parse("doctor", text).map_err(|e| e.to_string())?;
    let mut fields = syntax::Fields::new("doctor", name, &table, syntax::Origin::Default);
    let kind = fields.required_str("kind").map_err(|e| e.to_string())?;
    let env = (crate::kinds::env(&kind).expect("known kind").parse)(&mut fields).map_err(|e| e.to_string())?;
    if let Some(why) = env.unavailable() {
        return Err(why);
    }
    let facts = env.describe();
    let version =
        facts.get("runtime.version").or_else(|| facts.get(&format!("{kind}.version"))).cloned().unwrap_or_default();
    let run_dir = workdir.join("run").join(format!(
        "{}-doctor-{}",
        ledger.token(),
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
    ));
    let mark = ledger.mark();
    let started = Instant::now();
    let outcome = ledger
        .record(Resource::Dir { path: run_dir.clone() })
        .and_then(|_| std::fs::create_dir_all(&run_dir).map_err(Into::into))
        .and_then(|_| env.preflight(ledger, &run_dir, workdir));
    let released = ledger.release_to(mark);
    match (outcome, released) {
        (Ok(()), Ok(())) => Ok(format!("{version}; ran /bin/true in {:.1} s", started.elapsed().as_secs_f64())),
        (Err(e), _) => Err(format!("{version}: {}", format!("{e:#}").lines().next().unwrap_or(""))),
        (_, Err(e)) => Err(format!("teardown failed: {e:#}")),
    }
}

pub fn render(checks: &[Check]) -> String {
    let rows = checks
        .iter()
        .map(|c| {
            let (works, detail) = match &c.status {
                Ok(d) => ("yes", d.clone()),
                Err(why) => ("no", why.clone()),
            };
            vec![c.area.to_string(), c.name.clone(), works.to_string(), detail]
        })
        .collect();
    Table { headers: ["area", "name", "works here", "details / why not"].map(String::from).to_vec(), rows }.to_text("")
}

fn kernel() -> String {
    nix::sys::utsname::uname().map(|u| format!("kernel {}", u.release().to_string_lossy())).unwrap_or_default()
}

fn root() -> Result<(), String> {
    crate::sys::needs_root().map_or(Ok(()), Err)
}

fn loop_fs(fs: &str) -> Result<String, String> {
    if !Path::new("/dev/loop-control").exists() {
        return Err("this kernel has no loop devices (/dev/loop-control is missing)".into());
    }
    let mkfs = format!("mkfs.{fs}");
    if find_program(&mkfs).is_none() {
        let package = if fs == "xfs" { "xfsprogs" } else { "e2fsprogs" };
        return Err(format!("{mkfs} is not installed (apt-get install {package})"));
    }
    let free = sys::command_output("losetup", &["--find"]).map_err(|e| format!("no free loop device: {e:#}"))?;
    Ok(format!("free device {}", free.trim()))
}

fn network_volumes() -> Result<String, String> {
    root()?;
    let nbdkit = version_of("nbdkit", "nbdkit")?;
    let qsd = version_of(crate::volume::nbd_export::QSD, "qemu-system-common")?;
    Ok(format!("{nbdkit}; {qsd}"))
}

fn kernel_nbd() -> Result<String, String> {
    match crate::volume::nbd_export::kernel_nbd_unavailable() {
        Some(why) => Err(format!("{why}: volumes use fio's nbd engine or FUSE + loop")),
        None => version_of("nbd-client", "nbd-client"),
    }
}

fn fuse() -> Result<String, String> {
    if !Path::new("/dev/fuse").exists() {
        return Err("there is no /dev/fuse".into());
    }
    Ok("/dev/fuse".into())
}

fn fio() -> Result<String, String> {
    let version = crate::workload::fio::version().ok_or("fio is not installed (apt-get install fio)")?;
    let engines = sys::command_output("fio", &["--enghelp"]).unwrap_or_default();
    let wanted: Vec<&str> = ["libaio", "io_uring", "psync", "nbd"]
        .into_iter()
        .filter(|e| engines.lines().any(|l| l.trim() == *e))
        .collect();
    Ok(format!("{version}; engines include {}", wanted.join(", ")))
}

fn version_of(tool: &str, package: &str) -> Result<String, String> {
    sys::command_output(tool, &["--version"])
        .map(|v| v.lines().next().unwrap_or("").trim().to_string())
        .map_err(|_| format!("not installed (apt-get install {package})"))
}
