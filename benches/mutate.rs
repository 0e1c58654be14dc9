//! MutatingAdmissionPolicy benchmarks: the shared benchmark Pod's CREATE, from the
//! AdmissionReview's bytes to the `/mutate` answer with its JSON patch, for one policy of
//! each patch type (an apply configuration that adds a label and sets every container's
//! imagePullPolicy, and a JSON patch that adds an annotation and an environment variable to
//! every container), and for both together.

use std::path::PathBuf;

#[path = "../tests/common/fixtures.rs"]
mod fixtures;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
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

const APPLY: &str =
    "Object{metadata: Object.metadata{labels: {'celgate.dev/defaults': 'applied'}}, \
    spec: Object.spec{containers: object.spec.containers.map(c, \
    Object.spec.containers{name: c.name, imagePullPolicy: 'IfNotPresent'})}}";

const JSON_PATCH: &str =
    "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'celgate.dev/seen': 'yes'}}] + \
    object.spec.containers.map(c, JSONPatch{op: 'add', \
    path: '/spec/containers/' + string(object.spec.containers.indexOf(c)) + '/env/-', \
    value: {'name': 'CELGATE', 'value': '1'}})";

fn policy(name: &str, patch_type: &str, expression: &str) -> [Json; 2] {
    let field = if patch_type == "JSONPatch" {
        "jsonPatch"
    } else {
        "applyConfiguration"
    };
    [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
                "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                "mutations": [{"patchType": patch_type, field: {"expression": expression}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name}, "spec": {"policyName": name}}),
    ]
}

fn snapshot(policies: &[[Json; 2]]) -> Snapshot {
    let objects = policies.iter().flatten().cloned().map(loaded).collect();
    celgate::source::snapshot(objects, NEWEST_MINOR, true).expect("valid policies")
}

/// The shared Pod fixture's CREATE review, every container with an `env` list.
fn review_bytes() -> Vec<u8> {
    let mut pod: Json =
        serde_json::from_slice(&std::fs::read(shared("bench/pod.json")).expect("pod.json"))
            .expect("JSON");
    if let Some(containers) = pod["spec"]["containers"].as_array_mut() {
        for c in containers {
            if c.get("env").is_none() {
                c["env"] = json!([]);
            }
        }
    }
    let review = fixtures::pod_create_review(
        pod,
        json!({"username": "alice", "groups": ["system:authenticated"]}),
    );
    serde_json::to_vec(&review).expect("serialisable")
}

/// The answer's patch: present, and allowed.
fn patched(snapshot: &Snapshot, body: &[u8]) -> bool {
    let answer =
        celgate::review::answer_mutating(snapshot, body, &Default::default()).expect("answer");
    answer.review["response"]["allowed"] == true && answer.patch.is_some()
}

fn bench(c: &mut Criterion) {
    let body = review_bytes();
    let mut g = c.benchmark_group("pod CREATE to /mutate answer");
    for (name, policies) in [
        (
            "apply configuration",
            vec![policy("apply", "ApplyConfiguration", APPLY)],
        ),
        ("json patch", vec![policy("patch", "JSONPatch", JSON_PATCH)]),
        (
            "both",
            vec![
                policy("apply", "ApplyConfiguration", APPLY),
                policy("patch", "JSONPatch", JSON_PATCH),
            ],
        ),
    ] {
        let s = snapshot(&policies);
        assert!(patched(&s, &body), "{name}: the Pod is mutated");
        g.bench_function(name, |b| b.iter(|| patched(&s, black_box(&body))));
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default().sample_size(20)
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
