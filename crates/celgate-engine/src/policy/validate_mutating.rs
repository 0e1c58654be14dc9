//! The API server's validation of MutatingAdmissionPolicy and binding objects
//! (`pkg/apis/admissionregistration/validation`, the mutating half), worded as the recorded
//! refusals of `../shared/map-oracle-sample` (`policy-create.json`). What the kinds share
//! with ValidatingAdmissionPolicy (names, paramKind, matchConstraints, matchConditions,
//! variables, paramRef) is checked by the same functions as for VAP.

use super::validate::{
    binding_parts, blank, conditions_and_variables, match_constraints, object_name, param_kind,
    FieldErrors,
};
use crate::model::{MatchResources, MutatingBinding, MutatingPolicy};

/// The operations a mutating policy or binding may name: the plugin never sees DELETE.
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "UPDATE"];
const PATCH_TYPES: &[&str] = &["ApplyConfiguration", "JSONPatch"];
const REINVOCATION: &[&str] = &["IfNeeded", "Never"];

/// Every operation outside [`OPERATIONS`], reported (as in-tree) at
/// `<path>.resourceRules.operations`, without the rule's index.
fn mutating_operations(e: &mut FieldErrors, path: &str, m: &MatchResources) {
    for rule in &m.resource_rules {
        for op in &rule.operations {
            if !OPERATIONS.contains(&op.as_str()) {
                e.unsupported(&format!("{path}.resourceRules.operations"), op, OPERATIONS);
            }
        }
    }
}

/// Validates a MutatingAdmissionPolicy; empty when valid.
pub fn validate_mutating_policy(p: &MutatingPolicy) -> FieldErrors {
    let mut e = FieldErrors::default();
    object_name(&mut e, &p.metadata.name);
    let spec = &p.spec;
    if let Some(pk) = &spec.param_kind {
        param_kind(&mut e, pk);
    }
    match_constraints(&mut e, spec.match_constraints.as_ref());
    if let Some(m) = &spec.match_constraints {
        mutating_operations(&mut e, "spec.matchConstraints", m);
    }
    conditions_and_variables(&mut e, &spec.match_conditions, &spec.variables);
    if spec.mutations.is_empty() {
        e.required("spec.mutations", "mutations must contain at least one item");
    }
    for (i, m) in spec.mutations.iter().enumerate() {
        let path = format!("spec.mutations[{i}]");
        let (this, other, this_name, other_name) = match m.patch_type.as_str() {
            "" => {
                e.required(&format!("{path}.patchType"), "");
                continue;
            }
            "ApplyConfiguration" => (
                &m.apply_configuration,
                &m.json_patch,
                "applyConfiguration",
                "jsonPatch",
            ),
            "JSONPatch" => (
                &m.json_patch,
                &m.apply_configuration,
                "jsonPatch",
                "applyConfiguration",
            ),
            other => {
                e.unsupported(&format!("{path}.patchType"), other, PATCH_TYPES);
                continue;
            }
        };
        match this {
            None => e.required(
                &format!("{path}.{this_name}"),
                &format!("must be specified when patchType is {}", m.patch_type),
            ),
            Some(f) if blank(&f.expression) => {
                e.required(&format!("{path}.{this_name}.expression"), "")
            }
            Some(_) => {}
        }
        if other.is_some() {
            e.invalid(
                &format!("{path}.{other_name}"),
                &format!("{{{other_name}}}"),
                &format!("must not be specified when patchType is {}", m.patch_type),
            );
        }
    }
    if let Some(fp) = &spec.failure_policy {
        if fp != "Fail" && fp != "Ignore" {
            e.unsupported("spec.failurePolicy", fp, &["Fail", "Ignore"]);
        }
    }
    match spec.reinvocation_policy.as_deref() {
        None | Some("") => e.required("spec.reinvocationPolicy", ""),
        Some(r) if !REINVOCATION.contains(&r) => {
            e.unsupported("spec.reinvocationPolicy", r, REINVOCATION)
        }
        Some(_) => {}
    }
    e
}

/// Validates a MutatingAdmissionPolicyBinding; empty when valid.
pub fn validate_mutating_binding(b: &MutatingBinding) -> FieldErrors {
    let mut e = FieldErrors::default();
    let spec = &b.spec;
    binding_parts(
        &mut e,
        &b.metadata.name,
        &spec.policy_name,
        spec.param_ref.as_ref(),
        spec.match_resources.as_ref(),
    );
    if let Some(m) = &spec.match_resources {
        mutating_operations(&mut e, "spec.matchResources", m);
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml: &str) -> Vec<String> {
        let p: MutatingPolicy = serde_yaml_ng::from_str(yaml).unwrap();
        validate_mutating_policy(&p)
            .0
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const RULES: &str = "matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}";

    #[test]
    fn a_valid_policy_passes() {
        let yaml = format!("metadata: {{name: p}}\nspec:\n  {RULES}\n  reinvocationPolicy: Never\n  mutations: [{{patchType: JSONPatch, jsonPatch: {{expression: '[]'}}}}]");
        assert_eq!(policy(&yaml), Vec::<String>::new());
    }

    /// The recorded refusals (map-oracle-sample 214, 216, 218 to 224).
    #[test]
    fn recorded_refusals() {
        let with = |spec: &str| policy(&format!("metadata: {{name: p}}\nspec:\n{spec}"));
        assert_eq!(
            with(&format!(
                "  {RULES}\n  mutations: [{{patchType: JSONPatch, jsonPatch: {{expression: x}}}}]"
            )),
            ["spec.reinvocationPolicy: Required value"]
        );
        assert_eq!(
            with(&format!("  {RULES}\n  reinvocationPolicy: Never")),
            ["spec.mutations: Required value: mutations must contain at least one item"]
        );
        assert_eq!(
            with(&format!("  {RULES}\n  reinvocationPolicy: Never\n  mutations: [{{patchType: JSONPatch, applyConfiguration: {{expression: x}}}}]")),
            [
                "spec.mutations[0].jsonPatch: Required value: must be specified when patchType is JSONPatch",
                "spec.mutations[0].applyConfiguration: Invalid value: \"{applyConfiguration}\": must not be specified when patchType is JSONPatch"
            ]
        );
        assert_eq!(
            with(&format!("  {RULES}\n  reinvocationPolicy: Never\n  mutations: [{{patchType: ApplyConfiguration, applyConfiguration: {{expression: x}}, jsonPatch: {{expression: y}}}}]")),
            ["spec.mutations[0].jsonPatch: Invalid value: \"{jsonPatch}\": must not be specified when patchType is ApplyConfiguration"]
        );
        assert_eq!(
            with(&format!("  {RULES}\n  reinvocationPolicy: Never\n  mutations: [{{applyConfiguration: {{expression: x}}}}]")),
            ["spec.mutations[0].patchType: Required value"]
        );
        assert_eq!(
            with(&format!("  {RULES}\n  reinvocationPolicy: Never\n  mutations: [{{patchType: ApplyConfiguration, applyConfiguration: {{expression: ' '}}}}]")),
            ["spec.mutations[0].applyConfiguration.expression: Required value"]
        );
        assert_eq!(
            with("  reinvocationPolicy: Never\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: x}}]"),
            ["spec.matchConstraints: Required value"]
        );
        assert_eq!(
            with("  matchConstraints: {}\n  reinvocationPolicy: Never\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: x}}]"),
            ["spec.matchConstraints.resourceRules: Required value"]
        );
        assert_eq!(
            with("  matchConstraints: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [DELETE], resources: [pods]}]}\n  reinvocationPolicy: Never\n  mutations: [{patchType: JSONPatch, jsonPatch: {expression: x}}]"),
            ["spec.matchConstraints.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\""]
        );
    }

    #[test]
    fn bindings() {
        let binding = |yaml: &str| -> Vec<String> {
            let b: MutatingBinding = serde_yaml_ng::from_str(yaml).unwrap();
            validate_mutating_binding(&b)
                .0
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        assert_eq!(
            binding("metadata: {name: b}\nspec: {}"),
            ["spec.policyName: Required value"]
        );
        assert_eq!(
            binding("metadata: {name: b}\nspec:\n  policyName: p\n  matchResources: {resourceRules: [{apiGroups: [''], apiVersions: [v1], operations: [DELETE], resources: [pods]}]}"),
            ["spec.matchResources.resourceRules.operations: Unsupported value: \"DELETE\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"UPDATE\""]
        );
        assert_eq!(
            binding("metadata: {name: b}\nspec: {policyName: p, paramRef: {name: x}}"),
            ["spec.paramRef.parameterNotFoundAction: Required value"]
        );
    }
}
