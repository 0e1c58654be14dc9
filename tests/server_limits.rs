//! Reliability round 3 (issue 24): what one client can make the server hold. Answers stay
//! small whatever the verdict; buffered request and answer bytes stay under
//! `--max-buffered-bytes`; answers a client does not read are dropped after the client
//! timeout; the metrics listener answers while the webhook port is flooded; the connection
//! cap never closes a connection mid-request.

mod common;

use std::path::Path;

use common::serve_flags;

use celgate::cel::NEWEST_MINOR;
use celgate::review::answer;
use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde_json::{json, Value as Json};

/// A review of a ConfigMap CREATE.
fn configmap_review(uid: &str, data: Json) -> Json {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data},
            "oldObject": null
        }
    })
}

/// A policy of `validations` failing validations, each with its own `message_runes`-rune
/// message, bound with `actions`.
fn failing_policy(validations: usize, message_runes: usize, actions: &str) -> String {
    let mut p = String::from(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
         metadata: {name: noisy}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], \
         apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]\n  validations:\n",
    );
    for i in 0..validations {
        let message = format!("{i:05}{}", "w".repeat(message_runes - 5));
        p.push_str(&format!(
            "  - {{expression: \"false\", message: \"{message}\"}}\n"
        ));
    }
    p.push_str(&format!(
        "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: noisy}}\nspec: {{policyName: noisy, validationActions: [{actions}]}}\n"
    ));
    p
}

/// Item 12(a): thousands of failing Warn validations answered tens of megabytes of warnings;
/// the API server keeps 4096 runes of them (each cut to 256 past that), and so does the answer.
#[test]
fn warnings_in_an_answer_are_capped_as_the_api_server_caps_them() {
    let mut objects = folder::parse_documents(
        Path::new("policy.yaml"),
        &failing_policy(2000, 1000, "Warn"),
    )
    .unwrap();
    add_cluster_defaults(&mut objects);
    let snap = snapshot(objects, NEWEST_MINOR, true).unwrap();
    let body = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    let a = answer(&snap, &body, &Default::default(), Default::default()).unwrap();
    assert_eq!(a.verdict.warnings.len(), 2000, "every validation failed");
    let review = a.review();
    let warnings = review["response"]["warnings"].as_array().unwrap();
    let runes: usize = warnings
        .iter()
        .map(|w| w.as_str().unwrap().chars().count())
        .sum();
    assert!(
        runes <= 4096 && warnings.len() == 16,
        "{} warnings, {runes} runes",
        warnings.len()
    );
    assert!(warnings[0]
        .as_str()
        .unwrap()
        .starts_with("Validation failed"));
    assert!(serde_json::to_vec(&a.review()).unwrap().len() < 16 << 10);
}

mod harness {
    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::Duration;

    use celgate::app::{start, Running, ServeConfig};
    use celgate::server::{Answering, Limits};
    use tokio::net::TcpStream;

    pub use super::common::serve::plain_get;
    use super::common::serve::{self, client_tls, ephemeral};
    pub use super::common::temp_dir;

    /// Serves the policies of `dir` in-process, with a self-signed certificate for
    /// `localhost`, on ephemeral ports.
    pub async fn serve(dir: &Path, limits: Limits) -> Running {
        serve_answering(dir, limits, Answering::default()).await
    }

    /// [`serve`], answering as `answering` says.
    pub async fn serve_answering(dir: &Path, limits: Limits, answering: Answering) -> Running {
        let cfg = ServeConfig {
            metrics_listen: Some(ephemeral()),
            limits,
            answering,
            ..serve::config(serve::folder(dir, Duration::from_millis(100)))
        };
        start(cfg).await.expect("server starts")
    }

    /// A TLS connection to the webhook trusting `server`'s CA, offering `alpn`; with
    /// `receive_buffer`, a socket that receives at most about that much before the client reads.
    pub async fn tls(
        server: &Running,
        alpn: &[u8],
        receive_buffer: Option<u32>,
    ) -> tokio_rustls::client::TlsStream<TcpStream> {
        use rustls::pki_types::ServerName;
        let cfg = client_tls(server.ca_pem.as_ref().unwrap(), alpn, None);
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        if let Some(size) = receive_buffer {
            socket.set_recv_buffer_size(size).unwrap();
        }
        let tcp = socket.connect(server.bound.webhook).await.unwrap();
        tokio_rustls::TlsConnector::from(cfg)
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
            .unwrap()
    }

    /// Posts `review` on an HTTP/1.1 connection; the answer's head and what came of its body.
    pub async fn post(
        tls: &mut tokio_rustls::client::TlsStream<TcpStream>,
        review: &[u8],
    ) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let head = format!(
            "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            review.len()
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        tls.write_all(review).await.unwrap();
        tls.flush().await.unwrap();
        let mut answer = vec![0u8; 64 << 10];
        let n = tokio::time::timeout(Duration::from_secs(30), tls.read(&mut answer))
            .await
            .expect("an answer within 30 s")
            .unwrap();
        String::from_utf8_lossy(&answer[..n]).to_string()
    }

    /// The value of the metric sample `name` (without labels) on the metrics page.
    pub async fn metric(addr: SocketAddr, name: &str) -> Option<f64> {
        serve::sample(&plain_get(addr, "/metrics").await?, name)
    }
}

/// Item 12(b): silent connections must not keep `/metrics` from answering. At the metrics
/// listener's cap, the connection idle the longest was closed: the scraper's kept-alive
/// connection, on every burst. Now connections that never sent a request go first, and a
/// scraper keeps its connection while the webhook and metrics ports are flooded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_answer_while_silent_connections_flood_both_ports() {
    use http_body_util::{BodyExt, Empty};
    use hyper::body::Bytes;
    use std::time::Duration;
    let dir = harness::temp_dir("silent-metrics");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 10, "Deny")).unwrap();
    let server = harness::serve(&dir, celgate::server::Limits::default()).await;
    let metrics = server.bound.metrics.unwrap();
    let tcp = tokio::net::TcpStream::connect(metrics).await.unwrap();
    let (mut scraper, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .unwrap();
    tokio::spawn(conn);
    let scrape = |sender: &mut hyper::client::conn::http1::SendRequest<Empty<Bytes>>| {
        let req = hyper::Request::get("/metrics")
            .header("host", "x")
            .body(Empty::new())
            .unwrap();
        let sent = sender.send_request(req);
        async move {
            let resp = sent.await.map_err(|e| e.to_string())?;
            let status = resp.status();
            resp.into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>(status)
        }
    };
    assert_eq!(scrape(&mut scraper).await, Ok(hyper::StatusCode::OK));

    // 250 silent connections on each port (the metrics listener's cap is 16).
    let mut silent = Vec::new();
    for addr in [server.bound.webhook, metrics] {
        for _ in 0..250 {
            silent.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
    }
    // A new scraper is answered (generous: the failure seen took 26 s)...
    let fresh = tokio::time::timeout(
        Duration::from_secs(60),
        harness::plain_get(metrics, "/metrics"),
    )
    .await
    .expect("a scrape is answered within 60 s");
    assert!(fresh.is_some_and(|t| t.starts_with("HTTP/1.1 200")));
    // ...and so is the kept-alive one, on its connection.
    scraper
        .ready()
        .await
        .expect("the scraper's connection is still open");
    assert_eq!(scrape(&mut scraper).await, Ok(hyper::StatusCode::OK));
    drop(silent);
    server.shutdown().await;
}

/// Limits for the write-timeout tests: a short client timeout, a long idle timeout (so that
/// only the write timeout can close the connection within the test's wait).
fn write_timeout_limits() -> celgate::server::Limits {
    celgate::server::Limits {
        client_timeout: std::time::Duration::from_secs(2),
        idle_timeout: std::time::Duration::from_secs(300),
        ..Default::default()
    }
}

/// Item 6: an HTTP/2 client whose window stays zero never takes its answer; the connection is
/// closed after the client timeout, not kept (with the answer) until the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_answer_the_client_never_takes_is_dropped() {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use std::time::Duration;
    let dir = harness::temp_dir("h2-zero-window");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 3000, "Warn")).unwrap();
    let server = harness::serve(&dir, write_timeout_limits()).await;
    let tls = harness::tls(&server, b"h2", None).await;
    let (mut sender, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    let conn = tokio::spawn(conn);
    let body = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    let req = hyper::Request::post(format!(
        "https://localhost:{}/validate",
        server.bound.webhook.port()
    ))
    .header("content-type", "application/json")
    .body(Full::new(Bytes::from(body)))
    .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200, "the head needs no window");
    let body = tokio::spawn(resp.into_body().collect());
    // Generous: the client timeout is 2 s, the idle timeout 300 s.
    let closed = tokio::time::timeout(Duration::from_secs(60), conn).await;
    assert!(closed.is_ok(), "the connection is still open after 60 s");
    assert!(
        body.await.unwrap().is_err(),
        "the answer never arrived whole"
    );
    server.shutdown().await;
}

/// Item 6: an HTTP/1.1 client that sends reviews and never reads the answers fills the
/// socket; the connection is closed after the client timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http1_client_that_never_reads_is_disconnected() {
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;
    let dir = harness::temp_dir("h1-never-reads");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 3000, "Warn")).unwrap();
    let server = harness::serve(&dir, write_timeout_limits()).await;
    let tls = harness::tls(&server, b"http/1.1", Some(4096)).await;
    let (_reader, mut writer) = tokio::io::split(tls);
    let body = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    let mut request = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    // Each answer is over 3 kB: 5000 of them are far more than the sockets hold.
    let pipelined = tokio::spawn(async move {
        for _ in 0..5000 {
            writer.write_all(&request).await?;
        }
        writer.flush().await?;
        // Written whole (the server read every request): wait for it to close the
        // connection, which a write then reports.
        loop {
            tokio::time::sleep(Duration::from_millis(200)).await;
            writer.write_all(b"\r\n").await?;
            writer.flush().await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    });
    let ended = tokio::time::timeout(Duration::from_secs(90), pipelined).await;
    assert!(
        matches!(ended, Ok(Ok(Err(_)))),
        "the connection is still open after 90 s: {ended:?}"
    );
    server.shutdown().await;
}

/// One attacker: a request declaring a `length`-byte body, of which it sends all but the last
/// byte, then waits (up to `wait`) for an answer; the status line when one came. The stream
/// is returned so that the connection stays open.
async fn almost_whole_body(
    server: &celgate::app::Running,
    length: usize,
    wait: std::time::Duration,
) -> (
    Option<String>,
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tls = harness::tls(server, b"http/1.1", None).await;
    let head = format!(
        "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    );
    tls.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 256 << 10];
    let mut left = length - 1;
    while left > 0 {
        let n = left.min(chunk.len());
        if tls.write_all(&chunk[..n]).await.is_err() {
            break;
        }
        left -= n;
    }
    let _ = tls.flush().await;
    let mut answer = vec![0u8; 4096];
    let status = match tokio::time::timeout(wait, tls.read(&mut answer)).await {
        Ok(Ok(n)) if n > 0 => Some(String::from_utf8_lossy(&answer[..n]).to_string()),
        _ => None,
    };
    (status, tls)
}

/// Samples `celgate_buffered_bytes` every 20 ms until `stop`; the highest value seen.
fn sample_buffered(
    metrics: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<f64> {
    tokio::spawn(async move {
        let mut highest = 0f64;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let v = harness::metric(metrics, "celgate_buffered_bytes")
                .await
                .expect("the gauge is exported");
            highest = highest.max(v);
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        highest
    })
}

/// Runs `attackers` connections at once, each holding a body one byte short of `length`,
/// while the budget gauge is sampled; checks that it never passed `budget`, that the attack
/// filled it (later attackers got 503 with Retry-After), that a normal review is still
/// answered, and that the bytes are given back once the attackers leave.
async fn budget_holds(limits: celgate::server::Limits, attackers: usize, name: &str) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;
    let (budget, length) = (limits.max_buffered, limits.max_body - 1);
    let dir = harness::temp_dir(name);
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 10, "Deny")).unwrap();
    let server = Arc::new(harness::serve(&dir, limits).await);
    let metrics = server.bound.metrics.unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample_buffered(metrics, stop.clone());
    let attacks: Vec<_> = (0..attackers)
        .map(|_| {
            let server = server.clone();
            tokio::spawn(async move {
                almost_whole_body(&server, length, Duration::from_secs(10)).await
            })
        })
        .collect();
    let mut held = Vec::new();
    for a in attacks {
        held.push(a.await.unwrap());
    }
    let refused = held
        .iter()
        .filter_map(|(status, _)| status.as_deref())
        .filter(|s| s.starts_with("HTTP/1.1 503") && s.to_lowercase().contains("retry-after: 1"))
        .count();
    let waiting = held.iter().filter(|(status, _)| status.is_none()).count();
    assert!(
        refused > 0 && waiting > 0 && refused + waiting == attackers,
        "{refused} refused, {waiting} still buffered of {attackers}: {:?}",
        held.iter()
            .map(|(s, _)| s.as_deref().map(|s| s.lines().next()))
            .collect::<Vec<_>>()
    );
    // A normal review is still answered: small requests keep a quarter of the budget.
    let mut client = harness::tls(&server, b"http/1.1", None).await;
    let review = serde_json::to_vec(&configmap_review("u-ok", json!({}))).unwrap();
    let status = harness::post(&mut client, &review).await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    stop.store(true, Ordering::Relaxed);
    let highest = sampler.await.unwrap();
    assert!(
        highest as usize <= budget && highest as usize >= waiting * length,
        "celgate_buffered_bytes reached {highest} (budget {budget}, {waiting} bodies of {length} held)"
    );
    // The attackers leave: their buffers are given back.
    drop(held);
    let mut left = f64::MAX;
    for _ in 0..600 {
        left = harness::metric(metrics, "celgate_buffered_bytes")
            .await
            .unwrap();
        if left == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0.0, "bytes still buffered after the attackers left");
    drop(client);
    if let Ok(server) = Arc::try_unwrap(server) {
        server.shutdown().await;
    }
}

/// Item 6: connections holding bodies just under `--max-body-bytes` cannot buffer past
/// `--max-buffered-bytes` (here 4 MiB, bodies of 1 MiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_held_almost_whole_stay_within_the_buffer_budget() {
    let limits = celgate::server::Limits {
        max_body: 1 << 20,
        max_buffered: 4 << 20,
        // Generous: the attackers must still be sending when the normal review comes.
        client_timeout: std::time::Duration::from_secs(120),
        ..Default::default()
    };
    budget_holds(limits, 8, "budget-small").await;
}

/// Item 6 at the chart's memory limit: the binary's defaults, which the chart keeps
/// (`--max-body-bytes` 16 MiB, `--max-buffered-bytes` 128 MiB for a 512 MiB pod), against ten
/// bodies of 16 MiB held one byte short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_defaults_hold_against_large_bodies_held_open() {
    let limits = celgate::server::Limits {
        client_timeout: std::time::Duration::from_secs(120),
        ..Default::default()
    };
    assert_eq!(limits.max_buffered, 128 << 20);
    assert_eq!(limits.max_body, 16 << 20);
    budget_holds(limits, 10, "budget-chart").await;
}

/// Log lines of this test binary, captured by a process-wide subscriber (set once).
fn captured_logs() -> std::sync::Arc<std::sync::Mutex<Vec<u8>>> {
    use std::sync::{Arc, Mutex, OnceLock};
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        #[derive(Clone)]
        struct Sink(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Sink {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(logs.clone());
        tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || sink.clone())
            .init();
        logs
    })
    .clone()
}

/// Item 6: strings a review carries are copied into answers and log lines. A megabyte uid is
/// refused with 400; megabyte names and namespaces are answered, but neither the answer nor
/// any log line carries a megabyte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn megabyte_strings_are_neither_answered_nor_logged_whole() {
    let logs = captured_logs();
    let dir = harness::temp_dir("megabyte-strings");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 10, "Deny")).unwrap();
    let answering = celgate::server::Answering {
        log_results: true,
        ..Default::default()
    };
    let server = harness::serve_answering(&dir, Default::default(), answering).await;
    let huge = "x".repeat(1 << 20);
    let mut client = harness::tls(&server, b"http/1.1", None).await;

    let refused = harness::post(
        &mut client,
        &serde_json::to_vec(&configmap_review(&huge, json!({}))).unwrap(),
    )
    .await;
    assert!(
        refused.starts_with("HTTP/1.1 400"),
        "{}",
        &refused[..refused.len().min(300)]
    );
    assert!(refused.contains("request.uid: Too long"), "{refused}");

    let mut review = configmap_review("u-1", json!({}));
    review["request"]["name"] = json!(huge);
    review["request"]["namespace"] = json!(huge);
    review["request"]["object"]["metadata"]["name"] = json!(huge);
    let denied = harness::post(&mut client, &serde_json::to_vec(&review).unwrap()).await;
    assert!(
        denied.starts_with("HTTP/1.1 200"),
        "{}",
        &denied[..denied.len().min(300)]
    );
    assert!(denied.contains(r#""allowed":false"#));
    let length: usize = denied
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("content-length: ")
                .map(|n| n.trim().parse().unwrap())
        })
        .unwrap();
    assert!(length < 16 << 10, "a {length}-byte answer");

    let text = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("policy result"),
        "the result was logged: {text:.2000}"
    );
    assert!(
        text.contains("request.uid: Too long"),
        "the refusal was logged"
    );
    let longest = text.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 16 << 10, "a {longest}-byte log line");
    drop(client);
    server.shutdown().await;
}

/// `--max-buffered-bytes` and `--max-header-bytes` show their defaults, and refuse a budget no
/// largest body fits in and a head bound under hyper's least.
#[test]
fn the_buffer_flags() {
    serve_flags::serve_help_shows(&[
        ("--max-buffered-bytes", "[default: 134217728]"),
        ("--max-header-bytes", "[default: 32768]"),
    ]);
    serve_flags::serve_refuses(&[
        (&["--max-buffered-bytes", "0"][..], "--max-buffered-bytes"),
        (
            &["--max-header-bytes", "8191"][..],
            "--max-header-bytes must be at least 8192",
        ),
        (
            &["--max-body-bytes", "1000", "--max-buffered-bytes", "1000"][..],
            "--max-buffered-bytes must be at least 4/3 of --max-body-bytes",
        ),
    ]);
}

/// Item 6: an HTTP/1.1 request head is buffered whole before it is answered; hyper's own
/// bound (about 400 KiB a connection) times `--max-connections` was far past the budget.
/// Heads are bounded by `--max-header-bytes` (32 KiB): a larger one is a 431.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_request_head_is_refused() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = harness::temp_dir("large-head");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 10, "Deny")).unwrap();
    let server = harness::serve(&dir, Default::default()).await;
    let review = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    for (padding, want) in [(1 << 10, "HTTP/1.1 200"), (40 << 10, "HTTP/1.1 431")] {
        let mut tls = harness::tls(&server, b"http/1.1", None).await;
        let head = format!(
            "POST /validate HTTP/1.1\r\nhost: localhost\r\nx-padding: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            "p".repeat(padding),
            review.len()
        );
        tls.write_all(head.as_bytes()).await.unwrap();
        let _ = tls.write_all(&review).await;
        let mut answer = vec![0u8; 4096];
        let n = tokio::time::timeout(std::time::Duration::from_secs(30), tls.read(&mut answer))
            .await
            .expect("an answer within 30 s")
            .unwrap_or(0);
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(
            answer.starts_with(want),
            "{padding}-byte header: {answer:?}"
        );
    }
    server.shutdown().await;
}

/// Review item 2: the HTTP/2 write timeout was per connection. One stream whose window stays
/// zero held its answer (and its share of the budget) while requests on other streams kept
/// the connection's one "answers moved" time fresh, so it was never closed. The stall is now
/// measured from the oldest answer not taken: the connection is closed after the client
/// timeout and the stalled answer's bytes leave the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_stream_never_read_is_dropped_while_other_streams_stay_busy() {
    use std::time::Duration;
    let dir = harness::temp_dir("h2-one-stream-stalled");
    std::fs::write(dir.join("policy.yaml"), failing_policy(1, 3000, "Warn")).unwrap();
    let server = harness::serve(&dir, write_timeout_limits()).await;
    let metrics = server.bound.metrics.unwrap();
    let tls = harness::tls(&server, b"h2", None).await;
    // Every stream's window is zero: an answer with a body is never sent; the busy streams
    // ask for answers without one (405: /validate takes only POST).
    let (mut client, conn) = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, hyper::body::Bytes>(tls)
        .await
        .unwrap();
    let conn = tokio::spawn(conn);
    let uri = format!("https://localhost:{}/validate", server.bound.webhook.port());
    let review = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    let req = hyper::Request::post(&uri)
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (answer, mut body) = client.send_request(req, false).unwrap();
    body.send_data(review.into(), true).unwrap();
    let stalled = answer.await.unwrap();
    assert_eq!(stalled.status(), 200, "the head needs no window");
    let mut held = 0.0;
    for _ in 0..100 {
        held = harness::metric(metrics, "celgate_buffered_bytes")
            .await
            .unwrap_or(0.0);
        if held > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(held > 0.0, "the stalled answer is in the budget");
    // Other streams keep answering, well within the client timeout (2 s) of each other.
    let busy = tokio::spawn(async move {
        loop {
            let req = hyper::Request::get(&uri).body(()).unwrap();
            let (answer, _) = client.send_request(req, true)?;
            assert_eq!(answer.await?.status(), 405);
            tokio::time::sleep(Duration::from_millis(300)).await;
            client = client.ready().await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), h2::Error>(())
    });
    // Generous: the client timeout is 2 s, the idle timeout 300 s.
    let closed = tokio::time::timeout(Duration::from_secs(45), conn).await;
    assert!(
        closed.is_ok(),
        "the connection is still open after 45 s of one stream stalled"
    );
    assert!(busy.await.unwrap().is_err(), "the busy streams end with it");
    drop(stalled);
    let mut left = f64::NAN;
    for _ in 0..200 {
        left = harness::metric(metrics, "celgate_buffered_bytes")
            .await
            .unwrap_or(f64::NAN);
        if left == 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(left, 0.0, "the stalled answer's bytes left the budget");
    server.shutdown().await;
}
