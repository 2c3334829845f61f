//! `-mode` (`SettingsMode.java`).

use std::time::Duration;

use super::ArgError;
use super::tokens::{Params, number};

#[derive(Clone, Debug)]
pub struct Mode {
    pub user: Option<String>,
    pub password: Option<String>,
    pub compression: Option<String>,
    pub connections_per_host: u32,
    pub max_pending: Option<u32>,
    pub request_timeout: Duration,
    /// How the client notices a node that stopped answering without a word (a lost machine
    /// sends no reset): a CQL heartbeat on each idle connection every `heartbeat`, and the
    /// connection closed when none is answered within `heartbeat_timeout`; None: no heartbeat.
    pub heartbeat: Option<Duration>,
    pub heartbeat_timeout: Duration,
    /// The kernel's keepalive on each connection (None: off).
    pub tcp_keepalive: Option<Duration>,
    /// An idempotent request whose connection broke, or whose coordinator could not serve it,
    /// goes on to the next replica (the driver's default retry policy); off: every failure goes
    /// back to `-errors retries=`, as before.
    pub failover: bool,
    /// An idempotent request not answered after this long is sent to the next replica too.
    pub speculate: Option<Duration>,
}

/// The client's defaults notice a silent node in seconds: its connections close within
/// `heartbeat + heartbeat_timeout` of its last answer, and the driver then sends nothing to it.
/// Not sooner: a node busy enough answers a heartbeat late, queued behind the requests on its
/// connection, and a ring of three on two cores with other clients beside it took over 2 s;
/// each false alarm breaks every request in flight on the connection.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);
pub const TCP_KEEPALIVE: Duration = Duration::from_secs(5);

pub(super) fn parse_mode(params: Option<Params>, warnings: &mut Vec<String>) -> Result<Mode, ArgError> {
    let mut mode = Mode {
        user: None,
        password: None,
        compression: None,
        // cassandra-stress's Java driver opens 8; one Rust connection carries thousands of
        // requests in flight, and each extra one costs system calls per operation.
        connections_per_host: 1,
        max_pending: None,
        request_timeout: Duration::from_secs(12),
        heartbeat: Some(HEARTBEAT),
        heartbeat_timeout: HEARTBEAT_TIMEOUT,
        tcp_keepalive: Some(TCP_KEEPALIVE),
        failover: true,
        speculate: None,
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
    mode.password =
        p.take("password=").or_else(|| mode.user.as_ref().and_then(|_| std::env::var(crate::vars::PASSWORD_VAR).ok()));
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
        mode.request_timeout = period(&p, "requestTimeout=", &t)?;
    }
    if let Some(t) = p.take("heartbeattimeout=") {
        mode.heartbeat_timeout = period(&p, "heartbeatTimeout=", &t)?;
    }
    if let Some(t) = p.take("heartbeat=") {
        mode.heartbeat = unless_off(&p, "heartbeat=", &t)?;
    }
    if let Some(t) = p.take("tcpkeepalive=") {
        mode.tcp_keepalive = unless_off(&p, "tcpKeepalive=", &t)?;
    }
    if let Some(t) = p.take("speculate=") {
        mode.speculate = unless_off(&p, "speculate=", &t)?;
    }
    if let Some(f) = p.take("failover=") {
        mode.failover = match f.to_ascii_lowercase().as_str() {
            "on" => true,
            "off" => false,
            _ => return Err(p.invalid(&format!("failover={f}: write failover=on or failover=off"))),
        };
    }
    for ignored in ["protocolversion=", "port=", "auth-provider="] {
        if let Some(v) = p.take(ignored) {
            warnings.push(format!("-mode {ignored}{v} is accepted and ignored"));
        }
    }
    p.finish(
        "native, cql3, prepared, user=, password=, compression=, connectionsPerHost=, maxPending=, requestTimeout=, heartbeat=, heartbeatTimeout=, tcpKeepalive=, failover=, speculate=",
    )?;
    Ok(mode)
}

/// A time of the client's: a number and a unit (`500ms`, `2s`), a bare number in milliseconds
/// as `requestTimeout=` has always been; above zero.
fn period(p: &Params, key: &str, text: &str) -> Result<Duration, ArgError> {
    let bare = !text.is_empty() && text.chars().all(|c| c.is_ascii_digit());
    let parsed =
        if bare { Ok(Duration::from_millis(number(p, key, text)?)) } else { figures::units::parse_duration(text) };
    match parsed {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(p.invalid(&format!("{key}{text} is zero; give a time above zero, e.g. {key}2s{}", off_hint(key)))),
        Err(_) => Err(p.invalid(&format!(
            "{key}{text} is not a time; write a number and a unit, e.g. {key}500ms or {key}2s{}",
            off_hint(key)
        ))),
    }
}

fn unless_off(p: &Params, key: &str, text: &str) -> Result<Option<Duration>, ArgError> {
    if text.eq_ignore_ascii_case("off") { Ok(None) } else { period(p, key, text).map(Some) }
}

fn off_hint(key: &str) -> &'static str {
    match key {
        "heartbeat=" | "tcpKeepalive=" | "speculate=" => " (or off)",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(words: &[&str]) -> Result<Mode, String> {
        let p = Params { group: "-mode".into(), items: words.iter().map(|w| w.to_string()).collect() };
        parse_mode(Some(p), &mut Vec::new()).map_err(|e| e.to_string())
    }

    #[test]
    fn the_client_notices_a_silent_node_in_seconds_unless_told_otherwise() {
        let default = mode(&[]).unwrap();
        assert_eq!((default.heartbeat, default.heartbeat_timeout), (Some(HEARTBEAT), HEARTBEAT_TIMEOUT));
        assert!(default.failover && default.speculate.is_none());
        let set = mode(&["heartbeat=500ms", "heartbeattimeout=3s", "tcpkeepalive=off", "speculate=200ms"]).unwrap();
        assert_eq!(set.heartbeat, Some(Duration::from_millis(500)));
        assert_eq!(set.heartbeat_timeout, Duration::from_secs(3));
        assert_eq!((set.tcp_keepalive, set.speculate), (None, Some(Duration::from_millis(200))));
        assert_eq!(mode(&["requesttimeout=2500"]).unwrap().request_timeout, Duration::from_millis(2500));
        assert!(!mode(&["failover=off", "heartbeat=off"]).unwrap().failover);
    }

    #[test]
    fn a_time_of_zero_below_zero_or_of_no_meaning_is_refused_naming_the_option_and_the_fix() {
        for (word, said) in [
            ("heartbeat=0", "heartbeat=0 is zero; give a time above zero, e.g. heartbeat=2s (or off)"),
            ("heartbeattimeout=-1s", "heartbeatTimeout=-1s is not a time; write a number and a unit"),
            ("tcpkeepalive=soon", "tcpKeepalive=soon is not a time"),
            ("requesttimeout=0ms", "requestTimeout=0ms is zero"),
            ("speculate=0", "speculate=0 is zero"),
            ("failover=maybe", "failover=maybe: write failover=on or failover=off"),
        ] {
            let e = mode(&[word]).unwrap_err();
            assert!(e.contains(said) && e.contains("-mode"), "{word}: {e}");
        }
    }
}
