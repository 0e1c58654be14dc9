//! `celgate lint`: the API server's type checking of ValidatingAdmissionPolicies
//! (`status.typeChecking`, `plugin/policy/validating/typechecking.go`), offline.
//!
//! For each policy: the kinds its matchConstraints name (no wildcards, no subresources, at
//! most 10), each with a schema (built-in kinds from the `kinds` table, CRDs from the
//! folder); every validation's `expression` and `messageExpression` is type-checked once per
//! kind with `object` and `oldObject` typed by that kind's schema and `params` by the
//! paramKind's, variables compiled first in the same environment. The warnings are the API
//! server's `expressionWarnings`: `{fieldRef, warning}` with one `<GVK>: <errors>` block per
//! kind whose check failed.
//!
//! MutatingAdmissionPolicies, which the API server does not type-check, have their mutations
//! checked against the same kinds' schemas (`mutations`), reported the same way.

mod decl;

mod mutations;
mod objects;

pub use objects::{check_objects, Finding, Severity};

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value as Json;

use crate::model::{MutatingPolicy, Policy};
use celgate_cel::vap::{vap_env_typed, Decls};
use celgate_cel::Type;

use crate::schemas::{Gvk, Kinds};
use decl::{decl_type, Naming};

/// `maxTypesToCheck`: how many kinds a policy is checked against at most.
pub(crate) const MAX_TYPES_TO_CHECK: usize = 10;

/// One entry of `status.typeChecking.expressionWarnings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpressionWarning {
    /// The expression's field in the policy (`spec.validations[0].expression`).
    pub field_ref: String,
    /// The type errors, one `<GVK>: <errors>` block per kind whose check failed.
    pub warning: String,
}

/// Which kind of policy a [`PolicyLint`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyKind {
    /// A ValidatingAdmissionPolicy: its validations type-checked as the API server does.
    Validating,
    /// A MutatingAdmissionPolicy: its mutations checked against the kinds' schemas.
    Mutating,
}

/// What type checking says of one policy.
#[derive(Debug, Clone)]
pub struct PolicyLint {
    /// Validating or mutating.
    pub kind: PolicyKind,
    /// The policy's name.
    pub name: String,
    /// The kinds the expressions were checked against (those with a schema), in order.
    pub checked: Vec<Gvk>,
    /// The kinds the matchConstraints name that have no schema (not checked).
    pub unresolved: Vec<Gvk>,
    /// The policy's `expressionWarnings`.
    pub warnings: Vec<ExpressionWarning>,
}

/// Which Kubernetes behaviour the check follows (it changed across releases).
#[derive(Debug, Clone, Copy)]
struct Behaviour {
    version: u16,
    naming: Naming,
    /// From 1.36, `params` is declared (as `dyn`) whenever the policy has a paramKind; before,
    /// only when the paramKind's schema resolved, so `params` is an undeclared reference
    /// otherwise.
    params_without_schema: bool,
}

impl Behaviour {
    fn of(version: u16) -> Behaviour {
        Behaviour {
            version,
            naming: Naming {
                keywords_as_field_names: version >= 31,
            },
            params_without_schema: version >= 36,
        }
    }
}

/// Why a set of documents cannot be type-checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LintError {
    /// A ValidatingAdmissionPolicy whose spec does not read.
    #[error("ValidatingAdmissionPolicy {name:?}: {source}")]
    Policy {
        /// The policy's name.
        name: String,
        /// Why it does not read.
        #[source]
        source: serde_json::Error,
    },
    /// A MutatingAdmissionPolicy whose spec does not read.
    #[error("MutatingAdmissionPolicy {name:?}: {source}")]
    MutatingPolicy {
        /// The policy's name.
        name: String,
        /// Why it does not read.
        #[source]
        source: serde_json::Error,
    },
}

/// Type-checks every policy among `docs` (ValidatingAdmissionPolicy of
/// `admissionregistration.k8s.io`), with the CRDs among them, as the API server of
/// Kubernetes 1.`version` would, and checks the mutations of every MutatingAdmissionPolicy
/// against the same schemas. Documents that are not policies are ignored; a policy whose
/// spec does not read is an error naming it. Sorted by name, validating first.
pub fn lint_documents(docs: &[Json], version: u16) -> Result<Vec<PolicyLint>, LintError> {
    let kinds = Kinds::new(docs);
    let mut out = Vec::new();
    for d in docs {
        let admission = d["apiVersion"]
            .as_str()
            .is_some_and(|v| crate::model::API_VERSIONS.contains(&v));
        if admission && d["kind"] == "MutatingAdmissionPolicy" {
            let policy =
                <MutatingPolicy as serde::Deserialize>::deserialize(d).map_err(|source| {
                    LintError::MutatingPolicy {
                        name: d["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        source,
                    }
                })?;
            out.push(mutations::lint_mutating_policy(&policy, &kinds, version));
            continue;
        }
        if !(admission && d["kind"] == "ValidatingAdmissionPolicy") {
            continue;
        }
        let policy =
            <Policy as serde::Deserialize>::deserialize(d).map_err(|source| LintError::Policy {
                name: d["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                source,
            })?;
        out.push(lint_policy(&policy, &kinds, version));
    }
    out.sort_by(|a, b| (&a.name, a.kind).cmp(&(&b.name, b.kind)));
    Ok(out)
}

/// `typesToCheck`: the kinds the resource rules name, sorted by group, version and kind.
/// A rule with a wildcard group or version is skipped whole; wildcard resources and
/// subresources are skipped; the walk stops once [`MAX_TYPES_TO_CHECK`] kinds were found
/// (counting repeats, as in-tree).
pub(crate) fn types_to_check(policy: &Policy, kinds: &Kinds) -> Vec<Gvk> {
    let mut gvks = BTreeSet::new();
    let Some(mc) = &policy.spec.match_constraints else {
        return Vec::new();
    };
    let mut count = 0;
    for rule in &mc.resource_rules {
        if rule.api_groups.iter().any(|g| g.contains('*'))
            || rule.api_versions.iter().any(|v| v.contains('*'))
        {
            continue;
        }
        let mut groups = rule.api_groups.clone();
        let mut versions = rule.api_versions.clone();
        let mut resources: Vec<String> = rule
            .resources
            .iter()
            .filter(|r| !r.contains(['*', '/']))
            .cloned()
            .collect();
        groups.sort();
        versions.sort();
        resources.sort();
        for g in &groups {
            for v in &versions {
                for r in &resources {
                    for gvk in kinds.kinds_for(g, v, r) {
                        gvks.insert(gvk);
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            return gvks.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    // BTreeSet orders by group, version, kind: `sortGVKList`'s order.
    gvks.into_iter().collect()
}

/// The root type name of a kind. In-tree it is the kind followed by the clock's
/// nanoseconds (`generateUniqueTypeName`), which differs on every run; celgate writes the
/// kind alone, so messages naming an object type are stable.
fn type_name(gvk: &Gvk) -> String {
    gvk.kind.clone()
}

/// The declared type of a kind's objects, or `None` when its schema is not found.
fn kind_type(kinds: &Kinds, gvk: &Gvk, behaviour: Behaviour) -> Option<Type> {
    let schema = kinds.schema(gvk)?;
    // A schema the API server cannot type (no `type` at its root) types as `dyn`.
    Some(decl_type(&schema, true, &type_name(gvk), behaviour.naming).unwrap_or(Type::Dyn))
}

/// The paramKind's group, version and kind, or `None` when the policy has none or its
/// apiVersion does not parse (`schema.ParseGroupVersion`).
fn params_gvk(policy: &Policy) -> Option<Gvk> {
    let pk = policy.spec.param_kind.as_ref()?;
    let (group, version) = match pk.api_version.split_once('/') {
        None => ("", pk.api_version.as_str()),
        Some((_, v)) if v.contains('/') => return None,
        Some((g, v)) => (g, v),
    };
    let gvk = Gvk {
        group: group.to_string(),
        version: version.to_string(),
        kind: pk.kind.clone(),
    };
    // An empty apiVersion and kind is the empty GVK: no params.
    (!(gvk.version.is_empty() && gvk.group.is_empty() && gvk.kind.is_empty())).then_some(gvk)
}

/// Type-checks one policy against `kinds` as the API server of Kubernetes 1.`version`.
pub(crate) fn lint_policy(policy: &Policy, kinds: &Kinds, version: u16) -> PolicyLint {
    let behaviour = Behaviour::of(version);
    let mut checked = Vec::new();
    let mut unresolved = Vec::new();
    let mut types = Vec::new();
    for gvk in types_to_check(policy, kinds) {
        match kind_type(kinds, &gvk, behaviour) {
            Some(t) => {
                checked.push(gvk);
                types.push(t);
            }
            None => unresolved.push(gvk),
        }
    }
    let params_gvk = params_gvk(policy);
    let params_type = params_gvk
        .as_ref()
        .and_then(|g| kind_type(kinds, g, behaviour));
    let has_params = match (&params_gvk, &params_type) {
        (None, _) => false,
        (Some(_), Some(_)) => true,
        (Some(_), None) => behaviour.params_without_schema,
    };
    let params_type = params_type.unwrap_or(Type::Dyn);

    let mut warnings = Vec::new();
    // One environment per kind, with the policy's variables compiled in it.
    let envs: Vec<celgate_cel::Env> = types
        .iter()
        .map(|object| env_for(policy, behaviour.version, object, has_params, &params_type))
        .collect();
    let mut check = |field_ref: String, expression: &str| {
        let blocks: Vec<String> = checked
            .iter()
            .zip(&envs)
            .filter_map(|(gvk, env)| env.check(expression).err().map(|e| format!("{gvk}: {e}\n")))
            .collect();
        if !blocks.is_empty() {
            warnings.push(ExpressionWarning {
                field_ref,
                warning: blocks.join("\n"),
            });
        }
    };
    for (i, v) in policy.spec.validations.iter().enumerate() {
        check(format!("spec.validations[{i}].expression"), &v.expression);
        if let Some(m) = v.message_expression.as_deref().filter(|m| !m.is_empty()) {
            check(format!("spec.validations[{i}].messageExpression"), m);
        }
    }
    PolicyLint {
        kind: PolicyKind::Validating,
        name: policy.metadata.name.clone(),
        checked,
        unresolved,
        warnings,
    }
}

/// The environment the API server type-checks a policy's expressions in for one kind: the
/// VAP variables with `object`/`oldObject` typed, `authorizer` declared for every
/// expression (messageExpressions included, as in-tree's type checker does), and
/// `variables` typed by compiling each variable in turn (one that fails is `dyn`; its
/// error is not reported).
fn env_for(
    policy: &Policy,
    version: u16,
    object: &Type,
    has_params: bool,
    params: &Type,
) -> celgate_cel::Env {
    let decls = Decls {
        params: has_params,
        authorizer: true,
    };
    let mut fields: Vec<(String, Type)> = Vec::new();
    for v in &policy.spec.variables {
        let (mut env, _) = vap_env_typed(version, decls, object.clone(), params.clone());
        env.declare_lazy("variables", fields.clone());
        let ty = env.check(&v.expression).unwrap_or(Type::Dyn);
        fields.push((v.name.clone(), ty));
    }
    let (mut env, _) = vap_env_typed(version, decls, object.clone(), params.clone());
    env.declare_lazy("variables", fields);
    env
}

impl PolicyLint {
    /// How the reports name the policy: by name, a mutating one with its kind (a validating
    /// and a mutating policy may share a name).
    fn label(&self) -> String {
        match self.kind {
            PolicyKind::Validating => self.name.clone(),
            PolicyKind::Mutating => format!("{} (MutatingAdmissionPolicy)", self.name),
        }
    }
}

/// The text report: per policy, each warning under its field, or what was checked.
pub fn render_text(results: &[PolicyLint]) -> String {
    let mut out = String::new();
    for r in results {
        let name = r.label();
        if r.warnings.is_empty() {
            let what = if r.checked.is_empty() {
                "not type-checked: no kind with a schema in its matchConstraints".to_string()
            } else {
                format!("no warnings ({})", gvk_list(&r.checked))
            };
            out.push_str(&format!("{name}: {what}\n"));
        }
        for w in &r.warnings {
            out.push_str(&format!("{name}: {}:\n", w.field_ref));
            for line in w.warning.trim_end_matches('\n').lines() {
                if !line.is_empty() {
                    out.push_str("    ");
                    out.push_str(line);
                }
                out.push('\n');
            }
        }
        if !r.unresolved.is_empty() {
            out.push_str(&format!(
                "{name}: no schema, not checked: {}\n",
                gvk_list(&r.unresolved)
            ));
        }
    }
    let warnings: usize = results.iter().map(|r| r.warnings.len()).sum();
    let policies = results.iter().filter(|r| !r.warnings.is_empty()).count();
    out.push_str(&format!(
        "{warnings} warning{} in {policies} of {} polic{}\n",
        if warnings == 1 { "" } else { "s" },
        results.len(),
        if results.len() == 1 { "y" } else { "ies" }
    ));
    out
}

fn gvk_list(gvks: &[Gvk]) -> String {
    gvks.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The JSON report: one object per policy and line, with the status the API server would
/// write (`typeChecking: {}` when there is no warning) and the kinds checked; a mutating
/// policy's line also has `"kind": "MutatingAdmissionPolicy"`.
pub fn render_json(results: &[PolicyLint]) -> String {
    results
        .iter()
        .map(|r| {
            let mut tc = serde_json::Map::new();
            if !r.warnings.is_empty() {
                tc.insert(
                    "expressionWarnings".into(),
                    serde_json::to_value(&r.warnings).unwrap_or_default(),
                );
            }
            let kinds = |g: &[Gvk]| g.iter().map(ToString::to_string).collect::<Vec<_>>();
            let mut line = serde_json::json!({
                "policy": r.name,
                "typeChecking": tc,
                "checked": kinds(&r.checked),
                "noSchema": kinds(&r.unresolved),
            });
            if r.kind == PolicyKind::Mutating {
                line["kind"] = "MutatingAdmissionPolicy".into();
            }
            line.to_string() + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> Policy {
        serde_yaml_ng::from_str(yaml).unwrap()
    }

    const DEPLOYMENTS: &str = "matchConstraints: {resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]}";

    #[test]
    fn types_to_check_follows_in_tree_rules() {
        let k = Kinds::default();
        let p = policy(
            r#"
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], resources: [deployments, "pods/*", "*"]}
    - {apiGroups: [""], apiVersions: [v1], resources: [pods]}
    - {apiGroups: [apps], apiVersions: ["*"], resources: [replicasets]}
    - {apiGroups: ["*"], apiVersions: [v1], resources: [services]}
"#,
        );
        let got: Vec<String> = types_to_check(&p, &k)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(got, ["/v1, Kind=Pod", "apps/v1, Kind=Deployment"]);
    }

    #[test]
    fn at_most_ten_kinds_counting_repeats() {
        let k = Kinds::default();
        // 11 resources naming the same kind... and then more kinds after it.
        let p = policy(
            r#"
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [pod, pods, pod, pods, pod, pods, pod, pods, pod, pods]}
    - {apiGroups: [""], apiVersions: [v1], resources: [services]}
"#,
        );
        let got = types_to_check(&p, &k);
        assert_eq!(got.len(), 1, "{got:?}");
    }

    #[test]
    fn a_typo_and_a_wrong_comparison_warn_with_the_kind() {
        let k = Kinds::default();
        let p = policy(&format!(
            r#"
metadata: {{name: p}}
spec:
  {DEPLOYMENTS}
  validations:
  - expression: object.spec.replica > 1
  - expression: object.spec.replicas == 'x'
    messageExpression: "'n=' + string(object.spec.replicas)"
"#
        ));
        let r = lint_policy(&p, &k, 32);
        assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
        assert_eq!(r.warnings[0].field_ref, "spec.validations[0].expression");
        assert_eq!(
            r.warnings[0].warning,
            "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replica'\n | object.spec.replica > 1\n | ...........^\n"
        );
        assert!(r.warnings[1]
            .warning
            .contains("found no matching overload for '_==_' applied to '(int, string)'"));
    }

    #[test]
    fn a_failing_variable_is_dyn_and_not_reported() {
        let k = Kinds::default();
        let p = policy(&format!(
            r#"
metadata: {{name: p}}
spec:
  {DEPLOYMENTS}
  variables:
  - {{name: bad, expression: "object.spec.replicas == 'str'"}}
  - {{name: n, expression: "object.spec.replicas"}}
  validations:
  - expression: variables.bad == object.spec.replicas
  - expression: variables.n == 'x'
"#
        ));
        let r = lint_policy(&p, &k, 32);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert_eq!(r.warnings[0].field_ref, "spec.validations[1].expression");
    }

    #[test]
    fn params_without_a_schema_depend_on_the_version() {
        let k = Kinds::default();
        let p = policy(&format!(
            r#"
metadata: {{name: p}}
spec:
  paramKind: {{apiVersion: example.com/v1, kind: Limits}}
  {DEPLOYMENTS}
  validations:
  - expression: object.spec.replicas <= params.max
"#
        ));
        let old = lint_policy(&p, &k, 32);
        assert_eq!(old.warnings.len(), 1);
        assert!(old.warnings[0]
            .warning
            .contains("undeclared reference to 'params'"));
        assert!(lint_policy(&p, &k, 36).warnings.is_empty());
    }

    #[test]
    fn typed_params_from_a_built_in_kind() {
        let k = Kinds::default();
        let p = policy(&format!(
            r#"
metadata: {{name: p}}
spec:
  paramKind: {{apiVersion: v1, kind: ConfigMap}}
  {DEPLOYMENTS}
  validations:
  - expression: string(object.spec.replicas) == params.data.max
  - expression: object.spec.replicas <= params.spec.max
"#
        ));
        let r = lint_policy(&p, &k, 32);
        assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
        assert!(r.warnings[0].warning.contains("undefined field 'spec'"));
    }

    #[test]
    fn no_schema_no_check() {
        let k = Kinds::default();
        let p = policy(
            r#"
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [example.com], apiVersions: [v1], resources: [widgets]}]}
  validations:
  - expression: object.spec.replica > 1
"#,
        );
        let r = lint_policy(&p, &k, 32);
        assert!(r.warnings.is_empty());
        assert!(r.checked.is_empty());
    }
}
