//! fio's output read back: its JSON report into samples (jobs merged by summing rates and pooling
//! latency histograms) and its per-I/O logs into time series. Fuzzed (fuzz/fuzz_targets/fio_json.rs):
//! it reads what another program wrote.

use std::collections::BTreeMap;

use anyhow::{Context, Result, anyhow, bail};

use crate::store::{SYNC_LATENCY, Sample, Series};
use cql_stress::capacity::Step;

/// One direction (read, write, trim) summed over every job in fio's output.
#[derive(Default)]
struct Direction {
    ios: u64,
    io_bytes: u64,
    iops: f64,
    bw_bytes: f64,
    clat_n: u64,
    clat_sum_ns: f64,
    clat_max_ns: f64,
    bins: BTreeMap<u64, u64>,
    percentiles_from_fio: BTreeMap<String, f64>,
}

/// Turns fio's json+ output into samples: per direction IOPS, bandwidth and completion latency
/// (mean, p50, p95, p99, p99.9, max; µs), plus totals across directions and CPU use.
pub fn samples_from_json(json: &str) -> Result<Vec<Sample>> {
    let doc: serde_json::Value = serde_json::from_str(json).context("fio's output is not JSON")?;
    let jobs = doc["jobs"].as_array().ok_or_else(|| anyhow!("fio's output has no jobs"))?;
    if jobs.is_empty() {
        bail!("fio's output has no jobs");
    }
    let mut dirs: BTreeMap<&str, Direction> = BTreeMap::new();
    let (mut usr, mut sys) = (0.0, 0.0);
    // fsync/fdatasync calls (`fsync = N`): fio times them apart from the writes they follow.
    let (mut syncs, mut sync_sum_ns) = (0u64, 0.0);
    for job in jobs {
        let error = job["error"].as_i64().unwrap_or(0);
        if error != 0 {
            bail!(
                "fio job {} failed with error {error} ({})",
                job["jobname"],
                std::io::Error::from_raw_os_error(error as i32)
            );
        }
        usr += job["usr_cpu"].as_f64().unwrap_or(0.0);
        sys += job["sys_cpu"].as_f64().unwrap_or(0.0);
        let sync = &job["sync"]["lat_ns"];
        let n = sync["N"].as_u64().unwrap_or(0);
        syncs += n;
        sync_sum_ns += sync["mean"].as_f64().unwrap_or(0.0) * n as f64;
        for name in ["read", "write", "trim"] {
            let d = &job[name];
            let ios = d["total_ios"].as_u64().unwrap_or(0);
            if ios == 0 {
                continue;
            }
            let agg = dirs.entry(name).or_default();
            agg.ios += ios;
            agg.io_bytes += d["io_bytes"].as_u64().unwrap_or(0);
            agg.iops += d["iops"].as_f64().unwrap_or(0.0);
            agg.bw_bytes += d["bw_bytes"].as_f64().unwrap_or(0.0);
            let clat = &d["clat_ns"];
            let n = clat["N"].as_u64().unwrap_or(0);
            agg.clat_n += n;
            agg.clat_sum_ns += clat["mean"].as_f64().unwrap_or(0.0) * n as f64;
            agg.clat_max_ns = agg.clat_max_ns.max(clat["max"].as_f64().unwrap_or(0.0));
            if let Some(bins) = clat["bins"].as_object() {
                for (value, count) in bins {
                    let value: u64 = value.parse().map_err(|_| anyhow!("fio bin {value} is not a number"))?;
                    *agg.bins.entry(value).or_default() += count.as_u64().unwrap_or(0);
                }
            }
            if let Some(p) = clat["percentile"].as_object() {
                agg.percentiles_from_fio = p.iter().filter_map(|(k, v)| Some((k.clone(), v.as_f64()?))).collect();
            }
        }
    }
    if dirs.is_empty() {
        bail!("fio did no I/O: every job read, wrote and trimmed nothing (total_ios 0)");
    }
    let mut samples = Vec::new();
    let (mut iops, mut bw, mut ios) = (0.0, 0.0, 0);
    for (name, d) in &dirs {
        iops += d.iops;
        bw += d.bw_bytes;
        ios += d.ios;
        samples.push(Sample::new(format!("{name}_bytes"), d.io_bytes as f64, "B"));
        samples.push(Sample::new(format!("{name}_iops"), d.iops, "op/s"));
        samples.push(Sample::new(format!("{name}_bw"), d.bw_bytes, "B/s"));
        if d.clat_n == 0 {
            continue;
        }
        samples.push(Sample::new(format!("{name}_clat_mean"), d.clat_sum_ns / d.clat_n as f64 / 1000.0, "us"));
        for (label, p) in [("p50", 50.0), ("p95", 95.0), ("p99", 99.0), ("p99.9", 99.9)] {
            let ns = if d.bins.is_empty() {
                // Plain json (not json+) carries fio's own percentiles only.
                d.percentiles_from_fio.get(&format!("{p:.6}")).copied()
            } else {
                percentile_from_bins(&d.bins, p)
            };
            if let Some(ns) = ns {
                samples.push(Sample::new(format!("{name}_clat_{label}"), ns / 1000.0, "us"));
            }
        }
        samples.push(Sample::new(format!("{name}_clat_max"), d.clat_max_ns / 1000.0, "us"));
    }
    samples.insert(0, Sample::new("bw", bw, "B/s"));
    samples.insert(0, Sample::new("iops", iops, "op/s"));
    if syncs > 0 {
        samples.push(Sample::new(SYNC_LATENCY, sync_sum_ns / syncs as f64 / 1000.0, "us"));
    }
    samples.push(Sample::new("cpu_usr", usr, "%"));
    samples.push(Sample::new("cpu_sys", sys, "%"));
    samples.push(Sample::new("ops", ios as f64, "ops"));
    Ok(samples)
}

/// One capacity step from fio's json+ output: the IOPS achieved and completion latencies of
/// every job and direction pooled (`percentile` is the bound's). fio's clat counts from each
/// I/O's submission, so the step's latency is its service time: fio does not record how long
/// an I/O waited behind its rate schedule.
pub(super) fn capacity_step(json: &str, percentile: f64) -> Result<Step> {
    let doc: serde_json::Value = serde_json::from_str(json).context("fio's output is not JSON")?;
    let jobs = doc["jobs"].as_array().ok_or_else(|| anyhow!("fio's output has no jobs"))?;
    let (mut iops, mut n, mut sum_ns) = (0.0, 0u64, 0.0);
    let mut bins: BTreeMap<u64, u64> = BTreeMap::new();
    for job in jobs {
        let error = job["error"].as_i64().unwrap_or(0);
        if error != 0 {
            bail!("fio job {} failed with error {error}", job["jobname"]);
        }
        for name in ["read", "write", "trim"] {
            let d = &job[name];
            iops += d["iops"].as_f64().unwrap_or(0.0);
            let clat = &d["clat_ns"];
            let count = clat["N"].as_u64().unwrap_or(0);
            n += count;
            sum_ns += clat["mean"].as_f64().unwrap_or(0.0) * count as f64;
            for (value, count) in clat["bins"].as_object().into_iter().flatten() {
                let value: u64 = value.parse().map_err(|_| anyhow!("fio bin {value} is not a number"))?;
                *bins.entry(value).or_default() += count.as_u64().unwrap_or(0);
            }
        }
    }
    if n == 0 || bins.is_empty() {
        bail!("fio completed no I/O in the step's window (or wrote no json+ latency bins)");
    }
    let us = |p: f64| percentile_from_bins(&bins, p).map_or(f64::NAN, |ns| ns / 1000.0);
    let latency_us = us(percentile);
    Ok(Step {
        achieved: iops,
        latency_us,
        p50_us: us(50.0),
        p99_us: us(99.0),
        p999_us: us(99.9),
        service_us: latency_us,
        service_mean_us: sum_ns / n as f64 / 1000.0,
        ..Step::default()
    })
}

#[derive(Clone, Copy)]
pub(super) enum Combine {
    Sum,
    Mean,
}

/// fio's averaged logs ("msec, value, direction, bs, offset", one line per job and second) as
/// one series per direction: jobs summed (rates) or averaged (latencies, ns → µs).
pub(super) fn series_from_log(text: &str, name: &str, unit: &str, combine: Combine) -> Vec<Series> {
    let mut buckets: BTreeMap<(usize, u64), (f64, u32)> = BTreeMap::new();
    for line in text.lines() {
        let fields: Vec<&str> = line.split(',').map(str::trim).collect();
        let (Some(ms), Some(value), Some(dir)) = (
            fields.first().and_then(|f| f.parse::<u64>().ok()),
            fields.get(1).and_then(|f| f.parse::<f64>().ok()),
            fields.get(2).and_then(|f| f.parse::<usize>().ok()),
        ) else {
            continue;
        };
        let entry = buckets.entry((dir, (ms + 500) / 1000)).or_default();
        entry.0 += value;
        entry.1 += 1;
    }
    let scale = if unit == "us" { 1e-3 } else { 1.0 };
    ["read", "write", "trim"]
        .iter()
        .enumerate()
        .filter_map(|(dir, dir_name)| {
            let points: Vec<(f64, f64)> = buckets
                .iter()
                .filter(|((d, _), _)| *d == dir)
                .map(|((_, second), (sum, n))| {
                    let v = match combine {
                        Combine::Sum => *sum,
                        Combine::Mean => sum / f64::from(*n),
                    };
                    (*second as f64, v * scale)
                })
                .collect();
            (!points.is_empty()).then(|| Series { metric: format!("{dir_name}_{name}"), unit: unit.into(), points })
        })
        .collect()
}

/// The value of the first histogram bin at which the cumulative count reaches `p` percent of
/// all samples: fio's own rule, so one job's results match fio's printed percentiles exactly.
fn percentile_from_bins(bins: &BTreeMap<u64, u64>, p: f64) -> Option<f64> {
    let total: u64 = bins.values().sum();
    if total == 0 {
        return None;
    }
    let rank = p / 100.0 * total as f64;
    let mut cumulative = 0u64;
    for (value, count) in bins {
        cumulative += count;
        if cumulative as f64 >= rank {
            return Some(*value as f64);
        }
    }
    bins.keys().next_back().map(|v| *v as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        std::fs::read_to_string(format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    }

    fn get(samples: &[Sample], metric: &str) -> f64 {
        samples.iter().find(|s| s.metric == metric).unwrap_or_else(|| panic!("no {metric}")).value
    }

    /// Two jobs' fsyncs pooled by their counts; a run without them records none.
    #[test]
    fn the_flushes_are_timed_apart_from_the_writes() {
        let json = fixture("fio-randwrite-fsync-2jobs.json");
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let (n, sum) = doc["jobs"].as_array().unwrap().iter().fold((0.0, 0.0), |(n, sum), job| {
            let lat = &job["sync"]["lat_ns"];
            (n + lat["N"].as_f64().unwrap(), sum + lat["N"].as_f64().unwrap() * lat["mean"].as_f64().unwrap())
        });
        let samples = samples_from_json(&json).unwrap();
        assert!((get(&samples, SYNC_LATENCY) - sum / n / 1000.0).abs() < 1e-6);
        assert!(get(&samples, SYNC_LATENCY) > get(&samples, "write_clat_mean"), "a flush outlasts a buffered write");
        let unsynced = samples_from_json(&fixture("fio-randread-2jobs.json")).unwrap();
        assert!(unsynced.iter().all(|s| s.metric != SYNC_LATENCY));
    }

    #[test]
    fn a_capacity_step_pools_every_job_and_direction() {
        let json = fixture("fio-randread-2jobs.json");
        let samples = samples_from_json(&json).unwrap();
        let step = capacity_step(&json, 99.0).unwrap();
        assert!((step.achieved - get(&samples, "iops")).abs() < 1e-6, "the jobs' IOPS summed");
        assert_eq!(step.p99_us, get(&samples, "read_clat_p99"), "one pooled histogram, as the samples' are");
        assert_eq!(step.latency_us, step.p99_us);
        assert!(step.p50_us <= step.p99_us && step.p99_us <= step.p999_us);
        assert!((step.service_mean_us - get(&samples, "read_clat_mean")).abs() < 1e-6);
        assert!(capacity_step(r#"{"jobs": [{"read": {"iops": 0}}]}"#, 99.0).is_err(), "no I/O, no step");
    }

    #[test]
    fn grouped_output_matches_fios_own_figures() {
        let json = fixture("fio-randrw-grouped.json");
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let samples = samples_from_json(&json).unwrap();
        let job = &doc["jobs"][0];
        for dir in ["read", "write"] {
            assert_eq!(get(&samples, &format!("{dir}_iops")), job[dir]["iops"].as_f64().unwrap());
            assert_eq!(get(&samples, &format!("{dir}_bw")), job[dir]["bw_bytes"].as_f64().unwrap());
            let clat = &job[dir]["clat_ns"];
            assert!(
                (get(&samples, &format!("{dir}_clat_mean")) - clat["mean"].as_f64().unwrap() / 1000.0).abs() < 1e-9
            );
            assert_eq!(get(&samples, &format!("{dir}_clat_max")), clat["max"].as_f64().unwrap() / 1000.0);
            for (label, key) in
                [("p50", "50.000000"), ("p95", "95.000000"), ("p99", "99.000000"), ("p99.9", "99.900000")]
            {
                let fio_value = clat["percentile"][key].as_f64().unwrap() / 1000.0;
                assert_eq!(get(&samples, &format!("{dir}_clat_{label}")), fio_value, "{dir} {label}");
            }
        }
        let total = get(&samples, "read_iops") + get(&samples, "write_iops");
        assert_eq!(get(&samples, "iops"), total);
        assert!(samples.iter().all(|s| !s.metric.starts_with("trim")), "no trim I/O was done");
    }

    #[test]
    fn jobs_are_merged_by_summing_rates_and_pooling_histograms() {
        let json = fixture("fio-randread-2jobs.json");
        let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
        let samples = samples_from_json(&json).unwrap();
        let jobs = doc["jobs"].as_array().unwrap();
        let sum: f64 = jobs.iter().map(|j| j["read"]["iops"].as_f64().unwrap()).sum();
        assert!((get(&samples, "read_iops") - sum).abs() < 1e-6);
        let p99s: Vec<f64> =
            jobs.iter().map(|j| j["read"]["clat_ns"]["percentile"]["99.000000"].as_f64().unwrap() / 1000.0).collect();
        let merged = get(&samples, "read_clat_p99");
        let (lo, hi) = (p99s.iter().cloned().fold(f64::MAX, f64::min), p99s.iter().cloned().fold(0.0, f64::max));
        assert!(lo <= merged && merged <= hi, "pooled p99 {merged} outside the jobs' {lo}..{hi}");
        assert!(samples.iter().all(|s| !s.metric.starts_with("write")));
    }

    #[test]
    fn a_failed_job_is_an_error() {
        let mut doc: serde_json::Value = serde_json::from_str(&fixture("fio-randrw-grouped.json")).unwrap();
        doc["jobs"][0]["error"] = 28.into();
        let err = samples_from_json(&doc.to_string()).unwrap_err().to_string();
        assert!(err.contains("error 28"), "{err}");
    }

    #[test]
    fn logs_become_per_direction_series_with_jobs_combined() {
        // Two jobs (lines interleaved), as fio writes them with per_job_logs=0.
        let iops =
            "1000, 100, 0, 0, 0\n1000, 50, 1, 0, 0\n1001, 110, 0, 0, 0\n2000, 120, 0, 0, 0\n1999, 130, 0, 0, 0\n";
        let s = series_from_log(iops, "iops", "op/s", Combine::Sum);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].metric, "read_iops");
        assert_eq!(s[0].points, vec![(1.0, 210.0), (2.0, 250.0)]);
        assert_eq!(s[1].points, vec![(1.0, 50.0)]);
        let clat = series_from_log("1000, 2000, 0, 0, 0\n1000, 4000, 0, 0, 0\n", "clat_mean", "us", Combine::Mean);
        assert_eq!(s[0].unit, "op/s");
        assert_eq!(clat[0].points, vec![(1.0, 3.0)], "mean of 2 and 4 µs");
    }

    #[test]
    fn percentiles_follow_fios_rule() {
        let bins: BTreeMap<u64, u64> = [(10, 50), (20, 45), (30, 5)].into_iter().collect();
        assert_eq!(percentile_from_bins(&bins, 50.0), Some(10.0));
        assert_eq!(percentile_from_bins(&bins, 95.0), Some(20.0));
        assert_eq!(percentile_from_bins(&bins, 99.0), Some(30.0));
        assert_eq!(percentile_from_bins(&BTreeMap::new(), 50.0), None);
    }
}
