//! Integration tests of `celgate serve`: the real server on ephemeral ports, a real TLS client
//! (rustls) speaking HTTP/1.1 and HTTP/2.

mod common;
mod fake_apiserver;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use celgate::app::{start, CertSource, PolicySource, Running, ServeConfig};
use celgate::server::tls::self_signed;
use celgate::server::{Answering, Limits};
use common::serve::{client_tls, ephemeral, metrics_page, self_signed_localhost};
use common::{serve_flags, temp_dir};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::ServerName;
use serde_json::{json, Value as Json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-debug}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "!has(object.data) || !('debug' in object.data)"
    message: no debug configmaps
  auditAnnotations:
  - {key: name, valueExpression: "string(object.metadata.name)"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-debug}
spec: {policyName: no-debug, validationActions: [ACTIONS]}
"#;

fn write_policy(dir: &Path, actions: &str) {
    std::fs::write(dir.join("policy.yaml"), POLICY.replace("ACTIONS", actions)).unwrap();
}

fn review(api: &str, data: Json) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": api, "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            // As the API server sends a typed object: creationTimestamp written, null.
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default", "creationTimestamp": null}, "data": data},
            "oldObject": null, "dryRun": false
        }
    }))
    .unwrap()
}

/// A folder source whose changes load once quiet for 100 ms.
fn folder(dir: &Path) -> PolicySource {
    common::serve::folder(dir, Duration::from_millis(100))
}

async fn serve(policies: &Path, cert: CertSource, limits: Limits) -> Running {
    serve_answering(policies, cert, limits, Answering::default()).await
}

/// [`serve`] in the given mode.
async fn serve_answering(
    policies: &Path,
    cert: CertSource,
    limits: Limits,
    answering: Answering,
) -> Running {
    let cfg = ServeConfig {
        metrics_listen: Some(ephemeral()),
        cert,
        limits,
        answering,
        ..common::serve::config(folder(policies))
    };
    start(cfg).await.expect("server starts")
}

/// [`serve`] with a self-signed certificate for `localhost`.
async fn serve_self_signed(policies: &Path, limits: Limits) -> Running {
    serve(policies, self_signed_localhost(), limits).await
}

/// A TLS client trusting `ca_pem`; `http2` picks the protocol by ALPN.
async fn call(
    addr: SocketAddr,
    ca_pem: &str,
    http2: bool,
    path: &str,
    content_type: &str,
    body: Vec<u8>,
) -> Result<(u16, Vec<u8>), String> {
    let cfg = client_tls(ca_pem, if http2 { b"h2" } else { b"http/1.1" }, None);
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let tls = TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let negotiated_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    assert_eq!(negotiated_h2, http2, "ALPN picked the asked protocol");
    let req = hyper::Request::builder()
        .method(if body.is_empty() { "GET" } else { "POST" })
        .uri(format!("https://localhost:{}{path}", addr.port()))
        .header("content-type", content_type)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let io = TokioIo::new(tls);
    let resp = if http2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender.send_request(req).await.map_err(|e| e.to_string())?
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender.send_request(req).await.map_err(|e| e.to_string())?
    };
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes()
        .to_vec();
    Ok((status, bytes))
}

fn answer(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_over_http1_and_http2() {
    let dir = temp_dir("decisions");
    write_policy(&dir, "Deny");
    let server = serve_self_signed(&dir, Limits::default()).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    for http2 in [false, true] {
        let (status, body) = call(
            addr,
            &ca,
            http2,
            "/validate?timeout=10s",
            "application/json",
            review("admission.k8s.io/v1", json!({"debug": "1"})),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        let a = answer(&body);
        assert_eq!(a["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(a["response"]["uid"], "u-1");
        assert_eq!(a["response"]["allowed"], false);
        assert_eq!(a["response"]["status"]["code"], 422);
        assert_eq!(a["response"]["status"]["message"], "ValidatingAdmissionPolicy 'no-debug' with binding 'no-debug' denied request: no debug configmaps");
        assert_eq!(a["response"]["auditAnnotations"]["no-debug_name"], "cm");

        let (_, body) = call(
            addr,
            &ca,
            http2,
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", json!({"ok": "1"})),
        )
        .await
        .unwrap();
        assert_eq!(answer(&body)["response"]["allowed"], true);

        let (_, body) = call(
            addr,
            &ca,
            http2,
            "/validate",
            "application/json; charset=utf-8",
            review("admission.k8s.io/v1beta1", json!({"debug": "1"})),
        )
        .await
        .unwrap();
        let a = answer(&body);
        assert_eq!(
            a["apiVersion"], "admission.k8s.io/v1beta1",
            "answered in the request's version"
        );
        assert_eq!(a["response"]["allowed"], false);
    }
    let (status, _) = call(addr, &ca, false, "/healthz", "text/plain", vec![])
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, _) = call(addr, &ca, true, "/readyz", "text/plain", vec![])
        .await
        .unwrap();
    assert_eq!(status, 200);
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(metrics.contains(r#"celgate_validating_admission_policy_check_total{enforcement_action="deny",error_type="invalid_error",policy="no-debug",policy_binding="no-debug"} 4"#), "{metrics}");
    assert!(metrics.contains(r#"celgate_requests_total{decision="denied",operation="CREATE"} 4"#));
    assert!(metrics.contains("celgate_policies_loaded 1"));
    assert!(metrics.contains("celgate_certificate_expiry_timestamp_seconds"));
    assert!(metrics.contains("celgate_request_duration_seconds_bucket{decision=\"allowed\",operation=\"CREATE\",le=\"0.00005\"}"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warn_and_audit_actions() {
    let dir = temp_dir("actions");
    write_policy(&dir, "Warn, Audit");
    let server = serve_self_signed(&dir, Limits::default()).await;
    let ca = server.ca_pem.clone().unwrap();
    let (_, body) = call(
        server.bound.webhook,
        &ca,
        true,
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", json!({"debug": "1"})),
    )
    .await
    .unwrap();
    let a = answer(&body);
    assert_eq!(a["response"]["allowed"], true);
    assert_eq!(a["response"]["warnings"][0], "Validation failed for ValidatingAdmissionPolicy 'no-debug' with binding 'no-debug': no debug configmaps");
    let record: Json = serde_json::from_str(
        a["response"]["auditAnnotations"]["validation_failure"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record[0]["validationActions"], json!(["Warn", "Audit"]));
    server.shutdown().await;
}

/// Observe mode: a policy that denies (and warns, and audits) is evaluated as in enforce
/// mode, but the answer is always allowed, without warnings or audit annotations, in the
/// request's version; the request counts as allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observe_mode_never_denies_and_never_warns() {
    let dir = temp_dir("observe");
    write_policy(&dir, "Deny, Audit");
    std::fs::write(
        dir.join("warn.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: no-debug-warn}\nspec: {policyName: no-debug, validationActions: [Warn]}\n",
    )
    .unwrap();
    let answering = Answering {
        mode: celgate::review::Mode::Observe,
        ..Answering::default()
    };
    let server = serve_answering(
        &dir,
        CertSource::SelfSigned {
            names: vec!["localhost".into()],
        },
        Limits::default(),
        answering,
    )
    .await;
    let ca = server.ca_pem.clone().unwrap();
    for (http2, api) in [
        (false, "admission.k8s.io/v1"),
        (true, "admission.k8s.io/v1beta1"),
    ] {
        let (status, body) = call(
            server.bound.webhook,
            &ca,
            http2,
            "/validate?timeout=10s",
            "application/json",
            review(api, json!({"debug": "1"})),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            answer(&body),
            json!({"apiVersion": api, "kind": "AdmissionReview",
                   "response": {"uid": "u-1", "allowed": true}}),
            "allowed, nothing else"
        );
    }
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    // Evaluated as in enforce mode: the check metrics record the denial that was not sent.
    assert!(metrics.contains(r#"celgate_validating_admission_policy_check_total{enforcement_action="deny",error_type="invalid_error",policy="no-debug",policy_binding="no-debug"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"celgate_validating_admission_policy_check_total{enforcement_action="warn",error_type="invalid_error",policy="no-debug",policy_binding="no-debug-warn"} 2"#), "{metrics}");
    assert!(
        metrics.contains(r#"celgate_requests_total{decision="allowed",operation="CREATE"} 2"#),
        "{metrics}"
    );
    assert!(!metrics.contains(r#"decision="denied""#), "{metrics}");
    // And each result is counted, per binding and action.
    assert!(metrics.contains(r#"celgate_policy_results_total{action="deny",binding="no-debug",policy="no-debug",result="fail",source="admission"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"celgate_policy_results_total{action="audit",binding="no-debug",policy="no-debug",result="fail",source="admission"} 2"#), "{metrics}");
    assert!(metrics.contains(r#"celgate_policy_results_total{action="warn",binding="no-debug-warn",policy="no-debug",result="fail",source="admission"} 2"#), "{metrics}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_clear_answer() {
    let dir = temp_dir("bad");
    write_policy(&dir, "Deny");
    let limits = Limits {
        max_body: 4096,
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "application/json",
            b"{not json".to_vec(),
            400,
            "malformed JSON",
        ),
        (
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec(),
            400,
            "no request",
        ),
        (
            "application/json",
            br#"{"apiVersion":"admission.k8s.io/v2","request":{}}"#.to_vec(),
            400,
            "unsupported AdmissionReview apiVersion",
        ),
        (
            "text/plain",
            review("admission.k8s.io/v1", json!({})),
            415,
            "application/json",
        ),
        (
            "application/json",
            review("admission.k8s.io/v1", json!({"big": "x".repeat(8000)})),
            413,
            "exceeds 4096 bytes",
        ),
    ];
    for http2 in [false, true] {
        for (ct, body, want, text) in &cases {
            let (status, got) = call(addr, &ca, http2, "/validate", ct, body.clone())
                .await
                .unwrap();
            assert_eq!(status, *want, "{text}");
            assert!(
                String::from_utf8_lossy(&got).contains(text),
                "{} does not say {text}",
                String::from_utf8_lossy(&got)
            );
        }
    }
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(
        metrics.contains(r#"celgate_bad_requests_total{reason="too_large"} 2"#),
        "{metrics}"
    );
    server.shutdown().await;
}

/// A fresh server exports the series of the dashboard's "Refused requests" and
/// "Configuration problems" panels at 0 (one per reason), so they show a flat line rather
/// than "No data" before the first refusal or problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn problem_and_refusal_series_start_at_zero() {
    let dir = temp_dir("zero-series");
    write_policy(&dir, "Deny");
    let server = serve_self_signed(&dir, Limits::default()).await;
    let text = metrics_page(server.bound.metrics.unwrap()).await;
    for line in [
        r#"celgate_bad_requests_total{reason="too_large"} 0"#,
        r#"celgate_bad_requests_total{reason="overloaded"} 0"#,
        r#"celgate_config_problems{kind="",name="",reason="PolicyNotFound"} 0"#,
        r#"celgate_config_problems{kind="",name="",reason="InvalidPolicy"} 0"#,
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "{line} missing from\n{text}"
        );
    }
    server.shutdown().await;
}

/// An HTTP/2 request whose body is sent in two parts: `head` with the headers, then, once the
/// answer is in and `pause` has passed, `tail` with END_STREAM. Returns the answer and
/// whether the stream was reset before the client had sent its whole body (what curl reports
/// as "Stream error in the HTTP/2 framing layer", without the answer).
async fn h2_two_part_body(
    addr: SocketAddr,
    ca_pem: &str,
    content_type: &str,
    head: usize,
    tail: usize,
    pause: Duration,
) -> (u16, String, bool) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let tls = TlsConnector::from(client_tls(ca_pem, b"h2", None))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (client, connection) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let req = hyper::Request::builder()
        .method("POST")
        .uri(format!("https://localhost:{}/validate", addr.port()))
        .header("content-type", content_type)
        .header("content-length", head + tail)
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(req, false).unwrap();
    let mut reset = send
        .send_data(Bytes::from(vec![b' '; head]), false)
        .is_err();
    // The answer comes before the body is complete.
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .expect("an answer before the body is complete")
        .unwrap();
    let status = response.status().as_u16();
    let mut body = response.into_body();
    let mut text = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        text.extend_from_slice(&chunk);
    }
    tokio::time::sleep(pause).await;
    // The rest of the body, a frame at a time, as flow control lets it through.
    let mut left = tail;
    while left > 0 && !reset {
        let n = left.min(16 << 10);
        send.reserve_capacity(n);
        let capacity = tokio::time::timeout(
            Duration::from_secs(5),
            std::future::poll_fn(|cx| send.poll_capacity(cx)),
        )
        .await;
        match capacity {
            Ok(Some(Ok(c))) if c > 0 => {
                let c = c.min(left);
                left -= c;
                reset = send
                    .send_data(Bytes::from(vec![b' '; c]), left == 0)
                    .is_err();
            }
            Ok(Some(Ok(_))) => {}
            _ => reset = true,
        }
    }
    if tail == 0 && !reset {
        reset = send.send_data(Bytes::new(), true).is_err();
    }
    // A reset sent after the last frame left would still be one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let late = std::future::poll_fn(|cx| match send.poll_reset(cx) {
        std::task::Poll::Ready(Ok(_)) => std::task::Poll::Ready(true),
        _ => std::task::Poll::Ready(false),
    })
    .await;
    (
        status,
        String::from_utf8_lossy(&text).into_owned(),
        reset || late,
    )
}

/// HTTP/2 early refusals (503 before the first load, 415, 413) answer before reading the
/// body, and then read the rest of it (bounded), so that the stream ends cleanly and the
/// client gets the answer: resetting the stream while the client still sends makes curl
/// report a framing error instead. Past the bounds the stream is reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_early_refusals_end_the_stream_cleanly() {
    let dir = temp_dir("h2-refusals");
    write_policy(&dir, "Deny");
    let limits = Limits {
        max_body: 64 << 10,
        client_timeout: Duration::from_millis(800),
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits.clone()).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    let pause = Duration::from_millis(100);
    // Wrong content type, and a body over the limit: the rest follows the answer.
    for (content_type, head, tail, want, text) in [
        ("text/plain", 1000, 40 << 10, 415, "application/json"),
        (
            "application/json",
            70 << 10,
            40 << 10,
            413,
            "exceeds 65536 bytes",
        ),
    ] {
        let (status, body, reset) =
            h2_two_part_body(addr, &ca, content_type, head, tail, pause).await;
        assert_eq!(status, want);
        assert!(body.contains(text), "{body}");
        assert!(
            !reset,
            "{want}: the stream was reset while the client was sending"
        );
    }
    // Past the byte bound, and past the time bound: the stream is reset. (Beyond the bound
    // by more than the stream's flow-control window, which the server's transport accepts
    // whatever the handler does.)
    let (status, _, reset) = h2_two_part_body(addr, &ca, "text/plain", 1000, 3 << 20, pause).await;
    assert_eq!((status, reset), (415, true), "more than the drain takes");
    let (status, _, reset) = h2_two_part_body(
        addr,
        &ca,
        "text/plain",
        1000,
        1000,
        Duration::from_millis(1500),
    )
    .await;
    assert_eq!((status, reset), (415, true), "later than the drain waits");
    server.shutdown().await;

    // Not ready yet (the folder does not load): 503, and the stream ends cleanly too.
    let broken = temp_dir("h2-refusals-broken");
    std::fs::write(broken.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    let server = serve_self_signed(&broken, limits).await;
    let ca = server.ca_pem.clone().unwrap();
    let (status, body, reset) = h2_two_part_body(
        server.bound.webhook,
        &ca,
        "application/json",
        1000,
        1000,
        pause,
    )
    .await;
    assert_eq!(status, 503);
    assert!(body.contains("not yet ready"), "{body}");
    assert!(
        !reset,
        "503: the stream was reset while the client was sending"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_folder_changes_are_seen_by_the_next_request() {
    let dir = temp_dir("reload");
    write_policy(&dir, "Warn");
    let server = serve_self_signed(&dir, Limits::default()).await;
    let ca = server.ca_pem.clone().unwrap();
    let body = review("admission.k8s.io/v1", json!({"debug": "1"}));
    let (_, got) = call(
        server.bound.webhook,
        &ca,
        false,
        "/validate",
        "application/json",
        body.clone(),
    )
    .await
    .unwrap();
    assert_eq!(answer(&got)["response"]["allowed"], true);
    write_policy(&dir, "Deny");
    let mut denied = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, got) = call(
            server.bound.webhook,
            &ca,
            false,
            "/validate",
            "application/json",
            body.clone(),
        )
        .await
        .unwrap();
        if answer(&got)["response"]["allowed"] == false {
            denied = true;
            break;
        }
    }
    assert!(denied, "the new policy applies after the folder changed");
    // A broken file keeps the last good snapshot, and is counted.
    std::fs::write(dir.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    // The refused load is counted: the signal that the broken folder was read.
    for _ in 0..100 {
        let metrics = String::from_utf8(server.state.metrics.encode()).unwrap();
        if metrics.contains("celgate_source_load_errors_total 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (_, got) = call(
        server.bound.webhook,
        &ca,
        false,
        "/validate",
        "application/json",
        body,
    )
    .await
    .unwrap();
    assert_eq!(
        answer(&got)["response"]["allowed"],
        false,
        "the last good snapshot still serves"
    );
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(
        metrics.contains("celgate_source_load_errors_total 1"),
        "{metrics}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificate_files_serve_the_next_handshake() {
    let dir = temp_dir("rotate");
    write_policy(&dir, "Deny");
    let first = self_signed(&["localhost".into()]).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, &first.cert_pem).unwrap();
    std::fs::write(&key, &first.key_pem).unwrap();
    let server = serve(
        &dir,
        CertSource::Files {
            cert: cert.clone(),
            key: key.clone(),
        },
        Limits::default(),
    )
    .await;
    let addr = server.bound.webhook;
    assert!(
        call(addr, &first.ca_pem, true, "/healthz", "text/plain", vec![])
            .await
            .is_ok()
    );
    let second = self_signed(&["localhost".into()]).unwrap();
    std::fs::write(&key, &second.key_pem).unwrap();
    std::fs::write(&cert, &second.cert_pem).unwrap();
    let mut rotated = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if call(
            addr,
            &second.ca_pem,
            false,
            "/healthz",
            "text/plain",
            vec![],
        )
        .await
        .is_ok()
        {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "a new handshake presents the new certificate");
    assert!(
        call(addr, &first.ca_pem, false, "/healthz", "text/plain", vec![])
            .await
            .is_err(),
        "the old one is gone"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_policies_load() {
    let dir = temp_dir("notready");
    std::fs::write(dir.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    let server = serve_self_signed(&dir, Limits::default()).await;
    let ca = server.ca_pem.clone().unwrap();
    let (status, _) = call(
        server.bound.webhook,
        &ca,
        false,
        "/readyz",
        "text/plain",
        vec![],
    )
    .await
    .unwrap();
    assert_eq!(status, 503);
    std::fs::remove_file(dir.join("broken.yaml")).unwrap();
    write_policy(&dir, "Deny");
    let mut ready = false;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if call(
            server.bound.webhook,
            &ca,
            false,
            "/readyz",
            "text/plain",
            vec![],
        )
        .await
        .unwrap()
        .0 == 200
        {
            ready = true;
            break;
        }
    }
    assert!(ready);
    server.shutdown().await;
}

/// A request in a namespace the policy folder does not define, under a policy that selects
/// namespaces (the usual "all but kube-system"): served as a bare namespace by default, so the
/// policy decides; with strict namespaces (`--strict-namespaces`, and `celgate eval`) it is the
/// API server's `namespaces "team-a" not found`, under the failurePolicy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespaces_the_folder_does_not_define() {
    let dir = temp_dir("bare-namespaces");
    let selecting = POLICY.replace(
        "  matchConstraints:\n",
        "  matchConstraints:\n    namespaceSelector:\n      matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]\n",
    );
    std::fs::write(
        dir.join("policy.yaml"),
        selecting.replace("ACTIONS", "Deny"),
    )
    .unwrap();
    let in_team_a = |data: Json| {
        let mut r: Json = serde_json::from_slice(&review("admission.k8s.io/v1", data)).unwrap();
        r["request"]["namespace"] = json!("team-a");
        r["request"]["object"]["metadata"]["namespace"] = json!("team-a");
        serde_json::to_vec(&r).unwrap()
    };
    for strict in [false, true] {
        let cfg = common::serve::config(PolicySource::Folder(
            celgate::source::folder::FolderSource {
                strict_namespaces: strict,
                ..celgate::source::folder::FolderSource::new(&dir)
            },
        ));
        let server = start(cfg).await.expect("server starts");
        let ca = server.ca_pem.clone().unwrap();
        let decide = |body: Vec<u8>| {
            let ca = ca.clone();
            let addr = server.bound.webhook;
            async move {
                let (status, body) = call(addr, &ca, true, "/validate", "application/json", body)
                    .await
                    .unwrap();
                assert_eq!(status, 200);
                answer(&body)["response"].clone()
            }
        };
        let ok = decide(in_team_a(json!({"ok": "1"}))).await;
        let debug = decide(in_team_a(json!({"debug": "1"}))).await;
        let debug_message = debug["status"]["message"].as_str().unwrap_or_default();
        if strict {
            for a in [&ok, &debug] {
                assert_eq!(a["allowed"], false);
                let message = a["status"]["message"].as_str().unwrap();
                assert!(
                    message
                        .ends_with("failed to configure policy: namespaces \"team-a\" not found"),
                    "{message}"
                );
            }
        } else {
            assert_eq!(ok["allowed"], true, "{ok}");
            assert_eq!(debug["allowed"], false);
            assert!(
                debug_message.ends_with("no debug configmaps"),
                "{debug_message}"
            );
        }
        server.shutdown().await;
    }
}

/// A raw TLS connection trusting `ca_pem`, for clients that misbehave.
async fn raw_tls(addr: SocketAddr, ca_pem: &str) -> tokio_rustls::client::TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    TlsConnector::from(client_tls(ca_pem, b"http/1.1", None))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_and_overload() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = temp_dir("slow");
    write_policy(&dir, "Deny");
    let limits = Limits {
        client_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;

    // Headers that never finish: the connection is closed after the header timeout.
    let mut s = raw_tls(addr, &ca).await;
    s.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server gives up on slow headers");

    // A body that never finishes: 408.
    let mut s = raw_tls(addr, &ca).await;
    s.write_all(b"POST /validate HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"a\"").await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("an answer in time")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    server.shutdown().await;

    // No room for another review: 429 at once.
    let limits = Limits {
        max_inflight: 0,
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let ca = server.ca_pem.clone().unwrap();
    let (status, body) = call(
        server.bound.webhook,
        &ca,
        true,
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(status, 429);
    assert!(String::from_utf8_lossy(&body).contains("too many reviews in flight"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_with_client_ca() {
    let dir = temp_dir("mtls");
    write_policy(&dir, "Deny");
    // A client CA and a client certificate it signed.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let client_key = rcgen::KeyPair::generate().unwrap();
    let mut client_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "kube-apiserver");
    client_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client_params.signed_by(&client_key, &issuer).unwrap();
    std::fs::write(dir.join("client-ca.pem"), ca_cert.pem()).unwrap();

    let cfg = ServeConfig {
        client_ca: Some(dir.join("client-ca.pem")),
        ..common::serve::config(folder(&dir))
    };
    let server = start(cfg).await.unwrap();
    let server_ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    assert!(
        call(addr, &server_ca, false, "/healthz", "text/plain", vec![])
            .await
            .is_err(),
        "no client certificate: refused"
    );

    let key =
        rustls::pki_types::PrivateKeyDer::from_pem_slice(client_key.serialize_pem().as_bytes())
            .unwrap();
    let cfg = client_tls(
        &server_ca,
        b"http/1.1",
        Some((client_cert.der().clone(), key)),
    );
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = TlsConnector::from(cfg)
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    server.shutdown().await;
}

/// `--source kubernetes` end to end: the real server on the cluster source of a fake API
/// server. Not ready (and /validate answers 503, so the API server applies the webhook's
/// failurePolicy) until the initial lists complete; then the cluster's policies decide, and
/// /metrics shows each source's sync and staleness and the misconfigured objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_source_end_to_end() {
    use fake_apiserver::{policy_kinds, Fake, Kind};
    let mut kinds = policy_kinds("v1").to_vec();
    kinds.push(Kind::new("v1", "Namespace", "namespaces", false));
    kinds.push(Kind::new("events.k8s.io/v1", "Event", "events", true));
    let (fake, api) = Fake::start(&kinds).await;
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-forbidden"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "!has(object.data) || !('forbidden' in object.data)", "reason": "Forbidden"}]
        }
    }));
    fake.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "no-forbidden"}, "spec": {"policyName": "no-forbidden", "validationActions": ["Deny"]}}));
    fake.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "orphan"}, "spec": {"policyName": "nosuch", "validationActions": ["Deny"]}}));
    fake.stall("namespaces");
    let cfg = ServeConfig {
        metrics_listen: Some(ephemeral()),
        ..common::serve::config(PolicySource::Kubernetes {
            api_url: Some(format!("http://{api}").parse().unwrap()),
            kubeconfig: None,
            options: celgate::source::kube::KubeOptions {
                debounce: Duration::from_millis(20),
                recheck: Duration::from_millis(200),
                ..Default::default()
            },
            sar: Some(Default::default()),
        })
    };
    let server = start(cfg).await.expect("server starts");
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    let get = |path: &'static str| {
        let ca = ca.clone();
        async move {
            call(addr, &ca, false, path, "text/plain", vec![])
                .await
                .unwrap()
                .0
        }
    };
    // Checked once policies and bindings are listed and the namespace list was asked for
    // (it stalls): readiness waits for every initial list.
    let cluster = server.cluster.clone().unwrap();
    for _ in 0..200 {
        let status = cluster.status();
        if status.len() == 3
            && status.iter().filter(|s| s.synced).count() == 2
            && fake.count("namespaces") > 0
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(get("/readyz").await, 503);
    let forbidden = review("admission.k8s.io/v1", json!({"forbidden": "x"}));
    let (status, body) = call(
        addr,
        &ca,
        false,
        "/validate",
        "application/json",
        forbidden.clone(),
    )
    .await
    .unwrap();
    assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
    fake.release("namespaces");
    let mut ready = false;
    for _ in 0..100 {
        if get("/readyz").await == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready, "ready once every list completed");
    let decide = |body: Vec<u8>| {
        let ca = ca.clone();
        async move {
            let (status, body) = call(addr, &ca, true, "/validate", "application/json", body)
                .await
                .unwrap();
            assert_eq!(status, 200);
            answer(&body)["response"].clone()
        }
    };
    let denied = decide(forbidden).await;
    assert_eq!(denied["allowed"], false);
    assert_eq!(denied["status"]["code"], 403);
    let ok = decide(review("admission.k8s.io/v1", json!({"ok": "1"}))).await;
    assert_eq!(ok["allowed"], true);
    let metrics = server.bound.metrics.unwrap();
    let mut text = String::new();
    for _ in 0..50 {
        text = metrics_page(metrics).await;
        if text.contains("name=\"orphan\"") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for line in [
        "celgate_source_synced{source=\"namespaces.v1\"} 1",
        "celgate_source_stale_seconds{source=\"validatingadmissionpolicies.v1\"} 0",
        "celgate_config_problems{kind=\"ValidatingAdmissionPolicyBinding\",name=\"orphan\",reason=\"PolicyNotFound\"} 1",
        "celgate_policies_loaded 1",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    server.shutdown().await;
}

/// A cluster-mode configuration reaching the fake API server through a kubeconfig file, with
/// the CEL version taken from its `/version`.
fn kubeconfig_cluster(dir: &Path, api: SocketAddr) -> ServeConfig {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: fake, cluster: {{server: 'http://{api}'}}}}]\n\
             users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: c, context: {{cluster: fake, user: u}}}}]\n\
             current-context: c\n"
        ),
    )
    .unwrap();
    ServeConfig {
        metrics_listen: Some(ephemeral()),
        ..common::serve::config(PolicySource::Kubernetes {
            api_url: None,
            kubeconfig: Some(kubeconfig),
            options: celgate::source::kube::KubeOptions {
                debounce: Duration::from_millis(20),
                version_from_server: true,
                ..Default::default()
            },
            sar: None,
        })
    }
}

/// `--kubeconfig` reaches the API server of its current context, and without
/// `--k8s-version` the CEL environment is the API server's own version: on a 1.29 server
/// `isIP` (1.30) does not compile, as the API server itself would refuse it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_and_the_api_servers_version() {
    use fake_apiserver::{policy_kinds, Fake, Kind};
    let dir = temp_dir("kubeconfig");
    let mut kinds = policy_kinds("v1").to_vec();
    kinds.push(Kind::new("v1", "Namespace", "namespaces", false));
    let (fake, api) = Fake::start(&kinds).await;
    fake.set_version("1", "29+");
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "ip-check"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "isIP('10.0.0.1')"}]
        }
    }));
    fake.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "ip-check"}, "spec": {"policyName": "ip-check", "validationActions": ["Deny"]}}));
    let server = start(kubeconfig_cluster(&dir, api))
        .await
        .expect("server starts");
    let cluster = server.cluster.clone().unwrap();
    for _ in 0..100 {
        if cluster.ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cluster.ready(), "the kubeconfig's server was listed");
    assert_eq!(cluster.server_version(), Some(29));
    let ca = server.ca_pem.clone().unwrap();
    let (status, body) = call(
        server.bound.webhook,
        &ca,
        true,
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(status, 200);
    let a = answer(&body);
    assert_eq!(a["response"]["allowed"], false);
    let message = a["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("undeclared reference to 'isIP'"),
        "{message}"
    );
    server.shutdown().await;

    // A version newer than celgate knows gets the newest it knows, where isIP compiles.
    fake.set_version("1", "99");
    let server = start(kubeconfig_cluster(&dir, api))
        .await
        .expect("server starts");
    let cluster = server.cluster.clone().unwrap();
    for _ in 0..100 {
        if cluster.ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(cluster.server_version(), Some(celgate::cel::NEWEST_MINOR));
    let (_, body) = call(
        server.bound.webhook,
        &ca_of(&server),
        true,
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", json!({})),
    )
    .await
    .unwrap();
    assert_eq!(answer(&body)["response"]["allowed"], true);
    server.shutdown().await;
}

/// While the API server cannot be reached at start, the source metrics are already there:
/// an alert on them need not handle their absence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_metrics_are_there_before_the_first_sync() {
    use fake_apiserver::{policy_kinds, Fake};
    let dir = temp_dir("unreachable-metrics");
    let (fake, api) = Fake::start(&policy_kinds("v1")).await;
    fake.set_unreachable(true);
    let server = start(kubeconfig_cluster(&dir, api))
        .await
        .expect("server starts");
    let metrics = server.bound.metrics.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let text = metrics_page(metrics).await;
    assert!(
        text.contains("celgate_source_synced{source=\"discovery\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("celgate_source_stale_seconds{source=\"discovery\"}"),
        "{text}"
    );
    server.shutdown().await;
}

/// `celgate serve` refuses at start what waiting would not fix: a policy folder that is not
/// there, and a kubeconfig that cannot be read. The message names the path.
#[test]
fn serve_exits_at_start_on_a_missing_folder_or_kubeconfig() {
    let dir = temp_dir("missing-at-start");
    let missing = dir.join("no-such-folder");
    let kubeconfig = dir.join("no-such-kubeconfig");
    let cases: [(&[&str], &Path); 2] = [
        (&["--policies", missing.to_str().unwrap()], &missing),
        (
            &[
                "--source",
                "kubernetes",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
            ],
            &kubeconfig,
        ),
    ];
    for (args, path) in cases {
        let started = std::time::Instant::now();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"))
            .args(["serve", "--self-signed", "--listen", "127.0.0.1:0"])
            .args(["--metrics-listen", "off", "--log-color", "never"])
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(err.contains(path.to_str().unwrap()), "{args:?}: {err}");
        assert!(!err.contains("last good snapshot"), "{err}");
        assert!(!err.contains("serving"), "{err}");
    }
}

/// `celgate serve` on `dir` with `flags`, standard error piped: its log lines so far, shared,
/// and the addresses of its "serving" line (the webhook's and the metrics').
fn spawn_logging(
    dir: &Path,
    flags: &[&str],
) -> (
    std::process::Child,
    Arc<std::sync::Mutex<Vec<String>>>,
    SocketAddr,
) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["serve", "--self-signed", "--ca-out"])
        .arg(dir.join("ca.pem"))
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--policies")
        .arg(dir)
        .args(flags)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let seen = lines.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains("serving") {
                let _ = tx.send(line.clone());
            }
            seen.lock().unwrap().push(line);
        }
    });
    let serving = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("celgate says it is serving");
    // Colour codes (`ESC [ ... m`) out, then `webhook=ADDR` in text, `"webhook":"ADDR"` in
    // JSON: the address ends at a space, a quote or the end of the line.
    let mut plain = String::new();
    let mut rest = serving.as_str();
    while let Some(at) = rest.find('\x1b') {
        plain.push_str(&rest[..at]);
        rest = rest[at..].split_once('m').map_or("", |(_, r)| r);
    }
    plain.push_str(rest);
    let webhook = plain
        .split("webhook")
        .nth(1)
        .map(|r| r.trim_start_matches(['=', '"', ':']))
        .and_then(|r| r.split([' ', '"']).next())
        .unwrap_or_default();
    let webhook: SocketAddr = webhook.parse().unwrap_or_else(|e| panic!("{e}: {plain}"));
    (child, lines, webhook)
}

/// Logs as a log collector reads them: JSON lines never repeat a key (a field named like a
/// key of the formatter's own would), text has no colour codes when standard error is not a
/// terminal unless `--log-color always`, and the start-up line gives plain addresses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_lines_parse_and_carry_no_colour_codes() {
    let dir = temp_dir("log-lines");
    write_policy(&dir, "Deny");
    // A binding naming no policy: a misconfigured object, logged with what is wrong.
    std::fs::write(
        dir.join("orphan.yaml"),
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {name: orphan}\nspec: {policyName: nosuch, validationActions: [Deny]}\n",
    )
    .unwrap();
    for flags in [
        &["--log-format", "json"][..],
        &["--log-format", "json", "--log-color", "always"][..],
        &[][..],
        &["--log-color", "never"][..],
        &["--log-color", "always"][..],
    ] {
        let (mut child, lines, webhook) = spawn_logging(&dir, flags);
        let ca = std::fs::read_to_string(dir.join("ca.pem")).unwrap();
        // Refused before evaluation (415), and timed out (504): both log what was answered.
        let (status, _) = call(
            webhook,
            &ca,
            true,
            "/validate",
            "text/plain",
            b"{}".to_vec(),
        )
        .await
        .unwrap();
        assert_eq!(status, 415);
        tokio::time::sleep(Duration::from_millis(200)).await;
        child.kill().unwrap();
        child.wait().unwrap();
        let lines = lines.lock().unwrap().clone();
        let text = lines.join("\n");
        for wanted in ["serving", "refused request", "misconfigured object"] {
            assert!(text.contains(wanted), "{flags:?}: no {wanted:?} in\n{text}");
        }
        assert!(!text.contains("Some("), "{flags:?}: {text}");
        let coloured = text.contains('\x1b');
        if flags.contains(&"json") {
            assert!(!coloured, "{flags:?}: {text}");
            for line in &lines {
                // celgate's own parser refuses a repeated key, as serde_json would not.
                if let Err(e) = celgate::cel::json::Doc::parse(line.as_bytes()) {
                    panic!("{flags:?}: {e}: {line}");
                }
                let log: Json = serde_json::from_str(line).unwrap();
                if log["fields"]["message"] == "serving" {
                    let metrics = log["fields"]["metrics"].as_str().unwrap();
                    assert!(metrics.parse::<SocketAddr>().is_ok(), "{line}");
                }
            }
        } else {
            assert_eq!(coloured, flags.contains(&"always"), "{flags:?}: {text}");
        }
    }
}

/// No log event has a field called `message`: the JSON formatter puts the event's own message
/// under that key, and would repeat it (the test above sees the lines logged in one run; this
/// one sees every log call in the sources).
#[test]
fn no_log_field_is_called_message() {
    let call =
        regex::Regex::new(r"(?s)tracing::(?:trace|debug|info|warn|error)!\((.*?)\);").unwrap();
    // `message = value`, or the shorthand `message`, `%message`, `?message` as a whole argument.
    let field = regex::Regex::new(r"(?:^|,)\s*(?:[%?]?message\s*(?:,|$)|message\s*=[^=])").unwrap();
    let mut stack = vec![common::repo().join("src")];
    let mut found = Vec::new();
    let mut calls = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for c in call.captures_iter(&text) {
                    calls += 1;
                    if field.is_match(&c[1]) {
                        found.push(format!("{}: {}", path.display(), &c[0]));
                    }
                }
            }
        }
    }
    assert!(calls > 50, "the log calls were found ({calls})");
    assert!(found.is_empty(), "{found:#?}");
}

// ---- Hardening: deadlines, evaluation threads, connections, metric labels ----

/// A policy whose validations each run a comprehension over `object.items` inside another,
/// stopped only by the per-expression cost limit (a review without `items` passes at once),
/// with `bindings` bindings: each binding evaluates it again.
fn write_slow_policy(dir: &Path, validations: usize, bindings: usize) {
    let expression = r#"  - expression: "!has(object.items) || object.items.all(a, object.items.all(b, a + b >= 0))""#;
    let mut text = format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: slow}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}}]
  validations:
{}
"#,
        vec![expression; validations].join("\n")
    );
    for i in 0..bindings {
        text += &format!(
            "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: slow-{i}}}\nspec: {{policyName: slow, validationActions: [Deny]}}\n"
        );
    }
    std::fs::write(dir.join("policy.yaml"), text).unwrap();
}

/// Bindings of the slow policy where a review must run into its deadline. Each validation
/// stops at the per-expression cost limit, a million steps of a comprehension: at least 5 ms
/// even in an optimised build on a fast machine, so that a hundred bindings of ten validations
/// take seconds, far past the deadlines of the tests (1.5 s and 0.3 s), in both profiles.
/// (With four bindings an optimised build could finish within the deadline and answer 200.)
const SLOW_BINDINGS: usize = 100;

/// A ConfigMap review whose object has 1,000 `items`: the slow policy spends its whole cost
/// budget on it in each validation of each binding.
fn slow_review() -> Vec<u8> {
    let mut r: Json = serde_json::from_slice(&review("admission.k8s.io/v1", json!({}))).unwrap();
    r["request"]["object"]["items"] = (0..1000).collect::<Vec<u32>>().into();
    serde_json::to_vec(&r).unwrap()
}

type H2Sender = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 connection to the webhook, to send many requests on.
async fn h2_connection(addr: SocketAddr, ca_pem: &str) -> (H2Sender, tokio::task::JoinHandle<()>) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    // A request's HEADERS and DATA frames are separate writes: without this the second waits
    // for the server's delayed ACK (40 ms).
    tcp.set_nodelay(true).unwrap();
    let tls = TlsConnector::from(client_tls(ca_pem, b"h2", None))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let (sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    (sender, driver)
}

async fn post(sender: &H2Sender, path: &str, body: Vec<u8>) -> (u16, Vec<u8>) {
    let req = hyper::Request::builder()
        .method("POST")
        .uri(format!("https://localhost{path}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = sender.clone().send_request(req).await.unwrap();
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    (status, body)
}

/// Polls /metrics until it has `line` (up to `within`); the last text either way.
async fn metrics_with(addr: SocketAddr, line: &str, within: Duration) -> (bool, String) {
    let until = std::time::Instant::now() + within;
    loop {
        let text = metrics_page(addr).await;
        if text.contains(line) {
            return (true, text);
        }
        if std::time::Instant::now() >= until {
            return (false, text);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The real `celgate serve` binary in a child process, for what belongs to the process: the
/// runtime's evaluation threads, the open-file limit. Killed when dropped.
struct Process {
    child: std::process::Child,
    webhook: SocketAddr,
    metrics: SocketAddr,
    ca: String,
    /// Lines written to standard error so far.
    log_lines: Arc<std::sync::atomic::AtomicU64>,
}

impl Process {
    /// Serves `policies` with a self-signed certificate on ephemeral ports; with `nofile`, under
    /// that limit of open files (soft and hard).
    fn spawn(policies: &Path, extra: &[&str], nofile: Option<u64>) -> Process {
        use std::io::BufRead;
        use std::os::unix::process::CommandExt;
        let ca_path = policies.join("ca.pem");
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"));
        cmd.args(["serve", "--policies"])
            .arg(policies)
            .args(["--self-signed", "--ca-out"])
            .arg(&ca_path)
            .args([
                "--listen",
                "127.0.0.1:0",
                "--metrics-listen",
                "127.0.0.1:0",
                "--log-format",
                "json",
            ])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(n) = nofile {
            // SAFETY: between fork and exec only setrlimit runs, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(move || {
                    let lim = libc::rlimit {
                        rlim_cur: n,
                        rlim_max: n,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd.spawn().expect("celgate starts");
        let stderr = child.stderr.take().unwrap();
        let log_lines = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let counter = log_lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if line.contains(r#""message":"serving""#) {
                    let _ = tx.send(line);
                }
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("celgate says it is serving");
        let field = |name: &str| -> SocketAddr {
            let start = line.find(&format!(r#""{name}":""#)).unwrap() + name.len() + 4;
            let rest = &line[start..];
            let value = &rest[..rest.find('"').unwrap()];
            value
                .trim_start_matches("Some(")
                .trim_end_matches(')')
                .parse()
                .unwrap()
        };
        Process {
            webhook: field("webhook"),
            metrics: field("metrics"),
            ca: std::fs::read_to_string(&ca_path).unwrap(),
            child,
            log_lines,
        }
    }

    /// CPU time the process has used (user and system).
    fn cpu(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap();
        // The fields after the command name, which is in parentheses.
        let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        // SAFETY: sysconf only reads a configuration value.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
        Duration::from_millis(ticks * 1000 / per_second)
    }

    fn log_lines(&self) -> u64 {
        self.log_lines.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two reviews that would evaluate for seconds are stopped at their deadline (504), their
/// threads are free a moment later, and meanwhile normal reviews are answered at once: the
/// deadline reaches the evaluator, and the real binary's evaluation pool has more threads than
/// slow reviews.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_reviews_stop_at_their_deadline_and_do_not_hold_up_others() {
    let dir = temp_dir("deadline");
    write_slow_policy(&dir, 10, SLOW_BINDINGS);
    let server = Process::spawn(&dir, &[], None);
    let (sender, _driver) = h2_connection(server.webhook, &server.ca).await;
    let normal = review("admission.k8s.io/v1", json!({}));
    let (status, body) = post(&sender, "/validate?timeout=10s", normal.clone()).await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // The same reviews alone, for the scale of this machine's noise.
    let mut alone = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        assert_eq!(
            post(&sender, "/validate?timeout=10s", normal.clone())
                .await
                .0,
            200
        );
        alone.push(t.elapsed());
    }
    alone.sort();

    let deadline = Duration::from_millis(1500);
    let started = std::time::Instant::now();
    let slow: Vec<_> = (0..2)
        .map(|_| {
            let sender = sender.clone();
            tokio::spawn(async move {
                let (status, _) = post(&sender, "/validate?timeout=1500ms", slow_review()).await;
                (status, started.elapsed())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut fast = Vec::new();
    for _ in 0..5 {
        let t = std::time::Instant::now();
        let (status, _) = tokio::time::timeout(
            Duration::from_secs(2),
            post(&sender, "/validate?timeout=10s", normal.clone()),
        )
        .await
        .expect("a normal review is not held up by slow ones");
        assert_eq!(status, 200);
        fast.push(t.elapsed());
    }
    assert!(
        started.elapsed() < deadline,
        "the normal reviews ran while the slow ones were evaluated"
    );
    fast.sort();
    assert!(
        fast[fast.len() / 2] < Duration::from_millis(50),
        "normal reviews beside two slow ones: {fast:?} (alone: {alone:?})"
    );
    for s in slow {
        let (status, took) = s.await.unwrap();
        assert_eq!(status, 504);
        assert!(took < deadline + Duration::from_secs(1), "504 at {took:?}");
    }
    // Each evaluation stopped soon after its deadline: its checks and the request are counted
    // when it has, and the process is idle again.
    let (ended, text) = metrics_with(
        server.metrics,
        r#"celgate_requests_total{decision="timeout",operation="CREATE"} 2"#,
        Duration::from_secs(1),
    )
    .await;
    assert!(
        ended,
        "the evaluations did not end after their deadline:\n{text}"
    );
    assert!(
        text.contains(r#"error_type="deadline_exceeded",policy="slow""#),
        "{text}"
    );
    let before = server.cpu();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spent = server.cpu() - before;
    assert!(
        spent < Duration::from_millis(300),
        "still evaluating: {spent:?} of CPU in 1 s"
    );
    let t = std::time::Instant::now();
    let (status, _) = post(&sender, "/validate?timeout=10s", normal).await;
    assert_eq!(status, 200);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(server.log_lines() < 50, "{} log lines", server.log_lines());
}

/// At an open-file limit of 128, 300 connections that finish the TLS handshake and send
/// nothing: the server keeps under its connection cap (closing the connections idle the
/// longest), a good review is still answered, and the server neither spins on failed accepts
/// nor floods its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_flood_at_a_low_open_file_limit() {
    let dir = temp_dir("flood");
    write_policy(&dir, "Deny");
    let server = Process::spawn(&dir, &[], Some(128));
    let addr = server.webhook;
    let tls = TlsConnector::from(client_tls(&server.ca, b"http/1.1", None));
    let flood: Vec<_> = (0..300)
        .map(|_| {
            let tls = tls.clone();
            tokio::spawn(async move {
                let tcp = TcpStream::connect(addr).await.ok()?;
                let name = ServerName::try_from("localhost").unwrap();
                // Generous: 300 handshakes queue up on a debug build of a loaded machine; what
                // is asserted is how many complete, not how fast.
                tokio::time::timeout(Duration::from_secs(30), tls.connect(name, tcp))
                    .await
                    .ok()?
                    .ok()
            })
        })
        .collect();
    let mut held = Vec::new();
    for f in flood {
        held.push(f.await.unwrap());
    }

    // With the flood's connections still open on the client's side: idle, not spinning.
    let before = server.cpu();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let spent = server.cpu() - before;
    assert!(
        spent < Duration::from_millis(300),
        "{spent:?} of CPU in 1 s"
    );

    let t = std::time::Instant::now();
    let (status, body) = tokio::time::timeout(
        Duration::from_secs(5),
        call(
            addr,
            &server.ca,
            false,
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", json!({"debug": "1"})),
        ),
    )
    .await
    .expect("a good review is answered despite the flood")
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(answer(&body)["response"]["allowed"], false);
    assert!(t.elapsed() < Duration::from_secs(5));
    let lines = server.log_lines();
    assert!(lines < 100, "{lines} log lines");
    // More connections than open files were served (each closing an older idle one).
    let connected = held.iter().filter(|c| c.is_some()).count();
    assert!(connected > 128, "only {connected} handshakes completed");
}

/// Idle connections are closed: one that never sends a request after the handshake (client
/// timeout), and HTTP/1.1 and HTTP/2 connections idle after a request (idle timeout), which
/// are kept open until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = temp_dir("idle");
    write_policy(&dir, "Deny");
    let idle = Duration::from_millis(800);
    let limits = Limits {
        idle_timeout: idle,
        client_timeout: Duration::from_secs(5),
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;

    // HTTP/1.1 keep-alive: the connection stays for the idle timeout after the answer.
    let mut s = raw_tls(addr, &ca).await;
    let body = review("admission.k8s.io/v1", json!({}));
    let head = format!(
        "POST /validate HTTP/1.1\r\nHost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&body).await.unwrap();
    let t = std::time::Instant::now();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(4), s.read_to_end(&mut buf))
        .await
        .expect("an idle HTTP/1.1 connection is closed")
        .ok();
    let open = t.elapsed();
    assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 200"));
    assert!(
        open >= idle - Duration::from_millis(100),
        "closed after {open:?}"
    );

    // HTTP/2: a second request within the idle timeout reuses the connection; then GOAWAY.
    let (sender, driver) = h2_connection(addr, &ca).await;
    assert_eq!(post(&sender, "/validate", body.clone()).await.0, 200);
    tokio::time::sleep(idle / 2).await;
    assert_eq!(post(&sender, "/validate", body.clone()).await.0, 200);
    let t = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(4), driver)
        .await
        .expect("an idle HTTP/2 connection is closed")
        .unwrap();
    assert!(t.elapsed() >= idle - Duration::from_millis(100));
    server.shutdown().await;

    // No request after the handshake: closed after the client timeout.
    let limits = Limits {
        client_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let mut s = raw_tls(server.bound.webhook, &ca_of(&server)).await;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(4), s.read_to_end(&mut buf))
        .await
        .expect("a connection without a request is closed")
        .ok();
    server.shutdown().await;
}

fn ca_of(server: &Running) -> String {
    server.ca_pem.clone().unwrap()
}

/// At the connection cap, the connection idle the longest is closed to let a new one in; the
/// metrics listener has a cap of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_capped_and_the_longest_idle_goes_first() {
    use tokio::io::AsyncReadExt;
    let dir = temp_dir("cap");
    write_policy(&dir, "Deny");
    let limits = Limits {
        max_connections: 3,
        metrics_max_connections: 2,
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let ca = ca_of(&server);
    let addr = server.bound.webhook;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(raw_tls(addr, &ca).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, _) = tokio::time::timeout(
        Duration::from_secs(5),
        call(
            addr,
            &ca,
            true,
            "/validate",
            "application/json",
            review("admission.k8s.io/v1", json!({})),
        ),
    )
    .await
    .expect("a new connection gets in at the cap")
    .unwrap();
    assert_eq!(status, 200);
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(2), held[0].read(&mut buf))
        .await
        .expect("the oldest idle connection was closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(
        tokio::time::timeout(Duration::from_millis(200), held[2].read(&mut buf))
            .await
            .is_err(),
        "the youngest stays open"
    );

    let metrics = server.bound.metrics.unwrap();
    let mut idle = Vec::new();
    for _ in 0..2 {
        idle.push(TcpStream::connect(metrics).await.unwrap());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = tokio::time::timeout(Duration::from_secs(5), metrics_page(metrics))
        .await
        .expect("metrics are served at the cap");
    assert!(text.contains("celgate_requests_total"));
    let n = tokio::time::timeout(Duration::from_secs(2), idle[0].read(&mut buf))
        .await
        .expect("the oldest idle metrics connection was closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    server.shutdown().await;
}

/// 1,000 reviews with distinct made-up operations do not add series to /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_metrics_have_a_fixed_set_of_operation_labels() {
    let dir = temp_dir("labels");
    write_policy(&dir, "Deny");
    let server = serve_self_signed(&dir, Limits::default()).await;
    let (sender, _driver) = h2_connection(server.bound.webhook, &ca_of(&server)).await;
    let before = metrics_page(server.bound.metrics.unwrap()).await;
    let series = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    for chunk in (0..1000).collect::<Vec<u32>>().chunks(50) {
        let sends: Vec<_> = chunk
            .iter()
            .map(|i| {
                let mut r: Json =
                    serde_json::from_slice(&review("admission.k8s.io/v1", json!({}))).unwrap();
                r["request"]["operation"] = format!("OP{i}").into();
                let sender = sender.clone();
                tokio::spawn(async move {
                    post(&sender, "/validate", serde_json::to_vec(&r).unwrap())
                        .await
                        .0
                })
            })
            .collect();
        for s in sends {
            s.await.unwrap();
        }
    }
    let after = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(!after.contains("OP1"), "a label copied from a request");
    assert!(
        series(&after) < series(&before) + 50,
        "{} series after, {} before",
        series(&after),
        series(&before)
    );
    server.shutdown().await;
}

/// An evaluation stopped by the per-expression cost limit is counted as `out_of_budget`, and
/// one stopped by the deadline (here the default one, no `?timeout=`) as `deadline_exceeded`
/// with a `timeout` decision, not as ordinary denials (`invalid_error`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_stops_have_their_own_error_type() {
    let dir = temp_dir("stops");
    write_slow_policy(&dir, 1, 1);
    let server = serve_self_signed(&dir, Limits::default()).await;
    let (sender, _driver) = h2_connection(server.bound.webhook, &ca_of(&server)).await;
    let (status, body) = post(&sender, "/validate", slow_review()).await;
    assert_eq!(status, 200);
    let a = answer(&body);
    assert!(
        a["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .ends_with("operation cancelled: actual cost limit exceeded"),
        "{a}"
    );
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(metrics.contains(r#"celgate_validating_admission_policy_check_total{enforcement_action="deny",error_type="out_of_budget",policy="slow",policy_binding="slow-0"} 1"#), "{metrics}");
    server.shutdown().await;

    write_slow_policy(&dir, 10, SLOW_BINDINGS);
    let limits = Limits {
        default_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, limits).await;
    let (sender, _driver) = h2_connection(server.bound.webhook, &ca_of(&server)).await;
    let t = std::time::Instant::now();
    let (status, body) = post(&sender, "/validate", slow_review()).await;
    assert_eq!(status, 504, "{}", String::from_utf8_lossy(&body));
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    let (counted, text) = metrics_with(
        server.bound.metrics.unwrap(),
        r#"celgate_requests_total{decision="timeout",operation="CREATE"} 1"#,
        Duration::from_secs(2),
    )
    .await;
    assert!(counted, "{text}");
    assert!(
        // The binding the deadline caught: the first in a debug build, a later one in an
        // optimised build (where the first ends at its cost limit within 300 ms).
        text.contains(r#"error_type="deadline_exceeded",policy="slow",policy_binding="slow-"#),
        "{text}"
    );
    assert!(!text.contains(r#"error_type="invalid_error""#), "{text}");
    server.shutdown().await;
}

/// `--cel-memory-limit`: an expression that builds more than the ceiling stops with the memory
/// error under its policy's failurePolicy, labelled `memory_limit` in the check metrics; the
/// same review passes under the default ceiling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_ceiling_is_a_limit_of_its_own() {
    let dir = temp_dir("memory");
    std::fs::write(
        dir.join("policy.yaml"),
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: builder}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "size(lists.range(2000).map(i, string(i)).join(',')) > 0 || true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: builder}
spec: {policyName: builder, validationActions: [Deny]}
"#,
    )
    .unwrap();
    let small = Limits {
        memory_per_expression: 4 << 10,
        ..Limits::default()
    };
    let server = serve_self_signed(&dir, small).await;
    let (sender, _driver) = h2_connection(server.bound.webhook, &ca_of(&server)).await;
    let (status, body) = post(
        &sender,
        "/validate",
        review("admission.k8s.io/v1", json!({})),
    )
    .await;
    assert_eq!(status, 200);
    let a = answer(&body);
    assert_eq!(a["response"]["allowed"], false, "{a}");
    assert!(
        a["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .ends_with("operation cancelled: memory limit exceeded"),
        "{a}"
    );
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    assert!(
        metrics
            .contains(r#"error_type="memory_limit",policy="builder",policy_binding="builder"} 1"#),
        "{metrics}"
    );
    server.shutdown().await;

    let server = serve_self_signed(&dir, Limits::default()).await;
    let (sender, _driver) = h2_connection(server.bound.webhook, &ca_of(&server)).await;
    let (status, body) = post(
        &sender,
        "/validate",
        review("admission.k8s.io/v1", json!({})),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        answer(&body)["response"]["allowed"],
        true,
        "{}",
        answer(&body)
    );
    server.shutdown().await;
}

/// Limit flags refuse values that would disable them, before anything starts.
#[test]
fn limit_flags_refuse_zero() {
    serve_flags::serve_refuses(&[
        (&["--cel-memory-limit", "0"][..], "--cel-memory-limit"),
        (
            &["--source", "kubernetes", "--kube-retry-max", "0s"][..],
            "--kube-retry-max",
        ),
        (
            &["--source", "kubernetes", "--kube-retry-max", "soon"][..],
            "--kube-retry-max",
        ),
        (
            &["--source", "kubernetes", "--resync-interval", "soon"][..],
            "--resync-interval",
        ),
    ]);
}

/// `ServeConfig::default()` holds `celgate serve`'s defaults: each flag's default, as
/// `celgate serve --help` shows it to a user, is the value the default configuration
/// carries. (The command's own code is not reachable from a test; its help is. The poll
/// interval has no flag.)
#[test]
fn the_default_configuration_is_the_commands() {
    use serve_flags::serve_help_default as shown;
    let duration = |name: &str| {
        let text = shown(name).unwrap_or_else(|| panic!("--{name} shows no default"));
        let nanos = celgate::apimachinery::duration::parse_go_duration(&text)
            .unwrap_or_else(|| panic!("--{name}: {text} is no duration"));
        Duration::from_nanos(u64::try_from(nanos).unwrap())
    };
    let number = |name: &str| -> u64 {
        let text = shown(name).unwrap_or_else(|| panic!("--{name} shows no default"));
        text.parse()
            .unwrap_or_else(|e| panic!("--{name}: {text}: {e}"))
    };
    let d = ServeConfig::default();
    let PolicySource::Folder(folder) = &d.source else {
        panic!("the default source is not a folder: {:?}", d.source)
    };
    assert_eq!(shown("source").as_deref(), Some("folder"));
    // The flag has no default (`celgate serve` refuses to start without it, tests/cli.rs);
    // the configuration's, for tests, is the examples the help names.
    serve_flags::serve_help_shows(&[(
        "--policies <DIR>",
        &format!(
            "required with `--source folder`, e.g. `--policies {}`",
            folder.dir.display()
        ),
    )]);
    assert_eq!(duration("reload-settle"), folder.settle);
    assert_eq!(number("max-file-bytes"), folder.max_file_bytes);
    // Switches, off unless given.
    assert!(!folder.allow_empty && !folder.strict_namespaces && !d.answering.log_results);
    assert_eq!(shown("mode").as_deref(), Some("enforce"));
    assert_eq!(d.answering.mode, celgate::review::Mode::Enforce);
    assert_eq!(shown("listen"), Some(d.listen.to_string()));
    assert_eq!(
        shown("metrics-listen"),
        d.metrics_listen.map(|a| a.to_string())
    );
    let CertSource::SelfSigned { names } = &d.cert else {
        panic!("the default certificate is not self-signed: {:?}", d.cert)
    };
    assert_eq!(shown("dns-name"), Some(names.join(" ")));
    assert_eq!(d.client_ca, None);
    let limits = &d.limits;
    assert_eq!(number("max-body-bytes"), limits.max_body as u64);
    assert_eq!(number("max-buffered-bytes"), limits.max_buffered as u64);
    assert_eq!(number("max-header-bytes"), limits.max_header_bytes as u64);
    assert_eq!(number("max-inflight"), limits.max_inflight as u64);
    assert_eq!(number("cel-memory-limit"), limits.memory_per_expression);
    assert_eq!(number("max-connections"), limits.max_connections as u64);
    assert_eq!(
        number("metrics-max-connections"),
        limits.metrics_max_connections as u64
    );
    assert_eq!(duration("default-timeout"), limits.default_timeout);
    assert_eq!(duration("idle-timeout"), limits.idle_timeout);
    assert_eq!(duration("client-timeout"), limits.client_timeout);
    // `--k8s-version`: "else the newest celgate knows".
    assert_eq!(shown("k8s-version"), None);
    serve_flags::serve_help_shows(&[("--k8s-version <1.N>", "else the newest celgate knows")]);
    assert_eq!(d.version, celgate::cel::NEWEST_MINOR);
}

const MUTATING_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: stamp}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        has(object.data) && 'fail' in object.data
          ? [JSONPatch{op: 'add', path: '/nowhere/x', value: 'y'}]
          : [JSONPatch{op: 'add', path: '/data/stamped', value: 'yes'}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: stamp}
spec: {policyName: stamp}
"#;

/// `/mutate` over TLS (HTTP/1.1 and HTTP/2): the patch that adds the key, in the request's
/// review version; a patch that cannot apply is the policy's 403; `/validate` of the same
/// folder has nothing to say about it; the mutation metrics count each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutate_answers_with_a_json_patch() {
    use base64::Engine as _;
    let dir = temp_dir("mutate");
    std::fs::write(dir.join("policy.yaml"), MUTATING_POLICY).unwrap();
    let server = serve_self_signed(&dir, Limits::default()).await;
    let ca = server.ca_pem.clone().unwrap();
    let addr = server.bound.webhook;
    for (http2, version) in [
        (false, "admission.k8s.io/v1"),
        (true, "admission.k8s.io/v1beta1"),
    ] {
        let (status, body) = call(
            addr,
            &ca,
            http2,
            "/mutate?timeout=10s",
            "application/json",
            review(version, json!({"a": "1"})),
        )
        .await
        .unwrap();
        assert_eq!(status, 200);
        let a = answer(&body);
        assert_eq!(a["apiVersion"], version);
        let r = &a["response"];
        assert_eq!((&r["uid"], &r["allowed"]), (&json!("u-1"), &json!(true)));
        assert_eq!(r["patchType"], "JSONPatch");
        let patch = base64::engine::general_purpose::STANDARD
            .decode(r["patch"].as_str().unwrap())
            .unwrap();
        let patch: Json = serde_json::from_slice(&patch).unwrap();
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/data/stamped", "value": "yes"}])
        );
    }
    let (_, body) = call(
        addr,
        &ca,
        false,
        "/mutate",
        "application/json",
        review("admission.k8s.io/v1", json!({"fail": "1"})),
    )
    .await
    .unwrap();
    let r = &answer(&body)["response"];
    assert_eq!(r["allowed"], false);
    assert_eq!(r["status"]["code"], 403);
    assert_eq!(r["status"]["reason"], "Invalid");
    assert_eq!(
        r["status"]["message"],
        "policy 'stamp' with binding 'stamp' denied request: JSON Patch: add operation does not apply: doc is missing path: \"/nowhere/x\": missing value"
    );
    assert!(r.get("patch").is_none());
    // The validating webhook has no policy for it.
    let (_, body) = call(
        addr,
        &ca,
        false,
        "/validate",
        "application/json",
        review("admission.k8s.io/v1", json!({"a": "1"})),
    )
    .await
    .unwrap();
    let r = &answer(&body)["response"];
    assert_eq!(r["allowed"], true);
    assert!(r.get("patch").is_none());
    let metrics = metrics_page(server.bound.metrics.unwrap()).await;
    for line in [
        r#"celgate_mutating_admission_policy_check_total{error_type="no_error",policy="stamp",policy_binding="stamp"} 2"#,
        r#"celgate_mutating_admission_policy_check_total{error_type="invalid_error",policy="stamp",policy_binding="stamp"} 1"#,
        "celgate_mutating_policies_loaded 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
}
