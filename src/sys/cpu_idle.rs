//! What the CPUs do when they have nothing to run, and a hold that keeps them polling rather
//! than halting while a suite runs (PM QoS: `/dev/cpu_dma_latency` at 0 µs, as tuned's
//! latency-performance profile sets it).
//!
//! Why it matters: an I/O's completion wakes whoever waits on it, and waking a halted CPU costs.
//! In a virtual machine a halt is a trip to the hypervisor; on this project's 2-core guest the
//! demo's fsynced 4k writes ran 2.8k-4.5k op/s with the CPUs halting and 5.7k-7.9k with them
//! polling, and which side of a comparison found its CPUs halted more often moved its result by
//! more than the sandbox did (docs/statistics.md).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};

use anyhow::{Context, Result};

/// `cpu.idle_latency_limit` while every CPU is held polling.
pub const POLLING: &str = "0 µs: the CPUs poll when idle";

/// `cpu.idle_latency_limit` at 0 µs on a kernel with no cpuidle driver: the idle loop then runs
/// the architecture's default (a halt), which no PM QoS request changes (seen 12-05 on a
/// Firecracker guest of this project's machine kind, `current_driver` none: fsynced 4k writes
/// ran alike with the request held and without).
pub const NOT_HONOURED: &str =
    "0 µs asked, not honoured: no cpuidle driver, so the idle CPUs halt as the kernel's default idle does";

/// The host's facts (`facts`, as host.json keeps them) say every CPU was held polling.
pub fn held_polling(facts: &BTreeMap<String, String>) -> bool {
    facts.get("cpu.idle_latency_limit").is_some_and(|limit| limit == POLLING)
}

/// The kernel's interface to the CPU latency PM QoS request.
pub const PM_QOS: &str = "/dev/cpu_dma_latency";

/// A request that every CPU wake within 0 µs, which makes the idle governor poll. The kernel
/// drops it when the file closes: when this is dropped, or when the process ends in any way.
pub struct PollHold {
    _request: File,
}

/// Asks the kernel to keep every CPU polling when idle, until the hold is dropped.
pub fn hold_poll() -> Result<PollHold> {
    let mut request = OpenOptions::new().write(true).open(PM_QOS).with_context(|| format!("opening {PM_QOS}"))?;
    request.write_all(&0i32.to_ne_bytes()).with_context(|| format!("writing 0 µs to {PM_QOS}"))?;
    Ok(PollHold { _request: request })
}

/// Why a request to poll would change nothing here, if it would not: the kernel has no cpuidle
/// driver, whose governor is what a PM QoS request steers.
pub fn poll_unavailable() -> Option<String> {
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver").ok();
    match driver.as_deref().map(str::trim) {
        Some(d) if d != "none" => None,
        _ => Some(
            "this kernel has no cpuidle driver (/sys/devices/system/cpu/cpuidle/current_driver), so its idle CPUs halt as the architecture's default idle does and no PM QoS request makes them poll".into(),
        ),
    }
}

/// The latency every CPU is held to now, in µs, over all requests (the default is 2000 s: none).
pub fn held_latency_us() -> Option<i32> {
    let mut value = [0u8; 4];
    File::open(PM_QOS).and_then(|mut f| f.read_exact(&mut value)).ok()?;
    Some(i32::from_ne_bytes(value))
}

/// The facts of the CPUs' idling: the cpuidle driver and governor, and what is asked of them.
pub fn facts() -> BTreeMap<String, String> {
    let mut facts = BTreeMap::new();
    let read = |name: &str| std::fs::read_to_string(format!("/sys/devices/system/cpu/cpuidle/{name}")).ok();
    // Kernels that let the governor be switched name it in `current_governor`, others in `_ro`.
    let governor = read("current_governor").or_else(|| read("current_governor_ro"));
    for (key, value) in [("cpu.idle_driver", read("current_driver")), ("cpu.idle_governor", governor)] {
        if let Some(value) = value {
            facts.insert(key.to_string(), value.trim().to_string());
        }
    }
    let honoured = poll_unavailable().is_none();
    if let Some(us) = held_latency_us() {
        let said = match us {
            0 if honoured => POLLING.to_string(),
            0 => NOT_HONOURED.to_string(),
            // The kernel's default: no request.
            2_000_000_000.. => "none".to_string(),
            _ => format!("{us} µs"),
        };
        facts.insert("cpu.idle_latency_limit".into(), said);
    }
    facts
}
