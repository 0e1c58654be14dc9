//! The ValidatingAdmissionPolicy object and its spec's parts.

use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;
use super::rules::MatchResources;

/// The kind of a policy's params (`spec.paramKind`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamKind {
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
}

/// One CEL validation (`spec.validations[]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Validation {
    /// `expression`.
    pub expression: String,
    /// `message`.
    pub message: Option<String>,
    /// `reason`.
    pub reason: Option<String>,
    /// `messageExpression`.
    pub message_expression: Option<String>,
}

/// One audit annotation (`spec.auditAnnotations[]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditAnnotation {
    /// `key`.
    pub key: String,
    /// `valueExpression`.
    pub value_expression: String,
}

/// One match condition (`spec.matchConditions[]`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MatchCondition {
    /// `name`.
    pub name: String,
    /// `expression`.
    pub expression: String,
}

/// One variable (`spec.variables[]`), `variables.<name>` in later expressions.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Variable {
    /// `name`.
    pub name: String,
    /// `expression`.
    pub expression: String,
}

/// A policy's `spec`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicySpec {
    /// `paramKind`.
    pub param_kind: Option<ParamKind>,
    /// `matchConstraints`.
    pub match_constraints: Option<MatchResources>,
    /// `validations`.
    pub validations: Vec<Validation>,
    /// `failurePolicy`.
    pub failure_policy: Option<String>,
    /// `auditAnnotations`.
    pub audit_annotations: Vec<AuditAnnotation>,
    /// `matchConditions`.
    pub match_conditions: Vec<MatchCondition>,
    /// `variables`.
    pub variables: Vec<Variable>,
}

/// A ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`), as stored.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Policy {
    /// Its name (and what else a snapshot reads of its metadata).
    pub metadata: ObjectMeta,
    /// What it matches and validates.
    pub spec: PolicySpec,
}
