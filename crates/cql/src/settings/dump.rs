//! The settings dump cassandra-stress prints before it runs (`StressSettings.printSettings`).

use std::fmt::Write as _;

use super::Settings;
use super::command::Stop;
use super::population::Population;
use crate::dist::DistSpec;
use figures::units::group_digits;

impl Settings {
    /// The settings dump cassandra-stress prints first (secrets as REDACTED).
    pub fn dump(&self) -> String {
        let mut o = String::from("******************** Stress Settings ********************\n");
        self.dump_command(&mut o);
        self.dump_rate_and_population(&mut o);
        self.dump_columns(&mut o);
        self.dump_client(&mut o);
        self.dump_schema_and_transport(&mut o);
        o
    }

    /// The command: its type, count or duration, consistency, uncertainty, ratios, profiles.
    fn dump_command(&self, o: &mut String) {
        let c = &self.command;
        o.push_str("Command:\n");
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
    }

    /// How fast (threads, a fixed rate) and over which keys.
    fn dump_rate_and_population(&self, o: &mut String) {
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
    }

    /// The insert defaults cassandra-stress prints, and the columns.
    fn dump_columns(&self, o: &mut String) {
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
    }

    /// Errors, log, the connection's mode and the nodes.
    fn dump_client(&self, o: &mut String) {
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
    }

    /// The schema, the transport (TLS), the port and the graph.
    fn dump_schema_and_transport(&self, o: &mut String) {
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
    }
}

/// A distribution as written on the command line (`fixed(1)`), for the dump.
pub(super) fn spec_text(spec: &DistSpec) -> String {
    match spec {
        DistSpec::Fixed(v) => format!("fixed({v})"),
        other => other.to_string(),
    }
}
