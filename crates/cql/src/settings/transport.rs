//! `-transport` (`SettingsTransport.java`).

use std::path::PathBuf;

use super::ArgError;
use super::tokens::Params;
use crate::tls::Transport;

/// `-transport truststore= truststore-password= keystore= keystore-password= ssl-protocol=
/// ssl-alg= store-type= ssl-ciphers=`. A loader started by `-loaders` gets the passwords in its
/// environment, not on its command line.
pub(super) fn parse_transport(params: Option<Params>) -> Result<Option<Transport>, ArgError> {
    let Some(mut p) = params else { return Ok(None) };
    let from_env = |var: &str| std::env::var(var).ok();
    let transport = Transport {
        truststore: p.take("truststore=").map(PathBuf::from),
        truststore_password: p.take("truststore-password=").or_else(|| from_env(crate::vars::TRUSTSTORE_PASSWORD_VAR)),
        keystore: p.take("keystore=").map(PathBuf::from),
        keystore_password: p.take("keystore-password=").or_else(|| from_env(crate::vars::KEYSTORE_PASSWORD_VAR)),
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
