//! The ValidatingAdmissionPolicyBinding object and its param reference.

use serde::{Deserialize, Serialize};

use super::meta::{LabelSelector, ObjectMeta};
use super::rules::MatchResources;

/// Which params a binding evaluates its policy with (`spec.paramRef`).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ParamRef {
    /// `name`.
    pub name: Option<String>,
    /// `namespace`.
    pub namespace: Option<String>,
    /// `selector`.
    pub selector: Option<LabelSelector>,
    /// `parameterNotFoundAction`.
    pub parameter_not_found_action: Option<String>,
}

/// A binding's `spec`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct BindingSpec {
    /// `policyName`.
    pub policy_name: String,
    /// `paramRef`.
    pub param_ref: Option<ParamRef>,
    /// `matchResources`.
    pub match_resources: Option<MatchResources>,
    /// `validationActions`.
    pub validation_actions: Vec<String>,
}

/// A ValidatingAdmissionPolicyBinding (`admissionregistration.k8s.io/v1`), as stored.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct Binding {
    /// Its name (and what else a snapshot reads of its metadata).
    pub metadata: ObjectMeta,
    /// Which policy it binds, with which params, to which resources, with which actions.
    pub spec: BindingSpec,
}
