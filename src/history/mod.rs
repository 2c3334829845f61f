//! The history: every result set's figures kept in one database, so that a series (one suite,
//! one cell, one metric) can be followed across runs, its change points found and blamed on the
//! component that changed, and the newest run gated against the last accepted level.
//!
//! `db.rs` is the seam (SQLite here, PostgreSQL for a team); `entry.rs` a result set as rows;
//! `detect.rs` the change-point statistics; `series.rs` the series, their change points and what
//! changed at them; `gate.rs` the CI gate; `trend.rs` the charts; `command.rs` `isobench history`.

pub mod command;
pub mod db;
pub mod detect;
pub mod entry;
pub mod gate;
mod postgres;
pub mod series;
mod sqlite;
pub mod trend;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use db::{Db, Value};
use entry::{Entry, Point};

/// The schema this isobench writes. A migration per version after the first lives in
/// `MIGRATIONS`, run in order inside one transaction.
pub const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS result_sets (
    id TEXT PRIMARY KEY, suite TEXT NOT NULL, path TEXT NOT NULL, time TEXT NOT NULL,
    facts TEXT NOT NULL, recorded TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, result_set TEXT NOT NULL, cell TEXT NOT NULL, rep BIGINT NOT NULL,
    started TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    result_set TEXT NOT NULL, cell TEXT NOT NULL, metric TEXT NOT NULL, unit TEXT NOT NULL,
    labels TEXT NOT NULL, headline BIGINT NOT NULL, vals TEXT NOT NULL,
    median DOUBLE PRECISION, lo DOUBLE PRECISION, hi DOUBLE PRECISION,
    overhead DOUBLE PRECISION, overhead_lo DOUBLE PRECISION, overhead_hi DOUBLE PRECISION,
    baseline TEXT NOT NULL, facts TEXT NOT NULL,
    PRIMARY KEY (result_set, cell, metric));
CREATE TABLE IF NOT EXISTS acks (id TEXT PRIMARY KEY, why TEXT NOT NULL, time TEXT NOT NULL);
";

/// (version it brings the schema to, its SQL). Empty until the schema first changes.
const MIGRATIONS: &[(i64, &str)] = &[];

/// The variable that says where the history is: a path, or `postgres://…`.
pub const HISTORY_VAR: &str = "ISOBENCH_HISTORY";

/// Where the history is kept.
#[derive(Clone, Debug)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Location {
    /// `$ISOBENCH_HISTORY`, else `$XDG_DATA_HOME/isobench/history.sqlite`, else
    /// `~/.local/share/isobench/history.sqlite`.
    pub fn from_env() -> Result<Location> {
        if let Some(given) = std::env::var_os(HISTORY_VAR).filter(|v| !v.is_empty()) {
            return Location::parse(&given.to_string_lossy()).context(HISTORY_VAR);
        }
        let data = match std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(home) => PathBuf::from(home).join(".local/share"),
                None => bail!("neither {HISTORY_VAR}, XDG_DATA_HOME nor HOME is set: set {HISTORY_VAR} to a file"),
            },
        };
        Ok(Location::Sqlite(data.join("isobench/history.sqlite")))
    }

    pub fn parse(text: &str) -> Result<Location> {
        match text.split_once("://") {
            Some(("postgres" | "postgresql", _)) => Ok(Location::Postgres(text.to_string())),
            Some((scheme, _)) => bail!(
                "{}: isobench keeps its history in SQLite (a file path) or PostgreSQL (postgres://user:password@host/database), not \"{scheme}\"",
                Location::redact(text)
            ),
            None => Ok(Location::Sqlite(PathBuf::from(text))),
        }
    }

    /// A URL with its password replaced, for messages.
    pub fn redact(url: &str) -> String {
        let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
        let (authority, tail) = rest.split_once('/').map_or((rest, None), |(a, t)| (a, Some(t)));
        let authority = match authority.rsplit_once('@') {
            Some((user, host)) => match user.split_once(':') {
                Some((name, _)) => format!("{name}:***@{host}"),
                None => format!("{user}@{host}"),
            },
            None => authority.to_string(),
        };
        // A password may also ride in the query string (`?password=…`).
        let tail = tail.map(|t| match t.split_once('?') {
            Some((db, _)) => format!("{db}?…"),
            None => t.to_string(),
        });
        match tail {
            Some(t) => format!("{scheme}://{authority}/{t}"),
            None => format!("{scheme}://{authority}"),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Postgres(url) => Location::redact(url),
        }
    }
}

pub struct History {
    db: Box<dyn Db>,
    pub location: Location,
}

/// What recording a result set did.
#[derive(Debug, PartialEq)]
pub enum Recorded {
    Added {
        points: usize,
    },
    /// Every run of it is in the history already (imported before, or a merge of sets that are).
    AlreadyThere,
}

impl History {
    pub fn open(location: &Location) -> Result<History> {
        let mut db: Box<dyn Db> = match location {
            Location::Sqlite(path) => Box::new(sqlite::Sqlite::open(path).with_context(|| {
                format!("the history {} cannot be opened; set {HISTORY_VAR} to a file you can write", path.display())
            })?),
            Location::Postgres(url) => Box::new(postgres::Postgres::connect(url)?),
        };
        migrate(db.as_mut()).with_context(|| format!("the history at {}", location.describe()))?;
        Ok(History { db, location: location.clone() })
    }

    /// The history `$ISOBENCH_HISTORY` (or the default file) names.
    pub fn open_default() -> Result<History> {
        History::open(&Location::from_env()?)
    }

    /// Keeps a result set's figures (its cells' metrics, their overheads, its facts).
    pub fn record(&mut self, dir: &Path) -> Result<Recorded> {
        let entry = Entry::read(dir)?;
        self.add(&entry)
    }

    /// One result set's rows in one transaction: a killed writer leaves all of it or none.
    pub fn add(&mut self, entry: &Entry) -> Result<Recorded> {
        db::transaction(self.db.as_mut(), |db| entry.insert(db))
    }

    /// Every point, each with its result set's path and time, oldest first.
    pub fn points(&mut self) -> Result<Vec<Point>> {
        entry::select_points(self.db.as_mut())
    }

    /// The acknowledged change points: id → (why, when).
    pub fn acks(&mut self) -> Result<BTreeMap<String, (String, String)>> {
        let rows = self.db.query("SELECT id, why, time FROM acks", &[])?;
        Ok(rows
            .into_iter()
            .map(|r| (r[0].text().to_string(), (r[1].text().to_string(), r[2].text().to_string())))
            .collect())
    }

    pub fn ack(&mut self, id: &str, why: &str) -> Result<()> {
        self.db.execute(
            "INSERT INTO acks (id, why, time) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET why = excluded.why, time = excluded.time",
            &[id.into(), why.into(), crate::store::utc_now().into()],
        )?;
        Ok(())
    }

    /// The whole history as JSON lines: a result set (its runs and points) a line, then the
    /// acknowledgements; `import` of the file rebuilds it in another store.
    pub fn export(&mut self) -> Result<String> {
        let mut out = String::new();
        for entry in entry::select_entries(self.db.as_mut())? {
            out.push_str(&serde_json::to_string(&serde_json::json!({ "result_set": entry }))?);
            out.push('\n');
        }
        for (id, (why, time)) in self.acks()? {
            out.push_str(&serde_json::to_string(
                &serde_json::json!({ "ack": { "id": id, "why": why, "time": time } }),
            )?);
            out.push('\n');
        }
        Ok(out)
    }

    /// An export's lines into this history; what is there already is left as it is.
    pub fn import_lines(&mut self, text: &str, source: &str) -> Result<(usize, usize)> {
        let (mut added, mut there) = (0, 0);
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let value: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{source} line {}: not an isobench history export (JSON lines)", n + 1))?;
            if let Some(entry) = value.get("result_set") {
                let entry: Entry = serde_json::from_value(entry.clone())
                    .with_context(|| format!("{source} line {}: not a result set of a history export", n + 1))?;
                match self.add(&entry)? {
                    Recorded::Added { .. } => added += 1,
                    Recorded::AlreadyThere => there += 1,
                }
            } else if let Some(ack) = value.get("ack") {
                let field = |k: &str| ack.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                self.db.execute(
                    "INSERT INTO acks (id, why, time) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                    &[field("id").into(), field("why").into(), field("time").into()],
                )?;
            } else {
                bail!("{source} line {}: neither a result set nor an acknowledgement", n + 1);
            }
        }
        Ok((added, there))
    }
}

fn migrate(db: &mut dyn Db) -> Result<()> {
    db::transaction(db, |db| {
        db.lock_schema()?;
        db.batch(SCHEMA)?;
        let stored = db.query("SELECT value FROM meta WHERE key = 'schema'", &[])?;
        let mut version = match stored.first() {
            Some(row) => row[0].text().parse::<i64>().context("its schema version is not a number")?,
            None => {
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema', $1)",
                    &[Value::from(SCHEMA_VERSION.to_string())],
                )?;
                SCHEMA_VERSION
            }
        };
        if version > SCHEMA_VERSION {
            bail!(
                "its schema is version {version}, newer than this isobench's {SCHEMA_VERSION}: use the isobench that wrote it (or a newer one), or point {HISTORY_VAR} elsewhere"
            );
        }
        let stored_version = version;
        for (to, sql) in MIGRATIONS.iter().filter(|(to, _)| *to > stored_version) {
            db.batch(sql)?;
            version = *to;
        }
        db.execute("UPDATE meta SET value = $1 WHERE key = 'schema'", &[Value::from(version.to_string())])?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        assert_eq!(Location::redact("postgres://bench:s3cret@db:5432/hist"), "postgres://bench:***@db:5432/hist");
        assert_eq!(Location::redact("postgres://db/hist?password=s3cret"), "postgres://db/hist?…");
        assert_eq!(Location::redact("postgres://bench@db"), "postgres://bench@db");
    }

    #[test]
    fn only_sqlite_paths_and_postgres_urls_are_histories() {
        assert!(matches!(Location::parse("/tmp/h.sqlite").unwrap(), Location::Sqlite(_)));
        assert!(matches!(Location::parse("postgresql://u@h/d").unwrap(), Location::Postgres(_)));
        let e = Location::parse("mysql://u:pw@h/d").unwrap_err().to_string();
        assert!(e.contains("not \"mysql\"") && !e.contains("pw"), "{e}");
    }
}
