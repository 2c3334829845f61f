//! cassandra-stress user profiles (`user profile=app.yaml ops(insert=1,by_user=3)`): the YAML
//! file read with every value's line kept, so that each mistake is one message naming the file,
//! the line and the fix. The table's columns and types come from the cluster once the schema
//! exists ([`table`]), rows from seeds ([`rows`], [`values`]), the operations from [`user`].

pub mod rows;
pub mod table;
pub mod values;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_saphyr::Spanned;

use super::dist::DistSpec;
use crate::consistency::CONSISTENCY;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Yaml {
    specname: Option<Spanned<String>>,
    keyspace: Option<Spanned<String>>,
    keyspace_definition: Option<Spanned<String>>,
    table: Option<Spanned<String>>,
    table_definition: Option<Spanned<String>>,
    #[serde(default)]
    extra_definitions: Vec<Spanned<String>>,
    #[serde(default)]
    columnspec: Vec<ColumnYaml>,
    insert: Option<InsertYaml>,
    #[serde(default)]
    queries: HashMap<String, QueryYaml>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ColumnYaml {
    name: Spanned<String>,
    size: Option<Spanned<String>>,
    population: Option<Spanned<String>>,
    cluster: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InsertYaml {
    partitions: Option<Spanned<String>>,
    select: Option<Spanned<String>>,
    batchtype: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryYaml {
    cql: Spanned<String>,
    fields: Option<Spanned<String>>,
    #[serde(rename = "consistencyLevel")]
    consistency_level: Option<Spanned<String>>,
    #[serde(rename = "serialConsistencyLevel")]
    serial_consistency_level: Option<Spanned<String>>,
    validate: Option<bool>,
    idempotent: Option<bool>,
}

/// How a column's values are drawn (cassandra-stress's `columnspec` entry).
#[derive(Clone, Debug)]
pub struct ColumnSpec {
    pub name: String,
    pub line: u64,
    /// Characters or bytes of a text or blob, elements of a collection.
    pub size: Option<DistSpec>,
    /// The distinct values: each value comes from one draw of it.
    pub population: Option<DistSpec>,
    /// Clustering columns: values per parent (rows per partition is the product).
    pub cluster: Option<DistSpec>,
}

/// `select: fixed(1)/1000`: a distribution over a divisor.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub numerator: DistSpec,
    pub divisor: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchKind {
    Logged,
    Unlogged,
    Counter,
}

#[derive(Clone, Debug)]
pub struct Insert {
    pub partitions: DistSpec,
    pub select: Ratio,
    pub batch: BatchKind,
}

/// Where a query's bound values come from: one row, or any row of the partition per marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fields {
    SameRow,
    MultiRow,
}

#[derive(Clone, Debug)]
pub struct Query {
    pub name: String,
    pub line: u64,
    pub cql: String,
    pub fields: Fields,
    pub consistency: Option<String>,
    pub serial_consistency: Option<String>,
    /// The profile's own `validate:`; `-validate` turns it on for every query.
    pub validate: bool,
    /// Applying it twice changes nothing: the profile's `idempotent:`, else what its CQL says.
    pub idempotent: bool,
}

/// A CQL statement of the profile and the line it starts on.
#[derive(Clone, Debug)]
pub struct Located {
    pub text: String,
    pub line: u64,
}

/// A profile as read: what it defines, not yet what the cluster holds.
#[derive(Clone, Debug)]
pub struct Profile {
    pub file: PathBuf,
    /// What `ops(…)` calls it when several profiles run at once (`specname.query`):
    /// `specname:`, or keyspace.table.
    pub specname: String,
    pub keyspace: String,
    pub keyspace_definition: Option<Located>,
    pub table: String,
    pub table_definition: Option<Located>,
    pub extra_definitions: Vec<Located>,
    pub columns: Vec<ColumnSpec>,
    pub insert: Insert,
    /// Sorted by line, as written.
    pub queries: Vec<Query>,
}

/// "app.yaml:12: what is wrong. How to fix it."
fn at(file: &Path, line: u64, message: &str) -> String {
    format!("{}:{line}: {message}", file.display())
}

fn line<T>(s: &Spanned<T>) -> u64 {
    s.referenced.line()
}

fn dist(file: &Path, key: &str, s: &Spanned<String>) -> Result<DistSpec, String> {
    DistSpec::parse(&s.value).map_err(|e| at(file, line(s), &format!("{key}: {e}")))
}

fn ratio(file: &Path, s: &Spanned<String>) -> Result<Ratio, String> {
    Ratio::parse(&s.value).map_err(|why| at(file, line(s), &format!("select: {why}")))
}

fn consistency(file: &Path, key: &str, s: &Option<Spanned<String>>) -> Result<Option<String>, String> {
    let Some(s) = s else { return Ok(None) };
    let level = s.value.trim().to_ascii_uppercase();
    if !CONSISTENCY.contains(&level.as_str()) {
        return Err(at(
            file,
            line(s),
            &format!("{key}: \"{}\" is not a consistency level; use one of {}", s.value, CONSISTENCY.join(", ")),
        ));
    }
    Ok(Some(level))
}

/// A CQL name as the cluster stores it: unquoted names are folded to lower case.
pub fn stored_name(name: &str) -> String {
    match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => name.to_ascii_lowercase(),
    }
}

impl Profile {
    /// Reads and checks a profile file.
    pub fn load(file: &Path) -> Result<Profile, String> {
        let text = std::fs::read_to_string(file).map_err(|e| {
            format!("{}: cannot read the profile: {e}; give profile= a YAML file that exists", file.display())
        })?;
        Profile::parse(file, &text)
    }

    pub fn parse(file: &Path, text: &str) -> Result<Profile, String> {
        let yaml: Yaml = serde_saphyr::from_str(text).map_err(|e| {
            let line = e.location().map_or(0, |l| l.line());
            let message = e.to_string();
            // The message's first line says what is wrong; the rest is a snippet of the file.
            let first = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid YAML").trim();
            let fix =
                if first.contains("unknown field") { "; remove it or spell it as cassandra-stress does" } else { "" };
            at(file, line, &format!("{first}{fix}"))
        })?;
        let keyspace = yaml
            .keyspace
            .ok_or_else(|| at(file, 1, "keyspace: is missing; name the keyspace, e.g. keyspace: stresscql"))?;
        let table =
            yaml.table.ok_or_else(|| at(file, 1, "table: is missing; name the table, e.g. table: blogposts"))?;
        let located = |s: Spanned<String>| Located {
            line: line(&s),
            text: s.value.trim().trim_end_matches(';').trim().to_string(),
        };
        let columns = column_specs(file, yaml.columnspec)?;
        let insert = insert_of(file, yaml.insert)?;
        let queries = queries_of(file, yaml.queries)?;
        let keyspace = keyspace.value.trim().to_string();
        let specname = match yaml.specname {
            Some(s) => s.value.trim().to_ascii_lowercase(),
            None => format!("{keyspace}.{}", table.value.trim()).to_ascii_lowercase(),
        };
        Ok(Profile {
            file: file.to_path_buf(),
            specname,
            keyspace,
            keyspace_definition: yaml.keyspace_definition.map(located).filter(|l| !l.text.is_empty()),
            table: table.value.trim().to_string(),
            table_definition: yaml.table_definition.map(located).filter(|l| !l.text.is_empty()),
            extra_definitions: yaml.extra_definitions.into_iter().map(located).filter(|l| !l.text.is_empty()).collect(),
            columns,
            insert,
            queries,
        })
    }

    pub fn query(&self, name: &str) -> Option<&Query> {
        self.queries.iter().find(|q| q.name == name)
    }

    /// The operation names `ops(…)` may use.
    pub fn op_names(&self) -> Vec<&str> {
        std::iter::once("insert").chain(self.queries.iter().map(|q| q.name.as_str())).collect()
    }

    pub fn column(&self, name: &str) -> Option<&ColumnSpec> {
        self.columns.iter().find(|c| c.name == name)
    }

    /// The line of `table_definition` that defines `column`, for messages about it.
    pub fn column_line(&self, column: &str) -> u64 {
        if let Some(spec) = self.column(column) {
            return spec.line;
        }
        let Some(def) = &self.table_definition else { return 1 };
        def.text
            .lines()
            .position(|l| {
                l.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '"')).any(|w| stored_name(w) == column)
            })
            .map_or(def.line, |i| def.line + i as u64)
    }

    pub fn error(&self, line: u64, message: &str) -> String {
        at(&self.file, line, message)
    }

    /// The profile part of the settings dump, as cassandra-stress prints it.
    pub fn dump(&self) -> String {
        let mut o = String::new();
        let _ = writeln!(o, "  Profile File: {}", self.file.display());
        let _ = writeln!(o, "  Keyspace Name: {}", self.keyspace);
        let _ = writeln!(
            o,
            "  Keyspace CQL: \n***\n{}***\n",
            self.keyspace_definition.as_ref().map_or("null\n".into(), |d| format!("{}\n", d.text))
        );
        let _ = writeln!(o, "  Table Name: {}", self.table);
        let _ = writeln!(
            o,
            "  Table CQL: \n***\n{}***\n",
            self.table_definition.as_ref().map_or("null\n".into(), |d| format!("{}\n", d.text))
        );
        let extra: Vec<&str> = self.extra_definitions.iter().map(|d| d.text.as_str()).collect();
        let _ = writeln!(
            o,
            "  Extra Schema Definitions: {}",
            if extra.is_empty() { "null".into() } else { format!("[{}]", extra.join(", ")) }
        );
        if !self.columns.is_empty() {
            o.push_str("  Generator Configs:\n");
            for c in &self.columns {
                let mut parts = Vec::new();
                for (key, d) in [("size", &c.size), ("population", &c.population), ("cluster", &c.cluster)] {
                    if let Some(d) = d {
                        parts.push(format!("{key}: {d}"));
                    }
                }
                let _ = writeln!(o, "    {}: {}", c.name, parts.join("; "));
            }
        }
        if !self.queries.is_empty() {
            o.push_str("  Query Definitions:\n");
            for q in &self.queries {
                let fields = if q.fields == Fields::SameRow { "samerow" } else { "multirow" };
                let _ = writeln!(o, "    {}: CQL:{};Fields:{fields};", q.name, q.cql);
            }
        }
        let i = &self.insert;
        let _ = writeln!(
            o,
            "  Insert Settings:\n    partitions: {}\n    select: {}/{}\n    batchtype: {:?}",
            i.partitions, i.select.numerator, i.select.divisor, i.batch
        );
        o
    }
}

/// Each column's distributions, once per column.
fn column_specs(file: &Path, given: Vec<ColumnYaml>) -> Result<Vec<ColumnSpec>, String> {
    let mut columns: Vec<ColumnSpec> = Vec::new();
    for c in given {
        let name = stored_name(c.name.value.trim());
        if columns.iter().any(|o| o.name == name) {
            return Err(at(
                file,
                line(&c.name),
                &format!("columnspec: {name} is given twice; keep one entry per column"),
            ));
        }
        columns.push(ColumnSpec {
            line: line(&c.name),
            size: c.size.as_ref().map(|s| dist(file, "size", s)).transpose()?,
            population: c.population.as_ref().map(|s| dist(file, "population", s)).transpose()?,
            cluster: c.cluster.as_ref().map(|s| dist(file, "cluster", s)).transpose()?,
            name,
        });
    }
    Ok(columns)
}

/// How a write picks its partitions and rows, and batches them.
fn insert_of(file: &Path, insert: Option<InsertYaml>) -> Result<Insert, String> {
    Ok(match insert {
        None => Insert::default(),
        Some(i) => Insert {
            partitions: i
                .partitions
                .as_ref()
                .map(|s| dist(file, "partitions", s))
                .transpose()?
                .unwrap_or(DistSpec::Fixed(1)),
            select: i.select.as_ref().map(|s| ratio(file, s)).transpose()?.unwrap_or_else(Ratio::all),
            batch: match &i.batchtype {
                None => BatchKind::Logged,
                Some(b) => BatchKind::parse(&b.value).map_err(|why| at(file, line(b), &format!("batchtype: {why}")))?,
            },
        },
    })
}

/// The named queries in the file's order; none may take the built-in write's name.
fn queries_of(file: &Path, given: HashMap<String, QueryYaml>) -> Result<Vec<Query>, String> {
    let mut queries = Vec::new();
    for (name, q) in given {
        if name.eq_ignore_ascii_case("insert") {
            return Err(at(
                file,
                line(&q.cql),
                "queries: a query may not be called insert, the name of the built-in write; rename it",
            ));
        }
        let fields = match &q.fields {
            None => Fields::MultiRow,
            Some(f) => match f.value.trim().to_ascii_lowercase().as_str() {
                "samerow" => Fields::SameRow,
                "multirow" => Fields::MultiRow,
                other => return Err(at(file, line(f), &format!("fields: \"{other}\" is not samerow or multirow"))),
            },
        };
        let cql = q.cql.value.trim().trim_end_matches(';').trim().to_string();
        queries.push(Query {
            line: line(&q.cql),
            idempotent: q.idempotent.unwrap_or_else(|| idempotent_by_its_cql(&cql)),
            cql,
            fields,
            consistency: consistency(file, "consistencyLevel", &q.consistency_level)?,
            serial_consistency: consistency(file, "serialConsistencyLevel", &q.serial_consistency_level)?,
            validate: q.validate.unwrap_or(false),
            name: name.to_ascii_lowercase(),
        });
    }
    queries.sort_by_key(|q| q.line);
    Ok(queries)
}

/// Whether a statement may be applied twice: not a conditional one (`IF …`, whose second try
/// answers "not applied"), not an increment or an append (`c = c + ?`, `l = ? + l`), not one
/// that draws a new value (`now()`, `uuid()`).
pub fn idempotent_by_its_cql(cql: &str) -> bool {
    let lower = cql.to_ascii_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    let conditional = words.contains(&"if");
    let draws = ["now()", "uuid()", "currenttimeuuid()", "currenttimestamp()"].iter().any(|f| lower.contains(f));
    // An UPDATE's assignments, between SET and WHERE: a column on both sides of `+` or `-`.
    let assignments = match (words.iter().position(|w| *w == "set"), words.iter().position(|w| *w == "where")) {
        (Some(set), Some(end)) if set < end => words[set + 1..end].join(" "),
        _ => String::new(),
    };
    let identifiers = |text: &str| -> Vec<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).map(String::from).collect()
    };
    let self_referencing = assignments.split(',').any(|assignment| {
        let Some((column, value)) = assignment.split_once('=') else { return false };
        let column = column.trim();
        value.contains(['+', '-']) && identifiers(value).iter().any(|w| w == column)
    });
    !(conditional || draws || self_referencing)
}

impl Ratio {
    fn all() -> Ratio {
        Ratio { numerator: DistSpec::Fixed(1), divisor: 1.0 }
    }

    /// `fixed(1)/1000`.
    pub fn parse(text: &str) -> Result<Ratio, String> {
        let wrong = |why: &str| format!("{why}; write a distribution over a divisor, e.g. fixed(1)/1000");
        let (numerator, divisor) = text.rsplit_once('/').ok_or_else(|| wrong("no divisor"))?;
        let numerator = DistSpec::parse(numerator).map_err(|e| wrong(&e))?;
        let divisor: f64 = divisor.trim().parse().map_err(|_| wrong(&format!("\"{divisor}\" is not a number")))?;
        if divisor <= 0.0 {
            return Err(wrong("the divisor must be positive"));
        }
        Ok(Ratio { numerator, divisor })
    }
}

impl BatchKind {
    pub fn parse(text: &str) -> Result<BatchKind, String> {
        match text.trim().to_ascii_uppercase().as_str() {
            "LOGGED" => Ok(BatchKind::Logged),
            "UNLOGGED" => Ok(BatchKind::Unlogged),
            "COUNTER" => Ok(BatchKind::Counter),
            other => Err(format!("\"{other}\" is not a batch type; use LOGGED, UNLOGGED or COUNTER")),
        }
    }
}

impl Default for Insert {
    fn default() -> Insert {
        Insert { partitions: DistSpec::Fixed(1), select: Ratio::all(), batch: BatchKind::Logged }
    }
}

/// An operation of `ops(…)`: its name as given and printed (`insert`, or `spec.insert` among
/// several profiles), and the profile and operation it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UserOp {
    pub label: &'static str,
    pub profile: usize,
    pub name: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_idempotent_unless_it_is_conditional_increments_appends_or_draws_a_value() {
        for (cql, idempotent) in [
            ("SELECT * FROM t WHERE k = ?", true),
            ("UPDATE t SET v = ? WHERE k = ?", true),
            ("INSERT INTO t (k, v) VALUES (?, ?)", true),
            ("UPDATE t SET c = c + ? WHERE k = ?", false),
            ("update t set a = ?, hits = hits - 1 where k = ?", false),
            ("UPDATE t SET l = ? + l WHERE k = ?", false),
            ("INSERT INTO t (k, v) VALUES (?, ?) IF NOT EXISTS", false),
            ("UPDATE t SET v = ? WHERE k = ? IF v = ?", false),
            ("INSERT INTO t (k, at) VALUES (?, now())", false),
        ] {
            assert_eq!(idempotent_by_its_cql(cql), idempotent, "{cql}");
        }
    }

    const BLOG: &str = "\
keyspace: stresscql
keyspace_definition: |
  CREATE KEYSPACE stresscql WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1};
table: blogposts
table_definition: |
  CREATE TABLE blogposts (
        domain text,
        published_date timeuuid,
        url text,
        author text,
        title text,
        body text,
        PRIMARY KEY(domain, published_date)
  ) WITH CLUSTERING ORDER BY (published_date DESC)
columnspec:
  - name: domain
    size: gaussian(5..100)
    population: uniform(1..10M)
  - name: published_date
    cluster: fixed(1000)
  - name: body
    size: gaussian(100..5000)
insert:
  partitions: fixed(1)
  select: fixed(1)/1000
  batchtype: UNLOGGED
queries:
   singlepost:
      cql: select * from blogposts where domain = ? LIMIT 1
      fields: samerow
   timeline:
      cql: select url, title, published_date from blogposts where domain = ? LIMIT 10
      fields: samerow
";

    fn parse(text: &str) -> Result<Profile, String> {
        Profile::parse(Path::new("blog.yaml"), text)
    }

    #[test]
    fn cassandra_stress_s_example_reads() {
        let p = parse(BLOG).unwrap();
        assert_eq!((p.keyspace.as_str(), p.table.as_str()), ("stresscql", "blogposts"));
        assert_eq!(p.columns.len(), 3);
        assert_eq!(p.column("published_date").unwrap().cluster, Some(DistSpec::Fixed(1000)));
        assert_eq!(p.insert.select, Ratio { numerator: DistSpec::Fixed(1), divisor: 1000.0 });
        assert_eq!(p.insert.batch, BatchKind::Unlogged);
        assert_eq!(p.op_names(), ["insert", "singlepost", "timeline"]);
        assert_eq!(p.query("timeline").unwrap().fields, Fields::SameRow);
        assert_eq!(p.column_line("domain"), 16);
        assert_eq!(p.column_line("url"), 9, "a column without a columnspec: its line in table_definition");
        assert!(!p.table_definition.as_ref().unwrap().text.ends_with(';'));
    }

    #[test]
    fn mistakes_name_the_file_the_line_and_the_fix() {
        let unknown = parse(&BLOG.replace("    cluster: fixed(1000)", "    clustr: fixed(1000)")).unwrap_err();
        assert!(
            unknown.starts_with("blog.yaml:20: ") && unknown.contains("clustr") && unknown.contains("remove it"),
            "{unknown}"
        );
        let bad_dist = parse(&BLOG.replace("gaussian(100..5000)", "gaussian(5000..100)")).unwrap_err();
        assert!(bad_dist.starts_with("blog.yaml:22: size:") && bad_dist.contains("larger than max"), "{bad_dist}");
        let bad_batch = parse(&BLOG.replace("UNLOGGED", "SOMETIMES")).unwrap_err();
        assert!(
            bad_batch.starts_with("blog.yaml:26:") && bad_batch.contains("LOGGED, UNLOGGED or COUNTER"),
            "{bad_batch}"
        );
        let bad_select = parse(&BLOG.replace("fixed(1)/1000", "fixed(1)")).unwrap_err();
        assert!(bad_select.starts_with("blog.yaml:25:") && bad_select.contains("fixed(1)/1000"), "{bad_select}");
        let missing = parse("table: t\n").unwrap_err();
        assert!(missing.starts_with("blog.yaml:1: keyspace: is missing"), "{missing}");
        let top = parse(&format!("{BLOG}token_range_queries: {{}}\n")).unwrap_err();
        assert!(top.starts_with("blog.yaml:34:") && top.contains("token_range_queries"), "{top}");
    }
}
