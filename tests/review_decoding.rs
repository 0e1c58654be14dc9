//! Decoding an AdmissionReview from untrusted bytes (issue 10): a review that is not as the API
//! server produces it gets a clear error naming the field (a 400 from the server) instead of
//! a decision; repeated keys are refused; nesting is accepted as deep as the API server
//! accepts it, without overflowing the stack, and refused beyond.
//!
//! Each case starts from a review that a policy denies (a privileged Pod) and breaks one
//! thing: before this was checked, most of them were answered "allowed".

use std::path::Path;

mod common;

use celgate::cel::NEWEST_MINOR;
use celgate::policy::snapshot::Snapshot;
use celgate::review::{answer, Answer};
use celgate::source::{add_cluster_defaults, folder, snapshot};
use common::fixtures;
use serde_json::{json, Value as Json};

const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-privileged}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  validations:
  - expression: "!object.spec.containers.exists(c, has(c.securityContext) && has(c.securityContext.privileged) && c.securityContext.privileged)"
    message: privileged
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-privileged}
spec: {policyName: no-privileged, validationActions: [Deny]}
"#;

fn policies() -> Snapshot {
    let mut objects = folder::parse_documents(Path::new("policy.yaml"), POLICY).unwrap();
    add_cluster_defaults(&mut objects);
    snapshot(objects, NEWEST_MINOR, true).unwrap()
}

fn privileged_pod() -> Json {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "nginx", "securityContext": {"privileged": true}}]}
    })
}

/// A review of a privileged Pod CREATE, as the API server sends it.
fn review() -> Json {
    fixtures::pod_create_review(
        privileged_pod(),
        json!({"username": "alice", "uid": "a-1", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["s1"]}}),
    )
}

fn run(snapshot: &Snapshot, body: &[u8]) -> Result<Answer, String> {
    answer(snapshot, body, &Default::default(), Default::default()).map_err(|e| e.to_string())
}

fn allowed(a: &Answer) -> bool {
    a.review()["response"]["allowed"] == true
}

/// Sets (or with `None` removes) the field at `path` below `request`.
fn with(path: &[&str], value: Option<Json>) -> Vec<u8> {
    let mut r = review();
    let mut at = &mut r["request"];
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    let last = path[path.len() - 1];
    match value {
        Some(v) => at[last] = v,
        None => {
            at.as_object_mut().unwrap().remove(last);
        }
    }
    serde_json::to_vec(&r).unwrap()
}

#[test]
fn the_unbroken_review_is_denied() {
    let s = policies();
    let a = run(&s, &serde_json::to_vec(&review()).unwrap()).unwrap();
    assert!(!allowed(&a), "{}", a.review());
}

#[test]
fn lenient_fields_are_refused_with_their_path() {
    let s = policies();
    let cases: Vec<(&[&str], Option<Json>, &str)> = vec![
        (&["resource"], None, "request.resource: Required value"),
        (
            &["resource"],
            Some(json!(null)),
            "request.resource: Required value",
        ),
        (
            &["resource"],
            Some(json!("pods")),
            "request.resource: Invalid value: must be an object, not a string",
        ),
        (
            &["resource", "resource"],
            Some(json!(["pods"])),
            "request.resource.resource: Invalid value: must be a string, not an array",
        ),
        (
            &["resource", "resource"],
            None,
            "request.resource.resource: Required value",
        ),
        (
            &["resource", "resource"],
            Some(json!("")),
            "request.resource.resource: Required value",
        ),
        (
            &["resource", "group"],
            None,
            "request.resource.group: Required value",
        ),
        (
            &["resource", "version"],
            Some(json!(1)),
            "request.resource.version: Invalid value: must be a string, not a number",
        ),
        (&["operation"], None, "request.operation: Required value"),
        (
            &["operation"],
            Some(json!(null)),
            "request.operation: Required value",
        ),
        (
            &["operation"],
            Some(json!("FOO")),
            r#"request.operation: Unsupported value: "FOO": supported values: "CREATE", "UPDATE", "DELETE", "CONNECT""#,
        ),
        (
            &["operation"],
            Some(json!("create")),
            r#"request.operation: Unsupported value: "create": supported values"#,
        ),
        (
            &["operation"],
            Some(json!(["CREATE"])),
            "request.operation: Invalid value: must be a string, not an array",
        ),
        (&["uid"], None, "request.uid: Required value"),
        (&["uid"], Some(json!(null)), "request.uid: Required value"),
        (&["uid"], Some(json!("")), "request.uid: Required value"),
        (
            &["uid"],
            Some(json!(7)),
            "request.uid: Invalid value: must be a string, not a number",
        ),
        (
            &["uid"],
            Some(json!({"id": "x"})),
            "request.uid: Invalid value: must be a string, not an object",
        ),
        (&["kind"], None, "request.kind: Required value"),
        (
            &["kind", "kind"],
            Some(json!(false)),
            "request.kind.kind: Invalid value: must be a string, not a boolean",
        ),
        (
            &["requestResource"],
            Some(json!([])),
            "request.requestResource: Invalid value: must be an object, not an array",
        ),
        (
            &["requestResource", "resource"],
            None,
            "request.requestResource.resource: Required value",
        ),
        (
            &["requestKind", "version"],
            Some(json!("")),
            "request.requestKind.version: Required value",
        ),
        (
            &["subResource"],
            Some(json!(["status"])),
            "request.subResource: Invalid value: must be a string, not an array",
        ),
        (
            &["name"],
            Some(json!(5)),
            "request.name: Invalid value: must be a string, not a number",
        ),
        (
            &["namespace"],
            Some(json!({})),
            "request.namespace: Invalid value: must be a string, not an object",
        ),
        (&["userInfo"], None, "request.userInfo: Required value"),
        (
            &["userInfo"],
            Some(json!(null)),
            "request.userInfo: Required value",
        ),
        (
            &["userInfo"],
            Some(json!("alice")),
            "request.userInfo: Invalid value: must be an object, not a string",
        ),
        (
            &["userInfo", "username"],
            Some(json!(["alice"])),
            "request.userInfo.username: Invalid value: must be a string, not an array",
        ),
        (
            &["userInfo", "groups"],
            Some(json!("devs")),
            "request.userInfo.groups: Invalid value: must be a list of strings, not a string",
        ),
        (
            &["userInfo", "groups"],
            Some(json!(["devs", 1])),
            "request.userInfo.groups[1]: Invalid value: must be a string, not a number",
        ),
        (
            &["userInfo", "extra"],
            Some(json!(["s1"])),
            "request.userInfo.extra: Invalid value: must be an object, not an array",
        ),
        (
            &["userInfo", "extra"],
            Some(json!({"scopes": "s1"})),
            r#"request.userInfo.extra["scopes"]: Invalid value: must be a list of strings, not a string"#,
        ),
        (
            &["dryRun"],
            Some(json!("false")),
            "request.dryRun: Invalid value: must be a boolean, not a string",
        ),
        (
            &["options"],
            Some(json!("CreateOptions")),
            "request.options: Invalid value: must be an object, not a string",
        ),
        (
            &["object"],
            Some(json!([privileged_pod()])),
            "request.object: Invalid value: must be an object, not an array",
        ),
        (
            &["oldObject"],
            Some(json!("{}")),
            "request.oldObject: Invalid value: must be an object, not a string",
        ),
        (
            &["object", "metadata"],
            Some(json!("p")),
            "request.object.metadata: Invalid value: must be an object, not a string",
        ),
        (
            &["object", "metadata", "labels"],
            Some(json!({"app": 1})),
            r#"request.object.metadata.labels["app"]: Invalid value: must be a string, not a number"#,
        ),
        (
            &["object", "metadata", "name"],
            Some(json!(["p"])),
            "request.object.metadata.name: Invalid value: must be a string, not an array",
        ),
    ];
    let mut failures = Vec::new();
    for (path, value, want) in cases {
        let shown = format!("{path:?} = {value:?}");
        match run(&s, &with(path, value)) {
            Err(e) if e.starts_with(want) => {}
            Err(e) => failures.push(format!("{shown}: error {e:?}, want {want:?}")),
            Ok(a) => failures.push(format!(
                "{shown}: answered {}, want error {want:?}",
                a.review()["response"]
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn what_go_decodes_is_accepted_as_go_decodes_it() {
    let s = policies();
    // null for an optional string, list, map or bool is its zero value; a null in a list
    // of strings is ""; an unknown field is ignored. The pod is still denied.
    for (path, value) in [
        (&["name"][..], json!(null)),
        (&["namespace"], json!(null)),
        (&["subResource"], json!(null)),
        (&["requestKind"], json!(null)),
        (&["dryRun"], json!(null)),
        (&["options"], json!(null)),
        (&["oldObject"], json!(null)),
        (&["userInfo", "groups"], json!(["devs", null])),
        (&["userInfo", "extra"], json!({"scopes": null})),
        (&["userInfo", "username"], json!(null)),
        (&["resource", "group"], json!(null)),
        (&["somethingNew"], json!({"x": [1]})),
    ] {
        let a = run(&s, &with(path, Some(value.clone())))
            .unwrap_or_else(|e| panic!("{path:?} = {value}: {e}"));
        assert!(!allowed(&a), "{path:?} = {value}: {}", a.review());
    }
    let a = run(&s, &with(&["userInfo", "groups"], Some(json!([null, "g"])))).unwrap();
    assert!(!allowed(&a));
}

#[test]
fn a_review_of_another_kind_is_refused() {
    let s = policies();
    let mut r = review();
    r["kind"] = json!("AdmissionResponse");
    let e = run(&s, &serde_json::to_vec(&r).unwrap()).unwrap_err();
    assert!(
        e.starts_with(r#"kind: Unsupported value: "AdmissionResponse""#),
        "{e}"
    );
}

/// The review's text with `request.object` written twice: `first`, then `second`.
fn twice(first: &Json, second: &Json) -> Vec<u8> {
    let mut r = review();
    r["request"].as_object_mut().unwrap().remove("object");
    let text = serde_json::to_string(&r).unwrap();
    let at = text.find("\"request\":{").unwrap() + "\"request\":{".len();
    format!(
        "{}\"object\":{first},\"object\":{second},{}",
        &text[..at],
        &text[at..]
    )
    .into_bytes()
}

#[test]
fn repeated_keys_are_refused_wherever_they_are() {
    let s = policies();
    let mut benign = privileged_pod();
    benign["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("securityContext");
    // Go keeps the last (privileged) object; reading the first allowed the Pod.
    let e = run(&s, &twice(&benign, &privileged_pod())).unwrap_err();
    assert!(e.contains(r#"duplicate key "object" at request"#), "{e}");
    // Inside the object too: the policy reads `privileged` from the first value.
    let body = serde_json::to_string(&review()).unwrap().replace(
        r#""privileged":true"#,
        r#""privileged":false,"privileged":true"#,
    );
    let e = run(&s, body.as_bytes()).unwrap_err();
    assert!(
        e.contains(
            r#"duplicate key "privileged" at request.object.spec.containers[0].securityContext"#
        ),
        "{e}"
    );
    // Spelled differently, the same key.
    let body = serde_json::to_string(&review()).unwrap().replace(
        r#""operation":"CREATE""#,
        r#""operation":"CREATE","\u006fperation":"DELETE""#,
    );
    let e = run(&s, body.as_bytes()).unwrap_err();
    assert!(e.contains(r#"duplicate key "operation" at request"#), "{e}");
}

/// A value `levels` deep: `{"a": {"a": ... {"privileged": true} ...}}`, or with `list`
/// `[[ ... [true] ... ]]`.
fn deep_value(levels: usize, list: bool) -> String {
    let (open, inner, close) = if list {
        ("[", "[true]", "]")
    } else {
        ("{\"a\":", "{\"privileged\":true}", "}")
    };
    format!(
        "{}{inner}{}",
        open.repeat(levels - 1),
        close.repeat(levels - 1)
    )
}

/// A privileged Pod review whose object carries a value nested so that the object itself is
/// `levels` deep (the Pod is level 1, `spec` 2, `deep` 3...).
fn deep_review(levels: usize, list: bool) -> Vec<u8> {
    let mut r = review();
    r["request"]["object"]["spec"]["deep"] = json!("DEEP");
    let text = serde_json::to_string(&r).unwrap();
    text.replacen("\"DEEP\"", &deep_value(levels - 2, list), 1)
        .into_bytes()
}

/// Runs `f` on a thread with the stack the server's evaluation threads have.
fn on_server_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(32 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// [`POLICY`], with a first validation that walks the deep value (equality, `%s`).
fn walking_policies() -> Snapshot {
    let walk = r#"  - expression: 'object.spec.deep == object.spec.deep && "%s".format([object.spec.deep]).size() > 19000'
    message: walked
"#;
    let text = POLICY.replacen("  validations:\n", &format!("  validations:\n{walk}"), 1);
    let mut objects = folder::parse_documents(Path::new("policy.yaml"), &text).unwrap();
    add_cluster_defaults(&mut objects);
    snapshot(objects, NEWEST_MINOR, true).unwrap()
}

#[test]
fn objects_nest_as_deep_as_the_api_server_accepts() {
    on_server_stack(|| {
        let s = walking_policies();
        // 10,000 levels: Go's decoder limit, which the API server's decoder keeps.
        for list in [false, true] {
            let a = run(&s, &deep_review(10_000, list)).unwrap();
            // The walk held (an error or a false would be reported first); the Pod is denied.
            assert_eq!(
                a.review()["response"]["status"]["message"],
                "ValidatingAdmissionPolicy 'no-privileged' with binding 'no-privileged' denied request: privileged",
                "list {list}"
            );
        }
    });
}

#[test]
fn deeper_objects_are_refused_with_a_clear_error() {
    // Parsing needs no big stack: this runs on the test's own (2 MiB) thread.
    let s = policies();
    let e = run(&s, &deep_review(10_001, false)).unwrap_err();
    assert!(
        e.contains("JSON nested deeper than 10002 levels (the API server accepts an object nested 10000 levels deep; a review adds 2)"),
        "{e}"
    );
    // Far deeper: still an error, not a crash.
    let e = run(&s, &deep_review(200_000, true)).unwrap_err();
    assert!(e.contains("JSON nested deeper than 10002 levels"), "{e}");
}

#[test]
fn deep_documents_parse_on_a_small_stack() {
    // The decoder grows its own stack: a maximal review decodes on a 256 KiB thread.
    let body = deep_review(10_000, false);
    let got = std::thread::Builder::new()
        .stack_size(256 << 10)
        .spawn(move || {
            let doc = celgate::cel::json::Doc::parse(&body).map_err(|e| e.to_string())?;
            celgate::review::request(&doc)
                .map(|r| r.uid)
                .map_err(|e| e.to_string())
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(got.unwrap(), "705ab4f5-6393-11e8-b7cc-42010a800002");
}

#[test]
fn a_refused_value_is_quoted_short() {
    let s = policies();
    let long = "X".repeat(100_000);
    let e = run(&s, &with(&["operation"], Some(json!(long)))).unwrap_err();
    assert!(
        e.starts_with(&format!(
            "request.operation: Unsupported value: \"{}\"...: supported values",
            "X".repeat(64)
        )),
        "{e}"
    );
    assert!(e.len() < 200, "{} bytes", e.len());
}

/// Issue 24 item 12(c): a resource name holding a slash names a subresource in the wrong
/// field; the API server never sends one (resource names are path segments), and one matched
/// no policy and was allowed.
#[test]
fn a_resource_holding_a_slash_is_refused() {
    let s = policies();
    for (path, want) in [
        (
            &["resource", "resource"][..],
            r#"request.resource.resource: Invalid value: "pods/status": may not contain '/'"#,
        ),
        (
            &["requestResource", "resource"][..],
            r#"request.requestResource.resource: Invalid value: "pods/status": may not contain '/'"#,
        ),
    ] {
        let mut r = review();
        r["request"]["requestResource"] = r["request"]["resource"].clone();
        let mut at = &mut r["request"];
        for p in path {
            at = &mut at[*p];
        }
        *at = json!("pods/status");
        match run(&s, &serde_json::to_vec(&r).unwrap()) {
            Err(e) => assert_eq!(e, want),
            Ok(a) => panic!("{path:?}: answered {}", a.review()["response"]),
        }
    }
}

/// Issue 24 item 6: the uid is copied into the answer and the logs; the API server's is a
/// UUID (36 bytes). A megabyte one is refused, and the error does not repeat it.
#[test]
fn a_uid_longer_than_256_bytes_is_refused_without_repeating_it() {
    let s = policies();
    let ok = "u".repeat(256);
    assert!(run(&s, &with(&["uid"], Some(json!(ok)))).is_ok());
    for len in [257, 1 << 20] {
        let e = run(&s, &with(&["uid"], Some(json!("u".repeat(len))))).unwrap_err();
        assert_eq!(e, "request.uid: Too long: may not be more than 256 bytes");
    }
    // Other refused values are quoted in the error, cut to 256 bytes.
    let huge = "X".repeat(1 << 20);
    for (path, value) in [
        (&["operation"][..], json!(huge)),
        (&["resource", "resource"][..], json!(format!("a/{huge}"))),
        (&["userInfo", "extra"][..], json!({huge.clone(): 1})),
    ] {
        let e = run(&s, &with(path, Some(value))).unwrap_err();
        assert!(e.len() < 1024, "{path:?}: {} bytes", e.len());
    }
}
