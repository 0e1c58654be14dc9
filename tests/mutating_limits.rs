//! The limits of a MutatingAdmissionPolicy's patches (docs/operators/reliability.md): a JSON
//! patch whose `copy` operations write more than it stops at the memory ceiling
//! (`--cel-memory-limit`), an apply configuration's merge at `--max-apply-depth`; each is
//! that mutation's error under its policy's failurePolicy, never a crash or a huge answer.

use std::path::PathBuf;

use celgate::admission::{AdmitContext, EvalLimits};
use celgate::source::folder::Loaded;
use serde_json::{json, Value as Json};

fn snapshot(expression: &str, patch_type: &str) -> celgate::policy::Snapshot {
    let field = if patch_type == "JSONPatch" {
        "jsonPatch"
    } else {
        "applyConfiguration"
    };
    let objects = [
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
                "failurePolicy": "Fail", "reinvocationPolicy": "Never",
                "mutations": [{"patchType": patch_type, field: {"expression": expression}}]}}),
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": "b"}, "spec": {"policyName": "p"}}),
    ];
    let loaded = objects
        .into_iter()
        .map(|object| Loaded {
            file: PathBuf::from("test"),
            document: 1,
            field_errors: Vec::new(),
            object,
        })
        .collect();
    celgate::source::snapshot(loaded, celgate::cel::NEWEST_MINOR, true).expect("valid")
}

fn review(data: Json) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data},
        }
    }))
    .unwrap()
}

fn answer(snapshot: &celgate::policy::Snapshot, body: &[u8], limits: EvalLimits) -> Json {
    let services = Default::default();
    let context = AdmitContext {
        services: &services,
        limits,
    };
    celgate::review::answer_mutating(snapshot, body, &context)
        .unwrap()
        .review["response"]
        .clone()
}

#[test]
fn copies_stop_at_the_memory_ceiling() {
    // Ten copies of a 16 KiB value: 160 KiB copied.
    let copies: Vec<String> = (0..10)
        .map(|i| format!("JSONPatch{{op: 'copy', from: '/data/big', path: '/data/a{i}'}}"))
        .collect();
    let expression = format!(
        "[JSONPatch{{op: 'add', path: '/data/big', value: '{}'}}, {}]",
        "y".repeat(16 << 10),
        copies.join(", ")
    );
    let s = snapshot(&expression, "JSONPatch");
    let body = review(json!({"k": "v"}));
    let generous = answer(&s, &body, EvalLimits::default());
    assert_eq!(generous["allowed"], true, "{generous}");
    let tight = EvalLimits {
        memory_per_expression: 64 << 10,
        ..EvalLimits::default()
    };
    let refused = answer(&s, &body, tight);
    assert_eq!(refused["allowed"], false);
    let message = refused["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("policy 'p' with binding 'b' denied request: JSON Patch:"),
        "{message}"
    );
}

#[test]
fn merges_stop_at_the_apply_depth() {
    let s = snapshot(
        "Object{metadata: Object.metadata{labels: {'a': 'b'}}}",
        "ApplyConfiguration",
    );
    // A ConfigMap's data is a map of strings: depth comes from the object itself here.
    let body = review(json!({"k": "v"}));
    assert_eq!(answer(&s, &body, EvalLimits::default())["allowed"], true);
    let shallow = EvalLimits {
        max_apply_depth: 2,
        ..EvalLimits::default()
    };
    let refused = answer(&s, &body, shallow);
    assert_eq!(refused["allowed"], false, "{refused}");
    assert_eq!(refused["status"]["code"], 403);
}
