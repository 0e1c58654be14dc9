//! A limit that stops a composited variable labels the check metrics of the expressions that
//! read it as the limit (here `memory_limit`), not as an ordinary `invalid_error`: the
//! variable's error reaches its readers as an ordinary CEL error value, and the label comes
//! from the stop it carries, on the first read and on cached reads alike.

use std::path::Path;

use celgate::admission::{AdmitContext, EvalLimits};
use celgate::cel::NEWEST_MINOR;

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: builder}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  variables:
  - {name: big, expression: "lists.range(2000).map(i, string(i)).join(',')"}
  validations:
  - expression: "size(variables.big) > 0"
  - expression: "variables.big != ''"
  - expression: "object.data.x == 'y'"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: builder}
spec: {policyName: builder, validationActions: [Deny]}
"#;

fn review() -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u1",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "namespace": "default",
            "name": "cm",
            "userInfo": {"username": "alice"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap",
                       "metadata": {"name": "cm", "namespace": "default"}, "data": {"x": "z"}}
        }
    }))
    .unwrap()
}

fn labels(memory_per_expression: u64) -> (Vec<(String, String)>, Vec<String>) {
    let objects = celgate::source::folder::parse_documents(Path::new("p.yaml"), POLICY).unwrap();
    let snapshot = celgate::source::snapshot(objects, NEWEST_MINOR, true).unwrap();
    let context = AdmitContext {
        limits: EvalLimits {
            memory_per_expression,
            ..EvalLimits::default()
        },
        ..AdmitContext::default()
    };
    let answer =
        celgate::review::answer(&snapshot, &review(), &context, Default::default()).unwrap();
    let checks = answer
        .verdict
        .checks
        .iter()
        .map(|c| (c.error_type.to_string(), c.action.to_string()))
        .collect();
    let denials = answer
        .verdict
        .denials
        .iter()
        .map(|d| d.message.clone())
        .collect();
    (checks, denials)
}

#[test]
fn a_stopped_variable_labels_its_readers_by_the_stop() {
    let (checks, denials) = labels(4 << 10);
    let memory = ("memory_limit".to_string(), "deny".to_string());
    let invalid = ("invalid_error".to_string(), "deny".to_string());
    assert_eq!(checks, [memory.clone(), memory, invalid], "{denials:?}");
    assert!(
        denials[0].ends_with(
            "expression 'size(variables.big) > 0' resulted in error: composited variable \"big\" fails to evaluate: operation cancelled: memory limit exceeded"
        ),
        "{denials:?}"
    );
}

#[test]
fn without_the_stop_the_same_policy_only_fails_its_plain_validation() {
    let (checks, _) = labels(EvalLimits::default().memory_per_expression);
    assert_eq!(checks, [("invalid_error".to_string(), "deny".to_string())]);
}
