//! The bare host: the baseline every sandbox is compared with. The agent runs as a plain child
//! process, and sees the volume at its mount point.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, bail};

use super::{Environment, Kind, Launch, agent_binary};
use crate::agent;
use crate::ledger::Resource;
use crate::syntax::{Fields, SuiteError};
use crate::sys;
use crate::volume::Provisioned;

pub const KIND: Kind = Kind { name: "host", parse };

pub struct Host;

fn parse(f: &mut Fields) -> Result<Box<dyn Environment>, SuiteError> {
    f.finish()?;
    Ok(Box::new(Host))
}

impl Environment for Host {
    fn takes_slices(&self) -> bool {
        true
    }

    fn unavailable(&self) -> Option<String> {
        None
    }

    fn is_sandbox(&self) -> bool {
        false
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("env.kind".to_string(), "host".to_string())])
    }

    fn data_dir(&self, volume: &Provisioned) -> PathBuf {
        volume.path.clone()
    }

    fn scratch_dir(&self, run_dir: &Path) -> PathBuf {
        run_dir.join("scratch")
    }

    fn reach(&self) -> Result<super::Reach, String> {
        Ok(super::Reach::Shared)
    }

    fn speaks_nbd(&self) -> bool {
        true
    }

    fn network(&self, _ledger: &crate::ledger::Ledger) -> Result<crate::net::NetPath> {
        Ok(crate::net::NetPath::Loopback)
    }

    fn cpu_count(&self) -> super::CpuCount {
        super::CpuCount::Group
    }

    fn run_agent(&self, launch: Launch) -> Result<crate::store::AgentReport> {
        super::rootfs::scratch_in_memory(launch.ledger, &launch.request.scratch_dir)?;
        let token = launch.ledger.new_process_token();
        run_agent_process(Command::new(agent_binary()?).args(["agent", "--request", "-"]), launch, &token)
    }
}

/// Runs an agent command that takes the request on stdin and prints its report on stdout:
/// the host directly, and any wrapper that passes stdio through (runtimes, `unshare`, …).
/// `token` marks every process it starts, for teardown and `isobench cleanup`.
pub fn run_agent_process(cmd: &mut Command, launch: Launch, token: &str) -> Result<crate::store::AgentReport> {
    launch.ledger.record(Resource::Processes { token: token.to_string() })?;
    if let Some(group) = launch.cpu_group {
        group.start_in(cmd);
    }
    if let Some(cpus) = launch.cpuset {
        cpus.start_in(cmd);
    }
    let gate = launch.gate;
    let mut on_spawn = |pid: u32| gate.iter().for_each(|g| g.spawned(pid));
    let mut on_stderr_line = |line: &str| {
        gate.iter().for_each(|g| g.saw_line(line));
        sys::progress::relay(line);
    };
    let mut request = serde_json::to_vec(launch.request)?;
    request.push(b'\n');
    let finished = sys::run(
        cmd,
        sys::Options {
            token: Some(token),
            stdin: Some(request),
            stdin_then: gate.as_ref().map(|g| g.go()),
            on_spawn: Some(&mut on_spawn),
            on_stderr_line: Some(&mut on_stderr_line),
            timeout: Some(launch.timeout),
            ..Default::default()
        },
    )?;
    match agent::parse_output(&finished.stdout) {
        Some(report) => Ok(report),
        None => {
            let tail = finished.tail(15);
            let last = tail.lines().last().unwrap_or("it printed nothing");
            bail!("the agent sent no report ({}): {last}\n{tail}", finished.status)
        }
    }
}
