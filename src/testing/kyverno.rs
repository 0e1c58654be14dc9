//! Reads a Kyverno CLI test file (`kyverno-test.yaml`: `apiVersion: cli.kyverno.io/v1alpha1`,
//! `kind: Test`, or the older format without them, whose `name`, `policies`, `resources` and
//! `results` are at the top level) whose policies are native ValidatingAdmissionPolicies, as a
//! celgate suite with the same meaning, so that its users can point `celgate test` at their
//! folders. A file named `kyverno-test.yaml` in neither format is refused, never skipped.
//!
//! What maps: `policies` (with their bindings; a policy given without one is bound with
//! `validationActions: [Deny]`, as the Kyverno CLI applies a lone policy), `resources` (the
//! objects under test, each admitted as a CREATE by the default test user),
//! `paramResources` and `clusterResources` (cluster state), `variables` (a values file) or
//! `values` (the same, inline) as far as a ValidatingAdmissionPolicy can see them
//! ([`values`]: the namespaces' labels), and each `results[]` entry:
//! one case per listed resource (`name` or `namespace/name`, of `kind`; the deprecated
//! `resource`, `namespace` and `status` too) expecting the policy's result `pass`, `fail`,
//! `skip` or `error` (`warn`: the policy fails under a binding that only warns, so `fail`).
//! Namespaces the resources use are created (with their name label) unless given.
//! What does not: Kyverno policies (a result with a `rule`, or naming a policy that is not a
//! ValidatingAdmissionPolicy, becomes a skipped case saying so), and `userinfo`,
//! `exceptions`, `checks`, `jsonPayload(s)`, `targetResources`, `context`,
//! `patchedResource`, `generatedResource`, `cloneSourceResource`: a file using them is
//! refused (exit 2) naming the field, rather than run with a different meaning.
//! `--update` does not write into a Kyverno file (it says so).

mod values;

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{json, Value as Json};

use super::refs::Refs;
use super::{Case, Expect, Expected, Suite};

pub const FILE_NAME: &str = "kyverno-test.yaml";
/// The hidden folder Kyverno's policy library (kyverno/policies) keeps each policy's test in.
pub const HIDDEN_FOLDER: &str = ".kyverno-test";
pub const API_VERSION: &str = "cli.kyverno.io/v1alpha1";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Test {
    #[serde(default)]
    policies: Vec<String>,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    param_resources: Vec<String>,
    #[serde(default)]
    cluster_resources: Vec<String>,
    /// A values file, relative to the test file.
    #[serde(default)]
    variables: Option<String>,
    /// Values written inline.
    #[serde(default)]
    values: Option<Json>,
    #[serde(default)]
    results: Vec<TestResult>,
    #[serde(flatten)]
    other: BTreeMap<String, Json>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TestResult {
    policy: String,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default)]
    result: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    resources: Vec<String>,
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(flatten)]
    other: BTreeMap<String, Json>,
}

/// Fields of a Test that celgate does not run (see the module comment).
const UNSUPPORTED: &[&str] = &[
    "userinfo",
    "exceptions",
    "checks",
    "jsonPayload",
    "jsonPayloads",
    "targetResources",
    "context",
];
const UNSUPPORTED_RESULT: &[&str] = &[
    "patchedResource",
    "generatedResource",
    "cloneSourceResource",
];
/// Fields that are read and mean nothing for the run.
const IGNORED: &[&str] = &["apiVersion", "kind", "metadata", "name"];
const IGNORED_RESULT: &[&str] = &["isValidatingAdmissionPolicy"];

/// Why a file named `kyverno-test.yaml` is not read as a Kyverno CLI Test.
pub const NOT_A_TEST: &str = "not a Kyverno CLI test file: expected apiVersion: \
    cli.kyverno.io/v1alpha1 and kind: Test, or the older format without them (name, policies, \
    resources and results at the top level)";

/// Whether `text` is a Kyverno CLI Test: `apiVersion: cli.kyverno.io/v1alpha1` and
/// `kind: Test`, or the older format, a mapping with `results` and neither field (a celgate
/// suite has `cases`, never `results`).
pub fn is_kyverno(text: &str) -> bool {
    serde_yaml_ng::from_str::<Json>(text).is_ok_and(|v| {
        (v["apiVersion"] == API_VERSION && v["kind"] == "Test")
            || (v.get("apiVersion").is_none()
                && v.get("kind").is_none()
                && v.get("results").is_some())
    })
}

/// The celgate suite a Kyverno Test means; the files it names are read through `base`.
pub(super) fn suite(file: &str, text: &str, base: Refs<'_>) -> Result<Suite, String> {
    let load = |rel: &str| -> Result<Vec<Json>, String> {
        let loaded = base.load(rel).map_err(|e| e.to_string())?;
        Ok(loaded.into_iter().map(|l| l.object).collect())
    };
    let test: Test = serde_yaml_ng::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    for key in test.other.keys() {
        if UNSUPPORTED.contains(&key.as_str()) {
            return Err(format!(
                "{file}: {key}: not supported by celgate (it runs ValidatingAdmissionPolicies only)"
            ));
        }
        if !IGNORED.contains(&key.as_str()) {
            return Err(format!("{file}: {key}: unknown field of a Kyverno Test"));
        }
    }
    let mut policies = Vec::new();
    for (i, p) in test.policies.iter().enumerate() {
        policies.extend(load(p).map_err(|e| format!("{file}: policies[{i}]: {e}"))?);
    }
    let mut objects = Vec::new();
    for (i, p) in test.resources.iter().enumerate() {
        objects.extend(load(p).map_err(|e| format!("{file}: resources[{i}]: {e}"))?);
    }
    let mut state = Vec::new();
    for (field, list) in [
        ("paramResources", &test.param_resources),
        ("clusterResources", &test.cluster_resources),
    ] {
        for (i, p) in list.iter().enumerate() {
            state.extend(load(p).map_err(|e| format!("{file}: {field}[{i}]: {e}"))?);
        }
    }
    let name_of = |o: &Json| o["metadata"]["name"].as_str().unwrap_or("").to_string();
    let vaps: BTreeSet<String> = policies
        .iter()
        .filter(|o| o["kind"] == "ValidatingAdmissionPolicy")
        .map(name_of)
        .collect();
    let bound: BTreeSet<String> = policies
        .iter()
        .filter(|o| o["kind"] == "ValidatingAdmissionPolicyBinding")
        .filter_map(|o| o["spec"]["policyName"].as_str().map(str::to_string))
        .collect();
    let labelled = namespace_labels(file, &test, base, &vaps)?;
    let mut inline: Vec<Json> = Vec::new();
    for p in vaps.difference(&bound) {
        inline.push(json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": format!("{p}-celgate-binding")},
            "spec": {"policyName": p, "validationActions": ["Deny"]},
        }));
    }
    let mut namespaces: BTreeSet<String> = BTreeSet::new();
    let mut cases = Vec::new();
    for (i, r) in test.results.iter().enumerate() {
        let at = format!("{file}: results[{i}]");
        for key in r.other.keys() {
            if UNSUPPORTED_RESULT.contains(&key.as_str()) {
                return Err(format!("{at}.{key}: not supported by celgate"));
            }
            if !IGNORED_RESULT.contains(&key.as_str()) {
                return Err(format!(
                    "{at}.{key}: unknown field of a Kyverno test result"
                ));
            }
        }
        let result = r
            .result
            .as_deref()
            .or(r.status.as_deref())
            .ok_or_else(|| format!("{at}.result: required"))?;
        let expected = match result {
            "pass" => Expected::Pass,
            "fail" | "warn" => Expected::Fail,
            "skip" => Expected::Skip,
            "error" => Expected::Error,
            other => {
                return Err(format!(
                    "{at}.result: expected pass, fail, warn, skip or error, got {other:?}"
                ))
            }
        };
        let names: Vec<&String> = r.resources.iter().chain(r.resource.iter()).collect();
        for resource in names {
            let (ns, name) = match resource.split_once('/') {
                Some((ns, name)) => (Some(ns.to_string()), name.to_string()),
                None => (r.namespace.clone(), resource.clone()),
            };
            let case_name = format!("{}: {}/{resource}", r.policy, r.kind);
            let native = r.rule.is_none() && vaps.contains(&r.policy);
            let object = objects.iter().find(|o| {
                o["kind"] == r.kind.as_str()
                    && name_of(o) == name
                    && ns.as_deref().is_none_or(|n| {
                        o["metadata"]["namespace"].as_str().unwrap_or("default") == n
                    })
            });
            let mut case = Case {
                name: case_name,
                operation: None,
                object: None,
                old_object: None,
                namespace: ns.clone(),
                user_info: None,
                sub_resource: None,
                dry_run: None,
                options: None,
                review: None,
                skip: false,
                expect: None,
            };
            if !native {
                case.name
                    .push_str(" (not a ValidatingAdmissionPolicy: skipped)");
                case.skip = true;
                cases.push(case);
                continue;
            }
            let object = object.ok_or_else(|| {
                format!(
                    "{at}: no resource {resource:?} of kind {:?} in the test's resources",
                    r.kind
                )
            })?;
            if let Some(n) = ns
                .clone()
                .or_else(|| object["metadata"]["namespace"].as_str().map(str::to_string))
            {
                namespaces.insert(n);
            }
            case.object = Some(object.clone());
            case.expect = Some(Expect {
                policies: Some(BTreeMap::from([(r.policy.clone(), expected)])),
                ..Expect::default()
            });
            cases.push(case);
        }
    }
    namespaces.insert("default".into());
    let given: BTreeSet<String> = state
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .map(name_of)
        .collect();
    if let Some((field, labelled)) = &labelled {
        for (i, ns) in labelled.iter().enumerate() {
            if given.contains(&ns.name) {
                return Err(format!(
                    "{file}: {field}namespaceSelector[{i}]: namespace {:?} is also given in the \
                     test's resources: give its labels in one place",
                    ns.name
                ));
            }
            namespaces.remove(&ns.name);
            inline.push(json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns.name, "labels": ns.labels},
            }));
        }
    }
    for n in namespaces.difference(&given) {
        inline.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}));
    }

    Ok(Suite {
        api_version: super::API_VERSION.into(),
        kind: super::KIND.into(),
        metadata: None,
        policies: test.policies,
        resources: test
            .param_resources
            .into_iter()
            .chain(test.cluster_resources)
            .collect(),
        objects: inline,
        cluster_defaults: true,
        cases,
    })
}

/// The namespaces the test's values (`variables` or `values`) label, and the prefix that
/// names where they were given in a message; `None` without values.
fn namespace_labels(
    file: &str,
    test: &Test,
    base: Refs<'_>,
    vaps: &BTreeSet<String>,
) -> Result<Option<(String, Vec<values::Namespace>)>, String> {
    match (&test.variables, &test.values) {
        (Some(_), Some(_)) => Err(format!(
            "{file}: variables and values: give the values in one of them"
        )),
        (Some(rel), None) => {
            let at = format!("variables: {rel}: ");
            let (_, text) = base
                .read(rel)
                .map_err(|e| format!("{file}: variables: {e}"))?;
            let labelled =
                values::read_file(&text, vaps).map_err(|e| format!("{file}: {at}{e}"))?;
            Ok(Some((at, labelled)))
        }
        (None, Some(inline)) => {
            let at = "values: ".to_string();
            let labelled =
                values::read(inline.clone(), vaps).map_err(|e| format!("{file}: {at}{e}"))?;
            Ok(Some((at, labelled)))
        }
        (None, None) => Ok(None),
    }
}
