//! OCI runtimes driven directly: runc, crun, gVisor's runsc, Kata's runtime, or any binary
//! that speaks the runc command line. isobench writes the bundle itself: the root is an overlay
//! of the host's `/` (read-only), the volume under test is bind-mounted at /data, the agent at
//! /.isobench/isobench, /tmp is a tmpfs, and the network is off unless asked for.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::rootfs::{AGENT_PATH, DATA_PATH, DEVICE_PATH, SCRATCH_PATH, overlay_of_host_root};
use super::{Environment, Kind, Launch, agent_binary, host::run_agent_process};
use crate::ledger::{Ledger, Resource};
use crate::net::NetPath;
use crate::syntax::{Fields, SuiteError};
use crate::sys::{self, find_program};
use crate::volume::Provisioned;
use figures::units;

mod spec;

use spec::{DeviceNode, SpecInput, spec};

pub const KIND: Kind = Kind { name: "oci", parse };

/// Where `scripts/setup.sh` installs tools it builds (a current runsc).
pub const TOOL_DIR: &str = "/usr/local/lib/isobench/bin";

/// Which runtime a binary is, by its name: each has its quirks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    Runc,
    Crun,
    Runsc,
    Kata,
    Other,
}

/// A runtime as the suite names it, resolved to a binary when one exists here.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub name: String,
    pub path: Option<PathBuf>,
    pub flavour: Flavour,
}

impl Runtime {
    /// "runsc" finds isobench's own build first (a current gVisor), then PATH; a path is taken
    /// as it is.
    pub fn resolve(name: &str) -> Runtime {
        let path = if name.contains('/') {
            find_program(name)
        } else {
            find_program(&format!("{TOOL_DIR}/{name}")).or_else(|| find_program(name))
        };
        let base = Path::new(name).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let flavour = if base.contains("runsc") {
            Flavour::Runsc
        } else if base.contains("crun") {
            Flavour::Crun
        } else if base.contains("kata") {
            Flavour::Kata
        } else if base.contains("runc") {
            Flavour::Runc
        } else {
            Flavour::Other
        };
        Runtime { name: name.to_string(), path, flavour }
    }

    /// gVisor's platform (systrap, ptrace, kvm): `--platform` among `args`, else the default of
    /// this build, as `runsc flags` lists it. None for other runtimes.
    pub fn platform(&self, args: &[String]) -> Option<String> {
        if self.flavour != Flavour::Runsc {
            return None;
        }
        let given = args.iter().enumerate().find_map(|(i, a)| {
            let flag = a.trim_start_matches('-');
            match flag.strip_prefix("platform") {
                Some(rest) if rest.starts_with('=') => Some(rest[1..].to_string()),
                Some("") => args.get(i + 1).cloned(),
                _ => None,
            }
        });
        given.or_else(|| default_platform(&self.flags()?))
    }

    /// `runsc flags`: every flag with its help, as this build prints them.
    pub fn flags(&self) -> Option<String> {
        // Go's flag package prints the listing on stderr.
        let options = sys::Options {
            timeout: Some(std::time::Duration::from_secs(30)),
            ignore_interrupt: true,
            ..Default::default()
        };
        let listing = sys::run(std::process::Command::new(self.path.as_ref()?).arg("flags"), options).ok()?;
        Some(format!("{}{}", listing.stdout, listing.stderr))
    }

    pub fn version(&self) -> Option<String> {
        let path = self.path.as_ref()?;
        let out = sys::command_output(&path.to_string_lossy(), &["--version"]).ok()?;
        out.lines().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
    }

    /// Why this runtime cannot be used here, if it cannot.
    pub fn missing(&self) -> Option<String> {
        self.path.is_none().then(|| match self.flavour {
            Flavour::Runsc => {
                format!("{} is not installed (scripts/setup.sh builds a current runsc into {TOOL_DIR})", self.name)
            }
            Flavour::Kata => format!(
                "{} is not installed; Kata needs its runtime, a guest kernel and image, and hardware virtualisation",
                self.name
            ),
            // Debian packages runc and crun under their own names; any other runtime is the user's.
            _ if ["runc", "crun"].contains(&self.name.as_str()) => {
                format!("{0} is not installed (apt-get install {0})", self.name)
            }
            _ if self.name.contains('/') => format!("{} is not an executable runtime", self.name),
            _ => format!("no runtime named {} is on PATH: install it, or give runtime = its path", self.name),
        })
    }

    /// gVisor has no block devices: a device node in the spec fails to open (ENXIO), a
    /// bind-mounted one appears as an empty read-only file.
    pub fn no_raw_devices(&self) -> Option<String> {
        (self.flavour == Flavour::Runsc).then(|| {
            "gVisor has no block devices, so a raw volume (fs = \"none\") cannot be handed to runsc; measure a filesystem on the device instead".to_string()
        })
    }

    /// gVisor opens files without O_DIRECT even when asked: its "direct" I/O is buffered.
    pub fn ignores_o_direct(&self) -> bool {
        self.flavour == Flavour::Runsc
    }
}

pub struct Oci {
    runtime: Runtime,
    runtime_args: Vec<String>,
    /// gVisor's knobs the suite set (`platform`, `directfs`, `overlay`), as runsc flags.
    gvisor: Vec<(&'static str, String)>,
    cpus: Option<f64>,
    memory: Option<u64>,
    host_network: bool,
    /// How long the runtime may take to run a first container (the preflight's `/bin/true`).
    start_timeout: std::time::Duration,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    let name = f.required_str("runtime")?;
    let runtime = Runtime::resolve(&name);
    if name.contains('/') && runtime.path.is_none() {
        return Err(f.error_at("runtime", format!("{name} does not exist or is not executable")));
    }
    let runtime_args = f.str_list("runtime_args")?.unwrap_or_default();
    let cpus = f.float("cpus")?;
    if cpus.is_some_and(|c| c <= 0.0) {
        return Err(f.error_at("cpus", "must be more than 0"));
    }
    let here = crate::sys::CpuSet::available().len();
    if let Some(c) = cpus.filter(|c| *c > here as f64) {
        return Err(f.error_at("cpus", format!("asks for {c} CPUs; this machine gives isobench {here}")));
    }
    let memory = f.size("memory")?;
    let network = f.choice("network", &["none", "host"])?.unwrap_or_else(|| "none".into());
    let start_timeout = f.timeout("start_timeout")?.unwrap_or(std::time::Duration::from_secs(120));
    let gvisor = gvisor_knobs(f, &runtime)?;
    f.finish()?;
    Ok(Box::new(Oci { runtime, runtime_args, gvisor, cpus, memory, host_network: network == "host", start_timeout }))
}

/// gVisor's knobs as env keys: `platform` (--platform), `directfs` (--directfs), `overlay`
/// (--overlay2), each checked against this runsc's own flag listing, whose words a refusal
/// quotes.
fn gvisor_knobs(f: &mut Fields, runtime: &Runtime) -> Result<Vec<(&'static str, String)>, SuiteError> {
    let mut knobs = Vec::new();
    if let Some(platform) = f.str("platform")? {
        knobs.push(("platform", "platform", platform));
    }
    if let Some(directfs) = f.bool("directfs")? {
        knobs.push(("directfs", "directfs", directfs.to_string()));
    }
    if let Some(overlay) = f.str("overlay")? {
        knobs.push(("overlay", "overlay2", overlay));
    }
    if knobs.is_empty() {
        return Ok(Vec::new());
    }
    if runtime.flavour != Flavour::Runsc {
        return Err(
            f.error_at(knobs[0].0, format!("is one of gVisor's knobs; runtime \"{}\" is not runsc", runtime.name))
        );
    }
    if let Some(listing) = runtime.flags() {
        for (key, flag, value) in &knobs {
            let Some(help) = flag_help(&listing, flag) else {
                return Err(f.error_at(key, format!("this runsc ({}) has no --{flag} flag", runtime.name)));
            };
            if *key == "platform" && !help.contains(value.as_str()) {
                return Err(
                    f.error_at(key, format!("\"{value}\" is not a platform this runsc knows; its help says: {help}"))
                );
            }
        }
    }
    Ok(knobs.into_iter().map(|(_, flag, value)| (flag, value)).collect())
}

/// A flag's help text in runsc's `flags` listing ("  -platform string" then its indented lines).
fn flag_help(listing: &str, flag: &str) -> Option<String> {
    let mut lines = listing.lines().skip_while(|l| l.split_whitespace().next() != Some(&format!("-{flag}")));
    lines.next()?;
    let help: Vec<&str> = lines.take_while(|l| l.starts_with("    ")).map(str::trim).collect();
    Some(help.join(" "))
}

/// What one container is given: the volume, the network path, a memory limit, the command.
pub(super) struct Contents<'a> {
    pub volume: Option<&'a Provisioned>,
    pub network: Option<&'a NetPath>,
    pub memory: Option<u64>,
    pub args: &'a [&'a str],
    /// Where the container's processes are counted (`CpuCount::Group`).
    pub cpu_group: Option<&'a sys::CpuGroup>,
    /// The CPUs its processes run on.
    pub cpuset: Option<&'a sys::CpuSet>,
}

impl<'a> Contents<'a> {
    /// A run's agent: the launch's volume, network, cgroup and CPUs, the memory limit given.
    pub fn agent(launch: &Launch<'a>, memory: Option<u64>, args: &'a [&'a str]) -> Contents<'a> {
        Contents {
            volume: Some(launch.volume),
            network: launch.network,
            memory,
            args,
            cpu_group: launch.cpu_group,
            cpuset: launch.cpuset,
        }
    }

    /// A first container that runs `args` with nothing of a run's.
    pub fn smoke(memory: Option<u64>, args: &'a [&'a str]) -> Contents<'a> {
        Contents { volume: None, network: None, memory, args, cpu_group: None, cpuset: None }
    }
}

/// A container's network: the host's, a namespace isobench made (with a veth pair to the
/// host), or none at all.
#[derive(Clone, Copy)]
pub(super) enum Net<'a> {
    Host,
    Namespace(&'a Path),
    None,
}

impl<'a> Net<'a> {
    /// The network a container gets: the host's when the suite asks for it, the namespace the
    /// workload's network path made, or none.
    pub(super) fn of(host_network: bool, path: Option<&'a NetPath>, netns_file: &'a Option<PathBuf>) -> Net<'a> {
        match (host_network, path, netns_file) {
            (true, _, _) => Net::Host,
            (false, Some(_), Some(file)) => Net::Namespace(file),
            _ => Net::None,
        }
    }

    /// runsc's --network flag: gVisor's own netstack over the namespace's interface, as
    /// gVisor users run it, or the host's stack, or nothing.
    pub(super) fn runsc_mode(self) -> &'static str {
        match self {
            Net::Host => "host",
            Net::Namespace(_) => "sandbox",
            Net::None => "none",
        }
    }
}

impl Oci {
    /// The runtime's global flags: the user's, plus what isobench needs of runsc (its network
    /// mode, and no overlay over /data, which would keep writes in sandbox memory).
    fn global_args(&self, state_root: &Path, net: Net) -> Vec<String> {
        let mut args = self.runtime_args.clone();
        if self.runtime.flavour == Flavour::Runsc {
            for (flag, value) in &self.gvisor {
                args.push(format!("--{flag}={value}"));
            }
            let given = |args: &[String], flag: &str| args.iter().any(|a| a.starts_with(flag));
            if !given(&args, "--network") {
                args.push(format!("--network={}", net.runsc_mode()));
            }
            if !given(&args, "--overlay") {
                args.push("--overlay2=none".into());
            }
        }
        args.extend(["--root".to_string(), state_root.display().to_string()]);
        args
    }

    /// The runtime's flags and network as one container gets them, for the run's record.
    fn network_facts(&self, net: Net) -> BTreeMap<String, String> {
        let args = self.global_args(Path::new("STATE"), net);
        let shown: Vec<&str> = args.iter().map(String::as_str).filter(|a| *a != "--root" && *a != "STATE").collect();
        let network = match net {
            Net::Host => "host",
            Net::Namespace(_) => "namespace",
            Net::None => "none",
        };
        BTreeMap::from([("runtime.args".to_string(), shown.join(" ")), ("runtime.network".into(), network.into())])
    }

    /// The runtime's argv up to its subcommand: through crun's workaround where cgroups are
    /// hybrid, then the global flags.
    fn argv(&self, state_root: &Path, net: Net) -> Result<Vec<String>> {
        let path = self
            .runtime
            .path
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("{}", self.runtime.missing().unwrap_or_default()))?;
        let mut argv = Vec::new();
        if self.runtime.flavour == Flavour::Crun && hybrid_cgroups() {
            // crun refuses v1+v2 "hybrid" hierarchies; in a private mount namespace with the
            // v2 mount hidden it sees plain v1, which it supports.
            argv.extend(
                ["unshare", "-m", "sh", "-c", "umount /sys/fs/cgroup/unified 2>/dev/null; exec \"$0\" \"$@\""]
                    .map(String::from),
            );
        }
        argv.push(path.display().to_string());
        argv.extend(self.global_args(state_root, net));
        Ok(argv)
    }

    /// Writes the bundle for one container and records everything it mounts.
    fn bundle(
        &self,
        ledger: &Ledger,
        run_dir: &Path,
        contents: &Contents,
        net: Net,
        token: &str,
        id: &str,
    ) -> Result<PathBuf> {
        let rootfs = overlay_of_host_root(ledger, run_dir)?;
        let bundle = run_dir.join("bundle");
        std::fs::create_dir_all(&bundle)?;
        let volume = contents.volume;
        let device = volume.filter(|v| v.raw).map(DeviceNode::of).transpose()?;
        let spec = spec(&SpecInput {
            rootfs: &rootfs,
            agent: &agent_binary()?,
            volume: volume.filter(|v| !v.raw).map(|v| v.path.as_path()),
            device,
            args: contents.args,
            token,
            cpus: self.cpus,
            cpuset: contents.cpuset,
            memory: contents.memory,
            net,
            // Without one, each runtime moves the container to a cgroup of its own, out of
            // isobench's.
            cgroups_path: contents.cpu_group.map(|group| group.runtime_path(id)),
        });
        std::fs::write(bundle.join("config.json"), serde_json::to_vec_pretty(&spec)?)?;
        Ok(bundle)
    }

    /// Everything for one container (bundle, state directory, id, all recorded first) and the
    /// command that runs it, with the token that marks its processes.
    fn prepare(&self, ledger: &Ledger, run_dir: &Path, contents: &Contents) -> Result<(Command, String)> {
        let state_root = run_dir.join("runtime-state");
        let netns_file = contents.network.and_then(NetPath::netns_file);
        let net = Net::of(self.host_network, contents.network, &netns_file);
        let argv = self.argv(&state_root, net)?;
        let token = ledger.new_process_token();
        let id =
            format!("isobench-{}", run_dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
        if contents.cpu_group.is_none() {
            // The runtime's own default, which a container that failed to start leaves behind.
            ledger.record(Resource::Cgroup { path: PathBuf::from(format!("/{id}")) })?;
        }
        let bundle = self.bundle(ledger, run_dir, contents, net, &token, &id)?;
        std::fs::create_dir_all(&state_root)?;
        let delete = argv.iter().cloned().chain(["delete".into(), "--force".into(), id.clone()]).collect();
        ledger.record(Resource::Container { delete })?;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).args(["run", "--bundle", &bundle.to_string_lossy(), &id]);
        Ok((cmd, token))
    }

    /// Starts `/bin/true` in a container: whether this runtime, with these arguments, works here.
    pub fn smoke_test(&self, ledger: &Ledger, run_dir: &Path) -> Result<()> {
        let contents = Contents::smoke(self.memory, &["/bin/true"]);
        let (mut cmd, token) = self.prepare(ledger, run_dir, &contents)?;
        ledger.record(Resource::Processes { token: token.clone() })?;
        let options = sys::Options { token: Some(&token), timeout: Some(self.start_timeout), ..Default::default() };
        let finished = sys::run(&mut cmd, options).with_context(|| {
            format!("running a first container with {} (start_timeout = {:?})", self.runtime.name, self.start_timeout)
        })?;
        if !finished.status.success() {
            bail!("{} could not run a container ({}): {}", self.runtime.name, finished.status, finished.tail(6));
        }
        Ok(())
    }
}

/// The default of `-platform` in `runsc flags`' listing: `(default "systrap")` on the line after.
fn default_platform(flags: &str) -> Option<String> {
    let mut lines = flags.lines().skip_while(|l| l.split_whitespace().next() != Some("-platform"));
    let help = lines.nth(1)?;
    let default = help.rsplit_once("(default \"")?.1;
    default.split_once('"').map(|(name, _)| name.to_string())
}

impl Environment for Oci {
    fn takes_slices(&self) -> bool {
        true
    }

    fn unavailable(&self) -> Option<String> {
        crate::sys::needs_root().or_else(|| self.runtime.missing())
    }

    /// gVisor's metrics (`runsc export-metrics`), each summed over its labels.
    fn runtime_counters(&self, run_dir: &Path) -> Option<Result<BTreeMap<String, f64>>> {
        if self.runtime.flavour != Flavour::Runsc {
            return None;
        }
        let path = self.runtime.path.as_ref()?;
        let id = format!("isobench-{}", run_dir.file_name()?.to_string_lossy());
        let root = run_dir.join("runtime-state");
        let args = ["--root", &root.to_string_lossy(), "export-metrics", &id].map(String::from);
        Some(
            sys::command_output(&path.to_string_lossy(), &args.iter().map(String::as_str).collect::<Vec<_>>())
                .map(|text| crate::sys::prometheus_counters(&text)),
        )
    }

    fn is_sandbox(&self) -> bool {
        true
    }

    fn describe(&self) -> BTreeMap<String, String> {
        let mut d = BTreeMap::from([
            ("env.kind".to_string(), "oci".to_string()),
            ("runtime.name".into(), self.runtime.name.clone()),
            ("runtime.version".into(), self.runtime.version().unwrap_or_else(|| "unknown".into())),
        ]);
        let flags: Vec<String> =
            self.gvisor.iter().map(|(f, v)| format!("--{f}={v}")).chain(self.runtime_args.clone()).collect();
        if let Some(platform) = self.runtime.platform(&flags) {
            d.insert("runtime.platform".into(), platform);
        }
        // The knobs the suite turned, named in the verdict beside the platform.
        let turned: Vec<String> = self
            .gvisor
            .iter()
            .filter(|(flag, _)| *flag != "platform")
            .map(|(flag, value)| format!("{flag} {value}"))
            .chain(self.host_network.then(|| "network host".to_string()))
            .collect();
        if self.runtime.flavour == Flavour::Runsc && !turned.is_empty() {
            d.insert("runtime.variant".into(), turned.join(", "));
        }
        d.extend(self.network_facts(Net::of(self.host_network, None, &None)));
        if let Some(p) = &self.runtime.path {
            d.insert("runtime.path".into(), p.display().to_string());
        }
        if self.runtime.ignores_o_direct() {
            d.insert("runtime.ignores_o_direct".into(), "true".into());
        }
        if self.runtime.flavour == Flavour::Crun && hybrid_cgroups() {
            d.insert(
                "runtime.cgroup_workaround".into(),
                "private mount namespace without /sys/fs/cgroup/unified".into(),
            );
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
        self.runtime.no_raw_devices()
    }

    fn cpu_count(&self) -> super::CpuCount {
        // gVisor's systrap stubs run the workload's code and are reaped by no process
        // isobench waits for: only a cgroup counts them.
        match (sys::CpuGroup::nests_runtimes(), self.runtime.flavour) {
            (true, Flavour::Runsc) => super::CpuCount::GroupSplitByTree,
            (true, _) => super::CpuCount::Group,
            (false, _) => super::CpuCount::Reaped,
        }
    }

    fn memory_per_sandbox(&self) -> Option<u64> {
        self.memory
    }

    fn scratch_dir(&self, _run_dir: &Path) -> PathBuf {
        PathBuf::from(SCRATCH_PATH)
    }

    fn preflight(&self, ledger: &Ledger, run_dir: &Path, _workdir: &Path) -> Result<()> {
        self.smoke_test(ledger, run_dir)
    }

    fn reach(&self) -> Result<super::Reach, String> {
        Ok(if self.host_network { super::Reach::Shared } else { super::Reach::Own })
    }

    fn network(&self, ledger: &Ledger) -> Result<NetPath> {
        if self.host_network { Ok(NetPath::Loopback) } else { crate::net::namespace(ledger) }
    }

    fn run_agent(&self, launch: Launch) -> Result<crate::store::AgentReport> {
        let args = [AGENT_PATH, "agent", "--request", "-"];
        let netns_file = launch.network.and_then(NetPath::netns_file);
        let used = self.network_facts(Net::of(self.host_network, launch.network, &netns_file));
        let memory = launch.memory.or(self.memory);
        let contents = Contents::agent(&launch, memory, &args);
        let (mut cmd, token) = self.prepare(launch.ledger, launch.run_dir, &contents)?;
        let cpuset = launch.cpuset;
        let mut report = run_agent_process(&mut cmd, launch, &token)?;
        report.setup.extend(used);
        Ok(with_limit_notes(report, self.cpus, cpuset, memory))
    }
}

/// Requested limits the sandbox did not see are said, never silently dropped.
pub(super) fn with_limit_notes(
    mut report: crate::store::AgentReport,
    cpus: Option<f64>,
    cpuset: Option<&sys::CpuSet>,
    memory: Option<u64>,
) -> crate::store::AgentReport {
    if let Some(set) = cpuset
        && let Some(seen) = report.facts.get("cpus").and_then(|v| v.parse::<usize>().ok())
        && seen > set.len()
    {
        report.notes.push(format!(
            "cpuset = \"{set}\" was requested but the sandbox saw {seen} CPUs: the pinning was not applied"
        ));
    }
    if let Some(limit) = memory {
        match report.facts.get("memory.limit_kib").and_then(|v| v.parse::<u64>().ok()) {
            Some(seen) if seen * 1024 <= limit + 4096 => {}
            seen => report.notes.push(format!(
                "memory = {} was requested but the sandbox saw {}: the limit was not applied",
                units::fio_size(limit),
                seen.map(|k| units::human(k as f64 * 1024.0, "B")).unwrap_or_else(|| "no limit".into())
            )),
        }
    }
    if let Some(limit) = cpus {
        match report.facts.get("cpu.limit").and_then(|v| v.parse::<f64>().ok()) {
            Some(seen) if (seen - limit).abs() < 0.01 => {}
            seen => report.notes.push(format!(
                "cpus = {limit} was requested but the sandbox saw {}: the limit was not applied",
                seen.map(|c| format!("{c} CPUs")).unwrap_or_else(|| "no CPU quota".into())
            )),
        }
    }
    report
}

/// cgroup v1 controllers with the v2 hierarchy also mounted at /sys/fs/cgroup/unified.
pub fn hybrid_cgroups() -> bool {
    crate::ledger::is_mounted(Path::new("/sys/fs/cgroup/unified"))
}

/// Runs a container's delete command (see `Resource::Container`); a container that does not
/// exist is already deleted.
pub fn delete_container(delete: &[String]) -> Result<()> {
    let finished = sys::run(
        Command::new(&delete[0]).args(&delete[1..]),
        sys::Options {
            timeout: Some(std::time::Duration::from_secs(60)),
            ignore_interrupt: true,
            ..Default::default()
        },
    )?;
    let said = format!("{}{}", finished.stdout, finished.stderr).to_lowercase();
    let gone = ["does not exist", "not found", "no such", "no container"].iter().any(|p| said.contains(p));
    if finished.status.success() || gone {
        return Ok(());
    }
    bail!("`{}` failed: {}", delete.join(" "), finished.tail(4))
}

/// Checks that the spec isobench writes is what the tests rely on.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gvisors_platform_is_the_one_asked_for_or_the_builds_default() {
        let runsc = Runtime { name: "runsc".into(), path: None, flavour: Flavour::Runsc };
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(runsc.platform(&args(&["--platform=kvm"])).as_deref(), Some("kvm"));
        assert_eq!(runsc.platform(&args(&["--debug", "-platform", "ptrace"])).as_deref(), Some("ptrace"));
        let runc = Runtime { name: "runc".into(), path: None, flavour: Flavour::Runc };
        assert_eq!(runc.platform(&args(&["--platform=kvm"])), None, "only gVisor has platforms");
        // As runsc flags prints them (a build of 2026, and Debian's of 2022).
        let listing = |default: &str| {
            format!(
                "  -overlay2 string\n    \toverlay (default \"root:self\")\n  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"{default}\")\n  -platform_device_path string\n"
            )
        };
        assert_eq!(default_platform(&listing("systrap")).as_deref(), Some("systrap"));
        assert_eq!(default_platform(&listing("ptrace")).as_deref(), Some("ptrace"));
        assert_eq!(default_platform("no such flag"), None);
    }

    #[test]
    fn runtimes_are_recognised_by_name() {
        assert_eq!(Runtime::resolve("/usr/bin/runsc").flavour, Flavour::Runsc);
        assert_eq!(Runtime::resolve("crun").flavour, Flavour::Crun);
        assert_eq!(Runtime::resolve("kata-runtime").flavour, Flavour::Kata);
        assert!(Runtime::resolve("/nonexistent/runc").path.is_none());
        assert!(Runtime::resolve("kata-runtime-absent").missing().unwrap().contains("is not installed"));
    }
}
