//! One sandbox of a cell: its network path and peer when the workload talks to one, the agent
//! launched through the environment, and the volume's replicas checked after it.

use std::path::Path;

use anyhow::Result;

use super::collect::HostCounters;
use crate::agent;
use crate::env::{Launch, StartGate};
use crate::ledger::Ledger;
use crate::volume::Provisioned;
use crate::workload::Spec;

/// Where sandboxes of one cell run: its environment, how a VM attaches the volume, and what
/// every sandbox records into.
pub struct Place<'a> {
    pub env: &'a dyn crate::env::Environment,
    pub attach: Option<&'a crate::env::vm::attach::Attach>,
    pub ledger: &'a Ledger,
    pub workdir: &'a Path,
    /// The suite's `collect`: record what the sandbox used (`sys.` samples).
    pub collect: bool,
    /// The suite's `attribute`: sample where the sandbox's CPU goes, by part.
    pub attribute: bool,
    /// The host CPUs its sandboxes, and a served cell's load generator, are pinned to.
    pub pins: &'a crate::suite::CpuPins,
}

impl Place<'_> {
    /// Whether volumes must be handed to this environment as unmounted block devices.
    pub fn wants_block(&self) -> bool {
        self.env.wants_block(self.attach)
    }

    /// Whether a run's CPU is sampled by part (and a JVM it runs names its compiled code).
    pub fn samples_parts(&self) -> bool {
        self.collect && self.attribute
    }

    /// The host's figures of a run, where the suite collects them: started before its sandbox
    /// (or a served cell's sandboxes) starts, finished once it is gone, alike for a plain run, a
    /// density run's sandboxes and a served cell. `alone`: no other sandbox of isobench's runs
    /// meanwhile.
    pub fn host_counters(&self, volume: &Provisioned, run_dir: &Path, alone: bool) -> Option<HostCounters> {
        let parts = self.samples_parts().then(|| run_dir.join("cpu-parts.perf"));
        self.collect.then(|| HostCounters::start(volume, alone, self.env.cpu_count(), self.ledger, parts.as_deref()))
    }

    /// Runs the workload in one sandbox on `volume`; first its network path to the host and
    /// the peer there, when the workload talks to one. With a `gate`, the sandbox is one of
    /// several started together (density); `memory` replaces its environment's limit.
    pub fn run(
        &self,
        spec: &Spec,
        volume: &Provisioned,
        run_dir: &Path,
        gate: Option<&dyn StartGate>,
        memory: Option<u64>,
    ) -> Result<crate::store::AgentReport> {
        let env = self.env;
        let mut spec = spec.clone();
        let network = match (spec.workload().needs_network(), &spec) {
            (false, _) => None,
            // The syscall probes' tcp round trip is one probe of many: without a path it is left out.
            (true, Spec::Syscall(_)) => env.network(self.ledger).ok(),
            (true, _) => Some(env.network(self.ledger)?),
        };
        let server = match (&network, &mut spec) {
            (Some(path), Spec::Network(n)) => {
                let server = crate::workload::network::Iperf3Peer::start(self.ledger, path.host_address(), run_dir)?;
                n.server = Some((path.host_address_inside(), server.port));
                Some(server)
            }
            _ => None,
        };
        // The tcp probe's peer: a thread of this process, gone when the run is.
        let _echo = match (&network, &mut spec) {
            (Some(path), Spec::Syscall(s)) => {
                let echo = crate::workload::syscall::EchoPeer::start(path.host_address())?;
                s.peer = Some((path.host_address_inside(), echo.port));
                Some(echo)
            }
            _ => None,
        };
        // A JVM the command runs names its compiled code as it exits, for the sampled functions.
        if let Spec::Command(c) = &mut spec {
            c.jit_map = self.samples_parts();
        }
        let request = agent::Request {
            workload: spec.clone(),
            data_dir: if volume.raw { env.scratch_dir(run_dir) } else { env.data_dir(volume) },
            raw: volume.raw.then(|| env.raw_target(volume)),
            read_only: volume.read_only,
            scratch_dir: env.scratch_dir(run_dir),
            serve: None,
            against: None,
            barrier: gate.is_some(),
            slices: gate.map_or(0, |g| g.slices()),
            collect: self.collect,
        };
        let mut timeout = spec.workload().timeout();
        if gate.is_some() {
            timeout += crate::runner::density::START_TIMEOUT;
        }
        let counters = self.host_counters(volume, run_dir, gate.is_none());
        let mut report = env.run_agent(Launch {
            request: &request,
            volume,
            run_dir,
            timeout,
            ledger: self.ledger,
            workdir: self.workdir,
            attach: self.attach,
            forward: &[],
            network: network.as_ref(),
            gate,
            memory,
            cpu_group: counters.as_ref().and_then(HostCounters::cpu_group),
            cpuset: self.pins.sandbox.as_ref(),
        })?;
        if let Some(counters) = counters {
            counters.finish(&mut report);
        }
        if let Some(path) = &network {
            report.setup.extend(path.describe());
        }
        volume.check_replicas(&mut report.setup, &mut report.notes);
        if let Some(raw) = server.and_then(|s| s.finish()) {
            report.raw.push(raw);
        }
        Ok(report)
    }
}
