//! The ValidatingAdmissionPolicyBinding object and its param reference.

use serde::{Deserialize, Serialize};

use super::meta::{LabelSelector, ObjectMeta};
use super::rules::MatchResources;

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamRef {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub selector: Option<LabelSelector>,
    pub parameter_not_found_action: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct BindingSpec {
    pub policy_name: String,
    pub param_ref: Option<ParamRef>,
    pub match_resources: Option<MatchResources>,
    pub validation_actions: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Binding {
    pub metadata: ObjectMeta,
    pub spec: BindingSpec,
}
