//! `-graph file= revision= title=`: one self-contained HTML page per file (SVG, no script, no
//! network) with every revision written to it: op rate and latency percentiles over time, one
//! line per revision, and a summary table. Each run adds a revision; the data of all revisions
//! travel inside the page as JSON, so the next run can redraw them.

use std::fmt::Write;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::metrics::Figures;
use figures::chart::style::STYLE;
use figures::chart::{self, Line, LineChart};

const DATA_OPEN: &str = r#"<script type="application/json" id="isobench-cql-graph">"#;
const DATA_CLOSE: &str = "</script>";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Revision {
    pub revision: String,
    /// The command line, secrets redacted.
    pub command: String,
    /// What was graphed: an operation type or "total".
    pub op: String,
    pub intervals: Vec<Figures>,
    pub summary: Figures,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Graph {
    pub title: String,
    pub revisions: Vec<Revision>,
}

impl Graph {
    /// The graph stored in `path`, or an empty one when there is no such file.
    pub fn load(path: &Path) -> Result<Option<Graph>> {
        let html = match std::fs::read_to_string(path) {
            Ok(html) => html,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("-graph file={}", path.display())),
        };
        let start = html.find(DATA_OPEN).map(|i| i + DATA_OPEN.len()).with_context(|| {
            format!(
                "-graph file={}: the file exists but is not an isobench graph; name a new file or remove it",
                path.display()
            )
        })?;
        let len = html[start..].find(DATA_CLOSE).context("the graph's data block is not closed")?;
        let json = html[start..start + len].replace("<\\/", "</");
        serde_json::from_str(&json)
            .map(Some)
            .with_context(|| format!("-graph file={}: its data block does not parse", path.display()))
    }

    /// Adds `revision` to the graph in `path` (creating it) and rewrites the page atomically.
    pub fn append(path: &Path, title: Option<&str>, revision: Revision) -> Result<Graph> {
        let mut graph = Graph::load(path)?.unwrap_or_else(|| Graph { title: String::new(), revisions: Vec::new() });
        if let Some(t) = title {
            graph.title = t.to_string();
        }
        if graph.title.is_empty() {
            graph.title = format!("{} - {}", crate::program(), revision.command);
        }
        graph.revisions.push(revision);
        let tmp = path.with_extension("html.tmp");
        std::fs::write(&tmp, graph.render())
            .and_then(|_| std::fs::rename(&tmp, path))
            .with_context(|| format!("writing -graph file={}", path.display()))?;
        Ok(graph)
    }

    pub fn render(&self) -> String {
        let e = chart::escape;
        let mut o = format!(
            "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body><main><h1>{}</h1>",
            e(&self.title),
            e(&self.title)
        );
        let _ = write!(
            o,
            "<p class=\"meta\">Written by <code>{} -graph</code>; each run with the same file adds a revision.</p>",
            crate::program()
        );
        o.push_str("<h2>Over time</h2><div class=\"charts\">");
        type Pick = fn(&Figures) -> f64;
        let charts: [(&str, &str, Pick); 6] = [
            ("Op rate", "op/s", |f| f.op_rate),
            ("Latency mean", "us", |f| f.mean_ms * 1000.0),
            ("Latency median", "us", |f| f.median_ms * 1000.0),
            ("Latency 95th percentile", "us", |f| f.p95_ms * 1000.0),
            ("Latency 99th percentile", "us", |f| f.p99_ms * 1000.0),
            ("Latency max", "us", |f| f.max_ms * 1000.0),
        ];
        for (title, unit, pick) in charts {
            let lines = self
                .revisions
                .iter()
                .enumerate()
                .map(|(i, r)| Line {
                    name: format!("{} ({})", r.revision, r.op),
                    points: r.intervals.iter().map(|f| (f.time, pick(f))).collect(),
                    colour: chart::colour(i),
                    dashed: false,
                })
                .collect();
            o.push_str(&chart::line_chart(&LineChart::plain(title.into(), unit.into(), "seconds", lines)));
        }
        o.push_str("</div><h2>Summary</h2><table><tr><th>revision</th><th>op</th><th>op/s</th><th>pk/s</th><th>row/s</th><th>mean ms</th><th>median ms</th><th>p95 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>operations</th><th>errors</th><th>seconds</th><th>command</th></tr>");
        for r in &self.revisions {
            let s = &r.summary;
            o.push_str(&format!("<tr><td>{}</td><td>{}</td>", e(&r.revision), e(&r.op)));
            for v in [s.op_rate, s.partition_rate, s.row_rate] {
                o.push_str(&format!("<td class=\"num\">{v:.0}</td>"));
            }
            for v in [s.mean_ms, s.median_ms, s.p95_ms, s.p99_ms, s.p999_ms, s.max_ms] {
                o.push_str(&format!("<td class=\"num\">{v:.1}</td>"));
            }
            o.push_str(&format!(
                "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.1}</td><td><code>{}</code></td></tr>",
                s.operations,
                s.errors,
                s.time,
                e(&r.command)
            ));
        }
        o.push_str("</table>");
        let json = serde_json::to_string(self).expect("a graph serialises").replace("</", "<\\/");
        o.push_str(&format!("{DATA_OPEN}{json}{DATA_CLOSE}</main></body></html>\n"));
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(time: f64, op_rate: f64) -> Figures {
        Figures {
            time,
            op_rate,
            partition_rate: op_rate,
            row_rate: op_rate,
            mean_ms: 1.0,
            median_ms: 0.9,
            p95_ms: 2.0,
            p99_ms: 3.0,
            p999_ms: 4.0,
            max_ms: 5.0,
            operations: 10,
            partitions: 10,
            errors: 0,
        }
    }

    fn revision(name: &str) -> Revision {
        Revision {
            revision: name.into(),
            command: "write n=10 </script>".into(),
            op: "total".into(),
            intervals: vec![figures(1.0, 100.0), figures(2.0, 120.0)],
            summary: figures(2.0, 110.0),
        }
    }

    #[test]
    fn a_second_run_adds_a_revision() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.html");
        Graph::append(&path, Some("T"), revision("r1")).unwrap();
        let g = Graph::append(&path, None, revision("r2")).unwrap();
        assert_eq!(g.revisions.iter().map(|r| r.revision.as_str()).collect::<Vec<_>>(), ["r1", "r2"]);
        assert_eq!(g.title, "T", "the first title stays");
        let html = std::fs::read_to_string(&path).unwrap();
        assert!(!html.contains("src=") && !html.contains("href="), "nothing to fetch");
        assert_eq!(html.matches("</script>").count(), 1, "commands are escaped inside the data block");
        assert_eq!(Graph::load(&path).unwrap().unwrap().revisions.len(), 2);
    }

    #[test]
    fn a_foreign_file_is_not_overwritten() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.html");
        std::fs::write(&path, "<html>mine</html>").unwrap();
        assert!(Graph::append(&path, None, revision("r1")).unwrap_err().to_string().contains("not an isobench graph"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "<html>mine</html>");
    }
}
