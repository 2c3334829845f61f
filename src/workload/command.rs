//! `kind = "command"`: a program of the user's own, run inside the environment as it is and timed
//! from its start to its exit, in the volume under test as its working directory. `ops` says how
//! many operations one run does, so that its CPU per operation, and the why's parts and
//! functions, compare like for like. A JVM the command runs (or `exec`s into) writes the map of
//! its compiled code as it exits when the run's CPU is sampled, so that its methods are named.

use std::collections::BTreeMap;
use std::process::Command as Process;
use std::time::Duration;

use anyhow::{Result, bail};
use serde::{Deserialize, Serialize};

use super::{Kind, Output, ParseContext, RunContext, Spec, Workload};
use crate::store::{RawFile, Sample};
use crate::syntax::{Fields, SuiteError};
use crate::sys;

pub const KIND: Kind = Kind { name: "command", list_keys: &["command"], parse, capacity: Err(super::NO_LATENCY) };

/// How much of the command's output a run keeps.
const OUTPUT_KEPT: usize = 64 * 1024;

#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct Command {
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
    /// The operations one run does.
    pub ops: u64,
    /// How long a run may take before it is stopped.
    pub timeout_s: u64,
    /// Set by the runner when the run's CPU is sampled by part: a JVM then writes its JIT map.
    #[serde(default)]
    pub jit_map: bool,
}

fn parse(f: &mut Fields, _ctx: &ParseContext) -> Result<Spec, SuiteError> {
    let command = f.str_list("command")?.ok_or_else(|| {
        f.error("the key \"command\" is required: the program and its arguments, e.g. command = [\"java\", \"-cp\", \"/opt/app\", \"Main\"]")
    })?;
    if command.first().is_none_or(|program| program.trim().is_empty()) {
        return Err(f.error_at("command", "name the program first, e.g. command = [\"java\", \"-version\"]"));
    }
    let ops = f.count("ops")?.unwrap_or(1);
    let timeout = f.timeout("timeout")?;
    f.finish()?;
    Ok(Spec::Command(Command { command, ops, timeout_s: timeout.map_or(600, |t| t.as_secs().max(1)), jit_map: false }))
}

impl Workload for Command {
    fn programs(&self) -> Vec<&str> {
        vec![self.command[0].as_str()]
    }

    fn headline(&self) -> Vec<&'static str> {
        vec!["total_time", "op_rate"]
    }

    fn recorded(&self) -> Vec<String> {
        ["total_time", "op_rate", "ops"].map(String::from).into()
    }

    fn describe(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("command".to_string(), self.command.join(" ")),
            ("command.ops".to_string(), self.ops.to_string()),
        ])
    }

    fn expected_duration(&self) -> Duration {
        // Unknown before it ran; only for the ETA.
        Duration::from_secs(10)
    }

    fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_s) + Duration::from_secs(180)
    }

    fn writes_volume(&self) -> bool {
        // Its working directory is the volume: what it writes there cannot be known.
        true
    }

    fn run(&self, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let mut process = Process::new(&self.command[0]);
        process.args(&self.command[1..]).current_dir(ctx.data_dir);
        if self.jit_map {
            // Every JVM reads it, wherever it sits in the command; its own options still apply.
            let mut options = crate::sys::jit_map::JVM_FLAGS.join(" ");
            if let Ok(users) = std::env::var("JAVA_TOOL_OPTIONS") {
                options = format!("{users} {options}");
            }
            process.env("JAVA_TOOL_OPTIONS", options);
        }
        let mut pid = 0;
        let mut on_spawn = |p: u32| pid = p as i32;
        let finished = sys::run(
            &mut process,
            sys::Options {
                timeout: Some(Duration::from_secs(self.timeout_s)),
                on_spawn: Some(&mut on_spawn),
                ..Default::default()
            },
        )?;
        out.raw.push(RawFile { name: "command-output.txt".into(), content: kept_output(&finished) });
        if !finished.status.success() {
            bail!("the command {:?} failed ({}):\n{}", self.command.join(" "), finished.status, finished.tail(10));
        }
        if self.jit_map {
            out.code_maps.extend(super::take_jit_map(pid));
        }
        let seconds = finished.elapsed.as_secs_f64();
        out.samples.push(Sample::new("total_time", seconds, "s"));
        out.samples.push(Sample::new("op_rate", self.ops as f64 / seconds, "op/s"));
        out.samples.push(Sample::new("ops", self.ops as f64, "ops"));
        Ok(())
    }
}

/// The command's stdout then stderr, each cut to its last part if it said much.
fn kept_output(finished: &sys::Finished) -> String {
    let last = |text: &str| {
        let from = text.len().saturating_sub(OUTPUT_KEPT / 2);
        let from = (from..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap_or(text.len());
        text[from..].to_string()
    };
    format!("{}\n--- stderr ---\n{}", last(&finished.stdout), last(&finished.stderr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn run(command: &[&str], data_dir: &std::path::Path) -> Result<Output> {
        let spec =
            Command { command: command.iter().map(|s| s.to_string()).collect(), ops: 4, timeout_s: 10, jit_map: false };
        let ctx = RunContext { data_dir, raw: None, read_only: false, scratch_dir: data_dir };
        let mut out = Output::default();
        spec.run(&ctx, &mut out).map(|()| out)
    }

    #[test]
    fn a_command_is_timed_in_the_volume_and_its_operations_counted() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(&["sh", "-c", "sleep 0.2; pwd > here"], dir.path()).unwrap();
        let value = |m: &str| out.samples.iter().find(|s| s.metric == m).unwrap().value;
        assert!((0.2..5.0).contains(&value("total_time")), "{:?}", out.samples);
        assert_eq!(value("ops"), 4.0);
        assert!((value("op_rate") - 4.0 / value("total_time")).abs() < 1e-9);
        let here = std::fs::read_to_string(dir.path().join("here")).unwrap();
        assert_eq!(std::path::Path::new(here.trim()), dir.path().canonicalize().unwrap());
    }

    #[test]
    fn a_failed_command_is_an_error_with_what_it_said() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(&["sh", "-c", "echo no such input >&2; exit 3"], dir.path()).unwrap_err().to_string();
        assert!(e.contains("exit status: 3") && e.contains("no such input"), "{e}");
    }
}
