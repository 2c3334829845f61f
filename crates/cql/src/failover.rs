//! How the client lives with a node that stops answering, and what it did about it. A lost
//! machine sends no reset: without a word from the node, a client that waits for its requests'
//! timeouts looks, from outside, like a database that stopped. The session sends CQL
//! heartbeats and closes a connection whose heartbeats go unanswered (`-mode heartbeat=`,
//! `heartbeatTimeout=`), after which the driver sends nothing to that node; an idempotent
//! request whose connection broke, or whose coordinator could not serve it, goes on to the next
//! replica (`failover=`); one not answered in time may be sent to another replica as well
//! (`speculate=`). Every attempt is counted by node and interval, with the client's timeouts,
//! retries and speculative executions, and printed after the run as `client,` rows, so that
//! the report can say which of a loss's seconds were the database's and which the client's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use scylla::client::execution_profile::{ExecutionProfile, ExecutionProfileHandle};
use scylla::client::session::Session;
use scylla::errors::{PrepareError, RequestAttemptError, RequestError};
use scylla::observability::history::{AttemptId, HistoryListener, RequestId, SpeculativeId};
use scylla::policies::retry::{DefaultRetryPolicy, FallthroughRetryPolicy, RetryDecision};
use scylla::policies::speculative_execution::SimpleSpeculativeExecutionPolicy;
use scylla::statement::prepared::PreparedStatement;

use super::settings::Mode;

/// Nodes counted apart; a larger ring's further nodes share the last count.
const NODES: usize = 64;

/// Speculative executions of one request: with the first, three replicas may be asked.
const SPECULATIVE: usize = 2;

/// The execution profile of the run's statements: `timeout` (None where the worker keeps its
/// own), the retry policy of `failover=`, the speculative executions of `speculate=`.
pub fn execution_profile(
    session: &Session,
    mode: &Mode,
    timeout: Option<std::time::Duration>,
) -> ExecutionProfileHandle {
    let builder = session.get_default_execution_profile_handle().pointee_to_builder().request_timeout(timeout);
    let builder = if mode.failover {
        builder.retry_policy(Arc::new(DefaultRetryPolicy::new()))
    } else {
        // Every failure back to `-errors retries=`, as cassandra-stress counts them.
        builder.retry_policy(Arc::new(FallthroughRetryPolicy))
    };
    let speculative = mode.speculate.map(|delay| {
        Arc::new(SimpleSpeculativeExecutionPolicy { max_retry_count: SPECULATIVE, retry_interval: delay }) as _
    });
    let profile: ExecutionProfile = builder.speculative_execution_policy(speculative).build();
    profile.into_handle()
}

/// Prepares `cql`, again where the connection broke or the pool had none (up to three tries,
/// a second apart): a heartbeat that closed a busy node's connection must not end a run before
/// its load begins.
pub async fn prepare(session: &Session, cql: &str) -> Result<PreparedStatement, PrepareError> {
    let mut tries = 1;
    loop {
        match session.prepare(cql).await {
            Err(
                PrepareError::ConnectionPoolError(_)
                | PrepareError::AllAttemptsFailed { first_attempt: RequestAttemptError::BrokenConnectionError(_) },
            ) if tries < 3 => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
            prepared => return prepared,
        }
    }
}

/// Before attempt `attempt` of an operation (from 1): a retry is counted and waits, 50 ms after
/// the first failure, doubling up to 1 s, so that `-errors retries=` rides out a moment in which
/// no replica could take it (a node restarting, connections re-made) instead of spending every
/// try in a millisecond.
pub async fn before_attempt(events: &ClientEvents, attempt: u32) {
    if attempt < 2 {
        return;
    }
    events.retried();
    let wait = BACKOFF.saturating_mul(1 << (attempt - 2).min(5)).min(BACKOFF_MAX);
    tokio::time::sleep(wait).await;
}

/// After a failed attempt (`why`, `timed_out` where no answer came in time): the operation's
/// error, and whether another attempt may follow: not after a timeout of an operation that is
/// not idempotent, which may have been applied (a counter would count twice).
pub fn after_failure(events: &ClientEvents, why: &str, timed_out: bool, idempotent: bool) -> (String, bool) {
    let mut error = format!("Error executing: {why}");
    if timed_out {
        events.timed_out();
    }
    let again = !timed_out || idempotent;
    if !again {
        error.push_str(" (not retried: the operation is not idempotent)");
    }
    (error, again)
}

const BACKOFF: std::time::Duration = std::time::Duration::from_millis(50);
const BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(1);

/// What the client did, counted since the last [`ClientEvents::take`]. The driver tells it of
/// every attempt (its history listener); the load tells it of its own timeouts and retries.
#[derive(Debug)]
pub struct ClientEvents {
    nodes: RwLock<Vec<SocketAddr>>,
    started: [AtomicU64; NODES],
    answered: [AtomicU64; NODES],
    failed: [AtomicU64; NODES],
    timeouts: AtomicU64,
    retries: AtomicU64,
    speculative: AtomicU64,
    attempts: AtomicUsize,
}

impl Default for ClientEvents {
    fn default() -> Self {
        ClientEvents {
            nodes: RwLock::new(Vec::new()),
            started: std::array::from_fn(|_| AtomicU64::new(0)),
            answered: std::array::from_fn(|_| AtomicU64::new(0)),
            failed: std::array::from_fn(|_| AtomicU64::new(0)),
            timeouts: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            speculative: AtomicU64::new(0),
            attempts: AtomicUsize::new(0),
        }
    }
}

/// One node's attempts in an interval.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeCounts {
    pub node: String,
    pub started: u64,
    pub answered: u64,
    /// Ended in an error: a connection that broke, an answer that was an error.
    pub failed: u64,
    /// The driver had no open connection to it at the interval's end.
    pub unconnected: bool,
}

/// The client's interval: `time` is when it ended, in seconds from the run's start.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientRow {
    pub time: f64,
    /// Requests that got no answer within `-mode requestTimeout=`.
    pub timeouts: u64,
    /// Attempts after the first: the driver's failovers and `-errors retries=`.
    pub retries: u64,
    pub speculative: u64,
    pub nodes: Vec<NodeCounts>,
}

impl ClientEvents {
    fn timed_out(&self) {
        self.timeouts.fetch_add(1, Ordering::Relaxed);
    }

    fn retried(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    fn index(&self, node: SocketAddr) -> usize {
        if let Some(i) = self.nodes.read().expect("not poisoned").iter().position(|n| *n == node) {
            return i.min(NODES - 1);
        }
        let mut nodes = self.nodes.write().expect("not poisoned");
        let i = nodes.iter().position(|n| *n == node).unwrap_or_else(|| {
            nodes.push(node);
            nodes.len() - 1
        });
        i.min(NODES - 1)
    }

    /// The interval's counts (reset), with the nodes the session has no connection to now.
    pub fn take(&self, time: f64, session: &Session) -> ClientRow {
        let unconnected: Vec<SocketAddr> = session
            .get_cluster_state()
            .get_nodes_info()
            .iter()
            .filter(|n| !n.is_connected())
            .map(|n| SocketAddr::new(n.address.ip(), n.address.port()))
            .collect();
        let mut known = self.nodes.read().expect("not poisoned").clone();
        for node in &unconnected {
            if !known.contains(node) {
                known.push(*node);
            }
        }
        let nodes = known
            .iter()
            .enumerate()
            .filter(|(i, _)| *i < NODES)
            .map(|(i, node)| NodeCounts {
                node: node.to_string(),
                started: self.started[i].swap(0, Ordering::Relaxed),
                answered: self.answered[i].swap(0, Ordering::Relaxed),
                failed: self.failed[i].swap(0, Ordering::Relaxed),
                unconnected: unconnected.contains(node),
            })
            .collect();
        ClientRow {
            time,
            timeouts: self.timeouts.swap(0, Ordering::Relaxed),
            retries: self.retries.swap(0, Ordering::Relaxed),
            speculative: self.speculative.swap(0, Ordering::Relaxed),
            nodes,
        }
    }
}

/// The node an attempt went to travels in its id: no table of attempts to keep.
impl HistoryListener for ClientEvents {
    fn log_request_start(&self) -> RequestId {
        RequestId(0)
    }

    fn log_request_success(&self, _: RequestId) {}

    fn log_request_error(&self, _: RequestId, _: &RequestError) {}

    fn log_new_speculative_fiber(&self, _: RequestId) -> SpeculativeId {
        self.speculative.fetch_add(1, Ordering::Relaxed);
        SpeculativeId(0)
    }

    fn log_attempt_start(&self, _: RequestId, _: Option<SpeculativeId>, node: SocketAddr) -> AttemptId {
        let i = self.index(node);
        self.started[i].fetch_add(1, Ordering::Relaxed);
        AttemptId(self.attempts.fetch_add(1, Ordering::Relaxed).wrapping_mul(NODES) + i)
    }

    fn log_attempt_success(&self, attempt: AttemptId) {
        self.answered[attempt.0 % NODES].fetch_add(1, Ordering::Relaxed);
    }

    fn log_attempt_error(&self, attempt: AttemptId, _: &RequestAttemptError, decision: &RetryDecision) {
        self.failed[attempt.0 % NODES].fetch_add(1, Ordering::Relaxed);
        if matches!(decision, RetryDecision::RetrySameTarget(_) | RetryDecision::RetryNextTarget(_)) {
            self.retries.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Whether the rows hold anything beyond answered requests: the table is printed only then.
pub fn eventful(rows: &[ClientRow]) -> bool {
    rows.iter()
        .any(|r| r.timeouts + r.retries + r.speculative > 0 || r.nodes.iter().any(|n| n.failed > 0 || n.unconnected))
}

/// The rows' timeouts, retries and speculative executions added up (one loader's rows, or
/// several loaders' together), where they hold anything beyond answered requests.
pub fn totals(rows: &[ClientRow]) -> Option<ClientRow> {
    eventful(rows).then(|| ClientRow {
        time: rows.iter().map(|r| r.time).fold(0.0, f64::max),
        timeouts: rows.iter().map(|r| r.timeouts).sum(),
        retries: rows.iter().map(|r| r.retries).sum(),
        speculative: rows.iter().map(|r| r.speculative).sum(),
        nodes: Vec::new(),
    })
}

pub const HEADER: &str =
    "client,  time, timeouts, retries, speculative, per node: started/answered/failed (* no open connection)";

/// `client,  12.0,        3,      14,           0, 10.244.1.7:9042 40/40/0 · 10.244.2.7:9042* 9/0/3`
pub fn line(row: &ClientRow) -> String {
    let nodes: Vec<String> = row
        .nodes
        .iter()
        .map(|n| {
            let star = if n.unconnected { "*" } else { "" };
            format!("{}{star} {}/{}/{}", n.node, n.started, n.answered, n.failed)
        })
        .collect();
    format!(
        "client,{:>6.1},{:>9},{:>8},{:>12}, {}",
        row.time,
        row.timeouts,
        row.retries,
        row.speculative,
        nodes.join(" · ")
    )
}

/// The `client,` rows of an output (a loader's log), as [`line`] printed them.
pub fn rows(output: &str) -> Vec<ClientRow> {
    output.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<ClientRow> {
    let rest = line.strip_prefix("client,")?;
    let mut fields = rest.splitn(5, ',');
    let mut number = || fields.next().map(str::trim);
    let time = number()?.parse().ok()?;
    let timeouts = number()?.parse().ok()?;
    let retries = number()?.parse().ok()?;
    let speculative = number()?.parse().ok()?;
    let nodes = number()?
        .split(" · ")
        .filter(|n| !n.trim().is_empty())
        .map(|n| {
            let (node, counts) = n.trim().split_once(' ')?;
            let mut counts = counts.split('/').map(|c| c.parse::<u64>().ok());
            let (started, answered, failed) = (counts.next()??, counts.next()??, counts.next()??);
            let unconnected = node.ends_with('*');
            Some(NodeCounts { node: node.trim_end_matches('*').to_string(), started, answered, failed, unconnected })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(ClientRow { time, timeouts, retries, speculative, nodes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_counted_by_their_node_and_taken_by_interval() {
        let events = ClientEvents::default();
        let a: SocketAddr = "10.244.1.7:9042".parse().unwrap();
        let b: SocketAddr = "10.244.2.7:9042".parse().unwrap();
        let request = events.log_request_start();
        let first = events.log_attempt_start(request, None, a);
        events.log_attempt_error(
            first,
            &RequestAttemptError::UnableToAllocStreamId,
            &RetryDecision::RetryNextTarget(None),
        );
        let second = events.log_attempt_start(request, Some(events.log_new_speculative_fiber(request)), b);
        events.log_attempt_success(second);
        events.timed_out();
        let counts = |events: &ClientEvents| {
            let nodes = events.nodes.read().unwrap().clone();
            (0..nodes.len())
                .map(|i| {
                    (nodes[i], events.started[i].load(Ordering::Relaxed), events.answered[i].load(Ordering::Relaxed))
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(counts(&events), [(a, 1, 0), (b, 1, 1)]);
        assert_eq!(events.failed[0].load(Ordering::Relaxed), 1);
        assert_eq!((events.retries.load(Ordering::Relaxed), events.speculative.load(Ordering::Relaxed)), (1, 1));
    }

    #[test]
    fn a_client_row_reads_back_as_it_was_printed() {
        let row = ClientRow {
            time: 12.0,
            timeouts: 3,
            retries: 14,
            speculative: 2,
            nodes: vec![
                NodeCounts { node: "10.244.1.7:9042".into(), started: 40, answered: 40, failed: 0, unconnected: false },
                NodeCounts { node: "10.244.2.7:9042".into(), started: 9, answered: 0, failed: 3, unconnected: true },
            ],
        };
        let printed = line(&row);
        assert_eq!(
            printed,
            "client,  12.0,        3,      14,           2, 10.244.1.7:9042 40/40/0 · 10.244.2.7:9042* 9/0/3"
        );
        assert_eq!(rows(&format!("total, 1\n{printed}\n{HEADER}\n")), [row]);
        assert!(!eventful(&[ClientRow::default()]));
    }
}
