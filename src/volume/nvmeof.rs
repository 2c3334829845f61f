//! `kind = "nvmeof"`: NVMe over TCP with the kernel's own host driver. Either a target the user
//! names (`address`, `port`, `nqn`), connected with nvme-cli, or, with `target = "kernel"`, a
//! kernel nvmet target isobench makes through configfs over a file of its own (`size`) on
//! 127.0.0.1 and then connects to, so that one machine measures the whole NVMe/TCP path. Every
//! target, port and connection is recorded before it is made. A namespace of the user's is never
//! written or formatted unless `destructive = true`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};

use super::block::{mkfs, mount};
use super::{Kind, ProvisionContext, Provisioned, Volume};
use crate::ledger::Resource;
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};
use figures::units;

pub const KIND: Kind = Kind { name: "nvmeof", parse };

/// Where the kernel shows nvmet's configuration.
pub const CONFIGFS: &str = "/sys/kernel/config/nvmet";

#[derive(Clone, Debug, PartialEq)]
enum Target {
    /// A target somewhere on the network, the user's.
    Remote { address: String, port: u16, nqn: String },
    /// A kernel nvmet target isobench makes over a file of this size.
    Kernel { size: u64 },
}

pub struct Nvmeof {
    target: Target,
    fs: Option<String>,
    destructive: bool,
    mkfs_args: Vec<String>,
    mount_options: Option<String>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let kernel = f.choice("target", &["remote", "kernel"])?.is_some_and(|t| t == "kernel");
    let address = f.str("address")?;
    let port = f.port("port")?.unwrap_or(4420);
    let nqn = f.str("nqn")?;
    let size = f.size("size")?;
    let target = if kernel {
        if let Some(key) = [("address", address.is_some()), ("nqn", nqn.is_some())].iter().find(|(_, set)| *set) {
            return Err(f.error_at(key.0, "applies to a remote target; target = \"kernel\" makes its own"));
        }
        Target::Kernel { size: size.unwrap_or(4 << 30) }
    } else {
        let (Some(address), Some(nqn)) = (address, nqn) else {
            return Err(f.error(
                "name the target: address = \"…\", nqn = \"nqn.…\" (and port, 4420 by default), or target = \"kernel\" for one isobench makes",
            ));
        };
        if size.is_some() {
            return Err(f.error_at("size", "applies to target = \"kernel\"; a remote namespace's size is its own"));
        }
        Target::Remote { address, port, nqn }
    };
    let fs = f.choice("fs", &["none", "ext4", "xfs"])?.filter(|fs| fs != "none");
    let destructive = f.bool("destructive")?.unwrap_or(false);
    if let (Target::Remote { nqn, .. }, Some(fs)) = (&target, &fs)
        && !destructive
    {
        return Err(f.error_at(
            "fs",
            format!("fs = \"{fs}\" formats the namespace of {nqn}, destroying what is on it; set destructive = true if that is what you want"),
        ));
    }
    let mkfs_args = f.str_list("mkfs_args")?.unwrap_or_default();
    let mount_options = f.str("mount_options")?;
    f.finish()?;
    Ok(Box::new(Nvmeof { target, fs, destructive, mkfs_args, mount_options }))
}

/// Why NVMe/TCP cannot be used here: no nvme-cli, no host driver, and for a kernel target no
/// nvmet.
pub fn unavailable(kernel_target: bool) -> Option<String> {
    if let Some(why) = crate::sys::needs_root() {
        return Some(why);
    }
    let module = |name: &str| {
        Path::new("/sys/module").join(name).exists() || sys::command_output("modprobe", &["-n", name]).is_ok()
    };
    if !module("nvme_tcp") {
        return Some("this kernel has no NVMe/TCP host driver (nvme-tcp)".into());
    }
    if kernel_target && !(Path::new(CONFIGFS).exists() || module("nvmet_tcp")) {
        return Some("this kernel has no NVMe target (nvmet, nvmet-tcp)".into());
    }
    find_program("nvme").is_none().then(|| "nvme-cli is not installed (apt-get install nvme-cli)".into())
}

impl Volume for Nvmeof {
    fn raw(&self) -> bool {
        self.fs.is_none()
    }

    fn unavailable(&self) -> Option<String> {
        unavailable(matches!(self.target, Target::Kernel { .. }))
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        let (address, port, nqn) = match &self.target {
            Target::Remote { address, port, nqn } => (address.clone(), *port, nqn.clone()),
            Target::Kernel { size } => {
                let _ = sys::command_output("modprobe", &["nvmet_tcp"]);
                let file = ctx.run_dir.join("nvmet.img");
                ctx.ledger.record(Resource::File { path: file.clone() })?;
                std::fs::File::create(&file).and_then(|f| f.set_len(*size))?;
                let port = crate::sys::free_port()?;
                let target = KernelTarget {
                    root: PathBuf::from(CONFIGFS),
                    nqn: format!("nqn.2026-11.dev.isobench:{}-{}", ctx.ledger.token(), ctx.ledger.next_id()),
                    port_id: port,
                };
                ctx.ledger.record(target.resource())?;
                target.create(&file, "127.0.0.1", port)?;
                ("127.0.0.1".to_string(), port, target.nqn)
            }
        };
        let _ = sys::command_output("modprobe", &["nvme_tcp"]);
        ctx.ledger.record(Resource::NvmeConnection { nqn: nqn.clone() })?;
        let port_text = port.to_string();
        sys::command_output("nvme", &["connect", "-t", "tcp", "-a", &address, "-s", &port_text, "-n", &nqn])?;
        let device = namespace_of(Path::new("/sys/class/nvme-subsystem"), &nqn, Duration::from_secs(15))?;
        let read_only = matches!(self.target, Target::Remote { .. }) && !self.destructive;
        let mut facts = BTreeMap::from([
            ("volume.kind".to_string(), "nvmeof".to_string()),
            ("volume.fs".into(), self.fs.clone().unwrap_or_else(|| "none".into())),
            ("volume.device".into(), device.display().to_string()),
            ("volume.access".into(), format!("kernel nvme-tcp to {address}:{port} ({nqn})")),
        ]);
        if let Target::Kernel { size } = &self.target {
            facts.insert("volume.target".into(), format!("kernel nvmet-tcp over a {} file", units::fio_size(*size)));
        }
        let Some(fs) = &self.fs else {
            return Ok(Provisioned {
                path: device.clone(),
                raw: true,
                read_only,
                block: Some(super::BlockSource::File { path: device, offset: 0, size: None }),
                nbd: None,
                replicas: None,
                claim: None,
                facts,
            });
        };
        let device = device.display().to_string();
        mkfs(fs, &device, &self.mkfs_args)?;
        let target = mount(&ctx, fs, &device, self.mount_options.as_deref(), "mnt".into())?;
        Ok(Provisioned::dir(target, facts))
    }
}

/// A kernel nvmet target: one subsystem with one namespace, on one TCP port.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTarget {
    pub root: PathBuf,
    pub nqn: String,
    pub port_id: u16,
}

impl KernelTarget {
    fn resource(&self) -> Resource {
        Resource::NvmetTarget { root: self.root.clone(), nqn: self.nqn.clone(), port_id: self.port_id }
    }

    fn subsystem(&self) -> PathBuf {
        self.root.join("subsystems").join(&self.nqn)
    }

    fn port(&self) -> PathBuf {
        self.root.join("ports").join(self.port_id.to_string())
    }

    /// Makes the subsystem over `file`, the port on `address:port`, and links them.
    pub fn create(&self, file: &Path, address: &str, port: u16) -> Result<()> {
        let write = |path: PathBuf, value: &str| {
            std::fs::write(&path, value).with_context(|| format!("writing {value} to {}", path.display()))
        };
        let subsystem = self.subsystem();
        std::fs::create_dir(&subsystem).with_context(|| format!("creating {}", subsystem.display()))?;
        write(subsystem.join("attr_allow_any_host"), "1")?;
        let namespace = subsystem.join("namespaces/1");
        std::fs::create_dir_all(&namespace)?;
        write(namespace.join("device_path"), &file.display().to_string())?;
        write(namespace.join("enable"), "1")?;
        let port_dir = self.port();
        std::fs::create_dir(&port_dir).with_context(|| format!("creating {}", port_dir.display()))?;
        write(port_dir.join("addr_trtype"), "tcp")?;
        write(port_dir.join("addr_adrfam"), "ipv4")?;
        write(port_dir.join("addr_traddr"), address)?;
        write(port_dir.join("addr_trsvcid"), &port.to_string())?;
        std::fs::create_dir_all(port_dir.join("subsystems"))?;
        std::os::unix::fs::symlink(&subsystem, port_dir.join("subsystems").join(&self.nqn))?;
        Ok(())
    }

    /// Undoes `create`, whatever part of it happened; what is gone already is not an error.
    pub fn remove(&self) -> Result<()> {
        let port_dir = self.port();
        let link = port_dir.join("subsystems").join(&self.nqn);
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link)?;
        }
        remove_dir_if_there(&port_dir)?;
        let namespace = self.subsystem().join("namespaces/1");
        if namespace.exists() {
            let _ = std::fs::write(namespace.join("enable"), "0");
            remove_dir_if_there(&namespace)?;
        }
        remove_dir_if_there(&self.subsystem())
    }
}

/// configfs removes a group with rmdir, its attribute files going with it; a plain directory
/// (the unit test's stand-in) needs them removed first.
fn remove_dir_if_there(dir: &Path) -> Result<()> {
    if !dir.exists() {
        return Ok(());
    }
    if std::fs::remove_dir(dir).is_err() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    Ok(())
}

/// Disconnects the host from `nqn`; with no connection, nvme-cli says it disconnected none.
pub fn disconnect(nqn: &str) -> Result<()> {
    if find_program("nvme").is_none() {
        return Ok(());
    }
    sys::command_output("nvme", &["disconnect", "-n", nqn]).map(|_| ())
}

/// The block device of the namespace the host sees for `nqn`, waiting for it to appear.
fn namespace_of(sysfs: &Path, nqn: &str, timeout: Duration) -> Result<PathBuf> {
    sys::Wait::new(format!("a namespace of {nqn} to appear"), timeout).every(Duration::from_millis(100)).until(|| {
        for subsystem in std::fs::read_dir(sysfs).into_iter().flatten().flatten() {
            let path = subsystem.path();
            let theirs = std::fs::read_to_string(path.join("subsysnqn")).unwrap_or_default();
            if theirs.trim() != nqn {
                continue;
            }
            let name = std::fs::read_dir(&path)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .find(|n| n.strip_prefix("nvme").is_some_and(|rest| rest.contains('n')));
            if let Some(name) = name {
                return Ok(sys::Check::Done(PathBuf::from("/dev").join(name)));
            }
        }
        Ok(sys::Check::NotYet(String::new()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_target_is_laid_out_and_removed_as_configfs_wants() {
        let root = tempfile::tempdir().unwrap();
        for dir in ["subsystems", "ports"] {
            std::fs::create_dir(root.path().join(dir)).unwrap();
        }
        let t = KernelTarget { root: root.path().to_path_buf(), nqn: "nqn.test:one".into(), port_id: 4420 };
        t.create(Path::new("/var/lib/x.img"), "127.0.0.1", 4420).unwrap();
        let read = |p: &str| std::fs::read_to_string(root.path().join(p)).unwrap();
        assert_eq!(read("subsystems/nqn.test:one/attr_allow_any_host"), "1");
        assert_eq!(read("subsystems/nqn.test:one/namespaces/1/device_path"), "/var/lib/x.img");
        assert_eq!(read("subsystems/nqn.test:one/namespaces/1/enable"), "1");
        assert_eq!(read("ports/4420/addr_trtype"), "tcp");
        assert_eq!(read("ports/4420/addr_traddr"), "127.0.0.1");
        assert_eq!(read("ports/4420/addr_trsvcid"), "4420");
        let link = std::fs::read_link(root.path().join("ports/4420/subsystems/nqn.test:one")).unwrap();
        assert_eq!(link, root.path().join("subsystems/nqn.test:one"));
        t.remove().unwrap();
        assert!(!root.path().join("ports/4420").exists() && !root.path().join("subsystems/nqn.test:one").exists());
        t.remove().unwrap();
    }

    #[test]
    fn the_connected_namespace_is_found_by_its_nqn() {
        let sysfs = tempfile::tempdir().unwrap();
        for (subsys, nqn, ns) in [("nvme-subsys0", "nqn.other", "nvme0n1"), ("nvme-subsys3", "nqn.mine", "nvme3n1")] {
            let dir = sysfs.path().join(subsys);
            std::fs::create_dir_all(dir.join(ns)).unwrap();
            std::fs::write(dir.join("subsysnqn"), format!("{nqn}\n")).unwrap();
        }
        assert_eq!(namespace_of(sysfs.path(), "nqn.mine", Duration::ZERO).unwrap(), Path::new("/dev/nvme3n1"));
        assert!(namespace_of(sysfs.path(), "nqn.absent", Duration::ZERO).is_err());
    }
}
