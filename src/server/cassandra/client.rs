//! Talking CQL to a node: a session (login, TLS), the role a suite's load logs in as, and the
//! probe that proves a node answers.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::sys;

/// The superuser Cassandra makes on its first start with PasswordAuthenticator.
pub const DEFAULT_LOGIN: (&str, &str) = ("cassandra", "cassandra");

/// A CQL session to one node, logging in as `login` and trusting `trust` (a PEM certificate)
/// when given.
pub(super) async fn session(
    address: &str,
    login: Option<(&str, &str)>,
    trust: Option<&Path>,
    timeout: Duration,
) -> Result<scylla::client::session::Session> {
    // No schema metadata: neither the probe nor the roles need it, and reading every
    // system_schema table from a node that has just started is most of a probe's time.
    let mut builder = scylla::client::session_builder::SessionBuilder::new()
        .known_node(address)
        .connection_timeout(timeout)
        .fetch_schema_metadata(false);
    if let Some((user, password)) = login {
        builder = builder.user(user, password);
    }
    if let Some(certificate) = trust {
        let transport = cql_stress::tls::Transport {
            truststore: Some(certificate.to_path_buf()),
            protocol: "TLS".into(),
            ..Default::default()
        };
        builder = builder.tls_context(Some(std::sync::Arc::new(transport.client_config()?)));
    }
    Ok(tokio::time::timeout(timeout + Duration::from_secs(2), builder.build()).await.context("timed out")??)
}

/// Makes `user` a superuser who logs in with `password`, as the default superuser: the role a
/// suite's load logs in as. With `auth_rf` above 1 the roles are first replicated to that many
/// nodes, so that logins outlive a node's loss. The statement is not logged anywhere.
pub fn create_role(address: &str, user: &str, password: &str, auth_rf: u32, trust: Option<&Path>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let attempt = || {
        runtime.block_on(async {
            let session = session(address, Some(DEFAULT_LOGIN), trust, Duration::from_secs(5))
                .await
                .context("logging in as Cassandra's default superuser")?;
            if auth_rf > 1 {
                let statement = format!(
                    "ALTER KEYSPACE system_auth WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': {auth_rf}}}"
                );
                session.query_unpaged(statement, ()).await.context("replicating the roles")?;
            }
            let statement = format!(
                "CREATE ROLE IF NOT EXISTS \"{}\" WITH PASSWORD = '{}' AND LOGIN = true AND SUPERUSER = true",
                user.replace('"', "\"\""),
                password.replace('\'', "''")
            );
            session.query_unpaged(statement, ()).await.context(format!("creating the role \"{user}\""))?;
            anyhow::Ok(())
        })
    };
    // A ring that has just formed on a loaded machine times out writes at the roles' quorum now
    // and then; both statements may simply be made again.
    let began = Instant::now();
    loop {
        match attempt() {
            Ok(()) => return Ok(()),
            Err(_) if began.elapsed() < Duration::from_secs(60) && !sys::interrupted() => {
                std::thread::sleep(Duration::from_secs(1))
            }
            // The server's own words, never the statement (it holds the password).
            Err(e) => bail!("{}", format!("{e:#}").replace(password, "REDACTED")),
        }
    }
}

/// Connects with the CQL driver (logging in as `login`, if given) and reads `release_version`:
/// proof that CQL is served.
pub fn cql_probe(address: &str, login: Option<(&str, &str)>, trust: Option<&Path>) -> Result<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let session = session(address, login, trust, Duration::from_secs(3)).await?;
        let rows = session.query_unpaged("SELECT release_version FROM system.local", ()).await?.into_rows_result()?;
        let (version,): (Option<String>,) = rows.first_row()?;
        Ok(version.unwrap_or_default())
    })
}
