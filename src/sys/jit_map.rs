//! A JIT's perf map: `START SIZE NAME` a line (hexadecimal addresses), the names of the code a
//! JIT wrote, as the JVM writes `/tmp/perf-PID.map` at its exit with `-XX:+DumpPerfMapAtExit`
//! (compiled methods as `void java.lang.Object.<init>()`, the interpreter as `Interpreter`).
//! perf reads such a map only for anonymous memory of the process it names; under gVisor the
//! workload's memory is the sentry's memory file in a stub process of another pid, so the
//! sampled addresses are looked up here, in the map the agent fetched from the sandbox.

/// Code ranges by their start, for lookups by address.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct JitMap {
    ranges: Vec<(u64, u64, String)>,
}

/// The JVM's flags that write the map when it exits (its code cache then, once: nothing while
/// it runs).
pub const JVM_FLAGS: [&str; 2] = ["-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit"];

/// What the map calls the JVM's bytecode interpreter.
pub const INTERPRETER: &str = "Interpreter";

/// Where a process's map is, as the JVM and perf name it.
pub fn path_of(pid: i32) -> std::path::PathBuf {
    std::path::PathBuf::from(format!("/tmp/perf-{pid}.map"))
}

impl JitMap {
    /// The lines that parse; others (a map cut short) are passed over.
    pub fn parse(text: &str) -> JitMap {
        let mut ranges: Vec<(u64, u64, String)> = text
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ' ');
                let hex = |f: Option<&str>| u64::from_str_radix(f?.trim_start_matches("0x"), 16).ok();
                let (start, size) = (hex(fields.next())?, hex(fields.next())?);
                let name = fields.next()?.trim();
                (size > 0 && !name.is_empty()).then(|| (start, start.saturating_add(size), name.to_string()))
            })
            .collect();
        ranges.sort_by_key(|r| r.0);
        JitMap { ranges }
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// The code at `ip`, if the map has it.
    pub fn name(&self, ip: u64) -> Option<&str> {
        let after = self.ranges.partition_point(|r| r.0 <= ip);
        let (_, end, name) = self.ranges.get(after.checked_sub(1)?)?;
        (ip < *end).then_some(name.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_named_by_the_range_that_holds_it() {
        let map = JitMap::parse(
            "0x00007f815c940b80 0x0000000000017de0 Interpreter\n\
             0x00007f81554001a0 0x0000000000000110 void java.lang.Object.<init>()\n\
             garbage\n\
             0x00007f8155400300 0x0 empty\n",
        );
        assert_eq!(map.name(0x7f81554001a0), Some("void java.lang.Object.<init>()"));
        assert_eq!(map.name(0x7f81554002af), Some("void java.lang.Object.<init>()"));
        assert_eq!(map.name(0x7f81554002b0), None, "past its end");
        assert_eq!(map.name(0x7f815c940b80 + 0x100), Some("Interpreter"));
        assert_eq!(map.name(0x10), None);
        assert!(JitMap::parse("").is_empty());
    }
}
