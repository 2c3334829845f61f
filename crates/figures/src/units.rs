//! Parsing and printing of the quantities people write in suites and read in reports:
//! sizes ("4k", "2G"), durations ("10s", "500ms") and percentages ("10%").

use std::time::Duration;

/// A byte count written the way fio reads it: powers of 1024, suffix k/m/g/t (any case),
/// optionally followed by "i", "iB" or "B" ("4k", "2G", "1GiB", "512MB").
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(format!("\"{text}\" is not a size; write a number with an optional unit, like 4k, 512M or 2G"));
    }
    let number: u64 = t[..digits_end].parse().map_err(|_| format!("\"{text}\" is too large"))?;
    let suffix = t[digits_end..].to_ascii_lowercase();
    let shift = match suffix.trim_end_matches('b').trim_end_matches('i') {
        "" => 0,
        "k" => 10,
        "m" => 20,
        "g" => 30,
        "t" => 40,
        _ => {
            return Err(format!(
                "\"{text}\" has an unknown unit \"{}\"; use k, M, G or T (powers of 1024)",
                &t[digits_end..]
            ));
        }
    };
    number.checked_mul(1u64 << shift).ok_or_else(|| format!("\"{text}\" is too large"))
}

/// A duration with a unit: "500ms", "10s", "2m", "1h" (a bare number means seconds, as in fio).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let number_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let number: f64 = t[..number_end]
        .parse()
        .map_err(|_| format!("\"{text}\" is not a duration; write a number and a unit, like 500ms, 10s, 2m or 1h"))?;
    let seconds = match t[number_end..].trim_start() {
        "" | "s" => number,
        "ms" => number / 1e3,
        "us" => number / 1e6,
        "m" | "min" => number * 60.0,
        "h" => number * 3600.0,
        other => {
            return Err(format!("\"{text}\" has an unknown unit \"{other}\"; use ms, s, m or h"));
        }
    };
    // Too long for a Duration (2^64 s) is an error too: fuzz/ found "1099…9s" panicking here.
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("\"{text}\" is not a valid duration"))
}

/// A duration as a suite writes it: "5s" where it is whole seconds, else "500ms".
pub fn duration_text(d: Duration) -> String {
    match d.subsec_millis() {
        0 => format!("{}s", d.as_secs()),
        _ => format!("{}ms", d.as_millis()),
    }
}

/// A measured or estimated number of seconds as a Duration: negative or NaN is none, too long
/// for a Duration is the longest (Duration::from_secs_f64 panics on both).
pub fn seconds(seconds: f64) -> Duration {
    Duration::try_from_secs_f64(seconds.max(0.0)).unwrap_or(Duration::MAX)
}

/// A rate of operations: "50k op/s", "20000/s", "1.5M", "800 op/s" → operations per second.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let body = t.strip_suffix("op/s").or_else(|| t.strip_suffix("/s")).unwrap_or(t).trim_end();
    let (number, scale) = match body.chars().last() {
        Some('k' | 'K') => (&body[..body.len() - 1], 1e3),
        Some('M') => (&body[..body.len() - 1], 1e6),
        _ => (body, 1.0),
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v * scale),
        _ => Err(format!("\"{text}\" is not a rate; write operations per second like \"50k op/s\" or \"20000/s\"")),
    }
}

/// The highest bandwidth a suite may name, in bits per second: beyond 10 Tbit/s no link is, and
/// the value is a typo (which a cast to an integer would saturate silently).
pub const MAX_BITS_PER_SECOND: f64 = 1e13;

/// "10%" or "2.5%" → 10.0 or 2.5.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let number = t.strip_suffix('%').ok_or_else(|| format!("\"{text}\" is not a percentage; write it like \"10%\""))?;
    let value: f64 =
        number.trim().parse().map_err(|_| format!("\"{text}\" is not a percentage; write it like \"10%\""))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("\"{text}\" must be a percentage of zero or more"));
    }
    Ok(value)
}

/// Prints a byte count the way fio's options take it, exactly (no rounding): 4096 → "4k".
pub fn fio_size(bytes: u64) -> String {
    for (shift, unit) in [(40, "t"), (30, "g"), (20, "m"), (10, "k")] {
        if bytes != 0 && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A short human form of a measured value with its unit, for tables: "52.8k op/s", "1.21 GB/s".
pub fn human(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "—".into();
    }
    match unit {
        "B/s" => {
            let (v, u) = scale(value, 1000.0, &["B/s", "kB/s", "MB/s", "GB/s", "TB/s"]);
            format!("{} {u}", sig3(v))
        }
        "B" => {
            let (v, u) = scale(value, 1024.0, &["B", "KiB", "MiB", "GiB", "TiB"]);
            format!("{} {u}", sig3(v))
        }
        "bit/s" => {
            let (v, u) = scale(value, 1000.0, &["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"]);
            format!("{} {u}", sig3(v))
        }
        "us" if value.abs() >= 1_000_000.0 => format!("{} s", sig3(value / 1e6)),
        "us" if value.abs() >= 1000.0 => format!("{} ms", sig3(value / 1000.0)),
        "us" => format!("{} µs", sig3(value)),
        _ => {
            let (v, suffix) = scale(value, 1000.0, &["", "k", "M", "G"]);
            if unit.is_empty() { format!("{}{suffix}", sig3(v)) } else { format!("{}{suffix} {unit}", sig3(v)) }
        }
    }
}

fn scale<'a>(mut value: f64, step: f64, units: &[&'a str]) -> (f64, &'a str) {
    let mut i = 0;
    while value.abs() >= step && i + 1 < units.len() {
        value /= step;
        i += 1;
    }
    (value, units[i])
}

/// Three significant digits without scientific notation.
pub fn sig3(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Thousands separated by commas, as Java's `%,d` and price tags have them: 1234567 → "1,234,567".
pub fn group_digits(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A 95 % interval of a % difference: "[-27%, -21%]", or "[no CI]" where the runs support none.
pub fn percent_interval(ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("[{}, {}]", signed_percent(lo), signed_percent(hi)),
        None => "[no CI]".into(),
    }
}

/// A 95 % interval of a value: "1.21k – 1.37k op/s", or "no CI" where the runs support none.
pub fn value_interval(ci: Option<(f64, f64)>, unit: &str) -> String {
    match ci {
        Some((lo, hi)) => format!("{} – {}", human(lo, unit), human(hi, unit)),
        None => "no CI".into(),
    }
}

/// The same in words: "95% CI +1.2% to +3.4%", or "no 95% CI: too few runs".
pub fn percent_interval_words(ci: Option<(f64, f64)>) -> String {
    match ci {
        Some((lo, hi)) => format!("95% CI {lo:+.1}% to {hi:+.1}%"),
        None => "no 95% CI: too few runs".into(),
    }
}

/// A signed percentage for "% difference" columns: "+4.2%", "-31%".
pub fn signed_percent(p: f64) -> String {
    if !p.is_finite() {
        return "—".into();
    }
    let body = if p.abs() >= 10.0 { format!("{:.0}", p.abs()) } else { format!("{:.1}", p.abs()) };
    let sign = if p > 0.0 {
        "+"
    } else if p < 0.0 {
        "-"
    } else {
        "±"
    };
    format!("{sign}{body}%")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_use_powers_of_1024_like_fio() {
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("512MB").unwrap(), 512 << 20);
        assert_eq!(parse_size("123").unwrap(), 123);
        assert!(parse_size("4x").unwrap_err().contains("unknown unit"));
        assert!(parse_size("G").is_err());
        assert!(parse_size("-1G").is_err());
    }

    #[test]
    fn durations_need_known_units() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration(&format!("1{}s", "9".repeat(72))).is_err());
    }

    #[test]
    fn seconds_saturate_rather_than_panic() {
        assert_eq!(seconds(1.5), Duration::from_millis(1500));
        assert_eq!(seconds(-3.0), Duration::ZERO);
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(1e300), Duration::MAX);
        assert_eq!(seconds(f64::INFINITY), Duration::MAX);
    }

    #[test]
    fn rates_are_operations_per_second() {
        assert_eq!(parse_rate("50k op/s").unwrap(), 50_000.0);
        assert_eq!(parse_rate("20000/s").unwrap(), 20_000.0);
        assert_eq!(parse_rate("1.5M").unwrap(), 1.5e6);
        assert_eq!(parse_rate("800 op/s").unwrap(), 800.0);
        assert!(parse_rate("fast").unwrap_err().contains("not a rate"));
        assert!(parse_rate("0 op/s").is_err());
        assert!(parse_rate("10 MB/s").is_err());
    }

    #[test]
    fn percentages_and_printing() {
        assert_eq!(parse_percent("10%").unwrap(), 10.0);
        assert!(parse_percent("10").is_err());
        assert_eq!(fio_size(4096), "4k");
        assert_eq!(fio_size(1 << 30), "1g");
        assert_eq!(fio_size(1000), "1000");
        assert_eq!(human(52837.0, "op/s"), "52.8k op/s");
        assert_eq!(human(1.5e9, "B/s"), "1.50 GB/s");
        assert_eq!(human(65.5, "us"), "65.5 µs");
        assert_eq!(signed_percent(-31.4), "-31%");
        assert_eq!(signed_percent(4.25), "+4.2%");
    }
}
