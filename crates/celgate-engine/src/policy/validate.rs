//! The API server's validation of policy and binding objects (§7,
//! `pkg/apis/admissionregistration/validation`). Objects read from the API have passed it;
//! objects read from files have not, so celgate applies it itself. Messages follow
//! Kubernetes' field errors: `spec.failurePolicy: Unsupported value: "x": supported values:
//! "Fail", "Ignore"`.

use std::collections::BTreeSet;

use crate::matching::selector::{Selector, SelectorError};
use crate::model::{
    Binding, LabelSelector, MatchCondition, MatchResources, NamedRule, ParamKind, ParamRef, Policy,
    Variable,
};
use celgate_cel::apimachinery::names;
use celgate_cel::lexer::is_reserved;

/// One field of a policy or binding that fails the API server's validation, printed as
/// Kubernetes prints a `field.Error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldError {
    /// A field that must be set is missing or empty; `detail` may be empty.
    #[error("{path}: Required value{}", colon_then(detail))]
    Required { path: String, detail: String },
    /// A field's value is malformed.
    #[error("{path}: Invalid value: {value:?}: {detail}")]
    Invalid {
        path: String,
        value: String,
        detail: String,
    },
    /// A list with too many items, which Kubernetes reports as invalid without its value.
    #[error("{path}: Invalid value: {detail}")]
    InvalidLength { path: String, detail: String },
    /// A value outside the field's enumeration.
    #[error(
        "{path}: Unsupported value: {value:?}: supported values: {}",
        quoted(supported)
    )]
    Unsupported {
        path: String,
        value: String,
        supported: &'static [&'static str],
    },
    /// A value that must be unique in its list repeats.
    #[error("{path}: Duplicate value: {value:?}")]
    Duplicate { path: String, value: String },
    /// A field that must not be set in this combination.
    #[error("{path}: Forbidden: {detail}")]
    Forbidden { path: String, detail: String },
    /// A list with more items than allowed.
    #[error("{path}: Too many: {count}: must have at most {max} items")]
    TooMany {
        path: String,
        count: usize,
        max: usize,
    },
    /// A label selector that does not compile.
    #[error("{path}: {source}")]
    Selector {
        path: String,
        #[source]
        source: SelectorError,
    },
}

/// `: detail`, or nothing for an empty detail.
fn colon_then(detail: &str) -> String {
    if detail.is_empty() {
        String::new()
    } else {
        format!(": {detail}")
    }
}

/// `"a", "b"`: a list of supported values as Kubernetes prints them.
fn quoted(values: &[&str]) -> String {
    let list: Vec<String> = values.iter().map(|s| format!("{s:?}")).collect();
    list.join(", ")
}

/// All that is wrong with one policy or binding, in the order the API server checks it;
/// printed joined with `; ` (the configuration error requests see).
#[derive(Debug, Clone, PartialEq, Eq, Default, thiserror::Error)]
#[error("{}", join(.0))]
pub struct FieldErrors(pub Vec<FieldError>);

fn join(errors: &[FieldError]) -> String {
    let texts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    texts.join("; ")
}

impl FieldErrors {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(super) fn required(&mut self, path: &str, detail: &str) {
        self.0.push(FieldError::Required {
            path: path.to_string(),
            detail: detail.to_string(),
        });
    }

    /// An expression the API server refuses, with its compile error as the detail.
    pub fn expression(&mut self, path: String, expression: &str, detail: String) {
        self.0.push(FieldError::Invalid {
            path,
            value: expression.to_string(),
            detail,
        });
    }

    pub(super) fn invalid(&mut self, path: &str, value: &str, detail: &str) {
        self.0.push(FieldError::Invalid {
            path: path.to_string(),
            value: value.to_string(),
            detail: detail.to_string(),
        });
    }

    pub(super) fn unsupported(
        &mut self,
        path: &str,
        value: &str,
        supported: &'static [&'static str],
    ) {
        self.0.push(FieldError::Unsupported {
            path: path.to_string(),
            value: value.to_string(),
            supported,
        });
    }

    pub(super) fn duplicate(&mut self, path: &str, value: &str) {
        self.0.push(FieldError::Duplicate {
            path: path.to_string(),
            value: value.to_string(),
        });
    }

    pub(super) fn forbidden(&mut self, path: &str, detail: &str) {
        self.0.push(FieldError::Forbidden {
            path: path.to_string(),
            detail: detail.to_string(),
        });
    }

    pub(super) fn dns_subdomain(&mut self, path: &str, value: &str) {
        for e in names::dns1123_subdomain(value) {
            self.invalid(path, value, &e);
        }
    }
}

pub(super) fn blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Validates a ValidatingAdmissionPolicy; empty when valid.
pub fn validate_policy(p: &Policy) -> FieldErrors {
    let mut e = FieldErrors::default();
    object_name(&mut e, &p.metadata.name);
    let spec = &p.spec;
    if let Some(fp) = &spec.failure_policy {
        if fp != "Fail" && fp != "Ignore" {
            e.unsupported("spec.failurePolicy", fp, &["Fail", "Ignore"]);
        }
    }
    if let Some(pk) = &spec.param_kind {
        param_kind(&mut e, pk);
    }
    match_constraints(&mut e, spec.match_constraints.as_ref());
    conditions_and_variables(&mut e, &spec.match_conditions, &spec.variables);
    if spec.validations.is_empty() && spec.audit_annotations.is_empty() {
        e.required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        );
        e.required(
            "spec.auditAnnotations",
            "validations or auditAnnotations must contain at least one item",
        );
    }
    for (i, v) in spec.validations.iter().enumerate() {
        let path = format!("spec.validations[{i}]");
        if blank(&v.expression) {
            e.required(&format!("{path}.expression"), "expression is not specified");
        }
        if v.message_expression.as_deref().is_some_and(blank) {
            e.required(
                &format!("{path}.messageExpression"),
                "must be non-empty if specified",
            );
        }
        if let Some(m) = &v.message {
            if blank(m) {
                e.required(
                    &format!("{path}.message"),
                    "message must be non-empty if specified",
                );
            } else if m.contains('\n') || m.contains('\r') {
                e.invalid(
                    &format!("{path}.message"),
                    m,
                    "message must not contain line breaks",
                );
            }
        }
        if let Some(r) = &v.reason {
            if !matches!(
                r.as_str(),
                "Forbidden" | "Invalid" | "RequestEntityTooLarge"
            ) {
                e.unsupported(
                    &format!("{path}.reason"),
                    r,
                    &["Forbidden", "Invalid", "RequestEntityTooLarge"],
                );
            }
        }
    }
    if spec.audit_annotations.len() > 20 {
        e.0.push(FieldError::InvalidLength {
            path: "spec.auditAnnotations".into(),
            detail: "must not have more than 20 auditAnnotations".into(),
        });
    }
    let mut keys = BTreeSet::new();
    for (i, a) in spec.audit_annotations.iter().enumerate() {
        let path = format!("spec.auditAnnotations[{i}]");
        if p.metadata.name.is_empty() {
            e.required(
                &format!("{path}.key"),
                "requires metadata.name be non-empty",
            );
        } else if a.key.is_empty()
            || a.key.contains('/')
            || !names::qualified_name(&format!("{}/{}", p.metadata.name, a.key)).is_empty()
        {
            e.invalid(
                &format!("{path}.key"),
                &a.key,
                "must be a valid qualified name part of <policy name>/<key>",
            );
        }
        if !keys.insert(a.key.clone()) {
            e.duplicate(&format!("{path}.key"), &a.key);
        }
        let trimmed = a.value_expression.trim();
        if trimmed.is_empty() {
            e.required(
                &format!("{path}.valueExpression"),
                "valueExpression is not specified",
            );
        } else if trimmed.len() > 5120 {
            e.required(
                &format!("{path}.valueExpression"),
                "must not exceed 5120 bytes in length",
            );
        }
    }
    e
}

/// `spec.paramKind` (validating and mutating policies alike).
pub(super) fn param_kind(e: &mut FieldErrors, pk: &ParamKind) {
    if pk.api_version.is_empty() {
        e.required("spec.paramKind.apiVersion", "");
    } else if pk.api_version.matches('/').count() > 1 {
        e.invalid(
            "spec.paramKind.apiVersion",
            &pk.api_version,
            "an apiVersion is of the form <group>/<version>",
        );
    } else {
        let (group, version) = pk
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &pk.api_version));
        if !group.is_empty() {
            e.dns_subdomain("spec.paramKind.apiVersion", group);
        }
        if version.is_empty() || !names::dns1035_label(version).is_empty() {
            e.invalid(
                "spec.paramKind.apiVersion",
                &pk.api_version,
                "the version must be a DNS-1035 label",
            );
        }
    }
    if pk.kind.is_empty() {
        e.required("spec.paramKind.kind", "");
    } else if !names::dns1035_label(&pk.kind.to_lowercase()).is_empty() {
        e.invalid(
            "spec.paramKind.kind",
            &pk.kind,
            "a kind must be a DNS-1035 label once lower-cased",
        );
    }
}

/// `spec.matchConstraints`: required, with resourceRules.
pub(super) fn match_constraints(e: &mut FieldErrors, m: Option<&MatchResources>) {
    match m {
        None => e.required("spec.matchConstraints", ""),
        Some(m) => {
            if m.resource_rules.is_empty() {
                e.required("spec.matchConstraints.resourceRules", "");
            }
            match_resources(e, "spec.matchConstraints", m);
        }
    }
}

/// `spec.matchConditions` and `spec.variables`: names and non-blank expressions.
pub(super) fn conditions_and_variables(
    e: &mut FieldErrors,
    match_conditions: &[MatchCondition],
    variables: &[Variable],
) {
    if match_conditions.len() > 64 {
        e.0.push(FieldError::TooMany {
            path: "spec.matchConditions".into(),
            count: match_conditions.len(),
            max: 64,
        });
    }
    let mut names = BTreeSet::new();
    for (i, c) in match_conditions.iter().enumerate() {
        let path = format!("spec.matchConditions[{i}]");
        if c.name.is_empty() {
            e.required(&format!("{path}.name"), "");
        } else {
            for err in names::qualified_name(&c.name) {
                e.invalid(&format!("{path}.name"), &c.name, &err);
            }
            if !names.insert(c.name.clone()) {
                e.duplicate(&format!("{path}.name"), &c.name);
            }
        }
        if blank(&c.expression) {
            e.required(&format!("{path}.expression"), "");
        }
    }
    for (i, v) in variables.iter().enumerate() {
        let path = format!("spec.variables[{i}]");
        let ident = v
            .name
            .chars()
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && v.name
                .chars()
                .all(|c| c == '_' || c.is_ascii_alphanumeric());
        if v.name.is_empty() {
            e.required(&format!("{path}.name"), "");
        } else if !ident
            || is_reserved(&v.name)
            || matches!(v.name.as_str(), "true" | "false" | "null" | "in")
        {
            e.invalid(
                &format!("{path}.name"),
                &v.name,
                "name is not a valid CEL identifier",
            );
        }
        if blank(&v.expression) {
            e.required(&format!("{path}.expression"), "");
        }
    }
}

pub(super) fn selector(e: &mut FieldErrors, path: &str, s: &Option<LabelSelector>) {
    if let Some(s) = s {
        if let Err(source) = Selector::compile(s) {
            e.0.push(FieldError::Selector {
                path: path.to_string(),
                source,
            });
        }
    }
}

fn match_resources(e: &mut FieldErrors, path: &str, m: &MatchResources) {
    if let Some(mp) = &m.match_policy {
        if mp != "Exact" && mp != "Equivalent" {
            e.unsupported(&format!("{path}.matchPolicy"), mp, &["Equivalent", "Exact"]);
        }
    }
    selector(
        e,
        &format!("{path}.namespaceSelector"),
        &m.namespace_selector,
    );
    selector(e, &format!("{path}.objectSelector"), &m.object_selector);
    for (i, r) in m.resource_rules.iter().enumerate() {
        rule(e, &format!("{path}.resourceRules[{i}]"), r);
    }
    for (i, r) in m.exclude_resource_rules.iter().enumerate() {
        rule(e, &format!("{path}.excludeResourceRules[{i}]"), r);
    }
}

fn star_alone(e: &mut FieldErrors, path: &str, list: &[String]) {
    if list.len() > 1 && list.iter().any(|x| x == "*") {
        e.invalid(
            path,
            &list.join(","),
            "if '*' is present, must not specify other values",
        );
    }
}

fn rule(e: &mut FieldErrors, path: &str, r: &NamedRule) {
    let mut seen = BTreeSet::new();
    for (i, n) in r.resource_names.iter().enumerate() {
        if n.is_empty() || n == "." || n == ".." || n.contains('/') || n.contains('%') {
            e.invalid(
                &format!("{path}.resourceNames[{i}]"),
                n,
                "must be a valid path segment name",
            );
        }
        if !seen.insert(n) {
            e.duplicate(&format!("{path}.resourceNames[{i}]"), n);
        }
    }
    if r.operations.is_empty() {
        e.required(&format!("{path}.operations"), "");
    }
    star_alone(e, &format!("{path}.operations"), &r.operations);
    for (i, op) in r.operations.iter().enumerate() {
        if !matches!(
            op.as_str(),
            "*" | "CREATE" | "UPDATE" | "DELETE" | "CONNECT"
        ) {
            e.unsupported(
                &format!("{path}.operations[{i}]"),
                op,
                &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"],
            );
        }
    }
    if r.api_groups.is_empty() {
        e.required(&format!("{path}.apiGroups"), "");
    }
    star_alone(e, &format!("{path}.apiGroups"), &r.api_groups);
    if r.api_versions.is_empty() {
        e.required(&format!("{path}.apiVersions"), "");
    }
    star_alone(e, &format!("{path}.apiVersions"), &r.api_versions);
    for (i, v) in r.api_versions.iter().enumerate() {
        if v.is_empty() {
            e.required(&format!("{path}.apiVersions[{i}]"), "");
        }
    }
    if r.resources.is_empty() {
        e.required(&format!("{path}.resources"), "");
    }
    let mut with_sub_star = BTreeSet::new();
    let mut star_with_sub = BTreeSet::new();
    for res in &r.resources {
        let (main, sub) = res.split_once('/').unwrap_or((res, ""));
        if sub == "*" {
            with_sub_star.insert(main);
        }
        if main == "*" && !sub.is_empty() {
            star_with_sub.insert(sub);
        }
    }
    let has_star = r.resources.iter().any(|x| x == "*");
    for (i, res) in r.resources.iter().enumerate() {
        let p = format!("{path}.resources[{i}]");
        if res.is_empty() {
            e.required(&p, "");
            continue;
        }
        let (main, sub) = res.split_once('/').unwrap_or((res, ""));
        if res == "*/*" && r.resources.len() > 1 {
            e.invalid(
                &p,
                res,
                "if '*/*' is present, must not specify other resources",
            );
        }
        if !sub.is_empty() && sub != "*" && with_sub_star.contains(main) {
            e.invalid(
                &p,
                res,
                &format!("if '{main}/*' is present, must not specify {res}"),
            );
        }
        if main != "*" && !sub.is_empty() && star_with_sub.contains(sub) {
            e.invalid(
                &p,
                res,
                &format!("if '*/{sub}' is present, must not specify {res}"),
            );
        }
        if has_star && sub.is_empty() && res != "*" {
            e.invalid(
                &p,
                res,
                "if '*' is present, must not specify other resources without subresources",
            );
        }
    }
    if let Some(s) = &r.scope {
        if !matches!(s.as_str(), "*" | "Cluster" | "Namespaced") {
            e.unsupported(&format!("{path}.scope"), s, &["*", "Cluster", "Namespaced"]);
        }
    }
}

/// Validates a ValidatingAdmissionPolicyBinding; empty when valid.
pub fn validate_binding(b: &Binding) -> FieldErrors {
    let mut e = FieldErrors::default();
    let spec = &b.spec;
    binding_parts(
        &mut e,
        &b.metadata.name,
        &spec.policy_name,
        spec.param_ref.as_ref(),
        spec.match_resources.as_ref(),
    );
    let actions = &spec.validation_actions;
    if actions.is_empty() {
        e.required(
            "spec.validationActions",
            "at least one validation action is required",
        );
    }
    let mut seen = BTreeSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !matches!(a.as_str(), "Deny" | "Warn" | "Audit") {
            e.unsupported(
                &format!("spec.validationActions[{i}]"),
                a,
                &["Audit", "Deny", "Warn"],
            );
        }
        if !seen.insert(a.as_str()) {
            e.duplicate(&format!("spec.validationActions[{i}]"), a);
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        e.invalid(
            "spec.validationActions",
            &actions.join(","),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        );
    }
    e
}

/// `metadata.name`: required, a DNS subdomain (every policy and binding kind).
pub(super) fn object_name(e: &mut FieldErrors, name: &str) {
    if name.is_empty() {
        e.required("metadata.name", "name or generateName is required");
    } else {
        e.dns_subdomain("metadata.name", name);
    }
}

/// What every binding kind checks, in the API server's order: its name, `spec.policyName`,
/// `spec.paramRef` and `spec.matchResources`.
pub(super) fn binding_parts(
    e: &mut FieldErrors,
    name: &str,
    policy_name: &str,
    paramref: Option<&ParamRef>,
    resources: Option<&MatchResources>,
) {
    object_name(e, name);
    if policy_name.is_empty() {
        e.required("spec.policyName", "");
    } else {
        e.dns_subdomain("spec.policyName", policy_name);
    }
    if let Some(pr) = paramref {
        param_ref(e, pr);
    }
    if let Some(m) = resources {
        match_resources(e, "spec.matchResources", m);
    }
}

/// `spec.paramRef` of a binding (validating and mutating alike).
fn param_ref(e: &mut FieldErrors, pr: &ParamRef) {
    match (&pr.name, &pr.selector) {
        (Some(_), Some(_)) => e.forbidden(
            "spec.paramRef.name",
            "name and selector are mutually exclusive",
        ),
        (None, None) => e.required("spec.paramRef", "one of name or selector must be specified"),
        (Some(n), None) if n.is_empty() || n.contains('/') => {
            e.invalid("spec.paramRef.name", n, "must be a valid path segment name")
        }
        _ => {}
    }
    selector(e, "spec.paramRef.selector", &pr.selector);
    match pr.parameter_not_found_action.as_deref() {
        None => e.required("spec.paramRef.parameterNotFoundAction", ""),
        Some("Allow" | "Deny") => {}
        Some(other) => e.unsupported(
            "spec.paramRef.parameterNotFoundAction",
            other,
            &["Allow", "Deny"],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(errors: FieldErrors) -> Vec<String> {
        errors.0.iter().map(ToString::to_string).collect()
    }

    fn policy(yaml: &str) -> Vec<String> {
        texts(validate_policy(&serde_yaml_ng::from_str(yaml).unwrap()))
    }

    fn binding(yaml: &str) -> Vec<String> {
        texts(validate_binding(&serde_yaml_ng::from_str(yaml).unwrap()))
    }

    const RULE: &str =
        "{apiGroups: [''], apiVersions: [v1], operations: [CREATE], resources: [pods]}";

    #[test]
    fn valid_objects_pass() {
        assert!(policy(&format!("metadata: {{name: p}}\nspec: {{matchConstraints: {{resourceRules: [{RULE}]}}, validations: [{{expression: 'true'}}]}}")).is_empty());
        assert!(binding(
            "metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny, Audit]}"
        )
        .is_empty());
    }

    #[test]
    fn policy_errors() {
        let errs = policy(&format!(
            "metadata: {{name: p}}\nspec: {{failurePolicy: Bogus, matchConstraints: {{resourceRules: [{RULE}]}}, validations: [{{expression: ' ', reason: Unauthorized, message: \"a\\nb\"}}]}}"
        ));
        let all = errs.join("\n");
        assert!(
            all.contains("spec.failurePolicy: Unsupported value: \"Bogus\""),
            "{all}"
        );
        assert!(all.contains("expression is not specified"));
        assert!(all.contains("spec.validations[0].reason: Unsupported value: \"Unauthorized\""));
        assert!(all.contains("message must not contain line breaks"));
        assert!(
            policy("metadata: {name: p}\nspec: {validations: [{expression: 'true'}]}")
                .join("\n")
                .contains("spec.matchConstraints: Required value")
        );
        assert!(policy(&format!(
            "metadata: {{name: p}}\nspec: {{matchConstraints: {{resourceRules: [{RULE}]}}}}"
        ))
        .join("\n")
        .contains("at least one item"));
        let bad_rule = "{apiGroups: ['*', apps], apiVersions: [v1], operations: [CREATE, PATCH], resources: ['*', pods]}";
        let all = policy(&format!("metadata: {{name: p}}\nspec: {{matchConstraints: {{resourceRules: [{bad_rule}]}}, validations: [{{expression: 'true'}}]}}")).join("\n");
        assert!(all.contains("apiGroups"), "{all}");
        assert!(all.contains("Unsupported value: \"PATCH\""));
        assert!(all.contains("must not specify other resources without subresources"));
        let vars = policy(&format!("metadata: {{name: p}}\nspec: {{matchConstraints: {{resourceRules: [{RULE}]}}, variables: [{{name: '1x', expression: '1'}}, {{name: if, expression: '1'}}], validations: [{{expression: 'true'}}]}}"));
        assert_eq!(vars.len(), 2, "{vars:?}");
    }

    #[test]
    fn binding_errors() {
        let all =
            binding("metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny, Warn]}")
                .join("\n");
        assert!(all.contains("must not contain both Deny and Warn"), "{all}");
        assert!(binding("metadata: {name: b}\nspec: {policyName: p}")
            .join("\n")
            .contains("at least one validation action is required"));
        let all = binding("metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny], paramRef: {name: x, selector: {}}}").join("\n");
        assert!(all.contains("mutually exclusive"), "{all}");
        assert!(all.contains("parameterNotFoundAction: Required value"));
        assert!(binding(
            "metadata: {name: b}\nspec: {policyName: p, validationActions: [Deny, Deny]}"
        )
        .join("\n")
        .contains("Duplicate"));
    }
}
