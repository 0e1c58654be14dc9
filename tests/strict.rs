//! Strict like the API server, through the real binary: every loader refuses unknown and
//! duplicate fields in `kubectl apply`'s words (`strict decoding error: unknown field
//! "spec.x"`, sigs.k8s.io/json's paths), `--field-validation warn|ignore` relaxes that, and
//! `celgate lint` reports what `eval`/`test` refuse (creation-time checks) and what only the
//! set of objects shows (binding -> policy, paramRef -> param kind and object).

use std::path::{Path, PathBuf};

mod common;

use common::cli::{celgate_in, celgate_no_input};

const POD_RULES: &str = r#"{resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}"#;

fn policy(extra_spec: &str) -> String {
    format!(
        "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {{name: p}}\nspec:\n  matchConstraints: {POD_RULES}\n{extra_spec}"
    )
}

fn binding(spec: &str) -> String {
    format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: b}}\nspec: {spec}\n")
}

const VALIDATIONS: &str = "  validations:\n  - expression: \"true\"\n";
const BIND_P: &str = "{policyName: p, validationActions: [Deny]}";

/// A folder holding `files` (name, text).
fn folder(name: &str, files: &[(&str, String)]) -> PathBuf {
    let dir = common::temp_dir(name);
    for (f, text) in files {
        std::fs::write(dir.join(f), text).unwrap();
    }
    dir
}

fn lint(dir: &Path, extra: &[&str]) -> (i32, String, String) {
    let mut args = vec!["lint", "--policies", dir.to_str().unwrap()];
    args.extend(extra);
    celgate_no_input(&args, dir)
}

const TYPO: &str = "  failurPolicy: Fail\n  failurePolicy: Fail\n  failurePolicy: Ignore\n  validations:\n  - expression: \"true\"\n    messageExpresion: \"'x'\"\n";
const TYPO_ERROR: &str = r#"ValidatingAdmissionPolicy in version "v1" cannot be handled as a ValidatingAdmissionPolicy: strict decoding error: unknown field "spec.failurPolicy", duplicate field "spec.failurePolicy", unknown field "spec.validations[0].messageExpresion""#;

#[test]
fn lint_refuses_unknown_and_duplicate_fields_with_their_paths() {
    let dir = folder(
        "strict-lint-typo",
        &[(
            "p.yaml",
            format!("{}---\n{}", policy(TYPO), binding(BIND_P)),
        )],
    );
    let (code, out, err) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains(TYPO_ERROR), "{out}");
    assert!(
        out.contains("1 error and 0 warnings in the objects"),
        "{out}"
    );

    // warn: each field a warning, which fails only with --fail-on warning.
    let (code, out, _) = lint(&dir, &["--field-validation", "warn"]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(r#"warning: unknown field "spec.failurPolicy""#),
        "{out}"
    );
    assert!(
        out.contains(r#"warning: duplicate field "spec.failurePolicy""#),
        "{out}"
    );
    let (code, _, _) = lint(
        &dir,
        &["--field-validation", "warn", "--fail-on", "warning"],
    );
    assert_eq!(code, 1);
    let (code, out, _) = lint(
        &dir,
        &["--field-validation", "ignore", "--fail-on", "warning"],
    );
    assert_eq!(code, 0, "{out}");
}

#[test]
fn eval_refuses_unknown_fields_unless_told_otherwise() {
    let dir = folder(
        "strict-eval-typo",
        &[(
            "p.yaml",
            format!("{}---\n{}", policy(TYPO), binding(BIND_P)),
        )],
    );
    let pod =
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x", "namespace": "default"}}"#;
    let p = dir.to_str().unwrap();
    let (code, out, err) = celgate_in(&["eval", "--policies", p, "--request", "-"], &dir, pod);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(TYPO_ERROR), "{err}");
    assert!(err.contains("p.yaml (document 1)"), "{err}");
    let (code, out, err) = celgate_in(
        &[
            "eval",
            "--policies",
            p,
            "--request",
            "-",
            "--field-validation",
            "warn",
        ],
        &dir,
        pod,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(r#"warning: "#) && err.contains(r#"unknown field "spec.failurPolicy""#),
        "{err}"
    );
    assert!(
        out.contains("\"allowed\": true") || out.contains("\"allowed\":true"),
        "{out}"
    );
}

#[test]
fn json_files_and_lists_are_checked_too() {
    let list = r#"{"apiVersion": "v1", "kind": "List", "items": [
      {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, "dta": {}},
      {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
       "metadata": {"name": "b", "name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}}]}"#;
    let dir = folder(
        "strict-json-list",
        &[
            ("p.yaml", policy(VALIDATIONS)),
            ("list.json", list.to_string()),
        ],
    );
    let (code, out, _) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(r#"ConfigMap c: error: ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta""#),
        "{out}"
    );
    assert!(
        out.contains(r#"strict decoding error: duplicate field "metadata.name""#),
        "{out}"
    );
}

#[test]
fn lint_runs_the_creation_time_checks_eval_runs() {
    let spec = "  validations:\n  - expression: \"1 + 1\"\n";
    let p = policy(spec).replace("operations: [CREATE]", "operations: [PATCH]");
    let dir = folder(
        "strict-lint-creation",
        &[(
            "p.yaml",
            format!(
                "{p}---\n{}",
                binding("{policyName: p, validationActions: [deny]}")
            ),
        )],
    );
    let (code, out, err) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("ValidatingAdmissionPolicy p: error: spec.matchConstraints.resourceRules[0].operations[0]: Unsupported value: \"PATCH\""), "{out}");
    assert!(out.contains("ValidatingAdmissionPolicy p: error: spec.validations[0].expression: Invalid value: \"1 + 1\""), "{out}");
    assert!(out.contains("ValidatingAdmissionPolicyBinding b: error: spec.validationActions[0]: Unsupported value: \"deny\""), "{out}");
}

#[test]
fn lint_checks_what_bindings_name() {
    // A binding to a policy that is not there.
    let dir = folder(
        "strict-lint-no-policy",
        &[(
            "b.yaml",
            binding("{policyName: nope, validationActions: [Deny]}"),
        )],
    );
    let (code, out, _) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            r#"ValidatingAdmissionPolicyBinding b: error: spec.policyName: policy "nope" not found"#
        ),
        "{out}"
    );

    // A param kind neither built in nor in the files.
    let with_params = |kind: &str| policy(&format!("  paramKind: {kind}\n{VALIDATIONS}"));
    let dir = folder(
        "strict-lint-no-param-kind",
        &[("p.yaml", format!("{}---\n{}", with_params("{apiVersion: example.com/v1, kind: Limits}"),
            binding("{policyName: p, validationActions: [Deny], paramRef: {name: l, parameterNotFoundAction: Deny}}")))],
    );
    let (code, out, _) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("paramKind example.com/v1, Kind=Limits is not a built-in kind"),
        "{out}"
    );

    // A param object that is not there: an error under Deny, a warning under Allow.
    for (action, severity, code_default) in [("Deny", "error", 1), ("Allow", "warning", 0)] {
        let dir = folder(
            &format!("strict-lint-no-param-{action}"),
            &[("p.yaml", format!("{}---\n{}", with_params("{apiVersion: v1, kind: ConfigMap}"),
                binding(&format!("{{policyName: p, validationActions: [Deny], paramRef: {{name: limits, namespace: default, parameterNotFoundAction: {action}}}}}"))))],
        );
        let (code, out, _) = lint(&dir, &[]);
        assert_eq!(code, code_default, "{out}");
        assert!(out.contains(&format!("b: {severity}: spec.paramRef.name: no ConfigMap \"limits\" in namespace \"default\"")), "{out}");
        let (code, _, _) = lint(&dir, &["--fail-on", "warning"]);
        assert_eq!(code, 1);
        // With the param in the files, nothing is said.
        std::fs::write(
            dir.join("cm.yaml"),
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: limits, namespace: default}\n",
        )
        .unwrap();
        let (code, out, _) = lint(&dir, &["--fail-on", "warning"]);
        assert_eq!(code, 0, "{out}");
        assert!(!out.contains("in the objects"), "{out}");
    }
}

#[test]
fn test_and_scan_refuse_unknown_fields_unless_told_otherwise() {
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [p.yaml]\ncases:\n- name: any pod\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: default}}\n  expect: {allowed: true}\n";
    let dir = folder(
        "strict-test-scan",
        &[
            (
                "p.yaml",
                format!("{}---\n{}", policy(TYPO), binding(BIND_P)),
            ),
            ("s.celgate-test.yaml", suite.to_string()),
        ],
    );
    let p = dir.to_str().unwrap();
    // As for a policy the API server refuses: its cases fail with the server's message.
    let (code, out, err) = celgate_no_input(&["test", p], &dir);
    assert_eq!(code, 1, "{out}{err}");
    assert!(format!("{out}{err}").contains(TYPO_ERROR), "{out}{err}");
    let (code, out, err) = celgate_no_input(&["test", p, "--field-validation", "warn"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains(r#"unknown field "spec.failurPolicy""#),
        "{err}"
    );

    let objects = common::temp_dir("strict-scan-objects");
    std::fs::write(
        objects.join("pod.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\n",
    )
    .unwrap();
    let o = objects.to_str().unwrap();
    let (code, out, err) = celgate_no_input(&["scan", "--policies", p, "--objects", o], &dir);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains(TYPO_ERROR), "{err}");
    let (code, out, err) = celgate_no_input(
        &[
            "scan",
            "--policies",
            p,
            "--objects",
            o,
            "--field-validation",
            "ignore",
        ],
        &dir,
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(!err.contains("unknown field"), "{err}");
}

#[test]
fn lint_refuses_validation_actions_the_api_server_refuses() {
    let dir = folder(
        "strict-lint-actions",
        &[(
            "p.yaml",
            format!(
                "{}---\n{}",
                policy(VALIDATIONS),
                binding("{policyName: p, validationActions: [Deny, Warn, Deny]}")
            ),
        )],
    );
    let (code, out, _) = lint(&dir, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("b: error: spec.validationActions[2]: Duplicate value: \"Deny\""),
        "{out}"
    );
    assert!(
        out.contains(
            "b: error: spec.validationActions: Invalid value: \"Deny,Warn,Deny\": must not contain both Deny and Warn"
        ),
        "{out}"
    );
}
