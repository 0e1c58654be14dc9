//! VAP engine benchmarks: a Pod CREATE from the AdmissionReview's bytes to the answer,
//! against 1, 100 and 1,000 policies of which one matches (the 10 validations of
//! `pss-validations.yaml`), and against 1,024 bindings that all match, each with its own
//! param.

use std::path::PathBuf;

#[path = "../tests/common/fixtures.rs"]
mod fixtures;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Value as Json};

use celgate::cel::NEWEST_MINOR;
use celgate::policy::snapshot::Snapshot;
use celgate::source::folder::Loaded;

fn shared(path: &str) -> PathBuf {
    let base = std::env::var_os("CELGATE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    base.join(path)
}

fn loaded(object: Json) -> Loaded {
    Loaded {
        file: PathBuf::from("bench"),
        document: 1,
        field_errors: Vec::new(),
        object,
    }
}

fn rule(group: &str, resource: &str) -> Json {
    json!({"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": [resource]})
}

fn policy(name: &str, rules: Json, validations: Json, param_kind: Option<Json>) -> Json {
    let mut spec =
        json!({"matchConstraints": {"resourceRules": rules}, "validations": validations});
    if let Some(pk) = param_kind {
        spec["paramKind"] = pk;
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy", "metadata": {"name": name}, "spec": spec})
}

fn binding(name: &str, policy: &str, param: Option<&str>) -> Json {
    let mut spec = json!({"policyName": policy, "validationActions": ["Deny"]});
    if let Some(p) = param {
        spec["paramRef"] = json!({"name": p, "parameterNotFoundAction": "Deny"});
    }
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": name}, "spec": spec})
}

fn pss_validations() -> Json {
    let text = std::fs::read_to_string(shared("bench/pss-validations.yaml"))
        .expect("pss-validations.yaml");
    let doc: Json = serde_yaml_ng::from_str(&text).expect("YAML");
    doc["validations"].clone()
}

/// One policy on pods (the PSS validations) and `n - 1` on other resources.
fn policies(n: usize) -> Snapshot {
    let mut objects = vec![
        loaded(policy(
            "pss",
            json!([rule("", "pods")]),
            pss_validations(),
            None,
        )),
        loaded(binding("pss", "pss", None)),
    ];
    for i in 1..n {
        let name = format!("other-{i:04}");
        let resource = format!("widgets{i}");
        objects.push(loaded(policy(
            &name,
            json!([rule("example.com", &resource)]),
            json!([{"expression": "false"}]),
            None,
        )));
        objects.push(loaded(binding(&name, &name, None)));
    }
    celgate::source::snapshot(objects, NEWEST_MINOR, true).expect("valid")
}

/// One policy with a ConfigMap param and 1,024 bindings, each naming its own ConfigMap.
fn many_params() -> Snapshot {
    let validations = json!([{"expression": "size(object.spec.containers) <= int(params.data.maxContainers)", "message": "too many containers"}]);
    let pk = json!({"apiVersion": "v1", "kind": "ConfigMap"});
    let mut objects = vec![loaded(policy(
        "limits",
        json!([rule("", "pods")]),
        validations,
        Some(pk),
    ))];
    for i in 0..1024 {
        let name = format!("limit-{i:04}");
        objects.push(loaded(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "shop-prod"}, "data": {"maxContainers": "5"}})));
        objects.push(loaded(binding(&name, "limits", Some(&name))));
    }
    celgate::source::snapshot(objects, NEWEST_MINOR, true).expect("valid")
}

/// The shared Pod fixture's CREATE envelope around the benchmark Pod, in `shop-prod`.
fn review_bytes() -> Vec<u8> {
    let pod: Json =
        serde_json::from_slice(&std::fs::read(shared("bench/pod.json")).expect("pod.json"))
            .expect("JSON");
    let mut review = fixtures::pod_create_review(
        pod,
        json!({"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": ["system:serviceaccounts", "system:authenticated"]}),
    );
    review["request"]["namespace"] = json!("shop-prod");
    serde_json::to_vec(&review).expect("serialisable")
}

fn allowed(snapshot: &Snapshot, body: &[u8]) -> bool {
    let answer = celgate::review::answer(snapshot, body, &Default::default(), Default::default())
        .expect("answer");
    answer.review()["response"]["allowed"] == true
}

fn bench(c: &mut Criterion) {
    let body = review_bytes();
    let mut g = c.benchmark_group("pod CREATE, one matching policy among");
    for n in [1, 100, 1000] {
        let snapshot = policies(n);
        assert!(
            allowed(&snapshot, &body),
            "the PSS validations pass for pod.json"
        );
        g.bench_with_input(BenchmarkId::from_parameter(n), &snapshot, |b, s| {
            b.iter(|| allowed(s, black_box(&body)))
        });
    }
    g.finish();
    let snapshot = many_params();
    assert!(allowed(&snapshot, &body));
    c.bench_function("1024 bindings x 1024 params", |b| {
        b.iter(|| allowed(&snapshot, black_box(&body)))
    });
}

/// What a cluster change costs: rebuilding the snapshot of 100 policies (10 validations each),
/// their bindings, 1,000 namespaces and 1,000 param ConfigMaps, with every policy already
/// compiled (the cluster source rebuilds this way on each debounced change).
fn rebuild(c: &mut Criterion) {
    let mut objects = Vec::new();
    for i in 0..100 {
        let name = format!("policy-{i:03}");
        let resource = format!("widgets{i}");
        objects.push(loaded(policy(
            &name,
            json!([rule("example.com", &resource)]),
            pss_validations(),
            None,
        )));
        objects.push(loaded(binding(&name, &name, None)));
    }
    for i in 0..1000 {
        let ns = format!("team-{i:04}");
        objects.push(loaded(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"kubernetes.io/metadata.name": ns, "env": "prod"}}})));
        objects.push(loaded(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits", "namespace": ns}, "data": {"maxContainers": "5"}})));
    }
    // The cluster source's stores hold shared objects; a rebuild copies none of them.
    let objects: Vec<std::sync::Arc<Json>> = objects
        .into_iter()
        .map(|o| std::sync::Arc::new(o.object))
        .collect();
    let cache = celgate::policy::snapshot::CompileCache::default();
    let build = |objects: &[std::sync::Arc<Json>]| {
        let mut b = celgate::policy::snapshot::SnapshotBuilder::new();
        for o in objects {
            celgate::source::add_shared(&mut b, o.clone(), celgate::source::Check::Nothing)
                .expect("valid");
        }
        b.build_cached(NEWEST_MINOR, &cache)
    };
    assert_eq!(build(&objects).policies.len(), 100);
    c.bench_function(
        "snapshot rebuild: 100 policies, 1000 namespaces, 1000 params",
        |b| b.iter(|| build(black_box(&objects))),
    );
}

fn config() -> Criterion {
    Criterion::default().sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = bench, rebuild }
criterion_main!(benches);
