//! What a guest boots: a kernel (Debian's generic one, unpacked by `scripts/setup.sh`, or the
//! suite's own), and an initramfs isobench writes itself: busybox and the modules it needs
//! (cached), plus, per run, an /init script and the agent's request.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use super::cpio::Archive;

/// Where `scripts/setup.sh` unpacks guest kernels: `<dir>/<version>/boot/vmlinuz-<version>` and
/// `<dir>/<version>/lib/modules/<version>/`.
pub const GUEST_DIR: &str = "/usr/local/lib/isobench/guest";

/// The modules any guest may need, by module name; dependencies are added from modules.dep.
pub const MODULES: &[&str] = &[
    "virtio_pci",
    "virtio_mmio",
    "virtio_console",
    "virtio_blk",
    "virtio_net",
    "9pnet_virtio",
    "9p",
    "virtiofs",
    "overlay",
    "crc32c_generic",
    "ext4",
    "xfs",
];

#[derive(Clone, Debug)]
pub struct Kernel {
    pub image: PathBuf,
    /// `lib/modules/<version>` with a modules.dep, when the kernel has loadable modules.
    pub modules: Option<PathBuf>,
    pub version: String,
}

impl Kernel {
    /// The newest kernel setup unpacked under GUEST_DIR.
    pub fn installed() -> Option<Kernel> {
        let mut versions: Vec<PathBuf> =
            std::fs::read_dir(GUEST_DIR).ok()?.filter_map(|e| Some(e.ok()?.path())).collect();
        versions.sort();
        versions.into_iter().rev().find_map(|dir| {
            let version = dir.file_name()?.to_string_lossy().into_owned();
            let image = dir.join("boot").join(format!("vmlinuz-{version}"));
            let modules = dir.join("lib/modules").join(&version);
            image.exists().then(|| Kernel {
                image,
                modules: modules.join("modules.dep").exists().then_some(modules),
                version,
            })
        })
    }

    /// A kernel the suite names, with its modules directory if it has one.
    pub fn given(image: &Path, modules: Option<&Path>) -> Kernel {
        let version = modules
            .and_then(|m| m.file_name())
            .map(|v| v.to_string_lossy().into_owned())
            .unwrap_or_else(|| image.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        Kernel { image: image.to_path_buf(), modules: modules.map(Path::to_path_buf), version }
    }
}

/// Module files for `wanted` with their dependencies, in load order (dependencies first).
/// Names not found are built in, or absent: the guest's init says which when it matters.
pub fn module_files(modules: &Path, wanted: &[&str]) -> Result<Vec<PathBuf>> {
    let dep_file = modules.join("modules.dep");
    let text = std::fs::read_to_string(&dep_file).with_context(|| format!("reading {}", dep_file.display()))?;
    let deps: Vec<(String, Vec<String>)> = text
        .lines()
        .filter_map(|l| {
            let (module, deps) = l.split_once(':')?;
            Some((module.trim().to_string(), deps.split_whitespace().map(str::to_string).collect()))
        })
        .collect();
    let by_name = |name: &str| {
        deps.iter().find(|(path, _)| {
            let base = path.rsplit('/').next().unwrap_or(path);
            base.split(".ko").next().unwrap_or(base).replace('-', "_") == name
        })
    };
    fn add(path: &str, deps: &[(String, Vec<String>)], order: &mut Vec<String>) {
        if order.iter().any(|p| p == path) {
            return;
        }
        if let Some((_, needs)) = deps.iter().find(|(p, _)| p == path) {
            for d in needs {
                add(d, deps, order);
            }
        }
        order.push(path.to_string());
    }
    let mut order = Vec::new();
    for name in wanted {
        if let Some((path, _)) = by_name(name) {
            add(path, &deps, &mut order);
        }
    }
    Ok(order.into_iter().map(|p| modules.join(p)).collect())
}

/// The part of the initramfs that is the same for every run with this kernel: busybox and the
/// modules. Built once and cached under `cache_dir`.
pub fn base_initramfs(kernel: &Kernel, cache_dir: &Path) -> Result<PathBuf> {
    let busybox = ["/bin/busybox", "/usr/bin/busybox"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| anyhow::anyhow!("busybox is not installed (apt-get install busybox-static)"))?;
    // Named by what goes in, so a new module list or busybox makes a new archive.
    let key = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (MODULES, &kernel.modules, std::fs::metadata(&busybox).map(|m| m.len()).unwrap_or(0)).hash(&mut h);
        h.finish() & 0xffff_ffff
    };
    let path = cache_dir.join(format!("initrd-base-{}-{key:08x}.cpio", kernel.version));
    if path.exists() {
        return Ok(path);
    }
    let mut archive = Archive::default();
    for dir in ["bin", "dev", "proc", "sys", "mods", "lower", "rw", "newroot"] {
        archive.dir(dir);
    }
    archive.file(
        "bin/busybox",
        0o755,
        &std::fs::read(&busybox).with_context(|| format!("reading {}", busybox.display()))?,
    );
    if let Some(modules) = &kernel.modules {
        for module in module_files(modules, MODULES)? {
            let name = module.file_name().expect("a file").to_string_lossy().into_owned();
            if name.ends_with(".ko.xz") || name.ends_with(".ko.zst") || name.ends_with(".ko.gz") {
                bail!("{} is compressed; busybox's insmod needs plain .ko modules", module.display());
            }
            archive.file(
                &format!("mods/{name}"),
                0o644,
                &std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?,
            );
        }
    }
    std::fs::create_dir_all(cache_dir)?;
    crate::sys::write_atomic(&path, &archive.finish())?;
    Ok(path)
}

/// The load order of the modules a run needs (file names in /mods), from `wanted`.
pub fn module_list(kernel: &Kernel, wanted: &[&str]) -> Result<Vec<String>> {
    let Some(modules) = &kernel.modules else { return Ok(Vec::new()) };
    Ok(module_files(modules, wanted)?
        .iter()
        .map(|m| m.file_name().expect("a file").to_string_lossy().into_owned())
        .collect())
}

/// The per-run archive: /init, the module list and the agent's request.
pub fn run_initramfs(init: &str, modules: &[String], request: &[u8]) -> Vec<u8> {
    let mut archive = Archive::default();
    archive.file("init", 0o755, init.as_bytes());
    archive.file("modlist", 0o644, (modules.join("\n") + "\n").as_bytes());
    archive.file("request.json", 0o644, request);
    archive.finish()
}

/// How the guest's eth0 is configured.
pub struct GuestNet {
    pub address: std::net::Ipv4Addr,
    pub prefix: u8,
    pub gateway: Option<std::net::Ipv4Addr>,
}

/// The console line /init prints as soon as it runs: the host times the boot to it.
pub const BOOTED: &str = "ISOBENCH-BOOTED";
/// What a probe guest prints before powering off.
pub const PROBE_OK: &str = "ISOBENCH-PROBE-OK";

/// What /init does after boot: mount the host's root read-only over 9p under a tmpfs overlay
/// (which makes it writable, /tmp included, without touching the host),
/// mount the volume under test at /data, run the agent in that root with its report going to
/// the virtio-serial port named "isobench", power off. Any failure is said on the console.
/// With `network`, eth0 gets its address (and a default route, on QEMU's user network).
pub fn init_script(data_mount: &str, agent: &Path, network: Option<&GuestNet>) -> String {
    let network = match network {
        Some(GuestNet { address, prefix, gateway }) => {
            let route = gateway.map(|g| format!(" && ip route add default via {g}")).unwrap_or_default();
            format!(
                "ip link set lo up; ip link set eth0 up && ip addr add {address}/{prefix} dev eth0{route} || fail \"cannot configure eth0\""
            )
        }
        None => ":".into(),
    };
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo {BOOTED} > /dev/console
fail() {{ echo "isobench-init: $*" > /dev/console; poweroff -f; }}
for m in $(cat /modlist); do insmod /mods/$m 2>/dev/console || echo "isobench-init: insmod $m failed" > /dev/console; done
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=524288 hostroot /lower || fail "cannot mount the host's root over 9p"
mount -t tmpfs -o size=256m,mode=755 rw /rw && mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work root /newroot || fail "cannot make the overlay root"
mkdir -p /newroot/data /newroot/proc /newroot/sys /newroot/dev /newroot/tmp
mount -t proc proc /newroot/proc && mount -t sysfs sysfs /newroot/sys && mount -t devtmpfs devtmpfs /newroot/dev
{data_mount} || fail "cannot mount the volume under test: {data_mount}"
{network}
cp /request.json /newroot/tmp/isobench-request.json
PORT=""
for p in /sys/class/virtio-ports/*; do [ "$(cat $p/name 2>/dev/null)" = isobench ] && PORT=/dev/$(basename $p); done
[ -n "$PORT" ] || fail "no virtio-serial port named isobench"
chroot /newroot {agent} agent --request /tmp/isobench-request.json < /dev/console > $PORT 2>/dev/console || echo "isobench-init: the agent exited with $?" > /dev/console
sync
poweroff -f
"#,
        agent = agent.display()
    )
}

/// /init of a guest that only proves it booted (the KVM probe).
pub fn probe_script() -> String {
    format!(
        "#!/bin/busybox sh\n/bin/busybox mount -t devtmpfs devtmpfs /dev\n/bin/busybox echo {PROBE_OK} > /dev/console\n/bin/busybox poweroff -f\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_come_with_their_dependencies_first() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("modules.dep"),
            "kernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko kernel/fs/netfs/netfs.ko\nkernel/net/9p/9pnet.ko:\nkernel/fs/netfs/netfs.ko:\nkernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko kernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_ring.ko:\n",
        )
        .unwrap();
        let files = module_files(dir.path(), &["9pnet_virtio", "9p", "absent"]).unwrap();
        let names: Vec<String> =
            files.iter().map(|f| f.strip_prefix(dir.path()).unwrap().display().to_string()).collect();
        assert_eq!(
            names,
            [
                "kernel/net/9p/9pnet.ko",
                "kernel/drivers/virtio/virtio_ring.ko",
                "kernel/net/9p/9pnet_virtio.ko",
                "kernel/fs/netfs/netfs.ko",
                "kernel/fs/9p/9p.ko"
            ]
        );
    }
}
