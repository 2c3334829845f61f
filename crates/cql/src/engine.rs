//! The load itself: one driver session (token-aware, one connection pool), prepared
//! statements, `threads` tasks each with one operation in flight, an optional rate schedule,
//! and measurements recorded per operation into sharded HDR histograms.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use scylla::client::PoolSize;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::deserialize::row::ColumnIterator;
use scylla::errors::ExecutionError;
use scylla::frame::Compression;
use scylla::serialize::SerializationError;
use scylla::serialize::row::{RowSerializationContext, SerializeRow};
use scylla::serialize::writers::RowWriter;
use scylla::statement::prepared::PreparedStatement;
use scylla::value::{Counter, CqlValue};
use tokio::time::Sleep;

use super::consistency::{consistency, serial_consistency};
use super::data::RowGenerator;
use super::dist::Dist;
use super::failover::{self, ClientEvents};
use super::metrics::{Measurement, Nanos, Recorder};
use super::random::JavaRandom;
use super::schema;
use super::settings::{Op, Population, Settings};
use super::users::{self, Users, UsersWorker};

/// How long connecting may take before the run gives up with the nodes' names.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(8);

/// Connects to the nodes of `-node` (on `-port native=`), within [`CONNECT_TIMEOUT`].
pub async fn connect(settings: &Settings) -> Result<Session> {
    let nodes: Vec<String> =
        settings
            .nodes
            .iter()
            .map(|n| {
                if n.contains(':') && !n.starts_with('[') { n.clone() } else { format!("{n}:{}", settings.native_port) }
            })
            .collect();
    let mut builder = SessionBuilder::new()
        .known_nodes(&nodes)
        .connection_timeout(Duration::from_secs(5))
        .keepalive_timeout(settings.mode.heartbeat_timeout)
        .pool_size(PoolSize::PerHost(
            std::num::NonZeroUsize::new(settings.mode.connections_per_host as usize).expect("at least 1"),
        ))
        .compression(match settings.mode.compression.as_deref() {
            Some("lz4") => Some(Compression::Lz4),
            Some("snappy") => Some(Compression::Snappy),
            _ => None,
        });
    if let Some(every) = settings.mode.heartbeat {
        builder = builder.keepalive_interval(every);
    }
    if let Some(every) = settings.mode.tcp_keepalive {
        builder = builder.tcp_keepalive_interval(every);
    }
    if let Some(transport) = &settings.transport {
        builder = builder.tls_context(Some(Arc::new(transport.client_config()?)));
    }
    if let Some(user) = &settings.mode.user {
        builder = builder.user(user, settings.mode.password.clone().unwrap_or_default());
    }
    let list = nodes.join(", ");
    let hint = if settings.transport.is_none() {
        "Is a CQL server listening there? Name the nodes with -node a,b,c and the port with -port native=N; if they require TLS, add -transport truststore=FILE."
    } else {
        "Is a CQL server listening there? Name the nodes with -node a,b,c and the port with -port native=N."
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, builder.build()).await {
        Ok(Ok(session)) => Ok(session),
        Ok(Err(e)) => bail!("cannot connect to {list}: {e}. {hint}"),
        Err(_) => bail!("cannot connect to {list}: no answer within {} s. {hint}", CONNECT_TIMEOUT.as_secs()),
    }
}

/// The "Connected to cluster" lines cassandra-stress prints.
pub async fn describe(session: &Session, settings: &Settings) -> String {
    let name = match session.query_unpaged("SELECT cluster_name FROM system.local", ()).await {
        Ok(r) => r
            .into_rows_result()
            .ok()
            .and_then(|rows| rows.maybe_first_row::<(Option<String>,)>().ok().flatten())
            .and_then(|(n,)| n)
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    let mut o = format!(
        "Connected to cluster: {name}, max pending requests per connection {}, max connections per host {}\n",
        settings.mode.max_pending.unwrap_or(128),
        settings.mode.connections_per_host
    );
    for node in session.get_cluster_state().get_nodes_info() {
        o.push_str(&format!(
            "Datacenter: {}; Host: /{}; Rack: {}\n",
            node.datacenter.as_deref().unwrap_or("null"),
            node.address,
            node.rack.as_deref().unwrap_or("null")
        ));
    }
    o
}

/// Creates the keyspace and the tables the command uses.
pub async fn create_schema(session: &Session, settings: &Settings) -> Result<()> {
    if !settings.command.profiles.is_empty() {
        for profile in &settings.command.profiles {
            users::create_schema(session, profile).await.map_err(anyhow::Error::msg)?;
        }
        return Ok(());
    }
    let mut statements = vec![
        schema::create_keyspace(&settings.schema),
        schema::create_table(&settings.schema, &settings.columns, false),
    ];
    if settings.command.ops.iter().any(|(op, _)| matches!(op, Op::CounterWrite | Op::CounterRead)) {
        statements.push(schema::create_table(&settings.schema, &settings.columns, true));
    }
    for cql in statements {
        session
            .query_unpaged(cql.as_str(), ())
            .await
            .with_context(|| format!("Encountered exception creating schema: {cql}"))?;
        // Loaders make the schema at once: a `CREATE … IF NOT EXISTS` that finds the keyspace
        // on one node changes nothing, so the driver does not wait, and the next statement may
        // reach a node that has not heard of it yet. Every node agrees before going on.
        session
            .await_schema_agreement()
            .await
            .with_context(|| format!("waiting for the nodes to agree on the schema after: {cql}"))?;
    }
    Ok(())
}

pub async fn truncate(session: &Session, settings: &Settings) -> Result<()> {
    if !settings.command.profiles.is_empty() {
        for profile in &settings.command.profiles {
            let cql = format!("TRUNCATE {}.{}", profile.keyspace, profile.table);
            session.query_unpaged(cql.as_str(), ()).await.with_context(|| format!("truncating: {cql}"))?;
        }
        return Ok(());
    }
    let mut tables: Vec<&str> = settings.command.ops.iter().map(|(op, _)| schema::table(*op)).collect();
    tables.dedup();
    for table in tables {
        let cql = schema::truncate(&settings.schema.keyspace, table);
        session.query_unpaged(cql.as_str(), ()).await.with_context(|| format!("truncating: {cql}"))?;
    }
    Ok(())
}

/// The operations of `user` profiles, prepared on the tables the cluster holds.
pub async fn prepare_user(
    session: &Arc<Session>,
    settings: &Settings,
    events: &Arc<ClientEvents>,
) -> Result<Option<Arc<Users>>> {
    let profiles = &settings.command.profiles;
    let Some(first) = profiles.first() else { return Ok(None) };
    // A profile's CQL may leave its keyspace out, and the driver prepares a statement again in
    // the session's keyspace: each keyspace has a session of its own, the first one's the
    // session the run already has.
    users::use_keyspace(session, first).await.map_err(anyhow::Error::msg)?;
    let mut sessions: Vec<Arc<Session>> = Vec::new();
    for (i, profile) in profiles.iter().enumerate() {
        let same = profiles[..i].iter().position(|earlier| earlier.keyspace == profile.keyspace);
        let own = match same {
            Some(j) => sessions[j].clone(),
            None if i == 0 => session.clone(),
            None => {
                let own = Arc::new(connect(settings).await?);
                users::use_keyspace(&own, profile).await.map_err(anyhow::Error::msg)?;
                own
            }
        };
        sessions.push(own);
    }
    let options = users::Options {
        consistency: consistency(&settings.command.consistency),
        serial_consistency: serial_consistency(&settings.command.serial_consistency),
        profile: failover::execution_profile(session, &settings.mode, Some(settings.mode.request_timeout)),
        events: events.clone(),
    };
    let users = Users::prepare(sessions, profiles, &settings.command.user_ops, settings.validate, &options)
        .await
        .map_err(anyhow::Error::msg)?;
    Ok(Some(Arc::new(users)))
}

/// The prepared statement of each operation of the command, in the command's order (none for
/// a `user` profile, whose operations are prepared by [`prepare_user`]).
pub async fn prepare(
    session: &Session,
    settings: &Settings,
    events: &Arc<ClientEvents>,
) -> Result<Vec<PreparedStatement>> {
    let mut out = Vec::new();
    if !settings.command.profiles.is_empty() {
        return Ok(out);
    }
    // An operation times out on its worker's timer (`Worker::deadline`), not on the driver's,
    // which registers and removes a timer for every request.
    let untimed = failover::execution_profile(session, &settings.mode, None);
    for (op, _) in &settings.command.ops {
        let cql = schema::statement(*op, &settings.schema.keyspace, &settings.columns);
        let mut p = failover::prepare(session, &cql).await.with_context(|| format!("preparing {cql}"))?;
        p.set_consistency(consistency(&settings.command.consistency));
        p.set_serial_consistency(Some(serial_consistency(&settings.command.serial_consistency)));
        p.set_execution_profile_handle(Some(untimed.clone()));
        p.set_history_listener(events.clone());
        p.set_is_idempotent(op.idempotent());
        p.set_use_cached_result_metadata(true);
        out.push(p);
    }
    Ok(out)
}

/// When to stop issuing operations.
pub enum Work {
    Count(u64),
    /// Until told to stop (duration or uncertainty).
    Open,
}

/// Operations on a schedule: operation i is meant to start at `start + i / rate`.
struct Schedule {
    start: AtomicU64,
    interval: u64,
    next: AtomicU64,
}

/// What all tasks of one run share.
pub struct Load {
    session: Arc<Session>,
    events: Arc<ClientEvents>,
    statements: Arc<Vec<PreparedStatement>>,
    /// Per statement, the generated cell of each result column ([`result_cells`]).
    result_cells: Vec<Vec<Option<usize>>>,
    user: Option<Arc<Users>>,
    settings: Arc<Settings>,
    epoch: Instant,
    pub recorder: Recorder,
    work: Work,
    issued: AtomicU64,
    stop: AtomicBool,
    failed: AtomicBool,
    sequence_next: AtomicU64,
    schedule: Option<Schedule>,
    errors_printed: AtomicU64,
    /// Warm-up runs say nothing about errors.
    quiet: bool,
}

/// How many error messages go to stderr before the rest are only counted.
const ERRORS_PRINTED: u64 = 20;

impl Load {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        session: Arc<Session>,
        events: Arc<ClientEvents>,
        statements: Arc<Vec<PreparedStatement>>,
        user: Option<Arc<Users>>,
        settings: Arc<Settings>,
        epoch: Instant,
        work: Work,
        shards: usize,
        quiet: bool,
        scheduled: bool,
    ) -> Arc<Load> {
        let fixed = settings.rate.fixed.is_some();
        let rate = if scheduled { settings.rate.ops_per_second() } else { None };
        let result_cells = statements.iter().map(|s| result_cells(s, &settings.columns.names)).collect();
        Arc::new(Load {
            session,
            events,
            statements,
            result_cells,
            user,
            schedule: rate.map(|r| Schedule {
                start: AtomicU64::new(0),
                interval: 1_000_000_000 / r.max(1),
                next: AtomicU64::new(0),
            }),
            settings,
            epoch,
            recorder: Recorder::new(shards, fixed),
            work,
            issued: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            sequence_next: AtomicU64::new(0),
            errors_printed: AtomicU64::new(0),
            quiet,
        })
    }

    pub fn now(&self) -> Nanos {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Starts the schedule's clock: call before the tasks start.
    pub fn start(&self) {
        if let Some(s) = &self.schedule {
            s.start.store(self.now(), Ordering::Relaxed);
        }
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    fn take_work(&self) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        match self.work {
            Work::Count(n) => self.issued.fetch_add(1, Ordering::Relaxed) < n,
            Work::Open => true,
        }
    }

    fn report_error(&self, message: &str) {
        if self.quiet {
            return;
        }
        let n = self.errors_printed.fetch_add(1, Ordering::Relaxed);
        if n < ERRORS_PRINTED {
            eprintln!("{message}");
        } else if n == ERRORS_PRINTED {
            eprintln!("(further errors are counted in the output, not printed)");
        }
    }
}

/// One task's generators and buffers.
struct Worker {
    index: usize,
    rows: RowGenerator,
    key: Vec<u8>,
    cells: Vec<Vec<u8>>,
    population: Option<Dist>,
    add: Dist,
    /// `mixed`: which operation, and how many more of it in a row.
    mix_rng: JavaRandom,
    clustering: Dist,
    current: usize,
    remaining: i64,
    user: Option<UsersWorker>,
    /// A `user` operation's partitions, and its partition key as messages show it.
    seeds: Vec<i64>,
    key_text: String,
    /// When the attempt under way times out (`-mode requestTimeout=`). One timer for all of the
    /// worker's attempts: moving a tokio timer later is one atomic exchange, where a timer per
    /// request is an insertion into the timer wheel and a removal.
    deadline: Pin<Box<Sleep>>,
}

impl Worker {
    fn new(index: usize, settings: &Settings, user: Option<&Users>, seed: i64) -> Worker {
        let population = match &settings.population {
            Population::Distribution(spec) => Some(spec.sampler(seed.wrapping_add(index as i64 * 7919))),
            Population::Sequence { .. } => None,
        };
        Worker {
            index,
            rows: RowGenerator::new(settings.command.key_size, &settings.columns.names, &settings.columns.size),
            key: Vec::with_capacity(settings.command.key_size),
            cells: vec![Vec::new(); settings.columns.names.len()],
            population,
            add: settings.command.add.sampler(seed ^ index as i64),
            mix_rng: JavaRandom::new(seed.wrapping_mul(31).wrapping_add(index as i64)),
            clustering: settings.command.clustering.sampler(seed.wrapping_add(index as i64)),
            current: 0,
            remaining: 0,
            user: user.map(|u| u.worker(seed.wrapping_add(index as i64))),
            seeds: Vec::new(),
            key_text: String::new(),
            deadline: Box::pin(tokio::time::sleep(settings.mode.request_timeout)),
        }
    }

    /// The next operation (an index into the command's operations).
    fn next_op(&mut self, ops: &[(Op, f64)]) -> usize {
        if ops.len() == 1 {
            return 0;
        }
        if self.remaining <= 0 {
            let total: f64 = ops.iter().map(|(_, w)| w).sum();
            let mut pick = self.mix_rng.next_double() * total;
            self.current = ops.len() - 1;
            for (i, (_, w)) in ops.iter().enumerate() {
                if pick < *w {
                    self.current = i;
                    break;
                }
                pick -= w;
            }
            self.remaining = self.clustering.sample().max(1);
        }
        self.remaining -= 1;
        self.current
    }

    /// The next partition's seed, or None when a sequence without wrap is used up.
    fn next_seed(&mut self, load: &Load) -> Option<i64> {
        if let Some(d) = &mut self.population {
            return Some(d.sample());
        }
        let Population::Sequence { start, end, wrap } = load.settings.population else { unreachable!("sequence") };
        let span = (end - start + 1) as u64;
        let i = load.sequence_next.fetch_add(1, Ordering::Relaxed);
        if !wrap && i >= span {
            return None;
        }
        Some(start + (i % span) as i64)
    }
}

/// How one operation ended.
struct Outcome {
    partitions: u64,
    rows: u64,
    /// Why it failed (after its retries), as cassandra-stress words it.
    error: Option<String>,
}

/// Which generated cell each result column of a read holds (None: a column not generated, such
/// as the key), worked out once so that validating a row compares bytes and nothing else.
fn result_cells(statement: &PreparedStatement, names: &[String]) -> Vec<Option<usize>> {
    let specs = statement.get_current_result_set_col_specs();
    specs.get().iter().map(|spec| names.iter().position(|n| n == spec.name())).collect()
}

fn validation_error(
    settings: &Settings,
    expected: &[Vec<u8>],
    cells: &[Option<usize>],
    row: Option<ColumnIterator<'_, '_>>,
) -> Option<String> {
    let Some(row) = row else {
        let bytes: usize = expected.iter().map(Vec::len).sum();
        let n = expected.len();
        let names = &settings.columns.names;
        let preview = if n == 0 { "[]".to_string() } else { format!("[{}..{}]", names[0], names[n - 1]) };
        return Some(format!(
            "Data returned was not validated: row empty/missing (expected 1 row(s) with {n} column(s) {preview}, {bytes} bytes total ({n}x{}); got 0 rows)",
            bytes.checked_div(n).unwrap_or(0)
        ));
    };
    let mut seen = 0;
    for (i, column) in row.enumerate() {
        let column = match column {
            Ok(c) => c,
            Err(e) => return Some(format!("Data returned was not validated: {e}")),
        };
        let Some(j) = cells.get(i).copied().flatten() else { continue };
        seen += 1;
        let actual = column.slice.map(|s| s.as_slice());
        let want = expected[j].as_slice();
        if actual != Some(want) {
            let diff = match actual {
                None => format!("got null (expected {} bytes)", want.len()),
                Some(a) if a.len() != want.len() => format!("expected {} bytes, got {} bytes", want.len(), a.len()),
                Some(a) => format!(
                    "same size ({} bytes) but content differs; expected[0..{}]={}, got[0..{}]={}",
                    want.len(),
                    want.len().min(16) - 1,
                    hex(want),
                    a.len().min(16) - 1,
                    hex(a)
                ),
            };
            return Some(format!(
                "Data returned was not validated: row 0, column {j} ({}): {diff}",
                settings.columns.names[j]
            ));
        }
    }
    if seen != expected.len() {
        return Some(format!(
            "Data returned was not validated: row 0 column count mismatch (expected {} column(s); got {seen})",
            expected.len()
        ));
    }
    None
}

/// A write's bound values, the cells then the key, serialised without building a list first.
struct WriteRow<'a> {
    cells: &'a [Vec<u8>],
    key: &'a [u8],
}

impl SerializeRow for WriteRow<'_> {
    fn serialize(&self, ctx: &RowSerializationContext<'_>, writer: &mut RowWriter) -> Result<(), SerializationError> {
        if ctx.columns().len() != self.cells.len() + 1 {
            return Err(SerializationError::new(std::io::Error::other(format!(
                "the statement binds {} values, the row has {}",
                ctx.columns().len(),
                self.cells.len() + 1
            ))));
        }
        for value in self.cells.iter().map(Vec::as_slice).chain(std::iter::once(self.key)) {
            writer.make_cell_writer().set_value(value).map_err(SerializationError::new)?;
        }
        Ok(())
    }

    fn is_empty(&self) -> bool {
        false
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s: String = "0x".into();
    for b in bytes.iter().take(16) {
        s.push_str(&format!("{b:02x}"));
    }
    if bytes.len() > 16 {
        s.push_str("...");
    }
    s
}

impl Load {
    /// Runs one operation with its retries.
    async fn execute(&self, w: &mut Worker, op: Op, which: usize, seed: i64) -> (Outcome, u32) {
        let settings = &*self.settings;
        let statement = &self.statements[which];
        let row_seed = w.rows.key(seed, &mut w.key);
        let generate = matches!(op, Op::Write) || (matches!(op, Op::Read) && !settings.errors.skip_read_validation);
        if generate {
            for (c, cell) in w.cells.iter_mut().enumerate() {
                w.rows.cell(c, row_seed, cell);
            }
        }
        let counters: Vec<CqlValue> = if matches!(op, Op::CounterWrite) {
            let mut v: Vec<CqlValue> = (0..w.cells.len()).map(|_| CqlValue::Counter(Counter(w.add.sample()))).collect();
            v.push(CqlValue::Blob(w.key.clone()));
            v
        } else {
            Vec::new()
        };
        let tries = settings.errors.retries + 1;
        let timeout = settings.mode.request_timeout;
        let mut last_error = String::new();
        for attempt in 1..=tries {
            failover::before_attempt(&self.events, attempt).await;
            let mut request = std::pin::pin!(async {
                match op {
                    Op::Write => {
                        self.session.execute_unpaged(statement, WriteRow { cells: &w.cells, key: &w.key }).await
                    }
                    Op::CounterWrite => self.session.execute_unpaged(statement, &counters).await,
                    Op::Read | Op::CounterRead => self.session.execute_unpaged(statement, (w.key.as_slice(),)).await,
                    Op::User(_) => unreachable!("a profile runs its own operations"),
                }
            });
            let deadline = &mut w.deadline;
            deadline.as_mut().reset(tokio::time::Instant::now() + timeout);
            let answered = std::future::poll_fn(|cx| match request.as_mut().poll(cx) {
                Poll::Ready(result) => Poll::Ready(result.map_err(|e| (e.to_string(), false))),
                Poll::Pending => deadline
                    .as_mut()
                    .poll(cx)
                    .map(|()| Err((ExecutionError::RequestTimeout(timeout).to_string(), true))),
            })
            .await;
            let result = match answered {
                Ok(r) => r,
                Err((why, timed_out)) => {
                    let again;
                    (last_error, again) = failover::after_failure(&self.events, &why, timed_out, op.idempotent());
                    if !again || (self.stop.load(Ordering::Relaxed) && self.failed()) {
                        return (Outcome { partitions: 0, rows: 0, error: Some(last_error) }, attempt);
                    }
                    continue;
                }
            };
            let outcome = match op {
                Op::Write | Op::CounterWrite | Op::User(_) => Outcome { partitions: 1, rows: 1, error: None },
                Op::Read | Op::CounterRead => match result.into_rows_result() {
                    Err(e) => {
                        Outcome { partitions: 0, rows: 0, error: Some(format!("Data returned was not validated: {e}")) }
                    }
                    Ok(rows) => {
                        let n = rows.rows_num() as u64;
                        let error = if matches!(op, Op::CounterRead) || settings.errors.skip_read_validation {
                            (n == 0).then(|| "Data returned was not validated".to_string())
                        } else {
                            match rows.rows::<ColumnIterator>() {
                                Err(e) => Some(format!("Data returned was not validated: {e}")),
                                Ok(mut it) => match it.next() {
                                    None => validation_error(settings, &w.cells, &[], None),
                                    Some(Err(e)) => Some(format!("Data returned was not validated: {e}")),
                                    Some(Ok(row)) => {
                                        validation_error(settings, &w.cells, &self.result_cells[which], Some(row))
                                    }
                                },
                            }
                        };
                        Outcome { partitions: n, rows: n, error }
                    }
                },
            };
            // A validation failure is an answer, not a transient error: no retry.
            return (outcome, attempt);
        }
        (Outcome { partitions: 0, rows: 0, error: Some(last_error) }, tries)
    }

    /// One task: operations until the work, the population or the run ends.
    pub async fn task(self: Arc<Load>, index: usize, seed: i64) {
        let settings = self.settings.clone();
        let mut w = Worker::new(index, &settings, self.user.as_deref(), seed);
        let ops = &settings.command.ops;
        while self.take_work() {
            let Some(partition) = w.next_seed(&self) else {
                self.stop();
                break;
            };
            let which = w.next_op(ops);
            let op = ops[which].0;
            if let (Op::User(i), Some(user)) = (op, &self.user) {
                w.seeds.clear();
                w.seeds.push(partition);
                let wanted = user.partitions(i, w.user.as_mut().expect("a user worker"));
                while w.seeds.len() < wanted {
                    match w.next_seed(&self) {
                        Some(s) => w.seeds.push(s),
                        None => break,
                    }
                }
            }
            let intended = self
                .schedule
                .as_ref()
                .map(|s| s.start.load(Ordering::Relaxed) + s.next.fetch_add(1, Ordering::Relaxed) * s.interval);
            if let Some(at) = intended {
                let now = self.now();
                if at > now {
                    tokio::time::sleep(Duration::from_nanos(at - now)).await;
                }
            }
            let started = self.now();
            let (outcome, tries) = match (op, &self.user) {
                (Op::User(i), Some(user)) => {
                    let tries = settings.errors.retries + 1;
                    let (done, tries) = user.run(i, w.user.as_mut().expect("a user worker"), &w.seeds, tries).await;
                    w.key_text = done.key;
                    (Outcome { partitions: done.partitions, rows: done.rows, error: done.error }, tries)
                }
                _ => {
                    let (outcome, tries) = self.execute(&mut w, op, which, partition).await;
                    w.key_text.clear();
                    (outcome, tries)
                }
            };
            let ended = self.now();
            self.recorder.record(
                w.index,
                settings.command.op_name(op),
                &Measurement {
                    intended,
                    started,
                    ended,
                    partitions: outcome.partitions,
                    rows: outcome.rows,
                    error: outcome.error.is_some(),
                },
            );
            if let Some(error) = outcome.error {
                let key = if w.key_text.is_empty() {
                    String::from_utf8_lossy(&w.key).into_owned()
                } else {
                    w.key_text.clone()
                };
                self.report_error(&format!("Operation x{tries} on key(s) [{key}]: {error}"));
                if !settings.errors.ignore {
                    self.failed.store(true, Ordering::Relaxed);
                    self.stop();
                    break;
                }
            }
        }
    }
}

/// A population's seeds for warm-up differ from the run's, as cassandra-stress's fresh generators
/// do; loaders started together (`-loaders`) are told their own base seed, so their draws differ.
pub fn task_seed(run: u64) -> i64 {
    let base = std::env::var(crate::vars::SEED_VAR)
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
        .map_or(std::process::id() as i64, |loader| loader.wrapping_mul(0x2545_F491_4F6C_DD1D));
    (run as i64).wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64) ^ base
}

/// Warm-up iterations, as cassandra-stress counts them.
pub fn warmup_iterations(settings: &Settings) -> u64 {
    let per_node = match settings.command.count() {
        Some(n) => 50_000.min((n as f64 * 0.25) as u64),
        None => 50_000,
    };
    per_node * settings.nodes.len() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings;

    fn settings(line: &str) -> Settings {
        settings::parse(&line.split_whitespace().map(String::from).collect::<Vec<_>>()).unwrap()
    }

    /// A worker's generators need a runtime for their request timer.
    fn with_worker<T>(line: &str, seed: i64, f: impl FnOnce(&mut Worker, &Settings) -> T) -> T {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let settings = settings(line);
        runtime.block_on(async { f(&mut Worker::new(0, &settings, None, seed), &settings) })
    }

    #[test]
    fn a_mixed_command_draws_operations_in_its_ratio_and_in_runs_of_its_clustering() {
        let draws = 40_000;
        let (picks, reads) = with_worker("mixed ratio(write=1,read=3) n=1 clustering=fixed(1)", 7, |w, s| {
            let reads = s.command.ops.iter().position(|(op, _)| *op == Op::Read).unwrap();
            ((0..draws).map(|_| w.next_op(&s.command.ops)).collect::<Vec<_>>(), reads)
        });
        let share = picks.iter().filter(|&&i| i == reads).count() as f64 / draws as f64;
        assert!((share - 0.75).abs() < 0.01, "reads were {share:.3} of the operations, not 3/4");

        let runs = with_worker("mixed ratio(write=1,read=1) n=1 clustering=fixed(5)", 11, |w, s| {
            (0..1000).map(|_| w.next_op(&s.command.ops)).collect::<Vec<_>>()
        });
        for chunk in runs.chunks(5) {
            assert!(chunk.iter().all(|&i| i == chunk[0]), "one draw serves 5 operations in a row: {chunk:?}");
        }
        assert!(runs.chunks(5).any(|c| c[0] != runs[0]), "both operations are drawn");
    }

    #[test]
    fn warm_up_is_a_quarter_of_the_count_up_to_50k_per_node() {
        assert_eq!(warmup_iterations(&settings("write n=1000")), 250);
        assert_eq!(warmup_iterations(&settings("write n=10M -node a,b,c")), 150_000);
        assert_eq!(warmup_iterations(&settings("write duration=1m")), 50_000);
    }

    #[test]
    fn keys_in_messages_are_cut_after_16_bytes() {
        assert_eq!(hex(&[0xab, 0x01]), "0xab01");
        assert_eq!(hex(&[0u8; 17]), format!("0x{}...", "00".repeat(16)));
    }
}
