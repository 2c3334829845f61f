//! The history in a team's PostgreSQL: several machines' runs in one series.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, anyhow, bail};
use postgres::types::{ToSql, Type};
use postgres::{Client, NoTls};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::db::{Db, Value};

pub struct Postgres {
    client: Client,
}

impl Postgres {
    /// `url` is `postgres://user:password@host:port/database`, with libpq's `sslmode` and
    /// `sslrootcert` if it asks for TLS; the error never repeats it (it holds the password).
    pub fn connect(url: &str) -> Result<Postgres> {
        let (rest, tls) = tls_of(url)?;
        let connected = match tls {
            None => Client::connect(&rest, NoTls),
            Some(config) => Client::connect(&rest, MakeRustlsConnect::new(config)),
        };
        let client = connected.map_err(|e| {
            let reason = match e.as_db_error() {
                Some(db) => db.message().to_string(),
                // "error performing TLS handshake" says why only in its sources.
                None => format!("{:#}", anyhow::Error::new(e)),
            };
            let fix = if reason.contains("certificate") {
                "; name the CA that signed the server's certificate with sslrootcert=/path/ca.pem in the URL"
            } else if reason.ends_with("no encryption") {
                "; it takes logins over TLS only: add ?sslmode=verify-full (and sslrootcert=) to the URL"
            } else {
                ""
            };
            anyhow!(
                "connecting to PostgreSQL at {}: {}{fix}",
                super::Location::redact(url),
                crate::secrets::scrub(&reason)
            )
        })?;
        Ok(Postgres { client })
    }
}

/// The URL without libpq's `sslmode` and `sslrootcert`, which isobench reads itself
/// (tokio-postgres knows neither `verify-ca`/`verify-full` nor `sslrootcert`), and the TLS
/// configuration they ask for: none without `sslmode` or with `disable`/`allow`/`prefer` (a
/// plain connection), else TLS with the server's certificate verified, name included, against
/// the system's roots and `sslrootcert`'s: under `require` too, where libpq would not verify.
fn tls_of(url: &str) -> Result<(String, Option<ClientConfig>)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let (mut mode, mut root) = (None, None);
    let mut rest: Vec<&str> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("sslmode", value)) => mode = Some(value),
            Some(("sslrootcert", value)) => root = Some(PathBuf::from(value)),
            _ => rest.push(pair),
        }
    }
    let var = super::HISTORY_VAR;
    let tls = match mode {
        None | Some("disable" | "allow" | "prefer") => {
            if let Some(root) = &root {
                bail!(
                    "{var}: sslrootcert={} takes effect only with sslmode=verify-full (or require, verify-ca): add that to the URL",
                    root.display()
                );
            }
            None
        }
        Some("require" | "verify-ca" | "verify-full") => {
            rest.push("sslmode=require");
            Some(client_config(root.as_deref())?)
        }
        Some(other) => {
            bail!("{var}: sslmode={other} is not one of disable, allow, prefer, require, verify-ca, verify-full")
        }
    };
    let rest = if rest.is_empty() { base.to_string() } else { format!("{base}?{}", rest.join("&")) };
    Ok((rest, tls))
}

fn client_config(root: Option<&Path>) -> Result<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(path) = root {
        let named = || format!("{}: sslrootcert={}", super::HISTORY_VAR, path.display());
        let certs = CertificateDer::pem_file_iter(path)
            .with_context(|| format!("{}: cannot read it", named()))?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("{}: not PEM certificates", named()))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            bail!("{}: no certificate in it (a PEM file of the CA that signed the server's)", named());
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("the TLS provider offers no protocol version")?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

fn params(values: &[Value]) -> Vec<Box<dyn ToSql + Sync>> {
    values
        .iter()
        .map(|v| -> Box<dyn ToSql + Sync> {
            match v {
                Value::Text(t) => Box::new(t.clone()),
                Value::Int(i) => Box::new(*i),
                Value::Real(r) => Box::new(*r),
            }
        })
        .collect()
}

impl Db for Postgres {
    fn lock_schema(&mut self) -> Result<()> {
        // Any constant, the same in every isobench: released at the transaction's end.
        self.client.batch_execute("SELECT pg_advisory_xact_lock(7305566162823184)")?;
        Ok(())
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.client.batch_execute(sql)?)
    }

    fn execute(&mut self, sql: &str, values: &[Value]) -> Result<u64> {
        let owned = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
        Ok(self.client.execute(sql, &refs)?)
    }

    fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Vec<Value>>> {
        let owned = params(values);
        let refs: Vec<&(dyn ToSql + Sync)> = owned.iter().map(|b| b.as_ref()).collect();
        let rows = self.client.query(sql, &refs)?;
        rows.iter()
            .map(|row| {
                (0..row.len())
                    .map(|i| {
                        let t = row.columns()[i].type_();
                        Ok(if *t == Type::INT8 {
                            Value::Int(row.try_get(i)?)
                        } else if *t == Type::INT4 {
                            Value::Int(row.try_get::<_, i32>(i)? as i64)
                        } else if *t == Type::FLOAT8 {
                            Value::Real(row.try_get(i)?)
                        } else {
                            Value::Text(row.try_get::<_, Option<String>>(i)?.unwrap_or_default())
                        })
                    })
                    .collect()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::tls_of;

    #[test]
    fn the_tls_words_are_taken_out_and_the_rest_of_the_query_kept() {
        let (rest, tls) = tls_of("postgres://u:p@db/h?application_name=ci&sslmode=verify-full").unwrap();
        assert_eq!(rest, "postgres://u:p@db/h?application_name=ci&sslmode=require");
        assert!(tls.is_some());
        let (rest, tls) = tls_of("postgres://u:p@db/h?sslmode=prefer").unwrap();
        assert_eq!(rest, "postgres://u:p@db/h");
        assert!(tls.is_none());
        let missing = tls_of("postgres://u:p@db/h?sslmode=require&sslrootcert=/nonexistent/ca.pem").unwrap_err();
        assert!(format!("{missing:#}").contains("sslrootcert=/nonexistent/ca.pem: cannot read it"), "{missing:#}");
    }
}
