//! cassandra-stress's command line: the same tokenizer (arguments joined, spaces around `,=()`
//! dropped, `-option` groups), the same commands, options and defaults, and the same refusal of
//! anything unknown (printed, exit 1). Deprecated words are accepted with a warning.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use std::sync::Arc;

use super::dist::{DistSpec, parse_count};
use super::profile::{BatchKind, Profile, Ratio};
use super::tls::Transport;

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

/// An operation of `ops(…)`: its name as given and printed (`insert`, or `spec.insert` among
/// several profiles), and the profile and operation it runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UserOp {
    pub label: &'static str,
    pub profile: usize,
    pub name: &'static str,
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

#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// None: a series of runs from `min_threads` up to `max_threads` threads.
    pub threads: Option<u32>,
    /// With `threads` None: stop the series once throughput stops improving.
    pub auto: bool,
    pub min_threads: u32,
    pub max_threads: u32,
    /// `throttle=R/s`: at most R operations per second, latency measured as service time.
    pub throttle: Option<u64>,
    /// `fixed=R/s`: R operations per second on a schedule; latency from each intended start.
    pub fixed: Option<u64>,
}

impl Rate {
    pub fn ops_per_second(&self) -> Option<u64> {
        self.fixed.or(self.throttle)
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Population {
    Sequence { start: i64, end: i64, wrap: bool },
    Distribution(DistSpec),
}

#[derive(Clone, Debug)]
pub struct Schema {
    pub keyspace: String,
    pub replication_strategy: String,
    pub replication_options: Vec<(String, String)>,
    pub compaction_strategy: Option<String>,
    pub compaction_options: Vec<(String, String)>,
    pub compression: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Columns {
    pub names: Vec<String>,
    pub size: DistSpec,
    pub slice: bool,
    pub timestamp: Option<i64>,
}

#[derive(Clone, Debug)]
pub struct Mode {
    pub user: Option<String>,
    pub password: Option<String>,
    pub compression: Option<String>,
    pub connections_per_host: u32,
    pub max_pending: Option<u32>,
    pub request_timeout: Duration,
}

#[derive(Clone, Debug)]
pub struct Log {
    pub interval: Duration,
    pub hdrfile: Option<PathBuf>,
    pub file: Option<PathBuf>,
    pub no_settings: bool,
    pub no_summary: bool,
    pub level: String,
}

#[derive(Clone, Debug)]
pub struct Errors {
    pub ignore: bool,
    pub retries: u32,
    pub skip_read_validation: bool,
}

#[derive(Clone, Debug)]
pub struct Graph {
    pub file: PathBuf,
    pub revision: String,
    pub title: Option<String>,
    pub op: Option<String>,
}

#[derive(Clone, Debug)]
pub struct Settings {
    pub command: Command,
    pub rate: Rate,
    pub population: Population,
    pub schema: Schema,
    pub columns: Columns,
    pub mode: Mode,
    pub nodes: Vec<String>,
    pub native_port: u16,
    pub log: Log,
    pub errors: Errors,
    pub graph: Option<Graph>,
    /// `-validate`: every query of a `user` profile checks the rows it reads.
    pub validate: bool,
    /// `-transport`: TLS, when given.
    pub transport: Option<Transport>,
    /// Things accepted but not used, said once at the start.
    pub warnings: Vec<String>,
}

/// Why a command line was refused.
#[derive(Debug, PartialEq)]
pub enum ArgError {
    /// Option groups nobody took: printed one per line, as cassandra-stress does.
    Ignored(Vec<String>),
    /// Anything else, with the reason.
    Invalid(String),
}

/// Messages quote the tokens they refuse; a password among them is shown as REDACTED.
impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Ignored(groups) => {
                writeln!(f, "Error processing command line arguments. The following were ignored:")?;
                for g in groups {
                    writeln!(f, "{}", super::redact_passwords(g))?;
                }
                Ok(())
            }
            ArgError::Invalid(why) => writeln!(f, "{}", super::redact_passwords(why)),
        }
    }
}

/// cassandra-stress's tokenizer: the words joined, spaces before `,=()` and after `,=(`
/// removed, split on spaces again.
pub fn tokens(args: &[String]) -> Vec<String> {
    let joined = args.join(" ");
    let mut out = String::with_capacity(joined.len());
    for c in joined.chars() {
        if ",=()".contains(c) {
            while out.ends_with(char::is_whitespace) {
                out.pop();
            }
        }
        if c.is_whitespace() && out.ends_with([',', '=', '(']) {
            continue;
        }
        out.push(c);
    }
    out.split_whitespace().map(str::to_string).collect()
}

/// Groups: the command and its parameters, then each `-option` and its parameters.
fn groups(tokens: &[String]) -> Result<Vec<(String, Vec<String>)>, ArgError> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (i, t) in tokens.iter().enumerate() {
        if i == 0 || t.starts_with('-') {
            let key = t.to_ascii_lowercase();
            if out.iter().any(|(k, _)| *k == key) {
                return Err(ArgError::Invalid(format!(
                    "{key} is defined multiple times. Each option/command can be specified at most once."
                )));
            }
            out.push((key, Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(t.clone());
        }
    }
    Ok(out)
}

/// The parameters of one group, taken one by one; whatever is left over is an error.
struct Params {
    group: String,
    items: Vec<String>,
}

impl Params {
    /// The value of `prefix…` (e.g. `n=`), removed from the list.
    fn take(&mut self, prefix: &str) -> Option<String> {
        let pos = self.items.iter().position(|p| p.to_ascii_lowercase().starts_with(prefix))?;
        Some(self.items.remove(pos)[prefix.len()..].to_string())
    }

    fn flag(&mut self, name: &str) -> bool {
        match self.items.iter().position(|p| p.eq_ignore_ascii_case(name)) {
            Some(pos) => {
                self.items.remove(pos);
                true
            }
            None => false,
        }
    }

    /// `name(k=v,k=v)` as pairs.
    fn map(&mut self, name: &str) -> Result<Option<Vec<(String, String)>>, ArgError> {
        let Some(inner) = self.take(&format!("{name}(")) else { return Ok(None) };
        let inner = inner.strip_suffix(')').ok_or_else(|| self.invalid(&format!("{name}( is not closed")))?;
        inner
            .split(',')
            .filter(|p| !p.is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .ok_or_else(|| self.invalid(&format!("{name}(…) takes key=value pairs, not \"{p}\"")))
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn invalid(&self, why: &str) -> ArgError {
        ArgError::Invalid(format!("Invalid {} options provided: {why}", self.group))
    }

    fn finish(self, allowed: &str) -> Result<(), ArgError> {
        if let Some(p) = self.items.first() {
            return Err(
                self.invalid(&format!("\"{p}\" is not an option of {}; its options are: {allowed}", self.group))
            );
        }
        Ok(())
    }
}

fn dist(p: &Params, text: &str) -> Result<DistSpec, ArgError> {
    DistSpec::parse(text).map_err(|e| p.invalid(&e))
}

fn number<T: std::str::FromStr>(p: &Params, key: &str, text: &str) -> Result<T, ArgError> {
    text.parse().map_err(|_| p.invalid(&format!("{key}{text} is not a number")))
}

/// A rate like "1000/s".
fn per_second(p: &Params, key: &str, text: &str) -> Result<u64, ArgError> {
    let n = text.strip_suffix("/s").ok_or_else(|| p.invalid(&format!("write {key}R/s, e.g. {key}1000/s")))?;
    number(p, key, n)
}

pub(super) const CONSISTENCY: &[&str] = &[
    "ONE",
    "QUORUM",
    "LOCAL_QUORUM",
    "EACH_QUORUM",
    "ALL",
    "ANY",
    "TWO",
    "THREE",
    "LOCAL_ONE",
    "SERIAL",
    "LOCAL_SERIAL",
];

fn parse_command(word: &str, mut p: Params, profiles: &BTreeMap<String, String>) -> Result<Command, ArgError> {
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
    let count = p.take("n=");
    let duration = p.take("duration=");
    let err = p.take("err<");
    let (n_min, n_max) = (p.take("n>"), p.take("n<"));
    let stop = match (count, duration, err) {
        (Some(n), None, None) => Stop::Count(parse_count(&n).map_err(|e| p.invalid(&e))?.max(0) as u64),
        (None, Some(d), None) => {
            let wrong = || p.invalid(&format!("duration={d}: use a number of s, m or h, e.g. duration=30s"));
            let (per, unit) = match d.chars().last() {
                Some('s') => (1, "seconds"),
                Some('m') => (60, "minutes"),
                Some('h') => (3600, "hours"),
                _ => return Err(wrong()),
            };
            let n: u64 = number(&p, "duration=", &d[..d.len() - 1])?;
            Stop::Duration(Duration::from_secs(n.checked_mul(per).ok_or_else(wrong)?), unit)
        }
        (None, None, target) => Stop::Uncertainty {
            target: match target {
                Some(t) => number(&p, "err<", &t)?,
                None => 0.02,
            },
            min: n_min.map(|v| number(&p, "n>", &v)).transpose()?.unwrap_or(30),
            max: n_max.map(|v| number(&p, "n<", &v)).transpose()?.unwrap_or(200),
        },
        _ => return Err(p.invalid("give one of n=, duration= or err<")),
    };
    let consistency = p.take("cl=").map(|c| c.to_ascii_uppercase()).unwrap_or_else(|| "LOCAL_ONE".into());
    if !CONSISTENCY.contains(&consistency.as_str()) {
        return Err(p.invalid(&format!("cl={consistency}: use one of {}", CONSISTENCY.join("|"))));
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
        let clustering = match p.take("clustering=") {
            Some(c) => dist(&p, &c)?,
            None => DistSpec::parse("GAUSSIAN(1..10)").expect("valid"),
        };
        (ops, clustering)
    } else if mixed {
        let ratio = p.map("ratio")?.unwrap_or_else(|| vec![("read".into(), "1".into()), ("write".into(), "1".into())]);
        let mut ops = Vec::new();
        for (name, weight) in ratio {
            let op = Op::parse(&name)
                .ok_or_else(|| p.invalid(&format!("ratio({name}=…): mix read, write, counter_read, counter_write")))?;
            let w: f64 = number(&p, &format!("ratio({name}="), &weight)?;
            if w > 0.0 {
                ops.push((op, w));
            }
        }
        if ops.is_empty() {
            return Err(p.invalid("Must specify at least one command with a non-zero ratio"));
        }
        let clustering = match p.take("clustering=") {
            Some(c) => dist(&p, &c)?,
            None => DistSpec::parse("GAUSSIAN(1..10)").expect("valid"),
        };
        (ops, clustering)
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

/// `user profile=FILE[,FILE…] ops(name=weight,…)`: the profiles, the operations and what each
/// runs. Among several profiles an operation is `specname.name` (cassandra-stress's); an
/// unqualified one is the first profile's.
#[allow(clippy::type_complexity)]
fn user_ops_of(
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

/// `-insert` of a `user` command: what the profiles' `insert:` sections say (`partitions=`,
/// `batchtype=`, `select-ratio=`), overridden for every profile of the run.
fn parse_insert(command: &mut Command, params: Option<Params>, warnings: &mut Vec<String>) -> Result<(), ArgError> {
    let Some(mut p) = params else { return Ok(()) };
    let partitions = p.take("partitions=").map(|d| dist(&p, &d)).transpose()?;
    let batch = p.take("batchtype=").map(|b| BatchKind::parse(&b).map_err(|why| p.invalid(&why))).transpose()?;
    let select = p.take("select-ratio=").map(|r| Ratio::parse(&r).map_err(|why| p.invalid(&why))).transpose()?;
    for key in ["visits=", "revisit=", "row-population-ratio="] {
        if let Some(v) = p.take(key) {
            warnings.push(format!(
                "-insert {key}{v} is accepted and ignored: isobench writes the rows an insert selects in one visit, every column"
            ));
        }
    }
    p.finish("partitions=, batchtype=, select-ratio=, visits=, revisit=, row-population-ratio=")?;
    for profile in &mut command.profiles {
        let insert = &mut Arc::make_mut(profile).insert;
        if let Some(d) = &partitions {
            insert.partitions = d.clone();
        }
        if let Some(b) = batch {
            insert.batch = b;
        }
        if let Some(r) = &select {
            insert.select = r.clone();
        }
    }
    Ok(())
}

fn parse_rate(command: &Command, params: Option<Params>) -> Result<Rate, ArgError> {
    let auto = Rate { threads: None, auto: false, min_threads: 4, max_threads: 1000, throttle: None, fixed: None };
    let Some(mut p) = params else {
        // cassandra-stress: 200 threads for a counted write, auto otherwise.
        return Ok(if command.updates() && !command.is_mixed() && command.count().is_some() {
            Rate { threads: Some(200), ..auto }
        } else {
            auto
        });
    };
    let threads = p.take("threads=");
    let throttle = p.take("throttle=").map(|t| per_second(&p, "throttle=", &t)).transpose()?.filter(|r| *r > 0);
    let fixed = p.take("fixed=").map(|t| per_second(&p, "fixed=", &t)).transpose()?.filter(|r| *r > 0);
    let min_threads = p.take("threads>=").map(|t| number(&p, "threads>=", &t)).transpose()?.unwrap_or(4);
    let max_threads = p.take("threads<=").map(|t| number(&p, "threads<=", &t)).transpose()?.unwrap_or(1000);
    let is_auto = p.flag("auto");
    p.finish("threads=, throttle=R/s, fixed=R/s, auto, threads>=, threads<=")?;
    if throttle.is_some() && fixed.is_some() {
        return Err(ArgError::Invalid("can't have both fixed and throttle set, choose one.".into()));
    }
    let threads = match threads {
        Some(t) if !is_auto => {
            Some(number::<u32>(&Params { group: "-rate".into(), items: vec![] }, "threads=", &t)?.max(1))
        }
        _ => None,
    };
    if threads.is_none() && (throttle.is_some() || fixed.is_some()) {
        return Err(ArgError::Invalid(
            "Invalid -rate options provided: throttle= and fixed= need threads=, e.g. -rate threads=64 fixed=1000/s"
                .into(),
        ));
    }
    Ok(Rate { threads, auto: is_auto, min_threads, max_threads, throttle, fixed })
}

fn parse_population(command: &Command, params: Option<Params>) -> Result<(Population, Vec<String>), ArgError> {
    let limit = command.count().filter(|n| *n > 0).unwrap_or(1_000_000) as i64;
    let mut warnings = Vec::new();
    let Some(mut p) = params else {
        return Ok((
            if command.updates() && !command.is_mixed() {
                Population::Sequence { start: 1, end: limit, wrap: true }
            } else {
                Population::Distribution(DistSpec::parse(&format!("gaussian(1..{limit})")).expect("valid"))
            },
            warnings,
        ));
    };
    let seq = p.take("seq=");
    let d = p.take("dist=");
    let no_wrap = p.flag("no-wrap");
    if let Some(lookback) = p.take("read-lookback=") {
        warnings.push(format!("-pop read-lookback={lookback} is accepted and ignored: reads draw from the population"));
    }
    if let Some(contents) = p.take("contents=") {
        warnings.push(format!("-pop contents={contents} is deprecated and ignored"));
    }
    p.finish("seq=A..B, dist=DIST, no-wrap, read-lookback=")?;
    let population = match (seq, d) {
        (Some(s), None) => {
            let (a, b) = s
                .split_once("..")
                .ok_or_else(|| ArgError::Invalid(format!("Invalid -pop options provided: seq={s}: write seq=A..B")))?;
            let start = parse_count(a).map_err(ArgError::Invalid)?;
            let end = parse_count(b.trim_start_matches('.')).map_err(ArgError::Invalid)?;
            if start > end {
                return Err(ArgError::Invalid(format!("Invalid -pop options provided: seq={s}: start after end")));
            }
            Population::Sequence { start, end, wrap: !no_wrap }
        }
        (None, Some(d)) => Population::Distribution(
            DistSpec::parse(&d).map_err(|e| ArgError::Invalid(format!("Invalid -pop options provided: {e}")))?,
        ),
        (None, None) => Population::Sequence { start: 1, end: limit, wrap: !no_wrap },
        (Some(_), Some(_)) => {
            return Err(ArgError::Invalid("Invalid -pop options provided: give seq= or dist=, not both".into()));
        }
    };
    Ok((population, warnings))
}

fn parse_schema(params: Option<Params>) -> Result<Schema, ArgError> {
    let mut schema = Schema {
        keyspace: "keyspace1".into(),
        replication_strategy: "org.apache.cassandra.locator.SimpleStrategy".into(),
        replication_options: Vec::new(),
        compaction_strategy: None,
        compaction_options: Vec::new(),
        compression: None,
    };
    let Some(mut p) = params else { return Ok(schema) };
    if let Some(k) = p.take("keyspace=") {
        schema.keyspace = k;
    }
    if let Some(replication) = p.map("replication")? {
        for (k, v) in replication {
            match k.as_str() {
                "strategy" => schema.replication_strategy = v,
                "factor" => schema.replication_options.push(("replication_factor".into(), v)),
                _ => schema.replication_options.push((k, v)),
            }
        }
    }
    if let Some(compaction) = p.map("compaction")? {
        for (k, v) in compaction {
            if k == "strategy" {
                schema.compaction_strategy = Some(v);
            } else {
                schema.compaction_options.push((k, v));
            }
        }
    }
    schema.compression = p.take("compression=");
    p.finish("keyspace=, replication(strategy=,factor=,…), compaction(strategy=,…), compression=")?;
    Ok(schema)
}

fn parse_columns(params: Option<Params>, warnings: &mut Vec<String>) -> Result<Columns, ArgError> {
    let defaults = |n: usize| (0..n).map(|i| format!("C{i}")).collect::<Vec<_>>();
    let mut columns = Columns { names: defaults(5), size: DistSpec::Fixed(34), slice: false, timestamp: None };
    let Some(mut p) = params else { return Ok(columns) };
    if let Some(n) = p.take("n=") {
        match dist(&p, &n)? {
            DistSpec::Fixed(k) if k > 0 => columns.names = defaults(k as usize),
            _ => return Err(p.invalid(&format!("n={n}: isobench writes a fixed number of columns; use n=FIXED(k)"))),
        }
    }
    if let Some(size) = p.take("size=") {
        columns.size = dist(&p, &size)?;
    }
    if let Some(names) = p.take("names=") {
        columns.names = names.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect();
    }
    columns.slice = p.flag("slice");
    if let Some(t) = p.take("timestamp=") {
        columns.timestamp = Some(number(&p, "timestamp=", &t)?);
    }
    for deprecated in ["comparator=", "super="] {
        if let Some(v) = p.take(deprecated) {
            warnings.push(format!("-col {deprecated}{v} is accepted and ignored"));
        }
    }
    p.finish("n=FIXED(k), size=DIST, names=, slice, timestamp=")?;
    Ok(columns)
}

fn parse_mode(params: Option<Params>, warnings: &mut Vec<String>) -> Result<Mode, ArgError> {
    let mut mode = Mode {
        user: None,
        password: None,
        compression: None,
        // cassandra-stress's Java driver opens 8; one Rust connection carries thousands of
        // requests in flight, and each extra one costs system calls per operation.
        connections_per_host: 1,
        max_pending: None,
        request_timeout: Duration::from_secs(12),
    };
    let Some(mut p) = params else { return Ok(mode) };
    for word in ["native", "cql3", "prepared", "simplenative", "4x", "javadriver"] {
        if p.flag(word) {
            warnings.push(format!(
                "-mode {word} is accepted and ignored: isobench uses the CQL native protocol with prepared statements"
            ));
        }
    }
    if p.flag("unprepared") {
        warnings.push("-mode unprepared is not supported; prepared statements are used".into());
    }
    if p.flag("thrift") {
        return Err(ArgError::Invalid(
            "-mode thrift: Thrift was removed from Cassandra 4.0; use the native protocol".into(),
        ));
    }
    mode.user = p.take("user=");
    // A loader started by `-loaders` gets its password in the environment, not on its command line.
    mode.password = p
        .take("password=")
        .or_else(|| mode.user.as_ref().and_then(|_| std::env::var(super::loaders::PASSWORD_VAR).ok()));
    mode.compression = p.take("compression=").filter(|c| c != "none");
    if let Some(c) = mode.compression.as_deref()
        && c != "lz4"
        && c != "snappy"
    {
        return Err(p.invalid(&format!("compression={c}: use none, lz4 or snappy")));
    }
    if let Some(c) = p.take("connectionsperhost=") {
        mode.connections_per_host = number::<u32>(&p, "connectionsPerHost=", &c)?.max(1);
    }
    if let Some(m) = p.take("maxpending=") {
        mode.max_pending = Some(number(&p, "maxPending=", &m)?);
    }
    if let Some(t) = p.take("requesttimeout=") {
        mode.request_timeout = Duration::from_millis(number(&p, "requestTimeout=", &t)?);
    }
    for ignored in ["protocolversion=", "port=", "auth-provider="] {
        if let Some(v) = p.take(ignored) {
            warnings.push(format!("-mode {ignored}{v} is accepted and ignored"));
        }
    }
    p.finish(
        "native, cql3, prepared, user=, password=, compression=, connectionsPerHost=, maxPending=, requestTimeout=",
    )?;
    Ok(mode)
}

/// `-transport truststore= truststore-password= keystore= keystore-password= ssl-protocol=
/// ssl-alg= store-type= ssl-ciphers=`. A loader started by `-loaders` gets the passwords in its
/// environment, not on its command line.
fn parse_transport(params: Option<Params>) -> Result<Option<Transport>, ArgError> {
    let Some(mut p) = params else { return Ok(None) };
    let from_env = |var: &str| std::env::var(var).ok();
    let transport = Transport {
        truststore: p.take("truststore=").map(PathBuf::from),
        truststore_password: p
            .take("truststore-password=")
            .or_else(|| from_env(super::loaders::TRUSTSTORE_PASSWORD_VAR)),
        keystore: p.take("keystore=").map(PathBuf::from),
        keystore_password: p.take("keystore-password=").or_else(|| from_env(super::loaders::KEYSTORE_PASSWORD_VAR)),
        protocol: p.take("ssl-protocol=").unwrap_or_else(|| "TLS".into()),
        ciphers: p
            .take("ssl-ciphers=")
            .map(|c| c.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
            .unwrap_or_default(),
        store_type: p.take("store-type=").unwrap_or_else(|| "JKS".into()),
    };
    // The key manager's algorithm (SunX509) has no counterpart in rustls.
    p.take("ssl-alg=");
    // cassandra-stress 3.x's Thrift transport factory.
    p.take("factory=");
    if transport.truststore.is_none() {
        return Err(p.invalid("-transport needs truststore=FILE (a JKS or PKCS12 store, or PEM certificates)"));
    }
    p.finish("truststore=, truststore-password=, keystore=, keystore-password=, ssl-protocol=, ssl-alg=, store-type=, ssl-ciphers=")?;
    Ok(Some(transport))
}

fn parse_log(params: Option<Params>) -> Result<Log, ArgError> {
    let mut log = Log {
        interval: Duration::from_secs(1),
        hdrfile: None,
        file: None,
        no_settings: false,
        no_summary: false,
        level: "normal".into(),
    };
    let Some(mut p) = params else { return Ok(log) };
    if let Some(i) = p.take("interval=") {
        log.interval = if let Some(ms) = i.strip_suffix("ms") {
            Duration::from_millis(number(&p, "interval=", ms)?)
        } else {
            Duration::from_secs(number(&p, "interval=", i.trim_end_matches('s'))?)
        };
        if log.interval.is_zero() {
            return Err(p.invalid("interval= must be more than zero"));
        }
    }
    log.hdrfile = p.take("hdrfile=").map(PathBuf::from);
    log.file = p.take("file=").map(PathBuf::from);
    log.no_settings = p.flag("no-settings");
    log.no_summary = p.flag("no-summary");
    if let Some(l) = p.take("level=") {
        log.level = l;
    }
    p.flag("print-statements-on-error");
    p.finish("interval=, hdrfile=, file=, level=, no-settings, no-summary")?;
    Ok(log)
}

fn parse_errors(params: Option<Params>) -> Result<Errors, ArgError> {
    let mut errors = Errors { ignore: false, retries: 9, skip_read_validation: false };
    let Some(mut p) = params else { return Ok(errors) };
    errors.ignore = p.flag("ignore");
    if let Some(r) = p.take("retries=") {
        errors.retries = number(&p, "retries=", &r)?;
    }
    errors.skip_read_validation = p.flag("skip-read-validation");
    p.flag("fail-fast");
    p.finish("ignore, retries=, skip-read-validation")?;
    Ok(errors)
}

fn parse_graph(params: Option<Params>) -> Result<Option<Graph>, ArgError> {
    let Some(mut p) = params else { return Ok(None) };
    let file = p.take("file=").ok_or_else(|| p.invalid("file= is required, e.g. -graph file=stress.html"))?;
    let graph = Graph {
        file: PathBuf::from(file),
        revision: p.take("revision=").unwrap_or_else(|| "unknown".into()),
        title: p.take("title="),
        op: p.take("op="),
    };
    p.finish("file=, revision=, title=, op=")?;
    Ok(Some(graph))
}

/// Parses a cassandra-stress command line (without the program name).
pub fn parse(args: &[String]) -> Result<Settings, ArgError> {
    parse_with(args, &BTreeMap::new())
}

/// As [`parse`], with the text of profiles that are not files here (a suite carries them into
/// the sandbox): `profiles` maps `profile=`'s value to the file's text.
pub fn parse_with(args: &[String], profiles: &BTreeMap<String, String>) -> Result<Settings, ArgError> {
    let tokens = tokens(args);
    if tokens.is_empty() {
        return Err(ArgError::Invalid("No command provided".into()));
    }
    let mut groups = groups(&tokens)?;
    let (word, command_params) = groups.remove(0);
    let mut take = |name: &str| {
        groups.iter().position(|(k, _)| k == name).map(|i| {
            let (group, items) = groups.remove(i);
            Params { group, items }
        })
    };
    let mut command = parse_command(&word, Params { group: word.clone(), items: command_params }, profiles)?;
    let rate = parse_rate(&command, take("-rate"))?;
    let (population, mut warnings) = parse_population(&command, take("-pop"))?;
    if !command.profiles.is_empty() {
        parse_insert(&mut command, take("-insert"), &mut warnings)?;
    }
    let schema = parse_schema(take("-schema"))?;
    let columns = parse_columns(take("-col"), &mut warnings)?;
    let mode = parse_mode(take("-mode"), &mut warnings)?;
    let mut nodes = vec!["localhost".to_string()];
    if let Some(mut p) = take("-node") {
        if let Some(file) = p.take("file=") {
            let text =
                std::fs::read_to_string(&file).map_err(|e| ArgError::Invalid(format!("-node file={file}: {e}")))?;
            nodes = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
        }
        p.flag("whitelist");
        if let Some(dc) = p.take("datacenter=") {
            warnings.push(format!(
                "-node datacenter={dc} is accepted and ignored: the driver routes to every node it knows"
            ));
        }
        let list: Vec<String> = p.items.drain(..).filter(|i| !i.contains('=')).collect();
        if !list.is_empty() {
            nodes = list.iter().flat_map(|l| l.split(',')).filter(|s| !s.is_empty()).map(str::to_string).collect();
        }
        p.finish("a,b,c, file=, whitelist, datacenter=")?;
    }
    let mut native_port = 9042;
    if let Some(mut p) = take("-port") {
        if let Some(n) = p.take("native=") {
            native_port = number(&p, "native=", &n)?;
        }
        p.take("thrift=");
        p.take("jmx=");
        p.finish("native=, thrift=, jmx=")?;
    }
    let log = parse_log(take("-log"))?;
    let errors = parse_errors(take("-errors"))?;
    let graph = parse_graph(take("-graph"))?;
    let transport = parse_transport(take("-transport"))?;
    let validate = match take("-validate") {
        Some(p) if command.profiles.is_empty() => {
            return Err(p.invalid(
                "-validate is for user profiles; the predefined read validates unless -errors skip-read-validation",
            ));
        }
        Some(p) => {
            p.finish("none (it is a flag)")?;
            true
        }
        None => false,
    };
    for (name, why) in [
        ("-insert", "predefined commands write one row per operation"),
        ("-sendto", "there is no stress daemon"),
        ("-tokenrange", "no token-range scans are done"),
    ] {
        if let Some(p) = take(name) {
            let given = super::redact_passwords(&p.items.join(" "));
            warnings.push(format!("{name} {given} is accepted and ignored: {why}").replace("  ", " "));
        }
    }
    if !groups.is_empty() {
        return Err(ArgError::Ignored(
            groups.into_iter().map(|(k, v)| std::iter::once(k).chain(v).collect::<Vec<_>>().join(" ")).collect(),
        ));
    }
    Ok(Settings {
        command,
        rate,
        population,
        schema,
        columns,
        mode,
        nodes,
        native_port,
        log,
        errors,
        graph,
        validate,
        transport,
        warnings,
    })
}

impl Settings {
    /// The settings dump cassandra-stress prints first (secrets as REDACTED).
    pub fn dump(&self) -> String {
        let c = &self.command;
        let mut o = String::from("******************** Stress Settings ********************\nCommand:\n");
        let _ = writeln!(o, "  Type: {}", c.word);
        let _ = writeln!(o, "  Count: {}", group_digits(c.count().map_or(-1, |n| n as i64)));
        if let Stop::Duration(d, _) = &c.stop {
            let _ = writeln!(o, "  Duration: {} SECONDS", group_digits(d.as_secs() as i64));
        }
        let _ = writeln!(o, "  No Warmup: {}", c.no_warmup);
        let _ = writeln!(o, "  Consistency Level: {}", c.consistency);
        let _ = writeln!(o, "  Serial Consistency Level: {}", c.serial_consistency);
        match &c.stop {
            Stop::Uncertainty { target, min, max } => {
                let _ = writeln!(
                    o,
                    "  Target Uncertainty: {target:.3}\n  Minimum Uncertainty Measurements: {min}\n  Maximum Uncertainty Measurements: {max}"
                );
            }
            _ => o.push_str("  Target Uncertainty: not applicable\n"),
        }
        let _ = writeln!(o, "  Key Size (bytes): {}", c.key_size);
        let _ = writeln!(o, "  Counter Increment Distibution: add={}", spec_text(&c.add));
        if c.is_mixed() {
            let ratios: Vec<String> = c.ops.iter().map(|(op, w)| format!("{}={w:.1}", c.op_name(*op))).collect();
            let _ = writeln!(o, "  Command Ratios: {{{}}}", ratios.join(", "));
            let _ = writeln!(o, "  Command Clustering Distribution: clustering={}", spec_text(&c.clustering));
        }
        for profile in &c.profiles {
            o.push_str(&profile.dump());
        }
        if !c.profiles.is_empty() {
            let _ = writeln!(o, "  Validate: {}", self.validate);
        }
        o.push_str("Rate:\n");
        let r = &self.rate;
        let _ = writeln!(o, "  Auto: {}", r.auto);
        match r.threads {
            Some(t) => {
                let _ = writeln!(o, "  Thread Count: {t}\n  OpsPer Sec: {}", r.ops_per_second().unwrap_or(0));
            }
            None => {
                let _ = writeln!(o, "  Min Threads: {}\n  Max Threads: {}", r.min_threads, r.max_threads);
            }
        }
        o.push_str("Population:\n");
        match &self.population {
            Population::Sequence { start, end, wrap } => {
                let _ = writeln!(o, "  Sequence: {start}..{end}\n  Order: ARBITRARY\n  Wrap: {wrap}");
            }
            Population::Distribution(d) => {
                let _ = writeln!(o, "  Distribution: {d}\n  Order: ARBITRARY\n  Wrap: true");
            }
        }
        o.push_str("Insert:\n  Revisits: Uniform:  min=1,max=1000000\n  Visits: Fixed:  key=1\n  Row Population Ratio: Ratio: divisor=1.000000;delegate=Fixed:  key=1\n  Batch Type: not batching\n");
        o.push_str("Columns:\n");
        let cols = &self.columns;
        let _ = writeln!(
            o,
            "  Max Columns Per Key: {}\n  Column Names: [{}]\n  Comparator: AsciiType",
            cols.names.len(),
            cols.names.join(", ")
        );
        let _ = writeln!(o, "  Timestamp: {}", cols.timestamp.map(|t| t.to_string()).unwrap_or_else(|| "null".into()));
        let _ = writeln!(
            o,
            "  Variable Column Count: false\n  Slice: {}\n  Size Distribution: {}\n  Count Distribution: Fixed:  key={}",
            cols.slice,
            cols.size,
            cols.names.len()
        );
        let e = &self.errors;
        let _ = writeln!(o, "Errors:\n  Ignore: {}\n  Tries: {}", e.ignore, e.retries + 1);
        let l = &self.log;
        let _ = writeln!(
            o,
            "Log:\n  No Summary: {}\n  No Settings: {}\n  File: {}\n  Interval Millis: {}\n  Level: {}",
            l.no_summary,
            l.no_settings,
            l.file.as_ref().map(|f| f.display().to_string()).unwrap_or_else(|| "null".into()),
            l.interval.as_millis(),
            l.level.to_ascii_uppercase()
        );
        let m = &self.mode;
        let _ = writeln!(
            o,
            "Mode:\n  API: SCYLLA_RUST_DRIVER\n  Connection Style: CQL_PREPARED\n  CQL Version: CQL3\n  Protocol Version: V4"
        );
        let _ = writeln!(o, "  Username: {}", m.user.as_deref().unwrap_or("null"));
        let _ = writeln!(o, "  Password: {}", if m.password.is_some() { "REDACTED" } else { "null" });
        let _ = writeln!(
            o,
            "  Auth Provide Class: none\n  Max Pending Per Connection: {}\n  Connections Per Host: {}",
            m.max_pending.map(|p| p.to_string()).unwrap_or_else(|| "128".into()),
            m.connections_per_host
        );
        let _ = writeln!(o, "  Compression: {}", m.compression.as_deref().unwrap_or("NONE").to_ascii_uppercase());
        let _ = writeln!(o, "Node:\n  Nodes: [{}]\n  Is White List: false\n  Datacenter: null", self.nodes.join(", "));
        let s = &self.schema;
        let options: Vec<String> = s.replication_options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            o,
            "Schema:\n  Keyspace: {}\n  Replication Strategy: {}\n  Replication Strategy Options: {{{}}}",
            s.keyspace,
            s.replication_strategy,
            options.join(", ")
        );
        let compaction: Vec<String> = s.compaction_options.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(
            o,
            "  Table Compression: {}\n  Table Compaction Strategy: {}\n  Table Compaction Strategy Options: {{{}}}",
            s.compression.as_deref().unwrap_or("null"),
            s.compaction_strategy.as_deref().unwrap_or("null"),
            compaction.join(", ")
        );
        match &self.transport {
            Some(t) => {
                let _ = writeln!(o, "Transport:\n  factory=org.apache.cassandra.thrift.TFramedTransportFactory; {} ", t.describe());
            }
            None => o.push_str("Transport:\n  factory=org.apache.cassandra.thrift.TFramedTransportFactory; truststore=null; truststore-password=null; keystore=null; keystore-password=null; ssl-protocol=TLS; ssl-alg=null; store-type=JKS; ssl-ciphers=TLS_RSA_WITH_AES_128_CBC_SHA,TLS_RSA_WITH_AES_256_CBC_SHA; \n"),
        }
        let _ = writeln!(o, "Port:\n  Native Port: {}\n  Thrift Port: 9160\n  JMX Port: 7199", self.native_port);
        o.push_str("Send To Daemon:\n  *not set*\nGraph:\n");
        match &self.graph {
            Some(g) => {
                let _ = writeln!(
                    o,
                    "  File: {}\n  Revision: {}\n  Title: {}\n  Operation: {}",
                    g.file.display(),
                    g.revision,
                    g.title.as_deref().unwrap_or("null"),
                    g.op.as_deref().unwrap_or("null")
                );
            }
            None => o.push_str("  File: null\n  Revision: unknown\n  Title: null\n  Operation: null\n"),
        }
        o.push_str("TokenRange:\n  Wrap: false\n  Split Factor: 1\n\n");
        o
    }
}

/// A distribution as written on the command line (`fixed(1)`), for the dump.
fn spec_text(spec: &DistSpec) -> String {
    match spec {
        DistSpec::Fixed(v) => format!("fixed({v})"),
        other => other.to_string(),
    }
}

/// Java's `%,d`: thousands separated by commas.
pub fn group_digits(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(text: &str) -> Vec<String> {
        text.split(' ').map(str::to_string).collect()
    }

    fn ok(text: &str) -> Settings {
        parse(&args(text)).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_tokenizer_joins_what_spaces_split() {
        assert_eq!(tokens(&args("mixed ratio( read = 2, write=1 ) n= 1k")), ["mixed", "ratio(read=2,write=1)", "n=1k"]);
    }

    #[test]
    fn defaults_follow_cassandra_stress() {
        let s = ok("write n=1000");
        assert_eq!(s.command.stop, Stop::Count(1000));
        assert_eq!(s.rate.threads, Some(200), "200 threads for a counted write");
        assert_eq!(s.population, Population::Sequence { start: 1, end: 1000, wrap: true });
        assert_eq!(s.columns.names, ["C0", "C1", "C2", "C3", "C4"]);
        assert_eq!(s.columns.size, DistSpec::Fixed(34));
        assert_eq!((s.schema.keyspace.as_str(), s.command.consistency.as_str()), ("keyspace1", "LOCAL_ONE"));
        let r = ok("read n=1000");
        assert_eq!(r.rate.threads, None, "auto threads for reads");
        assert!(matches!(r.population, Population::Distribution(DistSpec::Gaussian { min: 1, max: 1000, .. })));
        let d = ok("write duration=2m");
        assert_eq!(d.command.stop, Stop::Duration(Duration::from_secs(120), "minutes"));
        assert!(matches!(ok("write").command.stop, Stop::Uncertainty { target, min: 30, max: 200 } if target == 0.02));
    }

    #[test]
    fn options_parse_like_cassandra_stress() {
        let s = ok(
            "mixed ratio(read=2,write=1) n=10k cl=QUORUM no-warmup truncate=once -rate threads=64 fixed=1000/s -pop seq=1..5k no-wrap -schema keyspace=ks1 replication(strategy=NetworkTopologyStrategy,dc1=3) compaction(strategy=LeveledCompactionStrategy,sstable_size_in_mb=160) compression=LZ4Compressor -col n=FIXED(3) size=uniform(10..20) -mode native cql3 prepared user=cassandra password=s3cret -node 10.0.0.1,10.0.0.2 -port native=9043 -log interval=5s hdrfile=x.hdr -errors ignore retries=2 -graph file=g.html revision=r1 title=T",
        );
        assert_eq!(s.command.ops, vec![(Op::Read, 2.0), (Op::Write, 1.0)]);
        assert_eq!((s.rate.threads, s.rate.fixed), (Some(64), Some(1000)));
        assert_eq!(s.population, Population::Sequence { start: 1, end: 5000, wrap: false });
        assert_eq!(s.schema.replication_options, vec![("dc1".to_string(), "3".to_string())]);
        assert_eq!(s.columns.names.len(), 3);
        assert_eq!(s.nodes, ["10.0.0.1", "10.0.0.2"]);
        assert_eq!((s.native_port, s.log.interval), (9043, Duration::from_secs(5)));
        assert!(s.errors.ignore && s.errors.retries == 2);
        assert_eq!(s.graph.as_ref().unwrap().revision, "r1");
        assert_eq!(s.warnings.len(), 3, "native, cql3 and prepared are accepted with a warning: {:?}", s.warnings);
        let dump = s.dump();
        assert!(dump.contains("  Password: REDACTED") && !dump.contains("s3cret"), "{dump}");
        assert!(dump.starts_with(
            "******************** Stress Settings ********************\nCommand:\n  Type: mixed\n  Count: 10,000\n"
        ));
    }

    #[test]
    fn unknown_arguments_are_printed_and_refused() {
        let e = parse(&args("write n=10 -rate threads=4 -bogus x y -nodes a")).unwrap_err();
        assert_eq!(e, ArgError::Ignored(vec!["-bogus x y".into(), "-nodes a".into()]));
        assert!(
            e.to_string()
                .starts_with("Error processing command line arguments. The following were ignored:\n-bogus x y\n")
        );
        assert!(
            parse(&args("write n=10 -rate threads=4 wat=1"))
                .unwrap_err()
                .to_string()
                .contains("\"wat=1\" is not an option of -rate")
        );
        assert!(parse(&args("write n=10 duration=1s")).is_err(), "one of n=, duration=, err<");
        // Found by fuzzing: a unit that is not ASCII, a count of hours past u64's seconds.
        assert!(parse(&args("read duration=240m\u{fffd}")).is_err());
        assert!(parse(&args("read duration=18446744073709551615h")).is_err());
        assert!(
            parse(&args("user profile=/nonexistent.yaml ops(insert=1)"))
                .unwrap_err()
                .to_string()
                .contains("cannot read the profile")
        );
        assert!(parse(&args("user ops(insert=1)")).unwrap_err().to_string().contains("needs profile="));
        let tls = ok("write n=1 -transport truststore=t.jks truststore-password=s3cret ssl-protocol=TLSv1.3");
        let transport = tls.transport.as_ref().unwrap();
        assert_eq!(
            (transport.truststore_password.as_deref(), transport.protocol.as_str()),
            (Some("s3cret"), "TLSv1.3")
        );
        assert!(tls.dump().contains("truststore-password=REDACTED") && !tls.dump().contains("s3cret"));
        let e = parse(&args("write n=1 -transport keystore=k.p12 keystore-password=s3cret")).unwrap_err().to_string();
        assert!(e.contains("needs truststore=") && !e.contains("s3cret"), "{e}");
        assert!(parse(&args("write n=1 -rate throttle=10/s fixed=10/s")).is_err());
        assert!(
            parse(&args("write n=1 -rate threads=1 -rate threads=2"))
                .unwrap_err()
                .to_string()
                .contains("defined multiple times")
        );
    }

    #[test]
    fn numbers_group_like_java() {
        assert_eq!(group_digits(1_000_000), "1,000,000");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(-1234), "-1,234");
    }

    #[test]
    fn several_profiles_name_their_operations_by_specname() {
        let profile = |keyspace: &str, spec: &str| {
            format!("{spec}keyspace: {keyspace}\ntable: t\nqueries:\n  one:\n    cql: select * from t where k = ?\n")
        };
        let texts: BTreeMap<String, String> =
            [("a.yaml".to_string(), profile("ks_a", "")), ("b.yaml".to_string(), profile("ks_b", "specname: beta\n"))]
                .into();
        let parse = |text: &str| parse_with(&args(text), &texts);
        let s = parse("user profile=a.yaml,b.yaml ops(insert=1,beta.insert=2,ks_a.t.one=3) n=10").unwrap();
        assert_eq!(s.command.profiles.iter().map(|p| p.specname.as_str()).collect::<Vec<_>>(), ["ks_a.t", "beta"]);
        let ops: Vec<(&str, usize, &str)> = s.command.user_ops.iter().map(|o| (o.label, o.profile, o.name)).collect();
        assert_eq!(ops, [("insert", 0, "insert"), ("beta.insert", 1, "insert"), ("ks_a.t.one", 0, "one")]);
        assert!(s.command.updates());
        let unknown = parse("user profile=a.yaml,b.yaml ops(gamma.insert=1)").unwrap_err().to_string();
        assert!(unknown.contains("no profile is called gamma") && unknown.contains("ks_a.t, beta"), "{unknown}");
        let missing = parse("user profile=a.yaml,b.yaml ops(beta.two=1)").unwrap_err().to_string();
        assert!(missing.contains("b.yaml: ops(beta.two=…)") && missing.contains("beta.insert, beta.one"), "{missing}");
        let twice = parse("user profile=a.yaml,a.yaml ops(insert=1)").unwrap_err().to_string();
        assert!(twice.contains("are both ks_a.t") && twice.contains("specname:"), "{twice}");
        // -insert overrides every profile's insert: section.
        let s = parse("user profile=a.yaml,b.yaml ops(insert=1) -insert partitions=fixed(3) batchtype=unlogged select-ratio=fixed(1)/4 visits=fixed(2)").unwrap();
        for p in &s.command.profiles {
            assert_eq!(p.insert.partitions, DistSpec::Fixed(3));
            assert_eq!(p.insert.batch, BatchKind::Unlogged);
            assert_eq!(p.insert.select, Ratio { numerator: DistSpec::Fixed(1), divisor: 4.0 });
        }
        assert!(
            s.warnings.iter().any(|w| w.starts_with("-insert visits=fixed(2) is accepted and ignored")),
            "{:?}",
            s.warnings
        );
        let bad = parse("user profile=a.yaml ops(insert=1) -insert batchtype=sometimes").unwrap_err().to_string();
        assert!(bad.contains("LOGGED, UNLOGGED or COUNTER"), "{bad}");
        assert!(
            ok("write n=1 -insert partitions=fixed(2)")
                .warnings
                .iter()
                .any(|w| w.contains("predefined commands write one row"))
        );
    }
}
