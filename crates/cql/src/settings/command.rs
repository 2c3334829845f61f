//! The command and its parameters (`SettingsCommand*.java`): what to run, how many times or how
//! long, at which consistency, and a `user` profile's operations.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::ArgError;
use super::tokens::{Params, dist, number};
use crate::dist::{DistSpec, parse_count};
use crate::profile::{Profile, UserOp};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Write,
    Read,
    CounterWrite,
    CounterRead,
    /// The operation of a `user` profile at this index of `ops(…)`.
    User(usize),
}

impl Op {
    /// cassandra-stress's name for the operation in its output.
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Read => "READ",
            Op::CounterWrite => "COUNTER_WRITE",
            Op::CounterRead => "COUNTER_READ",
            Op::User(_) => "USER",
        }
    }

    pub fn is_write(self) -> bool {
        matches!(self, Op::Write | Op::CounterWrite)
    }

    /// Sent twice, the same as once: all but an increment (a profile's operation says for itself).
    pub fn idempotent(self) -> bool {
        !matches!(self, Op::CounterWrite)
    }

    fn parse(word: &str) -> Option<Op> {
        match word.to_ascii_lowercase().as_str() {
            "write" | "insert" => Some(Op::Write),
            "read" => Some(Op::Read),
            "counter_write" | "counter_add" => Some(Op::CounterWrite),
            "counter_read" | "counter_get" => Some(Op::CounterRead),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stop {
    /// `n=`: this many operations.
    Count(u64),
    /// `duration=`, and the unit it was given in (cassandra-stress prints it back).
    Duration(Duration, &'static str),
    /// `err<` (with `n>`, `n<`): until the standard error of the mean row rate is below this.
    Uncertainty { target: f64, min: u32, max: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Truncate {
    Never,
    Once,
    Always,
}

#[derive(Clone, Debug)]
pub struct Command {
    /// The command word as given (`write`, `mixed` …).
    pub word: String,
    /// The operations and their ratios (one for all but `mixed`).
    pub ops: Vec<(Op, f64)>,
    pub stop: Stop,
    pub consistency: String,
    pub serial_consistency: String,
    pub no_warmup: bool,
    pub truncate: Truncate,
    pub key_size: usize,
    /// `mixed`: how many operations of one kind run in a row.
    pub clustering: DistSpec,
    /// `counter_write`: the increment.
    pub add: DistSpec,
    /// `user`: the profiles of `profile=`, and the operations of `ops(…)` (what `Op::User(i)`
    /// stands for).
    pub profiles: Vec<Arc<Profile>>,
    pub user_ops: Vec<UserOp>,
}

impl Command {
    pub fn count(&self) -> Option<u64> {
        match self.stop {
            Stop::Count(n) => Some(n),
            _ => None,
        }
    }

    pub fn is_mixed(&self) -> bool {
        self.word == "mixed" || (self.word == "user" && self.ops.len() > 1)
    }

    /// The name an operation goes by in the output: cassandra-stress's, or a profile's.
    pub fn op_name(&self, op: Op) -> &'static str {
        match op {
            Op::User(i) => self.user_ops[i].label,
            other => other.name(),
        }
    }

    /// The name an operation mix goes by ("WRITE", or "MIXED" for `mixed`).
    pub fn name(&self) -> String {
        if self.is_mixed() { "MIXED".into() } else { self.op_name(self.ops[0].0).into() }
    }

    pub fn updates(&self) -> bool {
        self.ops.iter().any(|(op, _)| match op {
            Op::User(i) => self.user_ops[*i].name == "insert",
            other => other.is_write(),
        })
    }
}

pub(super) fn parse_command(
    word: &str,
    mut p: Params,
    profiles: &BTreeMap<String, String>,
) -> Result<Command, ArgError> {
    let (ops, mixed) = match word {
        "mixed" | "user" => (Vec::new(), true),
        w => match Op::parse(w) {
            Some(op) => (vec![(op, 1.0)], false),
            None => {
                return Err(ArgError::Invalid(format!(
                    "\"{w}\" is not a command; use write, read, mixed, counter_write, counter_read or help"
                )));
            }
        },
    };
    let stop = parse_stop(&mut p)?;
    let consistency = p.take("cl=").map(|c| c.to_ascii_uppercase()).unwrap_or_else(|| "LOCAL_ONE".into());
    if !crate::consistency::CONSISTENCY.contains(&consistency.as_str()) {
        return Err(p.invalid(&format!("cl={consistency}: use one of {}", crate::consistency::CONSISTENCY.join("|"))));
    }
    let serial_consistency = p.take("serial-cl=").map(|c| c.to_ascii_uppercase()).unwrap_or_else(|| "SERIAL".into());
    let no_warmup = p.flag("no-warmup");
    let truncate = match p.take("truncate=").as_deref() {
        None | Some("never") => Truncate::Never,
        Some("once") => Truncate::Once,
        Some("always") => Truncate::Always,
        Some(other) => return Err(p.invalid(&format!("truncate={other}: use never, once or always"))),
    };
    let key_size = match p.take("keysize=") {
        Some(k) => number(&p, "keysize=", &k)?,
        None => 10,
    };
    let add = match p.take("add=") {
        Some(a) => dist(&p, &a)?,
        None => DistSpec::Fixed(1),
    };
    let (mut loaded, mut user_ops) = (Vec::new(), Vec::new());
    let (ops, clustering) = if word == "user" {
        let ops;
        (loaded, ops, user_ops) = user_ops_of(&mut p, profiles)?;
        (ops, clustering_of(&mut p)?)
    } else if mixed {
        (mixed_ops(&mut p)?, clustering_of(&mut p)?)
    } else {
        (ops, DistSpec::Fixed(1))
    };
    p.finish(
        "n=, duration=, err<, n>, n<, cl=, serial-cl=, no-warmup, truncate=, keysize=, add=, ratio(…), clustering=, profile=, ops(…)",
    )?;
    Ok(Command {
        word: word.into(),
        ops,
        stop,
        consistency,
        serial_consistency,
        no_warmup,
        truncate,
        key_size,
        clustering,
        add,
        profiles: loaded,
        user_ops,
    })
}

/// When the measured phase stops: after `n=` operations, after `duration=`, or once the
/// uncertainty falls below `err<` (within `n>` and `n<` measurements).
fn parse_stop(p: &mut Params) -> Result<Stop, ArgError> {
    let count = p.take("n=");
    let duration = p.take("duration=");
    let err = p.take("err<");
    let (n_min, n_max) = (p.take("n>"), p.take("n<"));
    Ok(match (count, duration, err) {
        (Some(n), None, None) => match parse_count(&n).map_err(|e| p.invalid(&e))? {
            count if count < 0 => {
                return Err(
                    p.invalid(&format!("n={n}: a count of operations is 0 or more (n=0 makes the schema only)"))
                );
            }
            count => Stop::Count(count as u64),
        },
        (None, Some(d), None) => {
            let wrong = || p.invalid(&format!("duration={d}: use a number of s, m or h, e.g. duration=30s"));
            let (per, unit) = match d.chars().last() {
                Some('s') => (1, "seconds"),
                Some('m') => (60, "minutes"),
                Some('h') => (3600, "hours"),
                _ => return Err(wrong()),
            };
            let n: u64 = number(p, "duration=", &d[..d.len() - 1])?;
            Stop::Duration(Duration::from_secs(n.checked_mul(per).ok_or_else(wrong)?), unit)
        }
        (None, None, target) => Stop::Uncertainty {
            target: match target {
                Some(t) => number(p, "err<", &t)?,
                None => 0.02,
            },
            min: n_min.map(|v| number(p, "n>", &v)).transpose()?.unwrap_or(30),
            max: n_max.map(|v| number(p, "n<", &v)).transpose()?.unwrap_or(200),
        },
        _ => return Err(p.invalid("give one of n=, duration= or err<")),
    })
}

/// `mixed ratio(read=1,write=3)`: each operation with its weight (read and write alike by
/// default), those of weight 0 left out.
fn mixed_ops(p: &mut Params) -> Result<Vec<(Op, f64)>, ArgError> {
    let ratio = p.map("ratio")?.unwrap_or_else(|| vec![("read".into(), "1".into()), ("write".into(), "1".into())]);
    let mut ops = Vec::new();
    for (name, weight) in ratio {
        let op = Op::parse(&name)
            .ok_or_else(|| p.invalid(&format!("ratio({name}=…): mix read, write, counter_read, counter_write")))?;
        let w: f64 = number(p, &format!("ratio({name}="), &weight)?;
        if w > 0.0 {
            ops.push((op, w));
        }
    }
    if ops.is_empty() {
        return Err(p.invalid("Must specify at least one command with a non-zero ratio"));
    }
    Ok(ops)
}

/// The clustering distribution of mixed and user commands (`clustering=`).
fn clustering_of(p: &mut Params) -> Result<DistSpec, ArgError> {
    match p.take("clustering=") {
        Some(c) => dist(p, &c),
        None => Ok(DistSpec::parse("GAUSSIAN(1..10)").expect("valid")),
    }
}

/// `user profile=FILE[,FILE…] ops(name=weight,…)`: the profiles, the operations and what each
/// runs. Among several profiles an operation is `specname.name` (cassandra-stress's); an
/// unqualified one is the first profile's.
#[allow(clippy::type_complexity)]
pub(super) fn user_ops_of(
    p: &mut Params,
    texts: &BTreeMap<String, String>,
) -> Result<(Vec<Arc<Profile>>, Vec<(Op, f64)>, Vec<UserOp>), ArgError> {
    const NEEDS_PROFILE: &str = "user needs profile=FILE.yaml, e.g. user profile=app.yaml ops(insert=1)";
    let given = p.take("profile=").ok_or_else(|| p.invalid(NEEDS_PROFILE))?;
    let mut profiles: Vec<Arc<Profile>> = Vec::new();
    for file in given.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let path = std::path::Path::new(file);
        let profile = match texts.get(file) {
            Some(text) => Profile::parse(path, text),
            None => Profile::load(path),
        }
        .map_err(ArgError::Invalid)?;
        if let Some(other) = profiles.iter().find(|o| o.specname == profile.specname) {
            return Err(p.invalid(&format!(
                "profile={given}: {} and {} are both {}; give each profile its own specname:",
                other.file.display(),
                profile.file.display(),
                profile.specname
            )));
        }
        profiles.push(Arc::new(profile));
    }
    if profiles.is_empty() {
        return Err(p.invalid(NEEDS_PROFILE));
    }
    let known = |profile: &Profile| {
        let prefix = if profiles.len() > 1 { format!("{}.", profile.specname) } else { String::new() };
        profile.op_names().iter().map(|n| format!("{prefix}{n}")).collect::<Vec<_>>().join(", ")
    };
    let ratio = p.map("ops")?.ok_or_else(|| {
        let all: Vec<String> = profiles.iter().map(|f| known(f)).collect();
        p.invalid(&format!("user needs ops(NAME=WEIGHT,…); {given} has the operations {}", all.join(", ")))
    })?;
    let (mut ops, mut user_ops) = (Vec::new(), Vec::new());
    for (label, weight) in ratio {
        let label = label.to_ascii_lowercase();
        let (index, name) = match label.rsplit_once('.') {
            Some((spec, name)) => match profiles.iter().position(|f| f.specname == spec) {
                Some(i) => (i, name),
                None => {
                    let specs: Vec<&str> = profiles.iter().map(|f| f.specname.as_str()).collect();
                    return Err(p.invalid(&format!(
                        "ops({label}=…): no profile is called {spec}; the profiles are {} (specname:, or keyspace.table)",
                        specs.join(", ")
                    )));
                }
            },
            None => (0, label.as_str()),
        };
        let profile = &profiles[index];
        if !profile.op_names().contains(&name) {
            return Err(ArgError::Invalid(format!(
                "{}: ops({label}=…): the profile has no query {name}; its operations are {}",
                profile.file.display(),
                known(profile)
            )));
        }
        let w: f64 = number(p, &format!("ops({label}="), &weight)?;
        if w > 0.0 {
            // Operation names live for the whole run: the measurements are keyed by them.
            let name: &'static str = Box::leak(name.to_string().into_boxed_str());
            let label: &'static str = Box::leak(label.into_boxed_str());
            user_ops.push(UserOp { label, profile: index, name });
            ops.push((Op::User(user_ops.len() - 1), w));
        }
    }
    if ops.is_empty() {
        return Err(p.invalid("Must specify at least one command with a non-zero ratio"));
    }
    Ok((profiles, ops, user_ops))
}
