//! The service started in-process as the tests start it, and what they read of it: the
//! binary's defaults ([`ServeConfig::default`]) on ephemeral loopback ports, a self-signed
//! certificate for `localhost`, files polled every 100 ms; TLS clients trusting its CA; its
//! metrics.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use celgate::app::{CertSource, PolicySource, Running, ServeConfig};
use celgate::source::folder::FolderSource;
use celgate::source::kube::lease::LeaseOptions;
use celgate::source::kube::KubeOptions;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpStream;

/// `127.0.0.1:0`: a port the system picks.
pub fn ephemeral() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// A self-signed certificate for `localhost`, the name the test clients ask for.
pub fn self_signed_localhost() -> CertSource {
    CertSource::SelfSigned {
        names: vec!["localhost".into()],
    }
}

/// `source` served with the binary's defaults, but on an ephemeral port without a metrics
/// listener, with a self-signed certificate for `localhost`, files polled every 100 ms. A
/// test names what it changes: `ServeConfig { limits, ..serve::config(source) }`.
pub fn config(source: PolicySource) -> ServeConfig {
    ServeConfig {
        source,
        listen: ephemeral(),
        metrics_listen: None,
        cert: self_signed_localhost(),
        poll: Duration::from_millis(100),
        ..ServeConfig::default()
    }
}

/// The policy folder `dir`, a change loaded once no file changed for `settle`.
pub fn folder(dir: &Path, settle: Duration) -> PolicySource {
    PolicySource::Folder(FolderSource {
        settle,
        ..FolderSource::new(dir)
    })
}

/// The cluster behind the (fake) API server at `api`, over plain HTTP, with `options` and
/// no SubjectAccessReview authorizer.
pub fn cluster(api: SocketAddr, options: KubeOptions) -> PolicySource {
    PolicySource::Kubernetes {
        api_url: Some(format!("http://{api}").parse().unwrap()),
        kubeconfig: None,
        options,
        sar: None,
    }
}

/// A replica's cluster options on test timing (changes debounced 20 ms, rechecked every
/// 100 ms), without Events: named `lease` and contending for the [`test_lease`] when `lease`
/// is given, else `celgate-test` without a Lease.
pub fn replica(lease: Option<&str>) -> KubeOptions {
    KubeOptions {
        debounce: Duration::from_millis(20),
        recheck: Duration::from_millis(100),
        events: false,
        instance: lease.unwrap_or("celgate-test").into(),
        events_lease: lease.map(test_lease),
        ..KubeOptions::default()
    }
}

/// The Lease `celgate-system/celgate-events` held as `identity` on test timing: 1 s, renewed
/// every 100 ms.
pub fn test_lease(identity: &str) -> LeaseOptions {
    LeaseOptions {
        namespace: "celgate-system".into(),
        name: "celgate-events".into(),
        identity: identity.into(),
        duration: Duration::from_secs(1),
        renew: Duration::from_millis(100),
        release_timeout: Duration::from_secs(5),
    }
}

/// A client TLS configuration trusting `ca_pem`, offering `alpn` (none when empty), with an
/// optional client certificate.
pub fn client_tls(
    ca_pem: &str,
    alpn: &[u8],
    identity: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let mut cfg = match identity {
        Some((cert, key)) => builder.with_client_auth_cert(vec![cert], key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    if !alpn.is_empty() {
        cfg.alpn_protocols = vec![alpn.to_vec()];
    }
    Arc::new(cfg)
}

/// A plain HTTP/1.1 GET (the metrics listener); `None` when the server closed without
/// answering or cannot be reached.
pub async fn plain_get(addr: SocketAddr, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    (!out.is_empty()).then_some(out)
}

/// The metrics listener's page at `addr` (its HTTP head and body).
pub async fn metrics_page(addr: SocketAddr) -> String {
    plain_get(addr, "/metrics")
        .await
        .expect("the metrics listener answers")
}

/// The metrics page of `server`, encoded in-process (no listener needed).
pub fn metrics_text(server: &Running) -> String {
    String::from_utf8(server.state.metrics.encode()).unwrap()
}

/// The value of the sample `line` (a metric name with its labels, if any) in the metrics
/// page `text`.
pub fn sample(text: &str, line: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
