//! The MutatingAdmissionPolicy and binding objects (`admissionregistration.k8s.io` v1alpha1
//! as Kubernetes 1.32 serves them; v1beta1 and v1 have the same shape), as deserialized from
//! the API or from files (`k8s.io/api/admissionregistration/v1alpha1/types.go`). Defaults are
//! applied when compiling, not here, so validation can tell a missing field from its default.

use serde::{Deserialize, Serialize};

use super::binding::ParamRef;
use super::meta::ObjectMeta;
use super::policy::{MatchCondition, ParamKind, Variable};
use super::rules::MatchResources;

/// One CEL expression field (`applyConfiguration` and `jsonPatch` hold only this).
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct ExpressionField {
    /// `expression`.
    pub expression: String,
}

/// One mutation (`spec.mutations[]`): a patch type and the expression of that type.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct Mutation {
    /// `patchType`: `ApplyConfiguration` or `JSONPatch`.
    pub patch_type: String,
    /// `applyConfiguration`.
    pub apply_configuration: Option<ExpressionField>,
    /// `jsonPatch`.
    pub json_patch: Option<ExpressionField>,
}

/// A MutatingAdmissionPolicy's `spec`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingPolicySpec {
    /// `paramKind`.
    pub param_kind: Option<ParamKind>,
    /// `matchConstraints`.
    pub match_constraints: Option<MatchResources>,
    /// `variables`.
    pub variables: Vec<Variable>,
    /// `mutations`.
    pub mutations: Vec<Mutation>,
    /// `failurePolicy`.
    pub failure_policy: Option<String>,
    /// `matchConditions`.
    pub match_conditions: Vec<MatchCondition>,
    /// `reinvocationPolicy`: `Never` or `IfNeeded` (required, no default).
    pub reinvocation_policy: Option<String>,
}

/// A MutatingAdmissionPolicy, as stored.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct MutatingPolicy {
    /// Its name (and what else a snapshot reads of its metadata).
    pub metadata: ObjectMeta,
    /// What it matches and how it mutates.
    pub spec: MutatingPolicySpec,
}

/// A MutatingAdmissionPolicyBinding's `spec`.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct MutatingBindingSpec {
    /// `policyName`.
    pub policy_name: String,
    /// `paramRef`.
    pub param_ref: Option<ParamRef>,
    /// `matchResources`.
    pub match_resources: Option<MatchResources>,
}

/// A MutatingAdmissionPolicyBinding, as stored.
#[derive(Debug, Clone, Default, Deserialize, Serialize, PartialEq)]
#[serde(default)]
pub struct MutatingBinding {
    /// Its name.
    pub metadata: ObjectMeta,
    /// Which policy it binds, with which params, to which resources.
    pub spec: MutatingBindingSpec,
}
