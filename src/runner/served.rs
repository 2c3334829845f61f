//! What a served CQL cell records the same way wherever its database runs (processes or
//! sandboxes on this machine, pods in a cluster): the server in the run's setup, and the
//! fault's outcome.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::server::{Kill, Managed};

/// The server's kind, heap and login in the run's setup.
pub fn describe_server(setup: &mut BTreeMap<String, String>, managed: &Managed) {
    setup.insert("server.kind".into(), "cassandra".into());
    setup.insert("server.heap".into(), managed.heap.clone());
    if let Some((user, _)) = &managed.login {
        setup.insert("server.login".into(), format!("PasswordAuthenticator, role {user}"));
    }
}

/// A node the fault took down: which (`node 2 (127.0.0.2)`), how (`was killed (SIGKILL)`), and
/// how far into the measured phase.
pub struct Struck {
    pub node: String,
    pub how: &'static str,
    pub at: Duration,
}

/// The fault's outcome in the run's setup and notes: the node struck and when, or that the
/// measured phase ended before the fault's time.
pub fn record_fault(
    setup: &mut BTreeMap<String, String>,
    notes: &mut Vec<String>,
    kill: &Kill,
    struck: Option<Struck>,
) {
    let Some(Struck { node, how, at }) = struck else {
        notes.push(format!(
            "fault: node {} was not killed: the measured phase ended before {} s",
            kill.node,
            kill.after.as_secs_f64()
        ));
        return;
    };
    setup.insert("fault.killed".into(), format!("{node} at {:.1} s", at.as_secs_f64()));
    notes.push(format!(
        "fault: {node} {how} {:.1} s into the measured phase, as the suite asked (kill_node = {}, kill_after = {} s)",
        at.as_secs_f64(),
        kill.node,
        kill.after.as_secs_f64()
    ));
}
