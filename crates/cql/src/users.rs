//! The operations of a profile against the cluster: its schema made, the built-in `insert`
//! (one UPDATE per row, several rows in one batch of the profile's `batchtype`) and its named
//! queries (bound from one row or several rows of a partition), and the validation of what a
//! query returns against the rows regenerated from their seeds.

use std::sync::Arc;

use scylla::client::execution_profile::ExecutionProfileHandle;
use scylla::client::session::Session;
use scylla::errors::{DbError, ExecutionError, PrepareError, RequestAttemptError};
use scylla::statement::batch::{Batch, BatchType};
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlValue, Row};

use crate::dist::Dist;
use crate::failover::ClientEvents;
use crate::profile::UserOp;
use crate::profile::rows::{Partition, Rows};
use crate::profile::table::{Kind, Table, unreadable_type};
use crate::profile::values::{normalized, shown};
use crate::profile::{BatchKind, Fields, Profile, Query};
use crate::random::JavaRandom;
use crate::schema::quote;

/// A statement the server refused because what it creates is there already.
fn already_exists(e: &ExecutionError) -> bool {
    matches!(e, ExecutionError::LastAttemptError(RequestAttemptError::DbError(DbError::AlreadyExists { .. }, _)))
}

/// Makes the profile's keyspace, types, table and extra definitions (each unless it exists),
/// and makes the keyspace the session's, so that the profile's CQL may leave it out.
async fn define(session: &Session, profile: &Profile, what: &str, def: &crate::profile::Located) -> Result<(), String> {
    match session.query_unpaged(def.text.as_str(), ()).await {
        Ok(_) => {}
        Err(e) if already_exists(&e) => {}
        Err(e) => {
            let text = e.to_string();
            return Err(unreadable_type(profile, &text).unwrap_or_else(|| {
                profile.error(def.line, &format!("{what}: the server refused it: {text}; correct the CQL"))
            }));
        }
    }
    session
        .await_schema_agreement()
        .await
        .map_err(|e| profile.error(def.line, &format!("{what}: the nodes did not agree on the schema: {e}")))?;
    Ok(())
}

pub async fn create_schema(session: &Session, profile: &Profile) -> Result<(), String> {
    let run = |what: &'static str, def| define(session, profile, what, def);
    if let Some(def) = &profile.keyspace_definition {
        run("keyspace_definition", def).await?;
    }
    use_keyspace(session, profile).await?;
    // Types first: the table may use them, and cassandra-stress users list them in extra_definitions.
    let is_type = |d: &&crate::profile::Located| {
        d.text.to_ascii_uppercase().split_whitespace().take(2).collect::<Vec<_>>() == ["CREATE", "TYPE"]
    };
    for def in profile.extra_definitions.iter().filter(is_type) {
        run("extra_definitions", def).await?;
    }
    if let Some(def) = &profile.table_definition {
        run("table_definition", def).await?;
    }
    for def in profile.extra_definitions.iter().filter(|d| !is_type(d)) {
        run("extra_definitions", def).await?;
    }
    Ok(())
}

/// Makes the profile's keyspace the session's.
pub async fn use_keyspace(session: &Session, profile: &Profile) -> Result<(), String> {
    let keyspace = &profile.keyspace;
    session.use_keyspace(keyspace.as_str(), keyspace.starts_with('"')).await.map_err(|e| {
        profile.error(
            1,
            &format!("keyspace {keyspace}: {e}; give keyspace_definition: its CREATE KEYSPACE, or create it first"),
        )
    })
}

/// One operation of `ops(…)`, prepared.
pub struct Operation {
    pub name: &'static str,
    pub statement: PreparedStatement,
    /// The table column each bind marker stands for.
    binds: Vec<usize>,
    kind: OpKind,
}

enum OpKind {
    Insert { batch: Option<BatchType> },
    Query { fields: Fields, validate: Option<Validation> },
}

/// How a query's rows are checked: the table column of each selected column (None for an
/// expression), and which of them can be checked.
struct Validation {
    selected: Vec<Option<usize>>,
    /// With every clustering column selected, rows are found and all columns checked;
    /// otherwise only the partition's own (key and static) columns are.
    identifies_rows: bool,
}

/// A profile's operations, ready to run.
pub struct User {
    pub table: Arc<Table>,
    pub ops: Vec<Operation>,
    profile: Arc<Profile>,
    events: Arc<ClientEvents>,
}

/// How one operation ended (as the engine counts it).
pub struct Done {
    pub partitions: u64,
    pub rows: u64,
    pub error: Option<String>,
    /// The partition key, for messages.
    pub key: String,
}

/// What the worker keeps between operations.
pub struct UserWorker {
    rows: Rows,
    rng: JavaRandom,
    partitions: Dist,
    select: Dist,
    values: Vec<Option<CqlValue>>,
    expected: Vec<Option<CqlValue>>,
}

fn batch_type(kind: BatchKind) -> BatchType {
    match kind {
        BatchKind::Logged => BatchType::Logged,
        BatchKind::Unlogged => BatchType::Unlogged,
        BatchKind::Counter => BatchType::Counter,
    }
}

/// Statement options as for the predefined commands.
pub struct Options {
    pub consistency: Consistency,
    pub serial_consistency: SerialConsistency,
    /// The request timeout, failover and speculation of `-mode` (`failover::execution_profile`).
    pub profile: ExecutionProfileHandle,
    pub events: Arc<ClientEvents>,
}

fn refused(profile: &Profile, query: &Query, table: &Table, e: &PrepareError) -> String {
    let text = e.to_string();
    let columns: Vec<&str> = table.columns.iter().map(|c| c.name.as_str()).collect();
    let fix = if text.contains("Undefined column") || text.contains("undefined column") {
        format!("name only columns of {}: {}", table.name, columns.join(", "))
    } else {
        "correct the CQL".to_string()
    };
    profile.error(query.line, &format!("query {}: the server refused it: {text}; {fix}", query.name))
}

impl User {
    /// Prepares the operations `names` (in `ops(…)` order) on the table the cluster now holds.
    pub async fn prepare(
        session: &Session,
        profile: Arc<Profile>,
        names: &[&'static str],
        validate_all: bool,
        options: &Options,
    ) -> Result<User, String> {
        let table = Arc::new(Table::describe(session, &profile).await?);
        let set = |p: &mut PreparedStatement, consistency: Consistency, serial: SerialConsistency, idempotent: bool| {
            p.set_consistency(consistency);
            p.set_serial_consistency(Some(serial));
            p.set_execution_profile_handle(Some(options.profile.clone()));
            p.set_history_listener(options.events.clone());
            p.set_is_idempotent(idempotent);
        };
        let mut ops = Vec::new();
        for &name in names {
            let (cql, line, kind) = if name == "insert" {
                (insert_statement(&table), 1, None)
            } else {
                let q = profile.query(name).expect("ops(…) names only queries of the profile");
                (q.cql.clone(), q.line, Some(q))
            };
            let mut statement = crate::failover::prepare(session, &cql).await.map_err(|e| match kind {
                Some(q) => refused(&profile, q, &table, &e),
                None => profile.error(line, &format!("the insert statement {cql} was refused: {e}")),
            })?;
            let mut binds = Vec::new();
            for spec in statement.get_variable_col_specs().iter() {
                match table.index(spec.name()) {
                    Some(i) => binds.push(i),
                    None => {
                        return Err(profile.error(
                            line,
                            &format!("query {name}: the bind marker for {} is not a column of {}; bind only columns (write LIMIT 10, not LIMIT ?)", spec.name(), table.name),
                        ));
                    }
                }
            }
            let kind = match kind {
                None => {
                    set(&mut statement, options.consistency, options.serial_consistency, !table.is_counter_table());
                    OpKind::Insert { batch: None }
                }
                Some(q) => {
                    let consistency =
                        q.consistency.as_deref().map_or(options.consistency, crate::consistency::consistency);
                    let serial = q
                        .serial_consistency
                        .as_deref()
                        .map_or(options.serial_consistency, crate::consistency::serial_consistency);
                    set(&mut statement, consistency, serial, q.idempotent);
                    let validate = (validate_all || q.validate).then(|| {
                        let selected: Vec<Option<usize>> = statement
                            .get_current_result_set_col_specs()
                            .get()
                            .iter()
                            .map(|s| table.index(s.name()))
                            .collect();
                        let identifies_rows = table.of_kind(Kind::Clustering).all(|c| selected.contains(&Some(c)));
                        Validation { selected, identifies_rows }
                    });
                    OpKind::Query { fields: q.fields, validate }
                }
            };
            ops.push(Operation { name, statement, binds, kind });
        }
        for op in &mut ops {
            if let OpKind::Insert { batch } = &mut op.kind {
                *batch =
                    Some(batch_type(if table.is_counter_table() { BatchKind::Counter } else { profile.insert.batch }));
            }
        }
        Ok(User { table, ops, profile, events: options.events.clone() })
    }

    /// What `-validate` will and will not check, said once before the run.
    pub fn validation_notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        for op in &self.ops {
            if let OpKind::Query { validate: Some(v), .. } = &op.kind
                && !v.identifies_rows
            {
                notes.push(format!(
                    "query {}: validating its key and static columns only: select every clustering column for its rows to be checked",
                    op.name
                ));
            }
        }
        notes
    }

    pub fn worker(&self, seed: i64) -> UserWorker {
        UserWorker {
            rows: Rows::new(self.table.clone()),
            rng: JavaRandom::new(seed),
            partitions: self.profile.insert.partitions.sampler(seed ^ 0x5041_5254),
            select: self.profile.insert.select.numerator.sampler(seed ^ 0x5345_4c45),
            values: Vec::new(),
            expected: Vec::new(),
        }
    }

    /// How many partitions operation `op` takes from the population.
    pub fn partitions(&self, op: usize, w: &mut UserWorker) -> usize {
        match self.ops[op].kind {
            OpKind::Insert { .. } => w.partitions.sample().max(1) as usize,
            OpKind::Query { .. } => 1,
        }
    }

    fn key_text(&self, w: &mut UserWorker, partition: &Partition) -> String {
        w.rows.row(partition, 0, &mut w.values);
        let key: Vec<String> = self
            .table
            .of_kind(Kind::Partition)
            .map(|c| format!("{}={}", self.table.columns[c].name, shown(&w.values[c])))
            .collect();
        key.join(", ")
    }

    /// Runs operation `op` on the partitions seeded `seeds`, with up to `tries` attempts.
    pub async fn run(
        &self,
        session: &Session,
        op: usize,
        w: &mut UserWorker,
        seeds: &[i64],
        tries: u32,
    ) -> (Done, u32) {
        let partitions: Vec<Partition> = seeds.iter().map(|s| w.rows.partition(*s)).collect();
        let (mut done, attempts) = self.attempt(session, op, w, &partitions, tries).await;
        // Only a message shows the key: it is spelled out for a failed operation alone.
        if done.error.is_some() {
            done.key = self.key_text(w, &partitions[0]);
        }
        (done, attempts)
    }

    async fn attempt(
        &self,
        session: &Session,
        op: usize,
        w: &mut UserWorker,
        partitions: &[Partition],
        tries: u32,
    ) -> (Done, u32) {
        let operation = &self.ops[op];
        let key = String::new();
        let mut last_error = String::new();
        match &operation.kind {
            OpKind::Insert { batch } => {
                let mut rows: Vec<Vec<Option<CqlValue>>> = Vec::new();
                for p in partitions {
                    for r in self.selected_rows(w, p) {
                        w.rows.row(p, r, &mut w.values);
                        rows.push(operation.binds.iter().map(|&c| w.values[c].clone()).collect());
                    }
                }
                let count = rows.len() as u64;
                // A single row is sent alone; several go in one batch.
                let statement = (rows.len() > 1).then(|| {
                    let mut b = Batch::new(batch.expect("set at prepare"));
                    for _ in 0..rows.len() {
                        b.append_statement(operation.statement.clone());
                    }
                    b.set_consistency(operation.statement.get_consistency().unwrap_or(Consistency::LocalOne));
                    b.set_execution_profile_handle(operation.statement.get_execution_profile_handle().cloned());
                    b.set_is_idempotent(operation.statement.get_is_idempotent());
                    b.set_history_listener(self.events.clone());
                    b
                });
                for attempt in 1..=tries {
                    crate::failover::before_attempt(&self.events, attempt).await;
                    let result = match &statement {
                        None => session.execute_unpaged(&operation.statement, &rows[0]).await.map(|_| ()),
                        Some(b) => session.batch(b, &rows).await.map(|_| ()),
                    };
                    match result {
                        Ok(()) => {
                            return (
                                Done { partitions: partitions.len() as u64, rows: count, error: None, key },
                                attempt,
                            );
                        }
                        Err(e) if self.again(&operation.statement, &e, &mut last_error) => {}
                        Err(_) => return (Done { partitions: 0, rows: 0, error: Some(last_error), key }, attempt),
                    }
                }
            }
            OpKind::Query { fields, validate } => {
                let p = &partitions[0];
                let bound = self.bound_values(w, p, &operation.binds, *fields);
                for attempt in 1..=tries {
                    crate::failover::before_attempt(&self.events, attempt).await;
                    let result = match session.execute_unpaged(&operation.statement, &bound).await {
                        Ok(r) => r,
                        Err(e) if self.again(&operation.statement, &e, &mut last_error) => continue,
                        Err(_) => return (Done { partitions: 0, rows: 0, error: Some(last_error), key }, attempt),
                    };
                    let rows = match result.into_rows_result() {
                        Ok(r) => r,
                        Err(e) => {
                            return (
                                Done {
                                    partitions: 0,
                                    rows: 0,
                                    error: Some(format!("Data returned was not validated: {e}")),
                                    key,
                                },
                                attempt,
                            );
                        }
                    };
                    let n = rows.rows_num() as u64;
                    let error = match validate {
                        None => None,
                        Some(v) => match rows.rows::<Row>() {
                            Err(e) => Some(format!("Data returned was not validated: {e}")),
                            Ok(it) => self.check(w, p, v, it.map(|r| r.map(|r| r.columns))),
                        },
                    };
                    return (Done { partitions: 1, rows: n, error, key }, attempt);
                }
            }
        }
        (Done { partitions: 0, rows: 0, error: Some(last_error), key }, tries)
    }

    /// Notes a failed attempt (`failover::after_failure`); whether another may follow.
    fn again(&self, statement: &PreparedStatement, e: &ExecutionError, last_error: &mut String) -> bool {
        let timed_out = matches!(e, ExecutionError::RequestTimeout(_));
        let again;
        (*last_error, again) =
            crate::failover::after_failure(&self.events, &e.to_string(), timed_out, statement.get_is_idempotent());
        again
    }

    /// The rows of a partition one insert writes: each with the chance `select` draws (at
    /// least one row).
    fn selected_rows(&self, w: &mut UserWorker, p: &Partition) -> Vec<u64> {
        let chance = w.select.sample() as f64 / self.profile.insert.select.divisor;
        if chance >= 1.0 {
            return (0..p.rows).collect();
        }
        let mut rows: Vec<u64> = (0..p.rows).filter(|_| w.rng.next_double() < chance).collect();
        if rows.is_empty() {
            rows.push(w.rng.next_long().unsigned_abs() % p.rows);
        }
        rows
    }

    fn bound_values(
        &self,
        w: &mut UserWorker,
        p: &Partition,
        binds: &[usize],
        fields: Fields,
    ) -> Vec<Option<CqlValue>> {
        if fields == Fields::SameRow {
            let row = w.rng.next_long().unsigned_abs() % p.rows;
            w.rows.row(p, row, &mut w.values);
            return binds.iter().map(|&c| w.values[c].clone()).collect();
        }
        let mut out = Vec::with_capacity(binds.len());
        for &c in binds {
            let row = w.rng.next_long().unsigned_abs() % p.rows;
            w.rows.row(p, row, &mut w.values);
            out.push(w.values[c].clone());
        }
        out
    }

    /// Compares every returned row with the row regenerated for it; the first difference.
    fn check(
        &self,
        w: &mut UserWorker,
        p: &Partition,
        v: &Validation,
        returned: impl Iterator<Item = Result<Vec<Option<CqlValue>>, scylla::errors::DeserializationError>>,
    ) -> Option<String> {
        let columns = &self.table.columns;
        let mut seen = 0;
        for row in returned {
            let row = match row {
                Ok(r) => r,
                Err(e) => return Some(format!("Data returned was not validated: {e}")),
            };
            seen += 1;
            let index = if v.identifies_rows {
                let clustering: Vec<Option<CqlValue>> = self
                    .table
                    .of_kind(Kind::Clustering)
                    .map(|c| v.selected.iter().position(|s| *s == Some(c)).and_then(|i| row[i].clone()))
                    .collect();
                match w.rows.find(p, &clustering) {
                    Some(r) => r,
                    None => {
                        let names: Vec<String> = self
                            .table
                            .of_kind(Kind::Clustering)
                            .zip(&clustering)
                            .map(|(c, v)| format!("{}={}", columns[c].name, shown(v)))
                            .collect();
                        return Some(format!(
                            "Data returned was not validated: a row ({}) that was never written to this partition",
                            names.join(", ")
                        ));
                    }
                }
            } else {
                0
            };
            w.rows.row(p, index, &mut w.expected);
            for (i, got) in row.into_iter().enumerate() {
                let Some(c) = v.selected[i] else { continue };
                let column = &columns[c];
                let checkable = !column.is_counter()
                    && (v.identifies_rows || matches!(column.kind, Kind::Partition | Kind::Static));
                if !checkable {
                    continue;
                }
                let (want, got) = (normalized(w.expected[c].clone()), normalized(got));
                if want != got {
                    return Some(format!(
                        "Data returned was not validated: row {index}, column {}: expected {}, got {}",
                        column.name,
                        shown(&want),
                        shown(&got)
                    ));
                }
            }
        }
        (seen == 0)
            .then(|| "Data returned was not validated: no row returned (was this population written?)".to_string())
    }
}

/// The operations of `ops(…)` over one profile or several (`profile=a.yaml,b.yaml`), each
/// profile with the session whose keyspace is its own.
pub struct Users {
    profiles: Vec<(User, Arc<Session>)>,
    /// For each operation of `ops(…)`: its profile, and its index among that profile's.
    ops: Vec<(usize, usize)>,
}

/// A worker's state for each profile.
pub struct UsersWorker(Vec<UserWorker>);

impl Users {
    /// Prepares each profile's operations of `ops` on its session (`sessions[i]` for
    /// `profiles[i]`, its keyspace in use).
    pub async fn prepare(
        sessions: Vec<Arc<Session>>,
        profiles: &[Arc<Profile>],
        ops: &[UserOp],
        validate_all: bool,
        options: &Options,
    ) -> Result<Users, String> {
        let mut prepared = Vec::new();
        let mut at = vec![(0, 0); ops.len()];
        for (p, (profile, session)) in profiles.iter().zip(sessions).enumerate() {
            let mine: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].profile == p).collect();
            for (j, &i) in mine.iter().enumerate() {
                at[i] = (p, j);
            }
            let names: Vec<&'static str> = mine.iter().map(|&i| ops[i].name).collect();
            let user = User::prepare(&session, profile.clone(), &names, validate_all, options).await?;
            prepared.push((user, session));
        }
        Ok(Users { profiles: prepared, ops: at })
    }

    pub fn validation_notes(&self) -> Vec<String> {
        self.profiles.iter().flat_map(|(u, _)| u.validation_notes()).collect()
    }

    pub fn worker(&self, seed: i64) -> UsersWorker {
        UsersWorker(self.profiles.iter().map(|(u, _)| u.worker(seed)).collect())
    }

    /// How many partitions operation `op` of `ops(…)` takes from the population.
    pub fn partitions(&self, op: usize, w: &mut UsersWorker) -> usize {
        let (p, j) = self.ops[op];
        self.profiles[p].0.partitions(j, &mut w.0[p])
    }

    /// Runs operation `op` of `ops(…)` on the partitions seeded `seeds`.
    pub async fn run(&self, op: usize, w: &mut UsersWorker, seeds: &[i64], tries: u32) -> (Done, u32) {
        let (p, j) = self.ops[op];
        let (user, session) = &self.profiles[p];
        user.run(session, j, &mut w.0[p], seeds, tries).await
    }
}

/// `UPDATE ks.t SET c = ?, … WHERE key = ? AND …` (counters `c = c + ?`), or an INSERT of the
/// key for a table that has nothing else.
fn insert_statement(table: &Table) -> String {
    let name = format!("{}.{}", quote(&table.keyspace), quote(&table.name));
    let keys: Vec<&str> = table
        .columns
        .iter()
        .filter(|c| matches!(c.kind, Kind::Partition | Kind::Clustering))
        .map(|c| c.name.as_str())
        .collect();
    let sets: Vec<String> =
        table
            .columns
            .iter()
            .filter(|c| matches!(c.kind, Kind::Static | Kind::Regular))
            .map(|c| {
                if c.is_counter() {
                    format!("{0} = {0} + ?", quote(&c.name))
                } else {
                    format!("{} = ?", quote(&c.name))
                }
            })
            .collect();
    if sets.is_empty() {
        let names: Vec<String> = keys.iter().map(|k| quote(k)).collect();
        return format!("INSERT INTO {name} ({}) VALUES ({})", names.join(", "), vec!["?"; keys.len()].join(", "));
    }
    let wheres: Vec<String> = keys.iter().map(|k| format!("{} = ?", quote(k))).collect();
    format!("UPDATE {name} SET {} WHERE {}", sets.join(", "), wheres.join(" AND "))
}
