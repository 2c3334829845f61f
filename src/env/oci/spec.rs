//! The OCI runtime spec (config.json) of one container: its mounts, namespaces, devices, limits
//! and process.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};

use super::Net;
use crate::env::rootfs::{AGENT_PATH, DATA_PATH, DEVICE_PATH};
use crate::sys;
use crate::volume::Provisioned;

/// A raw volume's block device, as a container sees it at DEVICE_PATH.
pub(super) struct DeviceNode {
    pub(super) major: u64,
    pub(super) minor: u64,
    pub(super) read_only: bool,
}

impl DeviceNode {
    pub(super) fn of(volume: &Provisioned) -> Result<DeviceNode> {
        use std::os::unix::fs::MetadataExt;
        let rdev =
            std::fs::metadata(&volume.path).map_err(|e| anyhow::anyhow!("{}: {e}", volume.path.display()))?.rdev();
        Ok(DeviceNode { major: libc::major(rdev).into(), minor: libc::minor(rdev).into(), read_only: volume.read_only })
    }
}

pub(super) struct SpecInput<'a> {
    pub(super) rootfs: &'a Path,
    pub(super) agent: &'a Path,
    pub(super) volume: Option<&'a Path>,
    pub(super) device: Option<DeviceNode>,
    pub(super) args: &'a [&'a str],
    pub(super) token: &'a str,
    pub(super) cpus: Option<f64>,
    pub(super) cpuset: Option<&'a sys::CpuSet>,
    pub(super) memory: Option<u64>,
    pub(super) net: Net<'a>,
    pub(super) cgroups_path: Option<String>,
}

/// The capabilities Docker gives a container by default, plus IPC_LOCK (databases mlock).
const CAPABILITIES: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
    "CAP_IPC_LOCK",
];

/// The OCI runtime spec of one container.
pub(super) fn spec(input: &SpecInput) -> Value {
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
        json!({"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]}),
        json!({"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]}),
        json!({"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]}),
        json!({"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}),
        json!({"destination": AGENT_PATH, "type": "bind", "source": input.agent, "options": ["bind", "ro"]}),
    ];
    if let Some(volume) = input.volume {
        mounts.push(json!({"destination": DATA_PATH, "type": "bind", "source": volume, "options": ["rbind", "rw"]}));
    }
    let mut namespaces =
        vec![json!({"type": "pid"}), json!({"type": "ipc"}), json!({"type": "uts"}), json!({"type": "mount"})];
    match input.net {
        Net::Host => {}
        Net::Namespace(file) => namespaces.push(json!({"type": "network", "path": file})),
        Net::None => namespaces.push(json!({"type": "network"})),
    }
    let mut devices = Vec::new();
    let mut device_rules = vec![json!({"allow": false, "access": "rwm"})];
    if let Some(d) = &input.device {
        let access = if d.read_only { "r" } else { "rw" };
        devices.push(json!({"path": DEVICE_PATH, "type": "b", "major": d.major, "minor": d.minor, "fileMode": 0o660, "uid": 0, "gid": 0}));
        device_rules.push(json!({"allow": true, "type": "b", "major": d.major, "minor": d.minor, "access": access}));
    }
    let mut resources = json!({"devices": device_rules});
    if let Some(cpus) = input.cpus {
        resources["cpu"] = json!({"quota": (cpus * 100_000.0).round() as i64, "period": 100_000});
    }
    // The runtime moves the container into a cpuset cgroup, which sets its processes' affinity
    // to the cgroup's CPUs: the set must be the cgroup's, not only the runtime's affinity.
    if let Some(set) = input.cpuset {
        resources["cpu"]["cpus"] = json!(set.to_string());
    }
    if let Some(memory) = input.memory {
        resources["memory"] = json!({"limit": memory});
    }
    // Only as many open files as isobench itself may have: raising the hard limit needs
    // CAP_SYS_RESOURCE, which some hosts (this project's CI) do not give even to root.
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(_, hard)| hard.min(1 << 20))
        .unwrap_or(1024);
    let mut spec = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": input.args,
            "env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", format!("{}={}", sys::TOKEN_VAR, input.token)],
            "cwd": "/",
            "capabilities": {"bounding": CAPABILITIES, "effective": CAPABILITIES, "permitted": CAPABILITIES},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": nofile, "soft": nofile}],
            "noNewPrivileges": true
        },
        "root": {"path": input.rootfs, "readonly": true},
        "hostname": "isobench",
        "mounts": mounts,
        "linux": {
            "resources": resources,
            "devices": devices,
            "namespaces": namespaces,
            "maskedPaths": ["/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware", "/proc/scsi"],
            "readonlyPaths": ["/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]
        }
    });
    if let Some(path) = &input.cgroups_path {
        spec["linux"]["cgroupsPath"] = json!(path);
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_mounts_the_volume_and_the_agent_and_applies_limits() {
        let s = spec(&SpecInput {
            rootfs: Path::new("/r"),
            agent: Path::new("/bin/isobench"),
            volume: Some(Path::new("/vol")),
            device: None,
            args: &["/x"],
            token: "t",
            cpus: Some(1.5),
            cpuset: Some(&sys::CpuSet::from_cpus([1])),
            memory: Some(1 << 30),
            net: Net::None,
            cgroups_path: Some("/isobench-t/c".into()),
        });
        let mounts = s["mounts"].as_array().unwrap();
        assert!(mounts.iter().any(|m| m["destination"] == "/data" && m["source"] == "/vol"));
        assert!(mounts.iter().any(|m| m["destination"] == AGENT_PATH && m["options"][1] == "ro"));
        assert_eq!(s["root"]["readonly"], true);
        assert_eq!(s["linux"]["resources"]["cpu"]["quota"], 150_000);
        assert_eq!(s["linux"]["resources"]["cpu"]["cpus"], "1", "the container's cpuset cgroup holds the set");
        assert_eq!(s["linux"]["resources"]["memory"]["limit"], 1u64 << 30);
        assert!(s["linux"]["namespaces"].as_array().unwrap().iter().any(|n| n["type"] == "network"));
        assert!(s["process"]["env"].as_array().unwrap().iter().any(|e| e == "ISOBENCH_TOKEN=t"));
        assert_eq!(s["linux"]["cgroupsPath"], "/isobench-t/c", "the container is counted in isobench's cgroup");
    }

    #[test]
    fn a_raw_device_and_a_namespace_reach_the_spec() {
        let netns = Path::new("/var/run/netns/isobench-x");
        let s = spec(&SpecInput {
            rootfs: Path::new("/r"),
            agent: Path::new("/bin/isobench"),
            volume: None,
            device: Some(DeviceNode { major: 7, minor: 3, read_only: true }),
            args: &["/x"],
            token: "t",
            cpus: None,
            cpuset: None,
            memory: None,
            net: Net::Namespace(netns),
            cgroups_path: None,
        });
        assert_eq!(s["linux"]["devices"][0]["path"], DEVICE_PATH);
        assert_eq!(
            (s["linux"]["devices"][0]["major"].as_u64(), s["linux"]["devices"][0]["minor"].as_u64()),
            (Some(7), Some(3))
        );
        let rules = s["linux"]["resources"]["devices"].as_array().unwrap();
        assert_eq!(rules[0]["allow"], false, "everything else stays denied");
        assert_eq!(rules[1]["access"], "r", "a read-only device is readable only");
        let ns = s["linux"]["namespaces"].as_array().unwrap().iter().find(|n| n["type"] == "network").unwrap();
        assert_eq!(ns["path"], "/var/run/netns/isobench-x");
        assert!(!s["mounts"].as_array().unwrap().iter().any(|m| m["destination"] == "/data"));
    }
}
