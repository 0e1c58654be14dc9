//! A Kyverno CLI values file (`kind: Values`, named by a Test's `variables`, or written inline
//! under its `values`), read for ValidatingAdmissionPolicy tests as Kyverno's test
//! documentation describes it (kyverno.io, "kyverno test", Test File Structures).
//!
//! What a ValidatingAdmissionPolicy can see of it: `namespaceSelector` (a list of namespace
//! `name` and `labels`) gives the labels of the namespaces the test's resources are created in,
//! which a binding's or policy's `namespaceSelector` matches. Everything else is a Kyverno
//! variable, which no ValidatingAdmissionPolicy reads: `request.operation: CREATE` (in
//! `globalValues`, or a policy's `resources[].values`) says what celgate does anyway and is
//! accepted; any other value, a ValidatingAdmissionPolicy's `rules`, and `subresources` are
//! refused naming the key rather than run with another meaning. Values of a policy that is not
//! a ValidatingAdmissionPolicy are for cases celgate skips, and are not read.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::Value as Json;

/// The values file's `apiVersion` and `kind` (the older format has neither).
const API_VERSION: &str = "cli.kyverno.io/v1alpha1";
const KIND: &str = "Values";
/// The one Kyverno variable accepted, and the value it must have.
const OPERATION: &str = "request.operation";
const CREATE: &str = "CREATE";

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Values {
    #[serde(default)]
    global_values: BTreeMap<String, Json>,
    #[serde(default)]
    policies: Vec<PolicyValues>,
    #[serde(default)]
    namespace_selector: Vec<Namespace>,
    #[serde(flatten)]
    other: BTreeMap<String, Json>,
}

#[derive(Debug, Deserialize)]
struct PolicyValues {
    name: String,
    #[serde(default)]
    resources: Vec<ResourceValues>,
    #[serde(default)]
    rules: Vec<Json>,
    #[serde(flatten)]
    other: BTreeMap<String, Json>,
}

#[derive(Debug, Deserialize)]
struct ResourceValues {
    #[serde(default)]
    values: BTreeMap<String, Json>,
    #[serde(flatten)]
    other: BTreeMap<String, Json>,
}

/// A namespace and its labels, as the values file gives them.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct Namespace {
    pub name: String,
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
}

/// Why a values file is refused; `at` is the key's path in the file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ValuesError {
    #[error("{0}")]
    Parse(#[from] serde_json::Error),
    #[error("{0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    #[error("apiVersion and kind: expected {API_VERSION} {KIND}, got {found}")]
    NotValues { found: String },
    #[error("{at}: {value}: celgate admits each Kyverno test resource as a CREATE (an UPDATE or DELETE needs the old object, which a Kyverno test does not give); write a celgate suite for other operations")]
    Operation { at: String, value: String },
    #[error("{at}: not supported by celgate: a ValidatingAdmissionPolicy reads no Kyverno variable (only {OPERATION}: {CREATE} is accepted)")]
    Variable { at: String },
    #[error("{at}.rules: a ValidatingAdmissionPolicy has no rules")]
    Rules { at: String },
    #[error("{at}: not supported by celgate")]
    Unsupported { at: String },
    #[error("{at}: unknown field of a Kyverno values file")]
    Unknown { at: String },
    #[error("namespaceSelector[{index}]: namespace {name:?} is listed twice")]
    Twice { index: usize, name: String },
}

/// Fields of a values file read and meaning nothing for the run.
const IGNORED: &[&str] = &["apiVersion", "kind", "metadata"];

/// The namespaces (with their labels) that the values `text` (a YAML file) gives; `vaps`
/// are the test's ValidatingAdmissionPolicies, whose values are checked.
pub(crate) fn read_file(
    text: &str,
    vaps: &BTreeSet<String>,
) -> Result<Vec<Namespace>, ValuesError> {
    read(serde_yaml_ng::from_str(text)?, vaps)
}

/// As [`read_file`], for values written inline in the Test.
pub(crate) fn read(value: Json, vaps: &BTreeSet<String>) -> Result<Vec<Namespace>, ValuesError> {
    // The older format has neither apiVersion nor kind; one given must be Kyverno's.
    let (api, kind) = (value.get("apiVersion"), value.get("kind"));
    if (api.is_some() || kind.is_some())
        && (api.and_then(Json::as_str) != Some(API_VERSION)
            || kind.and_then(Json::as_str) != Some(KIND))
    {
        let show = |v: Option<&Json>| v.map_or_else(|| "none".to_string(), Json::to_string);
        return Err(ValuesError::NotValues {
            found: format!("{} {}", show(api), show(kind)),
        });
    }
    let values: Values = serde_json::from_value(value)?;
    for key in values.other.keys() {
        if key == "subresources" {
            return Err(ValuesError::Unsupported { at: key.clone() });
        }
        if !IGNORED.contains(&key.as_str()) {
            return Err(ValuesError::Unknown { at: key.clone() });
        }
    }
    check_variables("globalValues", &values.global_values)?;
    for (i, policy) in values.policies.iter().enumerate() {
        let at = format!("policies[{i}]");
        if let Some(key) = policy.other.keys().next() {
            return Err(ValuesError::Unknown {
                at: format!("{at}.{key}"),
            });
        }
        // Values of a Kyverno policy are for its cases, which celgate skips.
        if !vaps.contains(&policy.name) {
            continue;
        }
        if !policy.rules.is_empty() {
            return Err(ValuesError::Rules { at });
        }
        for (j, resource) in policy.resources.iter().enumerate() {
            let at = format!("{at}.resources[{j}]");
            if let Some(key) = resource.other.keys().find(|k| k.as_str() != "name") {
                return Err(ValuesError::Unknown {
                    at: format!("{at}.{key}"),
                });
            }
            check_variables(&format!("{at}.values"), &resource.values)?;
        }
    }
    let mut seen = BTreeSet::new();
    for (index, ns) in values.namespace_selector.iter().enumerate() {
        if !seen.insert(ns.name.as_str()) {
            return Err(ValuesError::Twice {
                index,
                name: ns.name.clone(),
            });
        }
    }
    Ok(values.namespace_selector)
}

/// Refuses every Kyverno variable but `request.operation: CREATE`.
fn check_variables(at: &str, values: &BTreeMap<String, Json>) -> Result<(), ValuesError> {
    for (key, value) in values {
        let at = format!("{at}.{key}");
        if key != OPERATION {
            return Err(ValuesError::Variable { at });
        }
        if value != CREATE {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            return Err(ValuesError::Operation { at, value });
        }
    }
    Ok(())
}
