//! The keyspace, tables and statements of cassandra-stress's predefined commands: `standard1`
//! (a blob key and blob columns) for write/read, `counter1` for the counter commands.

use super::settings::{Columns, Op, Schema};

/// A CQL identifier in double quotes, as cassandra-stress writes its names (case kept).
pub fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A CQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

pub fn table(op: Op) -> &'static str {
    match op {
        Op::Write | Op::Read => "standard1",
        Op::CounterWrite | Op::CounterRead => "counter1",
        Op::User(_) => unreachable!("a profile names its own table"),
    }
}

pub fn create_keyspace(schema: &Schema) -> String {
    let mut options = vec![format!("'class': {}", literal(&schema.replication_strategy))];
    if schema.replication_options.is_empty() {
        options.push("'replication_factor': '1'".into());
    }
    options.extend(schema.replication_options.iter().map(|(k, v)| format!("{}: {}", literal(k), literal(v))));
    format!(
        "CREATE KEYSPACE IF NOT EXISTS {} WITH replication = {{{}}} AND durable_writes = true",
        quote(&schema.keyspace),
        options.join(", ")
    )
}

/// `standard1` or, for counters, `counter1`, with the table options of `-schema`.
pub fn create_table(schema: &Schema, columns: &Columns, counter: bool) -> String {
    let (name, kind) = if counter { ("counter1", "counter") } else { ("standard1", "blob") };
    let mut cql = format!("CREATE TABLE IF NOT EXISTS {}.{name} (key blob PRIMARY KEY", quote(&schema.keyspace));
    for column in &columns.names {
        cql.push_str(&format!(", {} {kind}", quote(column)));
    }
    // Cassandra 4.0 dropped cassandra-stress's old 'sstable_compression' key; 'class' is current.
    cql.push_str(") WITH compression = {");
    if let Some(class) = &schema.compression {
        cql.push_str(&format!("'class': {}", literal(class)));
    }
    cql.push('}');
    if let Some(strategy) = &schema.compaction_strategy {
        let mut options = vec![format!("'class': {}", literal(strategy))];
        options.extend(schema.compaction_options.iter().map(|(k, v)| format!("{}: {}", literal(k), literal(v))));
        cql.push_str(&format!(" AND compaction = {{{}}}", options.join(", ")));
    }
    cql
}

/// The prepared statement of one operation. Writes bind the columns then the key; reads and
/// counter reads bind the key; counter writes bind one increment per column then the key.
pub fn statement(op: Op, keyspace: &str, columns: &Columns) -> String {
    let table = format!("{}.{}", quote(keyspace), quote(self::table(op)));
    let names: Vec<String> = columns.names.iter().map(|c| quote(c)).collect();
    match op {
        Op::Write => {
            let timestamp = columns.timestamp.map(|t| format!(" USING TIMESTAMP {t}")).unwrap_or_default();
            let sets: Vec<String> = names.iter().map(|c| format!("{c} = ?")).collect();
            format!("UPDATE {table}{timestamp} SET {} WHERE KEY=?", sets.join(","))
        }
        Op::CounterWrite => {
            let sets: Vec<String> = names.iter().map(|c| format!("{c}={c}+?")).collect();
            format!("UPDATE {table} SET {} WHERE KEY=?", sets.join(","))
        }
        Op::User(_) => unreachable!("a profile prepares its own statements"),
        Op::Read | Op::CounterRead => {
            let selected = if columns.slice { "*".to_string() } else { names.join(",") };
            format!("SELECT {selected} FROM {table} WHERE KEY=?")
        }
    }
}

pub fn truncate(keyspace: &str, table: &str) -> String {
    format!("TRUNCATE {}.{}", quote(keyspace), quote(table))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::parse;

    fn settings(text: &str) -> crate::settings::Settings {
        parse(&text.split(' ').map(str::to_string).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn the_default_schema_is_cassandra_stress_s() {
        let s = settings("write n=1");
        assert_eq!(
            create_keyspace(&s.schema),
            "CREATE KEYSPACE IF NOT EXISTS \"keyspace1\" WITH replication = {'class': 'org.apache.cassandra.locator.SimpleStrategy', 'replication_factor': '1'} AND durable_writes = true"
        );
        assert_eq!(
            create_table(&s.schema, &s.columns, false),
            "CREATE TABLE IF NOT EXISTS \"keyspace1\".standard1 (key blob PRIMARY KEY, \"C0\" blob, \"C1\" blob, \"C2\" blob, \"C3\" blob, \"C4\" blob) WITH compression = {}"
        );
        assert_eq!(
            statement(Op::Write, "keyspace1", &s.columns),
            "UPDATE \"keyspace1\".\"standard1\" SET \"C0\" = ?,\"C1\" = ?,\"C2\" = ?,\"C3\" = ?,\"C4\" = ? WHERE KEY=?"
        );
        assert_eq!(
            statement(Op::Read, "keyspace1", &s.columns),
            "SELECT \"C0\",\"C1\",\"C2\",\"C3\",\"C4\" FROM \"keyspace1\".\"standard1\" WHERE KEY=?"
        );
    }

    #[test]
    fn schema_options_reach_the_statements() {
        let s = settings(
            "counter_write n=1 -schema keyspace=ks replication(strategy=NetworkTopologyStrategy,dc1=3) compaction(strategy=LeveledCompactionStrategy,sstable_size_in_mb=160) compression=LZ4Compressor -col n=FIXED(2)",
        );
        assert_eq!(
            create_keyspace(&s.schema),
            "CREATE KEYSPACE IF NOT EXISTS \"ks\" WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': '3'} AND durable_writes = true"
        );
        assert_eq!(
            create_table(&s.schema, &s.columns, true),
            "CREATE TABLE IF NOT EXISTS \"ks\".counter1 (key blob PRIMARY KEY, \"C0\" counter, \"C1\" counter) WITH compression = {'class': 'LZ4Compressor'} AND compaction = {'class': 'LeveledCompactionStrategy', 'sstable_size_in_mb': '160'}"
        );
        assert_eq!(
            statement(Op::CounterWrite, "ks", &s.columns),
            "UPDATE \"ks\".\"counter1\" SET \"C0\"=\"C0\"+?,\"C1\"=\"C1\"+? WHERE KEY=?"
        );
    }
}
