//! A result set's directory: its files written whole and redacted, its run records read back.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{PlanRecord, RawFile, RunRecord, Status, csv_field, format_value, step_samples};
use crate::sys::write_atomic;

pub struct ResultSet {
    pub dir: PathBuf,
}

impl ResultSet {
    /// Creates a new result set directory (it must not exist yet, or be empty).
    pub fn create(dir: &Path) -> Result<ResultSet> {
        if dir.exists() && fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false) {
            anyhow::bail!(
                "{} already exists and is not empty; choose another --out, or continue it with --resume {}",
                dir.display(),
                dir.display()
            );
        }
        fs::create_dir_all(dir.join("runs")).with_context(|| format!("creating {}", dir.display()))?;
        Ok(ResultSet { dir: dir.to_path_buf() })
    }

    pub fn open(dir: &Path) -> Result<ResultSet> {
        if !dir.join("runs").is_dir() {
            anyhow::bail!("{} is not an isobench result set (it has no runs/ directory)", dir.display());
        }
        Ok(ResultSet { dir: dir.to_path_buf() })
    }

    /// Writes a file of the result set, secrets redacted (as every file of it is).
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<()> {
        write_atomic(&self.dir.join(name), &crate::secrets::scrub_bytes(bytes))
    }

    fn run_name(cell: &str, rep: u32) -> String {
        format!("runs/{cell}/{rep}.json")
    }

    pub fn write_json(&self, name: &str, value: &impl Serialize) -> Result<()> {
        self.write(name, &serde_json::to_vec_pretty(value)?)
    }

    pub fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<T> {
        let path = self.dir.join(name);
        let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        serde_json::from_str(&text).with_context(|| format!("{} is not valid", path.display()))
    }

    pub fn plan(&self) -> Result<PlanRecord> {
        self.read_json("plan.json")
    }

    fn run_path(&self, cell: &str, rep: u32) -> PathBuf {
        self.dir.join(Self::run_name(cell, rep))
    }

    pub fn has_run(&self, cell: &str, rep: u32) -> bool {
        self.run_path(cell, rep).exists()
    }

    /// Stores the raw files under raw/<cell>/<rep>/, then the run record (which lists them),
    /// then refreshes samples.csv.
    pub fn write_run(&self, record: &mut RunRecord, raw: &[RawFile]) -> Result<()> {
        for file in raw {
            let safe: String = file.name.chars().map(|c| if c == '/' { '_' } else { c }).collect();
            let rel = format!("raw/{}/{}/{safe}", record.cell, record.rep);
            self.write(&rel, file.content.as_bytes())?;
            record.raw.push(rel);
        }
        self.write(&Self::run_name(&record.cell, record.rep), &serde_json::to_vec_pretty(record)?)?;
        self.write_samples_csv()
    }

    /// Every run record, ordered by cell and repetition.
    pub fn runs(&self) -> Result<Vec<RunRecord>> {
        let mut runs = Vec::new();
        let runs_dir = self.dir.join("runs");
        for cell in fs::read_dir(&runs_dir).with_context(|| format!("reading {}", runs_dir.display()))? {
            let cell = cell?.path();
            if !cell.is_dir() {
                continue;
            }
            for file in fs::read_dir(&cell)? {
                let path = file?.path();
                if path.extension().is_some_and(|e| e == "json")
                    && !path.file_name().unwrap().to_string_lossy().starts_with('.')
                {
                    let text = fs::read_to_string(&path)?;
                    let run: RunRecord = serde_json::from_str(&text)
                        .with_context(|| format!("{} is not a valid run record", path.display()))?;
                    runs.push(run);
                }
            }
        }
        runs.sort_by(|a, b| (&a.cell, a.rep).cmp(&(&b.cell, b.rep)));
        Ok(runs)
    }

    /// samples.csv: every sample of every successful run, then its capacity steps, one row per
    /// figure (`step.3.offered`, `step.3.p99`, …).
    pub fn write_samples_csv(&self) -> Result<()> {
        let mut out = String::from("cell,env,volume,workload,params,rep,metric,value,unit\n");
        for run in self.runs()?.iter().filter(|r| r.status == Status::Ok) {
            let steps = run.steps.iter().enumerate().flat_map(|(i, step)| step_samples(i + 1, step));
            for s in run.samples.iter().cloned().chain(steps) {
                let fields = [
                    run.cell.clone(),
                    run.labels.env.clone(),
                    run.labels.volume.clone(),
                    run.labels.workload.clone(),
                    run.labels.params_text(),
                    run.rep.to_string(),
                    s.metric,
                    format_value(s.value),
                    s.unit,
                ];
                out.push_str(&fields.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(","));
                out.push('\n');
            }
        }
        self.write("samples.csv", out.as_bytes())
    }
}
