//! cassandra-stress's output, character for character: the interval header and rows, the
//! `Results:` block and the per-thread-count table, with Java's number formatting (`%,8.0f`
//! rounds half up from the shortest decimal form; NaN and Infinity spelled as Java does). The
//! client-side GC columns are there and zero: there is no garbage collector here.

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;

use super::metrics::{ByOp, Interval};
use super::settings::group_digits;

pub const HEADER_FIELDS: [&str; 19] = [
    "type",
    "total ops",
    "op/s",
    "pk/s",
    "row/s",
    "mean",
    "med",
    ".95",
    ".99",
    ".999",
    "max",
    "time",
    "stderr",
    "errors",
    "gc: #",
    "max ms",
    "sum ms",
    "sdv ms",
    "mb",
];

/// Java's `%.{precision}f` (`%,.{precision}f` with `grouping`).
pub fn java_float(value: f64, precision: usize, grouping: bool) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    // Java rounds the shortest decimal that identifies the double, half up.
    let shortest = format!("{}", value.abs());
    let (int_part, frac_part) = shortest.split_once('.').unwrap_or((&shortest, ""));
    let mut digits: Vec<u8> =
        int_part.bytes().chain(frac_part.bytes().chain(std::iter::repeat(b'0')).take(precision)).collect();
    if frac_part.as_bytes().get(precision).is_some_and(|d| *d >= b'5') {
        let mut i = digits.len();
        loop {
            if i == 0 {
                digits.insert(0, b'1');
                break;
            }
            i -= 1;
            if digits[i] == b'9' {
                digits[i] = b'0';
            } else {
                digits[i] += 1;
                break;
            }
        }
    }
    let int_len = digits.len() - precision;
    let int_digits = std::str::from_utf8(&digits[..int_len]).expect("ascii");
    let mut out = String::new();
    if value.is_sign_negative() {
        out.push('-');
    }
    for (i, c) in int_digits.chars().enumerate() {
        if grouping && i > 0 && (int_digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if precision > 0 {
        out.push('.');
        out.push_str(std::str::from_utf8(&digits[int_len..]).expect("ascii"));
    }
    out
}

/// The interval table's header line.
pub fn header(prefix: &str) -> String {
    let f = HEADER_FIELDS;
    format!(
        "{prefix}{:<10}{:>10},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>7},{:>9},{:>7},{:>7},{:>8},{:>8},{:>8},{:>8}",
        f[0],
        f[1],
        f[2],
        f[3],
        f[4],
        f[5],
        f[6],
        f[7],
        f[8],
        f[9],
        f[10],
        f[11],
        f[12],
        f[13],
        f[14],
        f[15],
        f[16],
        f[17],
        f[18]
    )
}

/// One interval row: rates and latencies of `interval`, the running total and time of `total`.
pub fn row(prefix: &str, kind: &str, interval: &Interval, total: &Interval, uncertainty: f64) -> String {
    let j = java_float;
    format!(
        "{prefix}{:<10}{:>10},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>8},{:>7},{:>9},{:>7},{:>7},{:>8},{:>8},{:>8},{:>8}",
        format!("{kind},"),
        total.operations(),
        j(interval.op_rate(), 0, false),
        j(interval.partition_rate(), 0, false),
        j(interval.row_rate(), 0, false),
        j(interval.mean_ms(), 1, false),
        j(interval.percentile_ms(50.0), 1, false),
        j(interval.percentile_ms(95.0), 1, false),
        j(interval.percentile_ms(99.0), 1, false),
        j(interval.percentile_ms(99.9), 1, false),
        j(interval.max_ms(), 1, false),
        j(total.run_time_ms() as f64 / 1000.0, 1, false),
        j(uncertainty, 5, false),
        interval.errors,
        "0",
        "0",
        "0",
        "0",
        "0",
    )
}

/// `[WRITE: 1,234 op/s, READ: …]`: one figure per operation type.
fn per_op(by_op: &ByOp, unit: &str, value: impl Fn(&Interval) -> String) -> String {
    let items: Vec<String> = by_op
        .iter()
        .map(|(op, interval)| {
            if unit.is_empty() {
                format!("{op}: {}", value(interval))
            } else {
                format!("{op}: {} {unit}", value(interval))
            }
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// The `Results:` block, as cassandra-stress prints it after a run.
pub fn results(total: &Interval, by_op: &ByOp) -> String {
    let j = java_float;
    let mut o = String::from("\n\nResults:\n");
    let rate = |v: f64| format!("{:>8}", j(v, 0, true));
    let ms = |v: f64| format!("{:>6}", j(v, 1, false));
    let _ = writeln!(
        o,
        "Op rate                   : {} op/s  {}",
        rate(total.op_rate()),
        per_op(by_op, "op/s", |i| j(i.op_rate(), 0, true))
    );
    let _ = writeln!(
        o,
        "Partition rate            : {} pk/s  {}",
        rate(total.partition_rate()),
        per_op(by_op, "pk/s", |i| j(i.partition_rate(), 0, true))
    );
    let _ = writeln!(
        o,
        "Row rate                  : {} row/s {}",
        rate(total.row_rate()),
        per_op(by_op, "row/s", |i| j(i.row_rate(), 0, true))
    );
    let _ = writeln!(
        o,
        "Latency mean              : {} ms {}",
        ms(total.mean_ms()),
        per_op(by_op, "ms", |i| j(i.mean_ms(), 1, true))
    );
    for (label, p) in [
        ("median           ", 50.0),
        ("95th percentile  ", 95.0),
        ("99th percentile  ", 99.0),
        ("99.9th percentile", 99.9),
    ] {
        let _ = writeln!(
            o,
            "Latency {label} : {} ms {}",
            ms(total.percentile_ms(p)),
            per_op(by_op, "ms", |i| j(i.percentile_ms(p), 1, true))
        );
    }
    let _ = writeln!(
        o,
        "Latency max               : {} ms {}",
        ms(total.max_ms()),
        per_op(by_op, "ms", |i| j(i.max_ms(), 1, true))
    );
    let count = |n: u64| format!("{:>10}", group_digits(n as i64));
    let _ = writeln!(
        o,
        "Total partitions          : {} {}",
        count(total.partitions),
        per_op(by_op, "", |i| group_digits(i.partitions as i64))
    );
    let _ = writeln!(
        o,
        "Total errors              : {} {}",
        count(total.errors),
        per_op(by_op, "", |i| group_digits(i.errors as i64))
    );
    o.push_str("Total GC count            : 0\n");
    o.push_str("Total GC memory           : 0.000 KiB\n");
    o.push_str("Total GC time             :    0.0 seconds\n");
    o.push_str("Avg GC time               :    NaN ms\n");
    o.push_str("StdDev GC time            :    0.0 ms\n");
    let seconds = total.run_time_ms() / 1000;
    let _ =
        writeln!(o, "Total operation time      : {:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    o.push('\n');
    o
}

/// Where output goes: standard output, and `-log file=` when given.
pub struct Out {
    file: Option<File>,
    quiet: bool,
}

impl Out {
    pub fn new(file: Option<File>) -> Out {
        Out { file, quiet: false }
    }

    /// An output that says nothing (warm-up runs).
    pub fn quiet() -> Out {
        Out { file: None, quiet: true }
    }

    pub fn line(&mut self, text: &str) {
        self.text(&format!("{text}\n"));
    }

    pub fn text(&mut self, text: &str) {
        if self.quiet {
            return;
        }
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(text.as_bytes());
        let _ = stdout.flush();
        if let Some(f) = &mut self.file {
            let _ = f.write_all(text.as_bytes());
        }
    }
}

/// One interval as the table printed it: when it ended (seconds since the run began), its
/// rate, its latency (mean and max, ms) and its errors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Printed {
    pub time: f64,
    pub op_rate: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    pub errors: u64,
}

/// The `total` rows of an output's interval table, read back.
pub fn total_rows(output: &str) -> Vec<Printed> {
    output
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != HEADER_FIELDS.len() || fields[0] != "total" {
                return None;
            }
            Some(Printed {
                time: fields[11].parse().ok()?,
                op_rate: fields[2].parse().ok()?,
                mean_ms: fields[5].parse().ok()?,
                max_ms: fields[10].parse().ok()?,
                errors: fields[13].parse().ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_format_like_java() {
        assert_eq!(java_float(0.15, 1, false), "0.2", "half up from the shortest decimal");
        assert_eq!(java_float(2.5, 0, false), "3");
        assert_eq!(java_float(1234567.89, 0, true), "1,234,568");
        assert_eq!(java_float(9.96, 1, false), "10.0");
        assert_eq!(java_float(0.000012345, 5, false), "0.00001");
        assert_eq!(java_float(-0.04, 1, false), "-0.0");
        assert_eq!(java_float(f64::NAN, 1, false), "NaN");
        assert_eq!(java_float(f64::INFINITY, 0, false), "Infinity");
        assert_eq!(java_float(1e20, 0, true), "100,000,000,000,000,000,000");
    }

    #[test]
    fn the_header_is_cassandra_stress_s() {
        assert_eq!(
            header(""),
            "type       total ops,    op/s,    pk/s,   row/s,    mean,     med,     .95,     .99,    .999,     max,   time,   stderr, errors,  gc: #,  max ms,  sum ms,  sdv ms,      mb"
        );
    }

    #[test]
    fn the_total_rows_read_back_as_printed() {
        let text = format!(
            "{}\ntotal,          1234,     500,     500,     500,     1.0,     0.9,     2.0,     3.0,     4.0,     5.0,    2.0,  0.01234,      3,      0,       0,       0,       0,       0\nResults:\n",
            header("")
        );
        assert_eq!(total_rows(&text), [Printed { time: 2.0, op_rate: 500.0, mean_ms: 1.0, max_ms: 5.0, errors: 3 }]);
        assert!(total_rows("total, not, a, row").is_empty());
    }
}
