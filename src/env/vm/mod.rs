//! QEMU guests: the Kata path. The guest's root is the host's own `/`, read-only over 9p, so
//! there is no image to build; isobench writes the initramfs (busybox, modules, an /init script)
//! and the volume under test crosses into the guest by 9p, virtio-fs or virtio-blk. The agent's
//! report comes back over a virtio-serial port; the console only times the boot and explains
//! failures. KVM is used where it really boots a guest (probed once), TCG otherwise, and the
//! accelerator is recorded with every run: TCG and KVM numbers are not comparable.

pub mod attach;
pub mod cpio;
pub mod guest;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use attach::{Attach, Virtiofsd};
use guest::Kernel;

use super::{Environment, Kind, Launch, agent_binary};
use crate::agent;
use crate::ledger::{Ledger, Resource};
use crate::net::NetPath;
use crate::store::{RawFile, Sample};
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};
use crate::volume::{BlockSource, Provisioned};
use figures::units;

pub const KIND: Kind = Kind { name: "vm", parse };

pub const QEMU: &str = "qemu-system-x86_64";

/// Every guest's kernel command line (the probe's and the run's). no_timer_check: an emulated
/// guest on a busy host may see too few timer ticks while its kernel checks the IO-APIC timer,
/// and panic ("IO-APIC + timer doesn't work!", once in make test's lanes).
const GUEST_KERNEL_ARGS: &str = "console=ttyS0 panic=-1 no_timer_check";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

pub struct Vm {
    vcpus: u64,
    memory: u64,
    /// None: auto (KVM if a probe guest boots, else TCG).
    accel: Option<Accel>,
    microvm: bool,
    kernel: Option<Kernel>,
    initrd: Option<PathBuf>,
    attach: Attach,
    boot_timeout: Duration,
    /// The NIC a network workload gets: `None` chooses (tap with vhost-net where the host has
    /// it, else user-mode); `Some(true)` a tap, `Some(false)` QEMU's user-mode network.
    tap: Option<bool>,
    /// The accelerator in use and why, settled by the first preflight.
    resolved: OnceLock<(Accel, String)>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    let vcpus = f.count("vcpus")?.unwrap_or(1);
    let memory = f.size("memory")?.unwrap_or(1 << 30);
    let accel = match f.choice("accel", &["auto", "kvm", "tcg"])?.as_deref() {
        Some("kvm") => Some(Accel::Kvm),
        Some("tcg") => Some(Accel::Tcg),
        _ => None,
    };
    let microvm = f.choice("machine", &["q35", "microvm"])?.is_some_and(|m| m == "microvm");
    let kernel = match f.str("kernel")? {
        Some(path) => {
            let modules = f.str("modules")?;
            if !Path::new(&path).exists() {
                return Err(f.error_at("kernel", format!("{path} does not exist")));
            }
            Some(Kernel::given(Path::new(&path), modules.as_deref().map(Path::new)))
        }
        None => {
            if f.str("modules")?.is_some() {
                return Err(
                    f.error_at("modules", "are the modules of the kernel given by kernel = \"…\": give that too")
                );
            }
            None
        }
    };
    let initrd = f.str("initrd")?.map(PathBuf::from);
    if let Some(path) = initrd.as_ref().filter(|p| !p.exists()) {
        return Err(f.error_at("initrd", format!("{} does not exist", path.display())));
    }
    let attach = Attach::parse(f, Some("9p"))?.expect("a default was given");
    let boot_timeout = f.timeout("boot_timeout")?.unwrap_or(Duration::from_secs(120));
    let tap = match f.choice("net", &["auto", "user", "tap"])?.as_deref() {
        Some("tap") => Some(true),
        Some("user") => Some(false),
        _ => None,
    };
    f.finish()?;
    Ok(Box::new(Vm {
        vcpus,
        memory,
        accel,
        microvm,
        kernel,
        initrd,
        attach,
        boot_timeout,
        tap,
        resolved: OnceLock::new(),
    }))
}

impl Vm {
    fn kernel(&self) -> Option<Kernel> {
        self.kernel.clone().or_else(Kernel::installed)
    }

    /// A device name for this machine: PCI on q35, MMIO on microvm.
    fn dev(&self, base: &str) -> String {
        format!("{base}-{}", if self.microvm { "device" } else { "pci" })
    }

    fn machine_args(&self, accel: Accel) -> Vec<String> {
        let machine = if self.microvm { "microvm,pit=on,pic=on,rtc=on" } else { "q35" };
        let cpu = if accel == Accel::Kvm { "host" } else { "max" };
        vec![
            "-nodefaults".into(),
            "-no-user-config".into(),
            "-display".into(),
            "none".into(),
            "-no-reboot".into(),
            "-machine".into(),
            format!("{machine},accel={}", accel.name()),
            "-cpu".into(),
            cpu.into(),
            "-serial".into(),
            "stdio".into(),
            // Threads named by what they do ("CPU 0/TCG", "IO iothread1"): the CPU sampled by
            // part tells the guest's vCPUs from QEMU's devices by these names.
            "-name".into(),
            "isobench,debug-threads=on".into(),
        ]
    }

    /// The accelerator: KVM only where a probe guest really boots with it (here /dev/kvm opens
    /// but guests hang: the host offers PVM, not VT-x/SVM), TCG otherwise. Probed once per boot
    /// of the host and cached under `cache_dir`.
    fn resolve_accel(&self, ledger: &Ledger, run_dir: &Path, cache_dir: &Path) -> Result<(Accel, String)> {
        if let Some(r) = self.resolved.get() {
            return Ok(r.clone());
        }
        let resolved = match self.accel {
            Some(Accel::Tcg) => (Accel::Tcg, "accel = tcg".to_string()),
            choice => {
                let probed = if Path::new("/dev/kvm").exists() {
                    probe_kvm(self, ledger, run_dir, cache_dir)?
                } else {
                    Err("there is no /dev/kvm".to_string())
                };
                match (choice, probed) {
                    (_, Ok(())) => (Accel::Kvm, "a KVM probe guest booted".to_string()),
                    (Some(Accel::Kvm), Err(why)) => bail!("accel = kvm, but KVM cannot run a guest here: {why}"),
                    (_, Err(why)) => (
                        Accel::Tcg,
                        format!("KVM unusable ({why}); TCG software emulation: not comparable with KVM numbers"),
                    ),
                }
            }
        };
        let _ = self.resolved.set(resolved.clone());
        Ok(resolved)
    }

    /// The guest's life: its initramfs, QEMU's arguments (machine, root share, report port,
    /// NIC, the volume), the launch under a boot watchdog, and the agent's report.
    fn boot(&self, launch: &mut Launch, accel: Accel, attach: &Attach) -> Result<crate::store::AgentReport> {
        let kernel = self.kernel().ok_or_else(|| anyhow::anyhow!("no guest kernel"))?;
        // A raw volume can only cross as a disk, whatever the suite's attachment for files.
        let raw_disk = launch.volume.raw.then(|| match attach {
            Attach::VirtioBlk { cache, aio } => Attach::VirtioBlk { cache: cache.clone(), aio: aio.clone() },
            _ => Attach::VirtioBlk { cache: "none".into(), aio: "threads".into() },
        });
        let attach = raw_disk.as_ref().unwrap_or(attach);
        let netdev = guest_netdev(launch)?;
        let initrd = self.write_initrd(launch, &kernel, attach, netdev.as_ref())?;
        let result = launch.run_dir.join("result.txt");
        std::fs::write(&result, b"")?;
        let token = launch.ledger.new_process_token();
        launch.ledger.record(Resource::Processes { token: token.clone() })?;
        let memory = launch.memory.unwrap_or(self.memory);
        let mut args = self.machine_args(accel);
        args.extend(self.guest_args(&kernel, &initrd, memory, &result, netdev.as_ref().map(|(n, _)| n.as_str())));
        let virtiofsd = self.attach_volume(&mut args, launch, attach, memory, &token)?;
        let (finished, booted) = self.run_guest(launch, &args, &token, virtiofsd)?;
        let mut report = guest_report(&finished, &result)?;
        if let Some(boot) = booted {
            report.samples.push(Sample::new("vm_boot", boot, "s"));
        }
        report.raw.push(RawFile { name: "console.log".into(), content: finished.stdout });
        report.setup.extend(attach.describe());
        if launch.volume.raw {
            report.setup.insert("attach".into(), "virtio-blk (the raw device as the guest's /dev/vda)".into());
        }
        report.setup.insert("vm.guest_kernel".into(), kernel.version.clone());
        Ok(report)
    }

    /// The guest's initramfs, written to the run's directory: the suite's extra archive, the
    /// cached base, and this run's init script, modules and request.
    fn write_initrd(
        &self,
        launch: &Launch,
        kernel: &Kernel,
        attach: &Attach,
        netdev: Option<&(String, NetPath)>,
    ) -> Result<PathBuf> {
        let fs = launch.volume.facts.get("volume.fs").map(String::as_str);
        let mut modules: Vec<&str> = vec!["virtio_pci", "virtio_console", "9pnet_virtio", "9p", "overlay"];
        if self.microvm {
            modules.push("virtio_mmio");
        }
        modules.extend(attach.modules(if launch.volume.raw { None } else { fs }));
        if netdev.is_some() {
            modules.push("virtio_net");
        }
        let data_mount = if launch.volume.raw { ":".to_string() } else { attach.guest_mount(fs) };
        let guest_net = netdev.and_then(|(_, path)| {
            let (address, prefix) = path.guest_address()?;
            let gateway = (*path == NetPath::User).then_some(crate::net::SLIRP_HOST);
            Some(guest::GuestNet { address, prefix, gateway })
        });
        let init = guest::init_script(&data_mount, &agent_binary()?, guest_net.as_ref());
        let mut initrd = match &self.initrd {
            Some(extra) => std::fs::read(extra).with_context(|| format!("reading {}", extra.display()))?,
            None => Vec::new(),
        };
        initrd.extend(std::fs::read(guest::base_initramfs(kernel, &launch.workdir.join("cache"))?)?);
        initrd.extend(guest::run_initramfs(
            &init,
            &guest::module_list(kernel, &modules)?,
            &serde_json::to_vec(launch.request)?,
        ));
        let path = launch.run_dir.join("initrd.cpio");
        std::fs::write(&path, initrd)?;
        Ok(path)
    }

    /// Size, kernel, the host's root as the guest's (read-only 9p), the report's serial port,
    /// and the NIC if there is one.
    fn guest_args(
        &self,
        kernel: &Kernel,
        initrd: &Path,
        memory: u64,
        result: &Path,
        netdev: Option<&str>,
    ) -> Vec<String> {
        let mut args: Vec<String> =
            vec!["-smp".into(), self.vcpus.to_string(), "-m".into(), format!("{}M", memory >> 20)];
        args.extend([
            "-kernel".into(),
            kernel.image.display().to_string(),
            "-initrd".into(),
            initrd.display().to_string(),
        ]);
        args.extend(["-append".into(), format!("{GUEST_KERNEL_ARGS} loglevel=4")]);
        args.extend([
            "-fsdev".into(),
            "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap".into(),
            "-device".into(),
            format!("{},fsdev=hostroot,mount_tag=hostroot", self.dev("virtio-9p")),
        ]);
        args.extend([
            "-device".into(),
            format!("{},id=vser", self.dev("virtio-serial")),
            "-chardev".into(),
            format!("file,id=result,path={}", result.display()),
            "-device".into(),
            "virtserialport,bus=vser.0,chardev=result,name=isobench".into(),
        ]);
        if let Some(netdev) = netdev {
            args.extend([
                "-netdev".into(),
                netdev.to_string(),
                "-device".into(),
                format!("{},netdev=net0", self.dev("virtio-net")),
            ]);
        }
        args
    }

    /// The volume under test as the guest's data device; virtio-fs's daemon, started here, is
    /// returned for the caller to stop once QEMU has exited.
    fn attach_volume(
        &self,
        args: &mut Vec<String>,
        launch: &Launch,
        attach: &Attach,
        memory: u64,
        token: &str,
    ) -> Result<Option<std::process::Child>> {
        match attach {
            Attach::NineP { .. } => args.extend([
                "-fsdev".into(),
                format!("local,id=data,path={},security_model=none,multidevs=remap", launch.volume.path.display()),
                "-device".into(),
                format!("{},fsdev=data,mount_tag=data", self.dev("virtio-9p")),
            ]),
            Attach::VirtioFs { cache, dax } => {
                let daemon = Virtiofsd::find().ok_or_else(|| anyhow::anyhow!("no virtiofsd"))?;
                let socket = launch.run_dir.join("virtiofs.sock");
                let log = launch.run_dir.join("virtiofsd.log");
                let child = daemon.spawn(
                    &socket,
                    &launch.volume.path,
                    cache,
                    token,
                    &log,
                    (launch.cpuset, launch.cpu_group),
                )?;
                args.extend([
                    "-chardev".into(),
                    format!("socket,id=vfs,path={}", socket.display()),
                    "-device".into(),
                    format!(
                        "{},chardev=vfs,tag=data{}",
                        self.dev("vhost-user-fs"),
                        if dax.active() { ",cache-size=1G" } else { "" }
                    ),
                    // vhost-user needs the guest's memory shared with the daemon.
                    "-object".into(),
                    format!("memory-backend-memfd,id=mem,size={}M,share=on", memory >> 20),
                    "-numa".into(),
                    "node,memdev=mem".into(),
                ]);
                return Ok(Some(child));
            }
            Attach::VirtioBlk { cache, aio } => {
                let source = launch.volume.block.as_ref().ok_or_else(|| {
                    anyhow::anyhow!("attach = \"virtio-blk\" needs a block volume (kind = \"loop\", \"block\", \"nbd\" or \"mirror\")")
                })?;
                let mut drive = block_drive(source, aio);
                drive.push_str(&format!(",if=none,id=data,cache={cache}"));
                if launch.volume.read_only {
                    drive.push_str(",readonly=on");
                }
                args.extend([
                    "-drive".into(),
                    drive,
                    "-device".into(),
                    format!("{},drive=data", self.dev("virtio-blk")),
                ]);
            }
        }
        Ok(None)
    }

    /// QEMU run to its end, on the cell's CPUs, under a watchdog that kills a guest that has
    /// not reached its init within `boot_timeout`; the console's lines are relayed as they come
    /// (boot marker, the agent's ready line and progress). Returns QEMU's end and the boot time.
    fn run_guest(
        &self,
        launch: &Launch,
        args: &[String],
        token: &str,
        virtiofsd: Option<std::process::Child>,
    ) -> Result<(sys::Finished, Option<f64>)> {
        let started = Instant::now();
        let booted: Arc<Mutex<Option<f64>>> = Arc::default();
        let qemu_done = Arc::new(AtomicBool::new(false));
        let watchdog = {
            let (booted, done, token, limit) =
                (Arc::clone(&booted), Arc::clone(&qemu_done), token.to_string(), self.boot_timeout);
            std::thread::spawn(move || {
                while started.elapsed() < limit {
                    if booted.lock().expect("not poisoned").is_some() || done.load(Ordering::Relaxed) {
                        return false;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                let hung = booted.lock().expect("not poisoned").is_none();
                if hung {
                    sys::kill_by_token(&token);
                }
                hung
            })
        };
        let seen = Arc::clone(&booted);
        let gate = launch.gate;
        let mut on_line = |line: &str| {
            if line.contains(guest::BOOTED) {
                seen.lock().expect("not poisoned").get_or_insert(started.elapsed().as_secs_f64());
            }
            gate.iter().for_each(|g| g.saw_line(line));
            sys::progress::relay(line);
        };
        let mut on_spawn = |pid: u32| gate.iter().for_each(|g| g.spawned(pid));
        let mut qemu = Command::new(QEMU);
        qemu.args(args);
        // Every thread of QEMU (its vCPUs, its I/O) runs on the cell's CPUs, counted in its group.
        if let Some(set) = launch.cpuset {
            set.start_in(&mut qemu);
        }
        if let Some(group) = launch.cpu_group {
            group.start_in(&mut qemu);
        }
        let finished = sys::run(
            &mut qemu,
            sys::Options {
                token: Some(token),
                timeout: Some(launch.timeout + self.boot_timeout),
                on_stdout_line: Some(&mut on_line),
                on_spawn: Some(&mut on_spawn),
                // The console is the guest's stdin too: "go" reaches the waiting agent there.
                stdin_then: gate.as_ref().map(|g| g.go()),
                ..Default::default()
            },
        );
        if let Some(mut child) = virtiofsd {
            let _ = child.kill();
            let _ = child.wait();
        }
        qemu_done.store(true, Ordering::Relaxed);
        if watchdog.join().unwrap_or(false) {
            let console = finished.as_ref().map(|f| f.stdout.clone()).unwrap_or_default();
            bail!(
                "the guest did not reach its init within {:?} (boot_timeout); it was stopped. Last console lines:\n{}",
                self.boot_timeout,
                console_tail(&console)
            );
        }
        let boot = *booted.lock().expect("not poisoned");
        Ok((finished?, boot))
    }
}

/// The NIC: only a server's forwarded ports on the host's loopback, or the workload's path.
fn guest_netdev(launch: &Launch) -> Result<Option<(String, NetPath)>> {
    if !launch.forward.is_empty() {
        // Only the forwarded ports, on the host's loopback: the guest reaches nothing else.
        let forwards: String = launch
            .forward
            .iter()
            .map(|p| format!(",hostfwd=tcp:127.0.0.1:{p}-{}:{p}", crate::net::SLIRP_GUEST))
            .collect();
        return Ok(Some((format!("user,id=net0,restrict=on{forwards}"), NetPath::User)));
    }
    Ok(match launch.network {
        // Unrestricted: the guest reaches the host's loopback through 10.0.2.2.
        Some(NetPath::User) => Some(("user,id=net0".to_string(), NetPath::User)),
        Some(tap @ NetPath::Tap { name, vhost, .. }) => Some((
            format!("tap,id=net0,ifname={name},script=no,downscript=no,vhost={}", if *vhost { "on" } else { "off" }),
            tap.clone(),
        )),
        Some(other) => bail!("a VM cannot use the network path {other:?}"),
        None => None,
    })
}

/// A `-drive` for a block volume: a file (or a slice of one), or QEMU's own NBD client, with no
/// device on the host between the guest and the export.
fn block_drive(source: &BlockSource, aio: &str) -> String {
    match source {
        BlockSource::File { path, offset, size } => {
            let mut d = format!("file={},format=raw,aio={aio}", path.display());
            if *offset > 0 {
                d.push_str(&format!(",offset={offset}"));
            }
            if let Some(size) = size {
                // A slice: QEMU locks the whole file, but the VMs of a density cell share it,
                // each at its own disjoint offset.
                d.push_str(&format!(",size={size},file.locking=off"));
            }
            d
        }
        BlockSource::Nbd(e) => format!(
            "driver=raw,file.driver=nbd,file.server.type=inet,file.server.host={},file.server.port={},file.export={}",
            e.host, e.port, e.name
        ),
    }
}

/// The agent's report from the serial port's file, or why the guest sent none: QEMU's own
/// words when it refused to start, else the init's last word and the console's tail.
fn guest_report(finished: &sys::Finished, result: &Path) -> Result<crate::store::AgentReport> {
    let console = &finished.stdout;
    let text = std::fs::read_to_string(result).unwrap_or_default();
    if let Some(report) = agent::parse_output(&text) {
        return Ok(report);
    }
    if !finished.status.success() && !console.contains(guest::BOOTED) {
        let said = sys::tail_lines(&finished.stderr, 4);
        bail!("qemu could not start the guest ({}): {}", finished.status, said.lines().last().unwrap_or("no message"));
    }
    let said: Vec<&str> = console.lines().filter(|l| l.contains("isobench-init:")).collect();
    let why = said.last().copied().unwrap_or("the guest sent no report");
    bail!("{why} (qemu: {}); last console lines:\n{}", finished.status, console_tail(console));
}

/// The console's last lines for an error, or that it stayed silent.
fn console_tail(console: &str) -> String {
    let tail = sys::tail_lines(console, 15);
    if tail.is_empty() { "(the console stayed silent)".into() } else { tail }
}

/// Whether guests get KVM here, as far as can be told without booting one: a probe's verdict
/// cached under `cache_dir` this boot, else /dev/kvm and the CPU's virtualisation flags. Not
/// KVM: guests run under TCG, software emulation, and say so in every run's setup.
pub fn accelerator_here(cache_dir: &Path) -> Result<String, String> {
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let probed = std::fs::read_dir(cache_dir)
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path()))
        .find(|p| {
            p.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                n.starts_with("kvm-probe-") && n.ends_with(&format!("-{}.txt", boot_id.trim()))
            })
        })
        .and_then(|p| std::fs::read_to_string(p).ok());
    let tcg = "guests run under TCG, software emulation: 10-50× slower than KVM (Cassandra takes minutes to start in a guest), their numbers not comparable with KVM's";
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = cpuinfo.split_whitespace().any(|f| f == "vmx" || f == "svm");
    match (probed.as_deref(), Path::new("/dev/kvm").exists(), flags) {
        (Some("ok"), ..) => Ok("KVM: a probe guest booted with it".into()),
        (Some(why), ..) => Err(format!("KVM unusable ({why}): {tcg}")),
        (None, false, _) => Err(format!("there is no /dev/kvm: {tcg}")),
        (None, true, false) => Err(format!(
            "/dev/kvm is there but the CPU has no vmx or svm flag (a paravirtual KVM such as PVM, which cannot run a stock guest): {tcg}"
        )),
        (None, true, true) => Ok("KVM: /dev/kvm and the CPU's vmx/svm (the first VM run probes a guest)".into()),
    }
}

/// Boots a guest that only prints a line, with KVM, under a short timeout. The outcome is
/// cached per host boot (a hanging probe costs its whole timeout).
fn probe_kvm(vm: &Vm, ledger: &Ledger, run_dir: &Path, cache_dir: &Path) -> Result<Result<(), String>> {
    let kernel = vm.kernel().ok_or_else(|| anyhow::anyhow!("no guest kernel"))?;
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let cached = cache_dir.join(format!("kvm-probe-{}-{}.txt", kernel.version, boot_id.trim()));
    if let Ok(verdict) = std::fs::read_to_string(&cached) {
        return Ok(if verdict == "ok" { Ok(()) } else { Err(verdict) });
    }
    let initrd = run_dir.join("probe.cpio");
    let mut bytes = std::fs::read(guest::base_initramfs(&kernel, cache_dir)?)?;
    bytes.extend(guest::run_initramfs(&guest::probe_script(), &[], b"{}"));
    std::fs::write(&initrd, bytes)?;
    let token = ledger.new_process_token();
    ledger.record(Resource::Processes { token: token.clone() })?;
    let mut args = vm.machine_args(Accel::Kvm);
    args.extend(["-m".into(), "256M".into(), "-kernel".into(), kernel.image.display().to_string()]);
    args.extend(["-initrd".into(), initrd.display().to_string(), "-append".into(), GUEST_KERNEL_ARGS.into()]);
    let verdict = match sys::run(
        Command::new(QEMU).args(&args),
        sys::Options { token: Some(&token), timeout: Some(Duration::from_secs(20)), ..Default::default() },
    ) {
        Ok(f) if f.stdout.contains(guest::PROBE_OK) => "ok".to_string(),
        Ok(f) => format!("the probe guest failed: {}", f.tail(2).replace('\n', " ")),
        Err(e) if e.downcast_ref::<sys::Interrupted>().is_some() => return Err(e),
        Err(_) => "the probe guest did not boot within 20 s".to_string(),
    };
    std::fs::create_dir_all(cache_dir)?;
    std::fs::write(&cached, &verdict)?;
    Ok(if verdict == "ok" { Ok(()) } else { Err(verdict) })
}

impl Environment for Vm {
    fn unavailable(&self) -> Option<String> {
        if let Some(why) = crate::sys::needs_root() {
            return Some(why);
        }
        if find_program(QEMU).is_none() {
            return Some(format!("{QEMU} is not installed (apt-get install qemu-system-x86)"));
        }
        if self.kernel().is_none() {
            return Some(format!(
                "no guest kernel: scripts/setup.sh unpacks Debian's generic kernel into {}, or set kernel = \"...\"",
                guest::GUEST_DIR
            ));
        }
        if self.accel == Some(Accel::Kvm) && !Path::new("/dev/kvm").exists() {
            return Some("accel = kvm, but there is no /dev/kvm".into());
        }
        self.attach.unavailable()
    }

    fn is_sandbox(&self) -> bool {
        true
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([
            ("env.kind".to_string(), "vm".to_string()),
            (
                "vm.qemu".into(),
                sys::command_output(QEMU, &["--version"])
                    .ok()
                    .and_then(|v| v.lines().next().map(str::to_string))
                    .unwrap_or_default(),
            ),
            ("vm.machine".into(), if self.microvm { "microvm" } else { "q35" }.into()),
            ("vm.vcpus".into(), self.vcpus.to_string()),
            ("vm.memory".into(), units::fio_size(self.memory)),
        ]);
        if let Some((accel, why)) = self.resolved.get() {
            d.insert("vm.accel".into(), accel.name().into());
            d.insert("vm.accel_reason".into(), why.clone());
        }
        if let Attach::VirtioFs { .. } = self.attach
            && let Some(daemon) = Virtiofsd::find()
        {
            d.insert("vm.virtiofsd".into(), daemon.version());
        }
        d
    }

    fn wants_block(&self, attach: Option<&Attach>) -> bool {
        attach.unwrap_or(&self.attach).needs_block()
    }

    fn data_dir(&self, _volume: &Provisioned) -> PathBuf {
        PathBuf::from(super::rootfs::DATA_PATH)
    }

    fn raw_target(&self, _volume: &Provisioned) -> crate::volume::RawTarget {
        // The guest's only virtio-blk disk, whatever the host attached (file, device, NBD).
        crate::volume::RawTarget::Device(PathBuf::from("/dev/vda"))
    }

    fn memory_per_sandbox(&self) -> Option<u64> {
        Some(self.memory)
    }

    fn speaks_nbd(&self) -> bool {
        true
    }

    fn scratch_dir(&self, _run_dir: &Path) -> PathBuf {
        PathBuf::from(super::rootfs::SCRATCH_PATH)
    }

    fn preflight(&self, ledger: &Ledger, run_dir: &Path, workdir: &Path) -> Result<()> {
        self.resolve_accel(ledger, run_dir, &workdir.join("cache")).map(|_| ())
    }

    fn network(&self, ledger: &Ledger) -> Result<NetPath> {
        let vhost = Path::new("/dev/vhost-net").exists() && crate::net::tap_unavailable().is_none();
        if self.tap.unwrap_or(vhost) { crate::net::tap(ledger) } else { Ok(NetPath::User) }
    }

    /// QEMU and virtiofsd start in the cell's group: the guest's vCPUs, QEMU's devices and
    /// virtiofsd are counted, and sampled by part, like a container's processes.
    fn cpu_count(&self) -> super::CpuCount {
        super::CpuCount::Group
    }

    fn reach(&self) -> Result<super::Reach, String> {
        // Listening on every interface of the guest, a server is reached through the ports
        // forwarded to GUEST_ADDRESS, and must advertise the host's end of them.
        Ok(super::Reach::Forwarded { inside: "0.0.0.0".into(), host: "127.0.0.1".into() })
    }

    fn run_agent(&self, mut launch: Launch) -> Result<crate::store::AgentReport> {
        let attach = launch.attach.cloned().unwrap_or_else(|| self.attach.clone());
        if let Some(why) = attach.unavailable() {
            bail!("{why}");
        }
        let cache_dir = launch.workdir.join("cache");
        let (accel, why) = self.resolve_accel(launch.ledger, launch.run_dir, &cache_dir)?;
        let mut report = self.boot(&mut launch, accel, &attach)?;
        report.setup.insert("vm.accel".into(), accel.name().into());
        report.setup.insert("vm.accel_reason".into(), why);
        Ok(report)
    }
}
