//! Policy reports written in the cluster (`serve --source kubernetes --reports ...`): the
//! whole service against the in-process fake API server, reviews sent over HTTPS as the API
//! server sends them. Reports are created after admissions, updated when a resource changes,
//! lose a resource's results on its DELETE and a removed binding's results, a burst of
//! admissions makes a few writes, a large report is capped with failures kept, and only the
//! Lease holder writes.

mod common;
mod fake_apiserver;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use celgate::app::{start, PolicySource, Running, ServeConfig};
use celgate::scan::report::ReportApi;
use celgate::source::kube::reports::ReportOptions;
use common::serve_flags;
use common::webhook_client::Webhook;
use fake_apiserver::{eventually, policy_kinds, report_kinds, Fake, Kind};
use serde_json::{json, Value as Json};

const REPORT: &str = "celgate-admission";

fn kinds() -> Vec<Kind> {
    let mut k = policy_kinds("v1").to_vec();
    k.push(Kind::new("v1", "Namespace", "namespaces", false));
    k.extend(report_kinds());
    k
}

/// Namespace `team`; the policy `no-bad-label` (pods with the label `bad` fail, on CREATE,
/// UPDATE and DELETE) bound everywhere with Deny.
fn with_policy(fake: &Fake) {
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}}}));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-bad-label"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["pods"]}]},
            "validations": [{"expression": "request.operation == 'DELETE' || !has(object.metadata.labels) || !('bad' in object.metadata.labels)", "message": "no bad pods", "reason": "Forbidden"}]
        }
    }));
    fake.apply(binding());
}

fn binding() -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-bad-label-all"},
        "spec": {"policyName": "no-bad-label", "validationActions": ["Deny"]}
    })
}

fn config(api: SocketAddr, reports: ReportOptions, lease: Option<&str>) -> ServeConfig {
    common::serve::config(common::serve::cluster(
        api,
        celgate::source::kube::KubeOptions {
            reports: Some(reports),
            ..common::serve::replica(lease)
        },
    ))
}

fn options(interval_ms: u64, max_results: usize) -> ReportOptions {
    ReportOptions {
        api: ReportApi::WgPolicy,
        interval: Duration::from_millis(interval_ms),
        max_results,
        ..ReportOptions::default()
    }
}

fn pod(name: &str, bad: bool) -> Json {
    let labels = if bad {
        json!({"bad": "yes"})
    } else {
        json!({})
    };
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team", "uid": format!("uid-{name}"), "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

/// The review of `operation` on `pod` (`new` and `old` as that operation carries them).
fn review(operation: &str, new: Option<Json>, old: Option<Json>) -> Json {
    let name = new.as_ref().or(old.as_ref()).unwrap()["metadata"]["name"].clone();
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": format!("req-{operation}-{name}"),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "name": name,
            "namespace": "team",
            "operation": operation,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": new,
            "oldObject": old,
            "dryRun": false
        }
    })
}

fn team_report(fake: &Fake) -> Option<Json> {
    fake.object("policyreports", "team", REPORT)
}

fn summary(report: &Json) -> (u64, u64) {
    (
        report["summary"]["pass"].as_u64().unwrap(),
        report["summary"]["fail"].as_u64().unwrap(),
    )
}

async fn ready(server: &Running) {
    eventually("ready", || {
        server
            .state
            .ready
            .load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
}

/// Reports are created after admissions (server-side apply by the field manager `celgate`,
/// forced), updated when a resource's result changes, lose a resource's results on its DELETE,
/// and are deleted once their binding is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_follow_admissions() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    let server = start(config(api, options(200, 100), None)).await.unwrap();
    ready(&server).await;
    let mut webhook = Webhook::connect(&server).await;
    let r = webhook
        .review(review("CREATE", Some(pod("p1", true)), None))
        .await;
    assert_eq!(r["allowed"], false, "enforce mode still denies: {r}");
    webhook
        .review(review("CREATE", Some(pod("p2", false)), None))
        .await;
    eventually("the team report", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (1, 1))
    })
    .await;
    let report = team_report(&fake).unwrap();
    assert_eq!(
        report["metadata"]["labels"]["celgate.io/source"],
        "admission"
    );
    let results = report["results"].as_array().unwrap();
    let failed = results.iter().find(|r| r["result"] == "fail").unwrap();
    assert_eq!(failed["policy"], "no-bad-label");
    assert_eq!(failed["rule"], "no-bad-label-all/validations[0]");
    assert_eq!(failed["message"], "no bad pods");
    assert_eq!(failed["severity"], "high");
    assert_eq!(failed["resources"][0]["uid"], "uid-p1");
    assert_eq!(failed["resources"][0]["name"], "p1");
    let (path, query, _) = fake.applies.lock().unwrap()[0].clone();
    assert_eq!(path, format!("policyreports/team/{REPORT}"));
    assert!(
        query.contains("fieldManager=celgate") && query.contains("force=true"),
        "{query}"
    );
    // p1 fixed: its result is replaced.
    webhook
        .review(review(
            "UPDATE",
            Some(pod("p1", false)),
            Some(pod("p1", true)),
        ))
        .await;
    eventually("p1 passes", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (2, 0))
    })
    .await;
    // p2 deleted: its results go.
    webhook
        .review(review("DELETE", None, Some(pod("p2", false))))
        .await;
    eventually("p2 gone", || {
        team_report(&fake).is_some_and(|r| {
            summary(&r) == (1, 0) && r["results"][0]["resources"][0]["name"] == "p1"
        })
    })
    .await;
    // The binding removed: its results go, and with them the report.
    fake.delete(binding());
    eventually("the report deleted", || team_report(&fake).is_none()).await;
    assert_eq!(
        fake.deletes.lock().unwrap().clone(),
        vec![format!("policyreports/team/{REPORT}")]
    );
    server.shutdown().await;
}

/// A burst of 1,000 admissions makes at most one write per interval, and a report over the cap
/// keeps every failure and counts what it leaves out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_batched_and_a_large_report_capped() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    let interval = Duration::from_millis(1000);
    let server = start(config(api, options(1000, 300), None)).await.unwrap();
    ready(&server).await;
    let mut webhook = Webhook::connect(&server).await;
    let started = Instant::now();
    for i in 0..1000 {
        let p = pod(&format!("p{i:04}"), i % 10 == 0);
        webhook.review(review("CREATE", Some(p), None)).await;
    }
    eventually("every result", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (900, 100))
    })
    .await;
    let elapsed = started.elapsed();
    let writes = fake.applies.lock().unwrap().len();
    let intervals = (elapsed.as_millis() / interval.as_millis()) as usize + 1;
    assert!(
        writes <= intervals,
        "{writes} writes for {elapsed:?} of admissions"
    );
    assert!(writes <= 20, "{writes} writes");
    let report = team_report(&fake).unwrap();
    let results = report["results"].as_array().unwrap();
    assert_eq!(results.len(), 300);
    assert_eq!(
        results.iter().filter(|r| r["result"] == "fail").count(),
        100,
        "every failure kept"
    );
    assert_eq!(
        report["metadata"]["annotations"]["celgate.io/results-dropped"],
        "700"
    );
    // Nothing changed: no more writes.
    tokio::time::sleep(interval * 2).await;
    assert_eq!(fake.applies.lock().unwrap().len(), writes);
    server.shutdown().await;
}

/// The names of the resources of `report`'s results with their result, sorted.
fn listed(report: &Json) -> Vec<(String, String)> {
    let mut n: Vec<(String, String)> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let name = r["resources"][0]["name"].as_str().unwrap().to_string();
            (name, r["result"].as_str().unwrap().to_string())
        })
        .collect();
    n.sort();
    n
}

/// Of two replicas, only the Lease holder writes; when it goes away, the other takes the
/// Lease over and writes what it has seen merged with the report the first one wrote: a
/// failing pod it never saw stays (it still exists), a pod deleted since goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_writes() {
    let mut k = kinds();
    k.push(Kind::new("v1", "Pod", "pods", true));
    let (fake, api) = Fake::start(&k).await;
    with_policy(&fake);
    let a = start(config(api, options(100, 100), Some("celgate-a")))
        .await
        .unwrap();
    ready(&a).await;
    eventually("a holds the lease", || {
        fake.object("leases", "celgate-system", "celgate-events")
            .is_some_and(|l| l["spec"]["holderIdentity"] == "celgate-a")
    })
    .await;
    let b = start(config(api, options(100, 100), Some("celgate-b")))
        .await
        .unwrap();
    ready(&b).await;
    // b sees an admission; a does not: for ten of b's intervals, nothing is written.
    let mut to_b = Webhook::connect(&b).await;
    to_b.review(review("CREATE", Some(pod("seen-by-b", true)), None))
        .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(fake.applies.lock().unwrap().is_empty());
    // a, the holder, writes what it sees: two failing pods, one deleted after (its DELETE
    // reaches neither replica).
    let mut to_a = Webhook::connect(&a).await;
    for name in ["seen-by-a", "deleted-later"] {
        fake.apply(pod(name, true));
        to_a.review(review("CREATE", Some(pod(name, true)), None))
            .await;
    }
    eventually("a writes", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (0, 2))
    })
    .await;
    let fail = |name: &str| (name.to_string(), "fail".to_string());
    assert_eq!(
        listed(&team_report(&fake).unwrap()),
        [fail("deleted-later"), fail("seen-by-a")]
    );
    fake.delete(pod("deleted-later", true));
    // a goes away; b takes the Lease over and writes its state merged with a's report.
    a.shutdown().await;
    eventually("b writes", || {
        team_report(&fake).is_some_and(|r| listed(&r) == [fail("seen-by-a"), fail("seen-by-b")])
    })
    .await;
    let lease = fake
        .object("leases", "celgate-system", "celgate-events")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "celgate-b");
    b.shutdown().await;
}

/// A result as celgate lists it in a report: `policy` (its binding `<policy>-all`) failed
/// on the pod `name` of `namespace`.
fn listed_result(policy: &str, namespace: &str, name: &str) -> Json {
    json!({
        "source": "celgate", "policy": policy, "rule": format!("{policy}-all/validations[0]"),
        "severity": "high", "timestamp": {"seconds": 1, "nanos": 0}, "result": "fail",
        "scored": true, "message": "no bad pods",
        "resources": [{"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace, "uid": format!("uid-{name}")}],
        "properties": {"binding": format!("{policy}-all"), "validationIndex": "0", "validationActions": "Deny"}
    })
}

/// An admission report of `namespace` as a previous holder left it, listing `results`.
fn left_report(namespace: &str, results: Vec<Json>) -> Json {
    json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
        "metadata": {"name": REPORT, "namespace": namespace, "labels": {"app.kubernetes.io/managed-by": "celgate", "celgate.io/source": "admission"}},
        "summary": {"pass": 0, "fail": results.len(), "warn": 0, "error": 0, "skip": 0},
        "results": results
    })
}

/// After a restart, the admission reports left by the previous holder converge before
/// anything new is admitted: a removed policy's results go (and a report holding only
/// those is deleted), a failing pod that still exists keeps its result, a deleted pod's
/// goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reconciles_the_existing_reports() {
    let mut k = kinds();
    k.push(Kind::new("v1", "Pod", "pods", true));
    let (fake, api) = Fake::start(&k).await;
    with_policy(&fake);
    fake.apply(pod("kept", true));
    fake.apply(left_report(
        "team",
        vec![
            listed_result("removed", "team", "kept"),
            listed_result("no-bad-label", "team", "kept"),
            listed_result("no-bad-label", "team", "deleted"),
        ],
    ));
    fake.apply(left_report(
        "other",
        vec![listed_result("removed", "other", "elsewhere")],
    ));
    let server = start(config(api, options(100, 100), None)).await.unwrap();
    ready(&server).await;
    eventually("the team report reconciled", || {
        team_report(&fake).is_some_and(|r| listed(&r) == [("kept".into(), "fail".into())])
    })
    .await;
    let report = team_report(&fake).unwrap();
    assert_eq!(report["results"][0]["policy"], "no-bad-label");
    assert_eq!(summary(&report), (0, 1));
    eventually("the other report deleted", || {
        fake.object("policyreports", "other", REPORT).is_none()
    })
    .await;
    server.shutdown().await;
}

/// A holder that shuts down releases the Lease: the other replica takes it over and
/// publishes well before the Lease (60 s here) would have expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lease_is_released_on_shutdown() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    let replica = |identity: &str| {
        let mut cfg = config(api, options(100, 100), Some(identity));
        if let PolicySource::Kubernetes { options, .. } = &mut cfg.source {
            if let Some(lease) = &mut options.events_lease {
                lease.duration = Duration::from_secs(60);
            }
        }
        cfg
    };
    let a = start(replica("celgate-a")).await.unwrap();
    ready(&a).await;
    let holder = || {
        fake.object("leases", "celgate-system", "celgate-events")
            .and_then(|l| l["spec"]["holderIdentity"].as_str().map(str::to_string))
    };
    eventually("a holds the lease", || {
        holder().as_deref() == Some("celgate-a")
    })
    .await;
    let b = start(replica("celgate-b")).await.unwrap();
    ready(&b).await;
    let mut to_b = Webhook::connect(&b).await;
    to_b.review(review("CREATE", Some(pod("seen-by-b", true)), None))
        .await;
    a.shutdown().await;
    eventually("b holds the lease", || {
        holder().as_deref() == Some("celgate-b")
    })
    .await;
    eventually("b writes", || team_report(&fake).is_some()).await;
    assert_eq!(
        listed(&team_report(&fake).unwrap()),
        [("seen-by-b".to_string(), "fail".to_string())]
    );
    b.shutdown().await;
}

/// The Lease record of another replica, held for a minute from now.
fn lease_held_by(identity: &str) -> Json {
    let now = serde_json::to_value(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ))
    .unwrap();
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "celgate-events", "namespace": "celgate-system"},
        "spec": {"holderIdentity": identity, "leaseDurationSeconds": 60, "acquireTime": now, "renewTime": now}
    })
}

/// A writer that loses the Lease while it adopts the existing reports (a list across all
/// namespaces, which may be slow) writes nothing after it: the new holder's reports are
/// not overwritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_that_loses_the_lease_while_adopting_writes_nothing() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    fake.stall("policyreports");
    let a = start(config(api, options(100, 100), Some("celgate-a")))
        .await
        .unwrap();
    ready(&a).await;
    let mut to_a = Webhook::connect(&a).await;
    to_a.review(review("CREATE", Some(pod("seen-by-a", true)), None))
        .await;
    eventually("a adopts (its list of the reports waits)", || {
        fake.count("policyreports") > 0
    })
    .await;
    // Another replica takes the Lease over while a's list waits.
    fake.apply(lease_held_by("celgate-other"));
    let cluster = a.cluster.clone().unwrap();
    eventually("a no longer holds the lease", || !cluster.is_leader()).await;
    fake.release("policyreports");
    eventually("a's adoption lists the cluster reports", || {
        fake.count("clusterpolicyreports") > 0
    })
    .await;
    // Several write intervals (100 ms) after the adoption.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let applies = fake.applies.lock().unwrap().clone();
    assert!(
        applies
            .iter()
            .all(|(at, _, _)| !at.contains("policyreports")),
        "written after losing the lease: {applies:?}"
    );
    a.shutdown().await;
}

/// Shutdown does not wait on an API server that does not answer: the Lease release runs
/// beside the drain and is given up after `release_timeout`, well before three renewal
/// periods (here a minute), and the listeners stop accepting at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_does_not_wait_on_an_unanswering_api_server() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    let mut cfg = config(api, options(100, 100), Some("celgate-a"));
    if let PolicySource::Kubernetes { options, .. } = &mut cfg.source {
        if let Some(lease) = &mut options.events_lease {
            lease.duration = Duration::from_secs(60);
            lease.renew = Duration::from_secs(20);
            lease.release_timeout = Duration::from_secs(1);
        }
    }
    let a = start(cfg).await.unwrap();
    ready(&a).await;
    let cluster = a.cluster.clone().unwrap();
    eventually("a holds the lease", || cluster.is_leader()).await;
    let webhook = a.bound.webhook;
    fake.set_hanging(true);
    let started = Instant::now();
    let shutdown = tokio::spawn(a.shutdown());
    eventually("the listener stops accepting", || {
        std::net::TcpStream::connect(webhook).is_err()
    })
    .await;
    tokio::time::timeout(Duration::from_secs(40), shutdown)
        .await
        .expect("shutdown finished")
        .unwrap();
    // Three renewal periods would be 60 s; the drain has nothing to wait for.
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "shutdown took {:?}",
        started.elapsed()
    );
    fake.set_hanging(false);
}

/// The report flags (and the Lease release timeout) refuse what would disable them or cannot
/// work, before anything starts, naming the flag; their defaults are off, 10s, 2000, 100000
/// and 5s.
#[test]
fn report_flags_refuse_bad_values() {
    let kube = [
        "--source",
        "kubernetes",
        "--kube-api-url",
        "http://127.0.0.1:9",
    ];
    let cases: [(&[&str], &str); 7] = [
        (
            &[&kube[..], &["--lease-release-timeout", "0s"]].concat(),
            "--lease-release-timeout",
        ),
        (
            &["--reports", "wgpolicy"],
            "--reports needs --source kubernetes",
        ),
        (&["--reports", "kyverno"], "--reports"),
        (
            &[
                &kube[..],
                &["--reports", "wgpolicy", "--reports-interval", "0s"],
            ]
            .concat(),
            "--reports-interval",
        ),
        (
            &[
                &kube[..],
                &["--reports", "wgpolicy", "--reports-interval", "soon"],
            ]
            .concat(),
            "--reports-interval",
        ),
        (
            &[
                &kube[..],
                &["--reports", "openreports", "--reports-max-results", "0"],
            ]
            .concat(),
            "--reports-max-results must be at least 1",
        ),
        (
            &[
                &kube[..],
                &["--reports", "wgpolicy", "--reports-max-resources", "0"],
            ]
            .concat(),
            "--reports-max-resources must be at least 1",
        ),
    ];
    serve_flags::serve_refuses(&cases);
    serve_flags::serve_help_shows(&[
        ("--reports <REPORTS>", "[default: off]"),
        ("--reports-interval <DURATION>", "[default: 10s]"),
        ("--reports-max-results <N>", "[default: 2000]"),
        ("--reports-max-resources <N>", "[default: 100000]"),
        ("--lease-release-timeout <DURATION>", "[default: 5s]"),
    ]);
}

/// A ConfigMap review of `operation` (`new` and `old` as that operation carries them).
fn configmap_review(operation: &str, new: Option<Json>, old: Option<Json>) -> Json {
    let mut r = review(operation, new, old);
    r["request"]["kind"] = json!({"group": "", "version": "v1", "kind": "ConfigMap"});
    r["request"]["resource"] = json!({"group": "", "version": "v1", "resource": "configmaps"});
    r
}

fn configmap(name: &str, uid: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "team", "uid": uid}, "data": {"k": "v"}})
}

/// The admission state follows what exists: after a complete background scan, a pod that
/// was admitted here but no longer exists (its DELETE went elsewhere, or never came) loses
/// its results, while a listed pod keeps its own, and a ConfigMap admitted through an
/// UPDATE-only binding (a kind no scan lists) keeps its result although it is not in the
/// cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_complete_scan_drops_admission_results_of_gone_resources() {
    let mut k = kinds();
    k.push(Kind::new("v1", "Pod", "pods", true));
    k.push(Kind::new("v1", "ConfigMap", "configmaps", true));
    let (fake, api) = Fake::start(&k).await;
    with_policy(&fake);
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "cm-frozen"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "false", "message": "frozen"}]
        }
    }));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "cm-frozen"},
        "spec": {"policyName": "cm-frozen", "validationActions": ["Audit"]}
    }));
    // Only `kept` exists in the cluster (the fake's uid for it is uid-pods-kept).
    let mut kept = pod("kept", true);
    kept["metadata"]["uid"] = json!("uid-pods-kept");
    fake.apply(kept.clone());
    let mut cfg = config(api, options(100, 100), None);
    if let celgate::app::PolicySource::Kubernetes { options, .. } = &mut cfg.source {
        options.background = Some(celgate::source::kube::background::BackgroundOptions {
            interval: Duration::from_millis(300),
            debounce: Duration::from_millis(50),
            ..Default::default()
        });
    }
    let server = start(cfg).await.unwrap();
    ready(&server).await;
    let mut webhook = Webhook::connect(&server).await;
    webhook.review(review("CREATE", Some(kept), None)).await;
    webhook
        .review(review("CREATE", Some(pod("gone", true)), None))
        .await;
    let (old, new) = (configmap("cm", "uid-cm"), configmap("cm", "uid-cm"));
    webhook
        .review(configmap_review("UPDATE", Some(new), Some(old)))
        .await;
    let names = |r: &Json| -> Vec<String> {
        let mut n: Vec<String> = r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["resources"][0]["name"].as_str().unwrap().to_string())
            .collect();
        n.sort();
        n
    };
    eventually("the pod `gone` dropped by a scan", || {
        team_report(&fake).is_some_and(|r| names(&r) == ["cm", "kept"])
    })
    .await;
    // It stays so: the ConfigMap is never dropped by later scans.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(names(&team_report(&fake).unwrap()), ["cm", "kept"]);
    assert_eq!(fake.count("/api/v1/configmaps"), 0, "no scan lists them");
    server.shutdown().await;
}

/// `--reports-max-resources`: past the bound, the resource recorded longest ago leaves the
/// reports, and the metric counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_state_is_bounded() {
    let (fake, api) = Fake::start(&kinds()).await;
    with_policy(&fake);
    let mut reports = options(100, 100);
    reports.max_resources = 2;
    let server = start(config(api, reports, None)).await.unwrap();
    ready(&server).await;
    let mut webhook = Webhook::connect(&server).await;
    for name in ["p1", "p2", "p3"] {
        webhook
            .review(review("CREATE", Some(pod(name, true)), None))
            .await;
    }
    eventually("two pods reported", || {
        team_report(&fake).is_some_and(|r| {
            let names: Vec<&Json> = r["results"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| &r["resources"][0]["name"])
                .collect();
            names == ["p2", "p3"]
        })
    })
    .await;
    let evicted = || {
        let text = String::from_utf8(server.state.metrics.encode()).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("celgate_report_resources_evicted_total "))
            .map(str::to_string)
    };
    eventually("the eviction counted", || evicted().as_deref() == Some("1")).await;
    server.shutdown().await;
}
