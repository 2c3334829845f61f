//! The Prometheus text format, as a runtime exports its counters (`runsc export-metrics`):
//! `name{label="…",…} value [timestamp]` lines, `#` comments.

use std::collections::BTreeMap;

/// Each metric's value summed over its label sets. Lines of any other shape are passed over.
pub fn prometheus_counters(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        // A label's value may hold spaces: the name ends at '{' or the first space, the value
        // follows the closing '}'.
        let (name, rest) = match line.find(['{', ' ']) {
            Some(at) if line[at..].starts_with('{') => match line[at..].rfind('}') {
                Some(close) => (&line[..at], &line[at + close + 1..]),
                None => continue,
            },
            Some(at) => (&line[..at], &line[at..]),
            None => continue,
        };
        let Some(value) = rest.split_whitespace().next().and_then(|v| v.parse::<f64>().ok()) else { continue };
        // A metric's name, not a line of prose ("Wrote 9118 bytes of … data"), which runsc adds.
        let named = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        if named && value.is_finite() {
            *out.entry(name.to_string()).or_default() += value;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_over_their_labels() {
        let text = "# HELP runsc_fs_opens Number of file opens.\n# TYPE runsc_fs_opens counter\nrunsc_fs_opens{iteration=\"3szk\",sandbox=\"isobench-1\"} 1498 1795947316197\n\nrunsc_netstack_tcp_segments_sent{sandbox=\"a b\"} 561 1\nrunsc_netstack_tcp_segments_sent{sandbox=\"c\"} 39 1\nplain 2.5\nbroken{x=\"1\" 3\nnan_one NaN\nWrote 9118 bytes of Prometheus metric data to stdout\n";
        let counters = prometheus_counters(text);
        assert_eq!(counters["runsc_fs_opens"], 1498.0);
        assert_eq!(counters["runsc_netstack_tcp_segments_sent"], 600.0);
        assert_eq!(counters["plain"], 2.5);
        assert_eq!(counters.len(), 3, "{counters:?}");
    }
}
