//! `-log hdrfile=`: latency histograms per interval in the HdrHistogram interval log format
//! (v1.3, as cassandra-stress writes it: tags `WRITE-st` service, `WRITE-rt` response,
//! `WRITE-wt` wait; nanosecond values, maxima in milliseconds), and `isobench cql merge`, which
//! folds the logs of several loaders that split one key range into one summary.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use hdrhistogram::Histogram;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};

use super::metrics::Nanos;
use super::output::java_float;
use super::settings::group_digits;

/// Says which series the writer reported as latency, so a merge reports the same one.
const LATENCY_COMMENT: &str = "#isobench-cql latency=";

pub struct HdrLog {
    path: PathBuf,
    out: BufWriter<File>,
    serializer: V2DeflateSerializer,
    bytes: Vec<u8>,
    /// Wall-clock milliseconds at the run's epoch (Nanos 0).
    epoch_ms: f64,
    base_ms: f64,
}

impl HdrLog {
    /// Creates the log; `response_latency` says whether `-rt` is the series reported as latency.
    pub fn create(path: &Path, epoch: SystemTime, response_latency: bool) -> Result<HdrLog> {
        let file = File::create(path).with_context(|| format!("-log hdrfile={}: cannot create it", path.display()))?;
        let epoch_ms = epoch.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64() * 1000.0;
        let base_ms = (epoch_ms / 1000.0).floor() * 1000.0;
        let mut log = HdrLog {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            serializer: V2DeflateSerializer::new(),
            bytes: Vec::new(),
            epoch_ms,
            base_ms,
        };
        let base = base_ms / 1000.0;
        let header = format!(
            "#Logging op latencies for Cassandra Stress\n#[Histogram log format version 1.3]\n#[BaseTime: {base:.3} (seconds since epoch)]\n#[StartTime: {base:.3} (seconds since epoch)]\n{LATENCY_COMMENT}{}\n\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
            if response_latency { "rt" } else { "st" }
        );
        log.out.write_all(header.as_bytes()).and_then(|_| log.out.flush()).with_context(|| log.context())?;
        Ok(log)
    }

    fn context(&self) -> String {
        format!("writing the HDR log {}", self.path.display())
    }

    /// Appends one interval's histogram (nothing when it is empty, as cassandra-stress does).
    pub fn write(&mut self, tag: &str, start: Nanos, end: Nanos, h: &Histogram<u64>) -> Result<()> {
        if h.is_empty() {
            return Ok(());
        }
        self.bytes.clear();
        self.serializer
            .serialize(h, &mut self.bytes)
            .map_err(|e| anyhow::anyhow!("{e:?}"))
            .with_context(|| self.context())?;
        let at = |ns: Nanos| (self.epoch_ms + ns as f64 / 1e6).floor();
        let (start_s, end_s) = ((at(start) - self.base_ms) / 1000.0, (at(end) - self.base_ms) / 1000.0);
        let line = format!(
            "Tag={tag},{start_s:.3},{:.3},{:.3},{}\n",
            end_s - start_s,
            h.max() as f64 / 1e6,
            base64::engine::general_purpose::STANDARD.encode(&self.bytes)
        );
        self.out.write_all(line.as_bytes()).with_context(|| self.context())
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().with_context(|| self.context())
    }
}

/// One operation type's merged histogram and the wall-clock span it covers (seconds).
pub struct Span {
    pub histogram: Histogram<u64>,
    pub start: f64,
    pub end: f64,
}

impl Span {
    /// Operations per second over the span (0 for an empty one).
    pub fn rate(&self) -> f64 {
        if self.end > self.start { self.histogram.len() as f64 / (self.end - self.start) } else { 0.0 }
    }
}

/// The spans as one: every histogram added, the span from the earliest start to the latest end.
fn total<'a>(spans: impl IntoIterator<Item = &'a Span>) -> Result<Span> {
    let mut total = Span { histogram: Histogram::new(3).expect("valid"), start: f64::MAX, end: f64::MIN };
    for m in spans {
        total.histogram.add(&m.histogram).map_err(|e| anyhow::anyhow!("{e:?}"))?;
        (total.start, total.end) = (total.start.min(m.start), total.end.max(m.end));
    }
    Ok(total)
}

/// One latency series of the logs ("st" service time, "rt" response time): every operation's
/// histograms in every log, merged.
pub fn series(paths: &[PathBuf], series: &str) -> Result<Span> {
    let mut by_tag = BTreeMap::new();
    for path in paths {
        read(path, &mut by_tag)?;
    }
    total(by_tag.iter().filter(|(tag, _)| tag.ends_with(&format!("-{series}"))).map(|(_, span)| span))
}

/// `isobench cql merge a.hdr b.hdr …`: the Results block of all the logs together. Logs hold
/// latencies, so partition and row counts are not in it.
pub fn merge(paths: &[PathBuf]) -> Result<String> {
    if paths.is_empty() {
        bail!("{} merge: name the HDR logs to merge (written with -log hdrfile=…)", crate::program());
    }
    let mut by_tag: BTreeMap<String, Span> = BTreeMap::new();
    let mut latency = None::<String>;
    for path in paths {
        if let Some(series) = read(path, &mut by_tag)? {
            match &latency {
                Some(seen) if *seen != series => bail!(
                    "{}: reports {series} latency while an earlier log reports {seen}; merge logs of one kind of run",
                    path.display()
                ),
                _ => latency = Some(series),
            }
        }
    }
    let series = latency.unwrap_or_else(|| "st".into());
    let mut ops: BTreeMap<String, &Span> = BTreeMap::new();
    for (tag, merged) in &by_tag {
        if let Some(op) = tag.strip_suffix(&format!("-{series}")) {
            ops.insert(op.to_string(), merged);
        }
    }
    if ops.is_empty() {
        bail!(
            "the logs hold no \"-{series}\" histograms (tags: {})",
            by_tag.keys().cloned().collect::<Vec<_>>().join(", ")
        );
    }
    let total = total(ops.values().copied())?;
    let rate = |m: &Span| m.histogram.len() as f64 / (m.end - m.start);
    let ms = |v: u64| v as f64 / 1e6;
    let bracket = |f: &dyn Fn(&Span) -> String| {
        format!("[{}]", ops.iter().map(|(op, m)| format!("{op}: {}", f(m))).collect::<Vec<_>>().join(", "))
    };
    let mut o = format!(
        "Merged {} HDR logs ({} latency): {}\n\n\nResults:\n",
        paths.len(),
        if series == "rt" { "response-time" } else { "service-time" },
        paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
    );
    o += &format!(
        "Op rate                   : {:>8} op/s  {}\n",
        java_float(rate(&total), 0, true),
        bracket(&|m| format!("{} op/s", java_float(rate(m), 0, true)))
    );
    o += &format!(
        "Latency mean              : {:>6} ms {}\n",
        java_float(total.histogram.mean() / 1e6, 1, false),
        bracket(&|m| format!("{} ms", java_float(m.histogram.mean() / 1e6, 1, true)))
    );
    for (label, p) in [
        ("median           ", 50.0),
        ("95th percentile  ", 95.0),
        ("99th percentile  ", 99.0),
        ("99.9th percentile", 99.9),
    ] {
        o += &format!(
            "Latency {label} : {:>6} ms {}\n",
            java_float(ms(total.histogram.value_at_percentile(p)), 1, false),
            bracket(&|m| format!("{} ms", java_float(ms(m.histogram.value_at_percentile(p)), 1, true)))
        );
    }
    o += &format!(
        "Latency max               : {:>6} ms {}\n",
        java_float(ms(total.histogram.max()), 1, false),
        bracket(&|m| format!("{} ms", java_float(ms(m.histogram.max()), 1, true)))
    );
    o += &format!(
        "Total operations          : {:>10} {}\n",
        group_digits(total.histogram.len() as i64),
        bracket(&|m| group_digits(m.histogram.len() as i64))
    );
    let seconds = figures::units::seconds(total.end - total.start).as_secs();
    o += &format!("Total operation time      : {:02}:{:02}:{:02}\n", seconds / 3600, seconds / 60 % 60, seconds % 60);
    Ok(o)
}

/// Every histogram of a log, merged per tag (`WRITE-st`, `WRITE-rt` …), with its span.
pub fn histograms(path: &Path) -> Result<BTreeMap<String, Span>> {
    let mut by_tag = BTreeMap::new();
    read(path, &mut by_tag)?;
    Ok(by_tag)
}

/// Every histogram of a log's bytes (`name` for errors), merged per tag.
pub fn histograms_of(name: &str, data: &[u8]) -> Result<BTreeMap<String, Span>> {
    let mut by_tag = BTreeMap::new();
    read_bytes(name, data, &mut by_tag)?;
    Ok(by_tag)
}

/// Adds a log's intervals to `by_tag`; the latency series its comment names ("rt" or "st").
fn read(path: &Path, by_tag: &mut BTreeMap<String, Span>) -> Result<Option<String>> {
    let data = std::fs::read(path).with_context(|| format!("reading the HDR log {}", path.display()))?;
    read_bytes(&path.display().to_string(), &data, by_tag)
}

fn read_bytes(name: &str, data: &[u8], by_tag: &mut BTreeMap<String, Span>) -> Result<Option<String>> {
    let text = String::from_utf8_lossy(data);
    let latency = text.lines().find_map(|l| l.strip_prefix(LATENCY_COMMENT)).map(str::to_string);
    let mut deserializer = Deserializer::new();
    let mut base = 0.0;
    let mut intervals = 0;
    for entry in IntervalLogIterator::new(data) {
        let entry = entry.map_err(|e| anyhow::anyhow!("{name}: not an HdrHistogram interval log ({e:?})"))?;
        match entry {
            LogEntry::BaseTime(t) => base = t.as_secs_f64(),
            LogEntry::StartTime(_) => {}
            LogEntry::Interval(i) => {
                let tag = i.tag().map(|t| t.as_str().to_string()).unwrap_or_default();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(i.encoded_histogram())
                    .with_context(|| format!("{name}: an interval's histogram is not base64"))?;
                let h: Histogram<u64> = deserializer
                    .deserialize(&mut bytes.as_slice())
                    .map_err(|e| anyhow::anyhow!("{name}: an interval's histogram does not decode ({e:?})"))?;
                let start = base + i.start_timestamp().as_secs_f64();
                let end = start + i.duration().as_secs_f64();
                let merged = by_tag.entry(tag).or_insert_with(|| Span {
                    histogram: Histogram::new(3).expect("valid"),
                    start,
                    end,
                });
                merged.histogram.add(&h).map_err(|e| anyhow::anyhow!("{e:?}"))?;
                (merged.start, merged.end) = (merged.start.min(start), merged.end.max(end));
                intervals += 1;
            }
        }
    }
    if intervals == 0 {
        bail!("{name}: holds no interval histograms (was the run empty?)");
    }
    Ok(latency)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn log_with(path: &Path, epoch: SystemTime, values: &[u64]) {
        let mut log = HdrLog::create(path, epoch, false).unwrap();
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in values {
            h.record(*v).unwrap();
        }
        log.write("WRITE-st", 0, 1_000_000_000, &h).unwrap();
        log.write("WRITE-rt", 0, 1_000_000_000, &Histogram::new(3).unwrap()).unwrap();
        log.flush().unwrap();
    }

    #[test]
    fn logs_of_two_loaders_merge_into_one_summary() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.hdr"), dir.path().join("b.hdr"));
        let epoch = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        log_with(&a, epoch, &[1_000_000; 100]);
        log_with(&b, epoch, &[3_000_000; 100]);
        let text = std::fs::read_to_string(&a).unwrap();
        assert!(text.contains("#[BaseTime: 1700000000.000 (seconds since epoch)]\n"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("Tag=WRITE-st,0.000,1.000,1.000,")), "{text}");
        assert!(!text.contains("WRITE-rt"), "empty histograms are not logged");
        let summary = merge(&[a, b]).unwrap();
        assert!(summary.contains("Op rate                   :      200 op/s  [WRITE: 200 op/s]"), "{summary}");
        assert!(summary.contains("Latency max               :    3.0 ms"), "{summary}");
        assert!(summary.contains("Total operations          :        200 [WRITE: 200]"), "{summary}");
    }

    #[test]
    fn a_file_that_is_not_a_log_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.hdr");
        std::fs::write(&p, "hello\n").unwrap();
        assert!(merge(&[p]).unwrap_err().to_string().contains("x.hdr: not an HdrHistogram interval log"));
    }
}
