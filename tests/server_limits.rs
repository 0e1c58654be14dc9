//! Reliability round 3 (issue 24): what one client can make the server hold. Answers stay
//! small whatever the verdict; buffered request and answer bytes stay under
//! `--max-buffered-bytes`; answers a client does not read are dropped after the client
//! timeout; the metrics listener answers while the webhook port is flooded; the connection
//! cap never closes a connection mid-request.

use std::path::Path;

use celgate::cel::NEWEST_MINOR;
use celgate::review::answer;
use celgate::source::{add_cluster_defaults, folder, snapshot};
use serde_json::{json, Value as Json};

/// A review of a ConfigMap CREATE.
fn configmap_review(uid: &str, data: Json) -> Json {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "cm", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "default"}, "data": data},
            "oldObject": null
        }
    })
}

/// A policy of `validations` failing validations, each with its own `message_runes`-rune
/// message, bound with `actions`.
fn failing_policy(validations: usize, message_runes: usize, actions: &str) -> String {
    let mut p = String::from(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\n\
         metadata: {name: noisy}\nspec:\n  matchConstraints:\n    resourceRules: [{apiGroups: [\"\"], \
         apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]\n  validations:\n",
    );
    for i in 0..validations {
        let message = format!("{i:05}{}", "w".repeat(message_runes - 5));
        p.push_str(&format!(
            "  - {{expression: \"false\", message: \"{message}\"}}\n"
        ));
    }
    p.push_str(&format!(
        "---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\n\
         metadata: {{name: noisy}}\nspec: {{policyName: noisy, validationActions: [{actions}]}}\n"
    ));
    p
}

/// Item 12(a): thousands of failing Warn validations answered tens of megabytes of warnings;
/// the API server keeps 4096 runes of them (each cut to 256 past that), and so does the answer.
#[test]
fn warnings_in_an_answer_are_capped_as_the_api_server_caps_them() {
    let mut objects = folder::parse_documents(
        Path::new("policy.yaml"),
        &failing_policy(2000, 1000, "Warn"),
    )
    .unwrap();
    add_cluster_defaults(&mut objects);
    let snap = snapshot(objects, NEWEST_MINOR, true).unwrap();
    let body = serde_json::to_vec(&configmap_review("u-1", json!({}))).unwrap();
    let a = answer(&snap, &body, &Default::default()).unwrap();
    assert_eq!(a.verdict.warnings.len(), 2000, "every validation failed");
    let warnings = a.review["response"]["warnings"].as_array().unwrap();
    let runes: usize = warnings
        .iter()
        .map(|w| w.as_str().unwrap().chars().count())
        .sum();
    assert!(
        runes <= 4096 && warnings.len() == 16,
        "{} warnings, {runes} runes",
        warnings.len()
    );
    assert!(warnings[0]
        .as_str()
        .unwrap()
        .starts_with("Validation failed"));
    assert!(serde_json::to_vec(&a.review).unwrap().len() < 16 << 10);
}
