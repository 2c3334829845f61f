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
    /// The one command that brings what is missing, where one does.
    pub fix: Option<String>,
}

/// What brings the packages and the built parts a test machine needs.
const SETUP: &str = "scripts/setup.sh test";

/// Every check; runtimes are tried for real with containers made under `workdir`.
pub fn checks(workdir: &Path) -> Vec<Check> {
    let mut out = Vec::new();
    let mut add = |area, name: &str, status| out.push(Check { area, name: name.to_string(), status, fix: None });
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
    out.extend(vm_checks(workdir));
    out.extend(server_checks());
    out.extend(tool_checks());
    out.extend(local_cluster_checks());
    add_kubernetes(&mut out);
    for check in out.iter_mut().filter(|c| c.status.is_err() && c.fix.is_none()) {
        check.fix = fix_in(check.status.as_ref().unwrap_err());
    }
    out
}

/// The command an explanation names (`… (apt-get install fio)`, `scripts/setup.sh …`), as the fix;
/// QEMU's is its two packages.
fn fix_in(why: &str) -> Option<String> {
    if why.contains("scripts/setup.sh") {
        return Some(SETUP.into());
    }
    let at = why.find("apt-get install ")?;
    let said = why[at..].split([')', ';', ',']).next().unwrap_or_default().trim();
    Some(if said == "apt-get install qemu" { "apt-get install qemu-system-x86 qemu-utils".into() } else { said.into() })
}

/// A check of `area`, with the fix where it is missing.
fn check(area: &'static str, name: &str, status: Result<String, String>, fix: &'static str) -> Check {
    let fix = status.is_err().then(|| fix.to_string());
    Check { area, name: name.to_string(), status, fix }
}

/// QEMU guests: QEMU, the guest kernel, and whether KVM runs them or TCG emulates them.
fn vm_checks(workdir: &Path) -> Vec<Check> {
    use crate::env::vm;
    let qemu = sys::command_output(vm::QEMU, &["--version"])
        .map(|v| v.lines().next().unwrap_or("").trim().to_string())
        .map_err(|_| format!("{} is not installed", vm::QEMU));
    let kernel = vm::guest::Kernel::installed()
        .map(|k| format!("{} ({})", k.version, k.image.display()))
        .ok_or_else(|| format!("no guest kernel in {}", vm::guest::GUEST_DIR));
    vec![
        check("env", "vm: QEMU", qemu, "apt-get install qemu-system-x86 qemu-utils"),
        check("env", "vm: guest kernel", kernel, SETUP),
        Check {
            area: "env",
            name: "vm: accelerator".into(),
            status: vm::accelerator_here(&workdir.join("cache")),
            fix: None,
        },
    ]
}

/// Java and the Cassandra isobench fetches and starts.
fn server_checks() -> Vec<Check> {
    use crate::server::cassandra as fetch;
    let java =
        fetch::java_feature_version().map(|v| format!("Java {v}")).ok_or_else(|| "java is not installed".to_string());
    let version = fetch::default_version();
    let cassandra = fetch::Distribution::cached(&version)
        .map(|d| format!("Cassandra {version} in {}", d.home.display()))
        .ok_or_else(|| format!("Cassandra {version} was not fetched from Maven Central"));
    vec![
        check("server", "cassandra: Java", java, "apt-get install openjdk-17-jre-headless maven"),
        check("server", "cassandra: distribution", cassandra, "isobench server fetch cassandra"),
        check("server", "external", Ok("a CQL cluster of yours: nodes = [...]".into()), ""),
    ]
    .into_iter()
    .chain(database_checks())
    .collect()
}

/// PostgreSQL, MariaDB and Redis, and the tools that load them.
fn database_checks() -> Vec<Check> {
    use crate::server::database::Kind;
    const FIX: &str = "apt-get install postgresql redis-server redis-tools mariadb-server mariadb-client sysbench";
    let mut out = Vec::new();
    for (kind, tool) in [(Kind::Postgres, "pgbench"), (Kind::Mariadb, "sysbench"), (Kind::Redis, "redis-benchmark")] {
        let engine = kind.engine();
        let server = engine
            .program()
            .map(|path| format!("{} {} ({})", engine.name(), engine.version(), path.display()))
            .map_err(|e| format!("{e:#}"));
        out.push(check("server", &format!("{}: server", kind.key()), server, FIX));
        let found = match tool {
            "pgbench" => crate::workload::pgbench::program(),
            tool => find_program(tool),
        };
        let load = found.map(|p| p.display().to_string()).ok_or_else(|| format!("{tool} is not installed"));
        out.push(check("server", &format!("{}: {tool}", kind.key()), load, FIX));
    }
    out
}

/// The tools some figures and checks need: perf's counters, Chromium for the HTML report's checks.
fn tool_checks() -> Vec<Check> {
    let perf = match sys::PerfCounts::of_this_machine() {
        Err(_) if find_program("perf").is_none() => Err("perf is not installed: runs record no sys.perf.*".into()),
        Err(e) => Err(format!("perf cannot count here: {}", format!("{e:#}").lines().next().unwrap_or(""))),
        Ok(counts) => {
            let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid").unwrap_or_default();
            let counted: Vec<&str> = counts.counted.iter().map(|(e, _)| e.as_str()).collect();
            let mut said = format!("counts {} (perf_event_paranoid {})", counted.join(", "), paranoid.trim());
            if !counts.not_supported.is_empty() {
                said += &format!(
                    "; not {}: the CPU's counters are not exposed here (as in a VM without a virtual PMU)",
                    counts.not_supported.join(", ")
                );
            }
            Ok(said)
        }
    };
    let chromium = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find_map(find_program)
        .map(|p| format!("{}: renders report.html for its checks and screenshots", p.display()))
        .ok_or_else(|| "no Chromium: the HTML report is written, not rendered".to_string());
    // The CPU sampled by part resolves gVisor's sentry by its symbols.
    let symbols = match crate::env::oci::Runtime::resolve("runsc").path {
        None => Err("no runsc: nothing of gVisor's to resolve".to_string()),
        Some(path) => match has_symbol_table(&path) {
            Ok(true) => Ok(format!("{} keeps its symbol table: the sentry's samples resolve to parts", path.display())),
            Ok(false) => {
                Err(format!("{} is stripped: the sentry's samples stay unexplained in sys.cpu_part.*", path.display()))
            }
            Err(e) => Err(format!("{}: {e}", path.display())),
        },
    };
    vec![
        check("tool", "perf", perf, "apt-get install linux-perf"),
        check("tool", "runsc symbols", symbols, "scripts/setup.sh builds a runsc that keeps them"),
        check("tool", "chromium", chromium, "apt-get install chromium"),
    ]
}

/// Whether an ELF64 file has a `.symtab` section (strip removes it).
fn has_symbol_table(path: &Path) -> std::io::Result<bool> {
    let elf = std::fs::read(path)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "not a 64-bit ELF file");
    if elf.get(..5) != Some(b"\x7fELF\x02") {
        return Err(bad());
    }
    let word = |at: usize, n: usize| -> std::io::Result<usize> {
        let bytes = elf.get(at..at + n).ok_or_else(bad)?;
        Ok(bytes.iter().rev().fold(0usize, |v, b| (v << 8) | *b as usize))
    };
    let (table, entry, count, names) = (word(0x28, 8)?, word(0x3a, 2)?, word(0x3c, 2)?, word(0x3e, 2)?);
    let names_at = word(table + names * entry + 0x18, 8)?;
    for k in 0..count {
        let name_at = names_at + word(table + k * entry, 4)?;
        if elf.get(name_at..name_at + 8) == Some(b".symtab\0") {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The parts `scripts/k8s-local.sh` runs a local cluster with, as setup builds them.
fn local_cluster_checks() -> Vec<Check> {
    const PARTS: [&str; 7] =
        ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "containerd", "coredns"];
    let shim = Path::new(crate::env::oci::TOOL_DIR).join("containerd-shim-runsc-v1");
    let dir = std::fs::read_dir("/usr/local/lib/isobench")
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("k8s-v")))
        .max();
    let status = match &dir {
        None => Err("not built (/usr/local/lib/isobench/k8s-v* is missing)".to_string()),
        Some(dir) => match PARTS.iter().filter(|p| !dir.join(p).exists()).collect::<Vec<_>>() {
            missing if missing.is_empty() => Ok(format!("{} in {}", PARTS.join(", "), dir.display())),
            missing => Err(format!(
                "{} has no {}",
                dir.display(),
                missing.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
            )),
        },
    };
    let gvisor = match shim.exists() {
        true => Ok(format!("{}: the gvisor RuntimeClass's handler", shim.display())),
        false => Err(format!("no {}: the local cluster has no gvisor RuntimeClass", shim.display())),
    };
    vec![
        check("env", "k8s: local cluster parts (scripts/k8s-local.sh)", status, SETUP),
        check("env", "k8s: gVisor's containerd shim", gvisor, SETUP),
    ]
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
    out.push(Check { area: "env", name: "k8s (default kubeconfig)".into(), status, fix: None });
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
        Err(e) => return vec![Check { area: "runtime", name: "all".into(), status: Err(format!("{e:#}")), fix: None }],
    };
    // All at once (each container's start is mostly waiting), torn down together after.
    let mark = ledger.mark();
    let statuses: Vec<Result<String, String>> = std::thread::scope(|scope| {
        let tries: Vec<_> =
            SANDBOXES.iter().map(|(name, text)| scope.spawn(|| try_sandbox(&ledger, workdir, name, text))).collect();
        tries.into_iter().map(|t| t.join().unwrap_or_else(|_| Err("its check panicked".into()))).collect()
    });
    let released = ledger.release_to(mark).map_err(|e| format!("teardown failed: {e:#}"));
    let mut checks: Vec<Check> = SANDBOXES
        .iter()
        .zip(statuses)
        .map(|((name, _), status)| {
            let status = status.and_then(|ran| released.clone().map(|()| ran));
            // Setup installs these; Kata and a Docker engine are the user's to bring.
            let by_setup = ["runc", "crun", "runsc", "podman"].iter().any(|r| name.starts_with(r));
            let fix = (status.is_err() && by_setup).then(|| SETUP.to_string());
            Check { area: "runtime", name: name.to_string(), status, fix }
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
            fix: None,
        },
        Check { area: "network", name: "tap (VMs)".into(), status: try_path(crate::net::tap), fix: None },
        Check { area: "network", name: "vhost-net".into(), status: vhost, fix: None },
    ]
}

/// Runs `/bin/true` in the sandbox `text` describes; what it made stays in `ledger` for the
/// caller to release.
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
    let started = Instant::now();
    match ledger
        .record(Resource::Dir { path: run_dir.clone() })
        .and_then(|_| std::fs::create_dir_all(&run_dir).map_err(Into::into))
        .and_then(|_| env.preflight(ledger, &run_dir, workdir))
    {
        Ok(()) => Ok(format!("{version}; ran /bin/true in {:.1} s", started.elapsed().as_secs_f64())),
        Err(e) => Err(format!("{version}: {}", format!("{e:#}").lines().next().unwrap_or(""))),
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
            vec![c.area.to_string(), c.name.clone(), works.to_string(), detail, c.fix.clone().unwrap_or_default()]
        })
        .collect();
    let headers = ["area", "name", "works here", "details / why not", "fix"];
    Table { headers: headers.map(String::from).to_vec(), rows }.to_text("")
}

/// One JSON object per check and line, for scripts.
pub fn render_json(checks: &[Check]) -> String {
    checks
        .iter()
        .map(|c| {
            let (ready, detail) = match &c.status {
                Ok(d) => (true, d),
                Err(why) => (false, why),
            };
            let line =
                serde_json::json!({"area": c.area, "name": c.name, "ready": ready, "detail": detail, "fix": c.fix});
            format!("{line}\n")
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symbol_table_is_found_in_an_elf_file_and_a_file_that_is_none_is_said() {
        // The test binary keeps its symbols (no profile here strips them).
        assert!(has_symbol_table(Path::new("/proc/self/exe")).unwrap());
        assert!(has_symbol_table(Path::new("/proc/self/status")).is_err());
    }

    #[test]
    fn the_fix_is_the_command_the_explanation_names() {
        let fix = |why: &str| fix_in(why);
        assert_eq!(
            fix("mkfs.ext4 is not installed (apt-get install e2fsprogs)").as_deref(),
            Some("apt-get install e2fsprogs")
        );
        assert_eq!(
            fix("the ip command is missing (apt-get install iproute2)").as_deref(),
            Some("apt-get install iproute2")
        );
        assert_eq!(
            fix("not installed (apt-get install qemu)").as_deref(),
            Some("apt-get install qemu-system-x86 qemu-utils")
        );
        assert_eq!(fix("runc is missing: scripts/setup.sh test builds it").as_deref(), Some(SETUP));
        assert_eq!(fix("this kernel has no NBD client"), None, "what no command brings has no fix");
    }
}
