//! `celgate crd check` and `celgate crd validate` as a user runs them: CRDs found in a file or
//! a folder, custom resources from multi-document files matched to the CRD serving their
//! group, version and kind, updates of the objects of --old, the API server's text per
//! object or one JSON answer per line, and the exit codes (0 all accepted, 1 one refused, 2
//! unusable input).

use std::path::Path;

use common::cli::{celgate_in, Ran};
use common::{repo, temp_dir};

mod common;

/// Runs celgate in the repository with `stdin`.
fn celgate(args: &[&str], stdin: &str) -> Ran {
    celgate_in(args, &repo(), stdin)
}

fn json_lines(out: &str) -> Vec<serde_json::Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const REPORTS: &str = "Database.example.com \"reports\" is invalid: [spec.minReplicas: Invalid value: \"object\": minReplicas must not exceed maxReplicas, spec.users[0]: Invalid value: \"object\": user bob may not be admin: only dba- users may]";

#[test]
fn validate_answers_each_custom_resource_of_the_example() {
    let (code, out, err) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "examples/crds/valid.yaml",
        ],
        "",
    );
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert_eq!(
        out,
        "Database.example.com \"orders\": allowed\nDatabase.example.com \"sessions\": allowed\n"
    );

    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds/crd.yaml",
            "examples/crds/invalid.yaml",
            "examples/crds/valid.yaml",
        ],
        "",
    );
    assert_eq!(code, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(lines[0], REPORTS);
    assert!(lines[1].starts_with(
        "Database.example.com \"cache\" is invalid: [spec.engine: Unsupported value: \"redis\": supported values: \"postgres\", \"mysql\", <nil>: Invalid value: \"null\": some validation rules were not checked"
    ));
    assert_eq!(lines[2], "Database.example.com \"orders\": allowed");
}

#[test]
fn validate_json_is_one_api_server_answer_per_line() {
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "-o",
            "json",
            "examples/crds/invalid.yaml",
            "examples/crds/valid.yaml",
        ],
        "",
    );
    assert_eq!(code, 1);
    let answers = json_lines(&out);
    assert_eq!(answers.len(), 4);
    assert_eq!(
        answers[0],
        serde_json::json!({
            "allowed": false,
            "code": 422,
            "reason": "Invalid",
            "message": REPORTS,
            "causes": [
                {"type": "FieldValueInvalid", "field": "spec.minReplicas",
                 "message": "Invalid value: \"object\": minReplicas must not exceed maxReplicas"},
                {"type": "FieldValueInvalid", "field": "spec.users[0]",
                 "message": "Invalid value: \"object\": user bob may not be admin: only dba- users may"},
            ],
        })
    );
    assert_eq!(answers[1]["causes"][0]["type"], "FieldValueNotSupported");
    assert_eq!(answers[2], serde_json::json!({"allowed": true}));
    assert_eq!(answers[3], serde_json::json!({"allowed": true}));
}

#[test]
fn validate_updates_the_object_of_the_same_name_in_old() {
    // orders is in --old: an update, refused by the transition rule; an object that is not
    // in --old is a create, where the transition rule does not run.
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "--old",
            "examples/crds/valid.yaml",
            "examples/crds/update.yaml",
        ],
        "",
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Database.example.com \"orders\" is invalid: spec.engine: Invalid value: \"string\": engine is immutable\n"
    );
    let renamed = std::fs::read_to_string(repo().join("examples/crds/update.yaml"))
        .unwrap()
        .replace("name: orders", "name: orders2");
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "--old",
            "examples/crds/valid.yaml",
            "-",
        ],
        &renamed,
    );
    assert_eq!(
        (code, out.as_str()),
        (0, "Database.example.com \"orders2\": allowed\n")
    );
    // Another namespace is another object.
    let other_ns = std::fs::read_to_string(repo().join("examples/crds/update.yaml"))
        .unwrap()
        .replace("namespace: shop", "namespace: other");
    let (code, _, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "--old",
            "examples/crds/valid.yaml",
            "-",
        ],
        &other_ns,
    );
    assert_eq!(code, 0);
}

const WIDGET_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.g.example.com}
spec:
  group: g.example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {n: {type: integer}}
            x-kubernetes-validations: [{rule: "self.n > 0"}]
  - name: v2
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties: {n: {type: integer}}
            x-kubernetes-validations: [{rule: "self.n < 10"}]
          status:
            type: object
            properties: {phase: {type: string, enum: [Ready]}}
  - name: v3
    served: false
    storage: false
    schema:
      openAPIV3Schema: {type: object}
"#;

#[test]
fn validate_uses_the_schema_of_the_version_the_object_names() {
    let dir = temp_dir("versions");
    // Found recursively in a folder among other documents.
    write(
        &dir,
        "crds/nested/widgets.yaml",
        &format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: x}}\n---{WIDGET_CRD}"),
    );
    let crds = dir.join("crds");
    let objects = "
apiVersion: g.example.com/v1
kind: Widget
metadata: {name: a}
spec: {n: 20}
---
apiVersion: g.example.com/v2
kind: Widget
metadata: {name: b}
spec: {n: 20}
---
apiVersion: g.example.com/v3
kind: Widget
metadata: {name: c}
---
apiVersion: g.example.com/v1
kind: Gadget
metadata: {name: d}
";
    let (code, out, err) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            crds.to_str().unwrap(),
            "-o",
            "json",
            "-",
        ],
        objects,
    );
    assert_eq!(code, 1, "{err}");
    let answers = json_lines(&out);
    assert_eq!(answers[0], serde_json::json!({"allowed": true}));
    assert_eq!(
        answers[1]["message"],
        "Widget.g.example.com \"b\" is invalid: spec: Invalid value: \"object\": failed rule: self.n < 10"
    );
    // v3 is not served, Gadget has no CRD: the API server has no such resource.
    for (i, kind, version) in [
        (2, "Widget", "g.example.com/v3"),
        (3, "Gadget", "g.example.com/v1"),
    ] {
        assert_eq!(
            answers[i],
            serde_json::json!({
                "allowed": false,
                "code": 404,
                "reason": "NotFound",
                "message": format!("no matches for kind \"{kind}\" in version \"{version}\""),
            })
        );
    }
}

#[test]
fn validate_status_subresource() {
    let dir = temp_dir("status");
    let crd = write(&dir, "crd.yaml", WIDGET_CRD);
    let old = write(
        &dir,
        "old.yaml",
        "apiVersion: g.example.com/v2\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {n: 5}\n",
    );
    // No namespace: kubectl's default namespace, the stored object's.
    let sent = "apiVersion: g.example.com/v2\nkind: Widget\nmetadata: {name: w}\nspec: {n: 50}\nstatus: {phase: Broken}\n";
    // A /status update takes only the status: the spec rule is not broken, the enum is.
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            &crd,
            "--old",
            &old,
            "--subresource",
            "status",
            "-",
        ],
        sent,
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Widget.g.example.com \"w\" is invalid: [status.phase: Unsupported value: \"Broken\": supported values: \"Ready\", <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]\n"
    );
    // The main resource: the status sent is dropped, the spec rule fails.
    let (code, out, _) = celgate(
        &["crd", "validate", "--crds", &crd, "--old", &old, "-"],
        sent,
    );
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Widget.g.example.com \"w\" is invalid: spec: Invalid value: \"object\": failed rule: self.n < 10\n"
    );
    // A status update of an object that is not stored, or of a version without /status.
    let missing = sent.replace("name: w", "name: z");
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            &crd,
            "--old",
            &old,
            "--subresource",
            "status",
            "-o",
            "json",
            "-",
        ],
        &format!("{missing}---\n{}", sent.replace("/v2", "/v1")),
    );
    assert_eq!(code, 1);
    let answers = json_lines(&out);
    assert_eq!(answers[0]["code"], 404);
    assert_eq!(
        answers[0]["message"],
        "widgets.g.example.com \"z\" not found"
    );
    assert_eq!(
        answers[1]["message"],
        "the server could not find the requested resource"
    );
    // --subresource needs --old.
    let (code, _, err) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            &crd,
            "--subresource",
            "status",
            "-",
        ],
        sent,
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn validate_keeps_the_single_file_flags() {
    let dir = temp_dir("legacy");
    let crd = write(&dir, "crd.yaml", WIDGET_CRD);
    let obj = write(
        &dir,
        "obj.json",
        r#"{"apiVersion": "g.example.com/v1", "kind": "Widget", "metadata": {"name": "t1"}, "spec": {"n": 0}}"#,
    );
    let (code, out, _) = celgate(&["crd", "validate", "--crd", &crd, "--object", &obj], "");
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Widget.g.example.com \"t1\" is invalid: spec: Invalid value: \"object\": failed rule: self.n > 0\n"
    );
    // --status: a /status update (of a version with the subresource).
    let ok = write(
        &dir,
        "ok.json",
        &std::fs::read_to_string(&obj)
            .unwrap()
            .replace("0}", "1}")
            .replace("/v1", "/v2"),
    );
    let (code, out, _) = celgate(
        &[
            "crd", "validate", "--crd", &crd, "--object", &ok, "--old", &obj, "--status",
        ],
        "",
    );
    assert_eq!(
        (code, out.as_str()),
        (0, "Widget.g.example.com \"t1\": allowed\n")
    );
}

#[test]
fn validate_refuses_unusable_input() {
    let dir = temp_dir("unusable");
    let crd = write(&dir, "crd.yaml", WIDGET_CRD);
    let obj = "apiVersion: g.example.com/v1\nkind: Widget\nmetadata: {name: t}\nspec: {n: 1}\n";
    // Two different CRDs serving one kind and version.
    let twin = write(&dir, "crds/a.yaml", WIDGET_CRD);
    write(
        &dir,
        "crds/b.yaml",
        &WIDGET_CRD.replace("widgets.g.example.com", "other.g.example.com"),
    );
    let (code, _, err) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            dir.join("crds").to_str().unwrap(),
            "-",
        ],
        obj,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("both serve kind \"Widget\" in g.example.com/v1"),
        "{err}"
    );
    // The same CRD twice is fine.
    std::fs::copy(&twin, dir.join("crds/b.yaml")).unwrap();
    let (code, _, err) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            dir.join("crds").to_str().unwrap(),
            "-",
        ],
        obj,
    );
    assert_eq!(code, 0, "{err}");
    // No CRD, no object, a stored object given twice, malformed YAML.
    let none = write(&dir, "none.yaml", obj);
    for (args, input, expected) in [
        (
            vec!["--crds", none.as_str(), "-"],
            obj.to_string(),
            "no CustomResourceDefinition",
        ),
        (
            vec!["--crds", crd.as_str(), "-"],
            String::new(),
            "no custom resource",
        ),
        (
            vec![
                "--crds",
                crd.as_str(),
                "--old",
                none.as_str(),
                "--old",
                none.as_str(),
                "-",
            ],
            obj.to_string(),
            "is given twice",
        ),
        (
            vec!["--crds", crd.as_str(), "-"],
            "a: [".to_string(),
            "YAML",
        ),
    ] {
        let mut all = vec!["crd", "validate"];
        all.extend(args);
        let (code, out, err) = celgate(&all, &input);
        assert_eq!(code, 2, "{all:?}: {out}");
        assert!(err.contains(expected), "{all:?}: {err}");
    }
}

#[test]
fn validate_reports_a_crd_the_api_server_would_refuse() {
    let dir = temp_dir("refused");
    let crd = write(
        &dir,
        "crd.yaml",
        &WIDGET_CRD.replace("self.n > 0", "self.m > 0"),
    );
    let (code, out, _) = celgate(
        &["crd", "validate", "--crds", &crd, "-"],
        "apiVersion: g.example.com/v1\nkind: Widget\nmetadata: {name: t}\n",
    );
    assert_eq!(code, 1);
    assert!(out.starts_with("no matches for kind \"Widget\" in version \"g.example.com/v1\": the CustomResourceDefinition would be refused: CustomResourceDefinition.apiextensions.k8s.io \"widgets.g.example.com\" is invalid: "), "{out}");
    assert!(out.contains("undefined field 'm'"), "{out}");
}

#[test]
fn check_answers_each_crd_of_multi_document_files() {
    let dir = temp_dir("check");
    let bad = WIDGET_CRD
        .replace("widgets.g.example.com", "bads.g.example.com")
        .replace("self.n > 0", "self.m > 0");
    let file = write(&dir, "crds.yaml", &format!("{WIDGET_CRD}---\n{bad}"));
    let (code, out, _) = celgate(&["crd", "check", &file, "examples/crds/crd.yaml"], "");
    assert_eq!(code, 1);
    // The compile error's message has the API server's three lines (the caret).
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert_eq!(
        lines[0],
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.g.example.com\": accepted"
    );
    assert!(lines[1].starts_with(
        "CustomResourceDefinition.apiextensions.k8s.io \"bads.g.example.com\" is invalid: "
    ));
    assert!(lines[1].ends_with("compilation failed: ERROR: <input>:1:5: undefined field 'm'"));
    assert_eq!(
        lines[4],
        "CustomResourceDefinition.apiextensions.k8s.io \"databases.example.com\": accepted"
    );
    let (code, out, _) = celgate(&["crd", "check", "-o", "json", &file], "");
    assert_eq!(code, 1);
    let answers = json_lines(&out);
    assert_eq!(answers[0], serde_json::json!({"allowed": true}));
    assert_eq!(answers[1]["code"], 422);
    assert_eq!(answers[1]["reason"], "Invalid");
    assert_eq!(answers[1]["causes"][0]["type"], "FieldValueInvalid");
    // The single-file flag still works; no CRD at all is unusable input.
    let (code, out, _) = celgate(&["crd", "check", "--crd", "examples/crds/crd.yaml"], "");
    assert_eq!(
        (code, out.as_str()),
        (
            0,
            "CustomResourceDefinition.apiextensions.k8s.io \"databases.example.com\": accepted\n"
        )
    );
    let (code, _, err) = celgate(&["crd", "check", "examples/crds/valid.yaml"], "");
    assert_eq!(code, 2);
    assert!(err.contains("no CustomResourceDefinition"), "{err}");
}

#[test]
fn check_old_is_matched_by_crd_name() {
    // A rule over the per-rule cost limit: refused on create, allowed when the stored CRD
    // of the same name has the same schema; a stored CRD of another name does not count.
    let dir = temp_dir("check-old");
    let costly = WIDGET_CRD
        .replace(
            "properties: {n: {type: integer}}\n            x-kubernetes-validations: [{rule: \"self.n > 0\"}]",
            "properties: {n: {type: integer}, l: {type: array, items: {type: string}}}\n            x-kubernetes-validations: [{rule: \"self.l.all(x, x.matches('^a+$'))\"}]",
        );
    assert_ne!(costly, WIDGET_CRD);
    let file = write(&dir, "crd.yaml", &costly);
    let other = write(
        &dir,
        "other.yaml",
        &costly.replace("widgets.g.example.com", "x.g.example.com"),
    );
    let (_, created, _) = celgate(&["crd", "check", &file], "");
    assert!(
        created.contains("estimated rule cost exceeds budget"),
        "{created}"
    );
    let (_, replaced, _) = celgate(
        &["crd", "check", "--old", &other, "--old", &file, &file],
        "",
    );
    assert!(
        !replaced.contains("estimated rule cost exceeds budget"),
        "{replaced}"
    );
    let (_, unmatched, _) = celgate(&["crd", "check", "--old", &other, &file], "");
    assert!(
        unmatched.contains("estimated rule cost exceeds budget"),
        "{unmatched}"
    );
}

#[test]
fn test_suite_expects_crd_validation() {
    let (code, out, err) = celgate(&["test", "examples/crds"], "");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("5 passed, 0 failed\n"), "{out}");

    // Unmet expectations are reported field by field; the policies' answer is checked apart
    // (here a policy that refuses every Database, which CRD validation admits).
    let dir = temp_dir("suite");
    std::fs::copy(repo().join("examples/crds/crd.yaml"), dir.join("crd.yaml")).unwrap();
    write(
        &dir,
        "policy.yaml",
        r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-databases}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: ["*"], operations: [CREATE], resources: [databases]}
  validations: [{expression: "false", message: no databases}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-databases}
spec: {policyName: no-databases, validationActions: [Deny]}
"#,
    );
    let suite = write(
        &dir,
        "s.celgate-test.yaml",
        r#"
apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml]
resources: [crd.yaml]
cases:
- name: both answers
  object: &db
    apiVersion: example.com/v1
    kind: Database
    metadata: {name: a, namespace: shop}
    spec: {engine: postgres, maxReplicas: 3}
  expect:
    allowed: false
    message: 'ValidatingAdmissionPolicy ''no-databases'' with binding ''no-databases'' denied request: no databases'
    crd: {allowed: true}
- name: wrong crd expectations
  object: *db
  expect:
    crd: {allowed: false, code: 422, reason: Invalid, messageMatches: immutable, causes: []}
- name: an unknown version
  object:
    apiVersion: example.com/v2
    kind: Database
    metadata: {name: a, namespace: shop}
  expect:
    crd: {code: 404, message: 'no matches for kind "Database" in version "example.com/v2"'}
- name: a delete
  operation: DELETE
  object: *db
  expect:
    crd: {allowed: true}
- name: an update without oldObject
  operation: UPDATE
  object: *db
  expect:
    crd: {allowed: true}
"#,
    );
    let (code, out, err) = celgate(&["test", &suite], "");
    assert_eq!(code, 1, "{err}");
    let expected = [
        "✓ ",
        "✗ ",
        "    crd.allowed: expected false, got true",
        "    crd.code: expected 422, got 200",
        "    crd.reason: expected \"Invalid\", got \"\"",
        "    crd.messageMatches: \"immutable\" does not match \"\"",
        "✓ ",
        "✗ ",
        "    expect.crd: CRD validation runs on CREATE and UPDATE, not DELETE",
        "✗ ",
    ];
    let lines: Vec<&str> = out.lines().collect();
    for (line, want) in lines.iter().zip(expected) {
        assert!(
            line.starts_with(want),
            "{line:?} does not start with {want:?}\n{out}"
        );
    }
    assert!(
        out.contains("expect.crd: an UPDATE needs oldObject"),
        "{out}"
    );
    assert!(out.ends_with("2 passed, 3 failed\n"), "{out}");

    // A wrong cause list shows both.
    let causes = suite_with_case(
        &dir,
        "  object: {apiVersion: example.com/v1, kind: Database, metadata: {name: b}, spec: {engine: redis, maxReplicas: 1}}\n  expect:\n    crd:\n      causes: [{type: FieldValueInvalid, field: spec.engine, message: nope}]\n",
    );
    let (code, out, _) = celgate(&["test", &causes], "");
    assert_eq!(code, 1);
    assert!(out.contains("crd.causes: expected [FieldValueInvalid spec.engine: nope], got [FieldValueNotSupported spec.engine: Unsupported value: \"redis\": supported values: \"postgres\", \"mysql\"; FieldValueInvalid <nil>: "), "{out}");
    // A misspelt field of expect.crd makes the suite invalid.
    let typo = suite_with_case(
        &dir,
        "  object: {apiVersion: v1, kind: Pod}\n  expect: {crd: {allowd: true}}\n",
    );
    let (code, out, _) = celgate(&["test", &typo], "");
    assert_eq!(code, 2);
    assert!(
        out.contains("cases[0].expect.crd: unknown field `allowd`"),
        "{out}"
    );
}

fn suite_with_case(dir: &Path, case: &str) -> String {
    write(
        dir,
        "one.celgate-test.yaml",
        &format!("apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\nresources: [crd.yaml]\ncases:\n- name: one\n{case}"),
    )
}

#[test]
fn check_compiles_every_version() {
    // Versions with different schemas: each is checked, its errors under its own path, and
    // a CRD refused for one version serves no custom resource at all.
    let dir = temp_dir("versions-check");
    let broken = write(
        &dir,
        "crd.yaml",
        &WIDGET_CRD.replace("self.n < 10", "self.m < 10"),
    );
    let (code, out, _) = celgate(&["crd", "check", &broken], "");
    assert_eq!(code, 1);
    assert!(
        out.starts_with("CustomResourceDefinition.apiextensions.k8s.io \"widgets.g.example.com\" is invalid: spec.versions[1].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "),
        "{out}"
    );
    let (code, out, _) = celgate(
        &["crd", "validate", "--crds", &broken, "-"],
        "apiVersion: g.example.com/v1\nkind: Widget\nmetadata: {name: t}\nspec: {n: 1}\n",
    );
    assert_eq!(code, 1);
    assert!(
        out.contains("the CustomResourceDefinition would be refused"),
        "{out}"
    );
    // The costs table names each version's rules by their path.
    let (_, out, _) = celgate(
        &[
            "crd",
            "check",
            "--costs",
            &write(&dir, "ok.yaml", WIDGET_CRD),
        ],
        "",
    );
    assert!(out.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule  self.n > 0"), "{out}");
    assert!(out.contains("spec.versions[1].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule  self.n < 10"), "{out}");
    // Versions that share one schema: reported once, under spec.validation.
    let shared = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.g.example.com}
spec:
  group: g.example.com
  names: {plural: things, kind: Thing}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-validations: [{rule: "self.nope"}]}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-validations: [{rule: "self.nope"}]}}
"#;
    let (code, out, _) = celgate(&["crd", "check", "-o", "json", "-"], shared);
    assert_eq!(code, 1);
    let answer = &json_lines(&out)[0];
    let causes = answer["causes"].as_array().unwrap();
    assert_eq!(causes.len(), 1, "{out}");
    assert_eq!(
        causes[0]["field"],
        "spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule"
    );
}

#[test]
fn validate_answers_a_document_without_kind_as_a_bad_request() {
    let (code, out, _) = celgate(
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "-o",
            "json",
            "-",
        ],
        "metadata: {name: x}\nspec: {}\n",
    );
    assert_eq!(code, 1);
    assert_eq!(
        json_lines(&out),
        [serde_json::json!({
            "allowed": false,
            "code": 400,
            "reason": "BadRequest",
            "message": "the object \"x\" has no apiVersion or no kind",
        })]
    );
}
