//! Policy results: what the verdict records of each (policy, binding) evaluation (pass,
//! fail, error, skip, by index into the snapshot), and, traced, of each validation.

use celgate::admission::{admit_traced, AdmitContext, Evaluated, PolicyResult};
use celgate::source::folder::parse_documents;
use celgate::source::snapshot;
use serde_json::{json, Value as Json};

const OBJECTS: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: a-labels}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "has(object.metadata.labels)"
    message: labels needed
    reason: Forbidden
  - expression: "!has(object.data) || !('debug' in object.data)"
    messageExpression: "'no debug in ' + object.metadata.name"
  - expression: "object.data.size == 'x'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: a-deny}
spec: {policyName: a-labels, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b-audit}
spec: {policyName: a-labels, validationActions: [Audit]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: b-excluded}
spec:
  failurePolicy: Ignore
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions:
  - {name: never, expression: "false"}
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: excluded}
spec: {policyName: b-excluded, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: c-other}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}]
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: other}
spec: {policyName: c-other, validationActions: [Deny]}
---
apiVersion: v1
kind: Namespace
metadata: {name: default}
"#;

fn review(data: Json, labels: bool) -> Vec<u8> {
    let mut object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data});
    if labels {
        object["metadata"]["labels"] = json!({"a": "b"});
    }
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice"},
            "object": object, "oldObject": null
        }
    }))
    .unwrap()
}

fn snap() -> celgate::policy::snapshot::Snapshot {
    let objects = parse_documents(std::path::Path::new("objects.yaml"), OBJECTS).unwrap();
    snapshot(objects, celgate::cel::NEWEST_MINOR, true).unwrap()
}

/// The snapshot's names of an evaluated record.
fn named(s: &celgate::policy::snapshot::Snapshot, e: &Evaluated) -> (String, String, &'static str) {
    let entry = &s.policies[e.policy];
    (
        entry.policy.name.clone(),
        entry.bindings[e.binding].name.clone(),
        e.result.label(),
    )
}

#[test]
fn every_matching_binding_has_a_result() {
    let s = snap();
    let context = AdmitContext::default();
    let results = |body: Vec<u8>| {
        let a = celgate::review::answer(&s, &body, &context).unwrap();
        a.verdict
            .evaluated
            .iter()
            .map(|e| named(&s, e))
            .collect::<Vec<_>>()
    };
    let t = |p: &str, b: &str, r: &'static str| (p.to_string(), b.to_string(), r);
    // Every validation holds: pass; the excluded policy: skip; the secrets policy: nothing.
    assert_eq!(
        results(review(json!({"size": "x"}), true)),
        vec![
            t("a-labels", "a-deny", "pass"),
            t("a-labels", "b-audit", "pass"),
            t("b-excluded", "excluded", "skip")
        ]
    );
    assert_eq!(
        results(review(json!({"size": "x", "debug": "1"}), true)),
        vec![
            t("a-labels", "a-deny", "fail"),
            t("a-labels", "b-audit", "fail"),
            t("b-excluded", "excluded", "skip")
        ]
    );
    // `object.data.size` missing: an error outranks the failures beside it.
    assert_eq!(
        results(review(json!({"debug": "1"}), false))[..2],
        [
            t("a-labels", "a-deny", "error"),
            t("a-labels", "b-audit", "error")
        ]
    );
}

#[test]
fn traced_results_name_each_validation() {
    let s = snap();
    let body = review(json!({"debug": "1"}), false);
    let doc = celgate::cel::json::Doc::parse(&body).unwrap();
    let req = celgate::review::request(&doc).unwrap();
    let verdict = admit_traced(&s, &req, &AdmitContext::default());
    let deny = verdict
        .results
        .iter()
        .find(|r| r.binding.as_deref() == Some("a-deny"))
        .unwrap();
    let got: Vec<_> = deny
        .validations
        .iter()
        .map(|v| (v.index, v.result, v.message.as_str(), v.reason.as_deref()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                Some(0),
                PolicyResult::Fail,
                "labels needed",
                Some("Forbidden")
            ),
            (
                Some(1),
                PolicyResult::Fail,
                "no debug in cm",
                Some("Invalid")
            ),
            (
                Some(2),
                PolicyResult::Error,
                "expression 'object.data.size == 'x'' resulted in error: no such key: size",
                None
            ),
        ]
    );
    // Untraced, nothing per validation is kept.
    let plain = celgate::admission::admit(&s, &req, &AdmitContext::default());
    assert!(plain.results.is_empty());
    assert_eq!(plain.evaluated.len(), 3);
}
