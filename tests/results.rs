//! Policy results: what the verdict records of each (policy, binding) evaluation (pass,
//! fail, error, skip, by index into the snapshot), and, traced, of each validation.

use celgate::admission::{admit, AdmitContext, AdmitOptions, Evaluated, PolicyResult};
use celgate::source::folder::parse_documents;
use celgate::source::snapshot;
use serde_json::{json, Value as Json};

mod common;

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
        let a = celgate::review::answer(&s, &body, &context, Default::default()).unwrap();
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
    let traced = AdmitOptions {
        trace: true,
        ..AdmitOptions::default()
    };
    let verdict = admit(&s, &req, &AdmitContext::default(), traced);
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
    let plain = admit(&s, &req, &AdmitContext::default(), AdmitOptions::default());
    assert!(plain.results.is_empty());
    assert_eq!(plain.evaluated.len(), 3);
}

/// The scan's fixtures: policies in `dir/policies`, objects in `dir/objects`.
fn scan_dirs(name: &str, policies: &str, objects: &str) -> std::path::PathBuf {
    let dir = common::temp_dir(&format!("scan-{name}"));
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::create_dir_all(dir.join("objects")).unwrap();
    std::fs::write(dir.join("policies/p.yaml"), policies).unwrap();
    std::fs::write(dir.join("objects/o.yaml"), objects).unwrap();
    dir
}

const SCAN_POLICIES: &str = r#"
# What the synthesised request looks like.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: request-shape}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "request.operation == 'CREATE' && oldObject == null && request.dryRun == true"
  - expression: "request.userInfo.username == 'system:serviceaccount:celgate:celgate' && 'system:authenticated' in request.userInfo.groups && 'system:serviceaccounts:celgate' in request.userInfo.groups"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: request-shape}
spec: {policyName: request-shape, validationActions: [Audit]}
---
# Only in namespaces labelled env=prod (a Namespace given among the objects).
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owner}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: an owner label is required
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: owner-prod}
spec:
  policyName: owner
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {env: prod}}
---
# UPDATE only: never evaluated by a scan.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: updates}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [configmaps, namespaces]}]
  validations:
  - expression: "false"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: updates}
spec: {policyName: updates, validationActions: [Deny]}
---
# Cluster-scoped objects: a warning only.
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: ns-team}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces]}]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: namespaces need a team
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: ns-team}
spec: {policyName: ns-team, validationActions: [Warn]}
"#;

const SCAN_OBJECTS: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: shop, uid: ns-1, labels: {env: prod}}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: no-owner, namespace: shop, uid: cm-1}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: owned, namespace: shop, uid: cm-2, labels: {owner: ann}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: dev-cm, namespace: dev, uid: cm-3}
"#;

#[test]
fn a_scan_evaluates_each_object_as_its_create() {
    let dir = scan_dirs("create", SCAN_POLICIES, SCAN_OBJECTS);
    let scanned = celgate::app::scan::scan_folder(
        &dir.join("policies"),
        &dir.join("objects"),
        celgate::cel::NEWEST_MINOR,
        celgate::source::read::DEFAULT_MAX_FILE_BYTES,
        Default::default(),
    )
    .unwrap();
    let s = &scanned.snapshot;
    let seen: Vec<(String, String, String, Option<usize>, &'static str)> = scanned
        .objects
        .iter()
        .flat_map(|o| {
            o.results.iter().map(move |r| {
                let e = &s.policies[r.policy];
                (
                    o.resource.name.clone(),
                    e.policy.name.clone(),
                    e.bindings[r.binding].name.clone(),
                    r.validation,
                    r.result.label(),
                )
            })
        })
        .collect();
    let t = |o: &str, p: &str, b: &str, i: usize, r: &'static str| {
        (o.to_string(), p.to_string(), b.to_string(), Some(i), r)
    };
    assert_eq!(
        seen,
        vec![
            // The Namespace itself (cluster-scoped), no team label.
            t("shop", "ns-team", "ns-team", 0, "fail"),
            // env=prod through the Namespace among the objects; the request is a dry-run
            // CREATE by celgate's service account.
            t("no-owner", "owner", "owner-prod", 0, "fail"),
            t("no-owner", "request-shape", "request-shape", 0, "pass"),
            t("no-owner", "request-shape", "request-shape", 1, "pass"),
            t("owned", "owner", "owner-prod", 0, "pass"),
            t("owned", "request-shape", "request-shape", 0, "pass"),
            t("owned", "request-shape", "request-shape", 1, "pass"),
            // `dev` is not defined: a bare namespace, without env=prod.
            t("dev-cm", "request-shape", "request-shape", 0, "pass"),
            t("dev-cm", "request-shape", "request-shape", 1, "pass"),
        ]
    );
    let denied: Vec<bool> = scanned.objects.iter().map(|o| o.denied).collect();
    assert_eq!(
        denied,
        vec![false, true, false, false],
        "Warn does not deny"
    );
    assert!(scanned.denied());
}

#[test]
fn scan_results_become_policy_reports() {
    use celgate::scan::report::{reports, ReportApi};
    let dir = scan_dirs("reports", SCAN_POLICIES, SCAN_OBJECTS);
    let scanned = celgate::app::scan::scan_folder(
        &dir.join("policies"),
        &dir.join("objects"),
        celgate::cel::NEWEST_MINOR,
        celgate::source::read::DEFAULT_MAX_FILE_BYTES,
        Default::default(),
    )
    .unwrap();
    let wg = reports(
        &scanned.snapshot,
        &scanned.objects,
        ReportApi::WgPolicy,
        1_700_000_000,
    )
    .collect::<Vec<_>>();
    let kinds: Vec<(&str, &str, &str)> = wg
        .iter()
        .map(|r| {
            (
                r["apiVersion"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
                r["metadata"]["namespace"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("wgpolicyk8s.io/v1alpha2", "PolicyReport", "dev"),
            ("wgpolicyk8s.io/v1alpha2", "PolicyReport", "shop"),
            ("wgpolicyk8s.io/v1alpha2", "ClusterPolicyReport", ""),
        ]
    );
    let shop = &wg[1];
    assert_eq!(shop["metadata"]["name"], "celgate-scan");
    assert_eq!(
        shop["summary"],
        json!({"pass": 5, "fail": 1, "warn": 0, "error": 0, "skip": 0})
    );
    assert_eq!(
        shop["results"][0],
        json!({
            "source": "celgate",
            "policy": "owner",
            "rule": "owner-prod/validations[0]",
            "severity": "high",
            "timestamp": {"seconds": 1_700_000_000, "nanos": 0},
            "result": "fail",
            "scored": true,
            "resources": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "no-owner", "namespace": "shop", "uid": "cm-1"}],
            "message": "an owner label is required",
            "properties": {"binding": "owner-prod", "validationIndex": "0", "validationActions": "Deny"}
        })
    );
    assert_eq!(shop["results"][1]["result"], "pass");
    assert_eq!(shop["results"][1]["resources"][0]["name"], "owned");
    assert!(shop["results"][1].get("severity").is_none());
    let cluster = &wg[2];
    assert!(cluster["metadata"].get("namespace").is_none());
    assert_eq!(
        cluster["results"][0]["severity"], "medium",
        "reason Invalid"
    );
    assert_eq!(
        cluster["results"][0]["resources"][0],
        json!({"apiVersion": "v1", "kind": "Namespace", "name": "shop", "uid": "ns-1"})
    );
    let open = reports(
        &scanned.snapshot,
        &scanned.objects,
        ReportApi::OpenReports,
        1,
    )
    .collect::<Vec<_>>();
    let kinds: Vec<(&str, &str, &str)> = open
        .iter()
        .map(|r| {
            (
                r["apiVersion"].as_str().unwrap(),
                r["kind"].as_str().unwrap(),
                r["source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("openreports.io/v1alpha1", "Report", "celgate"),
            ("openreports.io/v1alpha1", "Report", "celgate"),
            ("openreports.io/v1alpha1", "ClusterReport", "celgate"),
        ]
    );
    assert_eq!(open[1]["results"], {
        let mut r = shop["results"].clone();
        for x in r.as_array_mut().unwrap() {
            x["timestamp"]["seconds"] = json!(1);
        }
        r
    });
}

#[test]
fn skipped_and_unparameterised_bindings_are_skips() {
    let policies = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions:
  - {name: not-skipped, expression: "object.metadata.name != 'skipped'"}
  validations:
  - expression: "true"
  - expression: "true"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: p}
spec:
  policyName: p
  validationActions: [Deny]
  paramRef: {name: limits, parameterNotFoundAction: Allow}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: a}
"#;
    let objects = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: skipped, namespace: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: evaluated, namespace: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: no-param, namespace: b}
"#;
    let dir = scan_dirs("skips", policies, objects);
    let scanned = celgate::app::scan::scan_folder(
        &dir.join("policies"),
        &dir.join("objects"),
        celgate::cel::NEWEST_MINOR,
        celgate::source::read::DEFAULT_MAX_FILE_BYTES,
        Default::default(),
    )
    .unwrap();
    let results: Vec<Vec<(Option<usize>, &str)>> = scanned
        .objects
        .iter()
        .map(|o| {
            o.results
                .iter()
                .map(|r| (r.validation, r.result.label()))
                .collect()
        })
        .collect();
    assert_eq!(
        results,
        vec![
            vec![(Some(0), "skip"), (Some(1), "skip")],
            vec![(Some(0), "pass"), (Some(1), "pass")],
            vec![(Some(0), "skip"), (Some(1), "skip")],
        ]
    );
    assert!(!scanned.denied());
}
