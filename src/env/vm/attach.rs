//! How the volume under test crosses into a guest: virtio-9p, virtio-fs (through virtiofsd),
//! or virtio-blk (the volume's loop device). Each has QEMU arguments on the host side, a mount
//! line on the guest side, and the modules that mount needs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use crate::syntax::{Fields, SuiteError};
use crate::sys::find_program;

#[derive(Clone, Debug, PartialEq)]
pub enum Attach {
    NineP { cache: String, msize: u64 },
    VirtioFs { cache: String, dax: Dax },
    VirtioBlk { cache: String, aio: String },
}

const KINDS: &[&str] = &["9p", "virtiofs", "virtio-blk"];

/// virtio-fs's DAX window: the guest maps file pages straight from the host's page cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dax {
    Off,
    On,
    /// On where this QEMU has a DAX window, off elsewhere (recorded either way).
    Auto,
}

impl Dax {
    /// Whether the window is used on this machine.
    pub fn active(self) -> bool {
        match self {
            Dax::Off => false,
            Dax::On => true,
            Dax::Auto => qemu_has_dax_window(),
        }
    }
}

impl Attach {
    /// Reads `attach` and its options (`cache`, `msize`, `dax`, `aio`); `None` when the table
    /// has no `attach` and `default` is None.
    pub fn parse(f: &mut Fields, default: Option<&str>) -> Result<Option<Attach>, SuiteError> {
        let Some(kind) = f.choice("attach", KINDS)?.or(default.map(str::to_string)) else {
            for key in ["cache", "msize", "dax", "aio"] {
                if f.node(key).is_some() {
                    return Err(f.error_at(key, "applies to how a VM attaches the volume; set attach = \"9p\", \"virtiofs\" or \"virtio-blk\" too"));
                }
            }
            return Ok(None);
        };
        let cache = f.str("cache")?;
        let dax = match f.node("dax").map(|n| &n.value) {
            None => None,
            Some(crate::syntax::Value::Bool(b)) => Some(if *b { Dax::On } else { Dax::Off }),
            Some(crate::syntax::Value::Str(s)) if s == "auto" => Some(Dax::Auto),
            Some(_) => {
                return Err(f.error_at("dax", "use true, false or \"auto\" (a DAX window where this QEMU has one)"));
            }
        };
        let (msize, aio) = (f.size("msize")?, f.str("aio")?);
        let only =
            |key: &str, allowed_for: &str| f.error_at(key, format!("applies only to attach = \"{allowed_for}\""));
        let check = |value: &str, allowed: &[&str]| {
            if allowed.contains(&value) {
                Ok(value.to_string())
            } else {
                Err(f.error_at(
                    "cache",
                    format!("\"{value}\" is not a {kind} cache mode; use one of: {}", allowed.join(", ")),
                ))
            }
        };
        Ok(Some(match kind.as_str() {
            "9p" => {
                if dax.is_some() {
                    return Err(only("dax", "virtiofs"));
                }
                if aio.is_some() {
                    return Err(only("aio", "virtio-blk"));
                }
                // mmap: shared writable mappings work (databases use them), data is not cached.
                Attach::NineP {
                    cache: check(cache.as_deref().unwrap_or("mmap"), &["none", "loose", "mmap", "fscache"])?,
                    msize: msize.unwrap_or(512 << 10),
                }
            }
            "virtiofs" => {
                if msize.is_some() {
                    return Err(only("msize", "9p"));
                }
                if aio.is_some() {
                    return Err(only("aio", "virtio-blk"));
                }
                Attach::VirtioFs {
                    cache: check(cache.as_deref().unwrap_or("auto"), &["never", "auto", "always"])?,
                    dax: dax.unwrap_or(Dax::Off),
                }
            }
            _ => {
                if msize.is_some() {
                    return Err(only("msize", "9p"));
                }
                if dax.is_some() {
                    return Err(only("dax", "virtiofs"));
                }
                let aio = aio.unwrap_or_else(|| "threads".into());
                if !["threads", "native", "io_uring"].contains(&aio.as_str()) {
                    return Err(
                        f.error_at("aio", format!("\"{aio}\" is not allowed; use one of: threads, native, io_uring"))
                    );
                }
                Attach::VirtioBlk {
                    cache: check(
                        cache.as_deref().unwrap_or("none"),
                        &["none", "writeback", "writethrough", "directsync", "unsafe"],
                    )?,
                    aio,
                }
            }
        }))
    }

    pub fn needs_block(&self) -> bool {
        matches!(self, Attach::VirtioBlk { .. })
    }

    /// What the run records about the attachment.
    pub fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::new();
        match self {
            Attach::NineP { cache, msize } => {
                d.insert("attach".into(), "9p".into());
                d.insert("attach.cache".into(), cache.clone());
                d.insert("attach.msize".into(), msize.to_string());
            }
            Attach::VirtioFs { cache, dax } => {
                d.insert("attach".into(), "virtiofs".into());
                d.insert("attach.cache".into(), cache.clone());
                let used = if dax.active() { "on" } else { "off" };
                let note = if *dax == Dax::Auto { " (auto: this QEMU's DAX window decides)" } else { "" };
                d.insert("attach.dax".into(), format!("{used}{note}"));
            }
            Attach::VirtioBlk { cache, aio } => {
                d.insert("attach".into(), "virtio-blk".into());
                d.insert("attach.cache".into(), cache.clone());
                d.insert("attach.aio".into(), aio.clone());
            }
        }
        d
    }

    /// The guest modules the mount needs (besides the ones every guest loads).
    pub fn modules(&self, fs: Option<&str>) -> Vec<&'static str> {
        match self {
            Attach::NineP { .. } => vec![],
            Attach::VirtioFs { .. } => vec!["virtiofs"],
            // ext4 and xfs ask the crypto layer for crc32c when mounting: a soft dependency,
            // not in modules.dep, and the guest has no modprobe to find it.
            Attach::VirtioBlk { .. } => {
                vec!["virtio_blk", "crc32c_generic", if fs == Some("xfs") { "xfs" } else { "ext4" }]
            }
        }
    }

    /// The guest's command that mounts the volume at /newroot/data.
    pub fn guest_mount(&self, fs: Option<&str>) -> String {
        match self {
            Attach::NineP { cache, msize } => {
                format!("mount -t 9p -o trans=virtio,version=9p2000.L,cache={cache},msize={msize} data /newroot/data")
            }
            Attach::VirtioFs { dax, .. } if dax.active() => "mount -t virtiofs -o dax data /newroot/data".into(),
            Attach::VirtioFs { .. } => "mount -t virtiofs data /newroot/data".into(),
            Attach::VirtioBlk { .. } => format!("mount -t {} /dev/vda /newroot/data", fs.unwrap_or("ext4")),
        }
    }

    /// Why this attachment cannot work here, if it cannot.
    pub fn unavailable(&self) -> Option<String> {
        match self {
            Attach::VirtioFs { dax, .. } => {
                if Virtiofsd::find().is_none() {
                    return Some(
                        "no virtiofsd (Debian's qemu ships /usr/lib/qemu/virtiofsd; or cargo install virtiofsd)".into(),
                    );
                }
                (*dax == Dax::On && !qemu_has_dax_window()).then(|| {
                    "dax = true, but this QEMU has no virtio-fs DAX window (vhost-user-fs-pci has no cache-size property; upstream QEMU 7.2 lacks it)".into()
                })
            }
            _ => None,
        }
    }
}

/// Whether QEMU's vhost-user-fs device has a DAX window (`cache-size`).
fn qemu_has_dax_window() -> bool {
    crate::sys::command_output("qemu-system-x86_64", &["-device", "vhost-user-fs-pci,help"])
        .is_ok_and(|o| o.contains("cache-size"))
}

/// The virtio-fs daemon: the Rust virtiofsd (`--shared-dir`, cache never/auto/always) or QEMU's
/// older C one (`-o source=`, cache none/auto/always), whichever is installed.
pub struct Virtiofsd {
    pub binary: PathBuf,
    rust: bool,
}

impl Virtiofsd {
    pub fn find() -> Option<Virtiofsd> {
        let binary = [
            format!("{}/virtiofsd", crate::env::oci::TOOL_DIR),
            "virtiofsd".into(),
            "/usr/libexec/virtiofsd".into(),
            "/usr/lib/qemu/virtiofsd".into(),
        ]
        .iter()
        .find_map(|p| find_program(p))?;
        let version = crate::sys::command_output(&binary.to_string_lossy(), &["--version"]).unwrap_or_default();
        Some(Virtiofsd { rust: !version.contains("Fabrice Bellard"), binary })
    }

    pub fn version(&self) -> String {
        crate::sys::command_output(&self.binary.to_string_lossy(), &["--version"])
            .ok()
            .and_then(|v| v.lines().next().map(|l| l.trim().to_string()))
            .unwrap_or_default()
    }

    /// Starts the daemon sharing `dir` on `socket` and waits for the socket.
    pub fn spawn(
        &self,
        socket: &Path,
        dir: &Path,
        cache: &str,
        token: &str,
        log: &Path,
        (cpuset, group): (Option<&crate::sys::CpuSet>, Option<&crate::sys::CpuGroup>),
    ) -> Result<Child> {
        let mut cmd = Command::new(&self.binary);
        if let Some(set) = cpuset {
            set.start_in(&mut cmd);
        }
        if let Some(group) = group {
            group.start_in(&mut cmd);
        }
        cmd.arg(format!("--socket-path={}", socket.display()));
        if self.rust {
            cmd.args([format!("--shared-dir={}", dir.display()), format!("--cache={cache}")]);
        } else {
            let cache = if cache == "never" { "none" } else { cache };
            cmd.args(["-o".into(), format!("source={}", dir.display()), "-o".into(), format!("cache={cache}")]);
        }
        crate::sys::prepare(&mut cmd, Some(token));
        let log_file = std::fs::File::create(log)?;
        cmd.stdin(Stdio::null()).stdout(log_file.try_clone()?).stderr(log_file);
        let mut child = cmd.spawn().with_context(|| format!("starting {}", self.binary.display()))?;
        let created =
            crate::sys::Wait::new(format!("virtiofsd to create {}", socket.display()), Duration::from_secs(10))
                .every(Duration::from_millis(20))
                .until(|| {
                    if socket.exists() {
                        return Ok(crate::sys::Check::Done(()));
                    }
                    if let Some(status) = child.try_wait()? {
                        bail!(
                            "virtiofsd exited ({status}): {}",
                            crate::sys::tail_lines(&std::fs::read_to_string(log).unwrap_or_default(), 5)
                        );
                    }
                    Ok(crate::sys::Check::NotYet(String::new()))
                });
        if created.is_err() {
            let _ = child.kill();
        }
        created.map(|()| child)
    }
}
