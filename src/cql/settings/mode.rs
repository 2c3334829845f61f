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
}

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
        .or_else(|| mode.user.as_ref().and_then(|_| std::env::var(crate::cql::loaders::PASSWORD_VAR).ok()));
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
