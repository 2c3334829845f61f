//! The load as an Indexed Job's pods (`loaders` on Kubernetes): each pod runs its own slice of
//! every phase and sends its HDR logs back, and the host merges them as it merges local loader
//! processes.

use anyhow::{Result, anyhow, bail};

use super::{Cql, INDEX_VAR, MEASURED_END_LINE, shown};
use crate::store::{RawFile, Sample};
use crate::workload::{Output, RunContext};
use cql_stress::loaders;

impl Cql {
    /// One pod's slice of each phase (load, then the measured one); its output and HDR logs go
    /// back as raw files named as `combine_indexed` reads them.
    pub(super) fn run_slice(&self, n: u32, ctx: &RunContext, out: &mut Output) -> Result<()> {
        let index: usize = std::env::var(INDEX_VAR)
            .ok()
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| anyhow!("{INDEX_VAR} is not set: an indexed loader runs as a pod of an Indexed Job"))?;
        let phases = self.load_phases().chain([("run".to_string(), &self.args)]);
        for (phase, text) in phases {
            let phase = phase.as_str();
            if phase == "run"
                && let Some(plan) = &self.capacity
            {
                eprintln!("{}", super::measured_began());
                // One loader pod searches alone, as a loader on the host does.
                return self.search(plan, ctx, out);
            }
            let dir = ctx.scratch_dir.join(phase);
            let commands = loaders::split(&self.loader_command(text, &dir)?, n)
                .map_err(|e| anyhow!("{}", e.to_string().trim_end()))?;
            let command = commands.get(index).ok_or_else(|| anyhow!("loader index {index} of {n}"))?;
            // The measured phase begins when the loader has connected and made the schema: a
            // fault timed from it must not hit a loader still setting up (on a busy machine a
            // pod deleted 3 s in reset one's connection while it created the table).
            let cue = || {
                if phase == "run" {
                    eprintln!("{}", super::measured_began());
                }
            };
            let loader = loaders::run_single(index + 1, command, &ctx.scratch_dir.join(phase), &cue)?;
            if phase == "run" {
                eprintln!("{MEASURED_END_LINE}");
            }
            out.raw.push(RawFile {
                name: format!("{phase}-loader-{}.log", index + 1),
                content: format!("isobench cql {}\n\n{}", loader.command, loader.output),
            });
            if let Ok(hdr) = std::fs::read_to_string(&loader.hdr) {
                out.raw.push(RawFile { name: format!("{phase}-loader-{}.hdr", index + 1), content: hdr });
            }
            if !loader.success {
                bail!("loader {} failed ({phase}): {}", index + 1, loader.reason());
            }
            out.samples.push(Sample::new(format!("{phase}_loader_op_rate"), loader.op_rate, "op/s"));
        }
        Ok(())
    }

    /// The reports of an Indexed Job's pods (in index order) as one: each phase merged from the
    /// pods' HDR logs (written into `dir`), exactly as local loader processes are merged.
    pub fn combine_indexed(
        &self,
        reports: Vec<crate::store::AgentReport>,
        dir: &std::path::Path,
    ) -> crate::store::AgentReport {
        let n = reports.len() as u32;
        if let (Some(_), [_]) = (&self.capacity, reports.as_slice()) {
            // One loader pod searched alone: its report is the run's.
            return reports.into_iter().next().expect("one report");
        }
        let mut out = Output::default();
        let mut combined = crate::store::AgentReport {
            facts: reports.first().map(|r| r.facts.clone()).unwrap_or_default(),
            ..Default::default()
        };
        let phases: Vec<(String, &String)> = self.load_phases().chain([("run".to_string(), &self.args)]).collect();
        let mut merged_phases = Vec::new();
        for (phase, text) in &phases {
            let mut loaders = Vec::new();
            for (i, report) in reports.iter().enumerate() {
                let file = |ext: &str| {
                    let name = format!("{phase}-loader-{}.{ext}", i + 1);
                    report.raw.iter().find(|r| r.name == name).map(|r| r.content.clone())
                };
                let log = file("log").unwrap_or_default();
                let hdr = dir.join(format!("{phase}-loader-{}.hdr", i + 1));
                if let Some(content) = file("hdr") {
                    let _ = std::fs::write(&hdr, content);
                }
                let (command, output) = log.split_once("\n\n").unwrap_or(("", &log));
                let command = command.trim_start_matches("isobench cql ").to_string();
                let failed = report.error.is_some() && !hdr.exists();
                loaders.push(loaders::Loader::read(command, hdr, output.to_string(), !failed));
            }
            merged_phases.push((phase.as_str(), *text, loaders));
        }
        let result = (|| -> Result<()> {
            for (phase, text, ran) in &merged_phases {
                let fixed = self.phase(&self.args).map(|s| s.rate.fixed.is_some()).unwrap_or(false);
                let merged = loaders::merge(ran, if fixed && *phase == "run" { "rt" } else { "st" })?;
                if *phase != "run" {
                    if let Some(failed) = &merged.failed {
                        bail!("the load phase ({}) failed: {failed}", shown(text));
                    }
                    if *phase == "load" {
                        out.samples.push(Sample::new("load_op_rate", merged.op_rate, "op/s"));
                    }
                } else {
                    self.merged_output(&merged, n, &mut out)?;
                }
            }
            Ok(())
        })();
        for report in reports {
            combined.raw.extend(report.raw.into_iter().filter(|r| r.name.ends_with(".log")));
            combined.notes.extend(report.notes);
            if combined.error.is_none() {
                combined.error = report.error;
            }
        }
        if let Err(e) = result {
            combined.error = Some(format!("{e:#}"));
        }
        combined.samples = out.samples;
        combined.notes.extend(out.notes);
        combined
    }
}
