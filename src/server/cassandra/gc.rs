//! The node's own account of its garbage collector: Cassandra's GCInspector logs each collection
//! that took `gc_log_threshold` (200 ms) or more, at INFO, as it ends. A ring of three 512 MB
//! heaps on this 2-core machine: young collections took a median 23 ms with nothing beside it,
//! 27-52 ms with another lane's tests beside it, and up to 530-730 ms in each of those runs. The
//! node answers nothing meanwhile, and at QUORUM neither does a coordinator that needs its
//! acknowledgement.

use std::time::{Duration, SystemTime};

/// One collection the node logged: when it ended (the log's clock, UTC) and how long it took.
#[derive(Debug)]
pub struct GcPause {
    pub ended: SystemTime,
    pub took: Duration,
}

/// The lines of a node's log (system.log, or its console's copy) that are GCInspector's.
pub fn inspector_lines(log: &str) -> impl Iterator<Item = &str> {
    log.lines().filter(|l| l.contains(" GCInspector.java:"))
}

/// The collections in a node's log, from lines such as
/// `INFO  [Notification Thread] 2026-12-06 22:58:02,424 GCInspector.java:286 - G1 Young Generation GC in 331ms.  …`
/// (logback's ISO 8601 date, which the pods and this project's nodes write in UTC).
pub fn pauses(log: &str) -> Vec<GcPause> {
    inspector_lines(log).filter_map(pause).collect()
}

fn pause(line: &str) -> Option<GcPause> {
    let after_thread = &line[line.find("] ")? + 2..];
    let date = after_thread.get(..23)?.replacen(' ', "T", 1).replacen(',', ".", 1);
    let ended: jiff::civil::DateTime = date.parse().ok()?;
    let ended = ended.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    let message = &after_thread[after_thread.find(" - ")? + 3..];
    let (_, rest) = message.split_once(" GC in ")?;
    let ms: u64 = rest.split_once("ms")?.0.trim().parse().ok()?;
    Some(GcPause { ended: SystemTime::from(ended), took: Duration::from_millis(ms) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_collection_is_read_from_the_inspectors_line() {
        let log = "INFO  [main] 2026-12-06 22:57:01,000 StorageService.java:1 - Node is up\n\
            INFO  [Notification Thread] 2026-12-06 22:58:02,424 GCInspector.java:286 - G1 Young Generation GC in 331ms.  G1 Eden Space: 117440512 -> 0; \n\
            WARN  [Notification Thread] 2026-12-06 22:58:09,001 GCInspector.java:291 - G1 Old Generation GC in 1204ms.  G1 Old Gen: 1 -> 0; \n\
            INFO  [Notification Thread] 2026-12-06 22:58:10,001 GCInspector.java:286 - not a collection\n";
        let found = pauses(log);
        assert_eq!(found.len(), 2, "{found:?}");
        let ended = found[0].ended.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        // 2026-12-06T22:58:02.424Z
        assert_eq!(ended, Duration::from_millis(1_796_597_882_424));
        assert_eq!((found[0].took, found[1].took), (Duration::from_millis(331), Duration::from_millis(1204)));
        assert_eq!(inspector_lines(log).count(), 3);
    }
}
