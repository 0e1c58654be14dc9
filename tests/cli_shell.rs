//! The command line as CI and shells use it, through the real binary: `-o` on the commands
//! that print, `eval --fail-on`'s exit codes, `serve` refusing to guess a policy folder,
//! summaries that count what they say, shell completions and man pages generated from the
//! clap tree, and the published JSON Schemas kept equal to what the code writes.

use common::cli::{celgate_in as celgate, celgate_within};
use common::{repo, temp_dir};

mod common;

/// A Pod policy whose binding has `actions` (`Deny` or `Warn`), and a Pod that fails it.
fn no_latest(dir: &std::path::Path, actions: &str) {
    std::fs::create_dir_all(dir.join("policies")).unwrap();
    std::fs::write(
        dir.join("policies/p.yaml"),
        format!(
            r#"apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {{name: no-latest}}
spec:
  matchConstraints:
    resourceRules: [{{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}}]
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: no latest images
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {{name: no-latest}}
spec: {{policyName: no-latest, validationActions: [{actions}]}}
"#
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("latest.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a, namespace: default}\nspec: {containers: [{name: c, image: 'nginx:latest'}]}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("pinned.yaml"),
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: default}\nspec: {containers: [{name: c, image: 'nginx:1.27'}]}\n",
    )
    .unwrap();
}

/// `eval --fail-on never|deny|warn`: exit 0 whatever the decision by default (as before the
/// flag), 1 on a denial with `deny`, 1 on a denial or warnings with `warn`.
#[test]
fn eval_fails_on_what_fail_on_names() {
    for (actions, object, expected) in [
        // fail-on: never, deny, warn.
        ("Deny", "latest.yaml", [0, 1, 1]),
        ("Warn", "latest.yaml", [0, 0, 1]),
        ("Deny", "pinned.yaml", [0, 0, 0]),
        ("Warn", "pinned.yaml", [0, 0, 0]),
    ] {
        let dir = temp_dir(&format!("fail-on-{actions}-{object}"));
        no_latest(&dir, actions);
        let base = ["eval", "--policies", "policies", "--request", object];
        let (code, out, err) = celgate(&base, &dir, "");
        assert_eq!(code, expected[0], "{actions} {object} default: {err}");
        let answer: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(answer["kind"], "AdmissionReview");
        for (when, code_wanted) in ["never", "deny", "warn"].into_iter().zip(expected) {
            let (code, _, err) = celgate(&[&base[..], &["--fail-on", when]].concat(), &dir, "");
            assert_eq!(
                code, code_wanted,
                "{actions} {object} --fail-on {when}: {err}"
            );
        }
    }
    let dir = temp_dir("fail-on-bad");
    let (code, _, err) = celgate(
        &[
            "eval",
            "--policies",
            ".",
            "--request",
            "-",
            "--fail-on",
            "sometimes",
        ],
        &dir,
        "",
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("[possible values: never, deny, warn]"),
        "{err}"
    );
}

/// `-o yaml` on the commands that printed only JSON: the same document.
#[test]
fn eval_and_expr_print_yaml_on_request() {
    let dir = temp_dir("output-yaml");
    no_latest(&dir, "Deny");
    let base = ["eval", "--policies", "policies", "--request", "latest.yaml"];
    let (_, json, err) = celgate(&base, &dir, "");
    let (code, yaml, _) = celgate(&[&base[..], &["-o", "yaml"]].concat(), &dir, "");
    assert_eq!(code, 0, "{err}");
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let yaml: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
    assert_eq!(json, yaml);
    assert_eq!(yaml["response"]["allowed"], false);

    let (code, out, err) = celgate(&["expr", "-o", "yaml", "{'a': [1, 2]}"], &dir, "");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "a:\n- 1\n- 2\n");
    let (code, out, _) = celgate(&["expr", "--output", "json", "[1]"], &dir, "");
    assert_eq!((code, out.as_str()), (0, "[\n  1\n]\n"));
}

/// `serve` in folder mode without `--policies` does not read a folder relative to wherever
/// it was started: exit 2, saying what to pass.
#[test]
fn serve_without_policies_refuses_with_a_hint() {
    let dir = temp_dir("serve-no-policies");
    let (code, out, err) = celgate_within(
        &[
            "serve",
            "--self-signed",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "off",
        ],
        &dir,
    );
    assert_eq!(code, 2, "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("needs --policies DIR") && err.contains("--policies examples/policies"),
        "{err}"
    );
}

/// The scan summary counts objects and results apart, each with its own noun and plural.
#[test]
fn scan_summary_counts_objects_and_results() {
    let dir = temp_dir("scan-counts");
    no_latest(&dir, "Deny");
    std::fs::create_dir_all(dir.join("one")).unwrap();
    std::fs::copy(dir.join("pinned.yaml"), dir.join("one/pod.yaml")).unwrap();
    let (code, out, err) = celgate(
        &["scan", "--policies", "policies", "--objects", "one"],
        &dir,
        "",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.ends_with(
            "no violations\n1 object scanned, 1 result: 1 pass, 0 fail, 0 error, 0 skip\n"
        ),
        "{out}"
    );
    // Two results for one object: the examples' pod policies both match a Pod.
    let (code, out, err) = celgate(
        &[
            "scan",
            "--policies",
            "examples/policies",
            "--objects",
            "examples/pod.yaml",
        ],
        &repo(),
        "",
    );
    assert!(code == 0 || code == 1, "{err}");
    let last = out.lines().last().unwrap();
    assert!(last.starts_with("1 object scanned, "), "{out}");
    assert!(
        !last.contains(" 1 results") && last.contains(" results: "),
        "{out}"
    );
}

/// `celgate test`'s summary says `1 invalid file`, and `2 invalid files`.
#[test]
fn test_summary_counts_invalid_files_in_the_singular() {
    let dir = temp_dir("invalid-count");
    let suite = "apiVersion: celgate.dev/v1alpha1\nkind: CelgateTest\nbogus: 1\ncases: []\n";
    std::fs::write(dir.join("a.celgate-test.yaml"), suite).unwrap();
    let (code, out, _) = celgate(&["test", "."], &dir, "");
    assert_eq!(code, 2, "{out}");
    assert!(out.ends_with(", 1 invalid file\n"), "{out}");
    std::fs::write(dir.join("b.celgate-test.yaml"), suite).unwrap();
    let (_, out, _) = celgate(&["test", "."], &dir, "");
    assert!(out.ends_with(", 2 invalid files\n"), "{out}");
}

/// `celgate version -o json|yaml`: the version and the Kubernetes versions it knows, for
/// scripts; text by default, as before.
#[test]
fn version_prints_json_and_yaml() {
    let dir = temp_dir("version");
    let (code, out, _) = celgate(&["version"], &dir, "");
    assert_eq!(
        (code, out),
        (0, format!("celgate {}\n", env!("CARGO_PKG_VERSION")))
    );
    let (code, json, _) = celgate(&["version", "-o", "json"], &dir, "");
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(json["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["kubernetes"]["oldest"], "1.27");
    let (_, yaml, _) = celgate(&["version", "--output", "yaml"], &dir, "");
    assert_eq!(
        serde_yaml_ng::from_str::<serde_json::Value>(&yaml).unwrap(),
        json
    );
}

/// The subcommands `celgate [CMD] --help` lists under `Commands:` (clap's own `help` left
/// out), read from the binary so that a new command is checked without editing this test.
fn subcommands(path: &[&str]) -> Vec<String> {
    let dir = temp_dir("help");
    let (code, out, err) = celgate(&[path, &["--help"]].concat(), &dir, "");
    assert_eq!(code, 0, "{err}");
    let Some((_, listed)) = out.split_once("Commands:\n") else {
        return Vec::new();
    };
    listed
        .lines()
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// Every command and nested command, as `["crd", "check"]`.
fn command_paths() -> Vec<Vec<String>> {
    let mut paths = Vec::new();
    for top in subcommands(&[]) {
        let nested = subcommands(&[top.as_str()]);
        paths.push(vec![top.clone()]);
        paths.extend(nested.into_iter().map(|sub| vec![top.clone(), sub]));
    }
    assert!(paths.len() > 10, "{paths:?}");
    paths
}

/// `celgate completion SHELL` prints a script naming every command and nested command; bash
/// accepts the bash script (`bash -n`) where bash is installed.
#[test]
fn completion_scripts_cover_every_command() {
    let dir = temp_dir("completion");
    let paths = command_paths();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let (code, script, err) = celgate(&["completion", shell], &dir, "");
        assert_eq!(code, 0, "{shell}: {err}");
        for path in &paths {
            let name = path.last().unwrap();
            assert!(script.contains(name.as_str()), "{shell}: no {path:?}");
        }
        // A flag of a nested command, and a new flag (fish names them without dashes).
        assert!(script.contains("crds"), "{shell}");
        assert!(script.contains("fail-on"), "{shell}");
        if shell == "bash" {
            let file = dir.join("celgate.bash");
            std::fs::write(&file, &script).unwrap();
            match std::process::Command::new("bash")
                .arg("-n")
                .arg(&file)
                .output()
            {
                Ok(out) => assert!(
                    out.status.success(),
                    "bash -n: {}",
                    String::from_utf8_lossy(&out.stderr)
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => panic!("bash: {e}"),
            }
        }
    }
    let (code, _, err) = celgate(&["completion", "tcsh"], &dir, "");
    assert_eq!(code, 2, "{err}");
}

/// `celgate man` prints celgate.1, which lists every command; `--out DIR` writes it and one
/// page per command and nested command, each with its own flags.
#[test]
fn man_pages_cover_every_command() {
    let dir = temp_dir("man");
    let (code, page, err) = celgate(&["man"], &dir, "");
    assert_eq!(code, 0, "{err}");
    assert!(page.contains(".TH celgate 1"), "{page}");
    let paths = command_paths();
    for path in paths.iter().filter(|p| p.len() == 1) {
        // roff escapes every `-`.
        let name = format!("celgate-{}(1)", path[0]).replace('-', "\\-");
        assert!(page.contains(&name), "{path:?}");
    }
    let (code, out, err) = celgate(&["man", "--out", "pages"], &dir, "");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    assert!(dir.join("pages/celgate.1").is_file());
    for path in &paths {
        let file = dir.join(format!("pages/celgate-{}.1", path.join("-")));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        assert!(text.contains(".SH SYNOPSIS"), "{file:?}");
    }
    let eval = std::fs::read_to_string(dir.join("pages/celgate-eval.1")).unwrap();
    assert!(eval.contains("fail\\-on"), "{eval}");
    // A folder that cannot be made: exit 1, naming it.
    std::fs::write(dir.join("file"), "").unwrap();
    let (code, _, err) = celgate(&["man", "--out", "file/pages"], &dir, "");
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cannot write the man pages into file/pages"),
        "{err}"
    );
}

/// The schemas of schemas/: JSON, read once per test.
fn schema(name: &str) -> serde_json::Value {
    let path = repo().join("schemas").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

/// Checks `value` against `schema` (a part of `root`): the subset of JSON Schema 2020-12
/// that schemas/ uses. No validator crate is in the build and none is worth adding for two
/// files; a keyword this checker does not know fails the test, so the schemas cannot rely on
/// one it would silently skip.
fn check(
    root: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
    errors: &mut Vec<String>,
) {
    use serde_json::Value;
    let Value::Object(keywords) = schema else {
        panic!("{at}: a schema that is not an object: {schema}");
    };
    for (keyword, arg) in keywords {
        match keyword.as_str() {
            "$schema" | "title" | "description" | "$defs" => {}
            "$ref" => {
                let pointer = arg.as_str().and_then(|r| r.strip_prefix('#')).unwrap();
                let target = root
                    .pointer(pointer)
                    .unwrap_or_else(|| panic!("no {pointer}"));
                check(root, target, value, at, errors);
            }
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("{at}: type {arg}"),
                };
                let fits = |t: &str| match t {
                    "object" => value.is_object(),
                    "array" => value.is_array(),
                    "string" => value.is_string(),
                    "boolean" => value.is_boolean(),
                    "integer" => value.is_i64() || value.is_u64(),
                    "number" => value.is_number(),
                    "null" => value.is_null(),
                    other => panic!("{at}: type {other}"),
                };
                if !types.iter().any(|t| fits(t)) {
                    errors.push(format!("{at}: {value} is not of type {arg}"));
                }
            }
            "enum" => {
                if !arg.as_array().unwrap().contains(value) {
                    errors.push(format!("{at}: {value} is not one of {arg}"));
                }
            }
            "required" => {
                for name in arg.as_array().unwrap().iter().filter_map(Value::as_str) {
                    if value.is_object() && value.get(name).is_none() {
                        errors.push(format!("{at}: {name} is required"));
                    }
                }
            }
            "properties" => {
                for (name, sub) in arg.as_object().unwrap() {
                    if let Some(v) = value.get(name) {
                        check(root, sub, v, &format!("{at}.{name}"), errors);
                    }
                }
            }
            "additionalProperties" => {
                let known = keywords.get("properties").and_then(Value::as_object);
                for (name, v) in value.as_object().into_iter().flatten() {
                    if known.is_some_and(|k| k.contains_key(name)) {
                        continue;
                    }
                    match arg {
                        Value::Bool(false) => errors.push(format!("{at}: unknown field {name}")),
                        Value::Bool(true) => {}
                        sub => check(root, sub, v, &format!("{at}.{name}"), errors),
                    }
                }
            }
            "items" => {
                for (i, v) in value.as_array().into_iter().flatten().enumerate() {
                    check(root, arg, v, &format!("{at}[{i}]"), errors);
                }
            }
            "minimum" | "maximum" => {
                if let (Some(n), Some(bound)) = (value.as_f64(), arg.as_f64()) {
                    if (keyword == "minimum" && n < bound) || (keyword == "maximum" && n > bound) {
                        errors.push(format!("{at}: {n} is out of {keyword} {bound}"));
                    }
                }
            }
            "pattern" => {
                let re = regex::Regex::new(arg.as_str().unwrap()).unwrap();
                if value.as_str().is_some_and(|s| !re.is_match(s)) {
                    errors.push(format!("{at}: {value} does not match {arg}"));
                }
            }
            other => panic!("{at}: the schema checker does not know the keyword {other}"),
        }
    }
}

/// The errors of `value` against the schema `root`.
fn schema_errors(root: &serde_json::Value, value: &serde_json::Value) -> Vec<String> {
    let mut errors = Vec::new();
    check(root, root, value, "", &mut errors);
    errors
}

/// Every suite the repository holds: `*.celgate-test.yaml` files (examples, test fixtures)
/// and the docs' ```` ```yaml celgate-test ```` blocks.
fn suites_in_repo() -> Vec<(String, String)> {
    fn walk(dir: &std::path::Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.to_string_lossy().ends_with(".celgate-test.yaml") {
                found.push((
                    path.display().to_string(),
                    std::fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }
    let mut found = Vec::new();
    for dir in ["examples", "tests", "docs"] {
        walk(&repo().join(dir), &mut found);
    }
    for dir in ["docs/users", "docs/operators", "docs/contributors"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            let text = std::fs::read_to_string(&path).unwrap();
            let mut block: Option<String> = None;
            for line in text.lines() {
                match &mut block {
                    None if line.trim() == "```yaml celgate-test" => block = Some(String::new()),
                    Some(b) if line.trim() == "```" => {
                        found.push((path.display().to_string(), std::mem::take(b)));
                        block = None;
                    }
                    Some(b) => {
                        b.push_str(line);
                        b.push('\n');
                    }
                    None => {}
                }
            }
        }
    }
    found
}

/// schemas/celgate-test.schema.json accepts every suite of the repository, and refuses a
/// misspelled field and a wrong type.
#[test]
fn every_suite_in_the_repository_fits_the_test_schema() {
    let root = schema("celgate-test.schema.json");
    let suites = suites_in_repo();
    assert!(suites.len() >= 4, "{}", suites.len());
    for (file, text) in &suites {
        let value: serde_json::Value =
            serde_yaml_ng::from_str(text).unwrap_or_else(|e| panic!("{file}: {e}"));
        let errors = schema_errors(&root, &value);
        assert!(errors.is_empty(), "{file}: {errors:?}");
        // The examples name the schema for editors, by a path that leads to it.
        if file.contains("/examples/") {
            let first = text.lines().next().unwrap_or_default();
            let path = first
                .strip_prefix("# yaml-language-server: $schema=")
                .unwrap_or_else(|| panic!("{file}: no modeline: {first}"));
            let target = std::path::Path::new(file).parent().unwrap().join(path);
            assert!(
                target.ends_with("schemas/celgate-test.schema.json") && target.is_file(),
                "{file}: {path}"
            );
        }
    }
    let bad = serde_json::json!({
        "apiVersion": "celgate.dev/v1alpha1", "kind": "CelgateTest",
        "cases": [{"name": "x", "operation": "PATCH", "expect": {"alowed": true, "code": "403"}}]
    });
    assert_eq!(
        schema_errors(&root, &bad),
        [
            ".cases[0].expect: unknown field alowed",
            ".cases[0].expect.code: \"403\" is not of type \"integer\"",
            ".cases[0].operation: \"PATCH\" is not one of [\"CREATE\",\"UPDATE\",\"DELETE\",\"CONNECT\"]",
        ]
    );
}

/// The test schema names exactly the fields `celgate test` accepts: for each object of the
/// schema, a suite with an unknown field there is refused by the binary with serde's list of
/// the fields it expects (from the Rust types), which must be the schema's properties.
#[test]
fn the_test_schema_has_the_fields_of_the_loader() {
    let root = schema("celgate-test.schema.json");
    let dir = temp_dir("schema-fields");
    // Where each object of the schema is in a suite.
    let places: [(&str, &str); 6] = [
        ("", ""),
        ("/$defs/case", "/cases/0"),
        ("/$defs/userInfo", "/cases/0/userInfo"),
        ("/$defs/expect", "/cases/0/expect"),
        ("/$defs/crdExpect", "/cases/0/expect/crd"),
        ("/$defs/cause", "/cases/0/expect/crd/causes/0"),
    ];
    let closed: Vec<String> = root["$defs"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| d["additionalProperties"] == false)
        .map(|(name, _)| format!("/$defs/{name}"))
        .collect();
    let mut placed: Vec<&str> = places
        .iter()
        .map(|p| p.0)
        .filter(|p| !p.is_empty())
        .collect();
    placed.sort_unstable();
    assert_eq!(
        closed, placed,
        "every closed object of the schema has a place here"
    );
    for (def, place) in places {
        let mut suite = serde_json::json!({
            "apiVersion": "celgate.dev/v1alpha1", "kind": "CelgateTest",
            "cases": [{"name": "x", "userInfo": {}, "expect": {"crd": {"causes": [{"type": "t", "field": "f", "message": "m"}]}}}]
        });
        suite.pointer_mut(place).unwrap()["bogusField"] = 1.into();
        std::fs::write(dir.join("s.celgate-test.yaml"), suite.to_string()).unwrap();
        let (code, out, err) = celgate(&["test", "s.celgate-test.yaml"], &dir, "");
        assert_eq!(code, 2, "{def}: {out}{err}");
        let listed = out
            .split_once("unknown field `bogusField`, expected one of ")
            .unwrap_or_else(|| panic!("{def}: {out}"))
            .1;
        let listed = listed.split(" at line").next().unwrap();
        let mut accepted: Vec<&str> = listed.split(", ").map(|f| f.trim_matches('`')).collect();
        let mut in_schema: Vec<&str> = root
            .pointer(&format!("{def}/properties"))
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        accepted.sort_unstable();
        in_schema.sort_unstable();
        assert_eq!(accepted, in_schema, "{def}");
    }
}

/// schemas/crd-answer.schema.json describes every line `crd check|validate -o json` prints:
/// acceptances, refusals with causes, and `check --costs`.
#[test]
fn crd_json_lines_fit_the_answer_schema() {
    let root = schema("crd-answer.schema.json");
    let runs: [&[&str]; 3] = [
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "-o",
            "json",
            "examples/crds/valid.yaml",
            "examples/crds/invalid.yaml",
        ],
        &[
            "crd",
            "check",
            "--costs",
            "-o",
            "json",
            "examples/crds/crd.yaml",
        ],
        &[
            "crd",
            "validate",
            "--crds",
            "examples/crds",
            "-o",
            "json",
            "examples/pod.yaml",
        ],
    ];
    let mut seen = std::collections::BTreeSet::new();
    for args in runs {
        let (code, out, err) = celgate(args, &repo(), "");
        assert!(code == 0 || code == 1, "{args:?}: {err}");
        for line in out.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            seen.extend(value.as_object().unwrap().keys().cloned());
            let errors = schema_errors(&root, &value);
            assert!(errors.is_empty(), "{args:?}: {line}: {errors:?}");
        }
    }
    // Every property of the schema was printed at least once.
    let properties: std::collections::BTreeSet<String> = root["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(seen, properties);
}
