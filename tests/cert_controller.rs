//! The certificate controller (`celgate serve --cert-secret`) against the in-process fake API
//! server, through the real service: the first start creates the Secret and injects the CA
//! into every webhook of the configuration; further replicas (also racing ones) serve the
//! same Secret; rotation with handshakes flowing never fails a client that trusts only the
//! injected caBundle; an overwritten caBundle is injected again; a MutatingWebhookConfiguration
//! (`--cert-mutating-webhook`) gets the same bundle, also re-injected; and the controller
//! touches nothing but its one Secret and its configurations.

mod common;
mod fake_apiserver;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use celgate::app::{start, CertSource, PolicySource, Running, ServeConfig};
use celgate::certs::{Options, Timing};
use fake_apiserver::{eventually, Fake, Kind};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const NS: &str = "celgate-system";
const SECRET: &str = "celgate-tls";
const WEBHOOK: &str = "celgate";
const NAME: &str = "celgate.celgate-system.svc";

fn kinds() -> Vec<Kind> {
    vec![
        Kind::new("v1", "Secret", "secrets", true),
        Kind::new(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
        ),
        Kind::new(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
        ),
    ]
}

/// The chart's configuration: two webhooks, no caBundle, a field celgate does not model.
fn webhook_configuration() -> Json {
    let hook = |name: &str| {
        json!({
            "name": name,
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"name": "celgate", "namespace": NS, "path": "/validate"}},
            "futureField": {"kept": true},
        })
    };
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK},
        "webhooks": [hook("validate.celgate.dev"), hook("second.celgate.dev")],
    })
}

/// Production timing, but checks every 50 ms.
fn options(timing: Timing) -> Options {
    Options {
        namespace: NS.into(),
        secret: SECRET.into(),
        webhook: WEBHOOK.into(),
        mutating_webhook: None,
        names: vec![NAME.into(), "127.0.0.1".into()],
        timing,
        check_every: Duration::from_millis(50),
    }
}

fn long_lived() -> Timing {
    Timing {
        validity: Duration::from_secs(8760 * 3600),
        renew_before: Duration::from_secs(720 * 3600),
        overlap: Duration::from_secs(60),
    }
}

async fn serve(api: SocketAddr, options: Options) -> Running {
    let cfg = ServeConfig {
        cert: CertSource::Controller {
            connect: celgate::source::kube::Connect {
                api_url: Some(format!("http://{api}").parse().unwrap()),
                kubeconfig: None,
            },
            options,
        },
        ..common::serve::config(PolicySource::Folder(
            celgate::source::folder::FolderSource::new(common::repo().join("examples/policies")),
        ))
    };
    tokio::time::timeout(Duration::from_secs(20), start(cfg))
        .await
        .expect("started within 20 s")
        .expect("server starts")
}

/// The stored Secret's `key`, decoded.
fn secret_data(fake: &Fake, key: &str) -> Option<String> {
    let s = fake.object("secrets", NS, SECRET)?;
    let b = s["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
    String::from_utf8(bytes).ok()
}

/// The caBundle of each webhook of the stored configuration, decoded.
fn ca_bundles(fake: &Fake) -> Vec<Option<String>> {
    let w = fake
        .object("validatingwebhookconfigurations", "", WEBHOOK)
        .expect("the configuration");
    w["webhooks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let b = h["clientConfig"]["caBundle"].as_str()?;
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
            String::from_utf8(bytes).ok()
        })
        .collect()
}

/// A TLS handshake with the webhook, trusting only `ca_pem`, for the Service's name; the
/// certificate served, or the error.
async fn handshake(addr: SocketAddr, ca_pem: &str) -> Result<CertificateDer<'static>, String> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(c.map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from(NAME).unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, session) = tls.get_ref();
    let peer = session.peer_certificates().ok_or("no certificate")?;
    Ok(peer[0].clone().into_owned())
}

fn der_of(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_start_creates_the_secret_and_a_second_replica_reads_it() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    let first = serve(api, options(long_lived())).await;
    let ca = secret_data(&fake, "ca.crt").expect("the Secret was created with a CA");
    let cert = secret_data(&fake, "tls.crt").expect("and a serving certificate");
    assert!(secret_data(&fake, "tls.key").is_some());
    assert_eq!(
        fake.object("secrets", NS, SECRET).unwrap()["type"],
        "kubernetes.io/tls"
    );
    eventually("the CA injected into every webhook", || {
        ca_bundles(&fake) == vec![Some(ca.clone()), Some(ca.clone())]
    })
    .await;
    let w = fake
        .object("validatingwebhookconfigurations", "", WEBHOOK)
        .unwrap();
    assert_eq!(
        w["webhooks"][1]["futureField"],
        json!({"kept": true}),
        "the replace keeps fields celgate does not model"
    );
    let served = handshake(first.bound.webhook, &ca)
        .await
        .expect("handshake");
    assert_eq!(served, der_of(&cert));

    // A second replica serves the same certificate and writes nothing.
    let secret_version =
        fake.object("secrets", NS, SECRET).unwrap()["metadata"]["resourceVersion"].clone();
    let webhook_version = w["metadata"]["resourceVersion"].clone();
    let second = serve(api, options(long_lived())).await;
    let served = handshake(second.bound.webhook, &ca)
        .await
        .expect("handshake");
    assert_eq!(served, der_of(&cert));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        fake.object("secrets", NS, SECRET).unwrap()["metadata"]["resourceVersion"],
        secret_version
    );
    assert_eq!(
        fake.object("validatingwebhookconfigurations", "", WEBHOOK)
            .unwrap()["metadata"]["resourceVersion"],
        webhook_version
    );

    // Only the one Secret and the one configuration, never a list or a watch: the RBAC of
    // the chart (resourceNames, and create of Secrets) is enough.
    let requests = fake.requests.lock().unwrap().clone();
    assert!(!requests.is_empty());
    for r in &requests {
        let (method, target) = r.split_once(' ').unwrap();
        let path = target.split('?').next().unwrap();
        let allowed = path == format!("/api/v1/namespaces/{NS}/secrets/{SECRET}")
            || (method == "POST" && path == format!("/api/v1/namespaces/{NS}/secrets"))
            || path
                == format!(
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{WEBHOOK}"
            );
        assert!(allowed, "unexpected request: {r}");
    }
    assert_eq!(
        requests.iter().filter(|r| r.starts_with("POST")).count(),
        1,
        "one create: {requests:?}"
    );
    first.shutdown().await;
    second.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_starting_together_agree_on_one_secret() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    let (a, b, c) = tokio::join!(
        serve(api, options(long_lived())),
        serve(api, options(long_lived())),
        serve(api, options(long_lived())),
    );
    let ca = secret_data(&fake, "ca.crt").unwrap();
    let cert = der_of(&secret_data(&fake, "tls.crt").unwrap());
    // A replica whose create lost read the winner's Secret before serving anything.
    for r in [&a, &b, &c] {
        let served = handshake(r.bound.webhook, &ca).await.expect("handshake");
        assert_eq!(served, cert);
    }
    eventually("the stored CA injected", || {
        ca_bundles(&fake)
            .iter()
            .all(|b| b.as_deref() == Some(ca.as_str()))
    })
    .await;
    for r in [a, b, c] {
        r.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_with_handshakes_flowing_fails_none() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    // A certificate lives 5 s and is replaced 3 s before it expires: a rotation every 2 to
    // 3 s (certificate times are whole seconds), each in steps 400 ms apart.
    let timing = Timing {
        validity: Duration::from_secs(5),
        renew_before: Duration::from_secs(3),
        overlap: Duration::from_millis(400),
    };
    let mut opts = options(timing);
    opts.check_every = Duration::from_millis(50);
    let replicas = [serve(api, opts.clone()).await, serve(api, opts).await];
    let addrs: Vec<SocketAddr> = replicas.iter().map(|r| r.bound.webhook).collect();
    eventually("the first CA injected", || ca_bundles(&fake)[0].is_some()).await;

    // The API server's part: it sees each caBundle (every webhook's) 150 ms after it was
    // written, as through an informer, and calls the replicas in turn with what it sees.
    let stop = Arc::new(AtomicBool::new(false));
    let history = Arc::new(Mutex::new(Vec::<(Instant, String)>::new()));
    let informer = {
        let (fake, stop, history) = (fake.clone(), stop.clone(), history.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                let now = ca_bundles(&fake);
                let bundle = now[0].clone().expect("a caBundle");
                assert!(now.iter().all(|b| b.as_deref() == Some(bundle.as_str())));
                {
                    let mut h = history.lock().unwrap();
                    if h.last().map(|(_, b)| b) != Some(&bundle) {
                        h.push((Instant::now(), bundle));
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let lagging = {
        let history = history.clone();
        move || {
            let h = history.lock().unwrap();
            let seen_by = Instant::now() - Duration::from_millis(150);
            h.iter()
                .rev()
                .find(|(at, _)| *at <= seen_by)
                .or(h.first())
                .map(|(_, b)| b.clone())
                .expect("a caBundle")
        }
    };
    // The clients start once the informer has seen a first bundle (on a loaded machine its
    // task may not have run yet).
    eventually("the informer sees the first caBundle", || {
        !history.lock().unwrap().is_empty()
    })
    .await;
    let seen = Arc::new(Mutex::new(Vec::<CertificateDer<'static>>::new()));
    let mut clients = Vec::new();
    for i in 0..2 {
        let (stop, seen, lagging) = (stop.clone(), seen.clone(), lagging.clone());
        let addrs = addrs.clone();
        clients.push(tokio::spawn(async move {
            let mut handshakes = 0;
            let mut n = i;
            while !stop.load(Ordering::SeqCst) {
                let bundle = lagging();
                let served = handshake(addrs[n % addrs.len()], &bundle)
                    .await
                    .unwrap_or_else(|e| panic!("handshake {handshakes} failed: {e}"));
                handshakes += 1;
                n += 1;
                {
                    let mut s = seen.lock().unwrap();
                    if !s.contains(&served) {
                        s.push(served);
                    }
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            handshakes
        }));
    }
    tokio::time::sleep(Duration::from_millis(7500)).await;
    stop.store(true, Ordering::SeqCst);
    let mut total = 0;
    for c in clients {
        total += c.await.expect("no failed handshake");
    }
    informer.await.expect("every webhook had the same caBundle");
    let certificates = seen.lock().unwrap().len();
    assert!(total > 100, "only {total} handshakes");
    assert!(
        certificates >= 3,
        "at least two rotations seen by the clients, got {certificates} certificates"
    );
    // The bundle went from one CA to two and back to one, each time.
    let history = history.lock().unwrap().clone();
    let sizes: Vec<usize> = history
        .iter()
        .map(|(_, b)| CertificateDer::pem_slice_iter(b.as_bytes()).count())
        .collect();
    assert!(
        sizes.windows(3).any(|w| w == [1, 2, 1]),
        "old and new CA trusted together during a switch: {sizes:?}"
    );
    for r in replicas {
        r.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwritten_or_recreated_ca_bundle_is_injected_again() {
    let (fake, api) = Fake::start(&kinds()).await;
    // The configuration does not exist yet at start (installed after the Deployment).
    let running = serve(api, options(long_lived())).await;
    let ca = secret_data(&fake, "ca.crt").unwrap();
    fake.apply(webhook_configuration());
    let injected = || {
        ca_bundles(&fake)
            .iter()
            .all(|b| b.as_deref() == Some(ca.as_str()))
    };
    eventually("injected once the configuration exists", injected).await;

    // A GitOps sync writes the rendered configuration back, with an empty caBundle.
    let mut synced = webhook_configuration();
    synced["webhooks"][0]["clientConfig"]["caBundle"] = json!("");
    fake.apply(synced);
    assert!(!injected());
    eventually("injected again after an overwrite", injected).await;

    // Someone puts another CA there.
    let mut other = webhook_configuration();
    let foreign = celgate::server::tls::self_signed(&["x".into()])
        .unwrap()
        .ca_pem;
    other["webhooks"][1]["clientConfig"]["caBundle"] =
        json!(base64::engine::general_purpose::STANDARD.encode(foreign));
    fake.apply(other);
    eventually("injected again after a foreign CA", injected).await;
    assert_eq!(
        secret_data(&fake, "ca.crt").unwrap(),
        ca,
        "the CA itself is kept"
    );
    running.shutdown().await;
}

/// The chart's MutatingWebhookConfiguration (`mutating.enabled`): one webhook on `/mutate`.
fn mutating_configuration() -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK},
        "webhooks": [{
            "name": "mutate.celgate.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "reinvocationPolicy": "IfNeeded",
            "clientConfig": {"service": {"name": "celgate", "namespace": NS, "path": "/mutate"}},
        }],
    })
}

/// The caBundle of the stored MutatingWebhookConfiguration's webhook, decoded.
fn mutating_ca_bundle(fake: &Fake) -> Option<String> {
    let w = fake.object("mutatingwebhookconfigurations", "", WEBHOOK)?;
    let b = w["webhooks"][0]["clientConfig"]["caBundle"].as_str()?;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(b).ok()?).ok()
}

/// With `--cert-mutating-webhook`, the MutatingWebhookConfiguration gets the same bundle as
/// the validating one, and gets it again when a sync empties it; the replace keeps its other
/// fields; only those two configurations and the Secret are touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mutating_configuration_gets_the_same_ca_bundle() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    fake.apply(mutating_configuration());
    let running = serve(
        api,
        Options {
            mutating_webhook: Some(WEBHOOK.into()),
            ..options(long_lived())
        },
    )
    .await;
    let ca = secret_data(&fake, "ca.crt").unwrap();
    let injected = || {
        mutating_ca_bundle(&fake).as_deref() == Some(ca.as_str())
            && ca_bundles(&fake)
                .iter()
                .all(|b| b.as_deref() == Some(ca.as_str()))
    };
    eventually("the CA injected into both configurations", injected).await;
    let w = fake
        .object("mutatingwebhookconfigurations", "", WEBHOOK)
        .unwrap();
    assert_eq!(w["webhooks"][0]["reinvocationPolicy"], "IfNeeded");
    assert_eq!(
        w["webhooks"][0]["clientConfig"]["service"]["path"],
        "/mutate"
    );

    // A GitOps sync writes the rendered mutating configuration back, without a caBundle.
    fake.apply(mutating_configuration());
    assert!(!injected());
    eventually("injected again after an overwrite", injected).await;

    let requests = fake.requests.lock().unwrap().clone();
    for r in &requests {
        let path = r.split_once(' ').unwrap().1.split('?').next().unwrap();
        let allowed = path.starts_with(&format!("/api/v1/namespaces/{NS}/secrets"))
            || [
                "validatingwebhookconfigurations",
                "mutatingwebhookconfigurations",
            ]
            .iter()
            .any(|p| path == format!("/apis/admissionregistration.k8s.io/v1/{p}/{WEBHOOK}"));
        assert!(allowed, "unexpected request: {r}");
    }
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_secret_is_replaced_and_served() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    fake.apply(json!({
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": SECRET, "namespace": NS},
        "data": {"ca.crt": "bm90IGEgY2VydA==", "tls.crt": "", "tls.key": ""},
    }));
    let running = serve(api, options(long_lived())).await;
    let ca = secret_data(&fake, "ca.crt").unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let served = handshake(running.bound.webhook, &ca)
        .await
        .expect("handshake");
    assert_eq!(served, der_of(&secret_data(&fake, "tls.crt").unwrap()));
    running.shutdown().await;
}

#[test]
fn settings_that_cannot_rotate_in_time_are_refused() {
    let mut o = options(long_lived());
    assert_eq!(o.check(), Ok(()));
    o.timing.renew_before = Duration::from_secs(100);
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .contains("--cert-renew-before"));
    o = options(long_lived());
    o.timing.overlap = Duration::from_millis(60);
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .contains("--cert-overlap"));
    o = options(long_lived());
    o.timing.validity = o.timing.renew_before;
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .contains("--cert-validity"));
    o = options(long_lived());
    o.names = vec!["not a name".into()];
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .contains("--cert-dns-name"));
    o.names.clear();
    assert!(o
        .check()
        .unwrap_err()
        .to_string()
        .contains("--cert-dns-name"));
}
