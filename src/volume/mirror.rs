//! `kind = "mirror"`: one volume whose every write goes synchronously to `replicas` storage
//! nodes. The nexus is QEMU's block layer, not code of isobench's: qemu-storage-daemon with a
//! `quorum` node over one NBD client per node, vote-threshold = replicas, so a write completes
//! only when every child has it and fails when any child fails (`allow_degraded = true` lowers
//! the threshold to 1: the volume then runs on what is left, and the run says so from the
//! daemon's QUORUM_REPORT_BAD events). Reads come from the first child that answers (`reads =
//! "one"`) or from all, compared (`reads = "all"`). `replicas = 1` takes the same path, so 1 vs
//! 2 replicas differ only in the replication.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Result;

use super::nbd_export::{self, Common, Where};
use super::{Kind, ProvisionContext, Provisioned, Volume};
use crate::syntax::{Fields, SuiteError};
use figures::units;

pub const KIND: Kind = Kind { name: "mirror", parse };

pub struct Mirror {
    common: Common,
    replicas: usize,
    allow_degraded: bool,
    read_all: bool,
    /// A directory per copy, each on the device that copy should live on; the run's own
    /// directory (one device for all) when empty.
    replicas_on: Vec<PathBuf>,
}

fn parse(f: &mut Fields) -> Result<Box<dyn Volume>, SuiteError> {
    let common = Common::parse(f, Where::Netns)?;
    let replicas = f.count("replicas")?.unwrap_or(2) as usize;
    if replicas > 8 {
        return Err(f.error_at("replicas", "at most 8 (each is a storage node of its own)"));
    }
    let allow_degraded = f.bool("allow_degraded")?.unwrap_or(false);
    let read_all = f.choice("reads", &["one", "all"])?.is_some_and(|r| r == "all");
    let replicas_on: Vec<PathBuf> =
        f.str_list("replicas_on")?.unwrap_or_default().into_iter().map(PathBuf::from).collect();
    if !replicas_on.is_empty() && replicas_on.len() != replicas {
        return Err(f.error_at(
            "replicas_on",
            format!(
                "{} directories for {replicas} replicas: name one per copy, each on its own device",
                replicas_on.len()
            ),
        ));
    }
    if let Some(dir) = replicas_on.iter().find(|d| !d.is_dir()) {
        return Err(f.error_at("replicas_on", format!("{} is not a directory", dir.display())));
    }
    f.finish()?;
    Ok(Box::new(Mirror { common, replicas, allow_degraded, read_all, replicas_on }))
}

impl Volume for Mirror {
    fn raw(&self) -> bool {
        self.common.fs.is_none()
    }

    fn unavailable(&self) -> Option<String> {
        self.common.unavailable(true)
    }

    fn provision(&self, ctx: ProvisionContext) -> Result<Provisioned> {
        let nodes = (0..self.replicas)
            .map(|i| nbd_export::start_node(&ctx, &self.common, i, self.replicas_on.get(i).map(PathBuf::as_path)))
            .collect::<Result<Vec<_>>>()?;
        let mut blockdevs: Vec<String> =
            nodes.iter().enumerate().map(|(i, n)| nbd_export::nbd_blockdev(&format!("child{i}"), &n.export)).collect();
        let threshold = if self.allow_degraded { 1 } else { self.replicas };
        let children: String = (0..self.replicas).map(|i| format!(",children.{i}=child{i}")).collect();
        let pattern = if self.read_all { "quorum" } else { "fifo" };
        blockdevs
            .push(format!("driver=quorum,node-name=nexus,vote-threshold={threshold},read-pattern={pattern}{children}"));
        let route = nbd_export::route(&ctx, &self.common)?;
        let fuse = (route == nbd_export::Route::Fuse).then(|| ctx.run_dir.join("nexus"));
        let daemon = nbd_export::start_daemon(&ctx, &blockdevs, "nexus", self.common.size, fuse.as_deref())?;
        let exported = match (&daemon.export, &fuse) {
            (Some(e), _) => e.uri(),
            (None, Some(file)) => format!("FUSE file {}", file.display()),
            (None, None) => String::new(),
        };
        let mut facts = BTreeMap::from([
            ("volume.kind".to_string(), "mirror".to_string()),
            ("volume.size".into(), units::fio_size(self.common.size)),
            ("volume.fs".into(), self.common.fs.clone().unwrap_or_else(|| "none".into())),
            ("volume.replicas".into(), self.replicas.to_string()),
            (
                "volume.nexus".into(),
                format!(
                    "{} quorum over {} NBD children, vote-threshold {threshold}, read-pattern {pattern}, exported as {exported}",
                    nbd_export::QSD,
                    self.replicas
                ),
            ),
        ]);
        if self.allow_degraded {
            facts.insert("volume.allow_degraded".into(), "true: writes succeed while one child has them".into());
        }
        for node in &nodes {
            facts.extend(node.facts.clone());
        }
        let source = match (&daemon.export, &fuse) {
            (Some(export), _) => nbd_export::Source::Nbd(export),
            (None, Some(file)) => nbd_export::Source::Fuse { file, size: self.common.size },
            (None, None) => anyhow::bail!("the nexus exported nothing"),
        };
        let mut provisioned = nbd_export::deliver(&ctx, &self.common, route, source, facts)?;
        provisioned.replicas = Some(Replicas {
            children: nodes.into_iter().map(|n| n.backing).collect(),
            events: daemon.events,
            allow_degraded: self.allow_degraded,
        });
        Ok(provisioned)
    }
}

/// The device a file lives on ("major:minor", as /proc/self/mountinfo names it).
fn device_of(file: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(file) {
        Ok(m) => format!("{}:{}", nix::sys::stat::major(m.dev()), nix::sys::stat::minor(m.dev())),
        Err(e) => format!("unknown ({e})"),
    }
}

/// A mirror's children, checked after each run.
#[derive(Clone, Debug)]
pub struct Replicas {
    /// Each storage node's backing file.
    pub children: Vec<PathBuf>,
    /// Where the nexus's QMP events were written.
    pub events: PathBuf,
    pub allow_degraded: bool,
}

impl Replicas {
    /// After the workload: whether the children hold the same bytes, and what quorum reported
    /// about failing children. Facts for the run's setup, and notes a reader must see.
    pub fn check(&self) -> (BTreeMap<String, String>, Vec<String>) {
        let mut facts = BTreeMap::new();
        let mut notes = Vec::new();
        if self.children.len() > 1 {
            let devices: Vec<String> = self.children.iter().map(|c| device_of(c)).collect();
            facts.insert("volume.replicas_devices".into(), devices.join(", "));
            let distinct: std::collections::BTreeSet<&String> = devices.iter().collect();
            if distinct.len() < devices.len() {
                notes.push(format!(
                    "the mirror's {} copies share a device ({}): every write lands on one disk {} times; give each its own with replicas_on = [\"/disk1/dir\", …]",
                    devices.len(),
                    devices.join(", "),
                    devices.len() - distinct.len() + 1
                ));
            }
            let verdict = match first_difference(&self.children) {
                Ok(None) => format!("yes ({} copies compared byte for byte)", self.children.len()),
                Ok(Some((i, offset))) => {
                    notes.push(format!("the mirror's copies differ: child {i} from byte {offset} on"));
                    format!("no: child {i} differs from child 0 at byte {offset}")
                }
                Err(e) => format!("not compared: {e:#}"),
            };
            facts.insert("volume.replicas_identical".into(), verdict);
        }
        let events = nbd_export::quorum_events(&self.events);
        if !events.is_empty() {
            let mut by_child: BTreeMap<String, usize> = BTreeMap::new();
            for (_, node, _, _) in &events {
                *by_child.entry(node.clone()).or_default() += 1;
            }
            let summary: Vec<String> = by_child.iter().map(|(n, c)| format!("{n}: {c}")).collect();
            let first = &events[0];
            let what = format!(
                "quorum reported failing children ({}; first: {} {} {})",
                summary.join(", "),
                first.0,
                first.2,
                first.3
            );
            facts.insert("volume.quorum_events".into(), what.clone());
            notes.push(if self.allow_degraded {
                format!("the mirror ran degraded (allow_degraded = true): {what}")
            } else {
                format!("the mirror lost a child: {what}")
            });
        }
        (facts, notes)
    }
}

/// The first child whose bytes differ from child 0's, and where; `None` when all are the same.
fn first_difference(files: &[PathBuf]) -> Result<Option<(usize, u64)>> {
    use std::io::Read;
    let open = |p: &Path| std::fs::File::open(p).map(|f| std::io::BufReader::with_capacity(1 << 20, f));
    let mut first = open(&files[0])?;
    let mut others = files[1..].iter().map(|p| open(p)).collect::<std::io::Result<Vec<_>>>()?;
    let (mut a, mut b) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut offset = 0u64;
    loop {
        let n = read_full(&mut first, &mut a)?;
        for (i, other) in others.iter_mut().enumerate() {
            let m = read_full(other, &mut b)?;
            if m != n || a[..n] != b[..m] {
                let at = a[..n.min(m)].iter().zip(&b[..n.min(m)]).position(|(x, y)| x != y).unwrap_or(n.min(m));
                return Ok(Some((i + 1, offset + at as u64)));
            }
        }
        if n == 0 {
            return Ok(None);
        }
        offset += n as u64;
    }
    fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match r.read(&mut buf[filled..])? {
                0 => break,
                k => filled += k,
            }
        }
        Ok(filled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_compared_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("c{i}"))).collect();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        for f in &files {
            std::fs::write(f, &data).unwrap();
        }
        assert_eq!(first_difference(&files).unwrap(), None);
        let mut changed = data.clone();
        changed[2_500_000] ^= 1;
        std::fs::write(&files[2], &changed).unwrap();
        assert_eq!(first_difference(&files).unwrap(), Some((2, 2_500_000)));
    }
}
