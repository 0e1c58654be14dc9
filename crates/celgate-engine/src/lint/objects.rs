//! `celgate lint`'s checks beyond type checking: what the API server refuses when each policy
//! and binding is created (its validation, `pkg/apis/admissionregistration/validation`, and a
//! policy's expressions in the creation-time CEL environment: the same checks `eval` and
//! `test` refuse a folder for), and what only the set of objects shows: a binding naming a
//! policy that is not there, a paramRef whose param kind is neither in the files nor a
//! built-in kind, or whose name or selector picks no param object in the files (saying so
//! when it picks an object of another kind than the policy's paramKind).

use serde::Serialize;
use serde_json::Value as Json;

use crate::matching::selector::{labels_of, Selector};
use crate::model::{Binding, BindingSpec, MutatingBinding, MutatingPolicy, Policy};
use crate::policy::validate::FieldErrors;

use crate::schemas::{Gvk, Kinds};

/// How much a finding matters: an error fails `celgate lint`, a warning only with
/// `--fail-on warning`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The API server refuses the object, or it cannot work as written.
    Error,
    /// It works, maybe not as meant.
    Warning,
}

/// One thing found wrong with one object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Which of the documents checked (an index into them).
    #[serde(skip)]
    pub document: usize,
    /// The object's kind.
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// Error or warning.
    pub severity: Severity,
    /// What is wrong, in the API server's words where it has some.
    pub message: String,
}

fn is_kind(d: &Json, kind: &str) -> bool {
    d["kind"] == kind
        && d["apiVersion"]
            .as_str()
            .is_some_and(|v| crate::model::API_VERSIONS.contains(&v))
}

/// The creation-time and cross-object findings of `docs`, as the API server of Kubernetes
/// 1.`version` would see them, in document order. A policy or binding that does not read as
/// one at all is left to [`super::lint_documents`]' error.
pub fn check_objects(docs: &[Json], version: u16) -> Vec<Finding> {
    let kinds = Kinds::new(docs);
    let policies: Vec<(usize, Policy)> = docs
        .iter()
        .enumerate()
        .filter(|(_, d)| is_kind(d, "ValidatingAdmissionPolicy"))
        .filter_map(|(i, d)| Some((i, serde_json::from_value(d.clone()).ok()?)))
        .collect();
    let mutating: Vec<(usize, MutatingPolicy)> = docs
        .iter()
        .enumerate()
        .filter(|(_, d)| is_kind(d, "MutatingAdmissionPolicy"))
        .filter_map(|(i, d)| Some((i, serde_json::from_value(d.clone()).ok()?)))
        .collect();
    // What the binding checks read of a mutating policy: the parts it shares with a
    // validating one.
    let mutating_shared: Vec<Policy> = mutating
        .iter()
        .map(|(_, p)| crate::policy::compile_mutating::shared_parts(p))
        .collect();
    let mut out = Vec::new();
    let mut push = |document: usize, kind: &str, name: &str, severity, message: String| {
        out.push(Finding {
            document,
            kind: kind.to_string(),
            name: name.to_string(),
            severity,
            message,
        })
    };
    for (i, d) in docs.iter().enumerate() {
        if is_kind(d, "ValidatingAdmissionPolicy") {
            let Some((_, p)) = policies.iter().find(|(j, _)| *j == i) else {
                continue;
            };
            let kind = "ValidatingAdmissionPolicy";
            for e in invalid(crate::policy::compile::creation_errors(p, version)) {
                push(i, kind, &p.metadata.name, Severity::Error, e);
            }
        } else if is_kind(d, "ValidatingAdmissionPolicyBinding") {
            let Ok(b) = serde_json::from_value::<Binding>(d.clone()) else {
                continue;
            };
            let kind = "ValidatingAdmissionPolicyBinding";
            let name = b.metadata.name.clone();
            for e in invalid(crate::policy::validate::validate_binding(&b)) {
                push(i, kind, &name, Severity::Error, e);
            }
            let policy = policies
                .iter()
                .map(|(_, p)| p)
                .find(|p| p.metadata.name == b.spec.policy_name);
            for (severity, message) in binding_references(&b, policy, docs, &kinds, POLICY) {
                push(i, kind, &name, severity, message);
            }
        } else if is_kind(d, "MutatingAdmissionPolicy") {
            let Some((_, p)) = mutating.iter().find(|(j, _)| *j == i) else {
                continue;
            };
            let kind = "MutatingAdmissionPolicy";
            let errors = crate::policy::compile_mutating::mutating_creation_errors(p, version);
            for e in invalid(errors) {
                push(i, kind, &p.metadata.name, Severity::Error, e);
            }
        } else if is_kind(d, "MutatingAdmissionPolicyBinding") {
            let Ok(b) = serde_json::from_value::<MutatingBinding>(d.clone()) else {
                continue;
            };
            let kind = "MutatingAdmissionPolicyBinding";
            let name = b.metadata.name.clone();
            let validation = crate::policy::validate_mutating::validate_mutating_binding(&b);
            for e in invalid(validation) {
                push(i, kind, &name, Severity::Error, e);
            }
            let policy = mutating_shared
                .iter()
                .find(|p| p.metadata.name == b.spec.policy_name);
            let shared = Binding {
                metadata: b.metadata.clone(),
                spec: BindingSpec {
                    policy_name: b.spec.policy_name.clone(),
                    param_ref: b.spec.param_ref.clone(),
                    match_resources: b.spec.match_resources.clone(),
                    validation_actions: Vec::new(),
                },
            };
            let references = binding_references(&shared, policy, docs, &kinds, MUTATING_POLICY);
            for (severity, message) in references {
                push(i, kind, &name, severity, message);
            }
        }
    }
    out
}

const POLICY: &str = "ValidatingAdmissionPolicy";
const MUTATING_POLICY: &str = "MutatingAdmissionPolicy";

/// Each field error as its own message.
fn invalid(errors: FieldErrors) -> Vec<String> {
    errors.0.iter().map(ToString::to_string).collect()
}

/// Whether a document is one a paramRef picks (by name or by selector).
type Picks = Box<dyn Fn(&Json) -> bool>;

/// What the binding names that the documents lack: its policy, its param kind, its param.
fn binding_references(
    b: &Binding,
    policy: Option<&Policy>,
    docs: &[Json],
    kinds: &Kinds,
    policy_kind: &str,
) -> Vec<(Severity, String)> {
    let mut out = Vec::new();
    if b.spec.policy_name.is_empty() {
        return out; // the validation's `Required value` says it
    }
    let Some(policy) = policy else {
        out.push((
            Severity::Error,
            format!(
                "spec.policyName: policy {:?} not found: the binding does nothing (the files hold no {policy_kind} of that name)",
                b.spec.policy_name
            ),
        ));
        return out;
    };
    let (Some(param_ref), Some(param_kind)) = (&b.spec.param_ref, &policy.spec.param_kind) else {
        return out;
    };
    let (group, version) = param_kind
        .api_version
        .split_once('/')
        .unwrap_or(("", param_kind.api_version.as_str()));
    let gvk = Gvk {
        group: group.to_string(),
        version: version.to_string(),
        kind: param_kind.kind.clone(),
    };
    let of_kind: Vec<&Json> = docs
        .iter()
        .filter(|d| {
            d["apiVersion"] == param_kind.api_version.as_str() && d["kind"] == gvk.kind.as_str()
        })
        .collect();
    if of_kind.is_empty() && !kinds.knows_kind(&gvk) {
        out.push((
            Severity::Error,
            format!(
                "spec.paramRef: the policy's paramKind {gvk} is not a built-in kind, and no CustomResourceDefinition or object of that kind is in the files: every request the binding matches fails (failurePolicy {})",
                policy.spec.failure_policy.as_deref().unwrap_or("Fail")
            ),
        ));
        return out;
    }
    let namespace = param_ref.namespace.as_deref().filter(|n| !n.is_empty());
    let at = namespace.map_or(String::new(), |ns| format!(" in namespace {ns:?}"));
    // What the reference picks, and how it reads in a message: by name, or by selector.
    let (field, wanted, picks): (&str, String, Picks) =
        if let Some(name) = param_ref.name.as_deref().filter(|n| !n.is_empty()) {
            let name = name.to_string();
            (
                "spec.paramRef.name",
                format!("{} {name:?}{at}", gvk.kind),
                Box::new(move |d: &Json| d["metadata"]["name"] == name.as_str()),
            )
        } else if let Some(selector) = &param_ref.selector {
            // A selector that does not compile is the validation's `Invalid value`.
            let Ok(selector) = Selector::compile(selector) else {
                return out;
            };
            (
                "spec.paramRef.selector",
                format!("{} matching the selector{at}", gvk.kind),
                Box::new(move |d: &Json| selector.matches(&labels_of(d).unwrap_or_default())),
            )
        } else {
            return out; // the validation's `Required value` says it
        };
    let in_place =
        |d: &&Json| namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns) && picks(d);
    if of_kind.iter().any(in_place) {
        return out;
    }
    // The API server looks params up by the policy's paramKind only (the dispatcher's
    // `collectParams`): an object the reference picks but of another kind or version is
    // not a param, the usual slip being a paramKind that names the wrong kind.
    let other_kind = docs
        .iter()
        .filter(|d| !is_admission_object(d))
        .find(|d| in_place(d))
        .map(|d| {
            format!(
                ", but {} ({}) {:?} is: params are looked up by the policy's paramKind, {} {};",
                d["kind"].as_str().unwrap_or(""),
                d["apiVersion"].as_str().unwrap_or(""),
                d["metadata"]["name"].as_str().unwrap_or(""),
                param_kind.api_version,
                param_kind.kind
            )
        })
        .unwrap_or_default();
    // Same rule as for a missing name: the consequence decides. With Deny every matched
    // request is denied (`collectParams` fails when no param is found, by name or by
    // selector); with Allow the policy is skipped, which may be meant (params created in
    // the cluster later, or per namespace).
    let sep = if other_kind.is_empty() {
        ":".to_string()
    } else {
        other_kind
    };
    let deny = param_ref.parameter_not_found_action.as_deref() != Some("Allow");
    out.push(if deny {
        (
            Severity::Error,
            format!("{field}: no {wanted} in the files{sep} with parameterNotFoundAction Deny every request the binding matches is denied"),
        )
    } else {
        (
            Severity::Warning,
            format!("{field}: no {wanted} in the files{sep} with parameterNotFoundAction Allow the policy is not evaluated"),
        )
    });
    out
}

/// A policy, binding or CRD: objects that are never params.
fn is_admission_object(d: &Json) -> bool {
    is_kind(d, "ValidatingAdmissionPolicy")
        || is_kind(d, "ValidatingAdmissionPolicyBinding")
        || d["kind"] == "CustomResourceDefinition"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(yaml: &str) -> Vec<Json> {
        serde_yaml_ng::Deserializer::from_str(yaml)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect()
    }

    const POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
"#;

    fn binding(spec: &str) -> String {
        format!("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {{name: b}}\nspec: {spec}\n")
    }

    fn messages(yaml: &str) -> Vec<(Severity, String)> {
        check_objects(&docs(yaml), 32)
            .into_iter()
            .map(|f| (f.severity, f.message))
            .collect()
    }

    #[test]
    fn a_clean_folder_has_no_finding() {
        let y = format!("{POLICY}---\n{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: limits, namespace: default}}\n",
            binding("{policyName: p, validationActions: [Deny], paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}}"));
        assert_eq!(messages(&y), []);
    }

    #[test]
    fn missing_policy_param_kind_and_param() {
        let m = messages(&binding("{policyName: nope, validationActions: [Deny]}"));
        assert_eq!(m.len(), 1);
        assert!(
            m[0].1
                .starts_with("spec.policyName: policy \"nope\" not found"),
            "{m:?}"
        );

        let y = format!("{POLICY}---\n{}", binding("{policyName: p, validationActions: [Deny], paramRef: {name: limits, namespace: default, parameterNotFoundAction: Allow}}"));
        let m = messages(&y);
        assert_eq!(m.len(), 1, "{m:?}");
        assert_eq!(m[0].0, Severity::Warning);

        let y = format!("{}---\n{}", POLICY.replace("{apiVersion: v1, kind: ConfigMap}", "{apiVersion: example.com/v1, kind: Limits}"),
            binding("{policyName: p, validationActions: [Deny], paramRef: {name: x, parameterNotFoundAction: Deny}}"));
        let m = messages(&y);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(
            m[0].1
                .contains("paramKind example.com/v1, Kind=Limits is not a built-in kind"),
            "{m:?}"
        );
    }

    #[test]
    fn creation_time_checks() {
        let y = format!("{}---\n{}", POLICY.replace("operations: [CREATE]", "operations: [PATCH]").replace("expression: \"true\"", "expression: \"1\""),
            binding("{policyName: p, validationActions: [deny], paramRef: {name: x, parameterNotFoundAction: Allow}}"));
        let m: Vec<String> = messages(&y)
            .into_iter()
            .filter(|(s, _)| *s == Severity::Error)
            .map(|(_, m)| m)
            .collect();
        assert!(m.iter().any(|e| e.contains("PATCH")), "{m:?}");
        assert!(
            m.iter()
                .any(|e| e.contains("spec.validations[0].expression")),
            "{m:?}"
        );
        assert!(m.iter().any(|e| e.contains("\"deny\"")), "{m:?}");
    }
}
