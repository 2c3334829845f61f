//! The "newc" cpio format the kernel unpacks as an initramfs. Archives can be concatenated: a
//! cached one with busybox and modules, then a small one per run with /init and the request.

/// An archive being written.
#[derive(Default)]
pub struct Archive {
    bytes: Vec<u8>,
    inode: u32,
}

const DIR: u32 = 0o040_000;
const FILE: u32 = 0o100_000;
const SYMLINK: u32 = 0o120_000;

impl Archive {
    pub fn dir(&mut self, path: &str) {
        self.entry(path, DIR | 0o755, b"");
    }

    pub fn file(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.entry(path, FILE | mode, data);
    }

    pub fn symlink(&mut self, path: &str, target: &str) {
        self.entry(path, SYMLINK | 0o777, target.as_bytes());
    }

    fn entry(&mut self, path: &str, mode: u32, data: &[u8]) {
        self.inode += 1;
        let name = path.trim_start_matches('/');
        let fields = [self.inode, mode, 0, 0, 1, 0, data.len() as u32, 0, 0, 0, 0, name.len() as u32 + 1, 0];
        self.bytes.extend_from_slice(b"070701");
        for f in fields {
            self.bytes.extend_from_slice(format!("{f:08x}").as_bytes());
        }
        self.bytes.extend_from_slice(name.as_bytes());
        self.bytes.push(0);
        self.pad();
        self.bytes.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while !self.bytes.len().is_multiple_of(4) {
            self.bytes.push(0);
        }
    }

    /// The archive with its trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, b"");
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real cpio reads what this writes.
    #[test]
    fn cpio_lists_and_extracts_the_archive() {
        let Some(cpio) = crate::sys::find_program("cpio") else {
            eprintln!("SKIP cpio_lists_and_extracts_the_archive: cpio is not installed");
            return;
        };
        let mut a = Archive::default();
        a.dir("bin");
        a.file("bin/hello", 0o755, b"#!/bin/sh\necho hi\n");
        a.symlink("bin/sh", "busybox");
        let dir = tempfile::tempdir().unwrap();
        let archive = dir.path().join("a.cpio");
        std::fs::write(&archive, a.finish()).unwrap();
        let out = std::process::Command::new(cpio)
            .args(["-idm", "--quiet", "-F"])
            .arg(&archive)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(std::fs::read_to_string(dir.path().join("bin/hello")).unwrap(), "#!/bin/sh\necho hi\n");
        assert_eq!(std::fs::read_link(dir.path().join("bin/sh")).unwrap().to_str(), Some("busybox"));
    }
}
