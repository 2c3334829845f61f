//! QEMU guests (TCG here, KVM where it works): fio over 9p, virtio-fs and virtio-blk, proof that
//! a guest kernel ran, guests that never report, and nothing left after a SIGKILL.

mod common;

use std::time::{Duration, Instant};

use common::{Missing, Scratch, missing, need_program, need_root, run_record, text};
use isobench::env::vm::guest::Kernel;

fn unable() -> Option<Missing> {
    need_root("mounts, loop devices")
        .or_else(|| need_program("fio", "fio"))
        .or_else(|| need_program("qemu-system-x86_64", "qemu-system-x86"))
        .or_else(|| need_program("busybox", "busybox-static"))
        .or_else(|| {
            Kernel::installed()
                .is_none()
                .then(|| missing("guest-kernel", "no guest kernel (scripts/setup.sh unpacks Debian's generic kernel)"))
        })
}

fn suite(envs: &str, runtime: &str) -> String {
    format!(
        r#"
name = "vm"
repeat = 1
baseline = {{ env = "host" }}

[[env]]
name = "host"
kind = "host"
{envs}

[[volume]]
name = "ext4"
kind = "loop"
fs = "ext4"
size = "512M"

[[workload]]
name = "fio"
kind = "fio"
rw = "randread"
size = "32M"
runtime = "{runtime}"
direct = true
ioengine = "libaio"
iodepth = 4
"#
    )
}

fn vm(name: &str, extra: &str) -> String {
    format!("\n[[env]]\nname = \"{name}\"\nkind = \"vm\"\nmemory = \"1G\"\n{extra}\n")
}

/// Also: a guest pinned to a CPU of the host (`cpuset`) runs every thread of its QEMU (its
/// vCPUs, its I/O) and its virtio-fs daemon there, read from the kernel while it ran; the others
/// run on all of them.
#[test]
fn fio_in_a_guest_over_9p_virtiofs_and_virtio_blk() {
    skip_if!(unable());
    let sb = Scratch::new();
    let all = isobench::sys::CpuSet::available();
    let one = isobench::sys::CpuSet::from_cpus(all.cpus().last());
    let envs = [
        vm("vm-9p", "attach = \"9p\"\ncache = \"none\""),
        vm("vm-virtiofs", &format!("attach = \"virtiofs\"\ncache = \"never\"\ncpuset = \"{one}\"")),
        vm("vm-blk", "attach = \"virtio-blk\"\naio = \"threads\""),
    ]
    .concat();
    let (o, out, cpus) = sb.run_suite_watching_cpus(&suite(&envs, "2s"), &[]);
    assert!(o.status.success(), "{}", text(&o));
    for (env, pinned) in [("vm-virtiofs", &one), ("vm-blk", &all)] {
        let run = run_record(&out, &format!("{env}.ext4.fio"), 1);
        let during = common::cpus_during(&cpus, &run);
        eprintln!("{env}: the CPUs each part was allowed while it ran: {during:?}");
        let programs: &[&str] =
            if env == "vm-virtiofs" { &["qemu-system-x86_64", "virtiofsd"] } else { &["qemu-system-x86_64"] };
        for program in programs {
            assert_eq!(
                during.get(*program),
                Some(&[pinned.to_string()].into()),
                "{env}: {program}'s threads: {during:?}"
            );
        }
        assert_eq!(run["setup"]["limit.cpuset"], pinned.to_string());
        assert_eq!(run["setup"]["limit.cpus_seen"], "1", "{env}: the guest's one vCPU");
    }
    let host = run_record(&out, "host.ext4.fio", 1);
    for (env, source) in [("vm-9p", "9p data"), ("vm-virtiofs", "virtiofs data"), ("vm-blk", "/dev/vda")] {
        let run = run_record(&out, &format!("{env}.ext4.fio"), 1);
        assert_eq!(run["status"], "ok", "{env}: {}", run["error"]);
        let iops = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "iops").unwrap()["value"]
            .as_f64()
            .unwrap();
        assert!(iops > 0.0, "{env}: {iops}");
        let boot =
            run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "vm_boot").expect("boot time")["value"]
                .as_f64()
                .unwrap();
        assert!(boot > 0.0 && boot < 120.0, "{env}: boot {boot}");
        let facts = &run["facts"];
        assert_ne!(facts["kernel.release"], host["facts"]["kernel.release"], "{env} ran the guest kernel");
        assert_ne!(facts["boot_id"], host["facts"]["boot_id"], "{env} is another kernel instance");
        assert!(facts["data.mount_source"].as_str().unwrap().contains(source), "{env}: {}", facts["data.mount_source"]);
        let setup = &run["setup"];
        assert!(["tcg", "kvm"].contains(&setup["vm.accel"].as_str().unwrap()), "{env}: the accelerator is recorded");
        assert!(!setup["vm.accel_reason"].as_str().unwrap().is_empty());
        assert_eq!(setup["attach"], env.trim_start_matches("vm-").replace("blk", "virtio-blk"));
    }
    sb.assert_nothing_left();
}

#[test]
fn guests_started_together_each_get_their_slice_of_one_device() {
    skip_if!(unable());
    let sb = Scratch::new();
    // QEMU locks a whole image file: two guests on slices of one file must not trip over it.
    let sliced = suite(&vm("vm-blk", "attach = \"virtio-blk\""), "1s")
        .replace("kind = \"loop\"", "kind = \"block\"\nbacking = \"file\"\npartitions = 2")
        .replace("direct = true", "direct = true\ndensity = 2");
    let (o, out) = sb.run_suite(&sliced, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "vm-blk.ext4.fio", 1);
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    let ok = run["samples"].as_array().unwrap().iter().find(|s| s["metric"] == "sandboxes_ok").unwrap();
    assert_eq!(ok["value"], 2.0, "both guests ran: {}", run["notes"]);
    sb.assert_nothing_left();
}

#[test]
fn a_guest_that_never_reports_fails_its_cell_with_the_console_and_the_run_goes_on() {
    skip_if!(unable());
    let sb = Scratch::new();
    let kernel = Kernel::installed().unwrap();
    let envs = [
        vm("not-a-kernel", "kernel = \"/etc/hostname\""),
        vm("slow-boot", "boot_timeout = \"1s\""),
        // The real kernel without its modules: no 9p, so /init cannot mount the host's root.
        vm("no-modules", &format!("kernel = \"{}\"", kernel.image.display())),
        vm("fine", ""),
    ]
    .concat();
    let started = Instant::now();
    let (o, out) = sb.run_suite(
        &suite(&envs, "1s"),
        &[
            "--filter",
            "env=not-a-kernel,volume=*",
            "--filter",
            "env=slow-boot",
            "--filter",
            "env=no-modules",
            "--filter",
            "env=fine",
        ],
    );
    common::runs_failed(&o, &["not-a-kernel.ext4.fio", "slow-boot.ext4.fio", "no-modules.ext4.fio"]);
    let error = |env: &str| {
        let run = run_record(&out, &format!("{env}.ext4.fio"), 1);
        assert_eq!(run["status"], "failed", "{env}");
        run["error"].as_str().unwrap().to_string()
    };
    let e = error("not-a-kernel");
    assert!(e.starts_with("qemu could not start the guest") && e.contains("kernel"), "{e}");
    let e = error("slow-boot");
    assert!(e.starts_with("the guest did not reach its init within 1s (boot_timeout)"), "{e}");
    let e = error("no-modules");
    assert!(e.starts_with("isobench-init: cannot mount the host's root over 9p"), "{e}");
    assert!(
        e.contains("last console lines:\nISOBENCH-BOOTED") && e.contains("No such device"),
        "the console's own words: {e}"
    );
    assert_eq!(run_record(&out, "fine.ext4.fio", 1)["status"], "ok");
    assert!(started.elapsed() < Duration::from_secs(240), "failed guests fail fast");
    sb.assert_nothing_left();
}

#[test]
fn sigkill_during_a_guest_then_cleanup_leaves_no_qemu_or_virtiofsd() {
    skip_if!(unable());
    let sb = Scratch::new();
    let text_ = suite(&vm("vm", "attach = \"virtiofs\""), "120s")
        .replace("baseline = { env = \"host\" }", "baseline = { env = \"vm\" }")
        .replace("[[env]]\nname = \"host\"\nkind = \"host\"\n", "");
    let (child, _) = sb.start_suite(&text_, &[]);
    // Killed in its workload: fio's file in the shared volume (tests/chaos.rs kills guests
    // while they boot).
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let procs = sb.processes();
        let qemu = procs.iter().any(|p| p.contains("qemu-system") && p.contains("virtiofs.sock"));
        let daemon = procs.iter().any(|p| p.contains("virtiofsd"));
        if qemu && daemon && sb.fio_at_work() {
            std::thread::sleep(Duration::from_secs(1));
            break;
        }
        assert!(Instant::now() < deadline, "the guest's fio never started: {procs:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
    sb.kill_then_cleanup(child);
    sb.assert_nothing_left();
    assert!(!sb.processes().iter().any(|p| p.contains("qemu") || p.contains("virtiofsd")));
}
