//! The server's own figures of the load's table, as `nodetool` prints them in each pod.

use crate::store::Sample;

/// What one node's `nodetool tablestats` and `tablehistograms` say of the load's table.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Figures {
    sstables: Option<f64>,
    live_bytes: Option<f64>,
    /// (p50, p99) in µs, where the node saw such operations.
    write: Option<(f64, f64)>,
    read: Option<(f64, f64)>,
}

pub(super) fn server_figures(tablestats: &str, histograms: &str) -> Figures {
    let field = |name: &str| {
        tablestats
            .lines()
            .filter_map(|l| l.trim().strip_prefix(name))
            .find_map(|v| v.split_whitespace().next()?.parse::<f64>().ok())
    };
    let row = |label: &str| -> Option<Vec<f64>> {
        let line = histograms.lines().find(|l| l.split_whitespace().next() == Some(label))?;
        line.split_whitespace().skip(1).map(|v| v.parse().ok()).collect()
    };
    let (p50, p99) = (row("50%").unwrap_or_default(), row("99%").unwrap_or_default());
    // Columns: read latency, write latency (µs), SSTables, partition size, cell count; a
    // latency of 0 means the node saw no such operation.
    let latency = |column: usize| match (p50.get(column), p99.get(column)) {
        (Some(a), Some(b)) if *b > 0.0 => Some((*a, *b)),
        _ => None,
    };
    Figures {
        sstables: field("SSTable count:"),
        live_bytes: field("Space used (live):"),
        write: latency(1),
        read: latency(0),
    }
}

/// The cluster's figures: what its nodes hold, summed; the slowest node's latencies.
pub(super) fn combine_figures(nodes: &[Figures]) -> Vec<Sample> {
    let mut out = Vec::new();
    let sum = |f: fn(&Figures) -> Option<f64>| nodes.iter().filter_map(f).reduce(|a, b| a + b);
    if let Some(n) = sum(|f| f.sstables) {
        out.push(Sample::new("server_sstables", n, "files"));
    }
    if let Some(bytes) = sum(|f| f.live_bytes) {
        out.push(Sample::new("server_table_size", bytes, "B"));
    }
    for (metric, pick) in [
        ("server_local_write", (|f: &Figures| f.write) as fn(&Figures) -> Option<(f64, f64)>),
        ("server_local_read", |f: &Figures| f.read),
    ] {
        let worst = nodes.iter().filter_map(pick).reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)));
        if let Some((p50, p99)) = worst {
            out.push(Sample::new(format!("{metric}_p50"), p50, "us"));
            out.push(Sample::new(format!("{metric}_p99"), p99, "us"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLESTATS: &str = "Total number of tables: 1\n----------------\nKeyspace : keyspace1\n\tRead Count: 0\n\tWrite Count: 4000\n\t\tTable: standard1\n\t\tSSTable count: 2\n\t\tOld SSTable count: 0\n\t\tSpace used (live): 1048576\n\t\tSpace used (total): 1048576\n\t\tLocal write count: 4000\n\t\tLocal write latency: 0.021 ms\n";
    const HISTOGRAMS: &str = "keyspace1/standard1 histograms\nPercentile      Read Latency     Write Latency          SSTables    Partition Size        Cell Count\n                    (micros)          (micros)                             (bytes)                  \n50%                     0.00             17.08              0.00               258                 5\n75%                     0.00             24.60              0.00               258                 5\n99%                     0.00             88.15              0.00               258                 5\nMin                     0.00              2.30              0.00               216                 5\nMax                     0.00           6866.96              0.00               258                 5\n";

    #[test]
    fn nodetool_figures_are_read_and_a_cluster_sums_sizes_and_keeps_the_worst_latency() {
        let one = server_figures(TABLESTATS, HISTOGRAMS);
        assert_eq!(
            one,
            Figures { sstables: Some(2.0), live_bytes: Some(1048576.0), write: Some((17.08, 88.15)), read: None }
        );
        let two = Figures { sstables: Some(1.0), live_bytes: Some(1.0), write: Some((20.0, 50.0)), read: None };
        let samples = combine_figures(&[one, two]);
        let value = |m: &str| samples.iter().find(|s| s.metric == m).map(|s| s.value);
        assert_eq!(value("server_sstables"), Some(3.0));
        assert_eq!(value("server_table_size"), Some(1048577.0));
        assert_eq!(value("server_local_write_p50"), Some(20.0));
        assert_eq!(value("server_local_write_p99"), Some(88.15));
        assert_eq!(value("server_local_read_p99"), None, "no reads: no read latency");
        assert_eq!(server_figures("", ""), Figures::default());
    }
}
