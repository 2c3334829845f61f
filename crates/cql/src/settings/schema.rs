//! `-schema` (`SettingsSchema.java`).

use super::ArgError;
use super::tokens::Params;

#[derive(Clone, Debug)]
pub struct Schema {
    pub keyspace: String,
    pub replication_strategy: String,
    pub replication_options: Vec<(String, String)>,
    pub compaction_strategy: Option<String>,
    pub compaction_options: Vec<(String, String)>,
    pub compression: Option<String>,
}

pub(super) fn parse_schema(params: Option<Params>) -> Result<Schema, ArgError> {
    let mut schema = Schema {
        keyspace: "keyspace1".into(),
        replication_strategy: "org.apache.cassandra.locator.SimpleStrategy".into(),
        replication_options: Vec::new(),
        compaction_strategy: None,
        compaction_options: Vec::new(),
        compression: None,
    };
    let Some(mut p) = params else { return Ok(schema) };
    if let Some(k) = p.take("keyspace=") {
        schema.keyspace = k;
    }
    if let Some(replication) = p.map("replication")? {
        for (k, v) in replication {
            match k.as_str() {
                "strategy" => schema.replication_strategy = v,
                "factor" => schema.replication_options.push(("replication_factor".into(), v)),
                _ => schema.replication_options.push((k, v)),
            }
        }
    }
    if let Some(compaction) = p.map("compaction")? {
        for (k, v) in compaction {
            if k == "strategy" {
                schema.compaction_strategy = Some(v);
            } else {
                schema.compaction_options.push((k, v));
            }
        }
    }
    schema.compression = p.take("compression=");
    p.finish("keyspace=, replication(strategy=,factor=,…), compaction(strategy=,…), compression=")?;
    Ok(schema)
}
