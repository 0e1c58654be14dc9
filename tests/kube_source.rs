//! The cluster source against an in-process fake API server, through a real kube-rs client
//! over HTTP: the snapshot follows every change (list, added, modified, deleted, bookmarks,
//! dropped watches, 410 Gone), param kinds start and stop, namespace labels change matching,
//! readiness waits for the initial lists, the v1beta1 fallback, staleness while the API
//! server is down, prompt recovery after an outage (and after a late start) with staleness
//! counted until the re-list, SubjectAccessReview checks, Events for misconfigured objects,
//! the cluster's CRDs in the resource registry (or, forbidden, lenient matching), an etcd
//! wiped or restored (history going back, a new cluster identity), the periodic re-list that
//! finds what a watch missed, rebuilds only for param changes a binding can see, and
//! MutatingAdmissionPolicies watched beside the validating ones where the cluster serves them.

mod common;
mod fake_apiserver;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use celgate::admission::{AdmitContext, Services};
use celgate::policy::snapshot::Snapshot;
use celgate::source::kube::authorizer::{SarAuthorizer, SarOptions};
use celgate::source::kube::namespaces::ClusterNamespaces;
use celgate::source::kube::{KubeOptions, KubeSource};
use common::fixtures;
use fake_apiserver::{eventually, mutating_policy_kinds, policy_kinds, Fake, Kind};
use serde_json::{json, Value as Json};

/// The latest snapshot published, and the live services the server gives evaluations (as
/// `server::run` wires them).
#[derive(Clone, Default)]
struct Latest {
    snapshot: Arc<Mutex<Option<Arc<Snapshot>>>>,
    services: Services,
    /// Snapshots published so far (each one a rebuild).
    published: Arc<std::sync::atomic::AtomicUsize>,
}

impl std::ops::Deref for Latest {
    type Target = Mutex<Option<Arc<Snapshot>>>;
    fn deref(&self) -> &Self::Target {
        &self.snapshot
    }
}

impl Latest {
    /// The answer of `snapshot` to `body`, with the services.
    fn answer(&self, snapshot: &Snapshot, body: &[u8]) -> Option<Json> {
        let context = AdmitContext {
            services: &self.services,
            ..AdmitContext::default()
        };
        celgate::review::answer(snapshot, body, &context, Default::default())
            .ok()
            .map(|a| a.review())
    }
}

fn options() -> KubeOptions {
    KubeOptions {
        debounce: Duration::from_millis(20),
        param_grace: Duration::from_millis(500),
        recheck: Duration::from_millis(200),
        events: true,
        instance: "celgate-test".into(),
        ..KubeOptions::default()
    }
}

fn client(addr: std::net::SocketAddr) -> kube::Client {
    let config = kube::Config::new(format!("http://{addr}").parse().unwrap());
    kube::Client::try_from(config).unwrap()
}

fn start(addr: std::net::SocketAddr, options: KubeOptions, sar: bool) -> (KubeSource, Latest) {
    let client = client(addr);
    let authorizer = sar.then(|| {
        SarAuthorizer::new(client.clone(), SarOptions::default())
            as Arc<dyn celgate::cel::k8s::authz::AuthorizerFactory>
    });
    let latest = Latest {
        snapshot: Arc::default(),
        services: Services {
            authorizer,
            namespace_lookup: Some(Arc::new(ClusterNamespaces::new(client.clone()))),
        },
        published: Arc::default(),
    };
    let (sink, published) = (latest.snapshot.clone(), latest.published.clone());
    let source = KubeSource::start(
        client,
        options,
        Arc::new(move |s| {
            *sink.lock().unwrap() = Some(Arc::new(s));
            published.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }),
    );
    (source, latest)
}

/// [`start`], once the source is ready.
async fn start_ready(addr: std::net::SocketAddr, sar: bool) -> (KubeSource, Latest) {
    let (source, latest) = start(addr, options(), sar);
    eventually("ready", || source.ready()).await;
    (source, latest)
}

fn core_kinds() -> Vec<Kind> {
    let mut k = policy_kinds("v1").to_vec();
    k.push(Kind::new("v1", "Namespace", "namespaces", false));
    k.push(Kind::new("v1", "ConfigMap", "configmaps", true));
    k
}

fn namespace(name: &str, env: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"env": env, "kubernetes.io/metadata.name": name}}})
}

/// Denies pods named `bad`, or (with params) pods with more containers than `params.data.max`.
fn policy(name: &str, params: bool) -> Json {
    let mut p = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{"expression": "object.metadata.name != 'bad'", "message": "no bad pods"}]
        }
    });
    if params {
        p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
        p["spec"]["validations"] = json!([{"expression": "size(object.spec.containers) <= int(params.data.max)", "messageExpression": "'at most ' + params.data.max + ' containers'"}]);
    }
    p
}

fn binding(name: &str, policy: &str, selector: Json, param_ref: Option<Json>) -> Json {
    let mut b = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy, "validationActions": ["Deny"], "matchResources": {"namespaceSelector": selector}}
    });
    if let Some(p) = param_ref {
        b["spec"]["paramRef"] = p;
    }
    b
}

/// The `no-bad` policy, bound in namespaces labelled `env: prod`.
fn with_no_bad_in_prod(fake: &Fake) {
    fake.apply(policy("no-bad", false));
    fake.apply(binding(
        "no-bad-prod",
        "no-bad",
        json!({"matchLabels": {"env": "prod"}}),
        None,
    ));
}

/// The ConfigMap param `team/limits`.
fn limits(max: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": "team"}, "data": {"max": max}})
}

/// Namespace `team`, its `limits` param, and the `max-containers` policy bound to it.
fn with_limits(fake: &Fake, max: &str) {
    fake.apply(namespace("team", "prod"));
    fake.apply(limits(max));
    fake.apply(policy("max-containers", true));
    fake.apply(binding(
        "max-containers",
        "max-containers",
        json!({}),
        Some(json!({"name": "limits", "parameterNotFoundAction": "Deny"})),
    ));
}

fn review(namespace: &str, name: &str, containers: usize) -> Vec<u8> {
    let containers: Vec<Json> = (0..containers)
        .map(|i| json!({"name": format!("c{i}"), "image": "nginx"}))
        .collect();
    let mut review = fixtures::pod_create_review(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {"containers": containers}}),
        json!({"username": "alice", "uid": "a-1", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["s1"]}}),
    );
    review["request"]["uid"] = json!("u-1");
    review.to_string().into_bytes()
}

/// The response of the latest snapshot to `body` (off the async workers, as the server does).
async fn respond(latest: &Latest, body: Vec<u8>) -> Json {
    let snapshot = latest.lock().unwrap().clone().expect("a snapshot");
    let latest = latest.clone();
    tokio::task::spawn_blocking(move || {
        latest.answer(&snapshot, &body).unwrap()["response"].clone()
    })
    .await
    .unwrap()
}

fn allowed(latest: &Latest, body: Vec<u8>) -> Option<bool> {
    let snapshot = latest.lock().unwrap().clone()?;
    let answer = latest.answer(&snapshot, &body)?;
    answer["response"]["allowed"].as_bool()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_follows_every_change() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(namespace("other", "dev"));
    with_no_bad_in_prod(&fake);
    let (source, latest) = start_ready(addr, false).await;
    assert_eq!(source.policy_api_version().as_deref(), Some("v1"));
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    assert_eq!(allowed(&latest, review("other", "bad", 1)), Some(true));
    let denial = respond(&latest, review("team", "bad", 1)).await;
    // A validation without a reason is Invalid (422), as in-tree.
    assert_eq!(denial["status"]["code"], 422);
    assert!(denial["status"]["message"]
        .as_str()
        .unwrap()
        .contains("no bad pods"));

    // A namespace label change changes matching.
    fake.apply(namespace("other", "prod"));
    eventually("label change seen", || {
        allowed(&latest, review("other", "bad", 1)) == Some(false)
    })
    .await;
    fake.apply(namespace("team", "dev"));
    eventually("label removal seen", || {
        allowed(&latest, review("team", "bad", 1)) == Some(true)
    })
    .await;

    // A modified policy.
    let mut p = policy("no-bad", false);
    p["spec"]["validations"][0]["expression"] = json!("object.metadata.name != 'worse'");
    fake.apply(p);
    eventually("policy change seen", || {
        allowed(&latest, review("other", "bad", 1)) == Some(true)
            && allowed(&latest, review("other", "worse", 1)) == Some(false)
    })
    .await;

    // Bookmarks change nothing. A namespace applied after them is the signal that the
    // namespaces watch has handled its bookmark and a snapshot was built since.
    fake.bookmark();
    fake.apply(namespace("after-bookmark", "dev"));
    eventually("a change after the bookmark seen", || {
        latest
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.namespaces.contains_key("after-bookmark"))
    })
    .await;
    assert_eq!(allowed(&latest, review("other", "worse", 1)), Some(false));

    // A dropped watch resumes from its resourceVersion: a change made meanwhile is seen.
    let watches = fake.count("namespaces?&watch=true");
    fake.drop_watches();
    fake.apply(namespace("third", "prod"));
    eventually("change after a dropped watch", || {
        latest
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.namespaces.contains_key("third"))
    })
    .await;
    assert_eq!(allowed(&latest, review("third", "worse", 1)), Some(false));
    assert!(
        fake.count("namespaces?&watch=true") > watches,
        "{watches} {:?}",
        fake.requests.lock().unwrap()
    );

    // 410 Gone: the source lists again; a deletion lost with the history is still seen.
    fake.expire_watches();
    fake.delete(binding("no-bad-prod", "no-bad", json!({}), None));
    eventually("deleted binding seen after re-list", || {
        allowed(&latest, review("third", "worse", 1)) == Some(true)
    })
    .await;
    assert!(
        fake.count("validatingadmissionpolicybindings?") >= 2,
        "bindings were listed again: {:?}",
        fake.requests.lock().unwrap()
    );
    assert!(source.status().iter().all(|s| s.synced));
}

/// A namespace created a moment before a request in it (its watch event not in yet) is read
/// with a GET, as the API server does, instead of failing the request as "not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_the_watch_has_not_delivered_is_read_directly() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    with_no_bad_in_prod(&fake);
    let (_source, latest) = start_ready(addr, false).await;
    fake.mute("namespaces");
    fake.apply(namespace("fresh", "prod"));
    fake.apply(namespace("fresh-dev", "dev"));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let snapshot = latest.lock().unwrap().clone().unwrap();
    assert!(!snapshot.namespaces.contains_key("fresh"));
    let r = respond(&latest, review("fresh", "bad", 1)).await;
    assert_eq!(r["allowed"], false);
    assert!(r["status"]["message"]
        .as_str()
        .unwrap()
        .ends_with("denied request: no bad pods"));
    assert_eq!(
        respond(&latest, review("fresh-dev", "bad", 1)).await["allowed"],
        true
    );
    // One GET each (the count of "fresh" includes "fresh-dev").
    assert_eq!(fake.count("GET /api/v1/namespaces/fresh-dev"), 1);
    assert_eq!(fake.count("GET /api/v1/namespaces/fresh"), 2);
    // A namespace that does not exist at all is the in-tree "not found" configuration error.
    let r = respond(&latest, review("nosuch", "bad", 1)).await;
    assert_eq!(r["allowed"], false);
    assert!(r["status"]["message"]
        .as_str()
        .unwrap()
        .contains("namespaces \"nosuch\" not found"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn param_kinds_start_and_stop() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    with_limits(&fake, "2");
    let (source, latest) = start_ready(addr, false).await;
    // The first snapshot already has the params (readiness waited for their list).
    assert_eq!(allowed(&latest, review("team", "p", 2)), Some(true));
    let denied = respond(&latest, review("team", "p", 3)).await;
    assert_eq!(denied["allowed"], false);
    assert!(denied["status"]["message"]
        .as_str()
        .unwrap()
        .contains("at most 2 containers"));
    assert_eq!(fake.open_watches("configmaps"), 1);
    assert!(source
        .status()
        .iter()
        .any(|s| s.name.starts_with("configmaps.v1") && s.synced));

    // A param change is seen.
    fake.apply(limits("3"));
    eventually("param change seen", || {
        allowed(&latest, review("team", "p", 3)) == Some(true)
    })
    .await;

    // No policy names ConfigMaps any more: the watch stops.
    fake.apply(policy("max-containers", false));
    eventually("param watch stopped", || {
        fake.open_watches("configmaps") == 0
    })
    .await;
    assert!(!source
        .status()
        .iter()
        .any(|s| s.name.starts_with("configmaps")));
    assert_eq!(allowed(&latest, review("team", "bad", 9)), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_param_kind_not_yet_synced_is_the_in_tree_error() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    with_limits(&fake, "1");
    fake.stall("configmaps");
    let (source, latest) = start(addr, options(), false);
    // Readiness waits for the param list up to the grace period, then serves the in-tree
    // "not yet synced" configuration error under failurePolicy Fail. Checked once every
    // other list has completed and the param list was asked for (and stalls).
    eventually("the core lists done and the param list asked for", || {
        let synced = source.status().iter().filter(|s| s.synced).count();
        synced >= 3 && fake.count("configmaps") > 0
    })
    .await;
    assert!(!source.ready(), "ready before the param kind listed");
    eventually("ready after the grace period", || source.ready()).await;
    let r = respond(&latest, review("team", "p", 1)).await;
    assert_eq!(r["allowed"], false);
    assert_eq!(
        r["status"]["message"],
        "ValidatingAdmissionPolicy 'max-containers' with binding 'max-containers' denied request: failed to configure binding: paramKind kind `&ParamKind{APIVersion:v1,Kind:ConfigMap,}` not yet synced to use for admission"
    );
    fake.release("configmaps");
    eventually("params synced", || {
        allowed(&latest, review("team", "p", 1)) == Some(true)
    })
    .await;
    assert_eq!(allowed(&latest, review("team", "p", 2)), Some(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_waits_for_every_initial_list() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(policy("no-bad", false));
    fake.stall("namespaces");
    let (source, latest) = start(addr, options(), false);
    // Checked once the lists that can complete have, and the stalled one was asked for.
    eventually("policies and bindings listed, namespaces asked for", || {
        let status = source.status();
        status.len() == 3
            && status.iter().filter(|s| s.synced).count() == 2
            && fake.count("namespaces") > 0
    })
    .await;
    assert!(!source.ready());
    assert!(
        latest.lock().unwrap().is_none(),
        "nothing published before sync"
    );
    let status = source.status();
    assert_eq!(status.len(), 3, "{status:?}");
    // Policies and bindings are listed; namespaces are not.
    for s in &status {
        assert_eq!(s.synced, !s.name.starts_with("namespaces"), "{s:?}");
    }
    fake.release("namespaces");
    eventually("ready", || source.ready()).await;
}

/// A MutatingAdmissionPolicy at `version` that labels pods; with `params`, it reads a
/// ConfigMap param.
fn mutating_policy(name: &str, version: &str, params: bool) -> Json {
    let mut p = json!({
        "apiVersion": format!("admissionregistration.k8s.io/{version}"),
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{metadata: Object.metadata{labels: {'added': 'yes'}}}"}}]
        }
    });
    if params {
        p["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    }
    p
}

fn mutating_binding(name: &str, version: &str, policy: &str) -> Json {
    json!({
        "apiVersion": format!("admissionregistration.k8s.io/{version}"),
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": policy}
    })
}

/// The names of the mutating policies in the latest snapshot.
fn mutating_names(latest: &Latest) -> Vec<String> {
    latest.lock().unwrap().as_ref().map_or_else(Vec::new, |s| {
        s.mutating
            .iter()
            .map(|e| e.policy.base.name.clone())
            .collect()
    })
}

/// A cluster serving MutatingAdmissionPolicy (v1alpha1, as 1.32 with the alpha on): its
/// policies and bindings are watched, in the same snapshot as the validating ones; the first
/// snapshot waits for their list; they appear in the status; a change follows; a binding
/// naming no mutating policy is reported as such (a validating policy of that name does not
/// count); a paramKind a mutating policy names is watched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watches_mutating_policies_where_served() {
    let mut kinds = core_kinds();
    kinds.extend(mutating_policy_kinds("v1alpha1"));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    fake.apply(mutating_policy("add-label", "v1alpha1", false));
    fake.apply(mutating_binding("add-label", "v1alpha1", "add-label"));
    fake.stall("mutatingadmissionpolicybindings");
    let (source, latest) = start(addr, options(), false);
    eventually("every list but the stalled one done", || {
        let status = source.status();
        status.iter().filter(|s| s.synced).count() == 4
            && fake.count("mutatingadmissionpolicybindings") > 0
    })
    .await;
    assert!(!source.ready(), "ready before the mutating bindings listed");
    fake.release("mutatingadmissionpolicybindings");
    eventually("ready", || source.ready()).await;
    assert_eq!(
        source.mutating_policy_api_version().as_deref(),
        Some("v1alpha1")
    );
    assert_eq!(mutating_names(&latest), ["add-label"]);
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    let names: Vec<String> = source.status().into_iter().map(|s| s.name).collect();
    for watched in [
        "mutatingadmissionpolicies.v1alpha1",
        "mutatingadmissionpolicybindings.v1alpha1",
    ] {
        assert!(names.iter().any(|n| n == watched), "{names:?}");
    }
    assert!(
        fake.count("/apis/admissionregistration.k8s.io/v1alpha1/mutatingadmissionpolicies?") >= 1
    );

    // Deleted: gone from the snapshot; the validating policy stays.
    fake.delete(mutating_policy("add-label", "v1alpha1", false));
    eventually("mutating policy gone", || {
        mutating_names(&latest).is_empty()
    })
    .await;
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    // Its binding now names no mutating policy; nor does one naming `no-bad`, a validating
    // policy's name (the kinds are not mixed up).
    fake.apply(mutating_binding("to-no-bad", "v1alpha1", "no-bad"));
    eventually("bindings naming no mutating policy reported", || {
        let found: Vec<(String, String, &str)> = source
            .problems()
            .into_iter()
            .map(|p| (p.kind, p.name, p.reason))
            .collect();
        found.contains(&(
            "MutatingAdmissionPolicyBinding".into(),
            "to-no-bad".into(),
            "PolicyNotFound",
        )) && found.contains(&(
            "MutatingAdmissionPolicyBinding".into(),
            "add-label".into(),
            "PolicyNotFound",
        ))
    })
    .await;

    // Created again, with a param kind: it is in the snapshot, and the kind is watched.
    fake.apply(mutating_policy("add-label", "v1alpha1", true));
    eventually("mutating policy back, its param kind watched", || {
        mutating_names(&latest) == ["add-label"]
            && source
                .status()
                .iter()
                .any(|s| s.name.starts_with("configmaps") && s.synced)
    })
    .await;
}

/// A cluster that does not serve MutatingAdmissionPolicy (most of them): the source is ready
/// with the validating policies only, and shows no mutating watch; once the API server serves
/// them (the feature turned on), they are picked up on the next re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_policies_not_served_then_turned_on() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    let (source, latest) = start_ready(addr, false).await;
    assert_eq!(source.mutating_policy_api_version(), None);
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    assert!(mutating_names(&latest).is_empty());
    assert!(
        !source
            .status()
            .iter()
            .any(|s| s.name.starts_with("mutating")),
        "{:?}",
        source.status()
    );
    for version in ["v1", "v1beta1", "v1alpha1"] {
        assert!(
            fake.count(&format!("/apis/admissionregistration.k8s.io/{version}")) >= 1,
            "discovery asked for {version}"
        );
    }

    for k in mutating_policy_kinds("v1beta1") {
        fake.serve(k);
    }
    fake.apply(mutating_policy("add-label", "v1beta1", false));
    fake.apply(mutating_binding("add-label", "v1beta1", "add-label"));
    eventually("picked up once served", || {
        mutating_names(&latest) == ["add-label"]
    })
    .await;
    assert_eq!(
        source.mutating_policy_api_version().as_deref(),
        Some("v1beta1")
    );
    assert!(source
        .status()
        .iter()
        .any(|s| s.name == "mutatingadmissionpolicies.v1beta1" && s.synced));
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
}

/// Policies fed from a folder (`--source kubernetes --policies DIR`): its mutating policies
/// and bindings go into the snapshot with the validating ones; the cluster's own mutating
/// policies (served here) are not watched, nor is their discovery asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fed_mutating_policies_reach_the_snapshot() {
    let mut kinds = core_kinds();
    kinds.extend(mutating_policy_kinds("v1alpha1"));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(mutating_policy("cluster-own", "v1alpha1", false));
    fake.apply(mutating_binding("cluster-own", "v1alpha1", "cluster-own"));
    let feed = Arc::new(celgate::source::kube::PolicyFeed::default());
    let latest = Latest::default();
    let sink = latest.snapshot.clone();
    let source = KubeSource::start_fed(
        client(addr),
        options(),
        Arc::new(move |s| *sink.lock().unwrap() = Some(Arc::new(s))),
        Some(feed.clone()),
    );
    let objects = |o: Vec<Json>| o.into_iter().map(Arc::new).collect::<Vec<_>>();
    feed.set(
        objects(vec![
            policy("no-bad", false),
            mutating_policy("add-label", "v1alpha1", false),
        ]),
        objects(vec![
            binding("no-bad", "no-bad", json!({}), None),
            mutating_binding("add-label", "v1alpha1", "add-label"),
        ]),
        Vec::new(),
    );
    eventually("ready", || source.ready()).await;
    assert_eq!(mutating_names(&latest), ["add-label"]);
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    assert_eq!(source.mutating_policy_api_version(), None);
    assert_eq!(fake.count("mutatingadmissionpolicies"), 0);
    // A new state of the feed without it: gone.
    feed.set(
        objects(vec![policy("no-bad", false)]),
        objects(vec![binding("no-bad", "no-bad", json!({}), None)]),
        Vec::new(),
    );
    eventually("mutating policy gone", || {
        mutating_names(&latest).is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn falls_back_to_v1beta1() {
    let mut kinds = policy_kinds("v1beta1").to_vec();
    kinds.push(Kind::new("v1", "Namespace", "namespaces", false));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(namespace("team", "prod"));
    let mut p = policy("no-bad", false);
    p["apiVersion"] = json!("admissionregistration.k8s.io/v1beta1");
    fake.apply(p);
    let mut b = binding("no-bad", "no-bad", json!({}), None);
    b["apiVersion"] = json!("admissionregistration.k8s.io/v1beta1");
    fake.apply(b);
    let (source, latest) = start_ready(addr, false).await;
    assert_eq!(source.policy_api_version().as_deref(), Some("v1beta1"));
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    assert!(
        fake.count("/apis/admissionregistration.k8s.io/v1beta1/validatingadmissionpolicies?") >= 1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_last_snapshot_while_the_api_server_is_down() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(policy("no-bad", false));
    fake.apply(binding("no-bad", "no-bad", json!({}), None));
    let (source, latest) = start_ready(addr, false).await;
    fake.set_down(true);
    eventually("staleness reported", || {
        source
            .status()
            .iter()
            .all(|s| s.stale >= Duration::from_millis(300))
    })
    .await;
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    fake.set_down(false);
    eventually("fresh again", || {
        source.status().iter().all(|s| s.stale.is_zero())
    })
    .await;
    fake.apply(namespace("later", "prod"));
    eventually("changes flow again", || {
        latest
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.namespaces.contains_key("later"))
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorizer_checks_are_subject_access_reviews() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    let mut p = policy("may-delete", false);
    p["spec"]["validations"] = json!([{"expression": "authorizer.group('').resource('pods').namespace(object.metadata.namespace).check('delete').allowed()", "message": "must be allowed to delete pods"}]);
    fake.apply(p);
    fake.apply(binding("may-delete", "may-delete", json!({}), None));
    let mut ignore = policy("may-delete-ignore", false);
    ignore["spec"]["failurePolicy"] = json!("Ignore");
    ignore["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = json!(["configmaps"]);
    ignore["spec"]["validations"] =
        json!([{"expression": "authorizer.path('/healthz').check('get').allowed()"}]);
    fake.apply(ignore);
    fake.apply(binding(
        "may-delete-ignore",
        "may-delete-ignore",
        json!({}),
        None,
    ));
    fake.on_review(|spec| {
        let allowed = spec["user"] == "alice" && spec["resourceAttributes"]["verb"] == "delete";
        Ok(json!({"allowed": allowed, "reason": "fake RBAC"}))
    });
    let (_source, latest) = start_ready(addr, true).await;
    let r = respond(&latest, review("team", "p", 1)).await;
    assert_eq!(r["allowed"], true, "{r}");
    let reviews = fake.reviews.lock().unwrap().clone();
    assert_eq!(reviews.len(), 1);
    let spec = &reviews[0]["spec"];
    assert_eq!(spec["user"], "alice");
    assert_eq!(spec["uid"], "a-1");
    assert_eq!(spec["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(spec["extra"], json!({"scopes": ["s1"]}));
    assert_eq!(
        spec["resourceAttributes"],
        json!({"group": "", "version": "*", "resource": "pods", "namespace": "team", "verb": "delete"})
    );
    // The same check again comes from the cache.
    respond(&latest, review("team", "p", 1)).await;
    assert_eq!(fake.reviews.lock().unwrap().len(), 1);

    // A failing review is a CEL error under the policy's failurePolicy: Fail denies...
    fake.on_review(|_| Err(StatusCode::INTERNAL_SERVER_ERROR));
    let mut other_user = review("team", "p", 1);
    other_user = String::from_utf8(other_user)
        .unwrap()
        .replace("\"alice\"", "\"bob\"")
        .into_bytes();
    let r = respond(&latest, other_user).await;
    assert_eq!(r["allowed"], false);
    let message = r["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("authorizer error: SubjectAccessReview failed"),
        "{message}"
    );
    // ...and Ignore allows.
    let mut cm = String::from_utf8(review("team", "cm", 1)).unwrap();
    cm = cm
        .replace("\"pods\"", "\"configmaps\"")
        .replace("\"Pod\"", "\"ConfigMap\"");
    let r = respond(&latest, cm.into_bytes()).await;
    assert_eq!(r["allowed"], true, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn misconfigured_objects_get_events() {
    let mut kinds = core_kinds();
    kinds.push(Kind::new("events.k8s.io/v1", "Event", "events", true));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(binding("orphan", "nosuch", json!({}), None));
    let mut broken = policy("broken", false);
    broken["spec"]["validations"][0]["expression"] = json!("object.metadata.name ==");
    fake.apply(broken);
    fake.apply(binding("broken", "broken", json!({}), None));
    // A param kind celgate may not list (RBAC not granted).
    fake.forbid("configmaps");
    fake.apply(policy("needs-params", true));
    fake.apply(binding(
        "needs-params",
        "needs-params",
        json!({}),
        Some(json!({"name": "limits", "namespace": "team", "parameterNotFoundAction": "Deny"})),
    ));
    let (source, latest) = start_ready(addr, false).await;
    eventually("events posted", || {
        fake.posted_events.lock().unwrap().len() >= 3
    })
    .await;
    let events = fake.posted_events.lock().unwrap().clone();
    let find = |reason: &str| {
        events
            .iter()
            .find(|e| e["reason"] == reason)
            .unwrap_or_else(|| panic!("no {reason} event in {events:?}"))
            .clone()
    };
    let orphan = find("PolicyNotFound");
    assert_eq!(
        orphan["regarding"]["kind"],
        "ValidatingAdmissionPolicyBinding"
    );
    assert_eq!(orphan["regarding"]["name"], "orphan");
    assert_eq!(orphan["type"], "Warning");
    assert_eq!(orphan["reportingController"], "celgate");
    let invalid = find("InvalidPolicy");
    assert_eq!(invalid["regarding"]["name"], "broken");
    assert!(invalid["note"]
        .as_str()
        .unwrap()
        .starts_with("spec.validations[0].expression:"));
    let unlisted = find("ParamKindNotListed");
    assert_eq!(unlisted["regarding"]["name"], "needs-params");
    assert!(
        unlisted["note"].as_str().unwrap().contains("is forbidden"),
        "{unlisted}"
    );
    let problems = source.problems();
    assert_eq!(problems.len(), 3, "{problems:?}");
    // The compile error also answers requests as the API server would.
    let r = respond(&latest, review("team", "p", 1)).await;
    assert_eq!(r["allowed"], false);
    // Reported once, not on every rebuild.
    fake.apply(namespace("more", "prod"));
    eventually("rebuilt", || {
        latest
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.namespaces.contains_key("more"))
    })
    .await;
    assert_eq!(fake.posted_events.lock().unwrap().len(), 3);
}

/// With two replicas, the Lease holder alone reports Events; when it goes away, the other
/// takes the Lease over once it expires and reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reports_events() {
    let mut kinds = core_kinds();
    kinds.push(Kind::new("events.k8s.io/v1", "Event", "events", true));
    kinds.push(Kind::new("coordination.k8s.io/v1", "Lease", "leases", true));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(binding("orphan", "nosuch", json!({}), None));
    let replica = |identity: &str| {
        let mut o = options();
        o.instance = identity.into();
        o.events_lease = Some(common::serve::test_lease(identity));
        start(addr, o, false)
    };
    let (a, _) = replica("celgate-a");
    eventually("a reports", || {
        fake.posted_events.lock().unwrap().len() == 1
    })
    .await;
    let (b, _) = replica("celgate-b");
    eventually("b ready", || b.ready()).await;
    // b has decided not to report, knowing the Lease held by a (three of its rounds: its
    // first look and two renewal checks); whatever that decision called for is posted.
    eventually("b decided with the Lease known", || {
        b.reporting_decided_after() >= 3
    })
    .await;
    let events = fake.posted_events.lock().unwrap().clone();
    assert_eq!(events.len(), 1, "only the holder reports: {events:?}");
    assert_eq!(events[0]["reportingInstance"], "celgate-a");
    // The holder goes away; the Lease expires; the other replica reports.
    drop(a);
    eventually("b takes over", || {
        fake.posted_events.lock().unwrap().len() == 2
    })
    .await;
    let events = fake.posted_events.lock().unwrap().clone();
    assert_eq!(events[1]["reportingInstance"], "celgate-b");
    assert_eq!(events[1]["reason"], "PolicyNotFound");
    let lease = fake
        .object("leases", "celgate-system", "celgate-events")
        .unwrap();
    assert_eq!(lease["spec"]["holderIdentity"], "celgate-b");
    assert_eq!(lease["spec"]["leaseTransitions"], 1);
    drop(b);
}

/// The production timing (debounce, recheck, param grace, retry cap): the recovery bounds
/// below are the service's, not a test setting's.
fn production_options() -> KubeOptions {
    KubeOptions {
        events: false,
        instance: "celgate-test".into(),
        ..KubeOptions::default()
    }
}

/// The time from the API server's return within which the source must follow.
const RECOVERY: Duration = Duration::from_secs(2);

fn policy_store(source: &KubeSource) -> celgate::source::kube::SourceStatus {
    source
        .status()
        .into_iter()
        .find(|s| s.name.starts_with("validatingadmissionpolicies"))
        .expect("the policies store")
}

/// A policy denying pods named `name`, bound everywhere.
fn deny_pods_named(fake: &Fake, name: &str) {
    let mut p = policy(&format!("no-{name}"), false);
    p["spec"]["validations"][0]["expression"] = json!(format!("object.metadata.name != '{name}'"));
    fake.apply(p);
    fake.apply(binding(
        &format!("no-{name}"),
        &format!("no-{name}"),
        json!({}),
        None,
    ));
}

/// The API server stops for 3 s and comes back with a fresh watch cache, so every watch
/// celgate resumes gets `410 Gone`: the policies created meanwhile and right after are
/// enforced within 2 s of its return, and until the re-list has brought them the policies'
/// copy reports itself stale, counted from the start of the outage.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follows_within_two_seconds_after_an_outage_that_expired_every_watch() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    let options = KubeOptions {
        // Frequent rechecks: anything that took the API server's answer alone for the copy
        // being current again, before its re-list, would show at once.
        recheck: Duration::from_millis(200),
        ..production_options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready", || source.ready()).await;
    assert_eq!(policy_store(&source).objects, 1);

    let connections = fake.connections();
    let outage = Instant::now();
    fake.set_unreachable(true);
    eventually("staleness reported during the outage", || {
        source.status().iter().all(|s| !s.stale.is_zero())
    })
    .await;
    // Long enough for an unchecked backoff to grow past the bound (kube-runtime's default
    // would be sleeping 3.2-6.4 s by the end).
    tokio::time::sleep_until((outage + Duration::from_secs(3)).into()).await;
    let status = source.status();
    assert!(
        status.iter().all(|s| s.stale >= Duration::from_secs(2)),
        "{status:?}"
    );
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    // Trying, but not hammering: three watches, at most about two tries a second each.
    let tries = fake.connections() - connections;
    assert!((3..=3 * (6 + 5)).contains(&tries), "{tries} connections");

    // The API server restarts with a fresh watch cache; a policy is created before celgate
    // reconnects, and another right after.
    fake.expire_watches();
    deny_pods_named(&fake, "worse");
    fake.set_unreachable(false);
    let back = Instant::now();
    deny_pods_named(&fake, "worst");
    loop {
        let store = policy_store(&source);
        if store.objects == 1 {
            // Not yet re-listed: not current, and stale since the outage began.
            assert!(
                store.stale >= back - outage - Duration::from_millis(500),
                "not re-listed, yet stale for only {:?}: {store:?}",
                store.stale
            );
        }
        if allowed(&latest, review("team", "worse", 1)) == Some(false)
            && allowed(&latest, review("team", "worst", 1)) == Some(false)
        {
            break;
        }
        assert!(
            back.elapsed() < RECOVERY,
            "not enforced {RECOVERY:?} after the API server came back: {:?}",
            source.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        fake.count("validatingadmissionpolicies?") >= 2,
        "listed again: {:?}",
        fake.requests.lock().unwrap()
    );
    eventually("every copy current again", || {
        source.status().iter().all(|s| s.stale.is_zero())
    })
    .await;
}

/// Started while the API server is not there yet: ready within 2 s of its appearance,
/// params included (the param grace period does not hold it up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ready_within_two_seconds_of_a_late_api_server() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.set_unreachable(true);
    with_limits(&fake, "1");
    let (source, latest) = start(addr, production_options(), false);
    // Long enough for an unchecked start-up backoff to be sleeping past the bound.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(!source.ready());
    let tries = fake.connections();
    assert!((3..=20).contains(&tries), "{tries} connections");
    fake.set_unreachable(false);
    let back = Instant::now();
    while !source.ready() {
        assert!(
            back.elapsed() < RECOVERY,
            "not ready {RECOVERY:?} after the API server appeared: {:?}",
            source.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(allowed(&latest, review("team", "p", 1)), Some(true));
    assert_eq!(allowed(&latest, review("team", "p", 2)), Some(false));
}

/// A param kind whose discovery failed is looked up again within about the retry cap, not
/// at the next recheck (10 s): its params are in use within 2 s of discovery working again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_param_kind_lookup_is_retried_promptly() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    with_limits(&fake, "1");
    fake.fail_discovery("v1", true);
    let options = KubeOptions {
        param_grace: Duration::from_millis(500),
        ..production_options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready after the grace period", || source.ready()).await;
    let r = respond(&latest, review("team", "p", 1)).await;
    assert_eq!(r["allowed"], false);
    assert!(
        r["status"]["message"]
            .as_str()
            .unwrap()
            .contains("not yet synced"),
        "{r}"
    );
    let lookups = || {
        let requests = fake.requests.lock().unwrap();
        requests.iter().filter(|r| *r == "GET /api/v1").count()
    };
    eventually("looked up again while failing", || lookups() >= 3).await;
    fake.fail_discovery("v1", false);
    let back = Instant::now();
    while allowed(&latest, review("team", "p", 1)) != Some(true) {
        assert!(
            back.elapsed() < RECOVERY,
            "params not in use {RECOVERY:?} after discovery came back: {:?}",
            source.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(allowed(&latest, review("team", "p", 2)), Some(false));
}

/// `--param-namespaces team-a` with RBAC that grants ConfigMaps in team-a only (the fake
/// refuses a cluster-wide list, and one in team-b): the param in team-a is used; ConfigMaps
/// anywhere else are never asked for, a binding whose param is in team-b gets its
/// parameterNotFoundAction, and both that binding and a per-request-namespace one that
/// selects team-b are reported. Cluster-scoped param kinds are still watched whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_are_watched_only_in_the_listed_namespaces() {
    let mut kinds = core_kinds();
    kinds.push(Kind::new("events.k8s.io/v1", "Event", "events", true));
    let (fake, addr) = Fake::start(&kinds).await;
    fake.grant_only_in("configmaps", &["team-a"]);
    let labelled = |name: &str, env: &str, team: &str| {
        let mut ns = namespace(name, env);
        ns["metadata"]["labels"]["team"] = json!(team);
        ns
    };
    fake.apply(labelled("team-a", "prod", "a"));
    fake.apply(labelled("team-b", "prod", "b"));
    fake.apply(labelled("team-c", "dev", "c"));
    let limits_in = |ns: &str, max: &str| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": ns}, "data": {"max": max}});
    fake.apply(limits_in("team-a", "1"));
    // Would deny every pod if it were read.
    fake.apply(limits_in("team-b", "0"));
    fake.apply(policy("max-containers", true));
    fake.apply(binding(
        "pinned-a",
        "max-containers",
        json!({"matchLabels": {"team": "a"}}),
        Some(json!({"name": "limits", "namespace": "team-a", "parameterNotFoundAction": "Deny"})),
    ));
    fake.apply(binding(
        "per-namespace",
        "max-containers",
        json!({"matchLabels": {"env": "prod"}}),
        Some(json!({"name": "limits", "parameterNotFoundAction": "Allow"})),
    ));
    fake.apply(binding(
        "pinned-b",
        "max-containers",
        json!({"matchLabels": {"team": "c"}}),
        Some(json!({"name": "limits", "namespace": "team-b", "parameterNotFoundAction": "Deny"})),
    ));
    // A cluster-scoped param kind: watched cluster-wide as without the flag.
    let mut by_namespace = policy("namespace-params", false);
    by_namespace["spec"]["paramKind"] = json!({"apiVersion": "v1", "kind": "Namespace"});
    by_namespace["spec"]["validations"] =
        json!([{"expression": "params.metadata.labels.team == 'b'"}]);
    fake.apply(by_namespace);
    fake.apply(binding(
        "namespace-params",
        "namespace-params",
        json!({"matchLabels": {"team": "a"}}),
        Some(json!({"name": "team-b", "parameterNotFoundAction": "Deny"})),
    ));
    let options = KubeOptions {
        param_namespaces: vec!["team-a".into()],
        ..options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready", || source.ready()).await;

    // team-a's param is used (the first snapshot already has it).
    assert_eq!(allowed(&latest, review("team-a", "p", 1)), Some(true));
    let denied = respond(&latest, review("team-a", "p", 2)).await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .contains("at most 1 containers"),
        "{denied}"
    );
    // Looked up in team-b per request: missing, so skipped (Allow), not team-b's max 0.
    assert_eq!(allowed(&latest, review("team-b", "p", 1)), Some(true));
    // Pinned to team-b: missing, so denied (Deny).
    let denied = respond(&latest, review("team-c", "p", 1)).await;
    assert_eq!(denied["allowed"], false);
    assert!(
        denied["status"]["message"]
            .as_str()
            .unwrap()
            .ends_with("no params found for policy binding with `Deny` parameterNotFoundAction"),
        "{denied}"
    );
    let status = source.status();
    assert!(
        status
            .iter()
            .any(|s| s.name == "configmaps.v1 (params in team-a)" && s.synced && s.objects == 1),
        "{status:?}"
    );
    assert!(
        status
            .iter()
            .any(|s| s.name == "namespaces.v1 (params)" && s.synced && s.objects == 3),
        "{status:?}"
    );

    // A change in team-a is followed; one in team-b is not seen.
    fake.apply(limits_in("team-a", "2"));
    fake.apply(limits_in("team-b", "00"));
    eventually("team-a's param change seen", || {
        allowed(&latest, review("team-a", "p", 2)) == Some(true)
    })
    .await;
    assert_eq!(allowed(&latest, review("team-b", "p", 1)), Some(true));

    // Both bindings that reach outside team-a are reported, and nothing else.
    eventually("events posted", || {
        fake.posted_events.lock().unwrap().len() >= 2
    })
    .await;
    let problems = source.problems();
    let summary: Vec<(&str, &str)> = problems
        .iter()
        .map(|p| (p.name.as_str(), p.reason))
        .collect();
    assert_eq!(
        summary,
        [
            ("per-namespace", "ParamNamespaceNotWatched"),
            ("pinned-b", "ParamNamespaceNotWatched"),
        ]
    );
    assert!(
        problems[0].message.contains("requests in \"team-b\"")
            && problems[0].message.contains("the binding is skipped"),
        "{}",
        problems[0].message
    );
    assert!(
        problems[1].message.contains("namespace \"team-b\"")
            && problems[1]
                .message
                .contains("--param-namespaces \"team-a\"")
            && problems[1].message.contains("parameterNotFoundAction Deny"),
        "{}",
        problems[1].message
    );
    let events = fake.posted_events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .any(|e| e["reason"] == "ParamNamespaceNotWatched"
                && e["regarding"]["name"] == "pinned-b"),
        "{events:?}"
    );

    // ConfigMaps were listed and watched in team-a, and never asked for anywhere else.
    let requests = fake.requests.lock().unwrap().clone();
    let configmaps: Vec<&String> = requests
        .iter()
        .filter(|r| r.contains("configmaps"))
        .collect();
    assert!(
        configmaps
            .iter()
            .all(|r| r.starts_with("GET /api/v1/namespaces/team-a/configmaps?")),
        "{configmaps:?}"
    );
    assert!(configmaps.iter().any(|r| r.contains("watch=true")));
    assert!(configmaps.iter().any(|r| !r.contains("watch=true")));
    assert_eq!(fake.open_watches("configmaps"), 1);
}

fn crd_kind() -> Kind {
    Kind::new(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    )
}

/// A cluster-scoped CRD `<plural>.example.com` of kind `kind`: its versions as (name,
/// served), v1 stored; `webhook`: conversion through a webhook.
fn crd(plural: &str, kind: &str, versions: &[(&str, bool)], webhook: bool) -> Json {
    let versions: Vec<Json> = versions
        .iter()
        .map(|(v, served)| json!({"name": v, "served": served, "storage": *v == "v1", "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}))
        .collect();
    let mut c = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.example.com")},
        "spec": {
            "group": "example.com",
            "names": {"plural": plural, "singular": plural.trim_end_matches('s'), "kind": kind, "listKind": format!("{kind}List")},
            "scope": "Cluster",
            "versions": versions
        }
    });
    if webhook {
        c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {"url": "https://convert.example.com"}}});
    }
    c
}

/// A policy on `plural` v2 of example.com (matchPolicy Equivalent, the default), whose
/// validation is `expression`, bound with Deny.
fn with_v2_policy(fake: &Fake, plural: &str, expression: &str) {
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": format!("{plural}-v2")},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": ["example.com"], "apiVersions": ["v2"], "operations": ["CREATE"], "resources": [plural]}]},
            "validations": [{"expression": expression, "message": format!("no {plural} at v2")}]
        }
    }));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": format!("{plural}-v2")},
        "spec": {"policyName": format!("{plural}-v2"), "validationActions": ["Deny"]}
    }));
}

/// The CREATE of a cluster-scoped `example.com/v1` object.
fn v1_review(plural: &str, kind: &str) -> Vec<u8> {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "example.com", "version": "v1", "kind": kind},
            "resource": {"group": "example.com", "version": "v1", "resource": plural},
            "name": "one",
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "example.com/v1", "kind": kind, "metadata": {"name": "one"}, "spec": {}},
            "oldObject": null,
            "dryRun": false
        }
    })
    .to_string()
    .into_bytes()
}

/// The cluster's CRDs reach the resource registry: a rule on a version the CRD does not
/// serve matches no request (`widgets` v2, not served: the v1 request is admitted; once the
/// CRD serves v2, the rule matches through the equivalent version and denies), and a
/// conversion through a webhook is the configuration error under the failurePolicy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_crds_tell_served_versions_and_conversion() {
    let mut kinds = core_kinds();
    kinds.push(crd_kind());
    let (fake, addr) = Fake::start(&kinds).await;
    fake.apply(crd(
        "widgets",
        "Widget",
        &[("v1", true), ("v2", false)],
        false,
    ));
    fake.apply(crd(
        "gadgets",
        "Gadget",
        &[("v1", true), ("v2", true)],
        true,
    ));
    with_v2_policy(&fake, "widgets", "false");
    with_v2_policy(&fake, "gadgets", "true");
    let (source, latest) = start_ready(addr, false).await;
    let widget = respond(&latest, v1_review("widgets", "Widget")).await;
    assert_eq!(widget["allowed"], true, "v2 is not served: {widget}");
    let gadget = respond(&latest, v1_review("gadgets", "Gadget")).await;
    assert_eq!(gadget["allowed"], false, "{gadget}");
    let message = gadget["status"]["message"].as_str().unwrap();
    assert!(
        message.contains("failed to convert object version"),
        "{message}"
    );
    assert!(
        source
            .status()
            .iter()
            .any(|s| s.name == "customresourcedefinitions.v1" && s.synced && s.objects == 2),
        "{:?}",
        source.status()
    );
    // The CRD now serves v2: the v1 widget matches the v2 rule, converted by rewriting its
    // apiVersion, and is denied.
    fake.apply(crd(
        "widgets",
        "Widget",
        &[("v1", true), ("v2", true)],
        false,
    ));
    eventually("the widget denied", || {
        allowed(&latest, v1_review("widgets", "Widget")) == Some(false)
    })
    .await;
    let widget = respond(&latest, v1_review("widgets", "Widget")).await;
    assert_eq!(
        widget["status"]["message"],
        "ValidatingAdmissionPolicy 'widgets-v2' with binding 'widgets-v2' denied request: no widgets at v2"
    );
}

/// CRDs that RBAC does not let celgate list: logged once (one request, no retry loop), the
/// source turns ready without them, and custom resources keep the lenient rule (the v2 rule
/// matches the v1 widget although its CRD does not serve v2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_crds_leave_matching_lenient() {
    let mut kinds = core_kinds();
    kinds.push(crd_kind());
    let (fake, addr) = Fake::start(&kinds).await;
    fake.forbid("customresourcedefinitions");
    fake.apply(crd(
        "widgets",
        "Widget",
        &[("v1", true), ("v2", false)],
        false,
    ));
    with_v2_policy(&fake, "widgets", "false");
    let (source, latest) = start_ready(addr, false).await;
    let widget = respond(&latest, v1_review("widgets", "Widget")).await;
    assert_eq!(widget["allowed"], false, "{widget}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(fake.count("customresourcedefinitions"), 1);
    assert!(source
        .status()
        .iter()
        .all(|s| !s.name.starts_with("customresourcedefinitions")));
}

/// How many history resets the source counted for `reason`.
fn resets(source: &KubeSource, reason: &str) -> u64 {
    source
        .history_resets()
        .into_iter()
        .find(|(r, _)| r == reason)
        .map_or(0, |(_, n)| n)
}

/// The drift the periodic re-lists found in the stores whose names start with `prefix`.
fn drift(source: &KubeSource, prefix: &str) -> u64 {
    source
        .resync_drift()
        .into_iter()
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

/// etcd is replaced (or restored from a backup): resourceVersions start again far below
/// those celgate has seen, the old policy is gone and a new one exists. The API server
/// accepts the watches resumed from the old resourceVersions and sends nothing on them;
/// celgate sees the list's resourceVersion go back, lists every resource again, stops
/// enforcing the deleted policy and enforces the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_wipe_is_detected_and_every_resource_listed_again() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    for i in 0..20 {
        fake.apply(namespace(&format!("filler-{i}"), "dev"));
    }
    let (source, latest) = start_ready(addr, false).await;
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));
    let before = fake.resource_version();

    fake.wipe(3);
    fake.apply(namespace("team", "prod"));
    deny_pods_named(&fake, "worse");
    assert!(fake.resource_version() < before);
    // The policies' lists hang: their copy is stale from the reset until its list is in.
    fake.stall("validatingadmissionpolicies");
    fake.drop_watches();
    fake_apiserver::eventually_within(
        Duration::from_secs(30),
        "the policies' copy stale while it is listed again",
        || !policy_store(&source).stale.is_zero(),
    )
    .await;
    fake.release("validatingadmissionpolicies");
    fake_apiserver::eventually_within(
        Duration::from_secs(30),
        "the deleted policy no longer enforced, the new one enforced",
        || {
            allowed(&latest, review("team", "bad", 1)) == Some(true)
                && allowed(&latest, review("team", "worse", 1)) == Some(false)
        },
    )
    .await;
    assert!(
        resets(&source, "list_went_back") >= 1,
        "{:?}",
        source.history_resets()
    );
    // Every store was listed again, namespaces included: the fillers are gone.
    eventually("namespaces listed again", || {
        latest
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| !s.namespaces.contains_key("filler-0"))
    })
    .await;
    eventually("every copy current again", || {
        source.status().iter().all(|s| s.stale.is_zero())
    })
    .await;
}

/// After a wipe the open watches stay open and send nothing but bookmarks, whose
/// resourceVersion went back: that alone starts the re-list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookmark_going_back_starts_a_relist() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    let (source, latest) = start_ready(addr, false).await;
    assert_eq!(allowed(&latest, review("team", "bad", 1)), Some(false));

    fake.wipe(3);
    fake.apply(namespace("team", "prod"));
    fake.bookmark();
    fake_apiserver::eventually_within(
        Duration::from_secs(30),
        "the deleted policy no longer enforced",
        || allowed(&latest, review("team", "bad", 1)) == Some(true),
    )
    .await;
    assert!(
        resets(&source, "bookmark_went_back") >= 1,
        "{:?}",
        source.history_resets()
    );
}

/// A kube-system namespace with another uid is another cluster: every resource is listed
/// again, here finding a policy whose creation no watch delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_cluster_identity_starts_a_relist() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    let mut kube_system = namespace("kube-system", "system");
    kube_system["metadata"]["uid"] = json!("cluster-a");
    fake.apply(kube_system.clone());
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    let (source, latest) = start_ready(addr, false).await;

    fake.mute("validatingadmissionpolicies");
    fake.mute("validatingadmissionpolicybindings");
    deny_pods_named(&fake, "worse");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(allowed(&latest, review("team", "worse", 1)), Some(true));
    kube_system["metadata"]["uid"] = json!("cluster-b");
    fake.apply(kube_system);
    fake_apiserver::eventually_within(
        Duration::from_secs(30),
        "the policy no watch delivered enforced",
        || allowed(&latest, review("team", "worse", 1)) == Some(false),
    )
    .await;
    assert_eq!(
        resets(&source, "cluster_identity"),
        1,
        "{:?}",
        source.history_resets()
    );
}

/// The periodic re-list finds what the watch missed (changes it never delivered), puts it
/// right and counts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_relist_finds_what_the_watch_missed() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    with_no_bad_in_prod(&fake);
    let options = KubeOptions {
        resync: Some(Duration::from_secs(1)),
        ..options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready", || source.ready()).await;
    // Nothing missed yet: a few re-lists find nothing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(drift(&source, "validatingadmissionpolicies"), 0);

    fake.mute("validatingadmissionpolicies");
    fake.mute("validatingadmissionpolicybindings");
    deny_pods_named(&fake, "worse");
    fake.delete(policy("no-bad", false));
    fake_apiserver::eventually_within(
        Duration::from_secs(30),
        "what the watch missed is found",
        || {
            allowed(&latest, review("team", "worse", 1)) == Some(false)
                && allowed(&latest, review("team", "bad", 1)) == Some(true)
        },
    )
    .await;
    eventually("the drift counted", || {
        drift(&source, "validatingadmissionpolicies.") == 2
            && drift(&source, "validatingadmissionpolicybindings.") == 1
    })
    .await;
    assert_eq!(drift(&source, "namespaces"), 0);
    assert_eq!(resets(&source, "list_went_back"), 0);
}

/// On a busy resource the watch delivers changes written after a list beside it (a periodic
/// re-list, a probe) was read and before it was answered: that list is older than what the
/// watch delivered meanwhile, which is not the history going back. Nothing is reset or
/// listed again, and the periodic re-list does not put the watch's newer copy back to the
/// list's older one (no drift).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_while_a_list_is_on_its_way_are_not_a_reset() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(namespace("busy", "dev"));
    with_no_bad_in_prod(&fake);
    let options = KubeOptions {
        resync: Some(Duration::from_secs(1)),
        ..options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready", || source.ready()).await;
    let changes = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = changes.clone();
    fake.on_list(move |fake, plural| {
        if plural == "namespaces" {
            let n = counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            let mut busy = namespace("busy", "dev");
            busy["metadata"]["labels"]["changed"] = json!(n.to_string());
            fake.apply(busy);
        }
    });
    let lists = |fake: &Fake| fake.count("namespaces?&limit=500");
    let probes = |fake: &Fake| fake.count("namespaces?&limit=1");
    let (lists_before, probes_before) = (lists(&fake), probes(&fake));
    // Two periodic lists: the first one's comparison (and its grace) is over.
    fake_apiserver::eventually_within(
        Duration::from_secs(60),
        "two periodic lists of the namespaces",
        || lists(&fake) >= lists_before + 2,
    )
    .await;
    let no_resets = |source: &KubeSource| source.history_resets().iter().all(|(_, n)| *n == 0);
    assert!(no_resets(&source), "{:?}", source.history_resets());
    // A resumed watch is probed.
    fake.drop_watches();
    fake_apiserver::eventually_within(
        Duration::from_secs(60),
        "the resumed namespace watch probed, then listed periodically again",
        || probes(&fake) > probes_before && lists(&fake) >= lists_before + 3,
    )
    .await;
    assert!(no_resets(&source), "{:?}", source.history_resets());
    assert_eq!(drift(&source, "namespaces"), 0);
    // The last change is the one kept.
    let last = changes
        .load(std::sync::atomic::Ordering::SeqCst)
        .to_string();
    eventually("the newest copy of the busy namespace", || {
        latest.lock().unwrap().as_ref().is_some_and(|s| {
            s.namespaces
                .get("busy")
                .is_some_and(|n| n.labels.get("changed") == Some(&last))
        })
    })
    .await;
}

/// A resumed watch is probed even when it delivers changes before the probe is due (a busy
/// resource): news makes the store current, but only the probe checks that the history did
/// not go back. Its answer, older than the changes delivered while it was on its way, is no
/// reset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_watch_with_news_is_probed_all_the_same() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    fake.apply(namespace("team", "prod"));
    fake.apply(namespace("busy", "dev"));
    with_no_bad_in_prod(&fake);
    let options = KubeOptions {
        resync: None,
        ..options()
    };
    let (source, latest) = start(addr, options, false);
    eventually("ready", || source.ready()).await;
    let probes = |fake: &Fake| fake.count("namespaces?&limit=1");
    let probes_before = probes(&fake);
    fake.drop_watches();
    // A change every 100 ms: the resumed watch has news well within its settling time.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut changes = 0;
    while probes(&fake) == probes_before {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for: the busy resumed namespace watch probed"
        );
        changes += 1;
        let mut busy = namespace("busy", "dev");
        busy["metadata"]["labels"]["changed"] = json!(changes.to_string());
        fake.apply(busy);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let last = changes.to_string();
    eventually("the newest copy of the busy namespace", || {
        latest.lock().unwrap().as_ref().is_some_and(|s| {
            s.namespaces
                .get("busy")
                .is_some_and(|n| n.labels.get("changed") == Some(&last))
        })
    })
    .await;
    assert!(
        source.history_resets().iter().all(|(_, n)| *n == 0),
        "{:?}",
        source.history_resets()
    );
}

/// A change to a ConfigMap no binding can select rebuilds nothing; a change to the param a
/// binding names does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_param_changes_a_binding_can_see_rebuild() {
    let (fake, addr) = Fake::start(&core_kinds()).await;
    with_limits(&fake, "1");
    let (source, latest) = start_ready(addr, false).await;
    let params = || {
        source
            .status()
            .into_iter()
            .find(|s| s.name.starts_with("configmaps"))
            .map_or(0, |s| s.objects)
    };
    assert_eq!(params(), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let built = latest.published.load(std::sync::atomic::Ordering::SeqCst);
    for i in 0..5 {
        fake.apply(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("unrelated-{i}"), "namespace": "team", "labels": {"x": "y"}}, "data": {"max": "9"}}));
    }
    eventually("the unrelated ConfigMaps in the store", || params() == 6).await;
    // Many debounces later, still the same snapshot.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        latest.published.load(std::sync::atomic::Ordering::SeqCst),
        built,
        "rebuilt for ConfigMaps no binding can select"
    );
    fake.apply(limits("2"));
    eventually("the param change rebuilt", || {
        allowed(&latest, review("team", "p", 2)) == Some(true)
    })
    .await;
    assert!(latest.published.load(std::sync::atomic::Ordering::SeqCst) > built);
}
