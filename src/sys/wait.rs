//! One way to wait for something: a check polled until it holds, a failure that no waiting
//! mends, Ctrl-C, or a limit; when the limit passes, the error names what was waited for, for
//! how long, and what the last check saw instead. Every poll-until-a-deadline of isobench's
//! (a daemon listening, a device appearing, a node Ready, a ring formed) is one of these.

use std::future::Future;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Interrupted, interrupted, sleep};

/// Waits on `changed` until `until` holds of what `state` guards, `deadline` passes or the user
/// interrupts; whether it held. For states that threads of isobench's own change and signal
/// (sandboxes started together), where a poll would only add its period to every turn.
pub fn wait_on<T>(
    state: &std::sync::Mutex<T>,
    changed: &std::sync::Condvar,
    deadline: Instant,
    until: impl Fn(&T) -> bool,
) -> bool {
    let mut guard = state.lock().unwrap_or_else(|p| p.into_inner());
    while !until(&guard) {
        let now = Instant::now();
        if now >= deadline || interrupted() {
            return false;
        }
        // Woken at least this often to see an interrupt, which signals no condition variable.
        let step = (deadline - now).min(Duration::from_millis(200));
        guard = changed.wait_timeout(guard, step).unwrap_or_else(|p| p.into_inner()).0;
    }
    true
}

/// What a check found.
pub enum Check<T> {
    /// What was waited for, and what it gave.
    Done(T),
    /// Not yet; what it saw instead, for the message if the wait gives up ("" for nothing to say).
    NotYet(String),
}

/// A wait for `what` ("nbdkit to listen on 127.0.0.1:10809"), at most `limit`, checking every
/// `every` (growing to `every_at_most`, each pause twice the one before, where it is longer).
#[derive(Clone, Debug)]
pub struct Wait {
    what: String,
    limit: Duration,
    every: Duration,
    every_at_most: Duration,
}

/// A wait that gave up: what it waited for, how long, and what its last check saw. Its caller
/// may add what only it can say (a cluster's last warning) by downcasting the error.
#[derive(Debug)]
pub struct TimedOut {
    pub what: String,
    pub limit: Duration,
    pub seen: String,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let limit = match self.limit.as_secs_f64() {
            s if s >= 10.0 => format!("{s:.0} s"),
            s if s >= 1.0 => format!("{s:.1} s"),
            _ => format!("{} ms", self.limit.as_millis()),
        };
        write!(f, "waited {limit} for {}: it did not happen", self.what)?;
        if !self.seen.is_empty() {
            write!(f, " (the last check saw: {})", self.seen)?;
        }
        Ok(())
    }
}

impl std::error::Error for TimedOut {}

impl Wait {
    pub fn new(what: impl Into<String>, limit: Duration) -> Wait {
        let every = Duration::from_millis(50);
        Wait { what: what.into(), limit, every, every_at_most: every }
    }

    pub fn every(mut self, every: Duration) -> Wait {
        self.every = every;
        self.every_at_most = every;
        self
    }

    /// Pauses that double from `every` up to `at_most`: a quick answer is seen at once, and a
    /// slow one is not asked for too often.
    pub fn backing_off_to(mut self, at_most: Duration) -> Wait {
        self.every_at_most = at_most.max(self.every);
        self
    }

    /// Polls `check` until it is done (its value), fails (its error, at once), Ctrl-C is pressed
    /// (`Interrupted`) or the limit passes.
    pub fn until<T>(&self, mut check: impl FnMut() -> Result<Check<T>>) -> Result<T> {
        let began = Instant::now();
        let mut pause = self.every;
        loop {
            let seen = match check()? {
                Check::Done(value) => return Ok(value),
                Check::NotYet(seen) => seen,
            };
            if began.elapsed() >= self.limit {
                return Err(self.gave_up(seen).into());
            }
            sleep(pause.min(self.limit.saturating_sub(began.elapsed())).max(Duration::from_millis(1)))?;
            pause = (pause * 2).min(self.every_at_most);
        }
    }

    /// The same on a tokio runtime: `check` is awaited, and the pauses are the runtime's.
    pub async fn until_async<T, F>(&self, mut check: impl FnMut() -> F) -> Result<T>
    where
        F: Future<Output = Result<Check<T>>>,
    {
        let began = Instant::now();
        let mut pause = self.every;
        loop {
            let seen = match check().await? {
                Check::Done(value) => return Ok(value),
                Check::NotYet(seen) => seen,
            };
            if interrupted() {
                return Err(Interrupted.into());
            }
            if began.elapsed() >= self.limit {
                return Err(self.gave_up(seen).into());
            }
            tokio::time::sleep(pause.min(self.limit.saturating_sub(began.elapsed()))).await;
            pause = (pause * 2).min(self.every_at_most);
        }
    }

    fn gave_up(&self, seen: String) -> TimedOut {
        TimedOut { what: self.what.clone(), limit: self.limit, seen }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_returns_what_the_check_gives_fails_at_once_or_names_what_it_waited_for() {
        let mut tries = 0;
        let got = Wait::new("the third try", Duration::from_secs(5))
            .every(Duration::from_millis(1))
            .until(|| {
                tries += 1;
                Ok(if tries == 3 { Check::Done(tries) } else { Check::NotYet(String::new()) })
            })
            .unwrap();
        assert_eq!(got, 3);
        let began = Instant::now();
        let e = Wait::new("a failure", Duration::from_secs(5))
            .until(|| -> Result<Check<()>> { anyhow::bail!("the daemon exited") })
            .unwrap_err();
        assert_eq!(e.to_string(), "the daemon exited");
        assert!(began.elapsed() < Duration::from_secs(1), "a failure ends the wait at once");
        let e = Wait::new("a node to be Ready", Duration::from_millis(120))
            .every(Duration::from_millis(20))
            .until(|| Ok(Check::<()>::NotYet("NotReady".into())))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "waited 120 ms for a node to be Ready: it did not happen (the last check saw: NotReady)"
        );
        assert_eq!(e.downcast_ref::<TimedOut>().map(|t| t.seen.as_str()), Some("NotReady"), "its caller can add to it");
    }

    #[test]
    fn an_async_wait_is_the_same() {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let tries = std::cell::Cell::new(0);
        let got = runtime
            .block_on(Wait::new("the second try", Duration::from_secs(5)).every(Duration::from_millis(1)).until_async(
                || {
                    tries.set(tries.get() + 1);
                    let n = tries.get();
                    async move { Ok(if n == 2 { Check::Done(n) } else { Check::NotYet(String::new()) }) }
                },
            ))
            .unwrap();
        assert_eq!(got, 2);
        let e = runtime
            .block_on(
                Wait::new("a claim to bind", Duration::from_millis(30))
                    .until_async(|| async { Ok(Check::<()>::NotYet(String::new())) }),
            )
            .unwrap_err();
        assert!(e.to_string().starts_with("waited 30 ms for a claim to bind"), "{e}");
    }
}
