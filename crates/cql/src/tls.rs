//! `-transport`: TLS to the nodes, from the stores cassandra-stress takes (JKS or PKCS12 with
//! their passwords) or from PEM files, through the driver's rustls.
//!
//! As cassandra-stress's Java driver does, the node's certificate chain is verified against the
//! truststore but its name is not compared with the address dialled: clusters are reached by IP
//! and their certificates rarely name every address.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientConfig, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

/// cassandra-stress's `-transport` options. Store types are told by their contents, so
/// `store-type=` is only shown back.
#[derive(Clone, Default, PartialEq)]
pub struct Transport {
    pub truststore: Option<PathBuf>,
    pub truststore_password: Option<String>,
    pub keystore: Option<PathBuf>,
    pub keystore_password: Option<String>,
    /// `TLS` (any version rustls speaks), `TLSv1.2` or `TLSv1.3`.
    pub protocol: String,
    /// IANA names, as Java spells them; the provider's defaults when empty.
    pub ciphers: Vec<String>,
    pub store_type: String,
}

/// Never prints a password, whatever prints a `Transport`.
impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.describe())
    }
}

fn shown_password(p: &Option<String>) -> &'static str {
    if p.is_some() { "REDACTED" } else { "null" }
}

impl Transport {
    /// The options as cassandra-stress's settings dump lists them, passwords REDACTED.
    pub fn describe(&self) -> String {
        let path = |p: &Option<PathBuf>| p.as_ref().map_or("null".into(), |p| p.display().to_string());
        format!(
            "truststore={}; truststore-password={}; keystore={}; keystore-password={}; ssl-protocol={}; ssl-alg=null; store-type={}; ssl-ciphers={};",
            path(&self.truststore),
            shown_password(&self.truststore_password),
            path(&self.keystore),
            shown_password(&self.keystore_password),
            self.protocol,
            self.store_type,
            if self.ciphers.is_empty() { "(rustls defaults)".to_string() } else { self.ciphers.join(",") },
        )
    }

    /// The client configuration the driver opens its connections with.
    pub fn client_config(&self) -> Result<ClientConfig> {
        let mut provider = rustls::crypto::ring::default_provider();
        if !self.ciphers.is_empty() {
            provider.cipher_suites = chosen_suites(&provider, &self.ciphers)?;
        }
        let provider = Arc::new(provider);
        let versions: &[&rustls::SupportedProtocolVersion] = match self.protocol.as_str() {
            "TLS" => rustls::ALL_VERSIONS,
            "TLSv1.2" => &[&rustls::version::TLS12],
            "TLSv1.3" => &[&rustls::version::TLS13],
            other => {
                bail!("-transport ssl-protocol={other}: use TLS, TLSv1.2 or TLSv1.3 (older versions are not offered)")
            }
        };
        let mut roots = RootCertStore::empty();
        match &self.truststore {
            Some(path) => {
                for cert in trusted_certificates(path, self.truststore_password.as_deref())? {
                    roots.add(cert).with_context(|| {
                        format!("-transport truststore={}: a certificate rustls cannot use", path.display())
                    })?;
                }
            }
            None => bail!(
                "-transport: name the certificates to trust with truststore= (a JKS or PKCS12 store, or a PEM file)"
            ),
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .context("-transport truststore=: no usable certificate in it")?;
        let builder = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(versions)
            .context("-transport: ssl-ciphers= and ssl-protocol= leave nothing in common")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(verifier)));
        Ok(match &self.keystore {
            Some(path) => {
                let (chain, key) = client_identity(path, self.keystore_password.as_deref())?;
                builder.with_client_auth_cert(chain, key).with_context(|| {
                    format!("-transport keystore={}: its key does not match its certificate", path.display())
                })?
            }
            None => builder.with_no_client_auth(),
        })
    }
}

/// The provider's suites that `names` list, in the provider's order (Java's TLS 1.3 names lack
/// the `13`).
fn chosen_suites(provider: &CryptoProvider, names: &[String]) -> Result<Vec<rustls::SupportedCipherSuite>> {
    let iana = |s: &rustls::SupportedCipherSuite| s.suite().as_str().unwrap_or_default().replacen("TLS13_", "TLS_", 1);
    let chosen: Vec<_> = provider.cipher_suites.iter().filter(|s| names.contains(&iana(s))).copied().collect();
    if chosen.is_empty() {
        let offered: Vec<String> = provider.cipher_suites.iter().map(iana).collect();
        bail!(
            "-transport ssl-ciphers={}: none of these is offered; choose from {}",
            names.join(","),
            offered.join(",")
        );
    }
    Ok(chosen)
}

fn read(path: &Path, option: &str) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("-transport {option}={}: cannot read it", path.display()))
}

fn is_pem(bytes: &[u8]) -> bool {
    bytes.windows(11).any(|w| w == b"-----BEGIN ")
}

/// Every certificate a truststore holds.
pub fn trusted_certificates(path: &Path, password: Option<&str>) -> Result<Vec<CertificateDer<'static>>> {
    certificates_in(&read(path, "truststore")?, password, path)
}

/// Every certificate in a truststore's bytes (PEM, JKS or PKCS12); `path` only names it in errors.
pub fn certificates_in(bytes: &[u8], password: Option<&str>, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = if is_pem(bytes) {
        CertificateDer::pem_slice_iter(bytes)
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("-transport truststore={}: not a PEM certificate file", path.display()))?
    } else if let Some(store) = jks::Store::parse(bytes, password, path)? {
        store.certificates
    } else {
        let store = pkcs12(bytes, password, path, "truststore")?;
        let mut certs = Vec::new();
        for (_, entry) in store.entries() {
            match entry {
                p12_keystore::KeyStoreEntry::Certificate(c) => certs.push(CertificateDer::from(c.as_der().to_vec())),
                p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => {
                    certs.extend(chain.certs().iter().map(|c| CertificateDer::from(c.as_der().to_vec())))
                }
                p12_keystore::KeyStoreEntry::Secret(_) => {}
            }
        }
        certs
    };
    if certs.is_empty() {
        bail!("-transport truststore={}: it holds no certificate", path.display());
    }
    Ok(certs)
}

fn pkcs12(bytes: &[u8], password: Option<&str>, path: &Path, option: &str) -> Result<p12_keystore::KeyStore> {
    let Some(password) = password else {
        bail!("-transport {option}={}: a PKCS12 store needs {option}-password=", path.display());
    };
    p12_keystore::KeyStore::from_pkcs12(bytes, password, p12_keystore::Pkcs12ImportPolicy::Relaxed).map_err(|_| {
        anyhow::anyhow!(
            "-transport {option}={}: not a PEM, JKS or PKCS12 store this password opens; check {option}-password=",
            path.display()
        )
    })
}

/// The certificate chain and private key a client proves itself with.
fn client_identity(
    path: &Path,
    password: Option<&str>,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    identity_in(&read(path, "keystore")?, password, path)
}

/// A keystore's bytes (PEM or PKCS12) as a certificate chain and its private key; `path` only
/// names it in errors.
pub fn identity_in(
    bytes: &[u8],
    password: Option<&str>,
    path: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    if is_pem(bytes) {
        let chain = CertificateDer::pem_slice_iter(bytes).collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(bytes).map_err(|_| {
            anyhow::anyhow!("-transport keystore={}: a PEM keystore holds the key and its certificates", path.display())
        })?;
        return Ok((chain, key));
    }
    if jks::Store::parse(bytes, password, path)?.is_some() {
        bail!(
            "-transport keystore={}: private keys in a JKS store are not read; convert it: keytool -importkeystore -srckeystore {0} -destkeystore client.p12 -deststoretype PKCS12",
            path.display()
        );
    }
    let store = pkcs12(bytes, password, path, "keystore")?;
    let Some((_, chain)) = store.private_key_chain() else {
        bail!("-transport keystore={}: it holds no private key", path.display());
    };
    let certs = chain.certs().iter().map(|c| CertificateDer::from(c.as_der().to_vec())).collect();
    Ok((certs, PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()))))
}

/// webpki's verification without the name check (see the module's comment).
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Java's own keystore format, the one cassandra-stress's `store-type=JKS` names: its trusted
/// certificates, checked against the keyed digest that ends the file when a password is given.
mod jks {
    use super::*;

    const MAGIC: u32 = 0xFEED_FEED;
    const JCEKS_MAGIC: u32 = 0xCECE_CECE;
    const PRIVATE_KEY: u32 = 1;
    const TRUSTED_CERT: u32 = 2;

    pub struct Store {
        pub certificates: Vec<CertificateDer<'static>>,
    }

    struct Reader<'a> {
        bytes: &'a [u8],
        at: usize,
    }

    impl<'a> Reader<'a> {
        fn take(&mut self, n: usize) -> Option<&'a [u8]> {
            let slice = self.bytes.get(self.at..self.at.checked_add(n)?)?;
            self.at += n;
            Some(slice)
        }
        fn u16(&mut self) -> Option<u16> {
            Some(u16::from_be_bytes(self.take(2)?.try_into().ok()?))
        }
        fn u32(&mut self) -> Option<u32> {
            Some(u32::from_be_bytes(self.take(4)?.try_into().ok()?))
        }
        fn utf(&mut self) -> Option<&'a [u8]> {
            let n = self.u16()? as usize;
            self.take(n)
        }
        fn blob(&mut self) -> Option<&'a [u8]> {
            let n = self.u32()? as usize;
            self.take(n)
        }
    }

    impl Store {
        /// `None` when `bytes` are not a JKS store at all.
        pub fn parse(bytes: &[u8], password: Option<&str>, path: &Path) -> Result<Option<Store>> {
            let mut r = Reader { bytes, at: 0 };
            match r.u32() {
                Some(MAGIC) => {}
                Some(JCEKS_MAGIC) => bail!(
                    "-transport: {} is a JCEKS store; convert it: keytool -importkeystore -srckeystore {0} -srcstoretype JCEKS -destkeystore store.p12 -deststoretype PKCS12",
                    path.display()
                ),
                _ => return Ok(None),
            }
            let broken = || anyhow::anyhow!("-transport: {} is a damaged JKS store (it ends early)", path.display());
            let version = r.u32().ok_or_else(broken)?;
            let count = r.u32().ok_or_else(broken)?;
            let mut certificates = Vec::new();
            for _ in 0..count {
                let tag = r.u32().ok_or_else(broken)?;
                r.utf().ok_or_else(broken)?; // alias
                r.take(8).ok_or_else(broken)?; // creation time
                let certs_here = match tag {
                    PRIVATE_KEY => {
                        r.blob().ok_or_else(broken)?;
                        r.u32().ok_or_else(broken)?
                    }
                    TRUSTED_CERT => 1,
                    other => bail!("-transport: {} has a JKS entry of unknown kind {other}", path.display()),
                };
                for _ in 0..certs_here {
                    if version == 2 {
                        r.utf().ok_or_else(broken)?; // "X.509"
                    }
                    let der = r.blob().ok_or_else(broken)?;
                    if tag == TRUSTED_CERT {
                        certificates.push(CertificateDer::from(der.to_vec()));
                    }
                }
            }
            let signed = r.at;
            let digest = r.take(20).ok_or_else(broken)?;
            if let Some(password) = password
                && keyed_digest(password, &bytes[..signed]).as_ref() != digest
            {
                bail!("-transport: {} does not open with the password given (or it was altered)", path.display());
            }
            Ok(Some(Store { certificates }))
        }
    }

    /// SHA-1 over the password (UTF-16BE), Sun's fixed phrase, and the store.
    fn keyed_digest(password: &str, store: &[u8]) -> ring::digest::Digest {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
        for unit in password.encode_utf16() {
            ctx.update(&unit.to_be_bytes());
        }
        ctx.update(b"Mighty Aphrodite");
        ctx.update(store);
        ctx.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transport_never_shows_its_passwords() {
        let t = Transport {
            truststore: Some("t.jks".into()),
            truststore_password: Some("s3cret".into()),
            keystore_password: Some("k3y".into()),
            protocol: "TLS".into(),
            store_type: "JKS".into(),
            ..Default::default()
        };
        let shown = format!("{} {t:?}", t.describe());
        assert!(shown.contains("truststore-password=REDACTED") && shown.contains("keystore-password=REDACTED"));
        assert!(!shown.contains("s3cret") && !shown.contains("k3y"), "{shown}");
    }

    #[test]
    fn a_damaged_or_foreign_store_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let cut = dir.path().join("cut.jks");
        std::fs::write(&cut, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2, 0, 0, 0, 3]).unwrap();
        let e = trusted_certificates(&cut, None).unwrap_err().to_string();
        assert!(e.contains("cut.jks") && e.contains("damaged"), "{e}");
        let junk = dir.path().join("junk.p12");
        std::fs::write(&junk, b"not a store").unwrap();
        let e = trusted_certificates(&junk, Some("pw")).unwrap_err().to_string();
        assert!(e.contains("junk.p12") && e.contains("truststore-password="), "{e}");
    }

    #[test]
    fn ciphers_are_chosen_by_their_java_names() {
        let provider = rustls::crypto::ring::default_provider();
        let chosen = chosen_suites(&provider, &["TLS_AES_128_GCM_SHA256".into()]).unwrap();
        assert_eq!(chosen.len(), 1);
        let e = chosen_suites(&provider, &["TLS_RSA_WITH_AES_128_CBC_SHA".into()]).unwrap_err().to_string();
        assert!(e.contains("choose from") && e.contains("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"), "{e}");
    }
}
