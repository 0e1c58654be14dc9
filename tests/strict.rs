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

