//! The history in a team's PostgreSQL: several machines' runs in one series.

use anyhow::{Result, anyhow};
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls};

use super::db::{Db, Value};

pub struct Postgres {
    client: Client,
}

impl Postgres {
    /// `url` is `postgres://user:password@host:port/database`; the error never repeats it (it
    /// holds the password).
    pub fn connect(url: &str) -> Result<Postgres> {
        let client = Client::connect(url, NoTls).map_err(|e| {
            let reason = e.as_db_error().map(|d| d.message().to_string()).unwrap_or_else(|| e.to_string());
            anyhow!("connecting to PostgreSQL at {}: {}", super::Location::redact(url), crate::secrets::scrub(&reason))
        })?;
        Ok(Postgres { client })
    }
}

fn params(values: &[Value]) -> Vec<Box<dyn ToSql + Sync>> {
    values
        .iter()
        .map(|v| -> Box<dyn ToSql + Sync> {
            match v {
                Value::Text(t) => Box::new(t.clone()),
                Value::Int(i) => Box::new(*i),
                Value::Real(r) => Box::new(*r),
            }
        })
        .collect()
}

impl Db for Postgres {
    fn lock_schema(&mut self) -> Result<()> {
        // Any constant, the same in every isobench: released at the transaction's end.
        self.client.batch_execute("SELECT pg_advisory_xact_lock(7305566162823184)")?;
        Ok(())
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.client.batch_execute(sql)?)
    }

    fn execute(&mut self, sql: &str, values: &[Value]) -> Result<u64> {
        let owned = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
        Ok(self.client.execute(sql, &refs)?)
    }

    fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Vec<Value>>> {
        let owned = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
        let rows = self.client.query(sql, &refs)?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        let t = row.columns()[i].type_();
                        Ok(if *t == Type::INT8 {
                            Value::Int(row.try_get(i)?)
                        } else if *t == Type::INT4 {
                            Value::Int(row.try_get::<_, i32>(i)? as i64)
                        } else if *t == Type::FLOAT8 {
                            Value::Real(row.try_get(i)?)
                        } else {
                            Value::Text(row.try_get::<_, Option<String>>(i)?.unwrap_or_default())
                        })
                    })
                    .collect()
            })
            .collect()
    }
}
