//! Background scans in the cluster (`serve --source kubernetes --background-interval ...`):
//! the whole service against the in-process fake API server. Lists are paginated (each page
//! requested, continue tokens followed), rate-limited, restarted after `410 Gone` on a
//! continue token; results reach the metrics and the `celgate-background` reports, a fixed
//! or deleted object loses its failing result at the next scan, a policy change triggers a
//! scan, and only the Lease holder scans and writes.

mod common;
mod fake_apiserver;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use celgate::app::{start, Running, ServeConfig};
use celgate::scan::report::ReportApi;
use celgate::source::kube::background::BackgroundOptions;
use celgate::source::kube::reports::ReportOptions;
use common::serve_flags;
use fake_apiserver::{policy_kinds, report_kinds, Fake, Kind};
use serde_json::{json, Value as Json};

const REPORT: &str = "celgate-background";

fn kinds() -> Vec<Kind> {
    let mut k = policy_kinds("v1").to_vec();
    k.push(Kind::new("v1", "Namespace", "namespaces", false));
    k.push(Kind::new("v1", "Pod", "pods", true));
    k.push(Kind::new("v1", "ConfigMap", "configmaps", true));
    k.extend(report_kinds());
    k
}

fn the_policy(message: &str) -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-bad-label"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "validations": [{"expression": "!has(object.metadata.labels) || !('bad' in object.metadata.labels)", "message": message, "reason": "Forbidden"}]
        }
    })
}

/// Namespace `team`; the policy `no-bad-label` (pods with the label `bad` fail) bound with
/// Deny; `good` passing pods and `bad` failing ones in `team`, and a ConfigMap no policy
/// selects.
fn cluster(fake: &Fake, good: usize, bad: usize) {
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "labels": {"kubernetes.io/metadata.name": "team"}}}));
    fake.apply(the_policy("no bad pods"));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "no-bad-label-all"},
        "spec": {"policyName": "no-bad-label", "validationActions": ["Deny"]}
    }));
    for i in 0..good {
        fake.apply(pod(&format!("good-{i}"), false));
    }
    for i in 0..bad {
        fake.apply(pod(&format!("bad-{i}"), true));
    }
    fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team"}}));
}

fn pod(name: &str, bad: bool) -> Json {
    let labels = if bad {
        json!({"bad": "yes"})
    } else {
        json!({})
    };
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team", "labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
}

fn background(interval_ms: u64, page_size: u32, qps: f64) -> BackgroundOptions {
    BackgroundOptions {
        interval: Duration::from_millis(interval_ms),
        debounce: Duration::from_millis(100),
        page_size,
        qps,
        concurrency: 2,
        ..BackgroundOptions::default()
    }
}

fn config(api: SocketAddr, background: BackgroundOptions, lease: Option<&str>) -> ServeConfig {
    common::serve::config(common::serve::cluster(
        api,
        celgate::source::kube::KubeOptions {
            reports: Some(ReportOptions {
                api: ReportApi::WgPolicy,
                interval: Duration::from_millis(100),
                max_results: 100,
                ..ReportOptions::default()
            }),
            background: Some(background),
            ..common::serve::replica(lease)
        },
    ))
}

/// Polls `check` for up to 15 s.
async fn eventually(what: &str, check: impl FnMut() -> bool) {
    fake_apiserver::eventually_within(Duration::from_secs(15), what, check).await
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

/// The pod lists requested so far (path and query).
fn pod_lists(fake: &Fake) -> Vec<String> {
    fake.requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.starts_with("GET /api/v1/pods?"))
        .cloned()
        .collect()
}

/// The value of the sample `line` (a metric with its labels) in `server`'s metrics.
fn metric(server: &Running, line: &str) -> Option<f64> {
    common::serve::sample(&common::serve::metrics_text(server), line)
}

fn objects_scanned(server: &Running) -> f64 {
    metric(
        server,
        r#"celgate_background_objects_scanned_total{resource="pods"}"#,
    )
    .unwrap_or(0.0)
}

/// Five pods listed two per page: every page is requested with the limit, each continue
/// token followed; only the resource a binding selects is listed; the results reach the
/// report `celgate-background` of their namespace and the metrics (source="scan").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_are_followed_and_results_reach_reports_and_metrics() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 3, 2);
    let server = start(config(api, background(3_600_000, 2, 100.0), None))
        .await
        .unwrap();
    eventually("the background report", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (3, 2))
    })
    .await;
    assert_eq!(
        pod_lists(&fake),
        [
            "GET /api/v1/pods?&limit=2",
            "GET /api/v1/pods?&limit=2&continue=2",
            "GET /api/v1/pods?&limit=2&continue=4"
        ]
    );
    assert_eq!(
        fake.count("/api/v1/configmaps"),
        0,
        "no binding selects them"
    );
    let report = team_report(&fake).unwrap();
    assert_eq!(
        report["metadata"]["labels"]["celgate.io/source"],
        "background"
    );
    let failed: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["result"] == "fail")
        .collect();
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0]["message"], "no bad pods");
    assert_eq!(failed[0]["resources"][0]["kind"], "Pod");
    assert_eq!(failed[0]["resources"][0]["apiVersion"], "v1");
    assert_eq!(failed[0]["resources"][0]["uid"], "uid-pods-bad-0");
    // No admission happened: no admission report.
    assert!(fake
        .object("policyreports", "team", "celgate-admission")
        .is_none());
    assert_eq!(objects_scanned(&server), 5.0);
    let fail = r#"celgate_policy_results_total{action="deny",binding="no-bad-label-all",policy="no-bad-label",result="fail",source="scan"}"#;
    assert_eq!(metric(&server, fail), Some(2.0));
    assert_eq!(
        metric(&server, "celgate_background_scan_duration_seconds_count"),
        Some(1.0)
    );
    server.shutdown().await;
}

/// A policy change triggers a scan (the interval is an hour), which sees the cluster as it
/// is then: a fixed pod and a deleted one lose their failing results, and the report takes
/// the changed policy's message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_change_rescans_and_fixed_objects_lose_their_failures() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 1, 3);
    let server = start(config(api, background(3_600_000, 500, 100.0), None))
        .await
        .unwrap();
    eventually("the first scan", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (1, 3))
    })
    .await;
    fake.apply(pod("bad-0", false));
    fake.delete(pod("bad-1", true));
    // Nothing rescans by itself within the hour.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pod_lists(&fake).len(), 1);
    assert_eq!(summary(&team_report(&fake).unwrap()), (1, 3));
    fake.apply(the_policy("still no bad pods"));
    eventually("the rescan", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (2, 1))
    })
    .await;
    let report = team_report(&fake).unwrap();
    let failed: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["result"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["resources"][0]["name"], "bad-2");
    assert_eq!(failed[0]["message"], "still no bad pods");
    // The policy's change was one scan, not several.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pod_lists(&fake).len(), 2);
    server.shutdown().await;
}

/// The interval rescans without any change, and the pod fixed in between passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_interval_rescans() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 0, 1);
    let server = start(config(api, background(300, 500, 100.0), None))
        .await
        .unwrap();
    eventually("the first scan", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (0, 1))
    })
    .await;
    fake.apply(pod("bad-0", false));
    eventually("a later scan", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (1, 0))
    })
    .await;
    assert!(pod_lists(&fake).len() >= 2);
    server.shutdown().await;
}

/// At 5 requests per second, a scan of 8 pods listed one per page (plus discovery) takes
/// its time: any 6 consecutive requests of the scan span at least a second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rate_limit_is_respected() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 8, 0);
    let server = start(config(api, background(3_600_000, 1, 5.0), None))
        .await
        .unwrap();
    eventually("the scan", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (8, 0))
    })
    .await;
    // The scan's requests: discovery of the core group, then the pages.
    let times: Vec<Instant> = fake
        .request_times
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| {
            r == "GET /api" || r == "GET /api/v1" || r.starts_with("GET /api/v1/pods?")
        })
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(times.len(), 2 + 8, "discovery and one request per pod");
    for window in times.windows(6) {
        let spanned = window[5] - window[0];
        assert!(
            spanned >= Duration::from_millis(900),
            "6 requests within {spanned:?}"
        );
    }
    server.shutdown().await;
}

/// A `410 Gone` on a continue token restarts that resource's list from the first page, and
/// what the first pages found is dropped: a pod deleted meanwhile leaves no result, and the
/// report counts each pod once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_list_starts_over() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 3, 2);
    fake.expire_continue("pods", 1);
    // bad-0 was on the first page (pods are listed by name).
    fake.on_expire(|fake| {
        fake.delete(pod("bad-0", true));
    });
    let server = start(config(api, background(3_600_000, 2, 100.0), None))
        .await
        .unwrap();
    eventually("the background report", || team_report(&fake).is_some()).await;
    assert_eq!(
        pod_lists(&fake),
        [
            "GET /api/v1/pods?&limit=2",
            "GET /api/v1/pods?&limit=2&continue=2",
            "GET /api/v1/pods?&limit=2",
            "GET /api/v1/pods?&limit=2&continue=2"
        ]
    );
    let report = team_report(&fake).unwrap();
    assert_eq!(summary(&report), (3, 1));
    let names: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["resources"][0]["name"])
        .collect();
    assert_eq!(names, ["bad-1", "good-0", "good-1", "good-2"]);
    server.shutdown().await;
}

/// A policy and its binding on `resources` of the core group, whose validation passes.
fn core_policy(name: &str, resources: &[&str]) -> [Json; 2] {
    [
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["*"], "operations": ["CREATE"], "resources": resources}]},
                "validations": [{"expression": "true"}]
            }
        }),
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {"policyName": name, "validationActions": ["Audit"]}
        }),
    ]
}

/// Scans read only what the bindings can match: with Pod policies, Pods (no ConfigMap or
/// Secret list); a core-group `*` policy adds ConfigMaps but not Secrets; Secrets are
/// listed once a policy names `secrets`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_list_what_policies_match_and_secrets_only_when_named() {
    let mut kinds = kinds();
    kinds.push(Kind::new("v1", "Secret", "secrets", true));
    let (fake, api) = Fake::start(&kinds).await;
    cluster(&fake, 1, 1);
    fake.apply(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "team"}}));
    let server = start(config(api, background(3_600_000, 500, 100.0), None))
        .await
        .unwrap();
    let scans = |server: &Running| {
        metric(server, "celgate_background_scan_duration_seconds_count").unwrap_or(0.0)
    };
    eventually("the first scan", || scans(&server) >= 1.0).await;
    let lists = |plural: &str| fake.count(&format!("GET /api/v1/{plural}?"));
    assert_eq!(
        (lists("pods"), lists("configmaps"), lists("secrets")),
        (1, 0, 0),
        "Pod policies: Pods only"
    );
    for o in core_policy("everything-core", &["*"]) {
        fake.apply(o);
    }
    eventually("the wildcard's scan", || lists("configmaps") == 1).await;
    eventually("its end", || scans(&server) >= 2.0).await;
    assert_eq!(lists("secrets"), 0, "a wildcard does not read Secrets");
    for o in core_policy("secrets-named", &["secrets"]) {
        fake.apply(o);
    }
    eventually("Secrets listed once named", || lists("secrets") == 1).await;
    server.shutdown().await;
}

/// Of two replicas, only the Lease holder scans and writes; once it is gone, the other
/// takes the Lease over and scans at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lease_holder_scans() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 1, 1);
    let a = start(config(
        api,
        background(3_600_000, 500, 100.0),
        Some("celgate-a"),
    ))
    .await
    .unwrap();
    eventually("a holds the lease and scanned", || {
        objects_scanned(&a) == 2.0 && team_report(&fake).is_some()
    })
    .await;
    let b = start(config(
        api,
        background(3_600_000, 500, 100.0),
        Some("celgate-b"),
    ))
    .await
    .unwrap();
    // b is ready, yet for a second (ten Lease rounds) it neither scans nor writes.
    eventually("b ready", || {
        b.state.ready.load(std::sync::atomic::Ordering::Acquire)
    })
    .await;
    let writes = fake.applies.lock().unwrap().len();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(objects_scanned(&b), 0.0);
    assert_eq!(pod_lists(&fake).len(), 1, "a's scan only");
    assert_eq!(fake.applies.lock().unwrap().len(), writes);
    a.shutdown().await;
    eventually("b takes over and scans", || objects_scanned(&b) == 2.0).await;
    let lease = fake
        .object("leases", "celgate-system", "celgate-events")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "celgate-b");
    b.shutdown().await;
}

/// A report as a previous Lease holder (or another tool, `managed_by`) left it.
fn left_report(
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    source: &str,
    managed_by: &str,
) -> Json {
    let mut r = json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": kind,
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": managed_by, "celgate.io/source": source}},
        "results": [{"policy": "no-bad-label", "result": "fail"}],
        "summary": {"pass": 0, "fail": 1, "warn": 0, "error": 0, "skip": 0}
    });
    if let Some(ns) = namespace {
        r["metadata"]["namespace"] = json!(ns);
    }
    r
}

/// A new Lease holder's first complete scan deletes the background reports celgate wrote
/// before that the current state no longer has: those of a namespace without results now
/// (`old`, whose failing pod was deleted meanwhile) and the cluster report; the report of a
/// namespace with results is rewritten, and reports of another source or another manager
/// stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takeover_deletes_stale_background_reports() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 1, 1);
    fake.apply(left_report(
        "PolicyReport",
        Some("old"),
        REPORT,
        "background",
        "celgate",
    ));
    fake.apply(left_report(
        "PolicyReport",
        Some("team"),
        REPORT,
        "background",
        "celgate",
    ));
    fake.apply(left_report(
        "ClusterPolicyReport",
        None,
        REPORT,
        "background",
        "celgate",
    ));
    // The admission report is adopted by the admission writer (its result is of a pod
    // that exists, so it stays), never swept by the background one.
    let mut admission = left_report(
        "PolicyReport",
        Some("team"),
        "celgate-admission",
        "admission",
        "celgate",
    );
    admission["results"] = json!([{
        "source": "celgate", "policy": "no-bad-label", "rule": "no-bad-label-all/validations[0]",
        "result": "fail", "timestamp": {"seconds": 1, "nanos": 0},
        "resources": [{"apiVersion": "v1", "kind": "Pod", "name": "bad-0", "namespace": "team", "uid": "uid-pods-bad-0"}],
        "properties": {"binding": "no-bad-label-all", "validationIndex": "0", "validationActions": "Deny"}
    }]);
    fake.apply(admission);
    fake.apply(left_report(
        "PolicyReport",
        Some("old"),
        "kyverno-thing",
        "background",
        "kyverno",
    ));
    let server = start(config(
        api,
        background(3_600_000, 500, 100.0),
        Some("celgate-new"),
    ))
    .await
    .unwrap();
    eventually("the stale reports deleted", || {
        fake.object("policyreports", "old", REPORT).is_none()
            && fake.object("clusterpolicyreports", "", REPORT).is_none()
    })
    .await;
    eventually("team's report rewritten", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (1, 1))
    })
    .await;
    let mut deletes = fake.deletes.lock().unwrap().clone();
    deletes.sort();
    assert_eq!(
        deletes,
        [
            format!("clusterpolicyreports//{REPORT}"),
            format!("policyreports/old/{REPORT}")
        ]
    );
    assert!(fake
        .object("policyreports", "team", "celgate-admission")
        .is_some());
    assert!(fake
        .object("policyreports", "old", "kyverno-thing")
        .is_some());
    // Listed by their labels, not one by one.
    assert!(
        fake.count("/apis/wgpolicyk8s.io/v1alpha2/policyreports?&labelSelector=app.kubernetes.io%2Fmanaged-by%3Dcelgate%2Ccelgate.io%2Fsource%3Dbackground") >= 1,
        "{:?}",
        fake.requests.lock().unwrap()
    );
    server.shutdown().await;
}

/// A scan's `authorizer` checks are SubjectAccessReviews for celgate's service account
/// (`--service-account celgate-system:celgate`: its user and groups, as the API server
/// authenticates it), about what the expression asks; and the policy gets the answer for
/// that identity: here the account may delete every pod but `bad-0`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorizer_checks_ask_about_celgates_service_account() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake, 1, 1);
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "no-bad-label"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{
                "expression": "authorizer.group('').resource('pods').namespace(object.metadata.namespace).name(object.metadata.name).check('delete').allowed()",
                "message": "celgate may not delete it"
            }]
        }
    }));
    const SA: &str = "system:serviceaccount:celgate-system:celgate";
    fake.on_review(|spec| {
        let allowed = spec["user"] == SA && spec["resourceAttributes"]["name"] != "bad-0";
        Ok(json!({"allowed": allowed}))
    });
    let (user, groups) = celgate::scan::service_account_identity("celgate-system", "celgate");
    let mut cfg = config(
        api,
        BackgroundOptions {
            user,
            groups,
            ..background(3_600_000, 500, 100.0)
        },
        None,
    );
    if let celgate::app::PolicySource::Kubernetes { sar, .. } = &mut cfg.source {
        *sar = Some(Default::default());
    }
    let server = start(cfg).await.unwrap();
    eventually("the background report", || {
        team_report(&fake).is_some_and(|r| summary(&r) == (1, 1))
    })
    .await;
    let report = team_report(&fake).unwrap();
    let failed: Vec<&Json> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["result"] == "fail")
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["resources"][0]["name"], "bad-0");
    assert_eq!(failed[0]["message"], "celgate may not delete it");
    let reviews = fake.reviews.lock().unwrap().clone();
    let mut asked: Vec<String> = reviews
        .iter()
        .map(|r| {
            r["spec"]["resourceAttributes"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    asked.sort();
    asked.dedup();
    assert_eq!(asked, ["bad-0", "good-0"]);
    for review in &reviews {
        let spec = &review["spec"];
        assert_eq!(spec["user"], SA, "{review}");
        let groups: Vec<&str> = spec["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g.as_str().unwrap())
            .collect();
        for g in [
            "system:serviceaccounts",
            "system:serviceaccounts:celgate-system",
            "system:authenticated",
        ] {
            assert!(groups.contains(&g), "{g} not in {groups:?}");
        }
        let attributes = &spec["resourceAttributes"];
        assert_eq!(attributes["verb"], "delete");
        assert_eq!(attributes["resource"], "pods");
        assert_eq!(attributes["namespace"], "team");
    }
    server.shutdown().await;
}

/// The background flags refuse values that cannot work, before anything starts, naming
/// the flag; their defaults are 1h, 500, 20, 2, 5s and celgate.
#[test]
fn background_flags_refuse_bad_values() {
    let kube = [
        "--source",
        "kubernetes",
        "--kube-api-url",
        "http://127.0.0.1:9",
    ];
    let cases: [(&[&str], &str); 7] = [
        (&["--background-interval", "soon"], "--background-interval"),
        (&["--background-interval=-1h"], "--background-interval"),
        (
            &["--background-page-size", "0"],
            "--background-page-size must be at least 1",
        ),
        (&["--background-qps", "0"], "--background-qps"),
        (&["--background-qps", "NaN"], "--background-qps"),
        (
            &["--background-concurrency", "0"],
            "--background-concurrency must be at least 1",
        ),
        (&["--service-account", "Bad:Name"], "--service-account"),
    ];
    // Each refused value with the cluster source, which background scans need.
    let cases: Vec<(Vec<&str>, &str)> = cases
        .iter()
        .map(|(args, needle)| ([&kube[..], args].concat(), *needle))
        .collect();
    serve_flags::serve_refuses(&cases);
    serve_flags::serve_help_shows(&[
        ("--background-interval <DURATION>", "[default: 1h]"),
        ("--background-page-size <N>", "[default: 500]"),
        ("--background-qps <QPS>", "[default: 20]"),
        ("--background-concurrency <N>", "[default: 2]"),
        ("--background-debounce <DURATION>", "[default: 5s]"),
        ("--service-account <[NAMESPACE:]NAME>", "[default: celgate]"),
    ]);
}
