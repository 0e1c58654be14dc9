//! The ValidatingAdmissionPolicy object and its spec's parts.

use serde::{Deserialize, Serialize};

use super::meta::ObjectMeta;
use super::rules::MatchResources;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamKind {
    pub api_version: String,
    pub kind: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Validation {
    pub expression: String,
    pub message: Option<String>,
    pub reason: Option<String>,
    pub message_expression: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct AuditAnnotation {
    pub key: String,
    pub value_expression: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MatchCondition {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Variable {
    pub name: String,
    pub expression: String,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct PolicySpec {
    pub param_kind: Option<ParamKind>,
    pub match_constraints: Option<MatchResources>,
    pub validations: Vec<Validation>,
    pub failure_policy: Option<String>,
    pub audit_annotations: Vec<AuditAnnotation>,
    pub match_conditions: Vec<MatchCondition>,
    pub variables: Vec<Variable>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Policy {
    pub metadata: ObjectMeta,
    pub spec: PolicySpec,
}
