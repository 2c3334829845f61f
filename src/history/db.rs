//! The seam between the history and the database that keeps it: SQLite on this machine, or a
//! team's PostgreSQL. The schema's SQL is written once, in the subset both speak (`$1`
//! parameters, `ON CONFLICT DO NOTHING`, TEXT / BIGINT / DOUBLE PRECISION).

use anyhow::Result;

/// A parameter or a column's value. A real may be absent (an overhead without a baseline); the
/// other columns never are, so each type stays one type on both databases.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Text(String),
    Int(i64),
    Real(Option<f64>),
}

impl Value {
    pub fn text(&self) -> &str {
        match self {
            Value::Text(t) => t,
            _ => "",
        }
    }

    pub fn int(&self) -> i64 {
        match self {
            Value::Int(i) => *i,
            _ => 0,
        }
    }

    pub fn real(&self) -> Option<f64> {
        match self {
            Value::Real(r) => *r,
            Value::Int(i) => Some(*i as f64),
            Value::Text(_) => None,
        }
    }
}

impl From<&str> for Value {
    fn from(t: &str) -> Value {
        Value::Text(t.to_string())
    }
}

impl From<String> for Value {
    fn from(t: String) -> Value {
        Value::Text(t)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Value {
        Value::Int(i)
    }
}

impl From<Option<f64>> for Value {
    fn from(r: Option<f64>) -> Value {
        Value::Real(r)
    }
}

impl From<f64> for Value {
    fn from(r: f64) -> Value {
        Value::Real(Some(r))
    }
}

pub trait Db {
    /// Statements without parameters, one after another (the schema, BEGIN, COMMIT).
    fn batch(&mut self, sql: &str) -> Result<()>;
    /// One statement; the rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64>;
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>>;
    /// The statement that opens a write transaction: SQLite takes its write lock at once, so two
    /// writers wait for each other rather than fail at their first write.
    fn begin_write(&self) -> &'static str {
        "BEGIN"
    }
    /// Inside a transaction: waits until no other writer changes the schema (two runs' first
    /// use of a new history at once).
    fn lock_schema(&mut self) -> Result<()> {
        Ok(())
    }
}

/// `work` inside one transaction: all of it lands, or (an error, a `kill -9`) none of it.
pub fn transaction<T>(db: &mut dyn Db, work: impl FnOnce(&mut dyn Db) -> Result<T>) -> Result<T> {
    let begin = db.begin_write();
    db.batch(begin)?;
    match work(db) {
        Ok(value) => {
            db.batch("COMMIT")?;
            Ok(value)
        }
        Err(e) => {
            let _ = db.batch("ROLLBACK");
            Err(e)
        }
    }
}
