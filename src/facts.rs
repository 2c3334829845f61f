//! Facts about where code is running: collected by the agent inside every sandbox (to prove
//! which kernel, namespaces and filesystem a run really had) and on the host (for `host.json`).

use std::collections::BTreeMap;
use std::path::Path;

pub type Facts = BTreeMap<String, String>;

const NAMESPACES: &[&str] = &["cgroup", "ipc", "mnt", "net", "pid", "user", "uts"];

/// What the agent records inside an environment. `data_dir` is the volume under test.
pub fn sandbox_facts(data_dir: Option<&Path>) -> Facts {
    let mut f = Facts::new();
    if let Ok(u) = nix::sys::utsname::uname() {
        f.insert("kernel.release".into(), u.release().to_string_lossy().into_owned());
        f.insert("kernel.version".into(), u.version().to_string_lossy().into_owned());
        f.insert("hostname".into(), u.nodename().to_string_lossy().into_owned());
    }
    if let Some(id) = read_trimmed("/proc/sys/kernel/random/boot_id") {
        f.insert("boot_id".into(), id);
    }
    for ns in NAMESPACES {
        if let Ok(link) = std::fs::read_link(format!("/proc/self/ns/{ns}")) {
            f.insert(format!("ns.{ns}"), link.to_string_lossy().into_owned());
        }
    }
    if let Some(cg) = read_trimmed("/proc/1/cgroup") {
        f.insert("pid1.cgroup".into(), cg.lines().take(12).collect::<Vec<_>>().join("; "));
    }
    if let Some(comm) = read_trimmed("/proc/1/comm") {
        f.insert("pid1.comm".into(), comm);
    }
    f.insert("cpus".into(), std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0).to_string());
    if let Some(kib) = cgroup_memory_limit_kib() {
        f.insert("memory.limit_kib".into(), kib.to_string());
    }
    if let Some(cpus) = cgroup_cpu_limit() {
        f.insert("cpu.limit".into(), format!("{cpus}"));
    }
    // gVisor and VM guests print their own kernel's first words here.
    if let Ok(out) = crate::sys::command_output("dmesg", &[])
        && let Some(first) = out.lines().next()
    {
        f.insert("dmesg.first".into(), first.trim().to_string());
    }
    if let Some(mem) = meminfo_kib("MemTotal") {
        f.insert("mem_total_kib".into(), mem.to_string());
    }
    if let Some(dir) = data_dir {
        f.insert("data.fstype".into(), fs_type(dir));
        if let Some((source, options)) = mount_of(dir) {
            f.insert("data.mount_source".into(), source);
            f.insert("data.mount_options".into(), options);
        }
    }
    f
}

/// Whether facts were read inside gVisor, which prints its own first words in `dmesg`.
pub fn in_gvisor(facts: &Facts) -> bool {
    facts.get("dmesg.first").is_some_and(|line| line.contains("gVisor"))
}

/// The machine, for `host.json`.
pub fn host_facts() -> Facts {
    let mut f = sandbox_facts(None);
    f.extend(machine_facts());
    if let Some(cpuinfo) = read_trimmed("/proc/cpuinfo")
        && let Some(model) = cpuinfo.lines().find(|l| l.starts_with("model name"))
    {
        f.insert("cpu.model".into(), model.split(':').nth(1).unwrap_or("").trim().to_string());
    }
    if let Some(os) = read_trimmed("/etc/os-release")
        && let Some(name) = os.lines().find_map(|l| l.strip_prefix("PRETTY_NAME="))
    {
        f.insert("os".into(), name.trim_matches('"').to_string());
    }
    f.extend(crate::sys::cpu_idle::facts());
    f.insert("isobench.version".into(), env!("CARGO_PKG_VERSION").into());
    if let Some(sha) = option_env!("ISOBENCH_GIT_SHA") {
        f.insert("isobench.git".into(), sha.into());
    }
    for (name, args) in [("fio", &["--version"][..]), ("sysbench", &["--version"][..]), ("iperf3", &["--version"][..])]
    {
        if let Ok(out) = crate::sys::command_output(name, args) {
            f.insert(format!("{name}.version"), out.lines().next().unwrap_or("").trim().to_string());
        }
    }
    f
}

/// What makes two machines of one kind: the CPU (its model, its microcode), how many CPUs and how
/// much memory, the hypervisor's product where it says, and the disk under the root; recorded
/// once per result set, so that what moves between machines shows up as a fact, not an answer.
pub fn machine_facts() -> Facts {
    let mut f = Facts::new();
    let cpuinfo = read_trimmed("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        cpuinfo
            .lines()
            .find(|l| l.split(':').next().is_some_and(|k| k.trim() == name))
            .and_then(|l| Some(l.split_once(':')?.1.trim().to_string()))
    };
    f.extend(field("model name").map(|m| ("machine.cpu_model".to_string(), m)));
    f.extend(field("microcode").map(|m| ("machine.microcode".to_string(), m)));
    if let Some(flags) = field("flags") {
        let virtual_ = flags.split_whitespace().any(|f| f == "hypervisor");
        f.insert("machine.virtual".into(), virtual_.to_string());
    }
    let online = read_trimmed("/sys/devices/system/cpu/online").and_then(|l| crate::sys::CpuSet::parse(&l).ok());
    f.extend(online.map(|cpus| ("machine.cpus".to_string(), cpus.len().to_string())));
    f.extend(meminfo_kib("MemTotal").map(|kib| ("machine.memory".to_string(), (kib * 1024).to_string())));
    let product: Vec<String> =
        ["sys_vendor", "product_name"].iter().filter_map(|f| read_trimmed(&format!("/sys/class/dmi/id/{f}"))).collect();
    if !product.is_empty() {
        f.insert("machine.product".into(), product.join(" "));
    }
    f.extend(crate::sys::disk_behind(Path::new("/")).map(|d| ("machine.root_disk".to_string(), d)));
    f
}

/// Whether two result sets' machines are of one kind (the same CPU model, CPU count, product and
/// memory within 2 %), and what else differs between them (the kernel, the microcode, the disk):
/// None where either set recorded no machine.
pub fn machine_kind_difference(a: &Facts, b: &Facts) -> Option<(bool, Vec<String>)> {
    let key = |f: &Facts, k: &str| f.get(k).cloned().unwrap_or_else(|| "unknown".into());
    a.get("machine.cpu_model").zip(b.get("machine.cpu_model"))?;
    let memory = |f: &Facts| f.get("machine.memory").and_then(|m| m.parse::<f64>().ok());
    let mut kind_differs = Vec::new();
    for k in ["machine.cpu_model", "machine.cpus", "machine.product"] {
        if key(a, k) != key(b, k) {
            kind_differs.push(format!("{k} {} → {}", key(a, k), key(b, k)));
        }
    }
    if let (Some(x), Some(y)) = (memory(a), memory(b))
        && (x - y).abs() > 0.02 * x.max(y)
    {
        kind_differs.push(format!("machine.memory {:.1} GiB → {:.1} GiB", x / 1073741824.0, y / 1073741824.0));
    }
    let same_kind = kind_differs.is_empty();
    for k in ["kernel.release", "machine.microcode", "machine.root_disk", "os"] {
        if key(a, k) != key(b, k) {
            kind_differs.push(format!("{k} {} → {}", key(a, k), key(b, k)));
        }
    }
    Some((same_kind, kind_differs))
}

/// The cgroup directories of this process for `controller` (v1: "memory", "cpu"; v2: ""),
/// most specific first: its own path, then the mount's root (a container sees its own cgroup
/// there).
fn cgroup_dirs(controller: &str) -> Vec<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        if controller.is_empty() && controllers.is_empty() {
            dirs.extend([format!("/sys/fs/cgroup{path}"), format!("/sys/fs/cgroup/unified{path}")]);
        } else if !controller.is_empty() && controllers.split(',').any(|c| c == controller) {
            dirs.push(format!("/sys/fs/cgroup/{controller}{path}"));
            dirs.push(format!("/sys/fs/cgroup/{controller}"));
        }
    }
    dirs
}

/// The memory limit of this process's cgroup, if it has one (v1 or v2).
fn cgroup_memory_limit_kib() -> Option<u64> {
    let v1 = cgroup_dirs("memory").into_iter().find_map(|d| read_trimmed(&format!("{d}/memory.limit_in_bytes")));
    let v2 = || cgroup_dirs("").into_iter().find_map(|d| read_trimmed(&format!("{d}/memory.max")));
    let bytes: u64 = v1.or_else(v2)?.parse().ok()?;
    // "No limit" is a huge page-aligned number in v1 ("max" in v2, which fails to parse).
    (bytes < 1 << 60).then_some(bytes / 1024)
}

/// The CPU quota of this process's cgroup in CPUs (1.5 = 150 ms per 100 ms), if it has one.
fn cgroup_cpu_limit() -> Option<f64> {
    for dir in cgroup_dirs("cpu") {
        if let (Some(quota), Some(period)) =
            (read_trimmed(&format!("{dir}/cpu.cfs_quota_us")), read_trimmed(&format!("{dir}/cpu.cfs_period_us")))
        {
            let (quota, period): (f64, f64) = (quota.parse().ok()?, period.parse().ok()?);
            return (quota > 0.0 && period > 0.0).then(|| (quota / period * 100.0).round() / 100.0);
        }
    }
    let max = cgroup_dirs("").into_iter().find_map(|d| read_trimmed(&format!("{d}/cpu.max")))?;
    let (quota, period) = max.split_once(' ')?;
    let (quota, period): (f64, f64) = (quota.parse().ok()?, period.parse().ok()?);
    (period > 0.0).then(|| (quota / period * 100.0).round() / 100.0)
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

pub fn meminfo_kib(key: &str) -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The filesystem type of `dir` by its statfs magic.
pub fn fs_type(dir: &Path) -> String {
    let Ok(s) = nix::sys::statfs::statfs(dir) else {
        return "unknown".into();
    };
    let magic = s.filesystem_type().0 as u64;
    let name = match magic {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x0102_1994 => "tmpfs",
        0x9123_683E => "btrfs",
        0x794C_7630 => "overlayfs",
        0x0102_1997 => "9p",
        0x6573_5546 => "fuse",
        0x6573_5543 => "fusectl",
        0x5346_544E => "ntfs",
        0x0000_6969 => "nfs",
        0x2FC1_2FC1 => "zfs",
        0x6E73_6673 => "nsfs",
        0x6265_6572 => "sysfs",
        0x0000_9FA0 => "proc",
        0x8584_58F6 => "ramfs",
        _ => return format!("0x{magic:x}"),
    };
    name.to_string()
}

/// The source and options of the mount that holds `dir`, from /proc/self/mountinfo.
pub fn mount_of(dir: &Path) -> Option<(String, String)> {
    let dir = std::fs::canonicalize(dir).ok()?;
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let fields: Vec<&str> = left.split(' ').collect();
            let mount_point = fields.get(4)?.replace("\\040", " ");
            let right: Vec<&str> = right.split(' ').collect();
            dir.starts_with(&mount_point).then(|| {
                (
                    mount_point.len(),
                    format!("{} {}", right.first().unwrap_or(&""), right.get(1).unwrap_or(&"")),
                    fields.get(5).unwrap_or(&"").to_string(),
                )
            })
        })
        .max_by_key(|(len, _, _)| *len)
        .map(|(_, source, options)| (source, options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_name_the_kernel_and_namespaces() {
        let f = sandbox_facts(Some(Path::new("/")));
        assert!(!f["kernel.release"].is_empty());
        assert!(f["ns.mnt"].starts_with("mnt:["), "{}", f["ns.mnt"]);
        assert!(f.contains_key("data.fstype"));
        assert!(f.contains_key("data.mount_source"));
    }
}
