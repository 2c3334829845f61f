//! Container engines' command lines: podman (rootless-capable, daemonless) and docker. podman
//! runs on the same overlay of the host's `/` as the OCI environment (`--rootfs`), or on an
//! image the suite names; docker, which has no `--rootfs`, needs an image. `runtime` picks the
//! engine's OCI runtime (`--runtime`), `runtime_args` become its `--runtime-flag`s.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Result;

use super::oci::{Contents, Flavour, Net, Runtime};
use super::rootfs::{AGENT_PATH, DATA_PATH, DEVICE_PATH, SCRATCH_PATH, overlay_of_host_root};
use super::{Environment, Kind, Launch, agent_binary, host::run_agent_process};
use crate::ledger::Resource;
use crate::net::NetPath;
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};
use crate::volume::Provisioned;
use figures::units;

pub const PODMAN: Kind = Kind { name: "podman", parse: parse_podman };
pub const DOCKER: Kind = Kind { name: "docker", parse: parse_docker };

pub struct Engine {
    program: &'static str,
    runtime: Option<Runtime>,
    runtime_args: Vec<String>,
    image: Option<String>,
    cpus: Option<f64>,
    memory: Option<u64>,
    host_network: bool,
}

fn parse_podman(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    parse(f, "podman")
}

fn parse_docker(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    parse(f, "docker")
}

fn parse(f: &mut Fields, program: &'static str) -> Result<Box<dyn Environment>, SuiteError> {
    let runtime = f.str("runtime")?.map(|r| Runtime::resolve(&r));
    if let Some(r) = &runtime
        && r.name.contains('/')
        && r.path.is_none()
    {
        return Err(f.error_at("runtime", format!("{} does not exist or is not executable", r.name)));
    }
    let runtime_args = f.str_list("runtime_args")?.unwrap_or_default();
    let image = f.str("image")?;
    if program == "docker" && image.is_none() {
        return Err(f.error(
            "docker cannot run on the host's own root (it has no --rootfs); name an image with image = \"...\"",
        ));
    }
    let cpus = f.float("cpus")?;
    let memory = f.size("memory")?;
    let network = f.choice("network", &["none", "host"])?.unwrap_or_else(|| "none".into());
    f.finish()?;
    Ok(Box::new(Engine { program, runtime, runtime_args, image, cpus, memory, host_network: network == "host" }))
}

impl Engine {
    /// The engine's global flags: state kept in the run's directory, cgroupfs (no systemd
    /// needed), and the runtime with its flags.
    fn global_args(&self, run_dir: &Path, net: Net) -> Vec<String> {
        let mut args = Vec::new();
        if self.program == "podman" {
            args.extend([
                format!("--root={}", run_dir.join("podman-root").display()),
                format!("--runroot={}", runroot(run_dir).display()),
                "--cgroup-manager=cgroupfs".into(),
                "--events-backend=file".into(),
            ]);
        }
        if let Some(r) = &self.runtime {
            let mut path = r.path.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| r.name.clone());
            if self.program == "podman" && r.flavour == Flavour::Crun && super::oci::hybrid_cgroups() {
                path = run_dir.join("crun-hybrid").display().to_string();
            }
            args.push(format!("--runtime={path}"));
            let mut flags: Vec<String> =
                self.runtime_args.iter().map(|a| a.trim_start_matches('-').to_string()).collect();
            if r.flavour == Flavour::Runsc {
                if !flags.iter().any(|f| f.starts_with("network")) {
                    flags.push(format!("network={}", net.runsc_mode()));
                }
                if !flags.iter().any(|f| f.starts_with("overlay")) {
                    flags.push("overlay2=none".into());
                }
                // runsc keeps an empty network namespace mounted in its state directory: in
                // the run's, it is unmounted with it rather than left in runsc's /run/runsc.
                if !flags.iter().any(|f| f.split('=').next() == Some("root")) {
                    flags.push(format!("root={}", runroot(run_dir).join("runsc").display()));
                }
            }
            // docker takes runtime flags from its daemon's configuration, not per container.
            if self.program == "podman" {
                args.extend(flags.into_iter().map(|f| format!("--runtime-flag={f}")));
            }
        }
        args
    }
}

impl Engine {
    /// The engine's `run` of `args` in a fresh container (root, volume and agent mounted, the
    /// container recorded for deletion), and the token that marks its processes.
    fn command(
        &self,
        ledger: &crate::ledger::Ledger,
        run_dir: &Path,
        contents: &Contents,
    ) -> Result<(Command, String)> {
        let (volume, network, memory, args) = (contents.volume, contents.network, contents.memory, contents.args);
        let netns_file = network.and_then(NetPath::netns_file);
        let net = Net::of(self.host_network, network, &netns_file);
        if let Some(r) = self.runtime.as_ref().filter(|r| r.flavour == Flavour::Crun && super::oci::hybrid_cgroups()) {
            write_crun_wrapper(run_dir, r)?;
        }
        let token = ledger.new_process_token();
        let name =
            format!("isobench-{}", run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        if self.program == "podman" {
            ledger.record(Resource::Dir { path: runroot(run_dir) })?;
        }
        let global = self.global_args(run_dir, net);
        let delete = [self.program.to_string()]
            .into_iter()
            .chain(global.iter().cloned())
            .chain(["rm".into(), "-f".into(), name.clone()])
            .collect();
        // podman's --rootfs is a switch: the root's path then stands where an image would.
        let root = match &self.image {
            Some(image) => vec!["--entrypoint=".to_string(), image.clone()],
            None => vec!["--rootfs".to_string(), overlay_of_host_root(ledger, run_dir)?.display().to_string()],
        };
        ledger.record(Resource::Container { delete })?;
        let nofile = hard_limit(nix::sys::resource::Resource::RLIMIT_NOFILE, 1024);
        // crun refuses nproc at the full hard limit here (EPERM); 32768 leaves databases room.
        let nproc = hard_limit(nix::sys::resource::Resource::RLIMIT_NPROC, 4096).min(32768);
        let mut cmd = Command::new(self.program);
        cmd.args(&global).args(["run", "--rm", "-i", "--name", &name]);
        cmd.arg(match net {
            Net::Host => "--network=host".to_string(),
            Net::Namespace(file) => format!("--network=ns:{}", file.display()),
            Net::None => "--network=none".to_string(),
        });
        cmd.args([format!("--ulimit=nofile={nofile}:{nofile}"), format!("--ulimit=nproc={nproc}:{nproc}")]);
        match volume {
            Some(v) if v.raw => {
                let access = if v.read_only { "r" } else { "rw" };
                cmd.arg(format!("--device={}:{DEVICE_PATH}:{access}", v.path.display()));
            }
            Some(v) => {
                cmd.arg(format!("--volume={}:{DATA_PATH}", v.path.display()));
            }
            None => {}
        }
        cmd.arg(format!("--volume={}:{AGENT_PATH}:ro", agent_binary()?.display()));
        // notmpcopyup: the root's /tmp is the host's, and copying it (sockets included) fails.
        cmd.args(["--tmpfs=/tmp:rw,mode=1777,notmpcopyup", &format!("--env={}={token}", sys::TOKEN_VAR)]);
        if let Some(c) = self.cpus {
            cmd.arg(format!("--cpus={c}"));
        }
        if let Some(set) = contents.cpuset {
            cmd.arg(format!("--cpuset-cpus={set}"));
        }
        if let Some(m) = memory {
            cmd.arg(format!("--memory={m}"));
        }
        if let Some(group) = contents.cpu_group {
            // The container's cgroup (and conmon's, with cgroupfs) below the sandbox's.
            cmd.arg(format!("--cgroup-parent={}", group.relative().display()));
        }
        cmd.args(&root).args(args);
        Ok((cmd, token))
    }
}

/// podman's state directory for a run: podman refuses one longer than 50 characters (its
/// sockets live there), so a short name under /run derived from the run's directory.
fn runroot(run_dir: &Path) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    run_dir.hash(&mut h);
    PathBuf::from(format!("/run/isobench-podman-{:012x}", h.finish() & 0xffff_ffff_ffff))
}

/// podman runs a runtime by path: for crun on hybrid cgroups that path is a script doing what
/// the OCI environment does directly (see `oci::Oci::argv`).
fn write_crun_wrapper(run_dir: &Path, crun: &Runtime) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let path = run_dir.join("crun-hybrid");
    let crun = crun.path.as_ref().ok_or_else(|| anyhow::anyhow!("crun is not installed"))?;
    let script = format!(
        "#!/bin/sh\n# crun refuses hybrid cgroups; hide the v2 mount in a private mount namespace.\nexec unshare -m sh -c 'umount /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\"' {} \"$@\"\n",
        crun.display()
    );
    std::fs::write(&path, script)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// The hard limit isobench itself has for `resource`, which a container may have at most:
/// raising it needs CAP_SYS_RESOURCE.
fn hard_limit(resource: nix::sys::resource::Resource, default: u64) -> u64 {
    nix::sys::resource::getrlimit(resource).map(|(_, hard)| hard.min(1 << 20)).unwrap_or(default)
}

impl Environment for Engine {
    fn takes_slices(&self) -> bool {
        true
    }

    fn cpu_count(&self) -> super::CpuCount {
        // conmon leaves the engine's process tree and waits for the container itself: only a
        // cgroup holds the container's processes, where the engine can nest its own in it.
        if sys::CpuGroup::nests_runtimes() { super::CpuCount::Group } else { super::CpuCount::Unknown }
    }

    fn unavailable(&self) -> Option<String> {
        if let Some(why) = crate::sys::needs_root() {
            return Some(why);
        }
        if find_program(self.program).is_none() {
            return Some(format!("{} is not installed", self.program));
        }
        if self.program == "docker" {
            let info = sys::run(
                Command::new("docker").arg("info"),
                sys::Options { timeout: Some(std::time::Duration::from_secs(20)), ..Default::default() },
            );
            match info {
                Ok(f) if f.status.success() => {}
                Ok(f) => {
                    let why = format!("{}{}", f.stdout, f.stderr);
                    let why = why
                        .lines()
                        .find(|l| l.contains("Cannot connect") || l.contains("ERROR"))
                        .unwrap_or("docker info failed")
                        .trim()
                        .to_string();
                    return Some(format!("the docker CLI is installed but no Docker engine answers ({why})"));
                }
                Err(e) => return Some(format!("docker info: {e:#}")),
            }
        }
        self.runtime.as_ref().and_then(|r| if self.program == "podman" { r.missing() } else { None })
    }

    fn is_sandbox(&self) -> bool {
        true
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let version = sys::command_output(self.program, &["--version"]).ok().map(|v| v.trim().to_string());
        let mut d = BTreeMap::from([
            ("env.kind".to_string(), self.program.to_string()),
            (format!("{}.version", self.program), version.unwrap_or_else(|| "unknown".into())),
            (
                "root".into(),
                self.image.clone().map(|i| format!("image {i}")).unwrap_or_else(|| "overlay of the host's /".into()),
            ),
            ("runtime.network".into(), if self.host_network { "host" } else { "none" }.into()),
        ]);
        if let Some(r) = &self.runtime {
            d.insert("runtime.name".into(), r.name.clone());
            d.insert("runtime.version".into(), r.version().unwrap_or_else(|| "unknown".into()));
            if let Some(platform) = r.platform(&self.runtime_args) {
                d.insert("runtime.platform".into(), platform);
            }
            if r.ignores_o_direct() {
                d.insert("runtime.ignores_o_direct".into(), "true".into());
            }
        }
        if let Some(c) = self.cpus {
            d.insert("limit.cpus".into(), c.to_string());
        }
        if let Some(m) = self.memory {
            d.insert("limit.memory".into(), units::fio_size(m));
        }
        d
    }

    fn data_dir(&self, _volume: &Provisioned) -> PathBuf {
        PathBuf::from(DATA_PATH)
    }

    fn raw_target(&self, _volume: &Provisioned) -> crate::volume::RawTarget {
        crate::volume::RawTarget::Device(PathBuf::from(DEVICE_PATH))
    }

    fn no_raw_devices(&self) -> Option<String> {
        self.runtime.as_ref().and_then(Runtime::no_raw_devices)
    }

    fn memory_per_sandbox(&self) -> Option<u64> {
        self.memory
    }

    fn scratch_dir(&self, _run_dir: &Path) -> PathBuf {
        PathBuf::from(SCRATCH_PATH)
    }

    fn preflight(&self, ledger: &crate::ledger::Ledger, run_dir: &Path, _workdir: &Path) -> Result<()> {
        let contents = Contents::smoke(self.memory, &["/bin/true"]);
        let (mut cmd, token) = self.command(ledger, run_dir, &contents)?;
        ledger.record(Resource::Processes { token: token.clone() })?;
        let options = sys::Options {
            token: Some(&token),
            timeout: Some(std::time::Duration::from_secs(120)),
            ..Default::default()
        };
        let finished = sys::run(&mut cmd, options)?;
        if !finished.status.success() {
            anyhow::bail!("{} could not run a container ({}): {}", self.program, finished.status, finished.tail(6));
        }
        Ok(())
    }

    fn reach(&self) -> Result<super::Reach, String> {
        Ok(if self.host_network { super::Reach::Shared } else { super::Reach::Own })
    }

    fn network(&self, ledger: &crate::ledger::Ledger) -> Result<NetPath> {
        if self.host_network { Ok(NetPath::Loopback) } else { crate::net::namespace(ledger) }
    }

    fn run_agent(&self, launch: Launch) -> Result<crate::store::AgentReport> {
        let args = [AGENT_PATH, "agent", "--request", "-"];
        let network = match launch.network {
            _ if self.host_network => "host",
            Some(NetPath::Namespace { .. }) => "namespace",
            _ => "none",
        };
        let memory = launch.memory.or(self.memory);
        let contents = Contents::agent(&launch, memory, &args);
        let (mut cmd, token) = self.command(launch.ledger, launch.run_dir, &contents)?;
        let cpuset = launch.cpuset;
        let mut report = run_agent_process(&mut cmd, launch, &token)?;
        report.setup.insert("runtime.network".into(), network.into());
        Ok(super::oci::with_limit_notes(report, self.cpus, cpuset, memory))
    }
}
