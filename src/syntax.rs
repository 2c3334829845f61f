//! The suite file's syntax, which the suite and every kind read their keys with: the file as a
//! small tree of values that remember where they came from (a line of the file, or a `--set` on
//! the command line), so every validation error can point at its cause.

use std::fmt;
use std::time::Duration;

use serde::ser::{SerializeMap, SerializeSeq};

use figures::units;

#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    Line(usize),
    Set(String),
    Default,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub value: Value,
    pub origin: Origin,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    List(Vec<Node>),
    Table(Table),
}

/// Keys in the order the file gives them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    pub entries: Vec<(String, Node)>,
}

impl Table {
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.entries.iter().find(|(k, _)| k == key).map(|(_, n)| n)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        self.entries.iter_mut().find(|(k, _)| k == key).map(|(_, n)| n)
    }

    pub fn set(&mut self, key: &str, node: Node) {
        match self.get_mut(key) {
            Some(existing) => *existing = node,
            None => self.entries.push((key.to_string(), node)),
        }
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        match self.get(key).map(|n| &n.value) {
            Some(Value::Str(s)) => Some(s),
            _ => None,
        }
    }
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Str(_) => "a string",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Bool(_) => "a boolean",
            Value::List(_) => "a list",
            Value::Table(_) => "a table",
        }
    }

    /// The form used in cell labels and `k=v` parameter strings.
    pub fn label(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => f.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::List(items) => items.iter().map(|n| n.value.label()).collect::<Vec<_>>().join(","),
            Value::Table(t) => {
                t.entries.iter().map(|(k, n)| format!("{k}={}", n.value.label())).collect::<Vec<_>>().join(",")
            }
        }
    }
}

// Serialised as plain JSON (origins dropped): this is how a workload's concrete parameters travel
// to the agent inside a sandbox.
impl serde::Serialize for Value {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Str(v) => s.serialize_str(v),
            Value::Int(v) => s.serialize_i64(*v),
            Value::Float(v) => s.serialize_f64(*v),
            Value::Bool(v) => s.serialize_bool(*v),
            Value::List(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for n in items {
                    seq.serialize_element(&n.value)?;
                }
                seq.end()
            }
            Value::Table(t) => t.serialize(s),
        }
    }
}

impl serde::Serialize for Table {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.entries.len()))?;
        for (k, n) in &self.entries {
            map.serialize_entry(k, &n.value)?;
        }
        map.end()
    }
}

impl<'de> serde::Deserialize<'de> for Table {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let json = serde_json::Value::deserialize(d)?;
        match from_json(&json) {
            Value::Table(t) => Ok(t),
            other => Err(serde::de::Error::custom(format!("expected a table, got {}", other.type_name()))),
        }
    }
}

fn from_json(v: &serde_json::Value) -> Value {
    let node = |v: &serde_json::Value| Node { value: from_json(v), origin: Origin::Default };
    match v {
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        serde_json::Value::Array(items) => Value::List(items.iter().map(node).collect()),
        serde_json::Value::Object(map) => {
            Value::Table(Table { entries: map.iter().map(|(k, v)| (k.clone(), node(v))).collect() })
        }
        serde_json::Value::Null => Value::Str(String::new()),
    }
}

/// One error in a suite: where, which key, what is wrong and what is allowed.
#[derive(Debug, Clone)]
pub struct SuiteError {
    pub file: String,
    pub origin: Origin,
    pub message: String,
}

impl fmt::Display for SuiteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.origin {
            Origin::Line(line) => write!(f, "{}:{}: {}", self.file, line, self.message),
            Origin::Set(text) => write!(f, "{} (from --set {}): {}", self.file, text, self.message),
            Origin::Default => write!(f, "{}: {}", self.file, self.message),
        }
    }
}

impl std::error::Error for SuiteError {}

/// Parses TOML text into a tree whose nodes carry their line numbers.
pub fn parse(file: &str, text: &str) -> Result<Table, SuiteError> {
    let doc = toml_edit::Document::parse(text).map_err(|e| SuiteError {
        file: file.to_string(),
        origin: e.span().map(|s| Origin::Line(line_of(text, s.start))).unwrap_or(Origin::Default),
        message: format!("not valid TOML: {}", e.message()),
    })?;
    Ok(convert_table(text, doc.as_table()))
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn origin_of(text: &str, span: Option<std::ops::Range<usize>>) -> Origin {
    span.map(|s| Origin::Line(line_of(text, s.start))).unwrap_or(Origin::Default)
}

fn convert_table(text: &str, table: &dyn toml_edit::TableLike) -> Table {
    let mut out = Table::default();
    for (key, item) in table.iter() {
        let key_origin = origin_of(text, table.key(key).and_then(|k| k.span()));
        out.entries.push((key.to_string(), convert_item(text, item, key_origin)));
    }
    out
}

fn convert_item(text: &str, item: &toml_edit::Item, origin: Origin) -> Node {
    match item {
        toml_edit::Item::Value(v) => convert_value(text, v, origin),
        toml_edit::Item::Table(t) => {
            Node { value: Value::Table(convert_table(text, t)), origin: origin_of(text, t.span()).or(origin) }
        }
        toml_edit::Item::ArrayOfTables(tables) => Node {
            value: Value::List(
                tables
                    .iter()
                    .map(|t| Node { value: Value::Table(convert_table(text, t)), origin: origin_of(text, t.span()) })
                    .collect(),
            ),
            origin,
        },
        toml_edit::Item::None => Node { value: Value::Table(Table::default()), origin },
    }
}

fn convert_value(text: &str, v: &toml_edit::Value, key_origin: Origin) -> Node {
    let origin = origin_of(text, v.span()).or(key_origin);
    let value = match v {
        toml_edit::Value::String(s) => Value::Str(s.value().clone()),
        toml_edit::Value::Integer(i) => Value::Int(*i.value()),
        toml_edit::Value::Float(f) => Value::Float(*f.value()),
        toml_edit::Value::Boolean(b) => Value::Bool(*b.value()),
        toml_edit::Value::Datetime(d) => Value::Str(d.value().to_string()),
        toml_edit::Value::Array(items) => {
            Value::List(items.iter().map(|i| convert_value(text, i, origin.clone())).collect())
        }
        toml_edit::Value::InlineTable(t) => Value::Table(convert_table(text, t)),
    };
    Node { value, origin }
}

impl Origin {
    fn or(self, other: Origin) -> Origin {
        if self == Origin::Default { other } else { self }
    }
}

/// Parses the value side of a `--set key=value`: TOML when it is valid TOML (numbers, booleans,
/// lists, quoted strings), else the text itself as a string ("3s", "4k", "randread").
pub fn parse_override_value(text: &str, origin: Origin) -> Node {
    match text.parse::<toml_edit::Value>() {
        Ok(v) => convert_value(text, &v, origin.clone()).with_origin(origin),
        Err(_) => Node { value: Value::Str(text.to_string()), origin },
    }
}

impl Node {
    fn with_origin(mut self, origin: Origin) -> Node {
        if let Value::List(items) = &mut self.value {
            for item in items.iter_mut() {
                item.origin = origin.clone();
            }
        }
        self.origin = origin;
        self
    }
}

/// Writes a tree back as TOML: top-level values first, then `[[section]]` tables.
pub fn to_toml(root: &Table) -> String {
    let is_table_list = |n: &Node| matches!(&n.value, Value::List(items) if !items.is_empty() && items.iter().all(|i| matches!(i.value, Value::Table(_))));
    let mut out = String::new();
    for (key, node) in root.entries.iter().filter(|(_, n)| !is_table_list(n)) {
        out.push_str(&format!("{} = {}\n", toml_key(key), inline(&node.value)));
    }
    for (key, node) in root.entries.iter().filter(|(_, n)| is_table_list(n)) {
        let Value::List(items) = &node.value else {
            continue;
        };
        for item in items {
            let Value::Table(t) = &item.value else {
                continue;
            };
            out.push_str(&format!("\n[[{}]]\n", toml_key(key)));
            for (k, n) in &t.entries {
                out.push_str(&format!("{} = {}\n", toml_key(k), inline(&n.value)));
            }
        }
    }
    out
}

fn toml_key(key: &str) -> String {
    if !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        key.to_string()
    } else {
        toml_edit::Value::from(key).to_string()
    }
}

fn inline(v: &Value) -> String {
    match v {
        Value::Str(s) => toml_edit::Value::from(s.as_str()).to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => toml_edit::Value::from(*f).to_string(),
        Value::Bool(b) => b.to_string(),
        Value::List(items) => format!("[{}]", items.iter().map(|n| inline(&n.value)).collect::<Vec<_>>().join(", ")),
        Value::Table(t) => format!(
            "{{ {} }}",
            t.entries
                .iter()
                .map(|(k, n)| format!("{} = {}", toml_key(k), inline(&n.value)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The most a whole number of a suite may be: no count, port or percentage is larger, and
/// beyond it a value is a typo (9223372036854775807 repetitions expanded the matrix for ever).
pub const MAX_WHOLE: u64 = u32::MAX as u64;

/// The largest size a suite may give: a petabyte.
pub const MAX_SIZE: u64 = 1 << 50;

/// The longest duration a suite may give: a week. A run is hours at most; far beyond, a time
/// added to a clock overflowed (an agent panicked on `time = 9223372036854775807`).
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);

/// Reads the keys of one table of a suite (one `[[env]]`, one `[[workload]]` …), converting and
/// checking each value, and at the end rejects every key that nobody asked for.
pub struct Fields<'a> {
    file: &'a str,
    what: String,
    table: &'a Table,
    origin: Origin,
    known: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    pub fn new(file: &'a str, what: impl Into<String>, table: &'a Table, origin: Origin) -> Self {
        Fields { file, what: what.into(), table, origin, known: Vec::new() }
    }

    pub fn file(&self) -> &'a str {
        self.file
    }

    /// An error about the table as a whole.
    pub fn error(&self, message: impl fmt::Display) -> SuiteError {
        SuiteError {
            file: self.file.to_string(),
            origin: self.origin.clone(),
            message: format!("{}: {message}", self.what),
        }
    }

    /// An error about one key.
    pub fn error_at(&self, key: &str, message: impl fmt::Display) -> SuiteError {
        let origin = self.table.get(key).map(|n| n.origin.clone()).unwrap_or(self.origin.clone());
        SuiteError { file: self.file.to_string(), origin, message: format!("{}: key \"{key}\": {message}", self.what) }
    }

    /// Marks `key` as known and returns its node.
    pub fn node(&mut self, key: &'static str) -> Option<&'a Node> {
        if !self.known.contains(&key) {
            self.known.push(key);
        }
        self.table.get(key)
    }

    /// A string with something in it: an empty one is a key written and left unfinished.
    pub fn str(&mut self, key: &'static str) -> Result<Option<String>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Str(s)) if s.trim().is_empty() => {
                Err(self.error_at(key, "is empty; give it a value, or leave the key out for its default"))
            }
            Some(Value::Str(s)) => Ok(Some(s.clone())),
            Some(other) => Err(self.error_at(key, format!("expected a string, found {}", other.type_name()))),
        }
    }

    pub fn required_str(&mut self, key: &'static str) -> Result<String, SuiteError> {
        self.str(key)?.ok_or_else(|| self.error(format!("the key \"{key}\" is required")))
    }

    /// A string that must be one of `choices`.
    pub fn choice(&mut self, key: &'static str, choices: &[&str]) -> Result<Option<String>, SuiteError> {
        let Some(value) = self.str(key)? else {
            return Ok(None);
        };
        if choices.contains(&value.as_str()) {
            Ok(Some(value))
        } else {
            Err(self.error_at(key, format!("\"{value}\" is not allowed; use one of: {}", choices.join(", "))))
        }
    }

    pub fn bool(&mut self, key: &'static str) -> Result<Option<bool>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(self.error_at(key, format!("expected true or false, found {}", other.type_name()))),
        }
    }

    /// A whole number from 0 to `MAX_WHOLE`: more is a typo for every key there is.
    pub fn uint(&mut self, key: &'static str) -> Result<Option<u64>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Int(i)) if *i < 0 => Err(self.error_at(key, format!("must not be negative, found {i}"))),
            Some(Value::Int(i)) if *i as u64 > MAX_WHOLE => {
                Err(self.error_at(key, format!("{i} is more than any key takes (at most {MAX_WHOLE})")))
            }
            Some(Value::Int(i)) => Ok(Some(*i as u64)),
            Some(other) => Err(self.error_at(key, format!("expected a whole number, found {}", other.type_name()))),
        }
    }

    /// A TCP port: 1 to 65535.
    pub fn port(&mut self, key: &'static str) -> Result<Option<u16>, SuiteError> {
        match self.uint(key)? {
            Some(p) if (1..=65535).contains(&p) => Ok(Some(p as u16)),
            Some(p) => Err(self.error_at(key, format!("{p} is not a TCP port (1-65535)"))),
            None => Ok(None),
        }
    }

    /// A whole number of at least 1.
    pub fn count(&mut self, key: &'static str) -> Result<Option<u64>, SuiteError> {
        match self.uint(key)? {
            Some(0) => Err(self.error_at(key, "must be at least 1")),
            other => Ok(other),
        }
    }

    pub fn float(&mut self, key: &'static str) -> Result<Option<f64>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i as f64)),
            Some(Value::Float(f)) if !f.is_finite() => {
                Err(self.error_at(key, format!("must be a finite number, found {f}")))
            }
            Some(Value::Float(f)) => Ok(Some(*f)),
            Some(other) => Err(self.error_at(key, format!("expected a number, found {}", other.type_name()))),
        }
    }

    /// A size such as "4k" or "2G", more than 0; a bare integer is a byte count.
    pub fn size(&mut self, key: &'static str) -> Result<Option<u64>, SuiteError> {
        match self.any_size(key)? {
            Some(bytes) if bytes > MAX_SIZE => Err(self.error_at(
                key,
                format!(
                    "{} is more than any key takes (at most {})",
                    units::human(bytes as f64, "B"),
                    units::human(MAX_SIZE as f64, "B")
                ),
            )),
            size => Ok(size),
        }
    }

    fn any_size(&mut self, key: &'static str) -> Result<Option<u64>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Int(i)) if *i > 0 => Ok(Some(*i as u64)),
            Some(Value::Int(i)) => Err(self.error_at(key, format!("must be more than 0 bytes, found {i}"))),
            Some(Value::Str(s)) => match units::parse_size(s) {
                Ok(0) => Err(self.error_at(key, format!("must be more than 0 bytes, found \"{s}\""))),
                parsed => parsed.map(Some).map_err(|e| self.error_at(key, e)),
            },
            Some(other) => {
                Err(self.error_at(key, format!("expected a size like \"4k\" or \"2G\", found {}", other.type_name())))
            }
        }
    }

    /// A duration such as "10s"; a bare integer is seconds.
    pub fn duration(&mut self, key: &'static str) -> Result<Option<Duration>, SuiteError> {
        match self.any_duration(key)? {
            Some(d) if d > MAX_DURATION => Err(self.error_at(
                key,
                format!(
                    "{} s is longer than any key takes (at most a week, {} s)",
                    d.as_secs(),
                    MAX_DURATION.as_secs()
                ),
            )),
            d => Ok(d),
        }
    }

    /// A time limit: a duration of more than zero (none could ever be met).
    pub fn timeout(&mut self, key: &'static str) -> Result<Option<Duration>, SuiteError> {
        match self.duration(key)? {
            Some(d) if d.is_zero() => Err(self.error_at(key, "is a time limit: it must be more than 0, e.g. \"60s\"")),
            d => Ok(d),
        }
    }

    fn any_duration(&mut self, key: &'static str) -> Result<Option<Duration>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Int(i)) if *i >= 0 => Ok(Some(Duration::from_secs(*i as u64))),
            Some(Value::Str(s)) => units::parse_duration(s).map(Some).map_err(|e| self.error_at(key, e)),
            Some(other) => Err(self
                .error_at(key, format!("expected a duration like \"10s\" or \"500ms\", found {}", other.type_name()))),
        }
    }

    pub fn percent(&mut self, key: &'static str) -> Result<Option<f64>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Str(s)) => units::parse_percent(s).map(Some).map_err(|e| self.error_at(key, e)),
            Some(other) => {
                Err(self.error_at(key, format!("expected a percentage like \"10%\", found {}", other.type_name())))
            }
        }
    }

    /// A set of this machine's CPUs: "1", "0,2-3" (the kernel's list syntax), or a bare CPU number.
    pub fn cpuset(&mut self, key: &'static str) -> Result<Option<crate::sys::CpuSet>, SuiteError> {
        use crate::sys::CpuSet;
        let set = match self.node(key).map(|n| &n.value) {
            None => return Ok(None),
            Some(Value::Str(s)) => CpuSet::parse(s).map_err(|e| self.error_at(key, e))?,
            Some(Value::Int(i)) if *i >= 0 => CpuSet::from_cpus([*i as usize]),
            Some(other) => {
                return Err(
                    self.error_at(key, format!("expected CPUs like \"1\" or \"0-1\", found {}", other.type_name()))
                );
            }
        };
        let machine = CpuSet::available();
        if !set.is_subset(&machine) {
            return Err(self.error_at(
                key,
                format!("\"{set}\" names CPUs this machine does not give isobench: it may use CPUs {machine}"),
            ));
        }
        Ok(Some(set))
    }

    pub fn str_list(&mut self, key: &'static str) -> Result<Option<Vec<String>>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::List(items)) => {
                items
                    .iter()
                    .map(|n| match &n.value {
                        Value::Str(s) => Ok(s.clone()),
                        other => Err(self
                            .error_at(key, format!("expected a list of strings, found {} in it", other.type_name()))),
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(Some)
            }
            Some(other) => Err(self.error_at(key, format!("expected a list of strings, found {}", other.type_name()))),
        }
    }

    /// A table of string values (e.g. environment variables); numbers are accepted as their text.
    pub fn str_map(&mut self, key: &'static str) -> Result<Option<Vec<(String, String)>>, SuiteError> {
        match self.node(key).map(|n| &n.value) {
            None => Ok(None),
            Some(Value::Table(t)) => t
                .entries
                .iter()
                .map(|(k, n)| match &n.value {
                    Value::Str(_) | Value::Int(_) | Value::Float(_) | Value::Bool(_) => {
                        Ok((k.clone(), n.value.label()))
                    }
                    other => Err(self.error_at(key, format!("\"{k}\" must be a string, found {}", other.type_name()))),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(self
                .error_at(key, format!("expected a table like {{ NAME = \"value\" }}, found {}", other.type_name()))),
        }
    }

    /// The keys of a table-valued key, read like this table's: `capacity = { latency = "10ms" }`.
    pub fn table(&mut self, key: &'static str) -> Result<Option<Fields<'a>>, SuiteError> {
        match self.node(key) {
            None => Ok(None),
            Some(Node { value: Value::Table(t), origin }) => {
                Ok(Some(Fields::new(self.file, format!("{} {key}", self.what), t, origin.clone())))
            }
            Some(other) => Err(self.error_at(key, format!("expected a table, found {}", other.value.type_name()))),
        }
    }

    /// Rejects keys that were never asked for, naming the allowed ones.
    pub fn finish(&self) -> Result<(), SuiteError> {
        for (key, _) in &self.table.entries {
            if !self.known.iter().any(|k| k == key) {
                let mut allowed = self.known.clone();
                allowed.sort_unstable();
                return Err(self.error_at(key, format!("unknown key; allowed keys are: {}", allowed.join(", "))));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_remember_their_lines() {
        let t = parse("s.toml", "name = \"x\"\n\n[[env]]\nname = \"host\"\nkind = \"host\"\n").unwrap();
        assert_eq!(t.get("name").unwrap().origin, Origin::Line(1));
        let Value::List(envs) = &t.get("env").unwrap().value else { panic!() };
        assert_eq!(envs[0].origin, Origin::Line(3));
        let Value::Table(env) = &envs[0].value else { panic!() };
        assert_eq!(env.get("kind").unwrap().origin, Origin::Line(5));
    }

    #[test]
    fn toml_round_trips() {
        let text = "name = \"q\"\nbaseline = { env = \"host\", volume = \"t\" }\n\n[[workload]]\nrw = [\"read\", \"write\"]\nenv = { \"A B\" = \"x\\\"y\" }\n";
        let t = parse("s.toml", text).unwrap();
        let again = parse("s.toml", &to_toml(&t)).unwrap();
        let strip = |t: &Table| serde_json::to_string(t).unwrap();
        assert_eq!(strip(&t), strip(&again));
    }

    #[test]
    fn override_values_are_toml_or_plain_text() {
        let o = Origin::Set("x".into());
        assert_eq!(parse_override_value("3s", o.clone()).value, Value::Str("3s".into()));
        assert_eq!(parse_override_value("8", o.clone()).value, Value::Int(8));
        assert!(matches!(parse_override_value("[1, 4]", o).value, Value::List(ref l) if l.len() == 2));
    }

    #[test]
    fn finish_names_the_unknown_key_and_the_allowed_ones() {
        let t = parse("s.toml", "bs = \"4k\"\niodeph = 8\n").unwrap();
        let mut f = Fields::new("s.toml", "workload \"fio\"", &t, Origin::Line(1));
        f.size("bs").unwrap();
        f.uint("iodepth").unwrap();
        let e = f.finish().unwrap_err().to_string();
        assert_eq!(e, "s.toml:2: workload \"fio\": key \"iodeph\": unknown key; allowed keys are: bs, iodepth");
    }
}
