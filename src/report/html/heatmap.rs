//! The overhead heatmaps: each cell's difference from its baseline per headline metric,
//! coloured by its sign, size and whether it is beyond the noise.

use std::fmt::Write;

use crate::compare::{self, CellResult, Verdict};
use crate::report::{Report, diff_text, headline, metric_title, settings, status_text};
use figures::chart::escape as h;
use figures::units::{self, human};

/// Background for an overhead: white at 0, red when worse, blue when better, grey when the
/// difference is within the noise.
fn heat_colour(d: &compare::Diff) -> (String, &'static str) {
    if matches!(d.verdict, Verdict::NoSignificantDifference | Verdict::TooFewRuns) {
        return ("#eeeeee".into(), "#222");
    }
    let t = (d.overhead_pct.abs() / 60.0).clamp(0.12, 1.0);
    let (r, g, b) = if d.overhead_pct > 0.0 { (178.0, 24.0, 43.0) } else { (33.0, 102.0, 172.0) };
    let mix = |c: f64| (247.0 + (c - 247.0) * t).round() as u8;
    (format!("#{:02x}{:02x}{:02x}", mix(r), mix(g), mix(b)), if t > 0.55 { "#fff" } else { "#222" })
}

/// One table per headline metric that is a rate or a mean latency: rows are workload settings,
/// columns the environment/volume pairs; each cell coloured by its overhead, CI in the label.
pub(super) fn heatmaps(report: &Report) -> String {
    let analysis = &report.analysis;
    let groups = settings(analysis);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for c in &analysis.cells {
        let p = (c.record.labels.env.clone(), c.record.labels.volume.clone());
        if !pairs.contains(&p) {
            pairs.push(p);
        }
    }
    let mut metrics: Vec<String> = Vec::new();
    for (_, cells) in &groups {
        for m in headline(cells) {
            if !metrics.contains(&m) {
                metrics.push(m);
            }
        }
    }
    let primary: Vec<&String> =
        metrics.iter().enumerate().filter(|(i, m)| *i == 0 || m.ends_with("_mean")).map(|(_, m)| m).collect();
    let mut out = String::from(
        "<h2 id=\"heatmap\">Overhead against the baseline</h2><p class=\"meta\">Red: worse than the baseline, blue: better, grey: within the noise. Hover for the CI and p-value.</p>",
    );
    for metric in &metrics {
        let mut table =
            format!("<table class=\"heat\" data-metric=\"{}\"><tr><th>{}</th>", h(metric), h(&metric_title(metric)));
        for (env, volume) in &pairs {
            let _ = write!(table, "<th>{}<br><span class=\"muted\">{}</span></th>", h(env), h(volume));
        }
        table.push_str("</tr>");
        let mut any = false;
        for (setting, cells) in &groups {
            if !cells.iter().any(|c| c.metric(metric).is_some()) {
                continue;
            }
            any = true;
            let _ = write!(table, "<tr><th>{}</th>", h(setting));
            for (env, volume) in &pairs {
                let cell = cells.iter().find(|c| &c.record.labels.env == env && &c.record.labels.volume == volume);
                table.push_str(&heat_cell(cell.copied(), metric));
            }
            table.push_str("</tr>");
        }
        table.push_str("</table>");
        if !any {
            continue;
        }
        if primary.contains(&metric) {
            out.push_str(&table);
        } else {
            let _ = write!(out, "<details><summary>{}</summary>{table}</details>", h(&metric_title(metric)));
        }
    }
    out
}

fn heat_cell(cell: Option<&CellResult>, metric: &str) -> String {
    let Some(cell) = cell else {
        return "<td class=\"v muted\">—</td>".into();
    };
    if let Some(status) = status_text(cell) {
        return format!(
            "<td class=\"v muted\" title=\"{}\">{}</td>",
            h(&status),
            if cell.skipped.is_some() { "skipped" } else { "failed" }
        );
    }
    let Some(m) = cell.metric(metric) else {
        return "<td class=\"v muted\">—</td>".into();
    };
    match &m.vs_baseline {
        None if cell.is_baseline => format!(
            "<td class=\"v\" title=\"baseline: {}\">baseline<small>{}</small></td>",
            h(&human(m.summary.center, &m.unit)),
            h(&human(m.summary.center, &m.unit))
        ),
        None => "<td class=\"v muted\">no baseline</td>".into(),
        Some(d) => {
            let (bg, fg) = heat_colour(d);
            format!(
                "<td class=\"v\" style=\"background:{bg};color:{fg}\" title=\"{tip}\">{pct}<small>{ci}</small></td>",
                tip = h(&format!(
                    "{}: {} against {}; {} {}; 95% CI {}; p = {:.3}; {}",
                    cell.name(),
                    human(m.summary.center, &m.unit),
                    human(d.baseline_center, &m.unit),
                    units::signed_percent(d.pct),
                    d.verdict.text(),
                    units::percent_interval(d.ci),
                    d.p_value,
                    d.method_text()
                )),
                pct = h(&diff_text(d)),
                ci = h(&units::percent_interval(d.ci)),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::Diff;

    fn diff(overhead_pct: f64, verdict: Verdict) -> Diff {
        Diff {
            baseline_center: 100.0,
            ratio: 1.0 - overhead_pct / 100.0,
            pct: -overhead_pct,
            ci: Some((-overhead_pct - 2.0, -overhead_pct + 2.0)),
            overhead_pct,
            overhead_ci: Some((overhead_pct - 2.0, overhead_pct + 2.0)),
            p_value: 0.01,
            verdict,
            pairing: figures::stats::Pairing::Paired,
            unpaired_because: None,
            n: 3,
        }
    }

    #[test]
    fn heat_is_grey_within_the_noise_red_when_worse_blue_when_better_and_deeper_the_larger() {
        for verdict in [Verdict::NoSignificantDifference, Verdict::TooFewRuns] {
            assert_eq!(heat_colour(&diff(45.0, verdict)).0, "#eeeeee", "{verdict:?} is no colour");
        }
        assert_eq!(heat_colour(&diff(60.0, Verdict::Slower)), ("#b2182b".into(), "#fff"), "saturated red");
        assert_eq!(heat_colour(&diff(-3.0, Verdict::Faster)), ("#dde6ee".into(), "#222"), "the palest blue");
        let green = |pct: f64| u8::from_str_radix(&heat_colour(&diff(pct, Verdict::Slower)).0[3..5], 16).unwrap();
        assert!(green(40.0) < green(20.0), "a larger overhead is a deeper red");
    }
}
