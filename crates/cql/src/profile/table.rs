//! The table a profile writes, as the cluster describes it once the schema exists: columns in
//! primary-key order with their types, each with the distributions its values come from.

use scylla::client::session::Session;
use scylla::cluster::metadata::ColumnKind;
use scylla::frame::response::result::ColumnType;

use super::{Profile, stored_name, values};
use crate::dist::DistSpec;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Partition,
    Clustering,
    Static,
    Regular,
}

#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub typ: ColumnType<'static>,
    pub kind: Kind,
    pub size: DistSpec,
    pub population: DistSpec,
    pub cluster: DistSpec,
    /// Seeds this column's draws apart from every other column's.
    pub salt: i64,
}

impl Column {
    pub fn is_counter(&self) -> bool {
        matches!(self.typ, ColumnType::Native(scylla::frame::response::result::NativeType::Counter))
    }
}

#[derive(Clone, Debug)]
pub struct Table {
    pub keyspace: String,
    pub name: String,
    /// Partition key, clustering columns (in key order), then static and regular columns by name.
    pub columns: Vec<Column>,
}

/// cassandra-stress's defaults: 4 to 8 characters (or elements), values from 1 to 100 billion,
/// one row per clustering value.
fn defaults(typ: &ColumnType) -> DistSpec {
    match typ {
        ColumnType::Collection { .. } => DistSpec::Uniform { min: 1, max: 4 },
        _ => DistSpec::Uniform { min: 4, max: 8 },
    }
}

impl Table {
    /// Reads the table from the session's schema metadata (refreshed first).
    pub async fn describe(session: &Session, profile: &Profile) -> Result<Table, String> {
        session.refresh_metadata().await.map_err(|e| {
            let text = e.to_string();
            unreadable_type(profile, &text).unwrap_or_else(|| format!("cannot read the cluster's schema: {text}"))
        })?;
        let state = session.get_cluster_state();
        let (keyspace, name) = (stored_name(&profile.keyspace), stored_name(&profile.table));
        let table = state
            .get_keyspace(&keyspace)
            .and_then(|k| k.tables.get(&name))
            .ok_or_else(|| profile.error(1, &format!("table {keyspace}.{name} does not exist; give table_definition: its CREATE TABLE, or create it first")))?;
        let mut names: Vec<&String> = table.partition_key.iter().chain(&table.clustering_key).collect();
        let mut rest: Vec<&String> = table.columns.keys().filter(|c| !names.contains(c)).collect();
        rest.sort();
        names.extend(rest);
        let mut columns = Vec::new();
        for name in names {
            let meta = &table.columns[name];
            if let Some(why) = values::unsupported(&meta.typ) {
                return Err(profile.error(
                    profile.column_line(name),
                    &format!("column {name}: the load generator cannot generate values of type {why}; change the column's type or leave it out of the table"),
                ));
            }
            let spec = profile.column(name);
            columns.push(Column {
                name: name.clone(),
                kind: match meta.kind {
                    ColumnKind::PartitionKey => Kind::Partition,
                    ColumnKind::Clustering => Kind::Clustering,
                    ColumnKind::Static => Kind::Static,
                    _ => Kind::Regular,
                },
                size: spec.and_then(|s| s.size.clone()).unwrap_or_else(|| defaults(&meta.typ)),
                population: spec
                    .and_then(|s| s.population.clone())
                    .unwrap_or(DistSpec::Uniform { min: 1, max: 100_000_000_000 }),
                cluster: spec.and_then(|s| s.cluster.clone()).unwrap_or(DistSpec::Fixed(1)),
                salt: crate::random::murmur3_x64_128_first(format!("seed for stress{name}").as_bytes()),
                typ: meta.typ.clone(),
            });
        }
        for spec in &profile.columns {
            if !columns.iter().any(|c| c.name == spec.name) {
                let known: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
                return Err(profile.error(
                    spec.line,
                    &format!(
                        "columnspec: {keyspace}.{name} has no column {}; its columns are {}",
                        spec.name,
                        known.join(", ")
                    ),
                ));
            }
        }
        Ok(Table { keyspace, name, columns })
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c.name == name)
    }

    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = usize> + '_ {
        self.columns.iter().enumerate().filter(move |(_, c)| c.kind == kind).map(|(i, _)| i)
    }

    pub fn is_counter_table(&self) -> bool {
        self.columns.iter().any(Column::is_counter)
    }
}

/// A column type the driver cannot read (a custom type, named by its Java class): the error
/// at the line of the table definition that names it.
pub fn unreadable_type(profile: &Profile, error: &str) -> Option<String> {
    let start = error.find("Failed to parse a CQL type")?;
    let typ = error[start..].split("Type '").nth(1)?.split("', at position").next()?.trim_matches('\'');
    let def = profile.table_definition.as_ref();
    let line = def.and_then(|d| d.text.lines().position(|l| l.contains(typ)).map(|i| d.line + i as u64)).unwrap_or(1);
    Some(profile.error(
        line,
        &format!("the load generator cannot generate values of type '{typ}' (its CQL driver cannot read custom types); give the column a CQL type, e.g. blob, and drop the table made with this one"),
    ))
}
