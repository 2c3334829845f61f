//! SVG charts drawn by isobench: horizontal bars with CI whiskers, and line charts (latency
//! percentile profiles, per-run time series). Plain SVG with <title> tooltips: no script, no
//! fonts or libraries to fetch, so the report opens offline and cannot raise console errors.

use std::fmt::Write;

use crate::units;

pub mod style;

/// Okabe–Ito: distinguishable with every common colour-vision deficiency (yellow left out: it
/// vanishes on white).
pub const PALETTE: &[&str] = &["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000", "#999999"];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Approximate width of `text` at 12 px in a sans-serif font, for layout.
fn text_width(text: &str) -> f64 {
    text.chars().count() as f64 * 6.6
}

/// The baseline is grey in every chart; other cells keep one palette colour throughout.
pub const BASELINE_COLOUR: &str = "#999999";

pub struct Bar {
    pub label: String,
    pub value: f64,
    pub ci: Option<(f64, f64)>,
    pub colour: &'static str,
    /// Printed after the value, e.g. "-24%".
    pub note: String,
    /// The tooltip.
    pub tooltip: String,
}

pub struct BarChart {
    pub title: String,
    pub unit: String,
    pub bars: Vec<Bar>,
}

/// Horizontal bars from zero, one per cell, with a whisker for each CI.
pub fn bar_chart(chart: &BarChart) -> String {
    let label_w = chart.bars.iter().map(|b| text_width(&b.label)).fold(60.0, f64::max) + 12.0;
    let value_w = chart
        .bars
        .iter()
        .map(|b| text_width(&format!("{} {}", units::human(b.value, &chart.unit), b.note)))
        .fold(40.0, f64::max)
        + 16.0;
    let plot_w = 300.0;
    let (row_h, top) = (24.0, 30.0);
    let height = top + row_h * chart.bars.len() as f64 + 28.0;
    let width = label_w + plot_w + value_w;
    let max = chart.bars.iter().map(|b| b.ci.map_or(b.value, |c| c.1.max(b.value))).fold(0.0, f64::max);
    let ticks = nice_ticks(0.0, if max > 0.0 { max } else { 1.0 }, 4);
    let x_max = *ticks.last().unwrap_or(&1.0);
    let x = |v: f64| label_w + (v / x_max).clamp(0.0, 1.0) * plot_w;
    let mut svg = svg_open(width, height, &chart.title);
    let _ = write!(svg, r#"<text class="title" x="{}" y="16">{}</text>"#, label_w, escape(&chart.title));
    vertical_grid(&mut svg, &ticks, &x, top - 4.0, height - 22.0, &chart.unit);
    for (i, b) in chart.bars.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let _ = write!(
            svg,
            r#"<g><title>{tip}</title><text class="label" x="{lx:.1}" y="{ty:.1}" text-anchor="end">{label}</text><rect x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"/>"#,
            fill = b.colour,
            tip = escape(&b.tooltip),
            lx = label_w - 8.0,
            ty = y + row_h * 0.62,
            label = escape(&b.label),
            x0 = x(0.0),
            w = (x(b.value) - x(0.0)).max(0.5),
            h = row_h * 0.7,
        );
        if let Some((lo, hi)) = b.ci {
            let (cy, cap) = (y + row_h * 0.35, row_h * 0.22);
            let _ = write!(
                svg,
                r##"<path d="M{lo:.1},{cy:.1}H{hi:.1}M{lo:.1},{a:.1}V{b:.1}M{hi:.1},{a:.1}V{b:.1}" stroke="#222" stroke-width="1.3" fill="none"/>"##,
                lo = x(lo),
                hi = x(hi),
                a = cy - cap,
                b = cy + cap
            );
        }
        let end = b.ci.map_or(b.value, |c| c.1.max(b.value));
        let _ = write!(
            svg,
            r#"<text class="value" x="{:.1}" y="{:.1}">{} {}</text></g>"#,
            x(end) + 6.0,
            y + row_h * 0.62,
            escape(&units::human(b.value, &chart.unit)),
            escape(&b.note)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A horizontal chart's grid: a line from `top` to `bottom` at each tick, labelled below it.
fn vertical_grid(svg: &mut String, ticks: &[f64], x: &dyn Fn(f64) -> f64, top: f64, bottom: f64, unit: &str) {
    for t in ticks {
        let _ = write!(
            svg,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1}" y2="{2}" stroke="#e3e3e3"/><text class="tick" x="{0:.1}" y="{3}" text-anchor="middle">{4}</text>"##,
            x(*t),
            top,
            bottom,
            bottom + 14.0,
            escape(&units::human(*t, unit))
        );
    }
}

/// One row of a stacked bar: its segments from zero, left to right.
pub struct Stack {
    pub label: String,
    /// (part, value); a negative part (a sum that overshoots) is drawn as nothing and named.
    pub segments: Vec<(String, f64)>,
}

pub struct StackedChart {
    pub title: String,
    pub unit: String,
    /// Every part's name in order; each keeps one palette colour across the rows.
    pub parts: Vec<String>,
    pub rows: Vec<Stack>,
}

/// Horizontal bars made of parts, one colour per part, a legend under them.
pub fn stacked_bar_chart(chart: &StackedChart) -> String {
    let label_w = chart.rows.iter().map(|r| text_width(&r.label)).fold(60.0, f64::max) + 12.0;
    let total = |r: &Stack| r.segments.iter().map(|(_, v)| v.max(0.0)).sum::<f64>();
    let max = chart.rows.iter().map(total).fold(0.0, f64::max);
    let ticks = nice_ticks(0.0, if max > 0.0 { max } else { 1.0 }, 4);
    let x_max = *ticks.last().unwrap_or(&1.0);
    let (plot_w, row_h, top) = (360.0, 24.0, 30.0);
    let value_w = 90.0;
    let legend_y = top + row_h * chart.rows.len() as f64 + 26.0;
    let height = legend_y + 18.0 * chart.parts.len().div_ceil(3) as f64 + 8.0;
    let width = label_w + plot_w + value_w;
    let x = |v: f64| label_w + (v / x_max).clamp(0.0, 1.0) * plot_w;
    let colour_of = |part: &str| colour(chart.parts.iter().position(|p| p == part).unwrap_or(0));
    let mut svg = svg_open(width, height, &chart.title);
    let _ = write!(svg, r#"<text class="title" x="{label_w}" y="16">{}</text>"#, escape(&chart.title));
    vertical_grid(&mut svg, &ticks, &x, top - 4.0, legend_y - 22.0, &chart.unit);
    for (i, row) in chart.rows.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let _ = write!(
            svg,
            r#"<text class="label" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            label_w - 8.0,
            y + row_h * 0.62,
            escape(&row.label)
        );
        let mut at = 0.0;
        for (part, value) in row.segments.iter().filter(|(_, v)| *v > 0.0) {
            let _ = write!(
                svg,
                r#"<rect x="{x0:.1}" y="{y:.1}" width="{w:.1}" height="{h:.1}" fill="{fill}"><title>{tip}</title></rect>"#,
                x0 = x(at),
                w = (x(at + value) - x(at)).max(0.5),
                h = row_h * 0.7,
                fill = colour_of(part),
                tip = escape(&format!("{}: {part} {}", row.label, units::human(*value, &chart.unit))),
            );
            at += value;
        }
        let _ = write!(
            svg,
            r#"<text class="value" x="{:.1}" y="{:.1}">{}</text>"#,
            x(at) + 6.0,
            y + row_h * 0.62,
            escape(&units::human(at, &chart.unit))
        );
    }
    for (i, part) in chart.parts.iter().enumerate() {
        let (lx, ly) = (label_w + (i % 3) as f64 * 130.0, legend_y + (i / 3) as f64 * 18.0);
        let _ = write!(
            svg,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text class="tick" x="{:.1}" y="{ly:.1}">{}</text>"#,
            ly - 9.0,
            colour(i),
            lx + 14.0,
            escape(part)
        );
    }
    svg.push_str("</svg>");
    svg
}

pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub colour: &'static str,
    pub dashed: bool,
}

pub struct LineChart {
    pub title: String,
    pub unit: String,
    pub x_label: String,
    /// Labels for categorical x positions (0, 1, 2 …); numeric axis when empty.
    pub x_categories: Vec<String>,
    pub lines: Vec<Line>,
    /// A logarithmic y axis (latency percentiles span decades).
    pub log_y: bool,
    /// A logarithmic x axis (rates of environments a magnitude apart).
    pub log_x: bool,
    /// Horizontal lines across the plot (a latency bound).
    pub rules: Vec<Rule>,
    /// Points to mark apart from the lines (a capacity).
    pub marks: Vec<Mark>,
    /// Shaded ranges under the lines (a confidence interval along a series).
    pub bands: Vec<Band>,
}

impl LineChart {
    /// Lines over a numeric x axis, both axes linear, with no rule or mark.
    pub fn plain(title: String, unit: String, x_label: &str, lines: Vec<Line>) -> LineChart {
        LineChart {
            title,
            unit,
            x_label: x_label.into(),
            x_categories: Vec::new(),
            lines,
            log_y: false,
            log_x: false,
            rules: Vec::new(),
            marks: Vec::new(),
            bands: Vec::new(),
        }
    }
}

/// A shaded range: at each x, from `low` to `high`.
pub struct Band {
    pub name: String,
    /// (x, low, high), in x order.
    pub points: Vec<(f64, f64, f64)>,
    pub colour: &'static str,
}

/// A horizontal line at `y`, labelled at its right end.
pub struct Rule {
    pub y: f64,
    pub label: String,
}

/// A marked point, with what it is in its tooltip.
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub colour: &'static str,
    pub label: String,
}

pub fn line_chart(chart: &LineChart) -> String {
    let Some(frame) = Frame::fit(chart) else { return String::new() };
    // The legend's 12 px labels run wider than text_width's estimate: 10 px more room.
    let legend_w = chart.lines.iter().map(|l| text_width(&l.name)).fold(0.0, f64::max) + 40.0;
    let (width, height) = (frame.left + frame.plot_w + 16.0 + legend_w, frame.top + frame.plot_h + 44.0);
    let mut svg = svg_open(width, height, &chart.title);
    let _ = write!(svg, r#"<text class="title" x="{}" y="16">{}</text>"#, frame.left, escape(&chart.title));
    frame.axes(&mut svg, chart);
    for band in &chart.bands {
        frame.band(&mut svg, band);
    }
    frame.rules(&mut svg, chart);
    for (i, line) in chart.lines.iter().enumerate() {
        frame.line(&mut svg, chart, line, i);
    }
    for mark in chart.marks.iter().filter(|m| frame.shows(&(m.x, m.y))) {
        let _ = write!(
            svg,
            r##"<circle class="mark" cx="{:.1}" cy="{:.1}" r="6" fill="none" stroke="{}" stroke-width="2.5"><title>{}</title></circle>"##,
            frame.x(mark.x),
            frame.y(mark.y),
            mark.colour,
            escape(&mark.label)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// A line chart's plot area and scales: the ranges its points and rules span, rounded out to
/// its ticks, on linear or log axes.
struct Frame {
    left: f64,
    top: f64,
    plot_w: f64,
    plot_h: f64,
    log_x: bool,
    log_y: bool,
    x_lo: f64,
    x_hi: f64,
    y_ticks: Vec<f64>,
    x_ticks: Vec<(f64, String)>,
}

impl Frame {
    /// None when no point can be drawn.
    fn fit(chart: &LineChart) -> Option<Frame> {
        let mut frame = Frame {
            left: 70.0,
            top: 28.0,
            plot_w: 360.0,
            plot_h: 180.0,
            log_x: chart.log_x,
            log_y: chart.log_y,
            x_lo: f64::INFINITY,
            x_hi: f64::NEG_INFINITY,
            y_ticks: Vec::new(),
            x_ticks: Vec::new(),
        };
        let (mut y_lo, mut y_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let (mut x_lo, mut x_hi) = (f64::INFINITY, f64::NEG_INFINITY);
        let band_edges =
            chart.bands.iter().flat_map(|b| b.points.iter().flat_map(|(x, lo, hi)| [(*x, *lo), (*x, *hi)]));
        let drawn: Vec<(f64, f64)> =
            chart.lines.iter().flat_map(|l| l.points.iter().copied()).chain(band_edges).collect();
        for (px, py) in drawn.iter().filter(|p| frame.shows(p)) {
            (x_lo, x_hi, y_lo, y_hi) = (x_lo.min(*px), x_hi.max(*px), y_lo.min(*py), y_hi.max(*py));
        }
        if !y_lo.is_finite() {
            return None;
        }
        for rule in chart.rules.iter().filter(|r| r.y.is_finite() && (!chart.log_y || r.y > 0.0)) {
            (y_lo, y_hi) = (y_lo.min(rule.y), y_hi.max(rule.y));
        }
        if chart.x_categories.len() > 1 {
            (x_lo, x_hi) = (0.0, (chart.x_categories.len() - 1) as f64);
        }
        if x_hi <= x_lo {
            x_hi = x_lo + 1.0;
        }
        frame.y_ticks = if chart.log_y { log_ticks(y_lo, y_hi) } else { nice_ticks(y_lo.min(0.0), y_hi, 4) };
        frame.x_ticks = if chart.log_x {
            let ticks = log_ticks(x_lo, x_hi);
            (x_lo, x_hi) = (ticks[0], *ticks.last().expect("ticks"));
            ticks.into_iter().map(|t| (t, units::human(t, ""))).collect()
        } else if chart.x_categories.is_empty() {
            nice_ticks(x_lo, x_hi, 5)
                .into_iter()
                .filter(|t| *t >= x_lo && *t <= x_hi)
                .map(|t| (t, units::sig3(t)))
                .collect()
        } else {
            chart.x_categories.iter().enumerate().map(|(i, c)| (i as f64, c.clone())).collect()
        };
        (frame.x_lo, frame.x_hi) = (x_lo, x_hi);
        Some(frame)
    }

    /// Whether a point can be drawn on these axes (a log axis has no place for 0 or less).
    fn shows(&self, (px, py): &(f64, f64)) -> bool {
        py.is_finite() && (!self.log_y || *py > 0.0) && (!self.log_x || (px.is_finite() && *px > 0.0))
    }

    fn x(&self, v: f64) -> f64 {
        let (lo, hi) = (self.x_lo, self.x_hi);
        let f = if self.log_x { (v.ln() - lo.ln()) / (hi.ln() - lo.ln()) } else { (v - lo) / (hi - lo) };
        self.left + f * self.plot_w
    }

    fn y(&self, v: f64) -> f64 {
        let (lo, hi) = (self.y_ticks[0], *self.y_ticks.last().expect("ticks"));
        let f = if self.log_y { (v.ln() - lo.ln()) / (hi.ln() - lo.ln()) } else { (v - lo) / (hi - lo) };
        self.top + self.plot_h - f.clamp(0.0, 1.0) * self.plot_h
    }

    /// The grid with the y ticks' labels, the x ticks' labels, the x axis's label and the frame.
    fn axes(&self, svg: &mut String, chart: &LineChart) {
        let (left, top, plot_w, plot_h) = (self.left, self.top, self.plot_w, self.plot_h);
        for t in &self.y_ticks {
            let _ = write!(
                svg,
                r##"<line x1="{left}" x2="{right:.1}" y1="{ty:.1}" y2="{ty:.1}" stroke="#e3e3e3"/><text class="tick" x="{lx:.1}" y="{ly:.1}" text-anchor="end">{label}</text>"##,
                right = left + plot_w,
                ty = self.y(*t),
                lx = left - 6.0,
                ly = self.y(*t) + 4.0,
                label = escape(&units::human(*t, &chart.unit))
            );
        }
        for (t, label) in &self.x_ticks {
            let _ = write!(
                svg,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                self.x(*t),
                top + plot_h + 16.0,
                escape(label)
            );
        }
        let _ = write!(
            svg,
            r##"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#bbb"/>"##,
            left + plot_w / 2.0,
            top + plot_h + 34.0,
            escape(&chart.x_label)
        );
    }

    /// A band: the polygon along its highs and back along its lows, translucent.
    fn band(&self, svg: &mut String, band: &Band) {
        let shown: Vec<&(f64, f64, f64)> =
            band.points.iter().filter(|(x, lo, hi)| self.shows(&(*x, *lo)) && self.shows(&(*x, *hi))).collect();
        if shown.is_empty() {
            return;
        }
        let highs = shown.iter().map(|(x, _, hi)| format!("{:.1},{:.1}", self.x(*x), self.y(*hi)));
        let lows = shown.iter().rev().map(|(x, lo, _)| format!("{:.1},{:.1}", self.x(*x), self.y(*lo)));
        let _ = write!(
            svg,
            r#"<polygon class="band" points="{}" fill="{}" fill-opacity="0.18" stroke="none"><title>{}</title></polygon>"#,
            highs.chain(lows).collect::<Vec<_>>().join(" "),
            band.colour,
            escape(&band.name)
        );
    }

    /// Each horizontal rule (a bound), dashed red with its label and value.
    fn rules(&self, svg: &mut String, chart: &LineChart) {
        for rule in &chart.rules {
            let _ = write!(
                svg,
                r##"<g><title>{label}: {value}</title><line x1="{left}" x2="{right:.1}" y1="{ry:.1}" y2="{ry:.1}" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="6 3"/><text class="tick" x="{tx:.1}" y="{ty:.1}" text-anchor="end" fill="#c0392b">{label} {value}</text></g>"##,
                left = self.left,
                right = self.left + self.plot_w,
                ry = self.y(rule.y),
                tx = self.left + self.plot_w - 4.0,
                ty = self.y(rule.y) - 4.0,
                label = escape(&rule.label),
                value = escape(&units::human(rule.y, &chart.unit))
            );
        }
    }

    /// One line: its path, a dot with its value at each point, and its entry in the legend.
    fn line(&self, svg: &mut String, chart: &LineChart, line: &Line, i: usize) {
        let path: Vec<String> = line
            .points
            .iter()
            .filter(|p| self.shows(p))
            .enumerate()
            .map(|(k, (px, py))| format!("{}{:.1},{:.1}", if k == 0 { 'M' } else { 'L' }, self.x(*px), self.y(*py)))
            .collect();
        let dash = if line.dashed { r#" stroke-dasharray="5 3""# } else { "" };
        let _ = write!(
            svg,
            r#"<g><title>{}</title><path d="{}" stroke="{}" stroke-width="2" fill="none"{dash}/>"#,
            escape(&line.name),
            path.join(""),
            line.colour
        );
        for (px, py) in line.points.iter().filter(|p| self.shows(p)) {
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{}"><title>{}: {}</title></circle>"#,
                self.x(*px),
                self.y(*py),
                line.colour,
                escape(&line.name),
                escape(&units::human(*py, &chart.unit))
            );
        }
        let ly = self.top + 8.0 + i as f64 * 16.0;
        let lx = self.left + self.plot_w + 16.0;
        let _ = write!(
            svg,
            r#"<line x1="{lx}" x2="{:.1}" y1="{ly:.1}" y2="{ly:.1}" stroke="{}" stroke-width="2"{dash}/><text class="label" x="{:.1}" y="{:.1}">{}</text></g>"#,
            lx + 18.0,
            line.colour,
            lx + 22.0,
            ly + 4.0,
            escape(&line.name)
        );
    }
}

fn svg_open(width: f64, height: f64, title: &str) -> String {
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" role="img" aria-label="{}">"#,
        escape(title)
    )
}

/// Round tick values (1, 2, 5 × 10^k steps) covering lo..hi.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let span = (hi - lo).abs().max(f64::MIN_POSITIVE);
    let raw = span / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    let start = (lo / step).floor() * step;
    let mut ticks = Vec::new();
    let mut t = start;
    while t < hi + step * 0.999 && ticks.len() < 50 {
        ticks.push((t / step).round() * step);
        t += step;
    }
    ticks
}

/// Powers of ten (and 2×, 5× when few decades) covering lo..hi, for a log axis.
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let b = b.max(a + 1);
    let mut ticks = Vec::new();
    for e in a..=b {
        let base = 10f64.powi(e);
        ticks.push(base);
        if b - a <= 2 && e < b {
            ticks.extend([2.0 * base, 5.0 * base]);
        }
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 95.0, 4), vec![0.0, 25.0, 50.0, 75.0, 100.0]);
        assert_eq!(nice_ticks(0.0, 52_837.0, 4), vec![0.0, 20_000.0, 40_000.0, 60_000.0]);
        assert_eq!(log_ticks(12.0, 180.0), vec![10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]);
    }

    #[test]
    fn charts_escape_text_and_draw_every_bar_and_whisker() {
        let chart = BarChart {
            title: "IOPS <read>".into(),
            unit: "op/s".into(),
            bars: vec![
                Bar {
                    label: "host/tmpfs".into(),
                    value: 100.0,
                    ci: Some((95.0, 105.0)),
                    colour: BASELINE_COLOUR,
                    note: String::new(),
                    tooltip: "a & b".into(),
                },
                Bar {
                    label: "runc/tmpfs".into(),
                    value: 80.0,
                    ci: Some((75.0, 85.0)),
                    colour: colour(0),
                    note: "-20%".into(),
                    tooltip: "c".into(),
                },
            ],
        };
        let svg = bar_chart(&chart);
        assert!(svg.contains("IOPS &lt;read&gt;") && svg.contains("a &amp; b"));
        assert_eq!(svg.matches("<rect").count(), 2);
        assert_eq!(svg.matches("stroke=\"#222\"").count(), 2, "one whisker per bar");
        let lines = LineChart {
            title: "t".into(),
            unit: "us".into(),
            x_label: "percentile".into(),
            x_categories: vec!["p50".into(), "p99".into()],
            lines: vec![Line {
                name: "host".into(),
                points: vec![(0.0, 10.0), (1.0, 100.0)],
                colour: colour(0),
                dashed: false,
            }],
            log_y: true,
            log_x: false,
            rules: Vec::new(),
            marks: Vec::new(),
            bands: Vec::new(),
        };
        let svg = line_chart(&lines);
        assert!(svg.contains("<path d=\"M") && svg.contains(">p99<"));
    }
}
