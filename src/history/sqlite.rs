//! The history in an SQLite file: the default, nothing to run beside isobench.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ToSql, params_from_iter};

use super::db::{Db, Value};

pub struct Sqlite {
    conn: Connection,
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        // Another run appending waits for the lock rather than failing; the write-ahead log
        // lets readers go on meanwhile, and a killed writer leaves the last commit whole.
        conn.busy_timeout(Duration::from_secs(60))?;
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .with_context(|| format!("{} is not an SQLite database that isobench can write", path.display()))?;
        Ok(Sqlite { conn })
    }
}

impl ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Text(t) => ToSqlOutput::from(t.as_str()),
            Value::Int(i) => ToSqlOutput::from(*i),
            Value::Real(r) => match r {
                Some(r) => ToSqlOutput::from(*r),
                None => ToSqlOutput::from(rusqlite::types::Null),
            },
        })
    }
}

impl Db for Sqlite {
    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.conn.execute_batch(sql)?)
    }

    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        Ok(self.conn.execute(sql, params_from_iter(params))? as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let mut statement = self.conn.prepare_cached(sql)?;
        let columns = statement.column_count();
        let rows = statement.query_map(params_from_iter(params), |row| {
            (0..columns)
                .map(|i| {
                    Ok(match row.get_ref(i)? {
                        ValueRef::Null => Value::Real(None),
                        ValueRef::Integer(i) => Value::Int(i),
                        ValueRef::Real(r) => Value::Real(Some(r)),
                        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                    })
                })
                .collect::<rusqlite::Result<Vec<Value>>>()
        })?;
        Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
    }

    /// SQLite takes its write lock at once (a second writer waits at its BEGIN): that also
    /// serialises schema changes.
    fn begin_write(&self) -> &'static str {
        "BEGIN IMMEDIATE"
    }
}
