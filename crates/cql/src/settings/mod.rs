//! cassandra-stress's command line: the same tokenizer (arguments joined, spaces around `,=()`
//! dropped, `-option` groups), the same commands, options and defaults, and the same refusal of
//! anything unknown (printed, exit 1). Deprecated words are accepted with a warning.

mod columns;
mod command;
mod dump;
mod errors;
mod graph;
mod insert;
mod log;
mod mode;
mod node;
mod population;
mod rate;
mod schema;
mod tokens;
mod transport;

pub use columns::Columns;
pub use command::{Command, Op, Stop, Truncate};
pub use errors::Errors;
pub use figures::units::group_digits;
pub use graph::Graph;
pub use log::Log;
pub use mode::Mode;
pub use population::Population;
pub use rate::Rate;
pub use schema::Schema;
pub use tokens::tokens;

use std::collections::BTreeMap;

use crate::tls::Transport;
use columns::parse_columns;
use command::parse_command;
use errors::parse_errors;
use graph::parse_graph;
use insert::parse_insert;
use log::parse_log;
use mode::parse_mode;
use node::{parse_node, parse_port};
use population::parse_population;
use rate::parse_rate;
use schema::parse_schema;
use tokens::{Params, groups};
use transport::parse_transport;

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
    if mode.speculate.is_some() {
        only_idempotent_speculates(&command)?;
    }
    let nodes = parse_node(take("-node"), &mut warnings)?;
    let native_port = parse_port(take("-port"))?;
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

/// `-mode speculate=` sends a request to a second replica while the first may still apply it:
/// refused for an operation that must not run twice, before anything connects.
fn only_idempotent_speculates(command: &Command) -> Result<(), ArgError> {
    let refused = |what: String, fix: &str| {
        ArgError::Invalid(format!(
            "Invalid -mode options provided: speculate= sends a request to a second replica while the first may apply it, and {what}; {fix}"
        ))
    };
    if command.ops.iter().any(|(op, _)| !op.idempotent()) {
        return Err(refused(
            "counter_write is not idempotent (an increment sent twice counts twice)".into(),
            "leave speculate= out for counters",
        ));
    }
    for op in &command.user_ops {
        let profile = &command.profiles[op.profile];
        let Some(query) = profile.query(op.name) else { continue };
        if !query.idempotent {
            return Err(refused(
                profile.error(
                    query.line,
                    &format!(
                        "query {} is not idempotent (a condition, an increment or append, now() or uuid())",
                        query.name
                    ),
                ),
                "if running it twice changes nothing, say `idempotent: true` on the query; otherwise leave speculate= out",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::dist::DistSpec;
    use crate::profile::{BatchKind, Ratio};

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
        assert_eq!(ok("write n=0").command.stop, Stop::Count(0), "the schema only");
        let negative = parse(&args("write n=-5")).unwrap_err().to_string();
        assert!(negative.contains("n=-5: a count of operations is 0 or more"), "{negative}");
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
    fn speculation_is_refused_for_an_operation_that_must_not_run_twice() {
        let texts: BTreeMap<String, String> = [(
            "hits.yaml".to_string(),
            "keyspace: ks\ntable: t\nqueries:\n  read:\n    cql: select * from t where k = ?\n  bump:\n    cql: update t set n = n + 1 where k = ?\n  again:\n    cql: update t set n = n + 1 where k = ?\n    idempotent: true\n"
                .to_string(),
        )]
        .into();
        let parse = |text: &str| parse_with(&args(text), &texts).map_err(|e| e.to_string());
        assert!(parse("user profile=hits.yaml ops(read=1,again=1) -mode speculate=200ms").is_ok());
        assert!(parse("user profile=hits.yaml ops(bump=1)").is_ok(), "without speculation it runs");
        let e = parse("user profile=hits.yaml ops(read=1,bump=1) -mode speculate=200ms").unwrap_err();
        assert!(
            e.contains("-mode")
                && e.contains("hits.yaml:7: query bump is not idempotent")
                && e.contains("idempotent: true"),
            "{e}"
        );
        let e = parse("counter_write n=10 -mode speculate=200ms").unwrap_err();
        assert!(e.contains("counter_write is not idempotent") && e.contains("leave speculate= out"), "{e}");
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
