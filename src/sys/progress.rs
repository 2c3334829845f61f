//! Lines a run says while it goes (a capacity search's steps), wherever it runs: the runner
//! prints them above its progress bar; an agent in a sandbox prefixes them on stderr, and the
//! environment that carries the agent's stderr hands them back to the runner.

use std::sync::{Mutex, OnceLock};

/// How an agent frames a progress line on its stderr.
pub const PROGRESS_PREFIX: &str = "ISOBENCH-PROGRESS ";

type Sink = Box<dyn Fn(&str) + Send + Sync>;

static SINK: OnceLock<Mutex<Option<Sink>>> = OnceLock::new();

/// Where `say` sends lines from now on (the runner's progress bar).
pub fn set_sink(sink: impl Fn(&str) + Send + Sync + 'static) {
    *SINK.get_or_init(|| Mutex::new(None)).lock().expect("not poisoned") = Some(Box::new(sink));
}

/// Says a progress line: to the sink when one is set, else framed on stderr for whoever
/// carries this process's stderr (an agent's environment).
pub fn say(line: &str) {
    let sink = SINK.get().map(|s| s.lock().expect("not poisoned"));
    match sink.as_ref().and_then(|s| s.as_ref()) {
        Some(sink) => sink(line),
        None => eprintln!("{PROGRESS_PREFIX}{line}"),
    }
}

/// Passes on a line an agent printed on stderr when it is a progress line.
pub fn relay(line: &str) {
    if let Some(at) = line.find(PROGRESS_PREFIX) {
        say(&line[at + PROGRESS_PREFIX.len()..]);
    }
}
