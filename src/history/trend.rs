//! The history as a picture: per series a trend chart (x the result sets, labelled where a
//! component changed; y the overhead, or the value, with its CI as a band), each segment's mean
//! drawn, and the change points marked with what changed.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::detect::Options;
use super::series::{self, ChangePoint, Figure, Series};
use figures::chart::{self, Band, Line, LineChart, Mark, escape as h};

/// The figure a series is drawn by: its overhead where it has one.
pub fn figure_of(s: &Series) -> Figure {
    if s.points.iter().any(|p| p.overhead.is_some()) { Figure::Overhead } else { Figure::Value }
}

/// A short label of a component's new value: versions are long hashes and paths.
fn short(value: &str) -> String {
    let last = value.rsplit(['/', ' ']).find(|s| !s.is_empty()).unwrap_or(value);
    if last.chars().count() > 14 {
        format!("…{}", last.chars().rev().take(12).collect::<String>().chars().rev().collect::<String>())
    } else {
        last.to_string()
    }
}

fn chart_of(s: &Series, figure: Figure, changes: &[ChangePoint]) -> String {
    let observed = s.observed(figure);
    let n = observed.obs.len();
    let labels: Vec<String> = (0..n)
        .map(|i| match changes.iter().find(|c| c.index == i) {
            Some(c) => match c.changed.iter().next() {
                Some((_, (_, after))) => format!("{} {}", i + 1, short(after)),
                None => format!("{}", i + 1),
            },
            None if i == 0 || i + 1 == n || n <= 12 => format!("{}", i + 1),
            None => String::new(),
        })
        .collect();
    let name = match figure {
        Figure::Overhead => "overhead against the baseline",
        Figure::Value => "median",
    };
    let mut lines = vec![Line {
        name: name.into(),
        points: observed.obs.iter().enumerate().map(|(i, o)| (i as f64, observed.scale.from(o.value))).collect(),
        colour: chart::colour(1),
        dashed: false,
    }];
    let bounds: Vec<usize> = std::iter::once(0).chain(changes.iter().map(|c| c.index)).chain([n]).collect();
    for (k, pair) in bounds.windows(2).enumerate() {
        let level = super::detect::Level::of(&observed.obs[pair[0]..pair[1]]);
        lines.push(Line {
            name: format!("segment {} level", k + 1),
            points: vec![
                (pair[0] as f64, observed.scale.from(level.mean)),
                ((pair[1] - 1) as f64, observed.scale.from(level.mean)),
            ],
            colour: chart::colour(0),
            dashed: true,
        });
    }
    let band = Band {
        name: "95 % CI".into(),
        points: observed
            .points
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let ci = match figure {
                    Figure::Overhead => p.overhead_ci.unwrap_or_default(),
                    Figure::Value => p.ci,
                };
                (i as f64, ci.0, ci.1)
            })
            .collect(),
        colour: chart::colour(1),
    };
    let marks = changes
        .iter()
        .map(|c| Mark {
            x: c.index as f64,
            y: observed.scale.from(observed.obs[c.index].value),
            colour: if c.acknowledged.is_some() { "#1a7f37" } else { "#c0392b" },
            label: format!(
                "change point {}: {} {} ({})",
                c.id,
                series::signed(c.change_pct),
                figure.change_unit(),
                series::changed_text(&c.changed)
            ),
        })
        .collect();
    let unit = if figure == Figure::Overhead { "%".to_string() } else { s.unit.clone() };
    chart::line_chart(&LineChart {
        x_categories: labels,
        marks,
        bands: vec![band],
        // The page sets its own heading; the charts need no title of their own beyond the figure.
        ..LineChart::plain(
            format!("{} ({})", s.metric, figure.name()),
            unit,
            "result set (labelled where a component changed)",
            lines,
        )
    })
}

/// One section per series with at least two points: its chart and its change points.
pub fn sections(all: &[Series], options: &Options, acks: &BTreeMap<String, (String, String)>) -> String {
    let mut out = String::new();
    for s in all.iter().filter(|s| s.points.len() >= 2) {
        let figure = figure_of(s);
        let changes = series::change_points(s, figure, options, acks);
        let _ = write!(out, "<h3>{}</h3><div class=\"charts\">{}</div>", h(&s.name()), chart_of(s, figure, &changes));
        if !changes.is_empty() {
            out.push_str("<ul>");
            for c in &changes {
                let _ = write!(
                    out,
                    "<li><b>{}</b> at result set {} ({}): {} → {}, change {} {} [{}, {}], p = {:.1e}; {}{}</li>",
                    h(&c.id),
                    c.index + 1,
                    h(&c.time),
                    h(&series::figure_text(figure, c.before, None, &s.unit)),
                    h(&series::figure_text(figure, c.after, None, &s.unit)),
                    series::signed(c.change_pct),
                    figure.change_unit(),
                    series::signed(c.ci.0),
                    series::signed(c.ci.1),
                    c.p_value,
                    h(&series::changed_text(&c.changed)),
                    c.acknowledged.as_ref().map(|w| format!(" — acknowledged: {}", h(w))).unwrap_or_default()
                );
            }
            out.push_str("</ul>");
        }
    }
    out
}

/// `history report --html`: a page of its own.
pub fn page(all: &[Series], options: &Options, acks: &BTreeMap<String, (String, String)>, location: &str) -> String {
    let body = sections(all, options, acks);
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>isobench history</title><style>{}</style></head><body><main><h1>isobench history</h1>\
         <p class=\"meta\">{} · {} series · change points: E-Divisive means, t-test p ≤ {}, at least {} result sets a side; \
         red circles are change points, green ones acknowledged</p>{}</main></body></html>\n",
        chart::style::STYLE,
        h(location),
        all.len(),
        options.max_p,
        options.min_segment,
        if body.is_empty() { "<p>No series has two result sets yet.</p>".to_string() } else { body }
    )
}
