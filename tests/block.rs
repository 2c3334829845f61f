//! Raw block volumes: the device itself and a filesystem on the same device side by side, a
//! user's device kept read-only unless the suite says destructive, a mounted device refused,
//! and slices of one device.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{Missing, Scratch, missing, need_program, need_root, run_record, text};

fn unable() -> Option<Missing> {
    need_root("loop devices, mounts, containers").or_else(|| need_program("fio", "fio"))
}

fn suite(envs: &str, volumes: &str, rw: &str) -> String {
    format!(
        r#"
name = "blk"
repeat = 1
baseline = {{ env = "host" }}

[[env]]
name = "host"
kind = "host"
{envs}
{volumes}

[[workload]]
name = "fio"
kind = "fio"
rw = {rw}
bs = "4k"
iodepth = 4
size = "32M"
runtime = "1s"
direct = true
ioengine = "libaio"
"#
    )
}

fn iops(run: &serde_json::Value) -> f64 {
    run["samples"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["metric"] == "iops")
        .map_or(0.0, |s| s["value"].as_f64().unwrap())
}

/// A loop device of the test's own over a file under the sandbox, with `bytes` written at its start.
struct UserDevice {
    device: String,
    file: PathBuf,
}

impl UserDevice {
    fn new(sb: &Scratch, bytes: &[u8]) -> UserDevice {
        let file = sb.path().join("user-disk.img");
        std::fs::write(&file, bytes).unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        f.set_len(64 << 20).unwrap();
        let out = Command::new("losetup").args(["--find", "--show"]).arg(&file).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        UserDevice { device: String::from_utf8_lossy(&out.stdout).trim().to_string(), file }
    }

    fn head(&self) -> Vec<u8> {
        std::fs::read(&self.file).unwrap()[..4096].to_vec()
    }
}

impl Drop for UserDevice {
    fn drop(&mut self) {
        // Just after an umount something (udev's probe) may still hold the device: `losetup -d`
        // then only marks it to go when closed. Wait until it has gone.
        for _ in 0..50 {
            let _ = Command::new("losetup").args(["-d", &self.device]).status();
            let held = Command::new("losetup").arg("-j").arg(&self.file).output().unwrap();
            if held.stdout.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

#[test]
fn raw_and_ext4_on_the_same_kind_of_device_in_one_suite() {
    skip_if!(unable());
    let sb = Scratch::new();
    let runc = isobench::env::oci::Runtime::resolve("runc").path.is_some();
    let runsc = isobench::env::oci::Runtime::resolve("runsc").path.is_some();
    let mut envs = String::new();
    if runc {
        envs.push_str("[[env]]\nname = \"runc\"\nkind = \"oci\"\nruntime = \"runc\"\n");
    } else {
        common::skip_part("runc", &missing("runc", "runc is not installed (scripts/setup.sh installs it)"));
    }
    if runsc {
        envs.push_str("[[env]]\nname = \"runsc\"\nkind = \"oci\"\nruntime = \"runsc\"\n");
    } else {
        common::skip_part("runsc", &missing("runsc", "runsc is not installed (scripts/setup.sh builds it)"));
    }
    let volumes = "[[volume]]\nname = \"raw\"\nkind = \"block\"\nbacking = \"file\"\nsize = \"128M\"\n\n[[volume]]\nname = \"ext4\"\nkind = \"block\"\nbacking = \"file\"\nsize = \"128M\"\nfs = \"ext4\"\n";
    let (o, out) = sb.run_suite(&suite(&envs, volumes, "[\"randread\", \"randwrite\"]"), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let mut envs = vec!["host"];
    if runc {
        envs.push("runc");
    }
    for env in envs {
        for rw in ["randread", "randwrite"] {
            let raw = run_record(&out, &format!("{env}.raw.fio.rw={rw}"), 1);
            let ext4 = run_record(&out, &format!("{env}.ext4.fio.rw={rw}"), 1);
            assert_eq!(raw["status"], "ok", "{env} raw {rw}: {}", raw["error"]);
            assert_eq!(ext4["status"], "ok", "{env} ext4 {rw}: {}", ext4["error"]);
            assert!(iops(&raw) > 0.0 && iops(&ext4) > 0.0, "{env} {rw}");
            assert_eq!(raw["setup"]["volume.fs"], "none");
            assert_eq!(ext4["setup"]["volume.fs"], "ext4");
            assert_eq!(ext4["facts"]["data.fstype"], "ext4", "{env}: the agent saw ext4");
            let device = raw["setup"]["volume.device"].as_str().unwrap();
            assert!(device.starts_with("/dev/loop"), "{device}");
            let fio = std::fs::read_to_string(out.join(raw["raw"][0].as_str().unwrap())).unwrap();
            let inside = if env == "host" { device } else { "/dev/isobench-data" };
            assert!(fio.contains(&format!("\"filename\" : \"{inside}\"")), "{env}: fio ran on the device itself");
        }
    }
    if runsc {
        let run = run_record(&out, "runsc.raw.fio.rw=randread", 1);
        assert_eq!(run["status"], "skipped", "known before anything runs");
        assert!(run["error"].as_str().unwrap().contains("gVisor has no block devices"), "{}", run["error"]);
        assert_eq!(run_record(&out, "runsc.ext4.fio.rw=randread", 1)["status"], "ok");
    }
    sb.assert_nothing_left();
}

#[test]
fn a_users_device_is_read_only_unless_destructive() {
    skip_if!(unable());
    let sb = Scratch::new();
    let marker: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    let disk = UserDevice::new(&sb, &marker);
    let volume =
        |extra: &str| format!("[[volume]]\nname = \"disk\"\nkind = \"block\"\ndevice = \"{}\"\n{extra}\n", disk.device);
    let (o, out) = sb.run_suite(&suite("", &volume(""), "[\"randread\", \"randwrite\"]"), &[]);
    common::runs_failed(&o, &["host.disk.fio.rw=randwrite"]);
    let read = run_record(&out, "host.disk.fio.rw=randread", 1);
    assert_eq!(read["status"], "ok", "{}", read["error"]);
    assert!(iops(&read) > 0.0);
    let write = run_record(&out, "host.disk.fio.rw=randwrite", 1);
    assert_eq!(write["status"], "failed");
    assert!(write["error"].as_str().unwrap().contains("did not call destructive"), "{}", write["error"]);
    assert_eq!(disk.head(), marker, "nothing was written to the user's device");

    // Formatting needs the word too, and it is asked for before anything runs.
    let (o, _) = sb.run_suite(&suite("", &volume("fs = \"ext4\""), "\"randread\""), &[]);
    assert_eq!(o.status.code(), Some(1));
    let said = text(&o);
    assert!(said.contains("s.toml:") && said.contains("set destructive = true"), "{said}");
    assert_eq!(disk.head(), marker);

    // With it, writes happen, on the device the suite named.
    let (o, out) = sb.run_suite(&suite("", &volume("destructive = true"), "\"randwrite\""), &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(run_record(&out, "host.disk.fio", 1)["status"], "ok");
    assert_ne!(disk.head(), marker, "fio wrote where it was allowed to");
    drop(disk);
    sb.assert_nothing_left();
}

#[test]
fn a_mounted_device_is_refused_with_its_mount_point() {
    skip_if!(unable());
    let sb = Scratch::new();
    let disk = UserDevice::new(&sb, b"");
    assert!(Command::new("mkfs.ext4").args(["-q", "-F", &disk.device]).status().unwrap().success());
    let mnt = sb.path().join("mounted-here");
    std::fs::create_dir_all(&mnt).unwrap();
    assert!(Command::new("mount").arg(&disk.device).arg(&mnt).status().unwrap().success());
    let volume = format!("[[volume]]\nname = \"disk\"\nkind = \"block\"\ndevice = \"{}\"\n", disk.device);
    let (o, out) = sb.run_suite(&suite("", &volume, "\"randread\""), &[]);
    let _ = Command::new("umount").arg(&mnt).status();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let said = text(&o);
    assert!(said.contains(&format!("is mounted at {}", mnt.display())), "{said}");
    assert!(!out.exists(), "nothing ran");
    drop(disk);
    sb.assert_nothing_left();
}

#[test]
fn partitions_cut_one_device_into_equal_slices() {
    skip_if!(unable());
    let sb = Scratch::new();
    let volumes = "[[volume]]\nname = \"sliced\"\nkind = \"block\"\nbacking = \"file\"\nsize = \"256M\"\npartitions = 4\nfs = \"ext4\"\n";
    let (o, out) = sb.run_suite(&suite("", volumes, "\"randwrite\""), &[]);
    assert!(o.status.success(), "{}", text(&o));
    let run = run_record(&out, "host.sliced.fio", 1);
    assert_eq!(run["status"], "ok", "{}", run["error"]);
    assert_eq!(run["setup"]["volume.size"], "64m", "a quarter of the device");
    assert_eq!(run["setup"]["volume.slice"], "1 of 4 at offset 0");
    assert_eq!(run["facts"]["data.fstype"], "ext4");
    sb.assert_nothing_left();
}
