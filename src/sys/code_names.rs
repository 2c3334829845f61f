//! Names for sampled code that perf could not name, from what the sandbox's processes said of
//! their own memory: a JIT's map of its compiled code (`jit_map`), and a process's
//! `/proc/PID/maps` as its kernel showed it inside the sandbox, whose files' symbols name the
//! native code there. Under gVisor perf sees a workload's code only through its stubs, where
//! gVisor maps it in pieces, some from its memory file, some never told to perf: the workload's
//! own view of its memory still says which file each address is in.

use std::cell::RefCell;
use std::collections::HashMap;

use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};

use super::jit_map::JitMap;

/// A process's file-backed executable mappings, by start.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct MappedFiles {
    ranges: Vec<Mapping>,
}

#[derive(Debug, Clone, PartialEq)]
struct Mapping {
    start: u64,
    end: u64,
    /// Its offset in the file.
    offset: u64,
    path: String,
}

impl MappedFiles {
    /// `/proc/PID/maps`: `START-END PERMS OFFSET DEV INODE PATH` a line (hexadecimal numbers);
    /// only executable mappings of a file are kept, and lines of another shape are passed over.
    pub fn parse(text: &str) -> MappedFiles {
        let mut ranges: Vec<Mapping> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                let (start, end) = fields.next()?.split_once('-')?;
                let perms = fields.next()?;
                let offset = fields.next()?;
                let path = fields.nth(2)?;
                let hex = |w: &str| u64::from_str_radix(w, 16).ok();
                (perms.contains('x') && path.starts_with('/')).then_some(())?;
                Some(Mapping { start: hex(start)?, end: hex(end)?, offset: hex(offset)?, path: path.to_string() })
            })
            .collect();
        ranges.sort_by_key(|r| r.start);
        MappedFiles { ranges }
    }

    /// The file at `ip` and the offset in it.
    fn locate(&self, ip: u64) -> Option<(&str, u64)> {
        let after = self.ranges.partition_point(|r| r.start <= ip);
        let r = self.ranges.get(after.checked_sub(1)?)?;
        (ip < r.end).then(|| (r.path.as_str(), r.offset + (ip - r.start)))
    }
}

/// The JIT maps and mapped files of a sandbox's processes, and the symbols of those files as
/// they are read (once each, when a sample first needs one).
#[derive(Default)]
pub struct CodeNames {
    jit: Vec<JitMap>,
    mapped: Vec<MappedFiles>,
    symbols: RefCell<HashMap<String, Option<FileSymbols>>>,
}

impl CodeNames {
    pub fn new(jit: Vec<JitMap>, mapped: Vec<MappedFiles>) -> CodeNames {
        CodeNames { jit, mapped, symbols: RefCell::default() }
    }

    /// Whether a JIT's map was given.
    pub fn has_jit(&self) -> bool {
        self.jit.iter().any(|m| !m.is_empty())
    }

    /// Whether a process's mappings were given.
    pub fn has_mappings(&self) -> bool {
        !self.mapped.is_empty()
    }

    /// The function at address `ip`: a JIT's, or a mapped file's symbol.
    pub fn name(&self, ip: u64) -> Option<String> {
        if let Some(name) = self.jit.iter().find_map(|map| map.name(ip)) {
            return Some(name.to_string());
        }
        let (path, offset) = self.mapped.iter().find_map(|m| m.locate(ip))?;
        let mut symbols = self.symbols.borrow_mut();
        let file = symbols.entry(path.to_string()).or_insert_with(|| FileSymbols::read(path));
        file.as_ref()?.at_offset(offset).map(String::from)
    }

    /// The file mapped at address `ip`, by its name.
    pub fn object(&self, ip: u64) -> Option<&str> {
        let (path, _) = self.mapped.iter().find_map(|m| m.locate(ip))?;
        path.rsplit('/').next()
    }
}

/// The largest file whose symbols are read (libjvm.so is 20 MB).
const MAX_FILE: u64 = 1 << 30;

/// An ELF file's functions by address, and where its loaded segments lie in the file.
#[derive(Debug)]
struct FileSymbols {
    /// (offset in the file, size, address) of each segment.
    segments: Vec<(u64, u64, u64)>,
    /// (address, end, name), by address.
    functions: Vec<(u64, u64, String)>,
}

impl FileSymbols {
    /// The file's symbols (its symbol table and its dynamic ones), if it is an ELF file here.
    /// The sandbox's root is the host's, so its paths are the host's.
    fn read(path: &str) -> Option<FileSymbols> {
        // A device a process mapped (/dev/zero) is not read; nor a file larger than any library.
        let meta = std::fs::metadata(path).ok()?;
        if !meta.is_file() || meta.len() > MAX_FILE {
            return None;
        }
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        let segments = file
            .segments()
            .map(|s| {
                let (offset, size) = s.file_range();
                (offset, size, s.address())
            })
            .collect();
        let mut functions: Vec<(u64, u64, String)> = file
            .symbols()
            .chain(file.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .filter_map(|s| Some((s.address(), s.address() + s.size(), s.name().ok()?.to_string())))
            .collect();
        functions.sort();
        functions.dedup_by_key(|f| f.0);
        Some(FileSymbols { segments, functions })
    }

    fn at_offset(&self, offset: u64) -> Option<&str> {
        let (file_offset, _, address) =
            self.segments.iter().find(|(start, size, _)| (*start..start + size).contains(&offset))?;
        let at = address + (offset - file_offset);
        let after = self.functions.partition_point(|f| f.0 <= at);
        let (_, end, name) = self.functions.get(after.checked_sub(1)?)?;
        (at < *end).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_a_mapped_file_is_named_by_the_files_symbols() {
        // This test's own binary, as its maps show it: one of its functions found at its address.
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let names = CodeNames::new(Vec::new(), vec![MappedFiles::parse(&maps)]);
        let ip = an_address_in_a_mapped_file_is_named_by_the_files_symbols as fn() as usize as u64;
        let name = names.name(ip + 1).expect("the function's own name");
        assert!(name.contains("an_address_in_a_mapped_file_is_named_by_the_files_symbols"), "{name}");
        let exe = std::env::current_exe().unwrap();
        assert_eq!(names.object(ip), exe.file_name().and_then(|n| n.to_str()));
        assert_eq!(names.name(0x10), None);
    }

    #[test]
    fn only_executable_mappings_of_files_are_kept() {
        let maps = MappedFiles::parse(
            "00065000-0006a000 r-xp 00000000 00:00 0                  [usertrap]\n\
             7eefa8200000-7eefa8610000 rwxp 00000000 00:00 0\n\
             7f0000000000-7f0000001000 r--p 00000000 fe:00 325   /usr/lib/libc.so.6\n\
             7f0000001000-7f0000005000 r-xp 00001000 fe:00 325   /usr/lib/libc.so.6\n\
             garbage\n",
        );
        assert_eq!(maps.locate(0x7f0000001010), Some(("/usr/lib/libc.so.6", 0x1010)));
        assert_eq!(maps.locate(0x7f0000000010), None, "not executable");
        assert_eq!(maps.locate(0x65010), None, "no file");
        assert_eq!(maps.locate(0x7f0000005000), None, "past its end");
    }
}
