//! Webhook rules that follow the policies: `celgate webhook-rules` through the real binary;
//! the rules never leave out a request a binding decides (checked with the engine's own
//! matching over a mixed stream); and `celgate serve --webhook-rules dynamic` against the
//! fake API server: a snapshot with a new binding is served only once the configuration's
//! rules cover it (widen first), narrowing comes after the snapshot without it is live, and
//! how many requests of a mixed stream the rules send celgate, before and after. The same for
//! the MutatingWebhookConfiguration (`--phase mutating`, `--cert-mutating-webhook`): its rules
//! follow the bound MutatingAdmissionPolicies alone, never with DELETE.

mod common;
mod fake_apiserver;

use std::path::Path;
use std::time::Duration;

use celgate::app::{start, CertSource, Running, ServeConfig, WebhookRulesMode};
use celgate::certs::{Options, Timing};
use celgate::matching::rules::{rule_matches, Gvr};
use celgate::matching::{Match, Namespaces, RequestAttributes};
use celgate::policy::snapshot::Snapshot;
use celgate::webhook::rules::{RuleSet, WebhookRule};
use common::cli::celgate_within;
use common::{repo, temp_dir};
use fake_apiserver::{eventually, Fake, Kind};
use serde_json::{json, Value as Json};

const NS: &str = "celgate-system";
const WEBHOOK: &str = "celgate";

/// A request of the stream: operation, group, resource, subresource, namespace.
type Req = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

/// A mixed stream: Pods (writes, deletes, exec, status), ConfigMaps, Secrets, a Deployment,
/// a Namespace.
const STREAM: &[Req] = &[
    ("CREATE", "", "pods", "", "app"),
    ("UPDATE", "", "pods", "", "app"),
    ("DELETE", "", "pods", "", "app"),
    ("CONNECT", "", "pods", "exec", "app"),
    ("UPDATE", "", "pods", "status", "app"),
    ("CREATE", "", "configmaps", "", "app"),
    ("UPDATE", "", "configmaps", "", "app"),
    ("DELETE", "", "configmaps", "", "app"),
    ("CREATE", "", "secrets", "", "app"),
    ("UPDATE", "", "secrets", "", "app"),
    ("DELETE", "", "secrets", "", "app"),
    ("CREATE", "apps", "deployments", "", "app"),
    ("UPDATE", "apps", "deployments", "scale", "app"),
    ("CREATE", "", "namespaces", "", ""),
    ("CREATE", "events.k8s.io", "events", "", "app"),
];

fn attributes(r: &Req) -> RequestAttributes {
    let (operation, group, resource, sub, ns) = *r;
    RequestAttributes {
        operation: operation.into(),
        group: group.into(),
        version: "v1".into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: "x".into(),
        object_labels: Some(Default::default()),
        old_object_labels: Some(Default::default()),
    }
}

/// Whether the API server would send `req` to a webhook with `rules`.
fn sends(rules: &[WebhookRule], req: &RequestAttributes) -> bool {
    let gvr = Gvr {
        group: &req.group,
        version: &req.version,
        resource: &req.resource,
    };
    rules
        .iter()
        .any(|r| rule_matches(&r.as_named_rule(), req, gvr))
}

struct AnyNamespace;

impl Namespaces for AnyNamespace {
    fn labels(&self, _: &str) -> Option<&std::collections::BTreeMap<String, String>> {
        None
    }
}

/// Whether some binding of `snapshot` can decide `req` (its rules match; selectors aside).
fn decided(snapshot: &Snapshot, req: &RequestAttributes) -> bool {
    let equivalents = |r: &RequestAttributes| {
        snapshot
            .registry
            .equivalents(&r.group, &r.resource, &r.subresource)
    };
    let hit = |m: Match| m != Match::No;
    snapshot.policies.iter().any(|p| {
        let Ok(pm) = &p.policy.matcher else {
            return true;
        };
        hit(pm.matches_resource(req, &AnyNamespace, equivalents(req)).0)
            && p.bindings.iter().any(|b| {
                b.matcher.as_ref().is_none_or(|bm| {
                    hit(bm.matches_resource(req, &AnyNamespace, equivalents(req)).0)
                })
            })
    })
}

fn write_policy(dir: &Path, name: &str, group: &str, resources: &str, ops: &str, binding: &str) {
    let text = format!(
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ['{group}']
      apiVersions: [v1]
      operations: {ops}
      resources: {resources}
  validations:
  - expression: 'true'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: {name}-binding}}
spec:
  policyName: {name}
  validationActions: [Deny]
{binding}"
    );
    std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
}

/// Two Pod policies.
fn two_pod_policies(dir: &Path) {
    write_policy(dir, "pods-a", "", "[pods]", "[CREATE, UPDATE]", "");
    write_policy(dir, "pods-b", "", "['pods/*']", "[CREATE]", "");
}

#[test]
fn the_command_prints_the_rules_of_the_examples() {
    let policies = repo().join("examples/policies");
    let policies = policies.to_str().unwrap();
    let (code, out, err) = celgate_within(&["webhook-rules", "--policies", policies], &repo());
    assert_eq!(code, 0, "{err}");
    let yaml: Vec<WebhookRule> = serde_yaml_ng::from_str(&out).unwrap();
    let (code, out, err) = celgate_within(
        &["webhook-rules", "--policies", policies, "-o", "json"],
        &repo(),
    );
    assert_eq!(code, 0, "{err}");
    let json: Vec<WebhookRule> = serde_json::from_str(&out).unwrap();
    assert_eq!(yaml, json);
    let pod = attributes(&("CREATE", "", "pods", "", "app"));
    let deployment = attributes(&("UPDATE", "apps", "deployments", "", "app"));
    let configmap = attributes(&("CREATE", "", "configmaps", "", "app"));
    let delete = attributes(&("DELETE", "", "pods", "", "app"));
    assert!(sends(&yaml, &pod) && sends(&yaml, &deployment));
    assert!(!sends(&yaml, &configmap) && !sends(&yaml, &delete), "{out}");
    assert!(yaml.iter().all(|r| r.api_versions == ["*"]));

    let (code, _, err) = celgate_within(&["webhook-rules", "--policies", "/no/such/dir"], &repo());
    assert_eq!(code, 2, "{err}");
}

/// The namespaceSelector every binding requires is printed with `-o webhook`; a binding
/// without it, and there is none. No objectSelector unless all have one; never
/// matchConditions.
#[test]
fn the_command_prints_the_selector_every_binding_requires() {
    let dir = temp_dir("webhook-rules-hints");
    write_policy(&dir, "pods-a", "", "[pods]", "[CREATE]", TEAM_A);
    write_policy(&dir, "pods-b", "", "[pods]", "[UPDATE]", TEAM_A);
    let object_only = "  matchResources: {objectSelector: {matchLabels: {checked: 'yes'}}}\n";
    let policies = dir.to_str().unwrap();
    let webhook = |dir: &Path| -> Json {
        let args = [
            "webhook-rules",
            "--policies",
            dir.to_str().unwrap(),
            "-o",
            "webhook",
        ];
        let (code, out, err) = celgate_within(&args, &repo());
        assert_eq!(code, 0, "{err}");
        serde_yaml_ng::from_str(&out).unwrap()
    };
    let got = webhook(&dir);
    assert_eq!(
        got["namespaceSelector"]["matchLabels"],
        json!({"team": "a"}),
        "{got}"
    );
    assert!(got.get("objectSelector").is_none(), "{got}");
    assert!(got.get("matchConditions").is_none(), "{got}");
    let rules: Vec<WebhookRule> = serde_json::from_value(got["rules"].clone()).unwrap();
    assert!(sends(
        &rules,
        &attributes(&("UPDATE", "", "pods", "", "app"))
    ));
    // The plain outputs are still the rules alone.
    let (_, out, _) = celgate_within(&["webhook-rules", "--policies", policies], &repo());
    let plain: Vec<WebhookRule> = serde_yaml_ng::from_str(&out).unwrap();
    assert_eq!(plain, rules);

    write_policy(&dir, "pods-c", "", "[pods]", "[DELETE]", object_only);
    let got = webhook(&dir);
    assert!(got.get("namespaceSelector").is_none(), "{got}");
    assert!(got.get("objectSelector").is_none(), "{got}");
}

/// The rules never leave out what a binding decides, for policies and bindings that narrow
/// each other in every way the rules can express, and a binding with no policy rules.
#[test]
fn no_request_a_binding_decides_is_left_out() {
    let dir = temp_dir("webhook-rules-sound");
    two_pod_policies(&dir);
    write_policy(
        &dir,
        "anything-narrowed",
        "*",
        "['*/*']",
        "['*']",
        "  matchResources:\n    resourceRules:\n    - {apiGroups: [''], apiVersions: ['*'], operations: [DELETE], resources: [secrets], scope: Namespaced}\n",
    );
    write_policy(&dir, "core-events", "", "[events]", "[CREATE]", "");
    write_policy(
        &dir,
        "hpa-v1",
        "apps",
        "['deployments/scale']",
        "[UPDATE]",
        "",
    );
    let objects = celgate::source::folder::load(&dir, 1 << 20)
        .unwrap()
        .objects;
    let snapshot = celgate::source::snapshot(objects, celgate::cel::NEWEST_MINOR, false).unwrap();
    let rules = RuleSet::of_snapshot(&snapshot).rules();
    let mut decided_count = 0;
    for r in STREAM {
        let req = attributes(r);
        if decided(&snapshot, &req) {
            decided_count += 1;
            assert!(sends(&rules, &req), "{r:?} decided but not sent: {rules:?}");
        }
    }
    assert!(decided_count >= 5, "the stream exercises the policies");
    // Narrower than everything: ConfigMaps and Secret writes are not sent.
    for r in [
        ("CREATE", "", "configmaps", "", "app"),
        ("CREATE", "", "secrets", "", "app"),
    ] {
        assert!(!sends(&rules, &attributes(&r)), "{r:?}: {rules:?}");
    }
    // The events.k8s.io twin of core events, by equivalence.
    assert!(sends(
        &rules,
        &attributes(&("CREATE", "events.k8s.io", "events", "", "app"))
    ));
}

/// A MutatingAdmissionPolicy (v1alpha1, as recorded) on `resources` for `ops`, bound with
/// `binding` (matchResources lines, or nothing).
fn write_mutating(dir: &Path, name: &str, resources: &str, ops: &str, binding: &str) {
    let text = format!(
        "apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata: {{name: {name}}}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: ['']
      apiVersions: [v1]
      operations: {ops}
      resources: {resources}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{{metadata: Object.metadata{{labels: {{\"added\": \"yes\"}}}}}}'
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata: {{name: {name}-binding}}
spec:
  policyName: {name}
{binding}"
    );
    std::fs::write(dir.join(format!("{name}.yaml")), text).unwrap();
}

/// `--phase mutating`: the rules of the MutatingAdmissionPolicies' bindings only (the
/// validating ones' are not in them, nor the other way round), `*` as CREATE, UPDATE and
/// CONNECT, never DELETE; the selector every binding requires with `-o webhook`.
#[test]
fn the_command_prints_the_mutating_webhooks_rules() {
    let dir = temp_dir("webhook-rules-mutating");
    write_policy(&dir, "secrets", "", "[secrets]", "['*']", "");
    write_mutating(&dir, "pods", "[pods, 'pods/exec']", "['*']", TEAM_A);
    write_mutating(&dir, "configmaps", "[configmaps]", "[CREATE]", TEAM_A);
    let run = |extra: &[&str]| -> String {
        let mut args = vec!["webhook-rules", "--policies", dir.to_str().unwrap()];
        args.extend(extra);
        let (code, out, err) = celgate_within(&args, &repo());
        assert_eq!(code, 0, "{err}");
        out
    };
    let out = run(&["--phase", "mutating"]);
    let rules: Vec<WebhookRule> = serde_yaml_ng::from_str(&out).unwrap();
    for r in [
        ("CREATE", "", "pods", "", "app"),
        ("UPDATE", "", "pods", "", "app"),
        ("CONNECT", "", "pods", "exec", "app"),
        ("CREATE", "", "configmaps", "", "app"),
    ] {
        assert!(sends(&rules, &attributes(&r)), "{r:?} not sent: {out}");
    }
    for r in [
        ("DELETE", "", "pods", "", "app"),
        ("UPDATE", "", "configmaps", "", "app"),
        ("CREATE", "", "secrets", "", "app"),
    ] {
        assert!(!sends(&rules, &attributes(&r)), "{r:?} sent: {out}");
    }
    assert!(
        rules
            .iter()
            .all(|r| !r.operations.iter().any(|o| o == "*" || o == "DELETE")),
        "{out}"
    );
    let json: Vec<WebhookRule> =
        serde_json::from_str(&run(&["--phase", "mutating", "-o", "json"])).unwrap();
    assert_eq!(json, rules);
    let webhook: Json =
        serde_yaml_ng::from_str(&run(&["--phase", "mutating", "-o", "webhook"])).unwrap();
    assert_eq!(
        webhook["namespaceSelector"]["matchLabels"],
        json!({"team": "a"}),
        "{webhook}"
    );
    // The validating phase (the default) is the ValidatingAdmissionPolicy's alone.
    let validating: Vec<WebhookRule> = serde_yaml_ng::from_str(&run(&[])).unwrap();
    assert_eq!(
        validating,
        serde_yaml_ng::from_str::<Vec<WebhookRule>>(&run(&["--phase", "validating"])).unwrap()
    );
    assert!(sends(
        &validating,
        &attributes(&("DELETE", "", "secrets", "", "app"))
    ));
    assert!(!sends(
        &validating,
        &attributes(&("CREATE", "", "pods", "", "app"))
    ));

    let (code, _, err) = celgate_within(
        &[
            "webhook-rules",
            "--policies",
            dir.to_str().unwrap(),
            "--phase",
            "both",
        ],
        &repo(),
    );
    assert_eq!(code, 2, "{err}");
}

// --- Dynamic mode against the fake API server.

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

/// The chart's default rules: every write.
fn everything() -> Json {
    json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "DELETE", "CONNECT"], "resources": ["*/*"], "scope": "*"}])
}

/// A binding restricted to the namespaces labelled `team: a`.
const TEAM_A: &str = "  matchResources: {namespaceSelector: {matchLabels: {team: a}}}\n";

/// The chart's exclusion of the control plane's namespaces.
fn excluded() -> Json {
    json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NS]})
}

fn webhook_configuration() -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": WEBHOOK},
        "webhooks": [{
            "name": "validate.celgate.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"name": "celgate", "namespace": NS, "path": "/validate"}},
            "rules": everything(),
            "namespaceSelector": {"matchExpressions": [excluded()]},
        }],
    })
}

fn live_rules(fake: &Fake) -> Vec<WebhookRule> {
    let w = fake
        .object("validatingwebhookconfigurations", "", WEBHOOK)
        .expect("the configuration");
    serde_json::from_value(w["webhooks"][0]["rules"].clone()).unwrap()
}

async fn serve(api: std::net::SocketAddr, dir: &Path) -> Running {
    serve_with(api, dir, None).await
}

/// `serve`, with the MutatingWebhookConfiguration `mutating` kept too.
async fn serve_with(api: std::net::SocketAddr, dir: &Path, mutating: Option<&str>) -> Running {
    let cfg = ServeConfig {
        cert: CertSource::Controller {
            connect: celgate::source::kube::Connect {
                api_url: Some(format!("http://{api}").parse().unwrap()),
                kubeconfig: None,
            },
            options: Options {
                namespace: NS.into(),
                secret: "celgate-tls".into(),
                webhook: WEBHOOK.into(),
                mutating_webhook: mutating.map(String::from),
                names: vec!["celgate.celgate-system.svc".into()],
                timing: Timing {
                    validity: Duration::from_secs(8760 * 3600),
                    renew_before: Duration::from_secs(720 * 3600),
                    overlap: Duration::from_secs(60),
                },
                check_every: Duration::from_millis(100),
            },
        },
        webhook_rules: WebhookRulesMode::Dynamic,
        ..common::serve::config(common::serve::folder(dir, Duration::from_millis(50)))
    };
    tokio::time::timeout(Duration::from_secs(30), start(cfg))
        .await
        .expect("started within 30 s")
        .expect("server starts")
}

fn serves(running: &Running, policy: &str) -> bool {
    running
        .state
        .snapshot
        .load()
        .policies
        .iter()
        .any(|p| p.policy.name == policy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rules_widen_before_a_new_binding_is_served_and_narrow_after() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    let dir = temp_dir("webhook-rules-dynamic");
    two_pod_policies(&dir);
    let running = serve(api, &dir).await;
    let configmap = attributes(&("CREATE", "", "configmaps", "", "app"));
    let pod = attributes(&("CREATE", "", "pods", "", "app"));
    eventually("the rules narrowed to the Pod policies", || {
        let rules = live_rules(&fake);
        sends(&rules, &pod) && !sends(&rules, &configmap)
    })
    .await;

    // A ConfigMap policy while the configuration cannot be written: not served.
    fake.refuse_replaces(true);
    write_policy(&dir, "configmaps", "", "[configmaps]", "[CREATE]", "");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !serves(&running, "configmaps"),
        "served before the rules cover it"
    );
    assert!(!sends(&live_rules(&fake), &configmap));
    fake.refuse_replaces(false);
    // Served once the rules cover it: read after seeing it served, they must.
    eventually("the ConfigMap policy served", || {
        let served = serves(&running, "configmaps");
        if served {
            assert!(sends(&live_rules(&fake), &configmap), "served uncovered");
        }
        served
    })
    .await;

    // Removed: the rules keep ConfigMaps while the snapshot holding it serves.
    std::fs::remove_file(dir.join("configmaps.yaml")).unwrap();
    eventually("ConfigMaps left out again", || {
        let rules = live_rules(&fake);
        if serves(&running, "configmaps") {
            assert!(sends(&rules, &configmap), "narrowed while served");
        }
        !sends(&rules, &configmap)
    })
    .await;
    assert!(!serves(&running, "configmaps"));
    assert!(sends(&live_rules(&fake), &pod));
    running.shutdown().await;
}

fn live_namespace_selector(fake: &Fake) -> Json {
    fake.object("validatingwebhookconfigurations", "", WEBHOOK)
        .expect("the configuration")["webhooks"][0]["namespaceSelector"]
        .clone()
}

/// Dynamic mode adds the namespaceSelector every binding requires to the configuration's
/// own (the chart's exclusions stay), and takes it away again when a binding without it
/// comes (widened before that binding is served).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_namespace_selector_is_added_to_the_webhook_and_taken_away() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    let dir = temp_dir("webhook-hints-dynamic");
    write_policy(&dir, "pods-a", "", "[pods]", "[CREATE]", TEAM_A);
    write_policy(&dir, "pods-b", "", "[pods]", "[UPDATE]", TEAM_A);
    let running = serve(api, &dir).await;
    let hinted = json!({"matchExpressions": [excluded()], "matchLabels": {"team": "a"}});
    eventually("the namespaceSelector hint written", || {
        live_namespace_selector(&fake) == hinted
    })
    .await;
    let w = fake
        .object("validatingwebhookconfigurations", "", WEBHOOK)
        .unwrap();
    assert!(
        w["metadata"]["annotations"]["celgate.dev/selector-hints"]
            .as_str()
            .is_some_and(|a| a.contains("team")),
        "{w}"
    );

    // A binding for every namespace: the hint goes before it is served, the exclusion stays.
    write_policy(&dir, "pods-c", "", "[pods]", "[DELETE]", "");
    eventually("the binding for every namespace served", || {
        let served = serves(&running, "pods-c");
        if served {
            assert_eq!(
                live_namespace_selector(&fake),
                json!({"matchExpressions": [excluded()]}),
                "served while the webhook still required team: a"
            );
        }
        served
    })
    .await;
    running.shutdown().await;
}

/// How many requests of the mixed stream reach celgate with 2 Pod policies: the chart's
/// `*/*` rules against those the controller writes to the fake API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_pod_policies_send_celgate_a_fraction_of_the_stream() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    let dir = temp_dir("webhook-rules-measure");
    two_pod_policies(&dir);
    let before: Vec<WebhookRule> = serde_json::from_value(everything()).unwrap();
    let running = serve(api, &dir).await;
    let configmap = attributes(&("CREATE", "", "configmaps", "", "app"));
    eventually("the rules written", || {
        !sends(&live_rules(&fake), &configmap)
    })
    .await;
    let after = live_rules(&fake);
    let snapshot = running.state.snapshot.load_full();
    let count = |rules: &[WebhookRule]| {
        STREAM
            .iter()
            .filter(|r| sends(rules, &attributes(r)))
            .count()
    };
    let decided = STREAM
        .iter()
        .filter(|r| decided(&snapshot, &attributes(r)))
        .count();
    eprintln!(
        "of {} requests: {} sent with */*, {} with the rules, {} decided by a binding",
        STREAM.len(),
        count(&before),
        count(&after),
        decided
    );
    assert_eq!(count(&before), STREAM.len());
    // Pod CREATE and UPDATE (`pods/*` CREATE adds no request of the stream), nothing else.
    assert_eq!(count(&after), decided);
    assert_eq!(count(&after), 2);
    running.shutdown().await;
}

/// The chart's MutatingWebhookConfiguration: CREATE, UPDATE and CONNECT of everything.
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
            "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE", "CONNECT"], "resources": ["*/*"], "scope": "*"}],
            "namespaceSelector": {"matchExpressions": [excluded()]},
        }],
    })
}

fn live_mutating_rules(fake: &Fake) -> Vec<WebhookRule> {
    let w = fake
        .object("mutatingwebhookconfigurations", "", WEBHOOK)
        .expect("the mutating configuration");
    serde_json::from_value(w["webhooks"][0]["rules"].clone()).unwrap()
}

fn serves_mutating(running: &Running, policy: &str) -> bool {
    running
        .state
        .snapshot
        .load()
        .mutating
        .iter()
        .any(|e| e.policy.base.name == policy)
}

/// Dynamic mode with a MutatingWebhookConfiguration: its rules narrow to the bound MAPs
/// (never DELETE; the ValidatingAdmissionPolicy's resources stay in the validating one
/// only), a new MAP is served only once they cover it, and they narrow after it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutating_rules_follow_the_bound_maps_widen_first_narrow_after() {
    let (fake, api) = Fake::start(&kinds()).await;
    fake.apply(webhook_configuration());
    fake.apply(mutating_configuration());
    let dir = temp_dir("webhook-rules-mutating-dynamic");
    write_policy(&dir, "secrets", "", "[secrets]", "[CREATE]", "");
    write_mutating(&dir, "pods", "[pods]", "['*']", "");
    let running = serve_with(api, &dir, Some(WEBHOOK)).await;
    let pod = attributes(&("CREATE", "", "pods", "", "app"));
    let pod_update = attributes(&("UPDATE", "", "pods", "", "app"));
    let pod_delete = attributes(&("DELETE", "", "pods", "", "app"));
    let secret = attributes(&("CREATE", "", "secrets", "", "app"));
    let configmap = attributes(&("CREATE", "", "configmaps", "", "app"));
    eventually("both configurations narrowed", || {
        let m = live_mutating_rules(&fake);
        let v = live_rules(&fake);
        sends(&m, &pod) && !sends(&m, &secret) && sends(&v, &secret) && !sends(&v, &pod)
    })
    .await;
    let m = live_mutating_rules(&fake);
    assert!(sends(&m, &pod_update) && !sends(&m, &pod_delete), "{m:?}");
    assert!(!sends(&m, &configmap), "{m:?}");

    // A ConfigMap MAP while the configurations cannot be written: not served.
    fake.refuse_replaces(true);
    write_mutating(&dir, "configmaps", "[configmaps]", "[CREATE]", "");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !serves_mutating(&running, "configmaps"),
        "served before the mutating rules cover it"
    );
    fake.refuse_replaces(false);
    eventually("the ConfigMap MAP served", || {
        let served = serves_mutating(&running, "configmaps");
        if served {
            assert!(
                sends(&live_mutating_rules(&fake), &configmap),
                "served uncovered"
            );
        }
        served
    })
    .await;

    // Removed: the mutating rules keep ConfigMaps while the snapshot holding it serves.
    std::fs::remove_file(dir.join("configmaps.yaml")).unwrap();
    eventually("ConfigMaps left out of the mutating rules again", || {
        let rules = live_mutating_rules(&fake);
        if serves_mutating(&running, "configmaps") {
            assert!(sends(&rules, &configmap), "narrowed while served");
        }
        !sends(&rules, &configmap)
    })
    .await;
    assert!(sends(&live_mutating_rules(&fake), &pod));
    assert!(!sends(&live_rules(&fake), &configmap));
    running.shutdown().await;
}
