//! `celgate test`: the bundled example suites pass, the reports (table, JUnit, JSON, TAP) are
//! as documented, a failing case fails the run, invalid suite files are refused naming the
//! file, line and field, and reviews are built as the API server builds them.

use std::path::{Path, PathBuf};

use celgate::testing::report::{render, Format};
use celgate::testing::{run, Options, Report};
use common::cli::celgate_no_input as celgate;
use common::temp_dir;

mod common;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn options() -> Options {
    Options {
        filter: None,
        version: celgate::cel::NEWEST_MINOR,
        coverage: false,
        min_coverage: None,
        update: false,
        roots: Vec::new(),
        max_file_bytes: celgate::source::read::DEFAULT_MAX_FILE_BYTES,
        allow_empty: false,
        field_validation: Default::default(),
    }
}

/// Times vary from run to run: replaced by `T`.
fn normalise(text: &str) -> String {
    let ms = regex::Regex::new(r"\(\d+\.\d{3}ms\)").unwrap();
    let secs = regex::Regex::new(r#"time="\d+\.\d+""#).unwrap();
    let json = regex::Regex::new(r#""seconds": [0-9.e-]+"#).unwrap();
    let t = ms.replace_all(text, "(T)");
    let t = secs.replace_all(&t, r#"time="T""#);
    json.replace_all(&t, r#""seconds": T"#).into_owned()
}

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: owner.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    message: pods need an owner label
    reason: Forbidden
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: owner-binding}
spec: {policyName: owner.example.com, validationActions: [Deny]}
"#;

/// A suite with a passing, a failing and a skipped case.
const SUITE: &str = r#"apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml]
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: default}}
cases:
- name: labelled pod
  object: {apiVersion: v1, kind: Pod, metadata: {name: a, labels: {owner: me}}}
  expect: {allowed: true, bindings: {owner-binding: pass}}
- name: unlabelled pod <wrongly expected allowed>
  object: {apiVersion: v1, kind: Pod, metadata: {name: b}}
  expect: {allowed: true, code: 200}
- name: later
  skip: true
  object: {apiVersion: v1, kind: Pod, metadata: {name: c}}
"#;

fn mixed_report() -> (PathBuf, Report) {
    let dir = temp_dir("mixed");
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "owner.celgate-test.yaml", SUITE);
    let report = run(std::slice::from_ref(&dir), &options()).unwrap();
    (dir, report)
}

/// The report with the temporary folder replaced by `DIR`.
fn rendered(dir: &Path, report: &Report, format: Format) -> String {
    normalise(&render(report, format)).replace(&dir.display().to_string(), "DIR")
}

const DENIED: &str = "ValidatingAdmissionPolicy 'owner.example.com' with binding 'owner-binding' denied request: pods need an owner label";

#[test]
fn table_report() {
    let (dir, report) = mixed_report();
    let want = format!(
        "✓ DIR/owner.celgate-test.yaml  labelled pod  (T)\n\
         ✗ DIR/owner.celgate-test.yaml  unlabelled pod <wrongly expected allowed>  (T)\n    \
         allowed: expected true, got false ({DENIED})\n    \
         code: expected 200, got 403\n\
         - DIR/owner.celgate-test.yaml  later  (T)\n\
         1 passed, 1 failed, 1 skipped\n"
    );
    assert_eq!(rendered(&dir, &report, Format::Table), want);
    assert_eq!(report.exit_code(), 1, "a failing case fails the run");
}

#[test]
fn junit_report() {
    let (dir, report) = mixed_report();
    let want = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="celgate" tests="3" failures="1" errors="0" skipped="1" time="T">
  <testsuite name="DIR/owner.celgate-test.yaml" tests="3" failures="1" errors="0" skipped="1" time="T">
    <testcase name="labelled pod" classname="DIR/owner.celgate-test.yaml" time="T"/>
    <testcase name="unlabelled pod &lt;wrongly expected allowed&gt;" classname="DIR/owner.celgate-test.yaml" time="T">
      <failure message="allowed: expected true, got false ({d})">allowed: expected true, got false ({d})
code: expected 200, got 403</failure>
    </testcase>
    <testcase name="later" classname="DIR/owner.celgate-test.yaml" time="T">
      <skipped/>
    </testcase>
  </testsuite>
</testsuites>
"#,
        d = DENIED.replace('\'', "&apos;")
    );
    assert_eq!(rendered(&dir, &report, Format::Junit), want);
}

#[test]
fn json_and_tap_reports() {
    let (dir, report) = mixed_report();
    let json: serde_json::Value =
        serde_json::from_str(&rendered(&dir, &report, Format::Json).replace(": T", ": 0")).unwrap();
    let want = serde_json::json!({
        "cases": [
            {"file": "DIR/owner.celgate-test.yaml", "name": "labelled pod", "status": "pass",
             "seconds": 0, "failures": []},
            {"file": "DIR/owner.celgate-test.yaml", "name": "unlabelled pod <wrongly expected allowed>",
             "status": "fail", "seconds": 0, "failures": [
                format!("allowed: expected true, got false ({DENIED})"),
                "code: expected 200, got 403"]},
            {"file": "DIR/owner.celgate-test.yaml", "name": "later", "status": "skip",
             "seconds": 0, "failures": []},
        ],
        "invalidFiles": [],
        "passed": 1, "failed": 1, "skipped": 1,
    });
    assert_eq!(json, want);
    let tap = rendered(&dir, &report, Format::Tap);
    let want = format!(
        "TAP version 13\n1..3\n\
         ok 1 - DIR/owner.celgate-test.yaml: labelled pod\n\
         not ok 2 - DIR/owner.celgate-test.yaml: unlabelled pod <wrongly expected allowed>\n  \
         ---\n  failures:\n  - \"allowed: expected true, got false ({DENIED})\"\n  \
         - \"code: expected 200, got 403\"\n  ...\n\
         ok 3 - DIR/owner.celgate-test.yaml: later # SKIP\n"
    );
    assert_eq!(tap, want);
}

#[test]
fn the_example_suites_pass() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, out, err) = celgate(&["test", "examples/tests"], root);
    assert_eq!(code, 0, "{out}{err}");
    let summary = out.lines().last().unwrap_or("");
    let passed: usize = summary
        .split(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed >= 16 && summary.ends_with(" passed, 0 failed"),
        "{out}"
    );
    // Every validation of the bundled policies is seen failing by some case.
    for message in [
        "privileged containers are not allowed",
        "allowPrivilegeEscalation to false",
        "hostPath volumes are not allowed",
        "images must come from",
        "deployments need a 'team' label",
        "at most 5 replicas outside production",
    ] {
        let suites = std::fs::read_dir(root.join("examples/tests"))
            .unwrap()
            .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
            .collect::<String>();
        assert!(suites.contains(message), "no case expects {message:?}");
    }
}

#[test]
fn exit_codes_and_filter() {
    let dir = temp_dir("exit");
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "owner.celgate-test.yaml", SUITE);
    let (code, out, _) = celgate(&["test"], &dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.ends_with("1 passed, 1 failed, 1 skipped\n"), "{out}");
    let (code, out, _) = celgate(&["test", "--filter", "labelled pod$"], &dir);
    assert_eq!(code, 0, "{out}");
    assert!(out.ends_with("1 passed, 0 failed\n"), "{out}");
    let (code, _, err) = celgate(&["test", "--filter", "("], &dir);
    assert_eq!(code, 2);
    assert!(err.contains("--filter"), "{err}");
    let (code, _, err) = celgate(&["test", "missing"], &dir);
    assert_eq!(code, 2);
    assert!(err.contains("missing: no such file or folder"), "{err}");
    let (code, out, _) = celgate(&["test", "--output", "junit"], &dir);
    assert_eq!(code, 1);
    assert!(out.starts_with("<?xml"), "{out}");
    // A file not named *.celgate-test.yaml is not a suite: nothing runs, which fails the run.
    let other = temp_dir("not-a-suite");
    write(&other, "owner.yaml", SUITE);
    let (code, out, _) = celgate(&["test"], &other);
    assert_eq!((code, out.as_str()), (1, "0 passed, 0 failed\n"));
}

#[test]
fn output_has_the_short_flag_of_the_other_commands() {
    let dir = temp_dir("short-o");
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "owner.celgate-test.yaml", SUITE);
    let (code, out, err) = celgate(&["test", "-o", "tap"], &dir);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.starts_with("TAP version"), "{out}{err}");
}

#[test]
fn a_run_that_tests_nothing_fails_unless_allowed() {
    // No suite under the paths: exit 1, saying what was searched.
    let dir = temp_dir("empty-run");
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    write(&dir.join("policies"), "policy.yaml", POLICY);
    let (code, out, err) = celgate(&["test", "policies"], &dir);
    assert_eq!((code, out.as_str()), (1, "0 passed, 0 failed\n"), "{err}");
    assert_eq!(
        err,
        "celgate: no test ran: no suite found under policies \
         (suites are files named *.celgate-test.yaml or kyverno-test.yaml); \
         --allow-empty accepts a run without tests\n"
    );
    let (code, out, err) = celgate(&["test", "policies", "--allow-empty"], &dir);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (0, "0 passed, 0 failed\n", "")
    );
    // Every case filtered out.
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "owner.celgate-test.yaml", SUITE);
    let (code, _, err) = celgate(&["test", "--filter", "nothing like it"], &dir);
    assert_eq!(code, 1);
    assert_eq!(
        err,
        "celgate: no test ran: 1 suite found under ., no case selected by --filter; \
         --allow-empty accepts a run without tests\n"
    );
    // Every case skipped: nothing was tested either.
    let (code, out, err) = celgate(&["test", "--filter", "later"], &dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.ends_with("0 passed, 0 failed, 1 skipped\n"), "{out}");
    assert_eq!(
        err,
        "celgate: no test ran: 1 suite found under ., every case selected (1) is skipped; \
         --allow-empty accepts a run without tests\n"
    );
    let (code, _, err) = celgate(&["test", "--filter", "later", "--allow-empty"], &dir);
    assert_eq!((code, err.as_str()), (0, ""));
    // The library says the same through the report's exit code.
    let report = run(&[dir.join("policies")], &options()).unwrap();
    assert_eq!(report.exit_code(), 1);
    let report = run(
        &[dir.join("policies")],
        &Options {
            allow_empty: true,
            ..options()
        },
    )
    .unwrap();
    assert_eq!(report.exit_code(), 0);
}

/// The message for an invalid suite, run through the library.
fn invalid(text: &str) -> String {
    let dir = temp_dir("invalid");
    write(&dir, "policy.yaml", POLICY);
    let file = write(&dir, "bad.celgate-test.yaml", text);
    let report = run(&[file], &options()).unwrap();
    assert_eq!(report.exit_code(), 2);
    assert!(report.cases.is_empty());
    report.invalid[0]
        .message
        .replace(&dir.display().to_string(), "DIR")
}

#[test]
fn invalid_suites_name_file_line_and_field() {
    let head = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\ncases:\n- name: one\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a}}\n";
    assert_eq!(
        invalid(&format!("{head}  expect:\n    allowed: maybe\n")),
        "DIR/bad.celgate-test.yaml: cases[0].expect.allowed: invalid type: string \"maybe\", expected a boolean at line 8 column 14"
    );
    let e = invalid(&format!("{head}  expect:\n    alowed: true\n"));
    assert!(
        e.starts_with("DIR/bad.celgate-test.yaml: cases[0].expect: unknown field `alowed`")
            && e.ends_with("at line 8 column 5"),
        "{e}"
    );
    let e = invalid(&format!("{head}  expect:\n    bindings: {{b: passes}}\n"));
    assert!(
        e.contains("cases[0].expect.bindings.b: unknown variant `passes`"),
        "{e}"
    );
    assert_eq!(
        invalid(head),
        "DIR/bad.celgate-test.yaml: cases[0] (\"one\"): expect: a case needs at least one expectation"
    );
    assert_eq!(
        invalid(&format!("{head}  expect: {{}}\n")),
        "DIR/bad.celgate-test.yaml: cases[0] (\"one\"): expect: a case needs at least one expectation"
    );
    let e = invalid(&format!("{head}  expect: {{messageMatches: \"(\"}}\n"));
    assert!(
        e.starts_with("DIR/bad.celgate-test.yaml: cases[0].expect: regex parse error:")
            && e.ends_with("unclosed group at line 7 column 11"),
        "{e}"
    );
    assert_eq!(
        invalid(&format!("{head}  operation: PATCH\n  expect: {{allowed: true}}\n")),
        "DIR/bad.celgate-test.yaml: cases[0].operation: unknown variant `PATCH`, expected one of `CREATE`, `UPDATE`, `DELETE`, `CONNECT` at line 7 column 14"
    );
    assert_eq!(
        invalid(&head.replace("CelgateTest", "Test")),
        "DIR/bad.celgate-test.yaml: kind: expected \"CelgateTest\", got \"Test\""
    );
    let e = invalid(&format!(
        "{}  expect: {{allowed: true}}\n",
        head.replace("[policy.yaml]", "[policy.yaml, absent.yaml]")
    ));
    assert!(
        e.starts_with("DIR/bad.celgate-test.yaml: policies[1]: DIR/absent.yaml: "),
        "{e}"
    );
    assert_eq!(
        invalid(&format!(
            "{head}  userInfo: {{serviceAccount: nobody}}\n  expect: {{allowed: true}}\n"
        )),
        "DIR/bad.celgate-test.yaml: cases[0].userInfo: expected namespace/name, got \"nobody\" at line 7 column 13"
    );
}

/// One case's failures, run through the library.
fn failures(policies: &str, suite: &str) -> Vec<String> {
    let dir = temp_dir("case");
    write(&dir, "policy.yaml", policies);
    let file = write(&dir, "t.celgate-test.yaml", suite);
    let report = run(&[file], &options()).unwrap();
    assert!(report.invalid.is_empty(), "{:?}", report.invalid);
    report.cases.into_iter().flat_map(|c| c.failures).collect()
}

#[test]
fn a_policy_the_api_server_refuses_fails_its_cases() {
    let bad = POLICY.replace(
        "has(object.metadata.labels) && 'owner' in object.metadata.labels",
        "object.metadata.labels.exists(",
    );
    let got = failures(
        &bad,
        "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\ncases:\n- name: x\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  expect: {allowed: false}\n",
    );
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with(
            "invalid ValidatingAdmissionPolicy \"owner.example.com\": spec.validations[0].expression: Invalid value: \"object.metadata.labels.exists(\": compilation failed: ERROR: <input>:1:31: Syntax error"
        ),
        "{got:?}"
    );
    let bad = POLICY.replace("validationActions: [Deny]", "validationActions: []");
    let got = failures(
        &bad,
        "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\ncases:\n- name: x\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  expect: {allowed: false}\n",
    );
    assert!(
        got.len() == 1 && got[0].contains("validationActions: Required value"),
        "{got:?}"
    );
}

/// A policy that denies with every request attribute in its message, to see the review.
const ECHO: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: echo}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["", apps, stable.example.com]
      apiVersions: ["*"]
      operations: ["*"]
      resources: ["*/*"]
  validations:
  - expression: "false"
    # dyn values are converted: Kubernetes refuses a list literal mixing string and dyn.
    messageExpression: >-
      [request.operation, request.resource.group, request.resource.resource,
       request.kind.kind, request.?namespace.orValue('-'), request.?name.orValue('-'),
       request.userInfo.username, request.userInfo.groups.join(','),
       request.?subResource.orValue('-'), string(request.dryRun),
       string(request.?options.?kind.orValue('-')),
       string(object == null ? '-' : object.metadata.name),
       string(object == null ? '-' : object.metadata.?namespace.orValue('-')),
       string(oldObject == null ? '-' : oldObject.metadata.name)].join(' ')
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: echo}
spec: {policyName: echo, validationActions: [Deny]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: crontabs.stable.example.com}
spec:
  group: stable.example.com
  scope: Cluster
  names: {plural: crontabs, kind: CronTab}
  versions: [{name: v1, served: true, storage: true}]
"#;

#[test]
fn reviews_are_built_as_the_api_server_does() {
    let suite = r#"apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml]
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: default}}
- {apiVersion: v1, kind: Namespace, metadata: {name: team}}
cases:
- name: defaults
  object: {apiVersion: v1, kind: Pod, metadata: {name: p}}
  expect: {message: "CREATE  pods Pod default p celgate-test-user system:authenticated - false CreateOptions p default -"}
- name: service account, namespace from the case, generateName
  namespace: team
  userInfo: {serviceAccount: ci/deployer}
  object: {apiVersion: apps/v1, kind: Deployment, metadata: {generateName: web-}}
  expect: {messageMatches: "^CREATE apps deployments Deployment team web-[a-z0-9]{5} system:serviceaccount:ci:deployer system:serviceaccounts,system:serviceaccounts:ci,system:authenticated - false CreateOptions web-[a-z0-9]{5} team -$"}
- name: a DELETE takes the object as the old one
  operation: DELETE
  dryRun: true
  userInfo: {username: alice, groups: [devs]}
  object: {apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team}}
  expect: {message: "DELETE  pods Pod team p alice devs - true DeleteOptions - - p"}
- name: subresource and a cluster-scoped custom resource
  operation: UPDATE
  subResource: status
  object: {apiVersion: stable.example.com/v1, kind: CronTab, metadata: {name: c}}
  oldObject: {apiVersion: stable.example.com/v1, kind: CronTab, metadata: {name: c}}
  expect: {message: "UPDATE stable.example.com crontabs CronTab - c celgate-test-user system:authenticated status false UpdateOptions c - c"}
- name: a namespace is its own request namespace
  object: {apiVersion: v1, kind: Namespace, metadata: {name: fresh}}
  expect: {message: "CREATE  namespaces Namespace fresh fresh celgate-test-user system:authenticated - false CreateOptions fresh - -"}
"#;
    let got = failures(
        ECHO,
        &suite
            .replace(
                "{message: \"",
                "{message: \"ValidatingAdmissionPolicy 'echo' with binding 'echo' denied request: ",
            )
            .replace(
                "{messageMatches: \"^",
                "{messageMatches: \"denied request: ",
            ),
    );
    assert!(got.is_empty(), "{got:#?}");
}

#[test]
fn multi_document_objects_and_unknown_kinds() {
    let dir = temp_dir("multi");
    write(&dir, "policy.yaml", POLICY);
    write(
        &dir,
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b, labels: {owner: x}}\n",
    );
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\nobjects:\n- {apiVersion: v1, kind: Namespace, metadata: {name: default}}\ncases:\n- name: pods\n  object: pods.yaml\n  expect: {allowed: false}\n- name: widget\n  object: {apiVersion: example.com/v1, kind: Widget, metadata: {name: w}}\n  expect: {allowed: true}\n- name: update\n  operation: UPDATE\n  object: pods.yaml\n  expect: {allowed: true}\n";
    let file = write(&dir, "t.celgate-test.yaml", suite);
    let report = run(&[file], &options()).unwrap();
    let summary: Vec<(String, Vec<String>)> = report
        .cases
        .iter()
        .map(|c| (c.name.clone(), c.failures.clone()))
        .collect();
    assert_eq!(summary.len(), 5, "{summary:?}");
    assert_eq!(summary[0], ("pods [1]".to_string(), vec![]));
    assert_eq!(summary[1].0, "pods [2]");
    assert!(summary[1].1[0].starts_with("allowed: expected false, got true"));
    assert_eq!(summary[2].0, "widget");
    assert!(
        summary[2].1[0].contains("unknown kind \"Widget\" of \"example.com/v1\""),
        "{summary:?}"
    );
    assert_eq!(summary[3].0, "update [1]");
    assert_eq!(
        summary[3].1,
        ["oldObject: an UPDATE needs the object as it was (oldObject)"]
    );
}

#[test]
fn per_policy_and_binding_results() {
    let policies = format!(
        "{POLICY}\n---\n{}",
        POLICY
            .replace("owner.example.com", "other.example.com")
            .replace("owner-binding", "other-binding")
            .replace("[CREATE, UPDATE]", "[UPDATE]")
    );
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\nobjects:\n- {apiVersion: v1, kind: Namespace, metadata: {name: default}}\ncases:\n- name: x\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a}}\n  expect:\n    policies: {owner.example.com: pass, other.example.com: skip}\n    bindings: {owner-binding: skip, other-binding: fail}\n";
    let got = failures(&policies, suite);
    assert_eq!(
        got,
        [
            "policies[owner.example.com]: expected pass, got fail",
            "bindings[other-binding]: expected fail, got skip",
            "bindings[owner-binding]: expected skip, got fail",
        ],
    );
    // An expression error, and a binding whose param is missing: `error`.
    let policies = format!(
        "{}\n---\n{}",
        POLICY.replace(
            "has(object.metadata.labels) && 'owner' in object.metadata.labels",
            "object.spec.missing == 1"
        ),
        POLICY
            .replace("owner.example.com", "param.example.com")
            .replace("owner-binding", "param-binding")
            .replace(
                "failurePolicy: Fail",
                "failurePolicy: Fail\n  paramKind: {apiVersion: v1, kind: ConfigMap}"
            )
            .replace(
                "validationActions: [Deny]",
                "validationActions: [Deny], paramRef: {name: absent, parameterNotFoundAction: Deny}"
            )
    );
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [policy.yaml]\nobjects:\n- {apiVersion: v1, kind: Namespace, metadata: {name: default}}\ncases:\n- name: x\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {}}\n  expect:\n    bindings: {owner-binding: pass, param-binding: pass}\n";
    let got = failures(&policies, suite);
    assert_eq!(
        got,
        [
            "bindings[owner-binding]: expected pass, got error",
            "bindings[param-binding]: expected pass, got error",
        ],
    );
}

/// A policy whose coverage was worked out by hand (see `coverage_on_a_hand_checked_policy`).
const COVERED_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: covered.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchConditions:
  - name: not-system
    expression: "!object.metadata.name.startsWith('system-')"
  variables:
  - name: labelled
    expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
  - name: name
    expression: "object.metadata.name"
  - name: unused
    expression: "object.metadata.name.size()"
  validations:
  - expression: "variables.labelled"
  - expression: "variables.name.size() < 10"
  - expression: "object.spec.containers.all(c, c.image != '')"
  auditAnnotations:
  - key: who
    valueExpression: "'name ' + variables.name"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: covered-binding}
spec: {policyName: covered.example.com, validationActions: [Deny]}
"#;

const COVERED_SUITE: &str = r#"apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml]
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: default}}
cases:
- name: labelled, short name
  object: {apiVersion: v1, kind: Pod, metadata: {name: ok, labels: {team: a}}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {allowed: true}
- name: unlabelled, ten-letter name
  object: {apiVersion: v1, kind: Pod, metadata: {name: unlabelled}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {allowed: false}
- name: system pods are not matched
  object: {apiVersion: v1, kind: Pod, metadata: {name: system-x}, spec: {containers: [{name: c, image: nginx}]}}
  expect: {policies: {covered.example.com: skip}}
"#;

fn covered_dir(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    write(&dir, "policy.yaml", COVERED_POLICY);
    write(&dir, "covered.celgate-test.yaml", COVERED_SUITE);
    dir
}

/// Worked out by hand: the match condition is true for `ok` and `unlabelled`, false for
/// `system-x` (2/2). `labelled` (boolean) is true for `ok`, false for `unlabelled` (2/2), read
/// once each by the validations; it is an `&&` chain: `has(object.metadata.labels)` is true
/// and false (2/2), `'team' in object.metadata.labels` true for `ok` and an error (no
/// labels) for `unlabelled` (1/2). `name` (a string, 1 point) is read by the validations and the
/// audit annotation of both matched cases (4 runs). `unused` is never read (0/1).
/// validations[0] and [1] are true for `ok` and false for `unlabelled` (10 letters, not < 10):
/// 2/2 each; validations[2] is never false (1/2) and is pointed out. The audit annotation
/// (1 point) runs twice. 14 of 17 points: 82.4%.
/// site, index, evaluations, seen true, seen false, points.
type Row = (
    celgate::admission::probe::Site,
    usize,
    u64,
    bool,
    bool,
    (usize, usize),
);

#[test]
fn coverage_on_a_hand_checked_policy() {
    use celgate::admission::probe::Site;
    let dir = covered_dir("coverage");
    let mut o = options();
    o.coverage = true;
    let report = run(std::slice::from_ref(&dir), &o).unwrap();
    assert_eq!(report.count(celgate::testing::Status::Pass), 3);
    let coverage = report.coverage.as_ref().unwrap();
    let items = &coverage.policies["covered.example.com"];
    let got: Vec<Row> = items
        .iter()
        .map(|i| {
            (
                i.site,
                i.index,
                i.evaluated,
                i.seen_true,
                i.seen_false,
                i.points(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (Site::MatchCondition, 0, 3, true, true, (2, 2)),
            (Site::Variable, 0, 2, true, true, (5, 6)),
            (Site::Variable, 1, 4, false, false, (1, 1)),
            (Site::Variable, 2, 0, false, false, (0, 1)),
            (Site::Validation, 0, 2, true, true, (2, 2)),
            (Site::Validation, 1, 2, true, true, (2, 2)),
            (Site::Validation, 2, 2, true, false, (1, 2)),
            (Site::AuditAnnotation, 0, 2, false, false, (1, 1)),
        ]
    );
    assert_eq!(coverage.points(), (14, 17));
    assert_eq!(format!("{:.1}", coverage.percent()), "82.4");
    let labelled = &items[1];
    assert_eq!(labelled.chain, Some("&&"));
    let operands: Vec<(&str, bool, bool, u64)> = labelled
        .operands
        .iter()
        .map(|o| (o.expression.as_str(), o.seen_true, o.seen_false, o.errors))
        .collect();
    assert_eq!(
        operands,
        vec![
            ("has(object.metadata.labels)", true, true, 0),
            ("'team' in object.metadata.labels", true, false, 1),
        ]
    );
    // Only expressions at the top level of a chain are split.
    assert!(items
        .iter()
        .filter(|i| i.index != 0 || i.site != Site::Variable)
        .all(|i| i.operands.is_empty()));
    let table = rendered(&dir, &report, Format::Table);
    assert!(
        table.contains(
            "    ! validations[2] never fails: no case makes `object.spec.containers.all(c, c.image != '')` false\n"
        ),
        "{table}"
    );
    assert!(
        table.contains("  covered.example.com  14/17 (82.4%)\n"),
        "{table}"
    );
    assert!(
        table.contains("      && operand 1: `'team' in object.metadata.labels`  true ✓  false ✗\n"),
        "{table}"
    );
    assert!(table.ends_with("coverage: 14/17 (82.4%)\n"), "{table}");
    let json: serde_json::Value = serde_json::from_str(&render(&report, Format::Json)).unwrap();
    let policy = &json["coverage"]["policies"][0];
    assert_eq!(policy["policy"], "covered.example.com");
    assert_eq!(policy["covered"], 14);
    assert_eq!(policy["total"], 17);
    assert_eq!(
        policy["expressions"][1]["operands"][1],
        serde_json::json!({"expression": "'team' in object.metadata.labels", "seenTrue": true, "seenFalse": false, "errors": 1})
    );
    assert_eq!(policy["neverFails"], serde_json::json!(["validations[2]"]));
    assert_eq!(policy["expressions"][3]["name"], "unused");
    assert_eq!(policy["expressions"][3]["evaluated"], 0);
    // Without --coverage nothing is collected.
    let plain = run(std::slice::from_ref(&dir), &options()).unwrap();
    assert!(plain.coverage.is_none());
    assert!(!render(&plain, Format::Json).contains("\"coverage\":"));
}

#[test]
fn min_coverage_fails_the_run() {
    let dir = covered_dir("min-coverage");
    let (code, out, err) = celgate(&["test", ".", "--min-coverage", "90"], &dir);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("3 passed, 0 failed\n"), "{out}");
    assert!(
        err.contains("celgate: coverage 82.4% is below --min-coverage 90"),
        "{err}"
    );
    let (code, out, _) = celgate(&["test", ".", "--min-coverage", "82"], &dir);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("coverage: 14/17 (82.4%)"), "{out}");
    let (code, _, err) = celgate(&["test", ".", "--min-coverage", "120"], &dir);
    assert_eq!(code, 2);
    assert!(err.contains("--min-coverage: expected a percentage from 0 to 100, got 120"));
    // JUnit stays valid XML: the table goes to standard error.
    let (code, out, err) = celgate(&["test", ".", "--coverage", "--output", "junit"], &dir);
    assert_eq!(code, 0);
    assert!(!out.contains("coverage:"), "{out}");
    assert!(err.contains("coverage: 14/17 (82.4%)"), "{err}");
}

const STALE_SUITE: &str = r#"# Suite comment: kept.
apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml]
objects:
- {apiVersion: v1, kind: Namespace, metadata: {name: default}}
cases:
# A passing case is not touched.
- name: labelled pod
  object: {apiVersion: v1, kind: Pod, metadata: {name: a, labels: {owner: me}}}
  expect: {allowed: true, messageMatches: "^$"}
- name: unlabelled pod
  object: {apiVersion: v1, kind: Pod, metadata: {name: b}}
  expect:
    code: 200 # stale
    # the message is what the binding says
    allowed: true
    bindings:
      owner-binding: pass
- name: flow style
  object: {apiVersion: v1, kind: Pod, metadata: {name: c}}
  expect: {messageMatches: "^nope", allowed: true}   # flow comment
- name: new case
  object: {apiVersion: v1, kind: Pod, metadata: {name: d}}
# The end.
"#;

#[test]
fn update_round_trip_keeps_comments_and_key_order() {
    let dir = temp_dir("update");
    write(&dir, "policy.yaml", POLICY);
    let file = write(&dir, "owner.celgate-test.yaml", STALE_SUITE);
    // Without --update the case without expectation makes the file invalid, and the stale
    // ones fail.
    let (code, _, _) = celgate(&["test", "."], &dir);
    assert_eq!(code, 2);
    let (code, out, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("4 passed, 0 failed"), "{out}");
    assert!(
        err.contains("owner.celgate-test.yaml: updated 3 cases"),
        "{err}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let quoted = serde_json::to_string(DENIED).unwrap();
    let want = STALE_SUITE
        .replace(
            "    code: 200 # stale\n    # the message is what the binding says\n    allowed: true\n    bindings:\n      owner-binding: pass\n",
            "    code: 403  # stale\n    # the message is what the binding says\n    allowed: false\n    bindings: {owner-binding: fail}\n",
        )
        .replace(
            "  expect: {messageMatches: \"^nope\", allowed: true}   # flow comment\n",
            &format!("  expect: {{message: {quoted}, allowed: false}}  # flow comment\n"),
        )
        .replace(
            "metadata: {name: d}}\n",
            &format!("metadata: {{name: d}}}}\n  expect: {{allowed: false, message: {quoted}}}\n"),
        );
    assert_eq!(text, want);
    // The updated suite passes as it is, and updating again changes nothing.
    let (code, out, _) = celgate(&["test", "."], &dir);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0);
    assert!(!err.contains("updated"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), want);
}

/// A policy that denies every pod, saying what request it saw.
const ECHO_REQUEST: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: echo.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: ["*"], resources: [pods]}
  validations:
  - expression: "false"
    messageExpression: >-
      request.operation + ' ' + request.namespace + '/' + request.name + ' ' +
      request.userInfo.username + ' ' + request.userInfo.groups.join(',') + ' old=' +
      (oldObject == null ? '-' : oldObject.metadata.labels.v) + ' dry=' + string(request.dryRun)
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: echo-binding}
spec: {policyName: echo.example.com, validationActions: [Deny]}
"#;

#[test]
fn eval_takes_a_plain_manifest_with_request_flags() {
    let dir = temp_dir("eval-manifest");
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    write(&dir.join("policies"), "echo.yaml", ECHO_REQUEST);
    let pod = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team, labels: {v: new}}\n";
    write(&dir, "pod.yaml", pod);
    write(&dir, "old.yaml", &pod.replace("v: new", "v: old"));
    let message = |args: &[&str]| {
        let mut all = vec!["eval", "--policies", "policies", "--object", "pod.yaml"];
        all.extend_from_slice(args);
        let (code, out, err) = celgate(&all, &dir);
        assert_eq!(code, 0, "{out}{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["response"]["status"]["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let prefix =
        "ValidatingAdmissionPolicy 'echo.example.com' with binding 'echo-binding' denied request: ";
    assert_eq!(
        message(&[]),
        format!("{prefix}CREATE team/p celgate-test-user system:authenticated old=- dry=false")
    );
    assert_eq!(
        message(&[
            "--operation",
            "UPDATE",
            "--old",
            "old.yaml",
            "--user",
            "alice",
            "--group",
            "devs",
            "--group",
            "ops",
            "--dry-run"
        ]),
        format!("{prefix}UPDATE team/p alice devs,ops,system:authenticated old=old dry=true")
    );
    assert_eq!(
        message(&["--operation", "delete", "--namespace", "other"]),
        format!("{prefix}DELETE other/p celgate-test-user system:authenticated old=new dry=false")
    );
    // Bad usage: exit 2 with the reason.
    let (code, _, err) = celgate(
        &[
            "eval",
            "--policies",
            "policies",
            "--object",
            "pod.yaml",
            "--operation",
            "UPDATE",
        ],
        &dir,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("pod.yaml: --operation UPDATE needs --old (the object as it was)"),
        "{err}"
    );
    let (code, _, err) = celgate(
        &[
            "eval",
            "--policies",
            "policies",
            "--object",
            "pod.yaml",
            "--operation",
            "PATCH",
        ],
        &dir,
    );
    assert_eq!(code, 2);
    assert!(
        err.contains("--operation: expected CREATE, UPDATE or DELETE, got \"PATCH\""),
        "{err}"
    );
}

/// The bundled suites cover their policies but for one operand that no request can make true
/// with the bundled param (`size(variables.registries) == 0`).
#[test]
fn the_example_suites_cover_their_policies() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let (code, out, err) = celgate(&["test", "examples/tests", "--min-coverage", "95"], root);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("coverage: 26/27 (96.3%)\n"), "{out}");
    assert!(!out.contains("never fails"), "{out}");
}

const KYVERNO_TEST: &str = r#"apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: owner}
policies: [policy.yaml, unbound.yaml]
resources: [resources.yaml]
results:
- policy: owner.example.com
  isValidatingAdmissionPolicy: true
  kind: Pod
  resources: [labelled, team-a/unlabelled]
  result: pass
- policy: no-latest.example.com
  kind: Pod
  resources: [labelled]
  result: fail
- policy: no-latest.example.com
  kind: Deployment
  resource: web
  status: skip
- policy: require-labels
  rule: check-team
  kind: Pod
  resources: [labelled]
  result: pass
"#;

const UNBOUND: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-latest.example.com}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
"#;

const KYVERNO_RESOURCES: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: labelled, labels: {owner: me}}
spec: {containers: [{name: c, image: "nginx:latest"}]}
---
apiVersion: v1
kind: Pod
metadata: {name: unlabelled, namespace: team-a}
spec: {containers: [{name: c, image: "nginx:1"}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 1}
"#;

#[test]
fn kyverno_test_files_run_with_the_same_meaning() {
    let dir = temp_dir("kyverno");
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "unbound.yaml", UNBOUND);
    write(&dir, "resources.yaml", KYVERNO_RESOURCES);
    write(&dir, "kyverno-test.yaml", KYVERNO_TEST);
    let report = run(std::slice::from_ref(&dir), &options()).unwrap();
    assert!(report.invalid.is_empty(), "{:?}", report.invalid);
    let got: Vec<(String, celgate::testing::Status, Vec<String>)> = report
        .cases
        .iter()
        .map(|c| (c.name.clone(), c.status, c.failures.clone()))
        .collect();
    use celgate::testing::Status::{Fail, Pass, Skip};
    assert_eq!(
        got,
        vec![
            ("owner.example.com: Pod/labelled".into(), Pass, vec![]),
            (
                "owner.example.com: Pod/team-a/unlabelled".into(),
                Fail,
                vec!["policies[owner.example.com]: expected pass, got fail".into()]
            ),
            // The policy without binding in the files is bound with Deny, as Kyverno applies it.
            ("no-latest.example.com: Pod/labelled".into(), Pass, vec![]),
            ("no-latest.example.com: Deployment/web".into(), Pass, vec![]),
            (
                "require-labels: Pod/labelled (not a ValidatingAdmissionPolicy: skipped)".into(),
                Skip,
                vec![]
            ),
        ]
    );
    // Fields with no celgate meaning make the file invalid, naming them.
    write(
        &dir,
        "kyverno-test.yaml",
        &KYVERNO_TEST.replace("results:", "userinfo: user-info.yaml\nresults:"),
    );
    let report = run(std::slice::from_ref(&dir), &options()).unwrap();
    assert_eq!(report.exit_code(), 2);
    assert!(
        report.invalid[0]
            .message
            .ends_with("kyverno-test.yaml: userinfo: not supported by celgate (it runs ValidatingAdmissionPolicies only)"),
        "{:?}",
        report.invalid
    );
    write(
        &dir,
        "kyverno-test.yaml",
        &KYVERNO_TEST.replace(
            "  status: skip",
            "  status: skip\n  patchedResource: p.yaml",
        ),
    );
    let report = run(std::slice::from_ref(&dir), &options()).unwrap();
    assert!(
        report.invalid[0]
            .message
            .ends_with("kyverno-test.yaml: results[2].patchedResource: not supported by celgate"),
        "{:?}",
        report.invalid
    );
}

/// A suite whose `expect.crd` blocks are stale, for `--update`.
const STALE_CRD_SUITE: &str = r#"apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
resources: [crd.yaml]
cases:
- name: invalid database
  object:
    apiVersion: example.com/v1
    kind: Database
    metadata: {name: reports, namespace: shop}
    spec: {engine: postgres, minReplicas: 5, maxReplicas: 3}
  expect:
    crd:
      allowed: true   # stale
      code: 200
      causes: []
- name: flow style
  object:
    apiVersion: example.com/v1
    kind: Database
    metadata: {name: cache, namespace: shop}
    spec: {engine: redis, maxReplicas: 3}
  expect: {crd: {messageMatches: "^nope", allowed: true}}   # flow comment
- name: already right
  object:
    apiVersion: example.com/v1
    kind: Database
    metadata: {name: orders, namespace: shop}
    spec: {engine: postgres, maxReplicas: 3}
  expect:
    crd: {allowed: true}
"#;

#[test]
fn update_rewrites_stale_crd_expectations() {
    let dir = temp_dir("update-crd");
    let crd = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/crds/crd.yaml"),
    )
    .unwrap();
    write(&dir, "crd.yaml", &crd);
    let file = write(&dir, "db.celgate-test.yaml", STALE_CRD_SUITE);
    let (code, out, _) = celgate(&["test", "."], &dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 passed, 2 failed"), "{out}");
    let (code, out, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("3 passed, 0 failed"), "{out}");
    assert!(
        err.contains("db.celgate-test.yaml: updated 2 cases"),
        "{err}"
    );
    let text = std::fs::read_to_string(&file).unwrap();
    let cause = "Invalid value: \\\"object\\\": minReplicas must not exceed maxReplicas";
    let unsupported = "Database.example.com \\\"cache\\\" is invalid: [spec.engine: Unsupported value: \\\"redis\\\": supported values: \\\"postgres\\\", \\\"mysql\\\", <nil>: Invalid value: \\\"null\\\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]";
    let want = STALE_CRD_SUITE
        .replace(
            "    crd:\n      allowed: true   # stale\n      code: 200\n      causes: []\n",
            &format!("    crd: {{allowed: false, code: 422, causes: [{{field: spec.minReplicas, message: \"{cause}\", type: FieldValueInvalid}}]}}\n"),
        )
        .replace(
            "  expect: {crd: {messageMatches: \"^nope\", allowed: true}}   # flow comment\n",
            &format!("  expect: {{crd: {{allowed: false, message: \"{unsupported}\"}}}}  # flow comment\n"),
        );
    // Keys keep the order the expectation had; a new mapping's keys (the causes) are sorted.
    assert_eq!(text, want);
    // The updated suite passes as it is, and updating again changes nothing.
    let (code, out, _) = celgate(&["test", "."], &dir);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0);
    assert!(!err.contains("updated"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), want);
}

/// A suite reads only files under `--root` (default: the working directory and the PATHs
/// given), symlinks resolved: a pull request's suite cannot print a CI secret through a param.
/// `../`, an absolute path and a symlink that leads out are refused, naming the reference;
/// with `--root` above them they are read.
#[cfg(unix)]
#[test]
fn suite_references_stay_under_the_root() {
    let outer = temp_dir("root");
    let secret = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: secret, namespace: default}\ndata: {token: s3cret}\n";
    write(&outer, "secret.yaml", secret);
    let repo = outer.join("repo");
    std::fs::create_dir_all(repo.join("tests")).unwrap();
    write(&repo, "policy.yaml", POLICY);
    std::os::unix::fs::symlink("../secret.yaml", repo.join("link.yaml")).unwrap();
    write(&repo, "other.yaml", &secret.replace("s3cret", "public"));
    let suite = |resource: &str| {
        format!(
            "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\nmetadata: {{name: s}}\n\
             policies: [../policy.yaml]\nresources: [{resource}]\n\
             objects: [{{apiVersion: v1, kind: Namespace, metadata: {{name: default}}}}]\ncases:\n- name: labelled pod\n  \
             object: {{apiVersion: v1, kind: Pod, metadata: {{name: a, namespace: default, labels: {{owner: me}}}}}}\n  \
             expect: {{allowed: true}}\n"
        )
    };
    let secret_path = outer.join("secret.yaml");
    for (reference, shown) in [
        ("../../secret.yaml".to_string(), "../../secret.yaml"),
        (
            secret_path.display().to_string(),
            secret_path.to_str().unwrap(),
        ),
        ("../link.yaml".to_string(), "../link.yaml"),
    ] {
        write(
            &repo.join("tests"),
            "s.celgate-test.yaml",
            &suite(&reference),
        );
        let (code, out, err) = celgate(&["test", "tests"], &repo);
        assert_eq!(code, 2, "{reference}: {out}{err}");
        assert!(
            out.contains(&format!("resources[0]: {shown}: outside the root"))
                && out.contains("--root"),
            "{reference}: {out}{err}"
        );
        assert!(!out.contains("s3cret"), "{out}");
        // With --root above the secret, it is read.
        let (code, out, err) = celgate(&["test", "tests", "--root", ".."], &repo);
        assert_eq!(code, 0, "{reference}: {out}{err}");
    }
    // A review file and a case's object file are confined too.
    write(
        &repo.join("tests"),
        "s.celgate-test.yaml",
        &suite("../other.yaml").replace(
            "  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: default, labels: {owner: me}}}\n",
            "  object: /etc/passwd\n",
        ),
    );
    let (code, out, err) = celgate(&["test", "tests"], &repo);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("/etc/passwd: outside the root"), "{out}{err}");
}

/// Kyverno's documented ValidatingAdmissionPolicy test with a values file: a binding that
/// selects namespaces by label, the labels given by the values file's `namespaceSelector`.
const KYVERNO_NS_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: check-deployment-replicas}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <= 2
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: check-deployment-replicas-binding}
spec:
  policyName: check-deployment-replicas
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchExpressions:
      - {key: environment, operator: In, values: [staging, production]}
"#;

const KYVERNO_NS_VALUES: &str = r#"apiVersion: cli.kyverno.io/v1alpha1
kind: Values
metadata: {name: values}
namespaceSelector:
- name: staging
  labels: {environment: staging}
- name: production
  labels: {environment: production}
- name: testing
  labels: {environment: testing}
"#;

const KYVERNO_NS_TEST: &str = r#"apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: kyverno-test.yaml}
policies: [policy.yaml]
resources: [resource.yaml]
variables: values.yaml
results:
- kind: Deployment
  policy: check-deployment-replicas
  isValidatingAdmissionPolicy: true
  resources: [testing-deployment-1, testing-deployment-2]
  result: skip
- kind: Deployment
  policy: check-deployment-replicas
  isValidatingAdmissionPolicy: true
  resources: [staging-deployment-1, production-deployment-1]
  result: fail
- kind: Deployment
  policy: check-deployment-replicas
  isValidatingAdmissionPolicy: true
  resources: [staging-deployment-2, production-deployment-2]
  result: pass
"#;

/// Two Deployments (4 and 2 replicas) in each of testing, staging and production.
fn kyverno_ns_resources() -> String {
    let mut docs = Vec::new();
    for ns in ["testing", "staging", "production"] {
        for (i, replicas) in [(1, 4), (2, 2)] {
            docs.push(format!(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {ns}-deployment-{i}, namespace: {ns}}}\n\
                 spec: {{replicas: {replicas}, selector: {{matchLabels: {{app: x}}}}, \
                 template: {{metadata: {{labels: {{app: x}}}}, spec: {{containers: [{{name: c, image: busybox}}]}}}}}}\n"
            ));
        }
    }
    docs.join("---\n")
}

fn kyverno_ns_dir(name: &str) -> PathBuf {
    let dir = temp_dir(name);
    write(&dir, "policy.yaml", KYVERNO_NS_POLICY);
    write(&dir, "resource.yaml", &kyverno_ns_resources());
    write(&dir, "values.yaml", KYVERNO_NS_VALUES);
    write(&dir, "kyverno-test.yaml", KYVERNO_NS_TEST);
    dir
}

#[test]
fn kyverno_values_give_namespace_labels() {
    let dir = kyverno_ns_dir("kyverno-values");
    let (code, out, err) = celgate(&["test"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("6 passed, 0 failed\n"), "{out}");
    // The labels decide: without the values file every Deployment is outside the binding.
    write(
        &dir,
        "kyverno-test.yaml",
        &KYVERNO_NS_TEST.replace("variables: values.yaml\n", ""),
    );
    let (code, out, _) = celgate(&["test"], &dir);
    assert_eq!(code, 1, "{out}");
    assert!(out.ends_with("2 passed, 4 failed\n"), "{out}");
    // The values may be written inline, under `values`.
    let inline: String = KYVERNO_NS_VALUES
        .lines()
        .skip(3)
        .map(|l| format!("  {l}\n"))
        .collect();
    write(
        &dir,
        "kyverno-test.yaml",
        &KYVERNO_NS_TEST.replace("variables: values.yaml\n", &format!("values:\n{inline}")),
    );
    let (code, out, err) = celgate(&["test"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    // A value celgate cannot honour is refused, naming the file and the key.
    write(&dir, "kyverno-test.yaml", KYVERNO_NS_TEST);
    for (values, message) in [
        (
            "globalValues:\n  request.operation: UPDATE\n",
            "values.yaml: globalValues.request.operation: UPDATE: celgate admits each Kyverno \
             test resource as a CREATE (an UPDATE or DELETE needs the old object, which a Kyverno \
             test does not give); write a celgate suite for other operations",
        ),
        (
            "globalValues:\n  request.object.metadata.name: x\n",
            "values.yaml: globalValues.request.object.metadata.name: not supported by celgate: \
             a ValidatingAdmissionPolicy reads no Kyverno variable (only request.operation: \
             CREATE is accepted)",
        ),
        (
            "policies:\n- name: check-deployment-replicas\n  rules:\n  - name: r\n    values: {a: b}\n",
            "values.yaml: policies[0].rules: a ValidatingAdmissionPolicy has no rules",
        ),
        (
            "subresources: []\n",
            "values.yaml: subresources: not supported by celgate",
        ),
        (
            "namespaces: []\n",
            "values.yaml: namespaces: unknown field of a Kyverno values file",
        ),
    ] {
        write(
            &dir,
            "values.yaml",
            &format!("{KYVERNO_NS_VALUES}{values}"),
        );
        let (code, out, err) = celgate(&["test"], &dir);
        assert_eq!(code, 2, "{values}: {out}{err}");
        assert!(
            out.contains(&format!("! invalid test file ./kyverno-test.yaml: variables: {message}\n")),
            "{values}: {out}{err}"
        );
    }
    // A per-resource operation of CREATE, and values of a Kyverno policy (whose cases are
    // skipped), are accepted.
    write(
        &dir,
        "values.yaml",
        &format!(
            "{KYVERNO_NS_VALUES}globalValues: {{request.operation: CREATE}}\npolicies:\n\
             - name: check-deployment-replicas\n  resources:\n  - name: staging-deployment-1\n    \
             values: {{request.operation: CREATE}}\n\
             - name: some-cluster-policy\n  rules:\n  - name: r\n    values: {{a: b}}\n"
        ),
    );
    let (code, out, err) = celgate(&["test"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    // A namespace given both in the test's resources and the values file is ambiguous.
    write(&dir, "values.yaml", KYVERNO_NS_VALUES);
    write(
        &dir,
        "ns.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: staging}\n",
    );
    write(
        &dir,
        "kyverno-test.yaml",
        &KYVERNO_NS_TEST.replace("variables:", "clusterResources: [ns.yaml]\nvariables:"),
    );
    let (code, out, _) = celgate(&["test"], &dir);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "variables: values.yaml: namespaceSelector[0]: namespace \"staging\" is also given in the test's \
             resources: give its labels in one place"
        ),
        "{out}"
    );
}

#[test]
fn older_kyverno_test_files_run_or_are_refused_by_name() {
    // The format before apiVersion/kind (name, policies, resources, results at the top), in
    // the hidden `.kyverno-test` folder Kyverno's policy library keeps its tests in.
    let dir = kyverno_ns_dir("kyverno-old");
    std::fs::create_dir_all(dir.join("pol/.kyverno-test")).unwrap();
    for f in ["policy.yaml", "resource.yaml", "values.yaml"] {
        std::fs::rename(dir.join(f), dir.join("pol/.kyverno-test").join(f)).unwrap();
    }
    std::fs::remove_file(dir.join("kyverno-test.yaml")).unwrap();
    let old = KYVERNO_NS_TEST.replace(
        "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: kyverno-test.yaml}\n",
        "name: check-replicas\n",
    );
    write(&dir.join("pol/.kyverno-test"), "kyverno-test.yaml", &old);
    let (code, out, err) = celgate(&["test"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.ends_with("6 passed, 0 failed\n"), "{out}");
    let (code, out, err) = celgate(&["test", "pol/.kyverno-test/kyverno-test.yaml"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    // Other hidden folders are still not searched.
    std::fs::rename(dir.join("pol/.kyverno-test"), dir.join("pol/.hidden")).unwrap();
    let (code, _, err) = celgate(&["test"], &dir);
    assert_eq!(code, 1, "{err}");
    std::fs::rename(dir.join("pol/.hidden"), dir.join("pol/.kyverno-test")).unwrap();
    // A kyverno-test.yaml in neither format is refused, naming the file and the formats.
    write(
        &dir.join("pol/.kyverno-test"),
        "kyverno-test.yaml",
        "apiVersion: cli.kyverno.io/v1beta1\nkind: Test\nresults: []\n",
    );
    let (code, out, _) = celgate(&["test"], &dir);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "! invalid test file ./pol/.kyverno-test/kyverno-test.yaml: not a Kyverno CLI test \
             file: expected apiVersion: cli.kyverno.io/v1alpha1 and kind: Test, or the older \
             format without them (name, policies, resources and results at the top level)\n"
        ),
        "{out}"
    );
}

#[test]
fn update_says_it_cannot_write_a_kyverno_file() {
    let dir = kyverno_ns_dir("kyverno-update");
    // A stale expectation: the case fails and --update cannot fix it.
    let stale = KYVERNO_NS_TEST.replacen("result: skip", "result: pass", 1);
    write(&dir, "kyverno-test.yaml", &stale);
    let (code, out, err) = celgate(&["test", "--update"], &dir);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.ends_with("4 passed, 2 failed\n"), "{out}");
    assert_eq!(
        err,
        "celgate: ./kyverno-test.yaml: not updated: --update writes celgate suites \
         (*.celgate-test.yaml) only, not Kyverno test files\n"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("kyverno-test.yaml")).unwrap(),
        stale
    );
}

/// Counts are worded as what they count: one case updated is `1 case`.
#[test]
fn update_counts_one_case_in_the_singular() {
    let dir = temp_dir("update-one");
    let crd = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/crds/crd.yaml"),
    )
    .unwrap();
    write(&dir, "crd.yaml", &crd);
    let one = &STALE_CRD_SUITE[..STALE_CRD_SUITE.find("- name: flow style").unwrap()];
    write(&dir, "db.celgate-test.yaml", one);
    let (code, out, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        err.contains("db.celgate-test.yaml: updated 1 case\n"),
        "{err}"
    );
}

/// The coverage table counts runs and errors as what they count: `1 run`, `1 error`.
#[test]
fn coverage_counts_one_run_in_the_singular() {
    let dir = temp_dir("coverage-one");
    write(&dir, "policy.yaml", COVERED_POLICY);
    let one = &COVERED_SUITE[..COVERED_SUITE.find("- name: labelled, short name").unwrap()];
    let case = "- name: unlabelled\n  object: {apiVersion: v1, kind: Pod, metadata: {name: unlabelled}, spec: {containers: [{name: c, image: nginx}]}}\n  expect: {allowed: false}\n";
    write(&dir, "covered.celgate-test.yaml", &format!("{one}{case}"));
    let mut o = options();
    o.coverage = true;
    let report = run(std::slice::from_ref(&dir), &o).unwrap();
    let table = rendered(&dir, &report, Format::Table);
    assert!(table.contains("     1 run  "), "{table}");
    assert!(!table.contains(" 1 runs"), "{table}");
    assert!(!table.contains(" 1 errors"), "{table}");
}

/// A MutatingAdmissionPolicy that labels pods, and a validating one that requires the label:
/// the validating policy sees the mutated object, as in the API server's chain.
const MUTATE_THEN_VALIDATE: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label-pods}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchConditions:
  - {name: not-skipped, expression: "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'owner': 'platform'}}}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-pods}
spec: {policyName: label-pods}
"#;

const MUTATING_SUITE: &str = r#"apiVersion: celgate.dev/v1alpha1
kind: CelgateTest
policies: [policy.yaml, mutating.yaml]
cases:
- name: labelled, then admitted
  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: default}, spec: {containers: [{name: c, image: nginx:1.27}]}}
  expect:
    allowed: true
    mutated: true
    patch: [{op: add, path: /metadata/labels, value: {owner: platform}}]
    objectContains: {metadata: {labels: {owner: platform}}}
    policies: {label-pods: pass, owner.example.com: pass}
- name: skipped by its matchConditions, then denied
  object: {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: default, labels: {skip: "1"}}, spec: {containers: [{name: c, image: nginx:1.27}]}}
  expect:
    allowed: false
    mutated: false
    patch: []
    policies: {label-pods: skip, owner.example.com: fail}
"#;

/// `celgate test` runs the mutating policies first and checks what they did: the patch, the
/// fields of the mutated object, whether it changed; per policy results include mutating
/// policies (pass, skip); a wrong expectation names what differs.
#[test]
fn suites_expect_what_the_mutating_policies_did() {
    let dir = temp_dir("mutating-suite");
    write(&dir, "policy.yaml", POLICY);
    write(&dir, "mutating.yaml", MUTATE_THEN_VALIDATE);
    let file = write(&dir, "m.celgate-test.yaml", MUTATING_SUITE);
    let report = run(std::slice::from_ref(&file), &options()).unwrap();
    let failures: Vec<&String> = report.cases.iter().flat_map(|c| &c.failures).collect();
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(report.cases.len(), 2);

    let wrong = MUTATING_SUITE
        .replace("value: {owner: platform}}]", "value: {owner: nobody}}]")
        .replace(
            "objectContains: {metadata: {labels: {owner: platform}}}",
            "object: {kind: Pod}",
        );
    write(&dir, "m.celgate-test.yaml", &wrong);
    let report = run(&[file], &options()).unwrap();
    let failures: Vec<&String> = report.cases.iter().flat_map(|c| &c.failures).collect();
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert!(
        failures[0].starts_with("object: expected {\"kind\":\"Pod\"}, got {"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].starts_with("patch: expected [{\"op\":\"add\""),
        "{}",
        failures[1]
    );
}

/// `--update` on a case without expectation writes whether the object changed and the whole
/// mutated object; `--coverage` counts the mutation once it ran.
#[test]
fn update_and_coverage_know_mutations() {
    let dir = temp_dir("mutating-update");
    write(&dir, "mutating.yaml", MUTATE_THEN_VALIDATE);
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\npolicies: [mutating.yaml]\ncases:\n- name: fresh\n  object: {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: default}, spec: {containers: [{name: c, image: nginx:1.27}]}}\n";
    let file = write(&dir, "u.celgate-test.yaml", suite);
    let (code, out, err) = celgate(&["test", ".", "--update"], &dir);
    assert_eq!(code, 0, "{out}{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("mutated: true"), "{text}");
    assert!(
        text.contains("object: {apiVersion: v1, kind: Pod, metadata: {"),
        "{text}"
    );
    assert!(text.contains("owner: platform"), "{text}");
    let (code, out, _) = celgate(&["test", ".", "--coverage"], &dir);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("mutations[0]"), "{out}");
}
