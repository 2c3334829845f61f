//! The stylesheet of isobench's HTML pages: the report and cql's graph share one look.

pub const STYLE: &str = r#"
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #222; margin: 0; background: #fafafa;
  overflow-wrap: break-word; }
main { max-width: 1280px; margin: 0 auto; padding: 8px 24px 48px; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 22px 0 6px; }
.meta { color: #555; } nav a { margin-right: 14px; }
table { border-collapse: collapse; margin: 6px 0 12px; background: #fff; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.heat td.v { text-align: center; min-width: 90px; white-space: nowrap; }
.heat small { display: block; font-size: 11px; opacity: .85; }
.charts { display: flex; flex-wrap: wrap; gap: 10px 24px; align-items: flex-start; }
.chart { background: #fff; border: 1px solid #e5e5e5; }
.chart .title { font-size: 13px; font-weight: 600; } .chart .tick { font-size: 11px; fill: #555; }
.chart .label { font-size: 12px; } .chart .value { font-size: 12px; fill: #333; }
.warn { background: #fff4e5; border-left: 4px solid #e69f00; padding: 6px 12px; margin: 4px 0; }
.fail { color: #b2182b; font-weight: 600; } .pass { color: #1a7f37; } .inconclusive { color: #8a6d00; font-weight: 600; }
.diff { background: #fde2c8; } .muted { color: #777; }
details { margin: 6px 0; } summary { cursor: pointer; color: #0b5cad; }
.verdict { background: #eef5ff; border-left: 4px solid #0b5cad; padding: 2px 14px 8px; margin: 12px 0; }
.verdict h2 { border: 0; margin-top: 10px; } .verdict ul { padding-left: 18px; margin: 6px 0; }
.verdict li { margin: 4px 0; } .verdict li span { white-space: nowrap; }
table { display: block; max-width: 100%; overflow-x: auto; } svg { max-width: 100%; height: auto; }
@media (max-width: 700px) { main { padding: 4px 10px 32px; } nav a { display: inline-block; margin: 2px 10px 2px 0; }
  .verdict li span { white-space: normal; } }
"#;
