//! `isobench doctor`: what this machine can run, and why what it cannot is missing. Every check
//! does the real thing where that is cheap (find a free loop device, ask fio for its engines).

use std::path::Path;

use crate::process::{self, find_program};
use crate::report::Table;

pub struct Check {
    pub area: &'static str,
    pub name: String,
    /// `Ok(detail)` when usable, `Err(why not)` when not.
    pub status: Result<String, String>,
}

pub fn checks() -> Vec<Check> {
    let mut out = Vec::new();
    let mut add = |area, name: &str, status| out.push(Check { area, name: name.to_string(), status });
    add("env", "host", Ok(kernel()));
    add("volume", "dir", Ok("any existing directory".into()));
    add("volume", "tmpfs", root().map(|_| "mount -t tmpfs".into()));
    for fs in ["ext4", "xfs"] {
        add("volume", &format!("loop ({fs})"), root().and_then(|_| loop_fs(fs)));
    }
    add("workload", "fio", fio());
    for (tool, package) in [("sysbench", "sysbench"), ("iperf3", "iperf3")] {
        add("tool", tool, version_of(tool, package));
    }
    out
}

pub fn render(checks: &[Check]) -> String {
    let rows = checks
        .iter()
        .map(|c| {
            let (works, detail) = match &c.status {
                Ok(d) => ("yes", d.clone()),
                Err(why) => ("no", why.clone()),
            };
            vec![c.area.to_string(), c.name.clone(), works.to_string(), detail]
        })
        .collect();
    Table { headers: ["area", "name", "works here", "details / why not"].map(String::from).to_vec(), rows }.to_text("")
}

fn kernel() -> String {
    nix::sys::utsname::uname().map(|u| format!("kernel {}", u.release().to_string_lossy())).unwrap_or_default()
}

fn root() -> Result<(), String> {
    crate::volume::needs_root().map_or(Ok(()), Err)
}

fn loop_fs(fs: &str) -> Result<String, String> {
    if !Path::new("/dev/loop-control").exists() {
        return Err("this kernel has no loop devices (/dev/loop-control is missing)".into());
    }
    let mkfs = format!("mkfs.{fs}");
    if find_program(&mkfs).is_none() {
        let package = if fs == "xfs" { "xfsprogs" } else { "e2fsprogs" };
        return Err(format!("{mkfs} is not installed (apt-get install {package})"));
    }
    let free = process::command_output("losetup", &["--find"]).map_err(|e| format!("no free loop device: {e:#}"))?;
    Ok(format!("free device {}", free.trim()))
}

fn fio() -> Result<String, String> {
    let version = crate::workload::fio::version().ok_or("fio is not installed (apt-get install fio)")?;
    let engines = process::command_output("fio", &["--enghelp"]).unwrap_or_default();
    let wanted: Vec<&str> = ["libaio", "io_uring", "psync", "nbd"]
        .into_iter()
        .filter(|e| engines.lines().any(|l| l.trim() == *e))
        .collect();
    Ok(format!("{version}; engines include {}", wanted.join(", ")))
}

fn version_of(tool: &str, package: &str) -> Result<String, String> {
    process::command_output(tool, &["--version"])
        .map(|v| v.lines().next().unwrap_or("").trim().to_string())
        .map_err(|_| format!("not installed (apt-get install {package})"))
}
