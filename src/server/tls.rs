//! TLS for the webhook: TLS 1.2 and 1.3 only with rustls' modern suites, ALPN `h2` and
//! `http/1.1`, certificates from files reloaded when they change (cert-manager and the kubelet
//! rotate Secret files in place; the next handshake serves the new certificate), or a
//! self-signed CA and serving certificate for development; optionally client certificates
//! verified against a CA (API servers can present one).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("{path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
    #[error("cannot generate a self-signed certificate: {0}")]
    Generate(String),
    #[error("TLS configuration: {0}")]
    Config(String),
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a PEM certificate chain and private key into a signing identity.
pub fn load_certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let read = |p: &Path| {
        std::fs::read(p).map_err(|e| TlsError::Read {
            path: p.to_path_buf(),
            reason: e.to_string(),
        })
    };
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    pem_identity(&cert_pem, &key_pem, cert, key)
}

/// A signing identity from PEM text in memory.
pub fn certified_key_from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, TlsError> {
    pem_identity(
        cert_pem,
        key_pem,
        Path::new("<certificate>"),
        Path::new("<key>"),
    )
}

fn pem_identity(
    cert_pem: &[u8],
    key_pem: &[u8],
    cert: &Path,
    key: &Path,
) -> Result<CertifiedKey, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Invalid {
            path: cert.to_path_buf(),
            reason: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Invalid {
            path: cert.to_path_buf(),
            reason: "no certificate in the file".into(),
        });
    }
    let key_der = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| TlsError::Invalid {
        path: key.to_path_buf(),
        reason: e.to_string(),
    })?;
    CertifiedKey::from_der(chain, key_der, &provider()).map_err(|e| TlsError::Invalid {
        path: key.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The serving identity, swapped atomically when the files change.
pub struct Identity {
    current: ArcSwap<CertifiedKey>,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Identity")
    }
}

impl Identity {
    pub fn new(key: CertifiedKey) -> Arc<Identity> {
        Arc::new(Identity {
            current: ArcSwap::from_pointee(key),
        })
    }

    pub fn replace(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }

    /// When the leaf certificate expires (Unix seconds), for the expiry metric.
    pub fn not_after(&self) -> Option<f64> {
        let key = self.current.load();
        let der = key.cert.first()?;
        not_after(der.as_ref())
    }
}

impl ResolvesServerCert for Identity {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The `notAfter` of a DER certificate, as Unix seconds.
fn not_after(der: &[u8]) -> Option<f64> {
    crate::x509::validity(der).map(|v| v.not_after as f64)
}

/// Builds the server configuration around `identity`.
pub fn server_config(
    identity: Arc<Identity>,
    client_ca: Option<&Path>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| TlsError::Read {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| TlsError::Invalid {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
                roots.add(cert).map_err(|e| TlsError::Invalid {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(identity);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A development CA and a serving certificate it signed.
pub struct SelfSigned {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Generates a CA and a serving certificate for `names` (DNS names or IP addresses).
pub fn self_signed(names: &[String]) -> Result<SelfSigned, TlsError> {
    let g = |e: rcgen::Error| TlsError::Generate(e.to_string());
    let ca_key = rcgen::KeyPair::generate().map_err(g)?;
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(g)?;
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "celgate development CA");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(g)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().map_err(g)?;
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(g)?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().map_or("celgate", String::as_str),
    );
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &issuer).map_err(g)?;
    Ok(SelfSigned {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

/// The files' modification times and sizes: a change means "reload".
fn fingerprint(paths: &[&Path]) -> Vec<Option<(SystemTime, u64)>> {
    paths
        .iter()
        .map(|p| {
            std::fs::metadata(p)
                .ok()
                .map(|m| (m.modified().unwrap_or(UNIX_EPOCH), m.len()))
        })
        .collect()
}

/// Polls the certificate and key files and swaps in the new identity when they change and
/// load; a half-written pair (the key of one, the certificate of another) fails to load and
/// is retried on the next poll, while the current identity keeps serving.
pub async fn watch_files(
    identity: Arc<Identity>,
    cert: PathBuf,
    key: PathBuf,
    every: Duration,
    on_reload: impl Fn(Result<(), &TlsError>) + Send + 'static,
) {
    let mut last = fingerprint(&[&cert, &key]);
    let mut pending = false;
    loop {
        tokio::time::sleep(every).await;
        let now = fingerprint(&[&cert, &key]);
        if now == last && !pending {
            continue;
        }
        last = now;
        match load_certified_key(&cert, &key) {
            Ok(k) => {
                identity.replace(k);
                pending = false;
                on_reload(Ok(()));
            }
            Err(e) => {
                pending = true;
                on_reload(Err(&e));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_loads_and_has_an_expiry() {
        let s = self_signed(&["localhost".into(), "127.0.0.1".into()]).unwrap();
        let dir = std::env::temp_dir().join(format!("celgate-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tls.crt"), &s.cert_pem).unwrap();
        std::fs::write(dir.join("tls.key"), &s.key_pem).unwrap();
        let key = load_certified_key(&dir.join("tls.crt"), &dir.join("tls.key")).unwrap();
        let id = Identity::new(key);
        let expiry = id.not_after().unwrap();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        assert!(expiry > now, "expires in the future");
        assert!(server_config(id, None).is_ok());
        assert!(
            load_certified_key(&dir.join("missing.crt"), &dir.join("tls.key"))
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
    }
}
