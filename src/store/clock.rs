//! UTC timestamps without a time-zone database: for run records and result-set names.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, as an RFC 3339 UTC timestamp to the millisecond: "2026-11-21T00:31:05.042Z" (runs a
/// second apart are told in order by it).
pub fn utc_now() -> String {
    let now = SystemTime::now();
    let (date, time) = utc_parts(now);
    let ms = now.duration_since(UNIX_EPOCH).map(|d| d.subsec_millis()).unwrap_or(0);
    format!("{}-{:02}-{:02}T{:02}:{:02}:{:02}.{ms:03}Z", date.0, date.1, date.2, time.0, time.1, time.2)
}

/// Now, compact, for directory names: "20261121T003105Z".
pub fn utc_stamp() -> String {
    let (date, time) = utc_parts(SystemTime::now());
    format!("{}{:02}{:02}T{:02}{:02}{:02}Z", date.0, date.1, date.2, time.0, time.1, time.2)
}

fn utc_parts(t: SystemTime) -> ((i64, u32, u32), (u32, u32, u32)) {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    ((year, month, day), (rem / 3600, rem / 60 % 60, rem % 60))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn utc_dates_are_civil_dates() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_221_065); // 2026-11-21 00:31:05 UTC (date -u -d ... +%s)
        assert_eq!(utc_parts(t), ((2026, 11, 21), (0, 31, 5)));
        assert_eq!(utc_parts(UNIX_EPOCH), ((1970, 1, 1), (0, 0, 0)));
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(utc_parts(leap).0, (2000, 2, 29));
    }
}
