//! `serve --source kubernetes --policies DIR`: policies and bindings from a watched folder,
//! namespaces and params from the cluster (the in-process fake API server), reviews sent over
//! HTTPS as the API server sends them. The folder's policy selects namespaces by the
//! cluster's labels and reads its param from the cluster; the cluster's own policies are
//! neither watched nor enforced; the folder's other objects are ignored; editing the folder
//! reloads it, and an invalid policy keeps its last good version.

mod common;
mod fake_apiserver;

use std::path::Path;
use std::time::Duration;

use celgate::app::{start, ServeConfig};
use celgate::source::folder::FolderSource;
use common::webhook_client::Webhook;
use common::{serve_flags, temp_dir};
use fake_apiserver::{policy_kinds, Fake, Kind};
use serde_json::{json, Value as Json};

/// Pods in namespaces labelled `env: prod` may have at most `params.data.max` containers
/// (the ConfigMap `limits` of the request's namespace; a missing one denies). Also in the
/// folder: a ConfigMap `limits` that would allow 5, which must not be used.
const MAX_CONTAINERS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-containers}
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  validations:
  - expression: "size(object.spec.containers) <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max + ' containers'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-containers-prod}
spec:
  policyName: max-containers
  validationActions: [Deny]
  paramRef: {name: limits, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: team}
data: {max: "5"}
"#;

/// Denies pods named `bad` with `expression` (bound with Deny).
fn no_bad_name(expression: &str) -> String {
    format!(
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-bad-name}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]
  validations: [{{expression: "{expression}", message: no bad names}}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-bad-name}}
spec: {{policyName: no-bad-name, validationActions: [Deny]}}
"#
    )
}

fn kinds() -> Vec<Kind> {
    let mut k = policy_kinds("v1").to_vec();
    k.push(Kind::new("v1", "Namespace", "namespaces", false));
    k.push(Kind::new("v1", "ConfigMap", "configmaps", true));
    k
}

fn limits(namespace: &str, max: &str) -> Json {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": namespace}, "data": {"max": max}})
}

/// The cluster: namespaces `team` (prod) and `dev`, the param `limits` (max 1) in `team`,
/// and a policy of its own that denies every pod (the API server's to enforce).
fn cluster(fake: &Fake) {
    for (name, env) in [("team", "prod"), ("dev", "dev")] {
        fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"env": env, "kubernetes.io/metadata.name": name}}}));
    }
    fake.apply(limits("team", "1"));
    fake.apply(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "cluster-deny-all"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
            "validations": [{"expression": "false", "message": "the cluster's own policy"}]
        }
    }));
    fake.apply(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "cluster-deny-all"}, "spec": {"policyName": "cluster-deny-all", "validationActions": ["Deny"]}}));
}

fn config(api: std::net::SocketAddr, dir: &Path) -> ServeConfig {
    ServeConfig {
        poll: Duration::from_millis(50),
        ..common::serve::config(common::serve::cluster(
            api,
            celgate::source::kube::KubeOptions {
                debounce: Duration::from_millis(20),
                recheck: Duration::from_millis(100),
                events: false,
                policy_folder: Some(FolderSource {
                    settle: Duration::from_millis(100),
                    ..FolderSource::new(dir)
                }),
                ..Default::default()
            },
        ))
    }
}

impl Webhook {
    /// The `response` to the CREATE of pod `name` in `namespace` with `containers`.
    async fn create(&mut self, namespace: &str, name: &str, containers: usize) -> Json {
        let containers: Vec<Json> = (0..containers)
            .map(|i| json!({"name": format!("c{i}"), "image": "nginx"}))
            .collect();
        let review = json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "req",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "name": name,
                "namespace": namespace,
                "operation": "CREATE",
                "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
                "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {"containers": containers}},
                "oldObject": null,
                "dryRun": false
            }
        });
        self.review(review).await
    }

    /// Whether the CREATE is allowed, polled for up to 10 s until it is `expected`.
    async fn until(&mut self, namespace: &str, name: &str, containers: usize, expected: bool) {
        let mut last = Json::Null;
        for _ in 0..200 {
            last = self.create(namespace, name, containers).await;
            if last["allowed"] == expected {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "{namespace}/{name} ({containers} containers): expected allowed={expected}, got {last}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn folder_policies_with_cluster_namespaces_and_params() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake);
    let dir = temp_dir("end-to-end");
    std::fs::write(dir.join("max.yaml"), MAX_CONTAINERS).unwrap();
    let server = start(config(api, &dir)).await.expect("server starts");
    for _ in 0..200 {
        if server
            .state
            .ready
            .load(std::sync::atomic::Ordering::Acquire)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        server
            .state
            .ready
            .load(std::sync::atomic::Ordering::Acquire),
        "ready once the folder loaded and the cluster's lists completed"
    );
    let mut hook = Webhook::connect(&server).await;

    // The param from the cluster (max 1), not the folder's ConfigMap (max 5).
    let denied = hook.create("team", "two", 2).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["message"], "ValidatingAdmissionPolicy 'max-containers' with binding 'max-containers-prod' denied request: at most 1 containers");
    // The cluster's own deny-all policy is not enforced (nor watched).
    let one = hook.create("team", "one", 1).await;
    assert_eq!(one["allowed"], true, "{one}");
    // The namespace selector reads the cluster's labels: `dev` is not selected.
    let dev = hook.create("dev", "two", 2).await;
    assert_eq!(dev["allowed"], true, "{dev}");
    assert_eq!(fake.count("validatingadmissionpolicies"), 0);
    assert_eq!(fake.count("validatingadmissionpolicybindings"), 0);

    // The param follows the cluster.
    fake.apply(limits("team", "3"));
    hook.until("team", "two", 2, true).await;
    // The namespace labels follow the cluster: `dev` selected, and without its param denied.
    fake.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dev", "labels": {"env": "prod", "kubernetes.io/metadata.name": "dev"}}}));
    hook.until("dev", "two", 2, false).await;

    // Editing the folder reloads it.
    hook.until("team", "bad", 1, true).await;
    std::fs::write(
        dir.join("bad.yaml"),
        no_bad_name("object.metadata.name != 'bad'"),
    )
    .unwrap();
    hook.until("team", "bad", 1, false).await;
    let cluster = server.cluster.clone().unwrap();
    assert!(cluster.problems().is_empty(), "{:?}", cluster.problems());

    // An update the API server would refuse: the last good version stays, and the refusal
    // is a problem of the cluster source (the problem gauge).
    std::fs::write(dir.join("bad.yaml"), no_bad_name("request.namex == 'a'")).unwrap();
    for _ in 0..200 {
        if !cluster.problems().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let problems = cluster.problems();
    assert!(
        problems.iter().any(|p| p.name == "no-bad-name"
            && p.reason == "InvalidPolicy"
            && p.message.contains("its last good version is served")),
        "{problems:?}"
    );
    let refused = |reason: &str| {
        server
            .state
            .metrics
            .source_reload_refused
            .with_label_values(&[reason])
            .get()
    };
    assert_eq!(
        refused("invalid_policy"),
        1,
        "the folder mode's reload metric"
    );
    let still = hook.create("team", "bad", 1).await;
    assert_eq!(still["allowed"], false, "{still}");
    assert_eq!(still["status"]["message"], "ValidatingAdmissionPolicy 'no-bad-name' with binding 'no-bad-name' denied request: no bad names");

    // Fixed: served, and the problem goes.
    std::fs::write(
        dir.join("bad.yaml"),
        no_bad_name("object.metadata.name != 'worse'"),
    )
    .unwrap();
    hook.until("team", "bad", 1, true).await;
    hook.until("team", "worse", 1, false).await;
    assert!(cluster.problems().is_empty(), "{:?}", cluster.problems());
    server.shutdown().await;
}

/// Until the folder binds a policy the service is not ready, though the cluster is synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_until_the_folder_loads() {
    let (fake, api) = Fake::start(&kinds()).await;
    cluster(&fake);
    let dir = temp_dir("not-ready");
    std::fs::write(
        dir.join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: team}\n",
    )
    .unwrap();
    let server = start(config(api, &dir)).await.expect("server starts");
    let cluster = server.cluster.clone().unwrap();
    for _ in 0..200 {
        if cluster.status().iter().all(|s| s.synced) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cluster.status().iter().all(|s| s.synced));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = || {
        server
            .state
            .ready
            .load(std::sync::atomic::Ordering::Acquire)
    };
    assert!(!ready(), "a folder without bindings is refused");
    let empty = server
        .state
        .metrics
        .source_reload_refused
        .with_label_values(&["empty"])
        .get();
    assert_eq!(empty, 1, "counted as folder mode counts it");
    std::fs::write(
        dir.join("bad.yaml"),
        no_bad_name("object.metadata.name != 'bad'"),
    )
    .unwrap();
    for _ in 0..200 {
        if ready() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ready(), "ready once the folder binds a policy");
    let mut hook = Webhook::connect(&server).await;
    hook.until("team", "bad", 1, false).await;
    server.shutdown().await;
}

/// `--strict-namespaces` is folder mode's (namespaces come from the cluster here): refused;
/// `--help` says what `--policies` does with `--source kubernetes`, and its folder default;
/// a policy folder that is not there stops the service at start, naming it.
#[test]
fn flags_and_a_missing_folder() {
    serve_flags::serve_refuses(&[(
        [
            "--source",
            "kubernetes",
            "--policies",
            ".",
            "--strict-namespaces",
        ],
        "--strict-namespaces is for --source folder",
    )]);
    serve_flags::serve_help_shows(&[
        ("--policies <DIR>", "required with `--source folder`"),
        (
            "--policies <DIR>",
            "With `--source kubernetes`: take only the",
        ),
    ]);
    let missing = temp_dir("missing").join("no-such-folder");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_celgate"))
        .args(["serve", "--self-signed", "--listen", "127.0.0.1:0"])
        .args(["--metrics-listen", "off", "--log-color", "never"])
        .args([
            "--source",
            "kubernetes",
            "--kube-api-url",
            "http://127.0.0.1:9",
        ])
        .args(["--policies", missing.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot read the policy folder") && err.contains(missing.to_str().unwrap()),
        "{err}"
    );
}
